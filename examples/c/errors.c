/* The C ABI's error paths: NULLs, bad names and values, unknown backends, handles of the wrong kind,
 * freed handles and double frees are refused with their status and a message, never a crash. */
#include <ostinato.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(ost_status got, ost_status want, const char *needle, const char *what) {
    const char *msg = ost_last_error();
    if (got != want || (needle && !strstr(msg, needle))) {
        fprintf(stderr, "FAIL %s: got %s (%s), want %s containing \"%s\"\n", what, ost_status_name((int)got), msg,
                ost_status_name((int)want), needle ? needle : "");
        failures++;
    }
}

int main(void) {
    ost_graph *g = NULL;
    ost_plan *p = NULL;
    ost_exec *e = NULL;
    uint32_t id = 0;
    size_t n = 0;

    expect(ost_graph_new(NULL), OST_ERR_NULL, "out is NULL", "new with a NULL out");
    expect(ost_graph_load(NULL, &g), OST_ERR_NULL, "path is NULL", "load a NULL path");
    expect(ost_graph_load("/nonexistent/graph.toml", &g), OST_ERR_FILE, "cannot read", "load a missing file");
    if (g != NULL) { fprintf(stderr, "FAIL a failed load wrote its out pointer\n"); failures++; }
    expect(ost_plan_compile(NULL, &p), OST_ERR_NULL, "graph handle is NULL", "compile a NULL graph");

    expect(ost_graph_new(&g), OST_OK, NULL, "new");
    expect(ost_graph_add_buffer(g, "../escaped", 64, &id), OST_ERR_GRAPH, "is not an identifier", "a path as a buffer name");
    expect(ost_graph_add_buffer(g, "x", 0, &id), OST_ERR_GRAPH, "size 0", "an empty buffer");
    uint32_t x = 0;
    expect(ost_graph_add_buffer(g, "x", 64, &x), OST_OK, NULL, "a buffer");
    expect(ost_graph_add_buffer(g, "x", 64, &id), OST_ERR_GRAPH, "declared twice", "a duplicate buffer");
    const ost_param bad[] = {{"x", 99}};
    expect(ost_graph_add_kernel(g, "k", bad, 1, &id), OST_ERR_ARGUMENT, "param `x`", "a param of no kind");
    const ost_param ok[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}};
    uint32_t k = 0;
    expect(ost_graph_add_kernel(g, "add_one", ok, 2, &k), OST_OK, NULL, "a kernel");
    expect(ost_graph_set_kernel_impl(g, k, "metal", "builtin:add_one", NULL), OST_ERR_ARGUMENT, "no such backend", "an unknown backend");
    expect(ost_graph_set_kernel_impl(g, 7, "host", "builtin:add_one", NULL), OST_ERR_HANDLE, "kernel id 0x7 is not an id Ostinato gave", "a bare index as a kernel");
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
    ost_arg args[2] = {{0}};
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = x; args[0].slice.offset = 32; args[0].slice.len = 64;
    args[1].kind = OST_ARG_SCALAR; args[1].scalar = ost_scalar_u32(16);
    expect(ost_graph_add_launch(g, k, grid, block, 0, args, 2, NULL, 0, &id), OST_ERR_GRAPH, "outside buffer `x`", "a slice past the buffer");
    args[0].slice.offset = 0;
    args[1].scalar = ost_scalar_f32(1.0f);
    expect(ost_graph_add_launch(g, k, grid, block, 0, args, 2, NULL, 0, &id), OST_ERR_GRAPH, "param `add_one.n`: expects a u32", "a scalar of another type");
    args[1].scalar = ost_scalar_u32(16);
    expect(ost_graph_add_launch(g, k, grid, block, 0, args, 1, NULL, 0, &id), OST_ERR_GRAPH, "1 args given", "too few args");
    expect(ost_graph_add_launch(g, k, grid, block, 0, NULL, 2, NULL, 0, &id), OST_ERR_NULL, "args is NULL", "NULL args with a count");
    uint32_t node = 0;
    expect(ost_graph_add_launch(g, k, grid, block, 0, args, 2, NULL, 0, &node), OST_OK, NULL, "a launch");
    expect(ost_graph_add_edge(g, node, node), OST_ERR_GRAPH, "itself", "an edge to itself");

    /* A param declared OST_PARAM_INFER takes its access from the kernels' code when the graph is
     * planned: with no implementation to read it cannot be; from the host built-in it is read_write. */
    ost_graph *gi = NULL;
    ost_plan *pi = NULL;
    uint32_t ki = 0, xi = 0;
    expect(ost_graph_new(&gi), OST_OK, NULL, "new (infer)");
    expect(ost_graph_add_buffer(gi, "x", 64, &xi), OST_OK, NULL, "a buffer (infer)");
    const ost_param inferred[] = {{"x", OST_PARAM_INFER}, {"n", OST_U32}};
    expect(ost_graph_add_kernel(gi, "add_one", inferred, 2, &ki), OST_OK, NULL, "a param to infer");
    ost_arg iargs[2] = {{0}};
    iargs[0].kind = OST_ARG_BUFFER; iargs[0].slice.buffer = xi; iargs[0].slice.len = OST_WHOLE;
    iargs[1].kind = OST_ARG_SCALAR; iargs[1].scalar = ost_scalar_u32(16);
    expect(ost_graph_add_launch(gi, ki, grid, block, 0, iargs, 2, NULL, 0, &id), OST_OK, NULL, "a launch (infer)");
    expect(ost_plan_compile(gi, &pi), OST_ERR_BIND, "declared `infer`", "infer with no code to read");
    expect(ost_graph_set_kernel_impl(gi, ki, "host", "builtin:add_one", NULL), OST_OK, NULL, "its host implementation");
    expect(ost_plan_compile(gi, &pi), OST_OK, NULL, "infer from the host built-in");
    const ost_param vouched[] = {{"y", OST_PARAM_READ | OST_PARAM_VOUCHED}};
    expect(ost_graph_add_kernel(gi, "v", vouched, 1, &ki), OST_OK, NULL, "a vouched param");
    const ost_param bad_vouch[] = {{"y", OST_PARAM_INFER | OST_PARAM_VOUCHED}};
    expect(ost_graph_add_kernel(gi, "w", bad_vouch, 1, &ki), OST_ERR_ARGUMENT, "param `y`", "an inferred param cannot be vouched for");
    expect(ost_plan_free(pi), OST_OK, NULL, "free the plan (infer)");
    expect(ost_graph_free(gi), OST_OK, NULL, "free the graph (infer)");

    expect(ost_plan_compile(g, &p), OST_OK, NULL, "compile");
    expect(ost_plan_edge_count((const ost_plan *)g, &n), OST_ERR_HANDLE, "not a plan", "a graph passed as a plan");
    expect(ost_exec_create(p, "host", &e), OST_ERR_BIND, "no implementation for the host backend (it has: none): declare one with ost_graph_set_kernel_impl(g, kernel, \"host\"", "an exec without an implementation");
    if (e != NULL) { fprintf(stderr, "FAIL a failed create wrote its out pointer\n"); failures++; }
    expect(ost_graph_set_kernel_impl(g, k, "host", "builtin:add_one", NULL), OST_OK, NULL, "an implementation");
    expect(ost_plan_free(p), OST_OK, NULL, "free the plan");
    expect(ost_plan_free(p), OST_ERR_HANDLE, "not a live plan handle", "free a plan twice");
    expect(ost_plan_edge_count(p, &n), OST_ERR_HANDLE, "not a live plan handle", "use a freed plan");
    expect(ost_plan_compile(g, &p), OST_OK, NULL, "compile again");
    expect(ost_exec_create(p, "metal", &e), OST_ERR_BACKEND, "no such backend", "an unknown backend");
    ost_exec_options bad_fusion = {0};
    bad_fusion.fusion = "sometimes";
    expect(ost_exec_create_ex(p, "host", &bad_fusion, NULL, 0, &e), OST_ERR_ARGUMENT, "option `fusion`: `sometimes` is not one of auto, on, off", "an unknown fusion mode");
    ost_exec_options settings = {0};
    settings.settings = "pdl=maybe";
    expect(ost_exec_create_ex(p, "host", &settings, NULL, 0, &e), OST_ERR_ARGUMENT, "option `pdl`", "an unknown setting value");
    settings.settings = "pdl=off, ordering";
    expect(ost_exec_create_ex(p, "host", &settings, NULL, 0, &e), OST_ERR_ARGUMENT, "`ordering` is not key=value", "a setting without a value");
    settings.settings = "colour=red";
    expect(ost_exec_create_ex(p, "host", &settings, NULL, 0, &e), OST_ERR_ARGUMENT, "option `colour`", "an unknown setting");
    settings.settings = "pdl=off,ordering=barrier,";
    expect(ost_exec_create_ex(p, "host", &settings, NULL, 0, &e), OST_OK, NULL, "settings of other backends");
    expect(ost_exec_free(e), OST_OK, NULL, "free it");
    expect(ost_exec_create(p, "host", &e), OST_OK, NULL, "an exec");
    expect(ost_exec_set_slot_u32(e, "nope", 1), OST_ERR_ARGUMENT, "unknown slot `nope`", "an unknown slot");
    unsigned char buf[8];
    expect(ost_exec_read(e, "y", 0, buf, 8), OST_ERR_ARGUMENT, "unknown buffer `y`", "an unknown buffer");
    expect(ost_exec_read(e, "x", 60, buf, 8), OST_ERR_ARGUMENT, "outside buffer `x`", "a read past the buffer");
    expect(ost_exec_read(e, "x", 0, NULL, 8), OST_ERR_NULL, "dst is NULL", "a read into NULL");
    /* Counts and pointers no C array can have are refused, never made into a slice. */
    expect(ost_exec_read(e, "x", 0, buf, SIZE_MAX), OST_ERR_ARGUMENT, "dst: a count of", "a read of SIZE_MAX bytes");
    expect(ost_exec_write(e, "x", 0, buf, (size_t)1 << 63), OST_ERR_ARGUMENT, "src: a count of", "a write of 2**63 bytes");
    uint32_t words[2];
    expect(ost_graph_add_buffer(g, "z", 64, (uint32_t *)((char *)words + 1)), OST_ERR_ARGUMENT, "is not aligned", "a misaligned id pointer");
    expect(ost_graph_add_launch(g, k, grid, block, 0, args, SIZE_MAX, NULL, 0, &id), OST_ERR_ARGUMENT, "args: a count of", "SIZE_MAX args");
    expect(ost_graph_add_launch(g, k, grid, block, 0, (const ost_arg *)((char *)args + 4), 2, NULL, 0, &id), OST_ERR_ARGUMENT, "args", "misaligned args");
    expect(ost_exec_replay(e, 3), OST_OK, NULL, "replays");
    expect(ost_exec_rebind(e, "x", 0x1000, 64), OST_ERR_ARGUMENT, "takes no device memory", "device memory on the host");
    expect(ost_exec_free(e), OST_OK, NULL, "free the exec");
    expect(ost_exec_free(e), OST_ERR_HANDLE, "not a live exec handle", "free an exec twice");
    expect(ost_exec_replay(e, 1), OST_ERR_HANDLE, "not a live exec handle", "replay a freed exec");
    expect(ost_exec_replay(NULL, 1), OST_ERR_NULL, "exec handle is NULL", "replay NULL");
    expect(ost_exec_replay((ost_exec *)(uintptr_t)0x1234, 1), OST_ERR_HANDLE, "never made by Ostinato", "replay a garbage pointer");
    expect(ost_graph_free((ost_graph *)p), OST_ERR_HANDLE, "not of an graph", "free a plan as a graph");
    expect(ost_plan_free(p), OST_OK, NULL, "free the plan");
    expect(ost_graph_free(g), OST_OK, NULL, "free the graph");
    expect(ost_graph_free(NULL), OST_OK, NULL, "free NULL");
    if (strcmp(ost_status_name(12345), "OST_UNKNOWN") != 0) { fprintf(stderr, "FAIL status name of a bad code\n"); failures++; }

    /* Buffers on two devices and a collective between them. */
    ost_graph *t = NULL;
    uint32_t d0 = 0, d1 = 0, c = 0;
    expect(ost_graph_new(&t), OST_OK, NULL, "a second graph");
    expect(ost_graph_add_buffer_on(t, "d0", 64, 0, &d0), OST_OK, NULL, "a buffer on device 0");
    expect(ost_graph_add_buffer_on(t, "d1", 64, 1, &d1), OST_OK, NULL, "a buffer on device 1");
    const ost_slice sends[] = {{d0, 0, OST_WHOLE}, {d1, 0, OST_WHOLE}};
    const ost_slice crossed[] = {{d1, 0, OST_WHOLE}, {d0, 0, OST_WHOLE}};
    expect(ost_graph_add_collective(t, "all_reduce", OST_F32, sends, crossed, 2, NULL, 0, &c), OST_ERR_GRAPH,
           "rank 0 sends from `d0` on device 0 but receives into `d1` on device 1", "a rank on two devices");
    expect(ost_graph_add_collective(t, "all_sum", OST_F32, sends, sends, 2, NULL, 0, &c), OST_ERR_ARGUMENT, "op `all_sum`", "an unknown collective");
    expect(ost_graph_add_collective(t, "all_reduce", 99, sends, sends, 2, NULL, 0, &c), OST_ERR_ARGUMENT, "99 is not a scalar type", "an unknown element type");
    expect(ost_graph_add_collective(t, "all_reduce", OST_F32, sends, sends, 2, NULL, 0, &c), OST_OK, NULL, "an all-reduce over two devices");
    expect(ost_graph_free(t), OST_OK, NULL, "free the second graph");

    ost_graph *al = NULL;
    uint32_t ab = 0;
    expect(ost_graph_new(&al), OST_OK, NULL, "a graph for aliasing");
    expect(ost_graph_add_buffer(al, "b", 64, &ab), OST_OK, NULL, "its buffer");
    /* Two params of one launch on overlapping bytes, one written: refused unless the kernel declares it. */
    const ost_param two[] = {{"out", OST_PARAM_READ_WRITE}, {"inp", OST_PARAM_READ}};
    uint32_t k2 = 0, n2 = 0;
    expect(ost_graph_add_kernel(al, "pair", two, 2, &k2), OST_OK, NULL, "a two-buffer kernel");
    ost_arg pair[2] = {{0}};
    pair[0].kind = OST_ARG_BUFFER; pair[0].slice.buffer = ab; pair[0].slice.offset = 0; pair[0].slice.len = 32;
    pair[1].kind = OST_ARG_BUFFER; pair[1].slice.buffer = ab; pair[1].slice.offset = 16; pair[1].slice.len = 32;
    expect(ost_graph_add_launch(al, k2, grid, block, 0, pair, 2, NULL, 0, &n2), OST_ERR_GRAPH, "params `out` and `inp` overlap on bytes [16, 32)", "an undeclared aliasing");
    expect(ost_graph_kernel_may_alias(al, k2, "out", "nope"), OST_ERR_GRAPH, "`nope` is not one of its params", "an aliasing of an unknown param");
    expect(ost_graph_kernel_may_alias(al, k2, "out", "inp"), OST_OK, NULL, "a declared aliasing");
    expect(ost_graph_add_launch(al, k2, grid, block, 0, pair, 2, NULL, 0, &n2), OST_OK, NULL, "the declared aliasing launched");
    expect(ost_graph_free(al), OST_OK, NULL, "free the aliasing graph");

    if (failures) { fprintf(stderr, "errors.c: %d failures\n", failures); return 1; }
    printf("errors.c: every error path refused with its status and message\n");
    return 0;
}
