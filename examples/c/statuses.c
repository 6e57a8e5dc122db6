/* Each status a C program can meet on the host backend, reached through the error it classifies: the
 * library picks the status from the error's kind, never from its message, and this test reads only
 * the status. (OST_ERR_RUNTIME, OST_ERR_MISMATCH and OST_ERR_PANIC have no cause a host-only program
 * can plant; OST_ERR_UNSUPPORTED is reached on a Vulkan device where one is found.) Exit 0 on success. */
#include <ostinato.h>
#include <stdint.h>
#include <stdio.h>

static int failures = 0;

static void expect(ost_status got, ost_status want, const char *what) {
    if (got != want) {
        fprintf(stderr, "FAIL %s: got %s, want %s (%s)\n", what, ost_status_name((int)got), ost_status_name((int)want), ost_last_error());
        failures++;
    }
}

/* A host kernel that fails its launch. */
static int32_t failing(const ost_host_call *call, void *user) {
    (void)call;
    (void)user;
    return 7;
}

static const uint32_t GRID[3] = {1, 1, 1}, BLOCK[3] = {16, 1, 1};

/* `add_one` over buffer `x` (n = 16 words), as kernel `k`. */
static ost_status launch(ost_graph *g, uint32_t k, uint32_t x, uint32_t *node) {
    ost_arg args[2] = {{0}};
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = x; args[0].slice.offset = 0; args[0].slice.len = OST_WHOLE;
    args[1].kind = OST_ARG_SCALAR; args[1].scalar = ost_scalar_u32(16);
    return ost_graph_add_launch(g, k, GRID, BLOCK, 0, args, 2, NULL, 0, node);
}

int main(void) {
    const ost_param params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}};
    ost_graph *g = NULL;
    ost_plan *p = NULL;
    ost_exec *e = NULL;
    uint32_t x, y, k, a, b, slot;

    expect(ost_graph_new(NULL), OST_ERR_NULL, "NULL: a NULL out pointer");
    expect(ost_graph_load("/nonexistent/graph.toml", &g), OST_ERR_FILE, "FILE: a graph file that cannot be read");
    expect(ost_graph_new(&g), OST_OK, "a graph");
    expect(ost_graph_add_buffer(g, "empty", 0, &x), OST_ERR_GRAPH, "GRAPH: a buffer of 0 bytes");
    expect(ost_graph_add_buffer(g, "x", 64, &x), OST_OK, "buffer x");
    expect(ost_graph_add_buffer(g, "y", 64, &y), OST_OK, "buffer y");
    expect(ost_graph_add_kernel(g, "add_one", params, 2, &k), OST_OK, "a kernel");
    expect(ost_graph_add_slot(g, "s", ost_scalar_u32(1), &slot), OST_OK, "a slot");
    expect(launch(g, k, x, &a), OST_OK, "a launch on x");
    expect(launch(g, k, y, &b), OST_OK, "an independent launch on y");
    expect(ost_plan_compile(g, &p), OST_OK, "compile");
    expect(ost_exec_create(p, "host", &e), OST_ERR_BIND, "BIND: a kernel with no host implementation");
    expect(ost_exec_create(p, "metal", &e), OST_ERR_BACKEND, "BACKEND: a backend that does not exist");
    size_t edges = 0;
    expect(ost_plan_edge_count((const ost_plan *)(uintptr_t)0xdead0, &edges), OST_ERR_HANDLE, "HANDLE: garbage as a plan");
    expect(ost_plan_free(p), OST_OK, "free the plan");

    /* Two launches on one buffer (the second after the first) and an explicit edge back: a cycle. */
    ost_graph *cyc = NULL;
    uint32_t cx, ck, c0, c1;
    expect(ost_graph_new(&cyc), OST_OK, "a second graph");
    expect(ost_graph_add_buffer(cyc, "x", 64, &cx), OST_OK, "its buffer");
    expect(ost_graph_add_kernel(cyc, "add_one", params, 2, &ck), OST_OK, "its kernel");
    expect(launch(cyc, ck, cx, &c0), OST_OK, "first launch");
    expect(launch(cyc, ck, cx, &c1), OST_OK, "second launch (after the first: RAW on x)");
    expect(ost_graph_add_edge(cyc, c1, c0), OST_OK, "an explicit edge back");
    ost_plan *cp = NULL;
    expect(ost_plan_compile(cyc, &cp), OST_ERR_PLAN, "PLAN: a cycle through an explicit edge");
    expect(ost_graph_free(cyc), OST_OK, "free the second graph");

    expect(ost_graph_set_kernel_impl(g, k, "host", "builtin:add_one", NULL), OST_OK, "the host implementation");
    expect(ost_plan_compile(g, &p), OST_OK, "compile again");
    ost_exec_options o = {0};
    o.host_threads = 4;
    expect(ost_exec_create_ex(p, "host", &o, NULL, 0, &e), OST_OK, "an exec on four workers");
    expect(ost_exec_set_slot_u32(e, "nope", 1), OST_ERR_ARGUMENT, "ARGUMENT: an unknown slot");
    expect(ost_exec_replay(e, 1), OST_OK, "a replay of two independent nodes (on the workers)");
    expect(ost_exec_set_slot_u32(e, "s", 2), OST_ERR_STATE, "STATE: a patch while a replay is in flight");
    expect(ost_exec_wait(e), OST_OK, "wait");
    expect(ost_exec_set_slot_u32(e, "s", 2), OST_OK, "the patch once idle");
    expect(ost_exec_free(e), OST_OK, "free the exec");
    expect(ost_plan_free(p), OST_OK, "free the plan");

    /* FAULT: a kernel that fails its launch. */
    expect(ost_graph_set_host_kernel(g, k, failing, NULL), OST_OK, "a failing C kernel");
    expect(ost_plan_compile(g, &p), OST_OK, "compile with the failing kernel");
    expect(ost_exec_create(p, "host", &e), OST_OK, "its exec");
    ost_status r = ost_exec_replay(e, 1);
    expect(r == OST_OK ? ost_exec_wait(e) : r, OST_ERR_FAULT, "FAULT: a kernel fault");
    expect(ost_exec_free(e), OST_OK, "free it");
    expect(ost_plan_free(p), OST_OK, "free its plan");
    expect(ost_graph_free(g), OST_OK, "free the graph");

    /* IO: buffers larger than the host's memory, refused before anything is allocated. */
    ost_graph *big = NULL;
    uint32_t bx, bk, bn;
    expect(ost_graph_new(&big), OST_OK, "a graph of huge buffers");
    expect(ost_graph_add_buffer(big, "x", (uint64_t)1 << 60, &bx), OST_OK, "a 2^60-byte buffer");
    expect(ost_graph_add_kernel(big, "add_one", params, 2, &bk), OST_OK, "its kernel");
    expect(ost_graph_set_kernel_impl(big, bk, "host", "builtin:add_one", NULL), OST_OK, "its implementation");
    expect(launch(big, bk, bx, &bn), OST_OK, "its launch");
    expect(ost_plan_compile(big, &p), OST_OK, "its plan");
    expect(ost_exec_create(p, "host", &e), OST_ERR_IO, "IO: buffers past the host's memory");
    expect(ost_plan_free(p), OST_OK, "free its plan");

    /* UNSUPPORTED: a buffer on a device the Vulkan exec does not drive (where a Vulkan device is found). */
    ost_graph *two = NULL;
    uint32_t d1, tk, tn;
    expect(ost_graph_new(&two), OST_OK, "a graph on device 1");
    expect(ost_graph_add_buffer_on(two, "x", 64, 1, &d1), OST_OK, "a buffer on device 1");
    expect(ost_graph_add_kernel(two, "add_one", params, 2, &tk), OST_OK, "its kernel");
    expect(ost_graph_set_kernel_impl(two, tk, "vulkan", "builtin:add_one", NULL), OST_OK, "a Vulkan implementation");
    expect(launch(two, tk, d1, &tn), OST_OK, "its launch");
    expect(ost_plan_compile(two, &p), OST_OK, "its plan");
    r = ost_exec_create(p, "vulkan", &e);
    if (r == OST_ERR_BACKEND) {
        printf("statuses.c: SKIP OST_ERR_UNSUPPORTED: no Vulkan device (%s)\n", ost_last_error());
    } else {
        expect(r, OST_ERR_UNSUPPORTED, "UNSUPPORTED: a buffer on a device the exec does not drive");
    }
    expect(ost_plan_free(p), OST_OK, "free its plan");
    expect(ost_graph_free(two), OST_OK, "free it");
    expect(ost_graph_free(big), OST_OK, "free the graph of huge buffers");

    if (failures) { fprintf(stderr, "statuses.c: %d failures\n", failures); return 1; }
    printf("statuses.c: every status reached through its kind\n");
    return 0;
}
