"""The Python package on Vulkan (lavapipe in CI, the GPU's driver on a GPU machine): an exec deleted
with replays in flight waits for them before it frees anything the device may still use. Skipped
where no Vulkan device is found."""

import gc
import struct

import pytest

import ostinato

WORDS = 256 * 1024


def vulkan_found():
    line = next((l for l in ostinato.devices().splitlines() if l.startswith("vulkan:")), "")
    return "storage bindings" in line


pytestmark = pytest.mark.skipif(not vulkan_found(), reason="no Vulkan device")


def chain():
    g = ostinato.Graph()
    a = g.buffer("a", 4 * WORDS)
    b = g.buffer("b", 4 * WORDS)
    mix = g.kernel("mix", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")],
                   host="builtin:mix", vulkan="builtin:mix")
    for i in range(50):
        out, inp = (b, a) if i % 2 else (a, b)
        g.launch(mix, grid=(64,), block=(256,), out=out, inp=inp, n_out=WORDS, n_in=WORDS, salt=i)
    return g


def test_deleting_an_exec_with_replays_in_flight_waits_for_them():
    plan = chain().plan()
    zeros = bytes(4 * WORDS)
    for _ in range(10):
        ex = plan.instantiate("vulkan")
        ex.write("a", zeros)
        ex.write("b", zeros)
        ex.replay(3)
        del ex  # no wait: the exec's drop waits for its replays before freeing
        gc.collect()
    ex = plan.instantiate("vulkan")
    ex.write("a", zeros)
    ex.write("b", zeros)
    ex.replay(1)
    wa = wb = 0
    for i in range(50):
        if i % 2:
            wb = (wb * 3 + wa + i) & 0xFFFFFFFF
        else:
            wa = (wa * 3 + wb + i) & 0xFFFFFFFF
    words = struct.unpack(f"<{WORDS}I", ex.read("b"))
    assert all(w == wb for w in words)


def test_fusion_modes_agree_on_vulkan():
    out = {}
    for mode in ("auto", "on", "off"):
        g = ostinato.Graph()
        x = g.buffer("x", 1024)
        k = g.kernel("add_one", [("x", "read_write"), ("n", "u32")], host="builtin:add_one", vulkan="builtin:add_one")
        for _ in range(64):
            g.launch(k, grid=(1,), block=(256,), x=x, n=256)
        ex = g.plan().instantiate("vulkan", fusion=mode)
        ex.write("x", bytes(1024))
        ex.replay(3)
        out[mode] = struct.unpack("<256f", ex.read("x"))
    assert out["auto"] == out["on"] == out["off"] == (192.0,) * 256
