"""What the interposer's Python GPU tests share: the switch between the native and the adopted capture
(`ostinato_preload_set_adopt`, exported by the preloaded library), replays timed side by side, and the
interposer's log read back."""

import ctypes
import json
import os
import statistics
import time

import torch


def adoption_switch():
    """`set_adopt(on)`: adoption for graphs instantiated after the call; exits where the interposer is
    not preloaded or inactive."""
    try:
        set_adopt = ctypes.CDLL(None).ostinato_preload_set_adopt
    except AttributeError:
        raise SystemExit("run under LD_PRELOAD=libostinato_preload.so (ostinato_preload_set_adopt not found)")
    set_adopt.argtypes, set_adopt.restype = [ctypes.c_int], ctypes.c_int
    if set_adopt(0) < 0:
        raise SystemExit("the interposer is inactive (OSTINATO_PRELOAD_ADOPT=0 without OSTINATO_PRELOAD_LOG)")
    return set_adopt


def warm_up(step, times=3):
    """Runs `step` `times` times on a side stream, as torch's CUDA-graph recipe does before a capture
    (allocations and lazy initialisation out of the capture), then joins it back."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            step()
    torch.cuda.current_stream().wait_stream(side)


def per_replay_us(replay, count, bursts):
    """µs per replay of `count` back-to-back replays, one sample per burst."""
    out = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(count):
            replay()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / count * 1e6)
    return out


def side_by_side(arms, replays, bursts, rounds):
    """Each arm (name -> replay) timed in `rounds` rounds, the arm order rotated per round; rows with the
    median and min of the bursts' µs per replay."""
    names = list(arms)
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            per_replay_us(arms[name], 10, 1)  # warm
            samples[name] += per_replay_us(arms[name], replays, bursts)
    return [{"arm": name, "us_per_replay": statistics.median(samples[name]), "min_us": min(samples[name]), "samples_us": samples[name]}
            for name in names]


def instantiate_lines(path):
    """The interposer's instantiate lines in the log at `path`, in order."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in map(json.loads, f) if line.get("event") == "instantiate"]


def summary(line):
    """One graph's instantiate line, in brief."""
    a = line.get("adoption", {})
    edges = a.get("edges", [])
    return {
        "api": line.get("api"),
        "nodes": line.get("counts", {}).get("nodes"),
        "edges": line.get("counts", {}).get("edges"),
        "kernels": line.get("counts", {}).get("kernels"),
        "verdict": line.get("decision", {}).get("verdict"),
        "reason": line.get("decision", {}).get("reason"),
        "reasons": len(line.get("decision", {}).get("reasons", [])),
        "adoption": a.get("status"),
        "why": a.get("why"),
        "programmatic_edges": a.get("programmatic", 0),
        "programmatic_edges_added": a.get("new_programmatic", 0),
        "full_edges_why": {why: sum(1 for e in edges if e.get("full") == why) for why in {e["full"] for e in edges if e.get("full")}},
        "adopt_us": a.get("adopt_us"),
        "read_us": line.get("read_us"),
    }


def print_graphs(graphs, labels=("native", "adopted")):
    for label, g in zip(labels, graphs):
        print("  %s capture: %s nodes (%s kernels), %s edges; %s%s; adoption %s%s; %s programmatic edges (%s new); full edges: %s" % (
            label, g["nodes"], g["kernels"], g["edges"], g["verdict"], " (%s; %d reasons)" % (g["reason"], g["reasons"]) if g["reason"] else "",
            g["adoption"], " (%s)" % g["why"] if g["why"] and g["why"] != g["reason"] else "",
            g["programmatic_edges"], g["programmatic_edges_added"], g["full_edges_why"] or "none"))


def print_rows(rows, equal):
    """The timing table; `equal[name]`: the arm's result check, in words."""
    base = rows[0]["us_per_replay"]
    print("%-34s %12s %10s %12s  %s" % ("arm", "µs/replay", "min µs", "vs native", "result"))
    for row in rows:
        print("%-34s %12.2f %10.2f %11.2fx  %s" % (row["arm"], row["us_per_replay"], row["min_us"], base / row["us_per_replay"], equal[row["arm"]]))
