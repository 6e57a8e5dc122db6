"""Errors by kind: each subclass of ostinato.Error is chosen from the error's kind (never its
message); ranges are checked before anything is allocated."""

import os

import pytest

import ostinato

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def add_one_graph(size=64, n=16, threads_lanes=1):
    g = ostinato.Graph()
    k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], host="builtin:add_one")
    g.slot("s", "u32", 1)
    for lane in range(threads_lanes):
        x = g.buffer("x%d" % lane, size)
        g.launch(k, grid=(1,), block=(16,), x=x, n=n)
    return g


def test_every_kind_is_a_subclass_of_error():
    kinds = [ostinato.GraphError, ostinato.FileError, ostinato.PlanError, ostinato.ArgumentError, ostinato.StateError,
             ostinato.BindError, ostinato.UnsupportedError, ostinato.BackendMissingError, ostinato.DeviceError,
             ostinato.FaultError, ostinato.MismatchError, ostinato.IoError]
    assert len(set(kinds)) == len(kinds)
    for k in kinds:
        assert issubclass(k, ostinato.Error)


def test_errors_raise_the_class_of_their_kind():
    g = ostinato.Graph()
    with pytest.raises(ostinato.GraphError):
        g.buffer("x", 0)
    with pytest.raises(ostinato.FileError):
        ostinato.load("/nonexistent/graph.toml")
    with pytest.raises(ostinato.BackendMissingError):
        add_one_graph().plan().instantiate("metal")
    ex = add_one_graph().plan().instantiate("host")
    with pytest.raises(ostinato.ArgumentError):
        ex.set_slot("nope", 1)
    with pytest.raises(ostinato.ArgumentError):
        add_one_graph().plan().instantiate("host", fusion="sometimes")
    g = ostinato.Graph()
    x = g.buffer("x", 64)
    k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], cuda="builtin:add_one")
    g.launch(k, grid=(1,), block=(16,), x=x, n=16)
    with pytest.raises(ostinato.BindError):
        g.plan().instantiate("host")


def test_a_patch_while_a_replay_is_in_flight_is_a_state_error():
    ex = add_one_graph(threads_lanes=2).plan().instantiate("host", threads=4)
    ex.replay()
    with pytest.raises(ostinato.StateError):
        ex.set_slot("s", 2)
    ex.wait()
    ex.set_slot("s", 2)


def test_buffers_past_the_hosts_memory_are_an_io_error_before_anything_is_allocated():
    with pytest.raises(ostinato.IoError):
        add_one_graph(size=1 << 60).plan().instantiate("host")


def test_reads_and_writes_outside_a_buffer_are_refused_before_allocating():
    ex = add_one_graph().plan().instantiate("host")
    for offset, length in [(0, 2**63), (0, 2**36), (60, 8), (65, 0), (2**63, 1)]:
        with pytest.raises(ostinato.ArgumentError, match="outside buffer `x0`"):
            ex.read("x0", offset, length)
    with pytest.raises(ostinato.ArgumentError, match="outside buffer `x0`"):
        ex.write("x0", b"\0" * 8, 60)
    with pytest.raises((ostinato.ArgumentError, OverflowError)):
        ex.read("x0", -1, 4)
    assert ex.read("x0", 60) == b"\0" * 4
    assert ex.read("x0", 64) == b""


def test_a_launch_whose_written_param_overlaps_another_is_refused_unless_declared():
    g = ostinato.Graph()
    b0 = g.buffer("b0", 4096)
    mix = g.kernel("mix", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")],
                   host="builtin:mix")
    with pytest.raises(ostinato.GraphError, match=r"params `out` and `inp` overlap on bytes \[160, 3536\) of `b0`"):
        g.launch(mix, grid=(1,), block=(256,), out=b0, inp=b0[160:3536], n_out=1024, n_in=844, salt=1)
    assert g.nodes == 0
    aliased = g.kernel("mix_aliased", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")],
                       alias=[("out", "inp")], host="builtin:mix")
    g.launch(aliased, grid=(1,), block=(256,), out=b0, inp=b0[160:3536], n_out=1024, n_in=844, salt=1)
    with pytest.raises(ostinato.GraphError, match="`nope` is not one of its params"):
        g.kernel("k", [("x", "write")], alias=[("x", "nope")])


READ_UNDER_A_LIMIT = r'''
import resource, sys
import ostinato

X = 256 << 20


def vm_bytes():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))


g = ostinato.Graph()
big = g.buffer("big", X)
g.fill(big[0:16], 7)
ex = g.plan().instantiate("host", threads=0)
ex.replay()
ex.wait()
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
# Room for one more copy of the buffer and half of one: the result alone fits.
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + X + X // 2, hard))
data = ex.read("big")
assert len(data) == X and data[:16] == b"\x07\x00\x00\x00" * 4 and data[-4:] == b"\0" * 4
del data
# Room for half a copy: the result cannot be had.
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + X // 2, hard))
try:
    ex.read("big")
    sys.exit("a read past the address-space limit succeeded")
except ostinato.IoError as e:
    assert "cannot allocate 268435456 bytes" in str(e), e
    assert isinstance(e.__cause__, MemoryError), repr(e.__cause__)
# The exec is still usable.
assert ex.read("big", 0, 16) == b"\x07\x00\x00\x00" * 4
print("ok")
'''


def test_a_read_whose_result_cannot_be_allocated_is_an_io_error_not_a_panic():
    # In a child under an address-space limit: the result is allocated once, as the bytes object
    # itself (a staging copy beside it would not fit), and memory that cannot be had is an IoError.
    import subprocess
    import sys
    env = dict(os.environ, MALLOC_ARENA_MAX="1")
    r = subprocess.run([sys.executable, "-c", READ_UNDER_A_LIMIT], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


class FakeCudaArray:
    """An object with `__cuda_array_interface__` and nothing behind it: what `bind=` reads before any
    device is opened."""

    def __init__(self, shape, ptr=0x10000, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": strides}


def test_a_bound_arrays_length_is_counted_without_wrapping_before_any_device_is_opened():
    g = ostinato.Graph()
    x = g.buffer("x", 64)
    k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], host="builtin:add_one", cuda="builtin:add_one")
    g.launch(k, grid=(1,), block=(16,), x=x, n=16)
    plan = g.plan()
    # Shapes whose byte count wraps to the buffer's 64 bytes in 64-bit arithmetic.
    for shape in [(2**63 + 32, 2), (2**62 + 16, 4), (2**32, 2**32, 2**10, 1)]:
        with pytest.raises(ostinato.ArgumentError, match=r"bind `x`: shape .* is past 2\*\*64 bytes"):
            plan.instantiate("cuda", bind={"x": FakeCudaArray(shape)})
    with pytest.raises(ostinato.ArgumentError, match="bind `x`: the array's data pointer is NULL"):
        plan.instantiate("cuda", bind={"x": FakeCudaArray((64,), ptr=0)})
    with pytest.raises(ostinato.ArgumentError, match="bind `x`: the array has 32 bytes, the buffer declares 64"):
        plan.instantiate("cuda", bind={"x": FakeCudaArray((32,))})


def test_a_kernel_without_an_implementation_is_refused_naming_what_declares_one():
    g = ostinato.Graph()
    x = g.buffer("x", 64)
    k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], host="builtin:add_one")
    g.launch(k, grid=(1,), block=(16,), x=x, n=16)
    for backend in ("vulkan", "cuda", "hsa"):
        with pytest.raises(ostinato.BindError, match=r'kernel `add_one` has no implementation for the %s backend \(it has: host\): '
                           r'declare one with the `%s=` keyword of Graph.kernel: %s="builtin:add_one"$' % (backend, backend, backend)):
            g.plan().instantiate(backend)
    loaded = ostinato.load(os.path.join(REPO, "examples", "own_kernel.toml"))
    with pytest.raises(ostinato.BindError, match=r'add `vulkan = "builtin:add_one"` to kernel `add_one` in .*own_kernel.toml'):
        loaded.plan().instantiate("vulkan")
