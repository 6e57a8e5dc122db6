"""PyTorch work as nodes: `Graph.torch(fn, reads=[...], writes=[...])`.

The callable's work is captured once with PyTorch's own capture (`torch.cuda.graph` into a
`torch.cuda.CUDAGraph(keep_graph=True)`, on a stream of the node's own) and handed to the exec as
captured work: a child-graph node of the exec's CUDA graph, replayed in place. Its access is the declared
tensors and nothing else (there is no code to read: every declaration is vouched for), so its edges are
full. A callable PyTorch cannot capture (one that synchronises, or calls what capture forbids) is refused
with PyTorch's own reason; one that allocates from PyTorch's caching allocator while captured is refused
too (that memory would lie outside what the node declares). docs/python-kernels.md has the design.
"""

from ._ostinato import ArgumentError, BackendMissingError, GraphError, UnsupportedError
from . import _tensors

# torch.cuda.CUDAGraph(keep_graph=True) and raw_cuda_graph() (the captured graph handed to the exec).
MIN_TORCH = (2, 7)


def require_torch():
    try:
        import torch
    except ImportError as e:
        raise BackendMissingError("Graph.torch needs PyTorch with CUDA: %s" % e) from e
    if not torch.cuda.is_available():
        raise BackendMissingError("Graph.torch needs a CUDA device PyTorch can use (torch.cuda.is_available() is False)")
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH or not hasattr(torch.cuda.CUDAGraph, "raw_cuda_graph"):
        raise UnsupportedError("PyTorch %s is not supported: Graph.torch needs torch.cuda.CUDAGraph(keep_graph=True).raw_cuda_graph() "
                               "(PyTorch %d.%d on)" % (torch.__version__, MIN_TORCH[0], MIN_TORCH[1]))
    return torch


def allocations(torch, device):
    """How many blocks PyTorch's caching allocator has handed out on `device` so far (None where this
    allocator keeps no such count: a graph allocation node then refuses the work when it binds)."""
    return torch.cuda.memory_stats(device).get("allocation.all.allocated")


def reason(e):
    """PyTorch's reason for a failed capture: the first error, and what the capture's end said of it."""
    first = e.__context__ if e.__context__ is not None and e.__context__ is not e else None
    return "%s (then: %s)" % (first, e) if first is not None else str(e)


def warm_up(torch, fn, stream, writes):
    """Runs `fn` once on `stream` outside the capture, as PyTorch's own capture recipe does (lazy
    initialisations such as cuBLAS's handle and workspace happen there), then restores the written
    tensors: recording leaves the declared tensors as they were."""
    saved = [w.clone() for w in writes]
    stream.wait_stream(torch.cuda.current_stream(stream.device))
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream(stream.device).wait_stream(stream)
    for w, s in zip(writes, saved):
        w.copy_(s)
    torch.cuda.synchronize(stream.device)


def capture(torch, fn, stream, label, device):
    """`fn`'s work captured on `stream`: the CUDAGraph (kept: its graph and private memory pool)."""
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    counted = [None, None]
    try:
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            counted[0] = allocations(torch, device)
            fn()
            counted[1] = allocations(torch, device)
    except Exception as e:
        raise GraphError("Graph.torch(%s): PyTorch cannot capture it into a CUDA graph: %s" % (label, reason(e))) from e
    if counted[0] is not None and counted[1] != counted[0]:
        raise GraphError("Graph.torch(%s): it allocated %d blocks from PyTorch's caching allocator while captured "
                         "(torch.cuda.memory_stats()['allocation.all.allocated']): that memory lies outside the tensors the node "
                         "declares; write into declared tensors (out=..., in-place ops)" % (label, counted[1] - counted[0]))
    return graph


def params_of(reads, writes, state, label):
    """The node's params and slices: a tensor in `reads` only is read, in `writes` only written, in both
    read and written; every declaration vouched for (captured work has no code to read)."""
    order, modes = [], {}
    for t, mode in [(t, "read") for t in reads] + [(t, "write") for t in writes]:
        key = id(t)
        if key not in modes:
            order.append(t)
            modes[key] = mode
        elif modes[key] != mode:
            modes[key] = "read_write"
    params, args = [], {}
    for i, t in enumerate(order):
        mode = modes[id(t)]
        name = "%s%d" % ({"read": "in", "write": "out", "read_write": "inout"}[mode], i)
        params.append([name, mode, "vouched"])
        args[name] = state.slice_of(t, "%s.%s" % (label, name), "Graph.torch(%s) tensor %d" % (label, i))
    return params, args


def record(g, fn, reads, writes, after=None, warmup=True, name=None):
    """`Graph.torch`: captures `fn()` (its CUDA work on the declared tensors) and records it as a node
    that reads `reads` and writes `writes` (a tensor in both is read and written; views declare their own
    bytes). `warmup=True` runs it once before capturing (the written tensors are restored);
    `after=[node, ...]` orders it beyond the data flow; `name` names its kernel. Returns the node id."""
    torch = require_torch()
    reads, writes = list(reads), list(writes)
    if not callable(fn):
        raise ArgumentError("Graph.torch: %r is not callable" % (fn,))
    if not writes:
        raise ArgumentError("Graph.torch: `writes` is empty: a node that writes nothing does nothing the graph can see")
    label = name or getattr(fn, "__name__", "torch")
    if label == "<lambda>":
        label = "torch"
    state = _tensors.of(g)
    devices = {_tensors.cuda_device(t, "Graph.torch(%s) tensor" % label) for t in reads + writes}
    if len(devices) != 1:
        raise ArgumentError("Graph.torch(%s): tensors on CUDA devices %s; a node runs on one" % (label, sorted(devices)))
    device = devices.pop()
    params, args = params_of(reads, writes, state, label)
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        if warmup:
            warm_up(torch, fn, stream, writes)
        graph = capture(torch, fn, stream, label, device)
    # What the captured work needs alive: its graph and private pool, its stream (PyTorch keys the cuBLAS
    # workspace its kernels address by stream), and the tensors it addresses.
    owner = (graph, stream, tuple(reads), tuple(writes))
    kernel_name = state.fresh_name(label, reserve=False)
    k = g._kernel_captured(kernel_name, params, graph.raw_cuda_graph(), owner, label)
    state.names.add(kernel_name)
    return g._launch(k, [1], [1], 0, after, args)
