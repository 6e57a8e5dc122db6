/* Freeing a Vulkan exec with replays in flight: `ost_exec_free` waits for them before it frees
 * anything the device may still use (it used to free the buffers under the running replays and corrupt
 * the heap; with `ordering=timeline` lavapipe's queue thread crashed). Records 50 dependent `mix` nodes
 * over two 1 MiB buffers, then for every replay ordering, on one queue and on the plan's lanes, fused
 * and not, replays three times and frees the exec without waiting, five times over; then checks that a
 * new exec on the freed memory computes the right words. Run it under the Khronos validation layer too
 * (`VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation`). Prints SKIP and exits 0 where no Vulkan device is
 * found. */
#include <ostinato.h>
#include <stdio.h>
#include <stdlib.h>

#define WORDS (256u * 1024u)

#define CHECK(call)                                                                          \
    do {                                                                                     \
        ost_status s_ = (call);                                                              \
        if (s_ != OST_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, ost_status_name((int)s_), \
                    ost_last_error());                                                       \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(void) {
    ost_graph *g = NULL;
    uint32_t a, b, mix, node;
    CHECK(ost_graph_new(&g));
    CHECK(ost_graph_add_buffer(g, "a", 4 * WORDS, &a));
    CHECK(ost_graph_add_buffer(g, "b", 4 * WORDS, &b));
    const ost_param params[] = {
        {"out", OST_PARAM_READ_WRITE}, {"inp", OST_PARAM_READ}, {"n_out", OST_U32}, {"n_in", OST_U32}, {"salt", OST_U32},
    };
    CHECK(ost_graph_add_kernel(g, "mix", params, 5, &mix));
    CHECK(ost_graph_set_kernel_impl(g, mix, "vulkan", "builtin:mix", NULL));
    const uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
    for (uint32_t i = 0; i < 50; i++) {
        ost_arg args[5] = {{0}};
        args[0].kind = OST_ARG_BUFFER; args[0].slice = (ost_slice){i % 2 ? b : a, 0, OST_WHOLE};
        args[1].kind = OST_ARG_BUFFER; args[1].slice = (ost_slice){i % 2 ? a : b, 0, OST_WHOLE};
        args[2].kind = OST_ARG_SCALAR; args[2].scalar = ost_scalar_u32(WORDS);
        args[3].kind = OST_ARG_SCALAR; args[3].scalar = ost_scalar_u32(WORDS);
        args[4].kind = OST_ARG_SCALAR; args[4].scalar = ost_scalar_u32(i);
        CHECK(ost_graph_add_launch(g, mix, grid, block, 0, args, 5, NULL, 0, &node));
    }
    ost_plan *plan = NULL;
    CHECK(ost_plan_compile(g, &plan));
    CHECK(ost_graph_free(g));

    ost_exec *e = NULL;
    ost_status s = ost_exec_create(plan, "vulkan", &e);
    if (s == OST_ERR_BACKEND) {
        printf("SKIP vulkan_free: %s\n", ost_last_error());
        CHECK(ost_plan_free(plan));
        return 0;
    }
    CHECK(s);
    CHECK(ost_exec_free(e));
    uint32_t *words = calloc(WORDS, 4);
    if (!words) return 1;
    const char *settings[] = {"ordering=skip", "ordering=timeline", "ordering=barrier", "ordering=events", "queues=lanes"};
    const char *fusions[] = {"auto", "off"};
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        for (size_t fi = 0; fi < 2; fi++) {
            ost_exec_options o = {0};
            o.settings = settings[si];
            o.fusion = fusions[fi];
            for (int round = 0; round < 5; round++) {
                /* Which exec of the fifty could not be made (a driver that stops making instances). */
                if (ost_exec_create_ex(plan, "vulkan", &o, NULL, 0, &e) != OST_OK) {
                    fprintf(stderr, "%s:%d: exec %zu of 50 (%s, fusion %s): %s\n", __FILE__, __LINE__,
                            10 * si + 5 * fi + (size_t)round + 1, settings[si], fusions[fi], ost_last_error());
                    return 1;
                }
                CHECK(ost_exec_write(e, "a", 0, words, 4 * WORDS));
                CHECK(ost_exec_write(e, "b", 0, words, 4 * WORDS));
                CHECK(ost_exec_replay(e, 3));
                CHECK(ost_exec_free(e)); /* no wait: the free waits for the three replays */
            }
        }
    }
    /* One replay from zeros, waited and read: node i adds i to every word of the buffer it writes. */
    CHECK(ost_exec_create(plan, "vulkan", &e));
    CHECK(ost_exec_write(e, "a", 0, words, 4 * WORDS));
    CHECK(ost_exec_write(e, "b", 0, words, 4 * WORDS));
    CHECK(ost_exec_replay(e, 1));
    CHECK(ost_exec_wait(e));
    CHECK(ost_exec_read(e, "b", 0, words, 4 * WORDS));
    uint32_t wa = 0, wb = 0;
    for (uint32_t i = 0; i < 50; i++) {
        if (i % 2) wb = wb * 3u + wa + i; else wa = wa * 3u + wb + i;
    }
    for (uint32_t i = 0; i < WORDS; i++) {
        if (words[i] != wb) { fprintf(stderr, "word %u of b: %u, want %u\n", i, words[i], wb); return 1; }
    }
    CHECK(ost_exec_free(e));
    CHECK(ost_plan_free(plan));
    free(words);
    printf("vulkan_free: 50 execs freed with replays in flight (5 orderings and lanes, fused and not)\n");
    return 0;
}
