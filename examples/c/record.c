/* Records a graph from C (a chain of `mix` nodes over two buffers, a slot patched per replay), plans
 * it, replays it on a backend ("host" by default, or argv[1]) and checks every word against the same
 * arithmetic done here. Also runs a host kernel written in C. Exit 0 on success. */
#include <ostinato.h>
#include <stdio.h>
#include <string.h>

#define N 256

#define CHECK(call)                                                                          \
    do {                                                                                     \
        ost_status s_ = (call);                                                              \
        if (s_ != OST_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, ost_status_name((int)s_), \
                    ost_last_error());                                                       \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

/* A host kernel in C: out[i] = out[i] * 2 + k for the first n words. */
static int32_t twice_plus(const ost_host_call *call, void *user) {
    (void)user;
    ost_scalar n, k;
    if (ost_host_call_scalar(call, 1, &n) != OST_OK || ost_host_call_scalar(call, 2, &k) != OST_OK) return 1;
    uint32_t words[N];
    if (n.bits > N) return ost_host_call_fail(call, "n is larger than the kernel's scratch"), 2;
    if (ost_host_call_read(call, 0, 0, words, 4 * n.bits) != OST_OK) return 3;
    for (uint64_t i = 0; i < n.bits; i++) words[i] = words[i] * 2u + (uint32_t)k.bits;
    return ost_host_call_write(call, 0, 0, words, 4 * n.bits) == OST_OK ? 0 : 4;
}

int main(int argc, char **argv) {
    const char *backend = argc > 1 ? argv[1] : "host";
    if (ost_abi_version() != OST_ABI_VERSION) { fprintf(stderr, "ABI mismatch\n"); return 1; }

    ost_graph *g = NULL;
    CHECK(ost_graph_new(&g));
    uint32_t out, inp, mix, twice, salt, node;
    CHECK(ost_graph_add_buffer(g, "out", 4 * N, &out));
    CHECK(ost_graph_add_buffer(g, "inp", 4 * N, &inp));
    const ost_param mix_params[] = {
        {"out", OST_PARAM_READ_WRITE}, {"inp", OST_PARAM_READ}, {"n_out", OST_U32}, {"n_in", OST_U32}, {"salt", OST_U32},
    };
    CHECK(ost_graph_add_kernel(g, "mix", mix_params, 5, &mix));
    CHECK(ost_graph_set_kernel_impl(g, mix, "host", "builtin:mix", NULL));
    CHECK(ost_graph_set_kernel_impl(g, mix, "cuda", "builtin:mix", NULL));
    CHECK(ost_graph_set_kernel_impl(g, mix, "vulkan", "builtin:mix", NULL));
    CHECK(ost_graph_set_kernel_impl(g, mix, "hsa", "builtin:mix", NULL));
    CHECK(ost_graph_add_slot(g, "salt", ost_scalar_u32(0), &salt));

    const uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
    ost_slice whole_out = {out, 0, OST_WHOLE}, whole_inp = {inp, 0, OST_WHOLE};
    ost_arg args[5] = {{0}};
    args[0].kind = OST_ARG_BUFFER; args[0].slice = whole_out;
    args[1].kind = OST_ARG_BUFFER; args[1].slice = whole_inp;
    args[2].kind = OST_ARG_SCALAR; args[2].scalar = ost_scalar_u32(N);
    args[3].kind = OST_ARG_SCALAR; args[3].scalar = ost_scalar_u32(N);
    args[4].kind = OST_ARG_SLOT;   args[4].slot = salt;
    CHECK(ost_graph_add_fill(g, whole_out, 1, NULL, 0, &node));
    for (int i = 0; i < 3; i++) CHECK(ost_graph_add_launch(g, mix, grid, block, 0, args, 5, NULL, 0, &node));
    /* A kernel written in C runs on the host backend only. */
    int host = strcmp(backend, "host") == 0;
    if (host) {
        const ost_param twice_params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}, {"k", OST_U32}};
        CHECK(ost_graph_add_kernel(g, "twice_plus", twice_params, 3, &twice));
        CHECK(ost_graph_set_host_kernel(g, twice, twice_plus, NULL));
        ost_arg targs[3] = {{0}};
        targs[0].kind = OST_ARG_BUFFER; targs[0].slice = whole_out;
        targs[1].kind = OST_ARG_SCALAR; targs[1].scalar = ost_scalar_u32(N);
        targs[2].kind = OST_ARG_SCALAR; targs[2].scalar = ost_scalar_u32(5);
        CHECK(ost_graph_add_launch(g, twice, grid, block, 0, targs, 3, NULL, 0, &node));
    }

    ost_plan *plan = NULL;
    CHECK(ost_plan_compile(g, &plan));
    CHECK(ost_graph_free(g));            /* the plan keeps what it needs */
    size_t edges = 0;
    CHECK(ost_plan_edge_count(plan, &edges));
    if (edges != (size_t)(host ? 4 : 3)) { fprintf(stderr, "%zu edges, want a chain\n", edges); return 1; }

    ost_exec *exec = NULL;
    CHECK(ost_exec_create(plan, backend, &exec));
    uint32_t in_words[N], got[N];
    for (uint32_t i = 0; i < N; i++) in_words[i] = i * 2654435761u;
    CHECK(ost_exec_write(exec, "inp", 0, in_words, sizeof in_words));
    for (uint32_t r = 0; r < 100; r++) {
        uint32_t s = r * 0x9E3779B9u;
        CHECK(ost_exec_set_slot_u32(exec, "salt", s));
        CHECK(ost_exec_replay(exec, 1));
        CHECK(ost_exec_read(exec, "out", 0, got, sizeof got));
        for (uint32_t i = 0; i < N; i++) {
            uint32_t want = 1;
            for (int k = 0; k < 3; k++) want = want * 3u + in_words[i] + s;
            if (host) want = want * 2u + 5u;
            if (got[i] != want) {
                fprintf(stderr, "replay %u word %u: got %u want %u\n", r, i, got[i], want);
                return 1;
            }
        }
    }
    /* Two more replays, traced: every node timed, the last replay's sums back (a chain the backend fused
     * is one bar: CUDA and Vulkan fuse the three 1-block mix nodes); the bytes are what two untraced
     * replays would leave. */
    ost_trace_summary sum;
    memset(&sum, 0, sizeof sum);
    CHECK(ost_exec_trace(exec, 2, NULL, NULL, &sum));
    if (sum.replays != 2 || sum.bars == 0 || sum.bars > (uint64_t)(host ? 5 : 4) || (host && sum.bars != 5) || sum.step_ns == 0 || sum.sum_ns == 0 || sum.busy_ns > sum.step_ns) {
        fprintf(stderr, "trace: %llu replays, %llu bars, step %llu ns, nodes %llu ns, busy %llu ns\n", (unsigned long long)sum.replays,
                (unsigned long long)sum.bars, (unsigned long long)sum.step_ns, (unsigned long long)sum.sum_ns, (unsigned long long)sum.busy_ns);
        return 1;
    }
    CHECK(ost_exec_read(exec, "out", 0, got, sizeof got));
    uint32_t s = 99u * 0x9E3779B9u; /* the salt the last replays ran with; each replay starts from the fill */
    for (uint32_t i = 0; i < N; i++) {
        uint32_t want = 1;
        for (int k = 0; k < 3; k++) want = want * 3u + in_words[i] + s;
        if (host) want = want * 2u + 5u;
        if (got[i] != want) {
            fprintf(stderr, "after the trace, word %u: got %u want %u\n", i, got[i], want);
            return 1;
        }
    }
    CHECK(ost_exec_free(exec));
    CHECK(ost_plan_free(plan));
    printf("record.c on %s: 100 patched replays checked, %zu edges; 2 traced replays, the last %.1f us on the device\n", backend, edges,
           sum.step_ns / 1000.0);
    return 0;
}
