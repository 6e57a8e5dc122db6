// C++ over the C ABI: small RAII owners for the handles, a graph file loaded and replayed on a
// backend ("host" by default, or argv[1]) with its slot patched, checked against the host backend's
// replays of the same plan; and a graph recorded in code (a chain of add_one) checked against the
// arithmetic. Exit 0 on success.
#include <ostinato.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(ost_status s, const char *what) {
    if (s != OST_OK) throw std::runtime_error(std::string(what) + ": " + ost_status_name(s) + ": " + ost_last_error());
}

template <typename T, ost_status (*Free)(T *)>
struct Deleter {
    void operator()(T *p) const { (void)Free(p); }
};
using Graph = std::unique_ptr<ost_graph, Deleter<ost_graph, ost_graph_free>>;
using Plan = std::unique_ptr<ost_plan, Deleter<ost_plan, ost_plan_free>>;
using Exec = std::unique_ptr<ost_exec, Deleter<ost_exec, ost_exec_free>>;

Exec make_exec(const Plan &plan, const char *backend) {
    ost_exec *e = nullptr;
    check(ost_exec_create(plan.get(), backend, &e), "ost_exec_create");
    return Exec(e);
}

std::vector<unsigned char> run_mix(const Plan &plan, const char *backend) {
    Exec exec = make_exec(plan, backend);
    for (uint32_t r = 0; r < 10; r++) {
        check(ost_exec_set_slot_u32(exec.get(), "salt", 7 + r), "ost_exec_set_slot_u32");
        check(ost_exec_replay(exec.get(), 1), "ost_exec_replay");
    }
    check(ost_exec_wait(exec.get()), "ost_exec_wait");
    std::vector<unsigned char> a(4096);
    check(ost_exec_read(exec.get(), "a", 0, a.data(), a.size()), "ost_exec_read");
    return a;
}

}  // namespace

int main(int argc, char **argv) try {
    const char *backend = argc > 1 ? argv[1] : "host";
    const char *file = argc > 2 ? argv[2] : "examples/mix.toml";

    ost_graph *g = nullptr;
    check(ost_graph_load(file, &g), "ost_graph_load");
    Graph loaded(g);
    ost_plan *p = nullptr;
    check(ost_plan_compile(loaded.get(), &p), "ost_plan_compile");
    Plan mix(p);
    std::vector<unsigned char> want = run_mix(mix, "host"), got = run_mix(mix, backend);
    if (want != got) throw std::runtime_error(std::string(backend) + " differs from the host backend on " + file);

    // A chain recorded in code: 8 × add_one over 64 f32 (x[i] += 1 each), one slot for n.
    check(ost_graph_new(&g), "ost_graph_new");
    Graph chain(g);
    uint32_t x = 0, k = 0, n = 0, node = 0;
    check(ost_graph_add_buffer(chain.get(), "x", 256, &x), "ost_graph_add_buffer");
    const ost_param params[] = {{"x", OST_PARAM_READ_WRITE}, {"n", OST_U32}};
    check(ost_graph_add_kernel(chain.get(), "add_one", params, 2, &k), "ost_graph_add_kernel");
    for (const char *b : {"host", "cuda"}) check(ost_graph_set_kernel_impl(chain.get(), k, b, "builtin:add_one", nullptr), "ost_graph_set_kernel_impl");
    check(ost_graph_add_slot(chain.get(), "n", ost_scalar_u32(64), &n), "ost_graph_add_slot");
    ost_arg args[2] = {};
    args[0].kind = OST_ARG_BUFFER;
    args[0].slice = ost_slice{x, 0, OST_WHOLE};
    args[1].kind = OST_ARG_SLOT;
    args[1].slot = n;
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
    for (int i = 0; i < 8; i++) check(ost_graph_add_launch(chain.get(), k, grid, block, 0, args, 2, nullptr, 0, &node), "ost_graph_add_launch");
    check(ost_plan_compile(chain.get(), &p), "ost_plan_compile");
    Plan chain_plan(p);
    Exec exec = make_exec(chain_plan, backend);
    check(ost_exec_replay(exec.get(), 1), "ost_exec_replay");
    check(ost_exec_set_slot_u32(exec.get(), "n", 32), "ost_exec_set_slot_u32");   // the next replay: half
    check(ost_exec_replay(exec.get(), 1), "ost_exec_replay");
    float v[64];
    check(ost_exec_read(exec.get(), "x", 0, v, sizeof v), "ost_exec_read");
    for (int i = 0; i < 64; i++) {
        float w = i < 32 ? 16.0f : 8.0f;
        if (v[i] != w) throw std::runtime_error("x[" + std::to_string(i) + "] = " + std::to_string(v[i]) + ", want " + std::to_string(w));
    }
    std::printf("record.cpp on %s: %s matches the host backend; the recorded chain is right\n", backend, file);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "record.cpp: %s\n", e.what());
    return 1;
}
