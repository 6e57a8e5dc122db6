"""Triton kernels as nodes: `Graph.triton(kernel, grid, *args, **constexprs_and_options)`.

The kernel is compiled through Triton's own API for the device's architecture, with the specialisation a
direct launch of the same arguments would get (Triton's binder: pointer alignment, integer divisibility,
ints equal to 1 folded), except for slots, which stay plain runtime scalars. From the compiled kernel
Ostinato takes the cubin (what loads and runs), the PTX (what the kernel contract reads: the access of
every pointer param, and whether the kernel waits on its dependencies before touching memory), and the
launch metadata: its name, `num_warps` (the block), its shared memory, and the params this Triton version
appends to the kernel's own (a global scratch pointer, and from 3.5 a profiler scratch pointer). A scratch
area the kernel needs becomes a buffer the exec allocates, declared read-write for that node; where the
kernel needs none, the pointer is the null the launcher passes. docs/python-kernels.md has the design.
"""

import re
from dataclasses import dataclass, field

from ._ostinato import ArgumentError, BackendMissingError, GraphError, Slot, UnsupportedError
from . import _tensors

# The Triton versions whose compile API and launch convention Ostinato reads (inclusive, major.minor).
SUPPORTED = ((3, 4), (3, 6))

# Ostinato scalar types by Triton's signature type (other types have no Ostinato scalar: refused).
SCALAR_TYPES = {"i32": "i32", "u32": "u32", "i64": "i64", "u64": "u64", "fp32": "f32", "fp64": "f64"}
# A slot's Triton type, by its Ostinato type.
SLOT_TRITON_TYPES = {v: k for k, v in SCALAR_TYPES.items()}

# Options of Ostinato's own (the rest are Triton's compile options or constexprs).
OWN_OPTIONS = ("access", "after", "alias")


def version_of(text):
    """`(major, minor)` of a version string (`3.6.0`, `3.5.0+git…`)."""
    m = re.match(r"(\d+)\.(\d+)", text)
    if not m:
        raise UnsupportedError("Triton reports version %r, which is not major.minor" % text)
    return int(m.group(1)), int(m.group(2))


def require_triton():
    """Triton, checked against the supported range."""
    try:
        import triton
    except ImportError as e:
        raise BackendMissingError("Graph.triton needs Triton (pip install triton): %s" % e) from e
    v = version_of(triton.__version__)
    if not SUPPORTED[0] <= v <= SUPPORTED[1]:
        lo, hi = SUPPORTED
        raise UnsupportedError("Triton %s is not supported: Ostinato reads the compile API and launch convention of Triton %d.%d to %d.%d "
                               "(docs/python-kernels.md)" % (triton.__version__, lo[0], lo[1], hi[0], hi[1]))
    return triton


def appended_params(version):
    """The params a Triton version's launcher appends to a kernel's own: a global scratch pointer (3.3 on)
    and a profiler scratch pointer (3.5 on)."""
    return ["global_scratch"] if version < (3, 5) else ["global_scratch", "profile_scratch"]


@dataclass
class Param:
    """One param of the compiled kernel, in PTX order."""
    name: str
    kind: str                 # "pointer", an Ostinato scalar type, or "scratch"
    value: object = None      # the argument: a tensor, a number or a Slot; a scratch area's bytes per program
    align: int = 1            # a scratch area's alignment


@dataclass
class TritonKernel:
    """A Triton kernel compiled for one specialisation, as Ostinato binds it."""
    name: str                 # the kernel's symbol
    key: str                  # Triton's hash of the compilation
    ptx: str
    cubin: bytes
    params: list
    num_warps: int
    shared: int
    bound: dict = field(default_factory=dict)   # every argument by name (constexprs too), as a grid callable sees them

    @property
    def block(self):
        return 32 * self.num_warps


def unwrap(kernel, args, kwargs):
    """The `@triton.jit` function under `kernel`, with the constexprs `@triton.heuristics` computes;
    an autotuned kernel is refused (its choice needs timed launches: pass the chosen config's values)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction
    while True:
        if isinstance(kernel, JITFunction):
            return kernel, kwargs
        if isinstance(kernel, Autotuner):
            raise ArgumentError("Graph.triton: `%s` is autotuned; record the kernel under the autotuner (`kernel.fn`) with the chosen "
                                "config's constexprs and options" % getattr(kernel.fn, "__name__", kernel))
        if isinstance(kernel, Heuristics):
            named = dict(zip(kernel.arg_names, args), **kwargs)
            kwargs = dict(kwargs, **{k: h(named) for k, h in kernel.values.items()})
            kernel = kernel.fn
            continue
        raise ArgumentError("Graph.triton: %r is not a @triton.jit function" % (kernel,))


def specialize(fn, backend, args, kwargs):
    """Triton's own binding of the arguments for `backend` (what a direct launch computes), with every
    slot argument a plain runtime scalar of the slot's type. Returns the bound arguments (a slot where
    one was given) and the specialisation (type, attribute) per param."""
    from triton.runtime.jit import create_function_from_signature
    slots = {}
    plain_args = []
    for i, a in enumerate(args):
        plain_args.append(0 if isinstance(a, Slot) else a)
        if isinstance(a, Slot):
            slots[fn.arg_names[i] if i < len(fn.arg_names) else i] = a
    plain_kwargs = {}
    for k, v in kwargs.items():
        plain_kwargs[k] = 0 if isinstance(v, Slot) else v
        if isinstance(v, Slot):
            slots[k] = v
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    try:
        bound, spec, _ = binder(*plain_args, **plain_kwargs)
    except TypeError as e:
        raise ArgumentError("Graph.triton(%s): %s" % (fn.__name__, e)) from e
    spec = list(spec)
    for i, p in enumerate(fn.params):
        slot = slots.get(p.name)
        if slot is None:
            continue
        if p.is_constexpr:
            raise ArgumentError("Graph.triton(%s): param `%s` is a constexpr; a slot patches a runtime scalar" % (fn.__name__, p.name))
        ty = SLOT_TRITON_TYPES[slot.ty]
        if p.annotation_type and p.annotation_type != ty:
            raise ArgumentError("Graph.triton(%s): param `%s` is annotated %s, slot `%s` is %s" % (fn.__name__, p.name, p.annotation_type, slot.name, slot.ty))
        spec[i] = (ty, None)
        bound[p.name] = slot
    return bound, spec


def pack(fn, backend, bound, spec, kwargs):
    """Options, signature, constexprs and attributes as Triton's launcher packs them for `compile`."""
    from triton import knobs
    from triton._utils import find_paths_if, get_iterable_path
    options = dict(kwargs)
    options["debug"] = options.get("debug", fn.debug) or knobs.runtime.debug
    parsed = backend.parse_options(options)
    mode = getattr(getattr(knobs, "compilation", None), "instrumentation_mode", None)
    if mode is not None and "instrumentation_mode" in parsed.__dict__ and "instrumentation_mode" not in kwargs:
        options["instrumentation_mode"] = mode
        parsed = backend.parse_options(options)
    names = [p.name for p in fn.params]
    for k in kwargs:
        if k not in parsed.__dict__ and k not in names:
            raise ArgumentError("Graph.triton(%s): `%s` is neither a param of the kernel nor a Triton option" % (fn.__name__, k))
    types = [s[0] for s in spec]
    signature = dict(zip(names, types))
    constexprs = {path: get_iterable_path(list(bound.values()), path) for path in find_paths_if(types, lambda _, v: v == "constexpr")}
    attrs_of = [s[1] for s in spec]
    attrs = {k: backend.parse_attr(get_iterable_path(attrs_of, k)) for k in find_paths_if(attrs_of, lambda _, x: isinstance(x, str))}
    return parsed, signature, constexprs, attrs


def ptx_param_count(ptx, entry):
    """How many params the PTX entry `entry` declares."""
    m = re.search(r"\.entry\s+%s\s*\((.*?)\)" % re.escape(entry), ptx, re.S)
    if not m:
        raise GraphError("the PTX Triton produced has no entry `%s`" % entry)
    return len(re.findall(r"\.param\s", m.group(1)))


def refuse_launch_options(fn, md):
    """Launch features an Ostinato node does not carry: refused by name."""
    if getattr(md, "num_ctas", 1) != 1:
        raise UnsupportedError("Graph.triton(%s): num_ctas=%d launches thread-block clusters, which an Ostinato node does not carry" % (fn.__name__, md.num_ctas))
    if getattr(md, "launch_cooperative_grid", False):
        raise UnsupportedError("Graph.triton(%s): launch_cooperative_grid: a cooperative launch is not an Ostinato node" % fn.__name__)
    if getattr(md, "launch_pdl", False):
        raise UnsupportedError("Graph.triton(%s): launch_pdl: Ostinato decides programmatic edges itself, from the kernel's PTX (a kernel that "
                               "calls gdc_wait() before touching memory gets them where they pay); drop the option" % fn.__name__)
    if getattr(md, "profile_scratch_size", 0):
        raise UnsupportedError("Graph.triton(%s): the kernel is instrumented for Triton's profiler (profile scratch of %d bytes per program); "
                               "record it without instrumentation" % (fn.__name__, md.profile_scratch_size))


def compile_kernel(kernel, args, kwargs, target):
    """Compiles `kernel` for `target` (a `triton.backends.compiler.GPUTarget`) as a launch with `args`
    and `kwargs` would, without launching: no device is needed. Returns a `TritonKernel`."""
    triton = require_triton()
    from triton.compiler import ASTSource, make_backend
    fn, kwargs = unwrap(kernel, args, kwargs)
    backend = make_backend(target)
    bound, spec = specialize(fn, backend, args, kwargs)
    options, signature, constexprs, attrs = pack(fn, backend, bound, spec, kwargs)
    params = []
    for p, ty in zip(fn.params, (s[0] for s in spec)):
        if ty == "constexpr":
            continue
        value = bound[p.name]
        if isinstance(ty, tuple):
            raise UnsupportedError("Graph.triton(%s): param `%s` is a tuple; pass its members as params of their own" % (fn.__name__, p.name))
        if ty.startswith("*"):
            params.append(Param(p.name, "pointer", value))
        elif ty in SCALAR_TYPES:
            params.append(Param(p.name, SCALAR_TYPES[ty], value))
        elif ty in ("u1", "i1"):
            raise UnsupportedError("Graph.triton(%s): param `%s` is a bool; pass it as an int (Ostinato scalars are 32 or 64 bits) or make it a constexpr" % (fn.__name__, p.name))
        else:
            raise UnsupportedError("Graph.triton(%s): param `%s` has Triton type %s, which no Ostinato scalar or buffer carries" % (fn.__name__, p.name, ty))
    compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    md = compiled.metadata
    refuse_launch_options(fn, md)
    version = version_of(triton.__version__)
    extra = appended_params(version)
    ptx, cubin = compiled.asm["ptx"], compiled.asm["cubin"]
    found = ptx_param_count(ptx, md.name)
    if found != len(params) + len(extra):
        raise UnsupportedError("Graph.triton(%s): the compiled kernel takes %d params; its %d arguments and the %s Triton %d.%d appends make %d"
                               % (fn.__name__, found, len(params), ", ".join(extra), version[0], version[1], len(params) + len(extra)))
    params.append(Param("global_scratch", "scratch", md.global_scratch_size, md.global_scratch_align))
    if len(extra) > 1:
        params.append(Param("profile_scratch", "scratch", 0, 1))
    return TritonKernel(md.name, md.hash, ptx, bytes(cubin), params, md.num_warps, md.shared, dict(bound))


def grid_of(grid, bound, name):
    """The launch grid as 1 to 3 positive ints: a tuple, or a callable of the bound arguments (Triton's
    `lambda meta: ...`), evaluated once when the node is recorded."""
    try:
        g = grid(bound) if callable(grid) else grid
        dims = [int(x) for x in ((g,) if isinstance(g, int) else g)]
    except TypeError as e:
        raise ArgumentError("Graph.triton(%s): the grid is not 1 to 3 ints (%s; a slot cannot size it: the grid is fixed when recorded)" % (name, e)) from e
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ArgumentError("Graph.triton(%s): the grid %r is not 1 to 3 positive ints" % (name, tuple(dims)))
    return dims


def declared(access, tk, name):
    """Each pointer param's declaration: `access[name]` (a mode, or `(mode, "vouched")`), else `infer`
    (read from the PTX when the graph is planned)."""
    access = dict(access or {})
    pointers = [p.name for p in tk.params if p.kind == "pointer"]
    unknown = sorted(set(access) - set(pointers))
    if unknown:
        raise ArgumentError("Graph.triton(%s): access= names %s, which are not pointer params (those are %s)" % (name, unknown, pointers))
    out = {}
    for p in pointers:
        d = access.get(p, "infer")
        out[p] = list(d) if isinstance(d, (tuple, list)) else [d]
    return out


def kernel_params(tk, decl):
    """The Ostinato signature of the compiled kernel: `[name, kind(, "vouched")]` per PTX param. A scratch
    area the kernel uses is its own buffer, read-write (the kernel's workspace: nothing else touches it);
    one it does not use is the null pointer the launcher passes, a u64."""
    out = []
    for p in tk.params:
        if p.kind == "pointer":
            out.append([p.name] + decl[p.name])
        elif p.kind == "scratch":
            out.append([p.name, "read_write", "vouched"] if p.value else [p.name, "u64"])
        else:
            out.append([p.name, p.kind])
    return out


def declare(g, tk, decl, alias=None):
    """The graph's kernel for this compilation and declaration (declared once, checked against its PTX
    now: a declaration the code contradicts is refused here, with no device)."""
    state = _tensors.of(g)
    cache = state.kernels
    alias = [tuple(a) for a in alias or []]
    key = (tk.key, tuple((k, tuple(v)) for k, v in sorted(decl.items())), tuple(alias))
    if key not in cache:
        name = state.fresh_name(tk.name, reserve=False)
        cache[key] = g._kernel_assembled(name, kernel_params(tk, decl), tk.ptx, tk.cubin, tk.name, alias)
        state.names.add(name)
    return cache[key]


def device_of(args, kwargs, name):
    """The CUDA device of the tensor arguments (all one)."""
    devices = {_tensors.cuda_device(a, "Graph.triton(%s) argument" % name) for a in list(args) + list(kwargs.values()) if _tensors.is_tensor(a)}
    if len(devices) > 1:
        raise ArgumentError("Graph.triton(%s): tensors on CUDA devices %s; a node runs on one" % (name, sorted(devices)))
    return devices.pop() if devices else None


def target_of(device):
    """Triton's target for a CUDA device, as its driver reports the current one."""
    import torch
    from triton.backends.compiler import GPUTarget
    major, minor = torch.cuda.get_device_capability(device)
    return GPUTarget("cuda", major * 10 + minor, 32)


def record(g, kernel, grid, args, **kwargs):
    """`Graph.triton`: compiles, declares and launches. Ostinato's options: `access={"out": "write"}` (a
    pointer param's declared access, checked against the PTX; `("read", "vouched")` where the analysis
    cannot tell; undeclared pointers are inferred from the PTX), `alias=[("x_ptr", "out_ptr")]` (pointer
    params one launch may pass overlapping tensors, one of them written: an in-place kernel whose code
    orders them itself), `after=[node, ...]`. Every other keyword
    is a constexpr or a Triton compile option (`num_warps=`, `num_stages=`...). Returns the node id."""
    own = {k: kwargs.pop(k) for k in OWN_OPTIONS if k in kwargs}
    name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel")
    device = device_of(args, kwargs, name)
    if device is None:
        raise ArgumentError("Graph.triton(%s): no tensor argument: the device and the buffers come from the tensors" % name)
    tk = compile_kernel(kernel, args, kwargs, target_of(device))
    return add_node(g, tk, grid, **own)


def add_node(g, tk, grid, access=None, alias=None, after=None):
    """Declares the compiled kernel (once per compilation and declaration) and records its launch on the
    tensors' buffers, with a scratch buffer of its own where the kernel needs one. Returns the node id."""
    name = tk.name
    k = declare(g, tk, declared(access, tk, name), alias)
    dims = grid_of(grid, tk.bound, name)
    programs = dims[0] * (dims[1] if len(dims) > 1 else 1) * (dims[2] if len(dims) > 2 else 1)
    state = _tensors.of(g)
    launch_args = {}
    for p in tk.params:
        what = "Graph.triton(%s) param `%s`" % (name, p.name)
        if p.kind == "pointer":
            if not _tensors.is_tensor(p.value):
                raise ArgumentError("%s: a pointer param takes a CUDA tensor, got %r" % (what, type(p.value).__name__))
            launch_args[p.name] = state.slice_of(p.value, p.name, what)
        elif p.kind == "scratch" and p.value:
            if p.align > 256:
                raise UnsupportedError("%s: Triton asks %d-byte alignment; an exec's allocation gives 256" % (what, p.align))
            size = -(-programs * p.value // p.align) * p.align
            launch_args[p.name] = g.buffer(state.fresh_name("%s.%s" % (k.name, p.name)), size)
        elif p.kind == "scratch":
            launch_args[p.name] = 0
        else:
            launch_args[p.name] = p.value
    return g._launch(k, dims, [tk.block], tk.shared, after, launch_args)
