"""Ostinato: record a GPU kernel DAG once, declaring the byte ranges each node reads and writes;
replay it as one retained submission with the orderings the data flow needs and nothing more.

    import ostinato
    g = ostinato.Graph()
    a = g.buffer("a", 4096, init="iota")
    mix = g.kernel("mix", [("out", "read_write"), ("inp", "read"), ("n_out", "u32"), ("n_in", "u32"),
                           ("salt", "u32")], host="builtin:mix", cuda="builtin:mix", vulkan="builtin:mix")
    salt = g.slot("salt", "u32", 7)
    g.launch(mix, grid=(1, 1, 1), block=(256, 1, 1), out=a[0:1024], inp=a[1024:2048], n_out=256, n_in=256, salt=salt)
    ex = g.plan().instantiate("host")
    ex.set_slot("salt", 9); ex.replay(10); ex.wait()
    data = ex.read("a")

Triton kernels and PyTorch ops join a graph on the tensors they use (each storage a buffer bound to its
memory, each tensor a byte slice of it; docs/python-kernels.md):

    g = ostinato.Graph()
    g.triton(add_kernel, (triton.cdiv(n, 1024),), x, y, out, n, BLOCK=1024)   # access read from its PTX
    g.torch(lambda: torch.matmul(out, w, out=h), reads=[out, w], writes=[h])  # captured, replayed in place
    ex = g.plan().instantiate("cuda")
    ex.replay(); ex.wait()                                                     # h holds the result

An application's own `torch.cuda.CUDAGraph` replays through Ostinato's graph-API interposer (the
process started under LD_PRELOAD=libostinato_preload.so; docs/adoption.md), unchanged:

    a = ostinato.adopt(torch_graph)     # a.adopted, a.explain(): each captured edge kept or dropped, and why
    a.replay()                          # or torch_graph.replay(): the adopted graph runs

    with ostinato.record_allocations() as rec:  # extents per allocation, not per 2 MiB segment
        with torch.cuda.graph(g2): ...
    ostinato.adopt(g2, allocations=rec.extents)

A Buffer, slice, Kernel or Slot belongs to the graph that made it: another graph refuses it. Errors
raise a subclass of `ostinato.Error` by kind (`GraphError`, `FileError`, `PlanError`,
`ArgumentError`, `StateError`, `BindError`, `UnsupportedError`, `BackendMissingError`, `DeviceError`,
`FaultError`, `MismatchError`, `IoError`), the message naming the file:line, node, param, buffer or
slot.
"""

import os as _os
import tempfile as _tempfile
import hashlib as _hashlib

from ._ostinato import Error, Buffer, BufferSlice, Kernel, Slot, devices, options  # noqa: F401
from ._ostinato import (  # noqa: F401
    GraphError, FileError, PlanError, ArgumentError, StateError, BindError, UnsupportedError,
    BackendMissingError, DeviceError, FaultError, MismatchError, IoError,
)
from ._ostinato import PyGraph as Graph, PyPlan as Plan, PyExec as Exec  # noqa: F401
from ._ostinato import load as _load
from ._ostinato import llama_step as _llama_step
from ._adopt import adopt, Adoption, AllocationRecord, record_allocations  # noqa: F401

__all__ = ["Error", "GraphError", "FileError", "PlanError", "ArgumentError", "StateError", "BindError", "UnsupportedError",
           "BackendMissingError", "DeviceError", "FaultError", "MismatchError", "IoError",
           "Graph", "Plan", "Exec", "Buffer", "BufferSlice", "Kernel", "Slot", "load", "devices", "options", "source_file", "as_bytes",
           "llama_step", "adopt", "Adoption", "AllocationRecord", "record_allocations"]


def llama_step(config=None, max_seq=1024, seed=1, attn_splits=0, gemv_blocks=None, o_proj="registers"):
    """Records one Llama decode step as a graph (Ostinato's Llama kernels; Llama-3.2-1B by default).

    `config`: a Hugging Face config (a dict, e.g. `LlamaConfig.to_dict()`, or config.json text).
    Returns `(graph, data)`: `data` maps buffer names to bytes to `write` after instantiating (the
    RoPE frequency table). Buffers: `embed`, `norm`, `layers.{l}.{ln1,wqkv,wo,ln2,wgu,wd}` (bf16:
    wqkv is q, k, v rows stacked; wgu gate then up), `layers.{l}.{kcache,vcache}` (bf16,
    [kv_head][max_seq][head_dim]), `token` (u32), `logits` (f32); slot `pos`. `attn_splits` 0 picks
    the attention's blocks per KV head (32, the most); `gemv_blocks` caps each projection's grid (None:
    the step's default, one block per SM of an H200); `o_proj` the output projection's form:
    `"registers"` (one kernel merging the attention's partials, its weights in registers) or
    `"stream"` (a merge kernel, then the weights streamed through shared memory: for a W_o larger than
    the register file holds)."""
    import json as _json
    text = config if isinstance(config, str) or config is None else _json.dumps(config)
    graph, data = _llama_step(text, max_seq, seed, attn_splits, gemv_blocks, o_proj)
    return graph, dict(data)


def load(path):
    """Loads a graph file (TOML, the format of `ostinato run`); relative kernel paths resolve against
    the file's folder."""
    return _load(_os.fspath(path))


def source_file(text, suffix=".cu"):
    """Writes kernel source text (CUDA C, or PTX with suffix=".ptx") to a cache file named by its
    content hash and returns its path, for `kernel(..., cuda=ostinato.source_file(src))`."""
    digest = _hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    folder = _os.path.join(_tempfile.gettempdir(), "ostinato-sources")
    _os.makedirs(folder, exist_ok=True)
    path = _os.path.join(folder, digest + suffix)
    if not _os.path.exists(path):
        tmp = path + ".%d.tmp" % _os.getpid()
        with open(tmp, "w") as f:
            f.write(text)
        _os.replace(tmp, path)
    return path


def as_bytes(obj):
    """The bytes of any buffer-protocol object (NumPy arrays included), for `Exec.write`."""
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj)
    return memoryview(obj).cast("B").tobytes()
