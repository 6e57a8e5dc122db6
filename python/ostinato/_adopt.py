"""`ostinato.adopt`: a `torch.cuda.CUDAGraph` replayed through Ostinato's graph-API interposer.

The interposer (`libostinato_preload.so`, loaded with LD_PRELOAD when the process starts) reads every
graph the process instantiates, and replays what it can model with the fences its kernels' code allows
(docs/adoption.md). This module is its Python face: it asks the interposer, through the C entry points
the library exports (`ostinato_preload_set_adopt`, `ostinato_preload_explain`, `ostinato_preload_readopt`), to adopt a graph and
says what became of it. It holds no logic of its own.
"""

import contextlib
import ctypes
import json

from ._ostinato import ArgumentError, StateError, UnsupportedError

_PRELOAD = "LD_PRELOAD=<path>/libostinato_preload.so (built by `cargo build --release -p ostinato-preload`)"


def _entry_points():
    """The interposer's `set_adopt` and `explain`, where the process was started with it."""
    process = ctypes.CDLL(None)
    try:
        set_adopt, explain = process.ostinato_preload_set_adopt, process.ostinato_preload_explain
    except AttributeError:
        raise UnsupportedError(f"ostinato.adopt: the graph-API interposer is not loaded in this process: start it under {_PRELOAD}") from None
    set_adopt.argtypes, set_adopt.restype = [ctypes.c_int], ctypes.c_int
    explain.argtypes, explain.restype = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_ssize_t
    return set_adopt, explain


def _merged(pairs):
    """(base, size) allocations merged where they overlap (an address's extent is every allocation
    that ever held it), sorted; empty ones dropped."""
    out = []
    for base, size in sorted((int(b), int(s)) for b, s in pairs if int(s) > 0):
        if out and base < out[-1][0] + out[-1][1]:
            end = max(out[-1][0] + out[-1][1], base + size)
            out[-1] = (out[-1][0], end - out[-1][0])
        else:
            out.append((base, size))
    return out


class AllocationRecord:
    """What `record_allocations()` saw: `extents`, the (base, size) of every allocation torch's caching
    allocator made or freed while it recorded, overlapping ones merged (set when the block ends)."""

    def __init__(self):
        self.extents = None

    def __repr__(self):
        return f"<ostinato.AllocationRecord {'open' if self.extents is None else f'{len(self.extents)} extents'}>"


@contextlib.contextmanager
def record_allocations(max_entries=1 << 20):
    """Records torch's CUDA allocations while the block runs (torch's memory history), for
    `adopt(graph, allocations=record.extents)` of a graph captured inside it.

    Why a record and not the allocator's block table: inside a capture torch frees and reuses blocks
    of the graph's pool, so a block seen after the capture may be smaller than the allocation a kernel
    of the graph wrote through; an extent here is the union of every allocation that held its bytes
    while recording. A pointer into memory allocated before the block keeps the driver's segment.
    Torch's memory history is switched on for the block and off after it (a history the program
    recorded itself ends there too). Raises `StateError` where the record may be incomplete
    (`max_entries` events or more)."""
    import torch

    record = AllocationRecord()
    torch.cuda.memory._record_memory_history(enabled="all", max_entries=max_entries)
    try:
        yield record
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for trace in snapshot.get("device_traces", []) for e in trace]
    if len(events) >= max_entries:
        raise StateError(f"ostinato.record_allocations: {len(events)} events, the most kept: some may be lost; record with a larger max_entries")
    record.extents = _merged((e["addr"], e["size"]) for e in events if e.get("action") in ("alloc", "free_requested", "free_completed"))


def _readopt(handle, extents):
    process = ctypes.CDLL(None)
    try:
        readopt = process.ostinato_preload_readopt
    except AttributeError:
        raise UnsupportedError(f"ostinato.adopt: the interposer loaded has no ostinato_preload_readopt (an older build): {_PRELOAD}") from None
    readopt.argtypes, readopt.restype = [ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t], ctypes.c_int
    merged = _merged(extents)
    words = (ctypes.c_uint64 * (2 * len(merged)))(*[w for pair in merged for w in pair])
    rc = readopt(handle, words, len(merged))
    if rc == -2:
        raise ArgumentError(f"ostinato.adopt: allocations: an extent is empty or wraps past 2^64: {merged[:4]}")
    if rc < 0:
        raise StateError(f"ostinato.adopt: the interposer has no replica of executable graph {handle:#x} to adopt again "
                         "(not adoptable, or changed in place since it was instantiated)")
    return rc == 1


def _explanation(explain, exec_handle):
    n = explain(exec_handle, None, 0)
    if n < 0:
        return None
    buf = ctypes.create_string_buffer(n + 1)
    if explain(exec_handle, buf, n + 1) != n:
        raise StateError(f"ostinato.adopt: the interposer's explanation of executable graph {exec_handle:#x} changed while read")
    return json.loads(buf.value.decode())


class Adoption:
    """What became of an adopted graph: `adopted` (its replays run the adopted graph), `status`
    (`adopted`, `not_adopted` or `off`), `why` (where not adopted), `edges` (each captured edge,
    kept or dropped, and why: see `explain()`), `info` (everything the interposer said). `replay()`
    replays the graph (on the current stream, as `graph.replay()` does)."""

    def __init__(self, graph, info):
        self.graph = graph
        self.info = info
        adoption = info.get("adoption", {})
        self.status = adoption.get("status")
        self.why = adoption.get("why")
        self.adopted = self.status == "adopted" and bool(info.get("active"))
        self.edges = adoption.get("edges", [])
        self.dropped = adoption.get("dropped", [])

    def replay(self):
        self.graph.replay()

    def explain(self):
        """Each captured edge — kept (programmatic, or full and why) or dropped and why — and the
        decision, as lines of text."""
        nodes = self.info.get("nodes", [])
        name = lambda i: f"{i} ({nodes[i]})" if i < len(nodes) else str(i)
        decision = self.info.get("decision", {})
        lines = [f"{self.info.get('counts', {}).get('nodes', '?')} nodes, {len(self.info.get('captured', []))} captured edges; "
                 f"{decision.get('verdict')}{': ' + decision['reason'] if decision.get('reason') else ''}; "
                 f"adoption {self.status}{': ' + self.why if self.why else ''}{'' if self.adopted or self.status != 'adopted' else ' (revoked since)'}"]
        kept = {(e["from"], e["to"]): e for e in self.edges}
        dropped = {(d["from"], d["to"]): d for d in self.dropped}
        for frm, to, programmatic in self.info.get("captured", []):
            edge = kept.get((frm, to))
            if edge is not None:
                how = "kept, programmatic" if edge["programmatic"] else f"kept, full: {edge.get('full')}"
            elif (frm, to) in dropped:
                how = f"dropped: {dropped[(frm, to)]['why']}"
            else:
                how = "as captured (not adopted)"
            lines.append(f"  {name(frm)} -> {name(to)}{' (captured programmatic)' if programmatic else ''}: {how}")
        for e in self.edges:
            if not e.get("captured"):
                lines.append(f"  {name(e['from'])} -> {name(e['to'])}: added, {'programmatic' if e['programmatic'] else 'full'}")
        return "\n".join(lines)

    def __repr__(self):
        return f"<ostinato.Adoption {self.status}{' (' + self.why + ')' if self.why else ''}>"


def adopt(graph, allocations=None):
    """Replays `graph` (a `torch.cuda.CUDAGraph`) through Ostinato's graph-API interposer; returns an
    `Adoption` saying what became of it.

    `allocations`: (base, size) pairs of the allocations the graph's tensors live in — the `extents` of
    a `record_allocations()` the graph was captured inside. Without them a pointer's extent is the
    driver's allocation segment (the caching allocator's 2 MiB segment holds many tensors, so kernels
    on different tensors of one segment stay ordered); with them the graph is adopted again from its
    replica, each pointer's extent the allocation holding it.

    The interposer decides when a graph is instantiated. A graph captured with
    `torch.cuda.CUDAGraph(keep_graph=True)` and not yet instantiated is instantiated here, with
    adoption on whatever the process's setting; a graph already instantiated (the default: torch
    instantiates at the end of the capture) keeps what was decided then (adoption is on unless
    OSTINATO_PRELOAD_ADOPT=0). Either way its replays — `graph.replay()` or `Adoption.replay()` — run
    the adopted graph where there is one. Raises `UnsupportedError` where the interposer is not loaded
    or the graph gives no executable graph handle."""
    set_adopt, explain = _entry_points()
    exec_of = getattr(graph, "raw_cuda_graph_exec", None)
    if exec_of is None:
        raise UnsupportedError(f"ostinato.adopt: {type(graph).__name__} has no raw_cuda_graph_exec() (torch.cuda.CUDAGraph of torch 2.8 or later)")
    try:
        handle = exec_of()
    except RuntimeError:
        handle = 0
    if not handle:
        if not hasattr(graph, "instantiate"):
            raise UnsupportedError(f"ostinato.adopt: {type(graph).__name__} is not instantiated and has no instantiate()")
        previous = set_adopt(1)
        if previous < 0:
            raise UnsupportedError("ostinato.adopt: the interposer is loaded but inactive (OSTINATO_PRELOAD_ADOPT=0 without "
                                   "OSTINATO_PRELOAD_LOG): unset OSTINATO_PRELOAD_ADOPT")
        try:
            graph.instantiate()
        finally:
            set_adopt(previous)
        handle = exec_of()
    if allocations is not None:
        previous = set_adopt(1)  # an explicit request: adopted whatever the process's setting
        try:
            _readopt(int(handle), allocations)
        finally:
            set_adopt(previous)
    info = _explanation(explain, int(handle))
    if info is None:
        raise StateError(f"ostinato.adopt: the interposer did not see executable graph {int(handle):#x} instantiated "
                         "(inactive: OSTINATO_PRELOAD_ADOPT=0 without OSTINATO_PRELOAD_LOG)")
    return Adoption(graph, info)
