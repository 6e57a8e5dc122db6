/* An engine's view, on the CUDA backend: the engine owns the context, the device memory
 * (cuMemAlloc) and the stream; its own kernel comes as PTX (examples/c/mix3.ptx). Ostinato records
 * a chain of that kernel, binds the engine's memory, replays on the engine's stream with a slot patched
 * per replay, and the result is checked against the arithmetic. Then the host cost of
 * ost_exec_replay for the 941-node chain of examples/add_one_serial_941.toml: bursts of 20 calls
 * after an idle GPU, median per call. Build: cc cuda_own.c $(pkg-config --cflags --libs ostinato)
 * -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda. Run from the repository root. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cuda.h>
#include <ostinato.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 4096
#define NODES 16

#define OK(call)                                                                                         \
    do {                                                                                                 \
        ost_status s_ = (call);                                                                          \
        if (s_ != OST_OK) { fprintf(stderr, "%d: %s: %s\n", __LINE__, ost_status_name((int)s_), ost_last_error()); return 1; } \
    } while (0)
#define CU(call)                                                                      \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%d: CUDA error %d\n", __LINE__, (int)r_); return 1; } \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr x;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(cuMemAlloc(&x, 4 * N));

    ost_graph *g = NULL;
    OK(ost_graph_new(&g));
    uint32_t buf, k, salt, node;
    OK(ost_graph_add_buffer(g, "x", 4 * N, &buf));
    const ost_param params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}, {"k", OST_U32}};
    OK(ost_graph_add_kernel(g, "mix3", params, 3, &k));
    OK(ost_graph_set_kernel_impl(g, k, "cuda", "examples/c/mix3.ptx", "mix3"));
    OK(ost_graph_add_slot(g, "k", ost_scalar_u32(0), &salt));
    ost_arg args[3] = {{0}};
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = buf; args[0].slice.len = OST_WHOLE;
    args[1].kind = OST_ARG_SCALAR; args[1].scalar = ost_scalar_u32(N);
    args[2].kind = OST_ARG_SLOT;   args[2].slot = salt;
    const uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
    for (int i = 0; i < NODES; i++) OK(ost_graph_add_launch(g, k, grid, block, 0, args, 3, NULL, 0, &node));
    ost_plan *plan = NULL;
    OK(ost_plan_compile(g, &plan));

    ost_exec_options o;
    memset(&o, 0, sizeof o);
    o.cuda_stream = (uint64_t)(uintptr_t)stream;
    ost_binding bind = {"x", (uint64_t)x, 4 * N};
    ost_exec *e = NULL;
    OK(ost_exec_create_ex(plan, "cuda", &o, &bind, 1, &e));

    static uint32_t host[N], got[N];
    for (uint32_t i = 0; i < N; i++) host[i] = i;
    CU(cuMemcpyHtoD(x, host, sizeof host));   /* the engine's own copy into its own memory */
    for (uint32_t r = 0; r < 50; r++) {
        uint32_t s = r * 0x9E3779B9u;
        OK(ost_exec_set_slot_u32(e, "k", s));
        OK(ost_exec_replay(e, 1));
        for (uint32_t i = 0; i < N; i++)
            for (int j = 0; j < NODES; j++) host[i] = host[i] * 3u + s;
    }
    OK(ost_exec_wait(e));
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(got, x, sizeof got));
    for (uint32_t i = 0; i < N; i++)
        if (got[i] != host[i]) { fprintf(stderr, "word %u: got %u want %u\n", i, got[i], host[i]); return 1; }
    printf("cuda_own.c: 50 patched replays of %d PTX nodes on the engine's memory and stream checked\n", NODES);
    OK(ost_exec_free(e));
    OK(ost_plan_free(plan));
    OK(ost_graph_free(g));

    /* The host cost of ost_exec_replay for a 941-node graph. */
    OK(ost_graph_load("examples/add_one_serial_941.toml", &g));
    OK(ost_plan_compile(g, &plan));
    OK(ost_exec_create(plan, "cuda", &e));
    double per_call[15];
    for (int round = 0; round < 15; round++) {
        OK(ost_exec_wait(e));
        double t0 = now_us();
        for (int c = 0; c < 20; c++) OK(ost_exec_replay(e, 1));
        per_call[round] = (now_us() - t0) / 20;
    }
    OK(ost_exec_wait(e));
    qsort(per_call, 15, sizeof per_call[0], cmp);
    printf("cuda_own.c: ost_exec_replay of the 941-node chain: %.2f us per call (median of 15 bursts of 20; min %.2f, max %.2f)\n",
           per_call[7], per_call[0], per_call[14]);
    OK(ost_exec_free(e));
    OK(ost_plan_free(plan));
    OK(ost_graph_free(g));
    CU(cuMemFree(x));
    CU(cuStreamDestroy(stream));
    CU(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
