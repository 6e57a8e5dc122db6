"""A graph's objects (Buffer, slices of one, Kernel, Slot) belong to it: another graph refuses them by
name, naming both graphs, instead of taking them for its own object of the same index. Slice bounds
and byte offsets are Python ints of any size, refused (never clipped) outside the buffer."""

import os
import struct

import numpy as np
import pytest

import ostinato

REPO = os.path.join(os.path.dirname(__file__), "..", "..")
ADD_ONE = [("x", "read_write"), ("n", "u32")]


def two_graphs():
    """Graph `a` with buffer `x` first; graph `b` with `pad` first, then `x`: `a`'s `x` has the index of
    `b`'s `pad`."""
    a, b = ostinato.Graph(), ostinato.Graph()
    objects = {}
    for g, padded in ((a, False), (b, True)):
        pad = g.buffer("pad", 64) if padded else None
        x = g.buffer("x", 64)
        k = g.kernel("add_one", ADD_ONE, host="builtin:add_one")
        n = g.slot("n", "u32", 16)
        objects[id(g)] = (pad, x, k, n)
    return a, b, objects[id(a)], objects[id(b)]


def test_objects_of_another_graph_are_refused_naming_both():
    a, b, (_, ax, ak, an), (bpad, bx, bk, bn) = two_graphs()
    label = r"graph #\d+"
    cases = [
        (lambda: b.launch(bk, grid=(1,), block=(16,), x=ax, n=bn), "buffer `x`"),
        (lambda: b.launch(bk, grid=(1,), block=(16,), x=ax[0:32], n=bn), r"buffer `x` \(the slice \[0:32\]\)"),
        (lambda: b.launch(ak, grid=(1,), block=(16,), x=bx, n=bn), "kernel `add_one`"),
        (lambda: b.launch(bk, grid=(1,), block=(16,), x=bx, n=an), "slot `n`"),
        (lambda: b.copy(ax, bpad), "buffer `x`"),
        (lambda: b.copy(bpad, ax), "buffer `x`"),
        (lambda: b.fill(ax[0:16], 7), r"buffer `x` \(the slice \[0:16\]\)"),
        (lambda: b.collective("all_reduce", "f32", send=[ax], recv=[bx]), "buffer `x`"),
        (lambda: b.buffer("v", 16, view_of=(ax, 0)), r"view `v`: its parent, buffer `x`,"),
    ]
    for call, what in cases:
        with pytest.raises(ostinato.ArgumentError, match="%s belongs to %s, not to %s" % (what, label, label)):
            call()
    assert b.nodes == 0
    # Nothing was recorded: b's own objects still work, and b's `pad` (the index of a's `x`) is untouched.
    b.launch(bk, grid=(1,), block=(16,), x=bx, n=bn)
    ex = b.plan().instantiate("host")
    ex.replay(2)
    ex.wait()
    assert struct.unpack("<16f", ex.read("x", 0, 64)) == (2.0,) * 16
    assert ex.read("pad") == bytes(64)


def test_the_message_names_a_loaded_graph_by_its_file():
    g = ostinato.load(os.path.join(REPO, "examples", "mix.toml"))
    assert "loaded from" in repr(g) and "mix.toml" in repr(g)
    other = ostinato.Graph()
    x = other.buffer("x", 64)
    k = other.kernel("add_one", ADD_ONE, host="builtin:add_one")
    with pytest.raises(ostinato.ArgumentError, match=r"kernel `add_one` belongs to graph #\d+, not to graph #\d+ \(loaded from .*mix.toml\)"):
        g.launch(k, grid=(1,), block=(16,), x=x, n=16)
    assert "graph #" in repr(x) and "graph #" in repr(k)


def test_slice_bounds_of_any_size_are_exact():
    g = ostinato.Graph()
    a = g.buffer("a", 1024)
    for lo, hi in [(0, 1028), (0, 2**63), (0, 2**64), (0, 2**64 + 4), (2**64, None), (2**63, None), (-2**64, None), (None, -2**70),
                   (0, 2**200), (-1025, None), (None, 1025), (1025, None)]:
        with pytest.raises(ostinato.ArgumentError, match="lies outside its 1024 bytes"):
            a[lo:hi]
    for key in [slice(0, 8, 2), slice(0, 8, 2**64), slice(0, 8, -1), slice(0, 8, 0)]:
        with pytest.raises(ostinato.ArgumentError, match="step 1"):
            a[key]
    with pytest.raises(ostinato.ArgumentError, match="is not an int"):
        a[0:8.0]
    got = [(s.offset, s.len) for s in (a[:], a[-4:], a[:-1024], a[10:5], a[0:1024], a[np.int64(4):np.uint64(8)], a[-1024:1024], a[1024:])]
    assert got == [(0, 1024), (1020, 4), (0, 0), (10, 0), (0, 1024), (4, 4), (0, 1024), (1024, 0)]
    assert len(a) == 1024


def test_offsets_and_sizes_of_any_int_are_refused_by_name_outside_their_range():
    g = ostinato.Graph()
    for size in (-1, 2**64, 2**100):
        with pytest.raises(ostinato.ArgumentError, match=r"buffer `b`: size -?\d+ is outside 0 to 2\*\*64 - 1"):
            g.buffer("b", size)
    root = g.buffer("root", 64)
    with pytest.raises(ostinato.ArgumentError, match=r"view `v`: offset -8 is outside"):
        g.buffer("v", 8, view_of=(root, -8))
    k = g.kernel("add_one", ADD_ONE, host="builtin:add_one")
    g.launch(k, grid=(1,), block=(16,), x=root, n=16)
    ex = g.plan().instantiate("host")
    for offset, length in [(-1, 4), (2**64, 1), (0, -4), (0, 2**64), (2**80, None)]:
        with pytest.raises(ostinato.ArgumentError, match="read of buffer `root`: (offset|length)"):
            ex.read("root", offset, length)
    with pytest.raises(ostinato.ArgumentError, match="write of buffer `root`: offset"):
        ex.write("root", b"\0" * 4, -4)
    assert ex.read("root", np.uint64(60)) == bytes(4)
