#!/usr/bin/env python3
"""Room on an SM for the next kernel of the Llama-3.2-1B step: at each kernel boundary, how many of the
consumer's blocks fit on an SM beside the producer's blocks that hold it, by the per-SM limits of an
H100/H200 (compute capability 9.0) and each kernel's registers and shared memory as ptxas built them.

A consumer launched early on a programmatic edge can request its bytes before its wait only once one
of its blocks is resident; where none fits beside the producer's, that request starts when the
producer's blocks leave. The launch geometry is the step's (`crates/ostinato-llama/src/step.rs`) at the
1B's shape with 32 attention splits on 132 SMs.

    python3 lab/probes/llama_residency.py [BINARY]   (default .devbin/llama/bin/llama_kernels)

BINARY is any build of the pack's kernels with nvcc for sm_90 (scripts/build-devbin.sh builds the
decode probe's there); cuobjdump comes from PATH or .cuda/nvidia/cu13/bin.
"""
import os
import re
import shutil
import subprocess
import sys

# Per-SM limits of compute capability 9.0 (CUDA C++ Programming Guide, "Technical Specifications per
# Compute Capability"; the occupancy calculator's allocation rules).
REGS_PER_SM = 65536
REG_UNIT_PER_WARP = 256  # registers are allocated per warp in units of 256
SHARED_PER_SM = 228 * 1024
SHARED_RESERVED_PER_BLOCK = 1024
SHARED_UNIT = 128
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32
SMS = 132

KIB = 1024
# The 1B step's launches: (kernel, blocks, threads per block, dynamic shared bytes).
STREAM = 288
STAGES = 5 * 36 * KIB
NORM = 4 * 2048  # x * ln of one 2,048-column chunk, behind the stages (stream_norm_shared)
STEP = [
    ("llama_qkv", 384, 128, 0),
    ("llama_attn", 256, 256, 0),
    ("llama_o", 256, 256, 0),
    ("llama_ffn_in", 132, STREAM, STAGES + NORM),
    ("llama_down", 132, STREAM, STAGES),
    ("llama_qkv", 384, 128, 0),  # the next layer's
]


def cuobjdump():
    found = shutil.which("cuobjdump")
    local = os.path.join(".cuda", "nvidia", "cu13", "bin", "cuobjdump")
    return found or (local if os.path.exists(local) else sys.exit("no cuobjdump on PATH or in .cuda/"))


def resources(binary):
    """{kernel: (registers, static shared bytes)} from cuobjdump --dump-resource-usage."""
    run = subprocess.run([cuobjdump(), "--dump-resource-usage", binary], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"cuobjdump --dump-resource-usage {binary}: {run.stderr.strip()}")
    out = run.stdout
    found, name = {}, None
    for line in out.splitlines():
        m = re.search(r"Function ([A-Za-z_0-9]+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"REG:(\d+).*SHARED:(\d+)", line)
        if m and name:
            found[name] = (int(m.group(1)), int(m.group(2)))
            name = None
    return found


def regs_per_block(regs, threads):
    per_thread = -(-regs // 8) * 8
    warps = -(-threads // 32)
    return warps * (-(-per_thread * 32 // REG_UNIT_PER_WARP) * REG_UNIT_PER_WARP)


def shared_per_block(static, dynamic):
    return -(-(static + dynamic) // SHARED_UNIT) * SHARED_UNIT + SHARED_RESERVED_PER_BLOCK


def fits(held, block):
    """How many more blocks of `block` (regs, shared, threads) fit beside `held` (a list of blocks)."""
    used = [sum(b[i] for b in held) for i in range(3)]
    room = [REGS_PER_SM - used[0], SHARED_PER_SM - used[1], THREADS_PER_SM - used[2]]
    n = min(r // need if need else BLOCKS_PER_SM for r, need in zip(room, block))
    return max(0, min(n, BLOCKS_PER_SM - len(held)))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else ".devbin/llama/bin/llama_kernels"
    res = resources(binary)
    blocks = []
    print(f"{'kernel':14} {'regs':>4} {'regs/block':>10} {'shared/block':>12} {'alone/SM':>8} {'grid':>5} {'per SM':>6}")
    missing = sorted({name for name, *_ in STEP} - res.keys())
    if missing:
        sys.exit(f"{binary}: no resource usage for {', '.join(missing)} (is it a build of the pack's kernels?)")
    for name, grid, threads, dynamic in STEP:
        regs, static = res[name]
        b = (regs_per_block(regs, threads), shared_per_block(static, dynamic), threads)
        alone = fits([], b)
        per_sm = min(alone, -(-grid // SMS))
        blocks.append((name, b, per_sm))
        print(f"{name:14} {regs:4} {b[0]:10} {b[1] / KIB:10.1f} K {alone:8} {grid:5} {per_sm:6}")
    print()
    print("boundary                        consumer blocks that fit beside the producer's, by producer blocks left on the SM")
    for (p, pb, pn), (c, cb, _) in zip(blocks, blocks[1:]):
        row = ", ".join(f"{k} left: {fits([pb] * k, cb)}" for k in range(pn, -1, -1))
        print(f"{p:14} -> {c:14}  {row}")


if __name__ == "__main__":
    main()
