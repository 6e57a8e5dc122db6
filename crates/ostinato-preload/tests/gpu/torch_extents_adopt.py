"""`ostinato.adopt(graph, allocations=...)` on a real PyTorch graph, under the interposer adopting only
the needed edges (LD_PRELOAD=libostinato_preload.so OSTINATO_PRELOAD_EDGES=needed):

  y1 = 2 x1; y2 = 3 x2; z = y1 + y2 (Triton kernels: the interposer reads their PTX from Triton's
  cache; ATen's ship machine code only, which it does not read), captured on one stream (a chain of
  three kernels) inside `ostinato.record_allocations()`. torch's caching allocator puts y1 and y2 in one 2 MiB segment of
  the graph's pool, so with the driver's segments as extents the two scalings write "the same"
  memory and their captured edge stays: every captured edge is needed, nothing to gain. Adopted again
  with the recorded allocations, y1 and y2 are apart: the edge between the scalings is dropped (they
  run side by side), the add still follows both. Every replay bitwise equal to eager.

    LD_PRELOAD=.devbin/libostinato_preload.so OSTINATO_PRELOAD_EDGES=needed PYTHONPATH=<the ostinato package> \\
        python3 crates/ostinato-preload/tests/gpu/torch_extents_adopt.py
"""

import torch
import triton
import triton.language as tl

import ostinato
from adopt_common import adoption_switch, warm_up

N, BLOCK = 1 << 16, 1024


@triton.jit
def scale_kernel(x_ptr, y_ptr, s, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) * s, mask=m)


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, tl.load(a_ptr + i, mask=m) + tl.load(b_ptr + i, mask=m), mask=m)


def scaled(x, s):
    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(N, BLOCK),)](x, y, s, N, BLOCK=BLOCK)
    return y


def added(a, b):
    out = torch.empty_like(a)
    add_kernel[(triton.cdiv(N, BLOCK),)](a, b, out, N, BLOCK=BLOCK)
    return out


def main():
    set_adopt = adoption_switch()
    x1 = torch.randn(N, device="cuda")
    x2 = torch.randn(N, device="cuda")
    step = lambda: added(scaled(x1, 2.0), scaled(x2, 3.0))  # noqa: E731
    want = step()
    assert torch.equal(want, x1 * 2.0 + x2 * 3.0)
    warm_up(step)

    set_adopt(1)
    with ostinato.record_allocations() as rec:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y1 = scaled(x1, 2.0)
            y2 = scaled(x2, 3.0)
            z = added(y1, y2)
    set_adopt(0)
    seg_y1 = [s for s in torch.cuda.memory_snapshot() if s["address"] <= y1.data_ptr() < s["address"] + s["total_size"]]
    same_segment = bool(seg_y1) and seg_y1[0]["address"] <= y2.data_ptr() < seg_y1[0]["address"] + seg_y1[0]["total_size"]
    print(f"y1 and y2 in one segment: {same_segment}; recorded {len(rec.extents)} extents")
    assert same_segment, "the test needs y1 and y2 in one allocator segment"

    segments = ostinato.adopt(g)
    print("segments as extents:", repr(segments))
    print("\n".join(segments.explain().splitlines()))
    assert not segments.adopted and segments.status == "not_adopted" and "nothing to gain" in (segments.why or ""), segments.explain()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(z, want), "the native replay differs from eager"

    allocations = ostinato.adopt(g, allocations=rec.extents)
    print("allocations as extents:", repr(allocations))
    print("\n".join(allocations.explain().splitlines()))
    assert allocations.adopted, allocations.explain()
    dropped = {(d["from"], d["to"]) for d in allocations.dropped}
    assert len(dropped) == 1, allocations.dropped
    for _ in range(3):
        z.zero_()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(z, want), "the adopted replay differs from eager"
    print("PASS: with segments every captured edge is needed (not adopted); with the recorded allocations the scalings' edge is dropped, "
          "adopted, 3 replays bitwise equal to eager")


if __name__ == "__main__":
    main()
