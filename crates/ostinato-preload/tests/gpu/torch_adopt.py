"""`ostinato.adopt` on real PyTorch graphs, under the interposer (LD_PRELOAD=libostinato_preload.so),
with the Triton MLP of triton_mlp_adopt.py (kernels that wait, then trigger their dependents):

  * a graph captured with `torch.cuda.CUDAGraph(keep_graph=True)`, captured with adoption switched off
    in the process, instantiated by `ostinato.adopt` (which adopts it): adopted, every captured edge
    explained, its replay bitwise equal to eager;
  * a graph captured the default way (instantiated by torch at the end of the capture, adoption on):
    `ostinato.adopt` reports what was decided then.

    LD_PRELOAD=.devbin/libostinato_preload.so PYTHONPATH=<the ostinato package> \\
        python3 crates/ostinato-preload/tests/gpu/torch_adopt.py
"""

import torch

import ostinato
from adopt_common import adoption_switch, warm_up
from triton_mlp_adopt import model, result_of, step


def main():
    set_adopt = adoption_switch()  # adoption off in the process from here
    m = model(4, 1024, 2816, 8, 16, 128, 4, False, True)
    want = result_of(m, lambda: step(m))
    warm_up(lambda: step(m))

    kept = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(kept):
        step(m)
    a = ostinato.adopt(kept)
    print("keep_graph=True:", repr(a))
    print("\n".join(a.explain().splitlines()[:4]))
    assert a.adopted and a.status == "adopted", a.explain()
    assert len(a.edges) == 47 and all(e["programmatic"] for e in a.edges), a.edges
    assert torch.equal(result_of(m, a.replay), want), "the adopted replay differs from eager"
    assert torch.equal(result_of(m, kept.replay), want), "torch's replay of the adopted graph differs from eager"

    set_adopt(1)
    default = torch.cuda.CUDAGraph()
    with torch.cuda.graph(default):
        step(m)
    set_adopt(0)
    b = ostinato.adopt(default)
    print("instantiated by torch:", repr(b))
    assert b.adopted, b.explain()
    assert torch.equal(result_of(m, default.replay), want)
    print("PASS: ostinato.adopt adopted a keep_graph capture and reported a torch-instantiated one; replays bitwise equal to eager")


if __name__ == "__main__":
    main()
