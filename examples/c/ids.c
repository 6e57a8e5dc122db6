/* A graph's ids (buffers, kernels, slots, nodes) carry their graph and kind: an id of another graph,
 * of another kind, a bare index or an id of a freed graph is refused with OST_ERR_HANDLE and a message
 * naming the object and both graphs — never taken for this graph's object of the same index (which
 * would make the replay write another buffer). A loaded graph's ids come by name. Exit 0 on success. */
#include <ostinato.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(ost_status got, ost_status want, const char *needle, const char *what) {
    const char *msg = ost_last_error();
    if (got != want || (needle && want != OST_OK && !strstr(msg, needle))) {
        fprintf(stderr, "FAIL %s: got %s (%s), want %s containing \"%s\"\n", what, ost_status_name((int)got), msg, ost_status_name((int)want),
                needle ? needle : "");
        failures++;
    }
}

static const uint32_t GRID[3] = {1, 1, 1}, BLOCK[3] = {16, 1, 1};

/* A graph with buffer "x" (`size` bytes) — after a buffer "pad" of 64 bytes where `padded`, so that
 * the same index names another buffer in each graph — kernel `add_one` and slot `n`. */
typedef struct { ost_graph *g; uint32_t pad, x, k, n, node; } small;

static small make(uint64_t size, int padded) {
    small s;
    memset(&s, 0, sizeof s);
    const ost_param params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}};
    expect(ost_graph_new(&s.g), OST_OK, NULL, "new");
    if (padded) expect(ost_graph_add_buffer(s.g, "pad", 64, &s.pad), OST_OK, NULL, "buffer pad");
    expect(ost_graph_add_buffer(s.g, "x", size, &s.x), OST_OK, NULL, "buffer x");
    expect(ost_graph_add_kernel(s.g, "add_one", params, 2, &s.k), OST_OK, NULL, "kernel");
    expect(ost_graph_set_kernel_impl(s.g, s.k, "host", "builtin:add_one", NULL), OST_OK, NULL, "host implementation");
    expect(ost_graph_add_slot(s.g, "n", ost_scalar_u32(16), &s.n), OST_OK, NULL, "slot");
    return s;
}

/* A launch of `k` on buffer `x` with slot `n`, after `after` (when non-NULL). */
static ost_status launch(ost_graph *g, uint32_t k, uint32_t x, uint32_t n, const uint32_t *after, uint32_t *node) {
    ost_arg args[2];
    memset(args, 0, sizeof args);
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = x; args[0].slice.offset = 0; args[0].slice.len = OST_WHOLE;
    args[1].kind = OST_ARG_SLOT; args[1].slot = n;
    return ost_graph_add_launch(g, k, GRID, BLOCK, 0, args, 2, after, after ? 1 : 0, node);
}

int main(void) {
    small a = make(64, 0), b = make(128, 1);
    char want[160];
    uint32_t node = 0, id = 0;
    expect(launch(a.g, a.k, a.x, a.n, NULL, &a.node), OST_OK, NULL, "a's launch on its own objects");
    expect(launch(b.g, b.k, b.x, b.n, NULL, &b.node), OST_OK, NULL, "b's launch on its own objects");
    if (a.x == b.x || a.k == b.k || a.n == b.n || a.node == b.node) { fprintf(stderr, "FAIL two graphs gave one id\n"); failures++; }

    /* Each of a's ids in b: refused, naming a's object and both graphs (a's `x` has the index of b's
     * `pad`: taken as b's, the launch would write `pad`, checked after b's replay below). */
    snprintf(want, sizeof want, "is buffer `x` of graph %p, not of graph %p", (void *)a.g, (void *)b.g);
    expect(launch(b.g, b.k, a.x, b.n, NULL, &node), OST_ERR_HANDLE, want, "a's buffer in b's launch");
    expect(launch(b.g, a.k, b.x, b.n, NULL, &node), OST_ERR_HANDLE, "is kernel `add_one` of graph", "a's kernel in b's launch");
    expect(launch(b.g, b.k, b.x, a.n, NULL, &node), OST_ERR_HANDLE, "args[1].slot: slot id", "a's slot in b's launch");
    expect(launch(b.g, b.k, b.x, b.n, &a.node, &node), OST_ERR_HANDLE, "after[0]: node id", "a's node in b's `after`");
    expect(ost_graph_add_edge(b.g, a.node, b.node), OST_ERR_HANDLE, "before: node id", "a's node in b's edge");
    expect(ost_graph_set_kernel_impl(b.g, a.k, "host", "builtin:add_one", NULL), OST_ERR_HANDLE, "kernel: kernel id", "a's kernel's implementation set on b");
    expect(ost_graph_kernel_may_alias(b.g, a.k, "x", "x"), OST_ERR_HANDLE, "kernel: kernel id", "a's kernel's aliasing declared on b");
    expect(ost_graph_add_view(b.g, "v", a.x, 0, 16, &id), OST_ERR_HANDLE, "view `v`: parent", "a view of a's buffer in b");
    ost_slice foreign = {a.x, 0, 16}, own = {b.x, 0, 16};
    expect(ost_graph_add_copy(b.g, foreign, own, NULL, 0, &node), OST_ERR_HANDLE, "src: buffer id", "a copy from a's buffer in b");
    expect(ost_graph_add_fill(b.g, foreign, 0, NULL, 0, &node), OST_ERR_HANDLE, "dst: buffer id", "a fill of a's buffer in b");
    ost_slice ranks[1] = {{a.x, 0, 16}};
    expect(ost_graph_add_collective(b.g, "all_reduce", OST_U32, ranks, ranks, 1, NULL, 0, &node), OST_ERR_HANDLE, "send[0]: buffer id", "a collective over a's buffer in b");

    /* Another kind's id, a bare index, an index past the graph's. */
    expect(launch(b.g, b.k, b.n, b.n, NULL, &node), OST_ERR_HANDLE, "is slot `n` of graph", "a slot id as a buffer");
    expect(launch(b.g, b.x, b.x, b.n, NULL, &node), OST_ERR_HANDLE, "is buffer `x` of graph", "a buffer id as a kernel");
    expect(launch(b.g, b.k, 1, b.n, NULL, &node), OST_ERR_HANDLE, "not an id Ostinato gave", "a bare index as a buffer");
    expect(launch(b.g, b.k, b.x + 5, b.n, NULL, &node), OST_ERR_HANDLE, "does not hold", "an id past the graph's buffers");
    expect(launch(b.g, b.k, a.x, a.n, NULL, &node), OST_ERR_HANDLE, "of graph", "a's buffer and slot in b's launch");

    /* Refused calls recorded nothing: b still has one node, and its own ids still work. */
    expect(launch(b.g, b.k, b.x, b.n, &b.node, &node), OST_OK, NULL, "b's second launch");
    ost_plan *p = NULL;
    size_t nodes = 0;
    expect(ost_plan_compile(b.g, &p), OST_OK, NULL, "compile b");
    expect(ost_plan_node_count(p, &nodes), OST_OK, NULL, "b's node count");
    if (nodes != 2) { fprintf(stderr, "FAIL b holds %zu nodes, want 2\n", nodes); failures++; }
    ost_exec *e = NULL;
    expect(ost_exec_create(p, "host", &e), OST_OK, NULL, "b's exec");
    expect(ost_exec_replay(e, 1), OST_OK, NULL, "replay b");
    float words[32];
    expect(ost_exec_read(e, "x", 0, words, sizeof words), OST_OK, NULL, "read b's x");
    if (words[0] != 2.0f || words[15] != 2.0f || words[16] != 0.0f) { fprintf(stderr, "FAIL b's x: %g %g %g, want 2 2 0\n", words[0], words[15], words[16]); failures++; }
    expect(ost_exec_read(e, "pad", 0, words, 64), OST_OK, NULL, "read b's pad");
    for (int i = 0; i < 16; i++) {
        if (words[i] != 0.0f) { fprintf(stderr, "FAIL b's buffer `pad` was written (through a's id of `x`): word %d is %g\n", i, words[i]); failures++; break; }
    }
    ost_exec_free(e);
    ost_plan_free(p);

    /* An id of a freed graph. */
    uint32_t stale = a.x;
    expect(ost_graph_free(a.g), OST_OK, NULL, "free a");
    expect(launch(b.g, b.k, stale, b.n, NULL, &node), OST_ERR_HANDLE, "another graph (freed since)", "a freed graph's buffer");

    /* Ids by name: those the add calls gave, and a loaded graph's, extended from C. */
    expect(ost_graph_buffer_id(b.g, "x", &id), OST_OK, NULL, "b's buffer by name");
    if (id != b.x) { fprintf(stderr, "FAIL ost_graph_buffer_id gave %#x, add_buffer %#x\n", id, b.x); failures++; }
    expect(ost_graph_kernel_id(b.g, "add_one", &id), OST_OK, NULL, "b's kernel by name");
    if (id != b.k) { fprintf(stderr, "FAIL ost_graph_kernel_id gave %#x, add_kernel %#x\n", id, b.k); failures++; }
    expect(ost_graph_slot_id(b.g, "n", &id), OST_OK, NULL, "b's slot by name");
    if (id != b.n) { fprintf(stderr, "FAIL ost_graph_slot_id gave %#x, add_slot %#x\n", id, b.n); failures++; }
    expect(ost_graph_node_id(b.g, 0, &id), OST_OK, NULL, "b's first node");
    if (id != b.node) { fprintf(stderr, "FAIL ost_graph_node_id gave %#x, add_launch %#x\n", id, b.node); failures++; }
    expect(ost_graph_buffer_id(b.g, "nope", &id), OST_ERR_ARGUMENT, "has no buffer `nope`", "an unknown buffer name");
    expect(ost_graph_node_id(b.g, 2, &id), OST_ERR_ARGUMENT, "the graph has 2 nodes", "a node index past the graph's");

    ost_graph *f = NULL;
    uint32_t fa, fb, fmix, fsalt, last, fnode;
    expect(ost_graph_load("examples/mix.toml", &f), OST_OK, NULL, "load mix.toml");
    expect(ost_graph_buffer_id(f, "a", &fa), OST_OK, NULL, "the file's buffer a");
    expect(ost_graph_buffer_id(f, "b", &fb), OST_OK, NULL, "the file's buffer b");
    expect(ost_graph_kernel_id(f, "mix", &fmix), OST_OK, NULL, "the file's kernel mix");
    expect(ost_graph_slot_id(f, "salt", &fsalt), OST_OK, NULL, "the file's slot salt");
    expect(ost_graph_node_id(f, 3, &last), OST_OK, NULL, "the file's node 3");
    expect(launch(f, fmix, b.x, fsalt, NULL, &fnode), OST_ERR_HANDLE, "is buffer `x` of graph", "b's buffer in the loaded graph");
    ost_arg args[5];
    memset(args, 0, sizeof args);
    args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = fb; args[0].slice.offset = 0; args[0].slice.len = OST_WHOLE;
    args[1].kind = OST_ARG_BUFFER; args[1].slice.buffer = fa; args[1].slice.offset = 0; args[1].slice.len = 1024;
    args[2].kind = OST_ARG_SCALAR; args[2].scalar = ost_scalar_u32(256);
    args[3].kind = OST_ARG_SCALAR; args[3].scalar = ost_scalar_u32(256);
    args[4].kind = OST_ARG_SLOT; args[4].slot = fsalt;
    const uint32_t block[3] = {256, 1, 1};
    expect(ost_graph_add_launch(f, fmix, GRID, block, 0, args, 5, &last, 1, &fnode), OST_OK, NULL, "a launch added to the loaded graph");
    expect(ost_plan_compile(f, &p), OST_OK, NULL, "compile the loaded graph");
    expect(ost_exec_create(p, "host", &e), OST_OK, NULL, "its exec");
    expect(ost_exec_replay(e, 1), OST_OK, NULL, "replay it");
    expect(ost_exec_wait(e), OST_OK, NULL, "wait");
    ost_exec_free(e);
    ost_plan_free(p);
    ost_graph_free(f);
    ost_graph_free(b.g);

    if (failures) { fprintf(stderr, "ids.c: %d failures\n", failures); return 1; }
    printf("ids.c: ids of other graphs, other kinds, bare indices and freed graphs refused; ids by name\n");
    return 0;
}
