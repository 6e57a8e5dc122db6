"""Triton kernels and PyTorch ops as Ostinato nodes (docs/python-kernels.md).

Without a GPU (Triton only: it compiles for sm_90 on the CPU, with its own ptxas): the translation of a
compiled kernel into an Ostinato signature and launch, access read from its PTX, hazards on views of one
storage, refused declarations and launch features. The tensors there are stand-ins that carry what
Triton and Ostinato read of a tensor (an address, a dtype, a storage, strides); no byte is touched, and
nothing is instantiated.

With a GPU (CUDA, PyTorch and Triton): the kernels run as nodes and equal the same kernels launched
directly, a torch.matmul node between two Triton nodes, slots, PDL edges for kernels that wait, and the
refusals of PyTorch work that cannot be captured.
"""

import math

import pytest

import ostinato

triton = pytest.importorskip("triton", reason="Triton is not installed: the Triton node tests skip (pip install triton)")

from ostinato import _triton  # noqa: E402

SUPPORTED = _triton.SUPPORTED[0] <= _triton.version_of(triton.__version__) <= _triton.SUPPORTED[1]
needs_supported = pytest.mark.skipif(not SUPPORTED, reason="Triton %s is outside the supported range" % triton.__version__)

if SUPPORTED:
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    import triton_kernels as K

    SM90 = GPUTarget("cuda", 90, 32)


# --- stand-in tensors for the GPU-free tests ------------------------------------------------------


class _Device:
    type = "cuda"
    index = 0


class _Storage:
    def __init__(self, ptr, nbytes):
        self.ptr, self.n = ptr, nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.n


class Stand:
    """What Ostinato and Triton read of a CUDA tensor, at an address nothing dereferences."""

    def __init__(self, storage, shape, dtype="torch.float32", itemsize=4, offset=0, strides=None):
        self.storage, self.shape, self.dtype, self.itemsize, self.offset = storage, tuple(shape), dtype, itemsize, offset
        if strides is None:
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.insert(0, acc)
                acc *= n
        self.strides = tuple(strides)
        self.device = _Device()

    def untyped_storage(self):
        return self.storage

    def storage_offset(self):
        return self.offset

    def stride(self):
        return self.strides

    def element_size(self):
        return self.itemsize

    def numel(self):
        return math.prod(self.shape)

    def data_ptr(self):
        return self.storage.ptr + self.offset * self.itemsize

    def view(self, offset, shape, strides=None):
        return Stand(self.storage, shape, self.dtype, self.itemsize, offset, strides)


_next = [1 << 30]


def stand(n, dtype="torch.float32", itemsize=4):
    ptr = _next[0]
    _next[0] += 1 << 24
    return Stand(_Storage(ptr, n * itemsize), (n,), dtype, itemsize)


@pytest.fixture(scope="module")
def cpu_compile():
    if not SUPPORTED:
        pytest.skip("Triton %s is outside the supported range" % triton.__version__)
    try:
        _triton.compile_kernel(K.add_kernel, (stand(256), stand(256), stand(256), 256), {"BLOCK": 256}, SM90)
    except Exception as e:  # noqa: BLE001 - any reason Triton cannot compile here is a reason to skip
        pytest.skip("Triton cannot compile for sm_90 on this machine: %s" % e)


def record(g, kernel, grid, args, kw, **own):
    """Graph.triton with the compile target given (no device to ask)."""
    return _triton.add_node(g, _triton.compile_kernel(kernel, args, kw, SM90), grid, **own)


def names(tk):
    return [(p.name, p.kind) for p in tk.params]


# --- GPU-free: translation, contract, hazards, refusals ---------------------------------------------


def test_signature_and_launch_metadata_of_a_compiled_kernel(cpu_compile):
    x, y, out = stand(1000), stand(1000), stand(1000)
    tk = _triton.compile_kernel(K.add_kernel, (x, y, out, 1000), {"BLOCK": 256, "num_warps": 8}, SM90)
    extra = [("global_scratch", "scratch")] + ([("profile_scratch", "scratch")] if _triton.version_of(triton.__version__) >= (3, 5) else [])
    assert names(tk) == [("x_ptr", "pointer"), ("y_ptr", "pointer"), ("out_ptr", "pointer"), ("n", "i32")] + extra
    assert (tk.name, tk.block, tk.shared) == ("add_kernel", 256, 0)
    assert all(p.value == 0 for p in tk.params if p.kind == "scratch"), "no scratch: the launcher passes null"
    assert _triton.ptx_param_count(tk.ptx, tk.name) == len(tk.params)
    assert tk.cubin[:4] == b"\x7fELF"
    # As a direct launch specialises: an int equal to 1 is folded into the code, a large one is 64-bit,
    # a float is an f32.
    one = _triton.compile_kernel(K.add_kernel, (x, y, out, 1), {"BLOCK": 256}, SM90)
    assert "n" not in [p.name for p in one.params]
    big = _triton.compile_kernel(K.add_kernel, (x, y, out, 1 << 40), {"BLOCK": 256}, SM90)
    assert dict(names(big))["n"] == "i64"
    scaled = _triton.compile_kernel(K.scale_kernel, (x, out, 1000, 0.5), {"BLOCK": 256}, SM90)
    assert dict(names(scaled))["factor"] == "f32"


def test_a_slot_stays_a_runtime_scalar_of_its_type(cpu_compile):
    g = ostinato.Graph()
    x, y, out = stand(1024), stand(1024), stand(1024)
    for ty, triton_ty in (("i32", "i32"), ("u32", "u32"), ("i64", "i64")):
        n = g.slot("n_" + ty, ty, 1)  # 1 would be folded into the code as a fixed argument
        tk = _triton.compile_kernel(K.add_kernel, (x, y, out, n), {"BLOCK": 256}, SM90)
        p = next(p for p in tk.params if p.name == "n")
        assert (p.kind, p.value.name) == (ty, "n_" + ty)
        assert tk.bound["n"] is n
        assert ".param .%s add_kernel_param_3" % ("u64" if ty.endswith("64") else "u32") in tk.ptx.replace(".s32", ".u32").replace(".s64", ".u64")
    fixed = _triton.compile_kernel(K.add_kernel, (x, y, out, 1024), {"BLOCK": 256}, SM90)
    assert fixed.key != tk.key, "a fixed 1024 is specialised (divisible by 16), a slot is not"


def test_access_inferred_from_the_ptx_orders_the_nodes(cpu_compile):
    g = ostinato.Graph()
    x, y, out, z = stand(1000), stand(1000), stand(1000), stand(1000)
    record(g, K.add_kernel, lambda m: (triton.cdiv(1000, m["BLOCK"]),), (x, y, out, 1000), {"BLOCK": 256})
    record(g, K.add_kernel, (4,), (out, y, z, 1000), {"BLOCK": 256})
    record(g, K.add_kernel, (4,), (x, y, z, 1000), {"BLOCK": 256})
    plan = g.plan()
    # 0 writes out, 1 reads it (RAW); 1 and 2 both write z (WAW); x and y are only read: no edge for them.
    assert plan.edges == [(0, 1), (1, 2)]
    text = plan.explain()
    assert "RAW: `out_ptr` write / `x_ptr` read on `out_ptr` bytes [0, 4000)" in text, text
    assert "WAW: `out_ptr` write / `out_ptr` write" in text, text
    assert g.nodes == 3


def test_views_of_one_storage_get_hazards_on_their_overlap_only(cpu_compile):
    g = ostinato.Graph()
    base = stand(4096)
    lo, hi, mid = base.view(0, (1024,)), base.view(1024, (1024,)), base.view(512, (1024,))
    src, dst = stand(1024), stand(1024)
    record(g, K.add_kernel, (4,), (src, src, lo, 1024), {"BLOCK": 256})   # writes bytes [0, 4096)
    record(g, K.add_kernel, (4,), (src, src, hi, 1024), {"BLOCK": 256})   # writes bytes [4096, 8192)
    record(g, K.add_kernel, (4,), (mid, src, dst, 1024), {"BLOCK": 256})  # reads [2048, 6144): after both
    plan = g.plan()
    assert sorted(plan.edges) == [(0, 2), (1, 2)], plan.explain()
    assert "bytes [2048, 4096)" in plan.explain() and "bytes [4096, 6144)" in plan.explain()
    # A strided view spans from its first to its last element: rows of 256 of a [4, 512] matrix.
    rows = base.view(8, (4, 256), (512, 1))
    g2 = ostinato.Graph()
    record(g2, K.softmax_kernel, (4,), (rows, rows, 512, 512, 256), {"BLOCK": 256, "WAIT": False}, alias=[("out_ptr", "in_ptr")])
    assert ("out_ptr", 4 * 4096) in [(n, s) for n, s in ostinato._ostinato.names(g2)[0]]


def test_a_wrong_access_declaration_is_refused_and_nothing_is_recorded(cpu_compile):
    g = ostinato.Graph()
    x, y, out = stand(1000), stand(1000), stand(1000)
    with pytest.raises(ostinato.BindError, match=r"declares param `out_ptr` read, but its code .* writes it: `.*st\.global"):
        record(g, K.add_kernel, (4,), (x, y, out, 1000), {"BLOCK": 256}, access={"out_ptr": "read"})
    with pytest.raises(ostinato.BindError, match=r"declares param `x_ptr` write, but its code .* reads it"):
        record(g, K.add_kernel, (4,), (x, y, out, 1000), {"BLOCK": 256}, access={"x_ptr": "write"})
    with pytest.raises(ostinato.ArgumentError, match=r"access= names \['n'\], which are not pointer params"):
        record(g, K.add_kernel, (4,), (x, y, out, 1000), {"BLOCK": 256}, access={"n": "read"})
    assert g.nodes == 0
    # The right declaration (broader than the code is allowed) records, and the graph plans.
    record(g, K.add_kernel, (4,), (x, y, out, 1000), {"BLOCK": 256}, access={"out_ptr": "write", "y_ptr": "read_write"})
    assert g.nodes == 1 and g.plan().nodes == 1


def test_an_in_place_kernel_declares_its_aliasing(cpu_compile):
    g = ostinato.Graph()
    x, y = stand(1000), stand(1000)
    with pytest.raises(ostinato.GraphError, match=r"params `x_ptr` and `out_ptr` overlap"):
        record(g, K.add_kernel, (4,), (x, y, x, 1000), {"BLOCK": 256})
    record(g, K.add_kernel, (4,), (x, y, x, 1000), {"BLOCK": 256}, alias=[("x_ptr", "out_ptr")])
    assert g.nodes == 1


def test_a_scratch_area_the_kernel_needs_is_a_buffer_of_its_own(cpu_compile):
    g = ostinato.Graph()
    src, dst = stand(64 * 64), stand(64 * 64)
    tk = _triton.compile_kernel(K.tma_copy_kernel, (src, dst, 64, 64), {"BM": 16, "BN": 64}, SM90)
    scratch = next(p for p in tk.params if p.name == "global_scratch")
    assert scratch.value > 0, "a descriptor made in the kernel lives in Triton's global scratch"
    # The TMA load goes through the descriptor: the analysis cannot attribute it, so nothing is inferred.
    with pytest.raises(ostinato.Error, match=r"cannot attribute"):
        _triton.add_node(g, tk, (4,))
    vouched = {"in_ptr": ("read", "vouched"), "out_ptr": ("write", "vouched")}
    _triton.add_node(g, tk, (4,), access=vouched)
    sizes = dict(ostinato._ostinato.names(g)[0])
    assert sizes["tma_copy_kernel.global_scratch"] == 4 * scratch.value, sizes
    assert g.plan().nodes == 1


def test_an_unsupported_triton_version_is_refused(monkeypatch):
    for v in ("3.3.1", "3.7.0", "4.0.0"):
        monkeypatch.setattr(triton, "__version__", v)
        with pytest.raises(ostinato.UnsupportedError, match=r"Triton %s is not supported: Ostinato reads .* Triton 3\.4 to 3\.6" % v.replace(".", r"\.")):
            _triton.require_triton()


def test_what_an_ostinato_node_does_not_carry_is_refused(cpu_compile):
    g = ostinato.Graph()
    x = stand(128)
    with pytest.raises(ostinato.UnsupportedError, match=r"param `on` is a bool"):
        _triton.compile_kernel(K.flag_kernel, (x, 100, True), {}, SM90)
    with pytest.raises(ostinato.UnsupportedError, match=r"launch_pdl: Ostinato decides programmatic edges itself"):
        _triton.compile_kernel(K.add_kernel, (x, x, x, 128), {"BLOCK": 128, "launch_pdl": True}, SM90)
    with pytest.raises(ostinato.ArgumentError, match=r"`BLOKC` is neither a param of the kernel nor a Triton option"):
        _triton.compile_kernel(K.add_kernel, (x, x, x, 128), {"BLOCK": 128, "BLOKC": 1}, SM90)
    n = g.slot("n", "i32", 128)
    tk = _triton.compile_kernel(K.add_kernel, (stand(128), stand(128), stand(128), n), {"BLOCK": 128}, SM90)
    with pytest.raises(ostinato.ArgumentError, match=r"a slot cannot size it"):
        _triton.add_node(g, tk, lambda m: (triton.cdiv(m["n"], m["BLOCK"]),))
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])(K.add_kernel)
    with pytest.raises(ostinato.ArgumentError, match=r"is autotuned"):
        _triton.compile_kernel(tuned, (x, x, x, 128), {}, SM90)
    with pytest.raises(ostinato.ArgumentError, match=r"not a @triton.jit function"):
        _triton.compile_kernel(lambda: None, (), {}, SM90)


def test_heuristics_give_their_constexprs(cpu_compile):
    picked = triton.heuristics({"BLOCK": lambda a: 128 if a["n"] <= 128 else 256})(K.add_kernel)
    tk = _triton.compile_kernel(picked, (stand(100), stand(100), stand(100), 100), {}, SM90)
    assert tk.bound["BLOCK"] == 128


# --- On the GPU ------------------------------------------------------------------------------------

try:
    import torch

    CUDA = torch.cuda.is_available()
except ImportError:
    torch, CUDA = None, False

gpu = pytest.mark.skipif(not (CUDA and SUPPORTED), reason="needs a CUDA device, PyTorch and a supported Triton")


def test_torch_nodes_need_torch_with_cuda():
    if CUDA:
        pytest.skip("PyTorch has CUDA here: the GPU tests cover Graph.torch")
    with pytest.raises(ostinato.BackendMissingError, match=r"Graph.torch needs"):
        ostinato.Graph().torch(lambda: None, reads=[], writes=[object()])


def run(g, replays=1, **options):
    """Instantiated on PyTorch's current stream: replays follow the tensors' producers there."""
    ex = g.plan().instantiate("cuda", stream=torch.cuda.current_stream(), **options)
    ex.replay(replays)
    ex.wait()
    return ex


@gpu
def test_vector_add_equals_the_direct_launch():
    n = 98_765
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out, want = torch.empty_like(x), torch.empty_like(x)
    grid = lambda m: (triton.cdiv(n, m["BLOCK"]),)  # noqa: E731
    K.add_kernel[grid](x, y, want, n, BLOCK=1024)
    g = ostinato.Graph()
    g.triton(K.add_kernel, grid, x, y, out, n, BLOCK=1024)
    run(g)
    assert torch.equal(out, want)


@gpu
def test_row_softmax_on_strided_rows_equals_the_direct_launch():
    rows, cols, stride = 37, 781, 1024
    src = torch.randn(rows, stride, device="cuda")[:, :cols]
    out, want = torch.empty(rows, cols, device="cuda"), torch.empty(rows, cols, device="cuda")
    K.softmax_kernel[(rows,)](want, src, src.stride(0), want.stride(0), cols, BLOCK=1024, WAIT=False)
    g = ostinato.Graph()
    g.triton(K.softmax_kernel, (rows,), out, src, src.stride(0), out.stride(0), cols, BLOCK=1024, WAIT=False)
    run(g)
    assert torch.equal(out, want)
    assert torch.allclose(out, torch.softmax(src, dim=1), atol=1e-5)


@gpu
def test_layer_norm_with_block_constexprs_equals_the_direct_launch():
    rows, n = 64, 3000
    x = torch.randn(rows, n, device="cuda")
    w, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    for block in (256, 1024):
        y, want = torch.empty_like(x), torch.empty_like(x)
        K.layernorm_kernel[(rows,)](x, want, w, b, x.stride(0), n, 1e-5, BLOCK=block)
        g = ostinato.Graph()
        g.triton(K.layernorm_kernel, (rows,), x, y, w, b, x.stride(0), n, 1e-5, BLOCK=block)
        run(g, replays=3)
        assert torch.equal(y, want), block
        assert torch.allclose(y, torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5), atol=1e-4)


@gpu
def test_views_at_offsets_equal_the_direct_launches():
    # Two nodes on views of one storage at odd offsets: disjoint, so no edge; a third reads across both.
    base = torch.randn(10_001, device="cuda")
    a, b, c = base[3:4003], base[4003:8003], base[2003:6003]
    other = torch.randn(4000, device="cuda")
    out = torch.empty(4000, device="cuda")
    want_base, want_out = base.clone(), torch.empty(4000, device="cuda")
    wa, wb, wc = want_base[3:4003], want_base[4003:8003], want_base[2003:6003]
    K.add_kernel[(4,)](wa, other, wa, 4000, BLOCK=1024)
    K.add_kernel[(4,)](wb, other, wb, 4000, BLOCK=1024)
    K.add_kernel[(4,)](wc, other, want_out, 4000, BLOCK=1024)
    g = ostinato.Graph()
    pair = [("x_ptr", "out_ptr")]
    g.triton(K.add_kernel, (4,), a, other, a, 4000, BLOCK=1024, alias=pair)
    g.triton(K.add_kernel, (4,), b, other, b, 4000, BLOCK=1024, alias=pair)
    g.triton(K.add_kernel, (4,), c, other, out, 4000, BLOCK=1024)
    plan = g.plan()
    assert sorted(plan.edges) == [(0, 2), (1, 2)]
    run(g)
    assert torch.equal(base, want_base) and torch.equal(out, want_out)


@gpu
def test_a_torch_matmul_node_between_two_triton_nodes():
    m, k, n = 64, 512, 256
    a, w = torch.randn(m * k, device="cuda"), torch.randn(k, n, device="cuda")
    scaled, h, out = torch.empty(m * k, device="cuda"), torch.empty(m, n, device="cuda"), torch.empty(m * n, device="cuda")
    bias = torch.randn(m * n, device="cuda")
    g = ostinato.Graph()
    g.triton(K.scale_kernel, (triton.cdiv(m * k, 1024),), a, scaled, m * k, 0.5, BLOCK=1024)
    g.torch(lambda: torch.matmul(scaled.view(m, k), w, out=h), reads=[scaled, w], writes=[h])
    g.triton(K.add_kernel, (triton.cdiv(m * n, 1024),), h.view(-1), bias, out, m * n, BLOCK=1024)
    plan = g.plan()
    assert plan.edges == [(0, 1), (1, 2)]
    # The same three ops launched directly, and captured by PyTorch (whose cuBLAS call is the one a
    # captured node replays: bit for bit the same; eager cuBLAS may pick another algorithm).
    want_s, want_h, want_out = torch.empty_like(scaled), torch.empty_like(h), torch.empty_like(out)

    def direct():
        K.scale_kernel[(triton.cdiv(m * k, 1024),)](a, want_s, m * k, 0.5, BLOCK=1024)
        torch.matmul(want_s.view(m, k), w, out=want_h)
        K.add_kernel[(triton.cdiv(m * n, 1024),)](want_h.view(-1), bias, want_out, m * n, BLOCK=1024)

    direct()
    eager = want_out.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        direct()
    torch.cuda.current_stream().wait_stream(side)
    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        direct()
    want_out.zero_()
    captured.replay()
    for mode in ("graph", "eager"):
        out.zero_()
        h.zero_()
        ex = run(g, replays=2, mode=mode)
        assert torch.equal(out, want_out), mode
        assert torch.allclose(out, eager, rtol=1e-5, atol=1e-5), mode
        assert any("programmatic edges" in note for note in ex.notes)
    # The captured call holds the addresses of its tensors: rebinding one is refused.
    name = ostinato._ostinato.names(g)[0][1][0]
    ex.wait()
    with pytest.raises(ostinato.UnsupportedError, match=r"captured work"):
        ex.rebind(name, torch.empty_like(scaled))


@gpu
def test_a_slot_patches_a_triton_scalar():
    n = 4096
    x, y = torch.ones(n, device="cuda"), torch.ones(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    g = ostinato.Graph()
    count = g.slot("count", "i32", n)
    g.triton(K.add_kernel, (triton.cdiv(n, 1024),), x, y, out, count, BLOCK=1024)
    ex = run(g)
    assert torch.all(out == 2)
    out.zero_()
    ex.set_slot("count", 100)
    ex.replay()
    ex.wait()
    assert torch.all(out[:100] == 2) and torch.all(out[100:] == 0)


@gpu
def test_triton_kernels_that_wait_get_programmatic_edges():
    rows, cols = 8, 512
    bufs = [torch.randn(rows, cols, device="cuda") for _ in range(5)]
    wants = [b.clone() for b in bufs]
    edges = {}
    for wait in (True, False):
        for i in range(4):
            K.softmax_kernel[(rows,)](wants[i + 1], wants[i], cols, cols, cols, BLOCK=512, WAIT=wait)
        g = ostinato.Graph()
        for i in range(4):
            g.triton(K.softmax_kernel, (rows,), bufs[i + 1], bufs[i], cols, cols, cols, BLOCK=512, WAIT=wait)
        ex = run(g, pdl="on")
        for b, w in zip(bufs, wants):
            assert torch.equal(b, w), wait
        edges[wait] = next(n for n in ex.notes if "programmatic edges" in n)
    assert edges[True].startswith("3 programmatic"), edges
    assert edges[False].startswith("0 programmatic"), edges


@gpu
def test_torch_work_that_cannot_be_captured_is_refused_with_torchs_reason():
    a = torch.randn(64, 64, device="cuda")
    c = torch.empty(64, 64, device="cuda")
    g = ostinato.Graph()
    with pytest.raises(ostinato.GraphError, match=r"PyTorch cannot capture it into a CUDA graph: .*captur"):
        g.torch(lambda: c.fill_(a.sum().item()), reads=[a], writes=[c], warmup=False)
    with pytest.raises(ostinato.GraphError, match=r"allocated \d+ blocks from PyTorch's caching allocator while captured"):
        g.torch(lambda: c.copy_(a @ a), reads=[a], writes=[c])
    assert g.nodes == 0
    g.torch(lambda: torch.matmul(a, a, out=c), reads=[a], writes=[c])
    assert g.nodes == 1
