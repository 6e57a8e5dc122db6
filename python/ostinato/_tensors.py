"""Tensors as Ostinato buffers, for the Triton and PyTorch nodes of a graph.

Each distinct storage (one allocation of PyTorch's) becomes one buffer, bound to that storage's memory
at every CUDA instantiation; each tensor is the byte slice of its storage that its elements span. Views
of one storage are slices of one buffer, so the planner orders them on their overlap and nowhere else.
The graph holds every storage it records (an exec then holds them too), so memory a node addresses is
never freed under it.
"""

from ._ostinato import ArgumentError, GraphError

_STATE = "_ostinato_tensors"


class StorageMemory:
    """A storage's bytes as `__cuda_array_interface__` (what an exec binds), holding the storage."""

    def __init__(self, storage, ptr, nbytes):
        self.storage = storage
        self.ptr = ptr
        self.nbytes = nbytes

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3, "strides": None}


class TensorBuffers:
    """One graph's storages: `(device, address)` → (buffer, bytes)."""

    def __init__(self, graph):
        self.graph = graph
        self.by_storage = {}
        self.names = set()
        # Triton kernels declared, by compilation and declaration (`ostinato._triton.declare`).
        self.kernels = {}

    def fresh_name(self, hint, reserve=True):
        """A name from `hint` no buffer or kernel of this recorder has taken (`hint.2`, ...); `reserve`
        takes it (else `take` does, once what it names exists)."""
        base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in hint) or "tensor"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "t_" + base
        name, n = base, 1
        while name in self.names:
            n += 1
            name = "%s.%d" % (base, n)
        if reserve:
            self.names.add(name)
        return name

    def slice_of(self, tensor, hint, what):
        """The byte slice of `tensor`'s storage its elements span (a new buffer for a new storage)."""
        device = cuda_device(tensor, what)
        storage = tensor.untyped_storage()
        ptr, nbytes = storage.data_ptr(), storage.nbytes()
        if tensor.numel() == 0 or nbytes == 0:
            raise ArgumentError("%s: the tensor is empty: a node addresses no byte of it" % what)
        if any(s < 0 for s in tensor.stride()):
            raise ArgumentError("%s: negative strides %s" % (what, tuple(tensor.stride())))
        key = (device, ptr)
        entry = self.by_storage.get(key)
        if entry is None:
            buffer = self.graph.buffer(self.fresh_name(hint), nbytes)
            self.graph._bind_external(buffer, StorageMemory(storage, ptr, nbytes), device)
            entry = self.by_storage[key] = (buffer, nbytes)
        buffer, known = entry
        if known != nbytes:
            raise GraphError("%s: storage at %#x holds %d bytes, recorded with %d" % (what, ptr, nbytes, known))
        size = tensor.element_size()
        lo = tensor.storage_offset() * size
        span = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
        hi = lo + span * size
        if hi > nbytes:
            raise ArgumentError("%s: elements [%d, %d) bytes lie past the storage's %d" % (what, lo, hi, nbytes))
        return buffer[lo:hi]


def cuda_device(tensor, what):
    """The CUDA device index of a tensor, or an error naming the argument."""
    device = getattr(tensor, "device", None)
    if getattr(device, "type", None) != "cuda":
        raise ArgumentError("%s: a node's tensors live on a CUDA device, this one on %s" % (what, device))
    return device.index if device.index is not None else 0


def of(graph):
    """The graph's storages (made on first use, kept in the graph's `__dict__`)."""
    state = graph.__dict__.get(_STATE)
    if state is None:
        state = graph.__dict__[_STATE] = TensorBuffers(graph)
    return state


def is_tensor(value):
    """A torch tensor (or anything shaped like one: storage, offset, strides, dtype)."""
    return all(hasattr(value, a) for a in ("untyped_storage", "storage_offset", "stride", "element_size", "dtype"))
