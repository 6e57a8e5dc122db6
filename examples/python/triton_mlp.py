"""The MLP blocks of a decoder stack, as a PyTorch user writes them — Triton kernels for the RMSNorm, the
gated activation and the residual add, torch.matmul (cuBLAS) for the gate, up and down projections —
run from one step function three ways in this process:

  * eager: the Triton launches and torch ops as they are;
  * torch.cuda.CUDAGraph: the same step captured by PyTorch (one stream, so in the order it was written);
  * Ostinato: the same step recorded as a graph (`Graph.triton`, `Graph.torch`): access from the Triton
    kernels' PTX and the declared tensors, so the gate and up projections become parallel branches, and
    the Triton kernels, which call `gdc_wait()` before touching memory, get programmatic (PDL) edges
    where one follows another.

It checks that Ostinato's result equals the CUDAGraph's bit for bit (the same captured and compiled
kernels on the same inputs) and reports each arm's agreement with eager (bitwise, or the largest
difference), then times µs per replay (back-to-back replays, median of bursts, arm order rotated), prints
a table and writes JSON.

    python3 examples/python/triton_mlp.py [--tokens 4] [--hidden 1024] [--inter 2816] [--layers 8] [--json out.json]
"""

import argparse
import json
import platform
import statistics
import time

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

import ostinato


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    gdc_wait()
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * n + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_mul_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr):
    gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate_ptr + offs, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def residual_add_kernel(x_ptr, d_ptr, n, BLOCK: tl.constexpr):
    gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    d = tl.load(d_ptr + offs, mask=mask).to(tl.float32)
    tl.store(x_ptr + offs, (x + d).to(x_ptr.dtype.element_ty), mask=mask)


class Eager:
    """Runs the step's work as it is written (what torch.cuda.graph captures)."""

    @staticmethod
    def triton(kernel, grid, *args, **kwargs):
        kernel[grid](*args, **kwargs)

    @staticmethod
    def torch(fn, reads, writes):
        fn()


def step(run, m):
    """One pass through every layer's MLP block: x += down(silu(gate(norm(x))) * up(norm(x))). `run` is
    `Eager` or an `ostinato.Graph` (which records instead of running)."""
    x, h, gate, up, act, down = m["x"], m["h"], m["gate"], m["up"], m["act"], m["down"]
    tokens, hidden = x.shape
    inter = gate.shape[1]
    for layer in m["layers"]:
        run.triton(rmsnorm_kernel, (tokens,), x, layer["norm"], h, hidden, 1e-5, BLOCK=triton.next_power_of_2(hidden))
        # Two projections of h, independent of each other (HF Llama's gate_proj and up_proj).
        run.torch(lambda w=layer["wg"]: torch.matmul(h, w.t(), out=gate), reads=[h, layer["wg"]], writes=[gate])
        run.torch(lambda w=layer["wu"]: torch.matmul(h, w.t(), out=up), reads=[h, layer["wu"]], writes=[up])
        run.triton(silu_mul_kernel, (triton.cdiv(tokens * inter, 1024),), gate, up, act, tokens * inter, BLOCK=1024)
        run.torch(lambda w=layer["wd"]: torch.matmul(act, w.t(), out=down), reads=[act, layer["wd"]], writes=[down])
        run.triton(residual_add_kernel, (triton.cdiv(tokens * hidden, 1024),), x, down, tokens * hidden, BLOCK=1024)


def model(tokens, hidden, inter, layers, seed=0):
    torch.manual_seed(seed)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    m = {
        "x0": torch.randn(tokens, hidden, **bf16),
        "x": torch.empty(tokens, hidden, **bf16),
        "h": torch.empty(tokens, hidden, **bf16),
        "gate": torch.empty(tokens, inter, **bf16),
        "up": torch.empty(tokens, inter, **bf16),
        "act": torch.empty(tokens, inter, **bf16),
        "down": torch.empty(tokens, hidden, **bf16),
        "layers": [],
    }
    for _ in range(layers):
        m["layers"].append({
            "norm": 1 + 0.1 * torch.randn(hidden, **bf16),
            "wg": torch.randn(inter, hidden, **bf16) * hidden ** -0.5,
            "wu": torch.randn(inter, hidden, **bf16) * hidden ** -0.5,
            "wd": torch.randn(hidden, inter, **bf16) * inter ** -0.5,
        })
    return m


def result_of(m, replay):
    """x after one replay from x0."""
    m["x"].copy_(m["x0"])
    torch.cuda.synchronize()
    replay()
    torch.cuda.synchronize()
    return m["x"].clone()


def per_replay_us(replay, wait, count, bursts):
    """µs per replay of `count` back-to-back replays, one sample per burst."""
    out = []
    for _ in range(bursts):
        wait()
        t0 = time.perf_counter()
        for _ in range(count):
            replay()
        wait()
        out.append((time.perf_counter() - t0) / count * 1e6)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--replays", type=int, default=200, help="replays per timed burst")
    ap.add_argument("--bursts", type=int, default=15)
    ap.add_argument("--json", default="triton_mlp.json")
    args = ap.parse_args()
    m = model(args.tokens, args.hidden, args.inter, args.layers)

    # Eager, the reference.
    want = result_of(m, lambda: step(Eager, m))

    # torch.cuda.CUDAGraph: warm up on a side stream, then capture the same step.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(Eager, m)
    torch.cuda.current_stream().wait_stream(side)
    torch_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(torch_graph):
        step(Eager, m)

    # Ostinato: the same step recorded; replays on PyTorch's current stream.
    g = ostinato.Graph()
    step(g, m)
    plan = g.plan()
    stream = torch.cuda.current_stream()
    execs = {"ostinato": plan.instantiate("cuda", stream=stream), "ostinato, pdl=off": plan.instantiate("cuda", stream=stream, pdl="off")}

    arms = {"eager (PyTorch + Triton launches)": lambda: step(Eager, m), "torch.cuda.CUDAGraph": torch_graph.replay}
    arms.update({name: ex.replay for name, ex in execs.items()})
    results = {name: result_of(m, fn) for name, fn in arms.items()}
    sync = torch.cuda.synchronize

    samples = {name: [] for name in arms}
    names = list(arms)
    for r in range(3):  # arm order rotated per round
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            per_replay_us(arms[name], sync, 10, 1)  # warm
            samples[name] += per_replay_us(arms[name], sync, args.replays, args.bursts)

    graph_result = results["torch.cuda.CUDAGraph"]
    rows = []
    for name in names:
        got = results[name]
        rows.append({
            "arm": name,
            "us_per_replay": statistics.median(samples[name]),
            "min_us": min(samples[name]),
            "samples_us": samples[name],
            "bitwise_equal_to_eager": bool(torch.equal(got, want)),
            "bitwise_equal_to_cudagraph": bool(torch.equal(got, graph_result)),
            "max_abs_diff_to_eager": float((got.float() - want.float()).abs().max()),
        })
    base = rows[1]["us_per_replay"]
    print("MLP blocks: %d layers, %d tokens, hidden %d, intermediate %d, bf16; Ostinato plan: %d nodes, %d edges (%s)"
          % (args.layers, args.tokens, args.hidden, args.inter, plan.nodes, len(plan.edges), "; ".join(execs["ostinato"].notes)))
    print("%-36s %12s %10s %12s %16s" % ("arm", "µs/replay", "min µs", "vs CUDAGraph", "equal to eager"))
    for row in rows:
        eq = "bitwise" if row["bitwise_equal_to_eager"] else "max |Δ| %.3g" % row["max_abs_diff_to_eager"]
        print("%-36s %12.2f %10.2f %11.2fx %16s" % (row["arm"], row["us_per_replay"], row["min_us"], base / row["us_per_replay"], eq))
    report = {
        "workload": {"layers": args.layers, "tokens": args.tokens, "hidden": args.hidden, "intermediate": args.inter, "dtype": "bfloat16"},
        "protocol": {"replays_per_burst": args.replays, "bursts_per_round": args.bursts, "rounds": 3, "statistic": "median of bursts",
                     "clock": "time.perf_counter around back-to-back replays and a device synchronize"},
        "plan": {"nodes": plan.nodes, "edges": plan.edges, "notes": execs["ostinato"].notes, "notes_pdl_off": execs["ostinato, pdl=off"].notes},
        "provenance": {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                       "triton": triton.__version__, "python": platform.python_version()},
        "rows": rows,
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", args.json)
    # The graphs replay the same captured and compiled kernels: Ostinato's result must equal the
    # CUDAGraph's bit for bit. Eager calls cuBLAS outside a capture, where it may pick another algorithm:
    # it must agree within bf16 rounding of the stack's output.
    scale = float(want.float().abs().max())
    if not all(r["bitwise_equal_to_cudagraph"] for r in rows[1:]):
        raise SystemExit("an Ostinato result differs from torch.cuda.CUDAGraph's")
    if any(r["max_abs_diff_to_eager"] > 2e-2 * scale for r in rows):
        raise SystemExit("a graph's result differs from eager's beyond bf16 rounding")


if __name__ == "__main__":
    main()
