#!/usr/bin/env python3
"""Makes the Triton PTX fixtures of the NVIDIA code analysis' contract tests (crates/ostinato-cuda-code/
tests/triton_ptx.rs) from the kernels of python/tests/triton_kernels.py, compiled by Triton for sm_90 on
this machine (no GPU needed), without line info. The committed fixtures are what the analyses are tested
on everywhere, Triton or not. Usage: python3 scripts/triton-fixtures.py (with Triton 3.4 to 3.6)."""

import os
import sys

os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(REPO, "python", "tests"))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

import triton_kernels as K  # noqa: E402

OUT = os.path.join(REPO, "crates", "ostinato-cuda-code", "tests", "fixtures")


class Arg:
    """A pointer argument as Triton's binder reads one: a 16-byte aligned address and a dtype."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self):
        return 1 << 20


F32, BF16 = Arg("torch.float32"), Arg("torch.bfloat16")

# (fixture, kernel, arguments, constexprs and options)
FIXTURES = [
    ("triton_add.ptx", K.add_kernel, (F32, F32, F32, 1000), {"BLOCK": 1024}),
    ("triton_softmax.ptx", K.softmax_kernel, (F32, F32, 1024, 1024, 1000), {"BLOCK": 1024, "WAIT": False}),
    ("triton_softmax_wait.ptx", K.softmax_kernel, (F32, F32, 1024, 1024, 1000), {"BLOCK": 1024, "WAIT": True}),
    ("triton_layernorm.ptx", K.layernorm_kernel, (F32, F32, F32, F32, 3000, 3000, 1e-5), {"BLOCK": 256}),
    ("triton_matmul.ptx", K.matmul_kernel, (BF16, BF16, BF16, 4096, 4096, 512, 512, 1, 4096, 1, 4096, 1),
     {"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}),
    ("triton_tma_copy.ptx", K.tma_copy_kernel, (F32, F32, 64, 64), {"BM": 16, "BN": 64}),
]


def compile_ptx(kernel, args, kwargs, target):
    backend = make_backend(target)
    bound, spec, _ = create_function_from_signature(kernel.signature, kernel.params, backend)(*args, **kwargs)
    names = [p.name for p in kernel.params]
    signature = {n: s[0] for n, s in zip(names, spec)}
    constexprs = {(i,): bound[n] for i, (n, s) in enumerate(zip(names, spec)) if s[0] == "constexpr"}
    attrs = {(i,): backend.parse_attr(s[1]) for i, s in enumerate(spec) if isinstance(s[1], str)}
    options = backend.parse_options(dict(kwargs))
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options.__dict__).asm["ptx"]


def main():
    target = GPUTarget("cuda", 90, 32)
    for fixture, kernel, args, kwargs in FIXTURES:
        ptx = compile_ptx(kernel, args, kwargs, target)
        options = ", ".join("%s=%s" % kv for kv in kwargs.items())
        header = "// Triton PTX fixture: %s(%s) of python/tests/triton_kernels.py, Triton %s, sm_90, no line info.\n" % (
            kernel.__name__, options, triton.__version__)
        with open(os.path.join(OUT, fixture), "w") as f:
            f.write(header + ptx)
        print("wrote", fixture)


if __name__ == "__main__":
    main()
