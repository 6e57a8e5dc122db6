"""A replay node by node from Python: `exec.trace(replays, json=..., svg=...)` on the host (and on
Vulkan where a device is found): the trace-event object it returns, the files it writes, and the bytes
the traced replays leave."""

import json
import os
import struct

import pytest

import ostinato


def chain():
    g = ostinato.Graph()
    a = g.buffer("a", 4096, init="iota")
    mix = g.kernel("mix", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"), ("salt", "u32")],
                   host="builtin:mix", vulkan="builtin:mix", cuda="builtin:mix")
    salt = g.slot("salt", "u32", 7)
    g.launch(mix, grid=(1,), block=(256,), out=a[0:1024], inp=a[1024:2048], n_out=256, n_in=256, salt=salt)
    g.launch(mix, grid=(1,), block=(256,), out=a[2048:3072], inp=a[3072:4096], n_out=256, n_in=256, salt=3)
    g.launch(mix, grid=(1,), block=(256,), out=a[1024:2048], inp=a[0:1024], n_out=256, n_in=256, salt=salt)
    return g


def nodes_per_replay(events):
    seen = {}
    for e in events:
        if e.get("cat") == "node":
            for n in e["args"].get("members", [e["args"].get("node")]):
                seen.setdefault(e["args"]["replay"], []).append(n)
    return {r: sorted(v) for r, v in seen.items()}


def traced(backend, tmp_path):
    plan = chain().plan()
    try:
        ex = plan.instantiate(backend, fusion="off")  # one bar per node, so the edge is a flow
    except ostinato.BackendMissingError as e:
        pytest.skip(f"{backend}: {e}")
    ex.set_slot("salt", 11)
    out = ex.trace(3, json=str(tmp_path / "t.json"), svg=str(tmp_path / "t.svg"))
    plain = plan.instantiate("host")
    plain.set_slot("salt", 11)
    plain.replay(3)
    plain.wait()
    return out, ex.read("a"), plain.read("a")


@pytest.mark.parametrize("backend", ["host", "vulkan"])
def test_trace_returns_the_event_object_writes_both_files_and_changes_no_byte(backend, tmp_path):
    out, got, want = traced(backend, tmp_path)
    assert got == want
    assert nodes_per_replay(out["traceEvents"]) == {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2]}
    assert out["otherData"]["backend"] == backend
    # Each edge's flow carries the consumer's start less the producer's end; on these clocks (no
    # slack) an edge that orders completion never has a consumer that began first.
    flows = [e for e in out["traceEvents"] if e.get("cat") == "edge"]
    assert flows and all(isinstance(e["args"]["gap_ns"], int) for e in flows)
    assert all(e["args"]["gap_ns"] >= 0 for e in flows if e["name"] in ("full", "barrier"))
    flows = [e for e in out["traceEvents"] if e["ph"] == "s"]
    assert len(flows) == 3 and {f["name"] for f in flows} <= {"full", "barrier"}
    assert json.load(open(tmp_path / "t.json")) == out
    assert open(tmp_path / "t.svg").read().startswith("<svg")
    slotted = [e for e in out["traceEvents"] if e.get("cat") == "node" and e["args"].get("node") == 0]
    assert all(e["args"]["param salt"] == "slot salt = 11" for e in slotted)
