/* Handles are keys that are never reused: a freed handle stays refused however many objects are made
 * after it, and a host kernel's call handle is valid only during its call, on its thread. Every check
 * reads the status only (the message is for people). Exit 0 on success. */
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

/* The call handle of the last host kernel call, kept past the call on purpose. */
static const ost_host_call *kept = NULL;

/* A host kernel that checks its own handle, then keeps it. */
static int32_t keep_handle(const ost_host_call *call, void *user) {
    (void)user;
    ost_scalar n;
    if (ost_host_call_scalar(call, 1, &n) != OST_OK) return 1;
    /* Garbage and a neighbour of the live handle are refused, never dereferenced. */
    if (ost_host_call_scalar((const ost_host_call *)(uintptr_t)0x7f00dead, 1, &n) != OST_ERR_HANDLE) return 2;
    if (ost_host_call_scalar((const ost_host_call *)((uintptr_t)call + 16), 1, &n) != OST_ERR_HANDLE) return 3;
    kept = call;
    return 0;
}

/* A graph with one buffer and one `add_one` launch (a C host kernel where `c_kernel`). */
static ost_graph *small_graph(int c_kernel) {
    ost_graph *g = NULL;
    uint32_t x, k, node;
    if (ost_graph_new(&g) != OST_OK || ost_graph_add_buffer(g, "x", 64, &x) != OST_OK) return NULL;
    const ost_param params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}};
    if (ost_graph_add_kernel(g, "add_one", params, 2, &k) != OST_OK) return NULL;
    if (c_kernel ? ost_graph_set_host_kernel(g, k, keep_handle, NULL) : ost_graph_set_kernel_impl(g, k, "host", "builtin:add_one", NULL)) return NULL;
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {16, 1, 1};
    ost_arg args[2] = {{0}};
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = x; args[0].slice.offset = 0; args[0].slice.len = OST_WHOLE;
    args[1].kind = OST_ARG_SCALAR; args[1].scalar = ost_scalar_u32(16);
    if (ost_graph_add_launch(g, k, grid, block, 0, args, 2, NULL, 0, &node) != OST_OK) return NULL;
    return g;
}

int main(void) {
    /* Free one of each kind, then make many objects: the stale handles are refused every time. */
    ost_graph *g = small_graph(0);
    ost_plan *p = NULL;
    ost_exec *e = NULL;
    size_t n = 0;
    if (g == NULL) { fprintf(stderr, "FAIL building the graph: %s\n", ost_last_error()); return 1; }
    expect(ost_plan_compile(g, &p), OST_OK, "compile");
    expect(ost_exec_create(p, "host", &e), OST_OK, "create");
    ost_graph *stale_g = g;
    ost_plan *stale_p = p;
    ost_exec *stale_e = e;
    expect(ost_exec_free(e), OST_OK, "free the exec");
    expect(ost_plan_free(p), OST_OK, "free the plan");
    expect(ost_graph_free(g), OST_OK, "free the graph");
    for (int round = 0; round < 2000; round++) {
        ost_graph *g2 = small_graph(0);
        ost_plan *p2 = NULL;
        ost_exec *e2 = NULL;
        if (g2 == NULL || ost_plan_compile(g2, &p2) != OST_OK || ost_exec_create(p2, "host", &e2) != OST_OK) {
            fprintf(stderr, "FAIL round %d: %s\n", round, ost_last_error());
            return 1;
        }
        if (g2 == stale_g || (void *)p2 == (void *)stale_p || (void *)e2 == (void *)stale_e) {
            fprintf(stderr, "FAIL round %d: a new object got a freed handle\n", round);
            failures++;
        }
        expect(ost_exec_replay(stale_e, 1), OST_ERR_HANDLE, "replay a freed exec");
        expect(ost_plan_edge_count(stale_p, &n), OST_ERR_HANDLE, "use a freed plan");
        uint32_t sid = 0;
        expect(ost_graph_add_slot(stale_g, "s", ost_scalar_u32(1), &sid), OST_ERR_HANDLE, "use a freed graph");
        expect(ost_exec_free(stale_e), OST_ERR_HANDLE, "free a freed exec");
        /* Keep some alive so that the allocator cannot simply hand back the same memory. */
        if (round % 2 == 0) {
            ost_exec_free(e2);
            ost_plan_free(p2);
            ost_graph_free(g2);
        }
    }

    /* A host kernel's call handle: checked during the call (keep_handle), refused after it. */
    ost_graph *hg = small_graph(1);
    ost_plan *hp = NULL;
    ost_exec *he = NULL;
    if (hg == NULL) { fprintf(stderr, "FAIL building the host-kernel graph: %s\n", ost_last_error()); return 1; }
    expect(ost_plan_compile(hg, &hp), OST_OK, "compile the host-kernel graph");
    expect(ost_exec_create(hp, "host", &he), OST_OK, "create the host-kernel exec");
    expect(ost_exec_replay(he, 1), OST_OK, "replay (the kernel checks its handle)");
    expect(ost_exec_wait(he), OST_OK, "wait");
    ost_scalar s;
    unsigned char byte;
    expect(ost_host_call_scalar(kept, 1, &s), OST_ERR_HANDLE, "a call handle after its call");
    expect(ost_host_call_read(kept, 0, 0, &byte, 1), OST_ERR_HANDLE, "read through a finished call");
    expect(ost_host_call_fail((const ost_host_call *)(uintptr_t)0x1, "x"), OST_ERR_HANDLE, "fail through garbage");
    expect(ost_host_call_scalar(NULL, 1, &s), OST_ERR_NULL, "a NULL call handle");
    ost_exec_free(he);
    ost_plan_free(hp);
    ost_graph_free(hg);

    if (failures) { fprintf(stderr, "handles.c: %d failures\n", failures); return 1; }
    printf("handles.c: freed and stale handles refused every time\n");
    return 0;
}
