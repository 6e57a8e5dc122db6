"""Does a CUDA trace leave the process slower? Replays a 941-node graph (examples/add_one_serial_941.toml,
fusion off, so one graph node per launch) and a second exec of it that is never traced, before and
after one traced replay of the first: the host time of one replay call and the wall time per replay of
a burst (GPU-bound). Usage: PYTHONPATH=<wheel dir> python3 lab/scripts/cupti_after_trace.py"""

import os
import statistics
import time

import ostinato

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def measure(ex, label):
    calls = []
    for _ in range(200):
        t = time.perf_counter()
        ex.replay(1)
        calls.append(time.perf_counter() - t)
        ex.wait()
    t = time.perf_counter()
    ex.replay(500)
    ex.wait()
    burst = (time.perf_counter() - t) / 500
    print(f"{label}: replay call {statistics.median(calls) * 1e6:.2f} us (median of 200), burst {burst * 1e6:.2f} us per replay")


plan = ostinato.load(os.path.join(REPO, "examples", "add_one_serial_941.toml")).plan()
traced = plan.instantiate("cuda", fusion="off")
other = plan.instantiate("cuda", fusion="off")
for ex in (traced, other):
    ex.replay(50)
    ex.wait()
measure(traced, "before the trace, exec A")
measure(other, "before the trace, exec B")
traced.trace(1)
measure(traced, "after the trace, exec A (traced)")
measure(other, "after the trace, exec B (never traced)")
traced.trace(1)
measure(traced, "after a second trace, exec A")
