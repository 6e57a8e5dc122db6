"""`ostinato.adopt`: a `torch.cuda.CUDAGraph` replayed through Ostinato's graph-API interposer.

The interposer (`libostinato_preload.so`, loaded with LD_PRELOAD when the process starts) reads every
graph the process instantiates, and replays what it can model with the fences its kernels' code allows
(docs/adoption.md). This module is its Python face: it asks the interposer, through the C entry points
the library exports (`ostinato_preload_set_adopt`, `ostinato_preload_explain`), to adopt a graph and
says what became of it. It holds no logic of its own.
"""

import ctypes
import json

from ._ostinato import StateError, UnsupportedError

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


def adopt(graph):
    """Replays `graph` (a `torch.cuda.CUDAGraph`) through Ostinato's graph-API interposer; returns an
    `Adoption` saying what became of it.

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
    info = _explanation(explain, int(handle))
    if info is None:
        raise StateError(f"ostinato.adopt: the interposer did not see executable graph {int(handle):#x} instantiated "
                         "(inactive: OSTINATO_PRELOAD_ADOPT=0 without OSTINATO_PRELOAD_LOG)")
    return Adoption(graph, info)
