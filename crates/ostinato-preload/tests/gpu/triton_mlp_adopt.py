"""A PyTorch program that captures its Triton MLP with torch.cuda.CUDAGraph, unchanged, run under the
graph-API interposer (LD_PRELOAD=libostinato_preload.so): the interposer adopts the captured graph and
gives its kernels the programmatic (PDL) edges the capture never had, since each kernel calls
`gdc_wait()` before it touches memory.

Every kernel is Triton (RMSNorm, the gate, up and down GEMVs, SiLU·mul, the residual add summing the
down projection's K-splits; 8 layers of 6 kernels, 4 tokens, hidden 1024, intermediate 2816, bf16
weights and activations, f32 GEMV outputs), so the interposer reads every kernel's
code: Triton loads each as a cubin, and its PTX is found beside that cubin in Triton's cache.

The same step is captured three times in one process — with adoption switched off
(`ostinato_preload_set_adopt(0)`, the native replay), on (the adopted replay), and off again with every
kernel launched with `launch_pdl=True` (the expert's capture, programmatic edges written by hand) —
its results compared bit for bit with eager, and the replays timed side by side (µs per replay of back-to-back replays,
median of bursts, arm order rotated over rounds). Where OSTINATO_PRELOAD_LOG names the interposer's log,
each graph's line is read back and summarised: the native one must be `off`, the adopted one `adopted`
with programmatic edges.

    LD_PRELOAD=.devbin/libostinato_preload.so OSTINATO_PRELOAD_LOG=mlp.jsonl \\
        python3 crates/ostinato-preload/tests/gpu/triton_mlp_adopt.py [--json out.json]
"""

import argparse
import json
import os
import platform

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from adopt_common import adoption_switch, instantiate_lines, print_graphs, print_rows, side_by_side, summary, warm_up


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr, TRIGGER: tl.constexpr):
    gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * n + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gemv_kernel(x_ptr, w_ptr, y_ptr, tokens, n, k, k_split,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TOKENS: tl.constexpr, PREFETCH: tl.constexpr,
                TRIGGER: tl.constexpr):
    """Split s = program_id(1) of y = x · Wᵀ: y[s, t, :n] = W[:n, ks] · x[t, ks] over ks = [s·k_split,
    (s+1)·k_split), in f32, for each of `tokens` rows (padded to TOKENS for the dot). With PREFETCH the
    first weight tile is loaded before the wait (weights are written by no kernel of the graph); with
    TRIGGER the next kernel may launch once every program has passed its wait."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(1)
    toks = tl.arange(0, TOKENS)
    start = split * k_split
    end = tl.minimum(k, (split + 1) * k_split)
    acc = tl.zeros([BLOCK_N, TOKENS], dtype=tl.float32)
    if PREFETCH:
        cols = start + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * k + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < end), other=0.0)
        gdc_wait()
        x = tl.load(x_ptr + toks[None, :] * k + cols[:, None], mask=(toks[None, :] < tokens) & (cols[:, None] < end), other=0.0)
        acc = tl.dot(w, x, acc)
        start += BLOCK_K
    else:
        gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    for k0 in range(start, end, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * k + cols[None, :], mask=(rows[:, None] < n) & (cols[None, :] < end), other=0.0)
        x = tl.load(x_ptr + toks[None, :] * k + cols[:, None], mask=(toks[None, :] < tokens) & (cols[:, None] < end), other=0.0)
        acc = tl.dot(w, x, acc)
    out = y_ptr + split * tokens * n + toks[None, :] * n + rows[:, None]
    tl.store(out, acc, mask=(rows[:, None] < n) & (toks[None, :] < tokens))


@triton.jit
def silu_mul_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr, TRIGGER: tl.constexpr):
    gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate_ptr + offs, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def residual_add_kernel(x_ptr, d_ptr, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr, TRIGGER: tl.constexpr):
    """x += the sum of the down projection's SPLITS partials (f32, in split order)."""
    gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for s in tl.static_range(SPLITS):
        acc += tl.load(d_ptr + s * n + offs, mask=mask)
    tl.store(x_ptr + offs, acc.to(x_ptr.dtype.element_ty), mask=mask)


def gemv(x, w, y, m, splits, pdl):
    """y[s] = the s-th K-split of x · Wᵀ (f32), for `splits` splits."""
    tokens, k = x.shape
    n = w.shape[0]
    block_k = m["block_k"]
    k_split = triton.cdiv(triton.cdiv(k, splits), block_k) * block_k
    gemv_kernel[(triton.cdiv(n, m["block_n"]), splits)](x, w, y, tokens, n, k, k_split, BLOCK_N=m["block_n"], BLOCK_K=block_k,
                                                        TOKENS=16, PREFETCH=m["prefetch"], TRIGGER=m["trigger"], launch_pdl=pdl)


def step(m, pdl=False):
    """One pass through every layer's MLP block: x += down(silu(gate(norm(x))) * up(norm(x))). `pdl`: every
    kernel launched with `launch_pdl` (the expert's capture: programmatic edges written by hand)."""
    x, h, gate, up, act, down = m["x"], m["h"], m["gate"], m["up"], m["act"], m["down"]
    tokens, hidden = x.shape
    inter = gate.shape[1]
    splits = m["splits"]
    for layer in m["layers"]:
        rmsnorm_kernel[(tokens,)](x, layer["norm"], h, hidden, 1e-5, BLOCK=triton.next_power_of_2(hidden), TRIGGER=m["trigger"], launch_pdl=pdl)
        gemv(h, layer["wg"], gate, m, 1, pdl)
        gemv(h, layer["wu"], up, m, 1, pdl)
        silu_mul_kernel[(triton.cdiv(tokens * inter, 1024),)](gate, up, act, tokens * inter, BLOCK=1024, TRIGGER=m["trigger"], launch_pdl=pdl)
        gemv(act, layer["wd"], down, m, splits, pdl)
        residual_add_kernel[(triton.cdiv(tokens * hidden, 1024),)](x, down, tokens * hidden, SPLITS=splits, BLOCK=1024, TRIGGER=m["trigger"], launch_pdl=pdl)


def model(tokens, hidden, inter, layers, block_n, block_k, splits, prefetch, trigger, seed=0):
    torch.manual_seed(seed)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    f32 = dict(device="cuda", dtype=torch.float32)
    m = {"block_n": block_n, "block_k": block_k, "splits": splits, "prefetch": prefetch, "trigger": trigger}
    m.update({name: torch.empty(tokens, width, **bf16) for name, width in [("x", hidden), ("h", hidden), ("act", inter)]})
    m.update({"gate": torch.empty(tokens, inter, **f32), "up": torch.empty(tokens, inter, **f32), "down": torch.empty(splits, tokens, hidden, **f32)})
    m["x0"] = torch.randn(tokens, hidden, **bf16)
    m["layers"] = [{
        "norm": 1 + 0.1 * torch.randn(hidden, **bf16),
        "wg": torch.randn(inter, hidden, **bf16) * hidden ** -0.5,
        "wu": torch.randn(inter, hidden, **bf16) * hidden ** -0.5,
        "wd": torch.randn(hidden, inter, **bf16) * inter ** -0.5,
    } for _ in range(layers)]
    return m


def result_of(m, replay):
    """x after one replay from x0."""
    m["x"].copy_(m["x0"])
    torch.cuda.synchronize()
    replay()
    torch.cuda.synchronize()
    return m["x"].clone()


def capture(m, pdl=False):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(m, pdl)
    return graph


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--block-n", type=int, default=16, help="weight rows per GEMV program (16, 32, 64, ...)")
    ap.add_argument("--block-k", type=int, default=128, help="weight columns per GEMV tile")
    ap.add_argument("--splits", type=int, default=4, help="K-splits of the down projection (summed by the residual add)")
    ap.add_argument("--prefetch", action="store_true", help="GEMVs load their first weight tile before gdc_wait()")
    ap.add_argument("--trigger", action="store_true", help="every kernel calls gdc_launch_dependents() after its wait")
    ap.add_argument("--replays", type=int, default=200, help="replays per timed burst")
    ap.add_argument("--bursts", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="triton_mlp_adopt.json")
    args = ap.parse_args()
    if not 1 <= args.tokens <= 16:
        raise SystemExit("--tokens: 1 to 16 (the GEMV pads the tokens to 16 for its dot)")
    if any(b < 16 or b & (b - 1) for b in (args.block_n, args.block_k)) or args.splits < 1:
        raise SystemExit("--block-n, --block-k: powers of two, at least 16 (the dot's shape); --splits: at least 1")

    set_adopt = adoption_switch()

    m = model(args.tokens, args.hidden, args.inter, args.layers, args.block_n, args.block_k, args.splits, args.prefetch, args.trigger)
    want = result_of(m, lambda: step(m))  # eager; compiles every kernel
    warm_up(lambda: step(m))

    log = os.environ.get("OSTINATO_PRELOAD_LOG")
    seen = len(instantiate_lines(log))
    native = capture(m)
    set_adopt(1)
    adopted = capture(m)
    set_adopt(0)
    expert = capture(m, pdl=True)
    lines = instantiate_lines(log)[seen:]

    arms = {"torch.cuda.CUDAGraph, native": native.replay, "torch.cuda.CUDAGraph, adopted": adopted.replay,
            "native, launch_pdl=True (expert)": expert.replay}
    results = {name: result_of(m, fn) for name, fn in arms.items()}
    rows = side_by_side(arms, args.replays, args.bursts, args.rounds)
    for row in rows:
        row["bitwise_equal_to_eager"] = bool(torch.equal(results[row["arm"]], want))
    base = rows[0]["us_per_replay"]
    graphs = [summary(line) for line in lines]
    print("Triton MLP: %d layers x 6 kernels, %d tokens, hidden %d, intermediate %d, bf16 (GEMV: %d x %d tiles%s, down in %d K-splits)"
          % (args.layers, args.tokens, args.hidden, args.inter, args.block_n, args.block_k, ", first prefetched before the wait" if args.prefetch else "", args.splits)
          + ("; every kernel triggers its dependents after its wait" if args.trigger else ""))
    print_graphs(graphs, ("native", "adopted", "expert (launch_pdl)"))
    print_rows(rows, {row["arm"]: "bitwise equal to eager" if row["bitwise_equal_to_eager"] else "DIFFERS from eager" for row in rows})
    report = {
        "workload": {"layers": args.layers, "kernels_per_layer": 6, "tokens": args.tokens, "hidden": args.hidden,
                     "intermediate": args.inter, "dtype": "bfloat16",
                     "gemv_tile": [args.block_n, args.block_k], "down_k_splits": args.splits,
                     "prefetch_before_wait": args.prefetch,
                     "launch_dependents_after_wait": args.trigger},
        "protocol": {"replays_per_burst": args.replays, "bursts_per_round": args.bursts, "rounds": args.rounds,
                     "statistic": "median of bursts", "clock": "time.perf_counter around back-to-back replays and a device synchronize"},
        "graphs": graphs,
        "provenance": {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                       "triton": triton.__version__, "python": platform.python_version()},
        "rows": rows,
        "adopted_vs_native": base / rows[1]["us_per_replay"],
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", args.json)
    if not all(row["bitwise_equal_to_eager"] for row in rows):
        raise SystemExit("a replay's result differs from eager's")
    if log:
        if len(graphs) != 3:
            raise SystemExit(f"the log has {len(graphs)} instantiate lines for the three captures, not 3")
        if graphs[0]["adoption"] != "off":
            raise SystemExit(f"the native capture was adopted: {graphs[0]}")
        if graphs[1]["adoption"] != "adopted" or graphs[1]["programmatic_edges"] == 0:
            raise SystemExit(f"the second capture was not adopted with programmatic edges: {json.dumps(graphs[1], indent=1)}")


if __name__ == "__main__":
    main()
