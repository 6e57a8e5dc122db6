/* A fuzzer of the C ABI: random sequences of calls, each in a child process of its own, mixing valid
 * calls with hostile ones — NULL, garbage, freed and wrong-kind handles, ids of other graphs, of other
 * kinds and bare indices, lengths past what memory holds, unknown names and backends,
 * zero and huge sizes, slices past their buffers, overlapping params, built-ins told to touch past
 * their extents, bad options. Data pointers are valid for the lengths given (the header makes the
 * caller vouch for those), but for lengths no array can have, which must be refused before use;
 * handles never need to be valid. A sequence that ends normally "ran"; a
 * child that dies by a signal "aborted"; a call that returns OST_ERR_PANIC "panicked"; every third
 * sequence also records a random order-sensitive program and compares the host's bytes with Vulkan's
 * (where a Vulkan device is found): a difference "mismatched".
 *
 *   fuzz_calls [SEQUENCES [SEED]]      exit 0 when nothing panicked, aborted or mismatched */
#define _POSIX_C_SOURCE 200809L
#include <ostinato.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state;
static uint64_t next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static uint64_t below(uint64_t n) { return n ? next() % n : 0; }

/* What a child reports through its pipe. */
typedef struct { uint64_t calls, refused, panics, mismatch; } tally;
static tally t;

static ost_status count(ost_status s) {
    t.calls++;
    if (s == OST_ERR_PANIC) t.panics++;
    else if (s != OST_OK) t.refused++;
    return s;
}

#define POOL 8
static ost_graph *graphs[POOL];
static ost_plan *plans[POOL];
static ost_exec *execs[POOL];

/* A handle: a live one, a freed or garbage one, NULL, or one of another kind. */
static void *pick(void **pool) {
    switch (below(8)) {
        case 0: return NULL;
        case 1: return (void *)(uintptr_t)(next() | 1);
        case 2: return (void *)graphs[below(POOL)];
        case 3: return (void *)plans[below(POOL)];
        default: return pool[below(POOL)];
    }
}

/* The ids the add calls gave, per graph of the pool (any kind: buffers, kernels, slots, nodes). */
#define IDS 32
static uint32_t ids[POOL][IDS];
static size_t nids[POOL];

static void keep_id(int gi, ost_status s, uint32_t id) {
    if (s == OST_OK && nids[gi] < IDS) ids[gi][nids[gi]++] = id;
}

/* An id for a call on graph `gi`: mostly one it gave (of any kind), else another graph's, a bare index
 * or garbage. */
static uint32_t id_for(int gi) {
    uint64_t r = below(16);
    int other = (int)below(POOL);
    if (r < 11 && nids[gi]) return ids[gi][below(nids[gi])];
    if (r < 13 && nids[other]) return ids[other][below(nids[other])];
    if (r < 15) return (uint32_t)below(8);
    return (uint32_t)next();
}

static const char *NAMES[] = {"a", "b", "x", "out", "inp", "n", "salt", "mix", "add_one", "../bad", "", "a b", "k0", "v"};
static const char *name(void) { return NAMES[below(sizeof NAMES / sizeof *NAMES)]; }
static const char *BACKENDS[] = {"host", "host", "host", "vulkan", "metal", "cuda", "hsa", ""};
static const char *SOURCES[] = {"builtin:mix", "builtin:add_one", "builtin:nope", "builtin", "/nonexistent.cu", "x.ptx", ""};
static const uint64_t SIZES[] = {0, 4, 64, 1024, 4096, 1u << 20, UINT64_MAX, 1ull << 40};

static uint64_t size(void) { return below(3) ? 4 * (1 + below(1024)) : SIZES[below(sizeof SIZES / sizeof *SIZES)]; }

static ost_slice slice(int gi) {
    ost_slice s = {id_for(gi), below(4) ? 4 * below(256) : next(), below(4) ? 4 * (1 + below(256)) : OST_WHOLE};
    return s;
}

static ost_arg arg(int gi) {
    ost_arg a;
    memset(&a, 0, sizeof a);
    a.kind = (uint32_t)below(4);
    a.slice = slice(gi);
    a.scalar = below(2) ? ost_scalar_u32((uint32_t)(below(3) ? below(2048) : next())) : ost_scalar_f32(1.5f);
    a.slot = id_for(gi);
    return a;
}

/* A new or loaded graph into pool place `gi` (the graph there before is leaked on purpose). */
static void fresh_graph(int gi, int load) {
    ost_status s = count(load ? ost_graph_load(below(2) ? "examples/mix.toml" : "/nonexistent.toml", &graphs[gi]) : ost_graph_new(&graphs[gi]));
    if (s != OST_OK) return;
    nids[gi] = 0;
    uint32_t id;
    const char *known[] = {"a", "b", "mix", "salt"};
    for (int i = 0; i < 4 && load; i++) {
        keep_id(gi, count(i < 2 ? ost_graph_buffer_id(graphs[gi], known[i], &id) : i == 2 ? ost_graph_kernel_id(graphs[gi], known[i], &id)
                                                                                           : ost_graph_slot_id(graphs[gi], known[i], &id)),
                id);
    }
    for (uint32_t n = 0; n < 4 && load; n++) keep_id(gi, count(ost_graph_node_id(graphs[gi], n, &id)), id);
}

static void graph_call(void) {
    int gi = (int)below(POOL);
    /* Mostly the pool's graph `gi` (whose ids id_for favours), else any handle, hostile ones included. */
    ost_graph *g = below(4) ? graphs[gi] : (ost_graph *)pick((void **)graphs);
    uint32_t id = 0;
    switch (below(13)) {
        case 0: fresh_graph(gi, 0); break;
        case 1: fresh_graph(gi, 1); break;
        case 2: keep_id(gi, count(ost_graph_add_buffer(g, name(), size(), &id)), id); break;
        case 3: keep_id(gi, count(ost_graph_add_view(g, name(), id_for(gi), 4 * below(512), size(), &id)), id); break;
        case 4: {
            ost_param params[4];
            size_t n = below(5);
            for (size_t i = 0; i < n; i++) {
                params[i].name = name();
                uint32_t kinds[] = {OST_PARAM_READ, OST_PARAM_WRITE, OST_PARAM_READ_WRITE, OST_PARAM_INFER, OST_PARAM_READ | OST_PARAM_VOUCHED, OST_U32, OST_F32, 99};
                params[i].kind = kinds[below(8)];
            }
            keep_id(gi, count(ost_graph_add_kernel(g, name(), n ? params : NULL, n, &id)), id);
            break;
        }
        case 5: count(ost_graph_set_kernel_impl(g, id_for(gi), BACKENDS[below(8)], SOURCES[below(7)], below(2) ? NULL : name())); break;
        case 6: keep_id(gi, count(ost_graph_add_slot(g, name(), below(2) ? ost_scalar_u32(7) : ost_scalar_f64(2.0), &id)), id); break;
        case 7: {
            uint32_t grid[3] = {(uint32_t)(1 + below(3)), (uint32_t)(below(8) ? 1 : below(3)), 1};
            uint32_t block[3] = {(uint32_t)(below(4) ? 256 : next()), 1, 1};
            ost_arg args[6];
            size_t n = below(7);
            for (size_t i = 0; i < n; i++) args[i] = arg(gi);
            uint32_t after[2] = {id_for(gi), id_for(gi)};
            keep_id(gi, count(ost_graph_add_launch(g, id_for(gi), grid, block, (uint32_t)(below(8) ? 0 : next()), n ? args : NULL, n, after, below(3), &id)), id);
            break;
        }
        case 8: keep_id(gi, count(ost_graph_add_copy(g, slice(gi), slice(gi), NULL, 0, &id)), id); break;
        case 9: keep_id(gi, count(ost_graph_add_fill(g, slice(gi), (uint32_t)next(), NULL, 0, &id)), id); break;
        case 10: count(ost_graph_add_edge(g, id_for(gi), id_for(gi))); break;
        case 11: keep_id(gi, count(ost_graph_buffer_id(g, name(), &id)), id); break;
        default: count(ost_graph_kernel_may_alias(g, id_for(gi), name(), name())); break;
    }
}

static void exec_call(void) {
    ost_exec *e = (ost_exec *)pick((void **)execs);
    unsigned char buf[256];
    switch (below(10)) {
        case 0: count(ost_plan_compile((ost_graph *)pick((void **)graphs), &plans[below(POOL)])); break;
        case 1: {
            ost_exec_options o;
            memset(&o, 0, sizeof o);
            o.host_threads = (uint32_t)below(4);
            const char *fusion[] = {NULL, "auto", "on", "off", "sometimes"};
            o.fusion = fusion[below(5)];
            const char *settings[] = {NULL, "", "pdl=off", "ordering=barrier,mode=eager", "pdl=maybe", "ordering"};
            o.settings = settings[below(6)];
            o.wait_timeout_ms = below(2) ? 0 : 1 + below(2000);
            const char *backend = BACKENDS[below(8)];
            if (strcmp(backend, "vulkan") == 0 && below(4)) backend = "host"; /* Vulkan instantiation is slow: now and then */
            count(ost_exec_create_ex((ost_plan *)pick((void **)plans), backend, below(2) ? &o : NULL, NULL, 0, &execs[below(POOL)]));
            break;
        }
        case 2: count(ost_exec_replay(e, (uint32_t)below(3))); break;
        case 3: count(ost_exec_wait(e)); break;
        case 4: count(ost_exec_set_slot_u32(e, name(), (uint32_t)(below(2) ? below(4096) : next()))); break;
        /* Lengths no array can have (SIZE_MAX, 2**63) now and then: refused before any slice is made. */
        case 5: count(ost_exec_read(e, name(), below(4) ? 4 * below(64) : next(), buf, below(16) ? below(257) : SIZE_MAX >> below(2))); break;
        case 6: memset(buf, (int)below(256), sizeof buf); count(ost_exec_write(e, name(), below(4) ? 4 * below(64) : next(), buf, below(16) ? below(257) : SIZE_MAX >> below(2))); break;
        case 7: count(ost_exec_rebind(e, name(), next(), size())); break;
        case 8: {
            size_t n;
            count(ost_plan_edge_count((ost_plan *)pick((void **)plans), &n));
            break;
        }
        default:
            switch (below(3)) {
                case 0: count(ost_exec_free(e)); break;
                case 1: count(ost_plan_free((ost_plan *)pick((void **)plans))); break;
                default: count(ost_graph_free((ost_graph *)pick((void **)graphs))); break;
            }
    }
}

/* Records `mix` nodes over two buffers (never overlapping within a node), runs them on the host and
 * on Vulkan, and compares every byte. Returns 1 on a difference. */
static int differential(void) {
    ost_graph *g = NULL;
    uint32_t a, b, k, s, node;
    if (ost_graph_new(&g) != OST_OK) return 0;
    ost_graph_add_buffer(g, "a", 4096, &a);
    ost_graph_add_buffer(g, "b", 2048, &b);
    const ost_param params[] = {{"out", OST_PARAM_READ_WRITE}, {"inp", OST_PARAM_READ}, {"n_out", OST_U32}, {"n_in", OST_U32}, {"salt", OST_U32}};
    ost_graph_add_kernel(g, "mix", params, 5, &k);
    ost_graph_set_kernel_impl(g, k, "host", "builtin:mix", NULL);
    ost_graph_set_kernel_impl(g, k, "vulkan", "builtin:mix", NULL);
    ost_graph_add_slot(g, "salt", ost_scalar_u32((uint32_t)below(100)), &s);
    for (int i = 0, n = (int)(2 + below(12)); i < n; i++) {
        uint32_t out = below(2) ? a : b, inp = out == a ? b : a;
        uint64_t out_bytes = out == a ? 4096 : 2048, in_bytes = inp == a ? 4096 : 2048;
        uint64_t oo = 4 * below(out_bytes / 8), ol = 4 * (1 + below((out_bytes - oo) / 4));
        uint64_t io = 4 * below(in_bytes / 8), il = 4 * (1 + below((in_bytes - io) / 4));
        ost_arg args[5];
        memset(args, 0, sizeof args);
        args[0].kind = OST_ARG_BUFFER; args[0].slice.buffer = out; args[0].slice.offset = oo; args[0].slice.len = ol;
        args[1].kind = OST_ARG_BUFFER; args[1].slice.buffer = inp; args[1].slice.offset = io; args[1].slice.len = il;
        args[2].kind = OST_ARG_SCALAR; args[2].scalar = ost_scalar_u32((uint32_t)(ol / 4));
        args[3].kind = OST_ARG_SCALAR; args[3].scalar = ost_scalar_u32((uint32_t)(il / 4));
        args[4].kind = below(2) ? OST_ARG_SLOT : OST_ARG_SCALAR; args[4].slot = s; args[4].scalar = ost_scalar_u32((uint32_t)next());
        const uint32_t grid[3] = {(uint32_t)(1 + below(3)), 1, 1}, block[3] = {64, 1, 1};
        count(ost_graph_add_launch(g, k, grid, block, 0, args, 5, NULL, 0, &node));
    }
    ost_plan *p = NULL;
    int differ = 0;
    if (count(ost_plan_compile(g, &p)) == OST_OK) {
        ost_exec *host = NULL, *vk = NULL;
        static unsigned char init[4096], h[4096], v[4096];
        for (size_t i = 0; i < sizeof init; i++) init[i] = (unsigned char)next();
        if (count(ost_exec_create(p, "host", &host)) == OST_OK && ost_exec_create(p, "vulkan", &vk) == OST_OK) {
            const char *bufs[] = {"a", "b"};
            for (int i = 0; i < 2; i++) {
                ost_exec_write(host, bufs[i], 0, init, i ? 2048 : 4096);
                ost_exec_write(vk, bufs[i], 0, init, i ? 2048 : 4096);
            }
            for (int r = 0; r < 2; r++) {
                uint32_t salt = (uint32_t)next();
                count(ost_exec_set_slot_u32(host, "salt", salt));
                count(ost_exec_set_slot_u32(vk, "salt", salt));
                count(ost_exec_replay(host, 1));
                count(ost_exec_replay(vk, 1));
            }
            for (int i = 0; i < 2 && !differ; i++) {
                size_t len = i ? 2048 : 4096;
                if (count(ost_exec_read(host, bufs[i], 0, h, len)) == OST_OK && count(ost_exec_read(vk, bufs[i], 0, v, len)) == OST_OK) {
                    differ = memcmp(h, v, len) != 0;
                }
            }
        }
        ost_exec_free(host);
        ost_exec_free(vk);
        ost_plan_free(p);
    }
    ost_graph_free(g);
    return differ;
}

static void sequence(uint64_t seed) {
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    memset(&t, 0, sizeof t);
    for (int i = 0, n = (int)(10 + below(60)); i < n; i++) {
        if (below(2)) graph_call(); else exec_call();
    }
    if (seed % 3 == 0) t.mismatch = (uint64_t)differential();
    for (int i = 0; i < POOL; i++) {
        ost_exec_free(execs[i]);
        ost_plan_free(plans[i]);
        ost_graph_free(graphs[i]);
        nids[i] = 0;
    }
}

int main(int argc, char **argv) {
    long sequences = argc > 1 ? atol(argv[1]) : 1000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    uint64_t calls = 0, refused = 0, panicked = 0, aborted = 0, mismatched = 0, ran = 0;
    for (long s = 0; s < sequences; s++) {
        int fd[2];
        if (pipe(fd) != 0) { perror("pipe"); return 2; }
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            close(fd[0]);
            sequence(seed * 1000003u + (uint64_t)s);
            ssize_t w = write(fd[1], &t, sizeof t);
            _exit(w == (ssize_t)sizeof t ? 0 : 3);
        }
        close(fd[1]);
        tally got;
        ssize_t r = read(fd[0], &got, sizeof got);
        close(fd[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) || r != (ssize_t)sizeof got) {
            aborted++;
            fprintf(stderr, "sequence %ld (seed %llu) died: %s %d\n", s, (unsigned long long)seed, WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            continue;
        }
        ran++;
        calls += got.calls;
        refused += got.refused;
        panicked += got.panics;
        mismatched += got.mismatch;
        if (got.panics || got.mismatch) fprintf(stderr, "sequence %ld (seed %llu): %llu panics, mismatch %llu\n", s, (unsigned long long)seed, (unsigned long long)got.panics, (unsigned long long)got.mismatch);
    }
    printf("C call sequences: %ld (seed %llu): %llu ran to the end (%llu calls, %llu refused with a status), %llu panicked, %llu aborted, %llu mismatched\n", sequences,
           (unsigned long long)seed, (unsigned long long)ran, (unsigned long long)calls, (unsigned long long)refused, (unsigned long long)panicked, (unsigned long long)aborted,
           (unsigned long long)mismatched);
    return (panicked || aborted || mismatched) ? 1 : 0;
}
