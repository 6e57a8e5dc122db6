//! Recording a graph and planning it: `ost_graph_*`, `ost_plan_*`.

use std::collections::BTreeMap;
use std::ffi::c_char;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelRef, KernelSig, Launch, NodeId, Plan, Scalar, ScalarType};
use ostinato_runtime::ostinato_host::HostKernel;

use crate::ids::{IdKind, Tag};
use crate::ost_status::{self, *};
use crate::{guard, items, lookup, need, put, register_at, text, unregister, Fallible, Object};

/// An opaque recorded graph (`ost_graph_new`, `ost_graph_load`). Not thread-safe to share; calls on one
/// handle from two threads are serialised.
pub struct ost_graph {
    _private: [u8; 0],
}

/// An opaque plan (`ost_plan_compile`): immutable, shareable between threads.
pub struct ost_plan {
    _private: [u8; 0],
}

/// A buffer param the kernel only reads.
pub const OST_PARAM_READ: u32 = 1;
/// A buffer param the kernel only writes.
pub const OST_PARAM_WRITE: u32 = 2;
/// A buffer param the kernel reads and writes.
pub const OST_PARAM_READ_WRITE: u32 = 3;
/// A buffer param whose access is read from the kernel's code when the graph is planned
/// (`ost_plan_compile`): the modes its implementations' code shows.
pub const OST_PARAM_INFER: u32 = 4;
/// Or'ed with `OST_PARAM_READ`, `_WRITE` or `_READ_WRITE`: the author vouches for the declared mode
/// where the analysis of the kernel's code cannot tell (a pointer read from memory, machine code).
pub const OST_PARAM_VOUCHED: u32 = 0x100;
/// Scalar types (params, slots, scalar args).
pub const OST_U32: u32 = 16;
pub const OST_I32: u32 = 17;
pub const OST_U64: u32 = 18;
pub const OST_I64: u32 = 19;
pub const OST_F32: u32 = 20;
pub const OST_F64: u32 = 21;

/// Arg kinds of `ost_arg`.
pub const OST_ARG_BUFFER: u32 = 1;
pub const OST_ARG_SCALAR: u32 = 2;
pub const OST_ARG_SLOT: u32 = 3;

/// `ost_slice.len` meaning "from `offset` to the end of the buffer".
pub const OST_WHOLE: u64 = u64::MAX;

/// One param of a kernel signature: its name and kind (`OST_PARAM_*` for buffers, `OST_U32`… for
/// scalars). Nothing is assumed: every buffer param declares its access.
#[repr(C)]
pub struct ost_param {
    pub name: *const c_char,
    pub kind: u32,
}

/// A scalar value: its type (`OST_U32`…) and its little-endian bits (`ost_scalar_u32()` and friends
/// make one).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ost_scalar {
    pub type_: u32,
    pub bits: u64,
}

/// A byte range of a buffer: the declared extent of an access.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ost_slice {
    /// The buffer's id (from `ost_graph_add_buffer`, `_add_view` or `ost_graph_buffer_id`).
    pub buffer: u32,
    pub offset: u64,
    /// Bytes, or `OST_WHOLE` for the rest of the buffer.
    pub len: u64,
}

/// One launch argument: a buffer slice (`OST_ARG_BUFFER`), a fixed scalar (`OST_ARG_SCALAR`) or a
/// patchable slot (`OST_ARG_SLOT`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ost_arg {
    pub kind: u32,
    pub slice: ost_slice,
    pub scalar: ost_scalar,
    pub slot: u32,
}

pub(crate) struct CGraph {
    pub graph: Graph,
    /// Per kernel: backend name → reference.
    pub impls: Vec<BTreeMap<String, KernelRef>>,
    /// Per kernel: a host function given with `ost_graph_set_host_kernel`.
    pub host_fns: Vec<Option<HostKernel>>,
    /// Per buffer: its initial contents (graph files), written at exec creation.
    pub inits: Vec<Option<BufferInit>>,
    pub base_dir: PathBuf,
    /// The graph file it was loaded from, if it was (named where an error says what to add).
    pub file: Option<String>,
    /// The graph's tag, which every id it gives out carries.
    pub tag: Tag,
}

/// Registers a new graph over `graph` with its own tag; returns its handle.
fn register_graph(
    graph: Graph,
    impls: Vec<BTreeMap<String, KernelRef>>,
    inits: Vec<Option<BufferInit>>,
    base_dir: PathBuf,
    file: Option<String>,
) -> Fallible<usize> {
    let key = crate::next_key();
    let tag = crate::ids::take_tag(key)?;
    let k = graph.kernels().len();
    for kind in [IdKind::Buffer, IdKind::Kernel, IdKind::Slot, IdKind::Node] {
        let n = match kind {
            IdKind::Buffer => graph.buffers().len(),
            IdKind::Kernel => k,
            IdKind::Slot => graph.slots().len(),
            IdKind::Node => graph.nodes().len(),
        };
        if n > crate::ids::MAX_INDEX {
            return Err((OST_ERR_GRAPH, format!("the graph holds {n} {}s, more than the {} the C ABI numbers", kind.noun(), crate::ids::MAX_INDEX)));
        }
    }
    let g = CGraph { graph, impls, host_fns: vec![None; k], inits, base_dir, file, tag };
    register_at(key, Object::Graph(Arc::new(Mutex::new(g))));
    Ok(key)
}

/// A compiled plan with what an exec needs beside it.
pub(crate) struct CPlan {
    pub plan: Plan,
    pub impls: Vec<BTreeMap<String, KernelRef>>,
    pub host_fns: Vec<Option<HostKernel>>,
    pub inits: Vec<Option<BufferInit>>,
    /// The graph file of its graph, if loaded from one.
    pub file: Option<String>,
}

pub(crate) fn graph_of(g: *const ost_graph) -> Fallible<Arc<Mutex<CGraph>>> {
    match lookup(g as usize, "graph")? {
        Object::Graph(g) => Ok(g),
        _ => Err((OST_ERR_HANDLE, "the handle is not a graph".into())),
    }
}

pub(crate) fn plan_of(p: *const ost_plan) -> Fallible<Arc<CPlan>> {
    match lookup(p as usize, "plan")? {
        Object::Plan(p) => Ok(p),
        _ => Err((OST_ERR_HANDLE, "the handle is not a plan".into())),
    }
}

fn graph_err(e: ostinato::GraphError) -> (ost_status, String) {
    (crate::status_of(e.kind()), e.to_string())
}

pub(crate) fn scalar_type(t: u32) -> Fallible<ScalarType> {
    Ok(match t {
        OST_U32 => ScalarType::U32,
        OST_I32 => ScalarType::I32,
        OST_U64 => ScalarType::U64,
        OST_I64 => ScalarType::I64,
        OST_F32 => ScalarType::F32,
        OST_F64 => ScalarType::F64,
        other => return Err((OST_ERR_ARGUMENT, format!("{other} is not a scalar type (OST_U32 … OST_F64)"))),
    })
}

fn scalar(s: ost_scalar) -> Fallible<Scalar> {
    Ok(Scalar { ty: scalar_type(s.type_)?, bits: s.bits })
}

/// A `u32` scalar.
#[no_mangle]
pub extern "C" fn ost_scalar_u32(v: u32) -> ost_scalar {
    ost_scalar { type_: OST_U32, bits: v as u64 }
}

/// An `i32` scalar (its 32 bits).
#[no_mangle]
pub extern "C" fn ost_scalar_i32(v: i32) -> ost_scalar {
    ost_scalar { type_: OST_I32, bits: v as u32 as u64 }
}

/// A `u64` scalar.
#[no_mangle]
pub extern "C" fn ost_scalar_u64(v: u64) -> ost_scalar {
    ost_scalar { type_: OST_U64, bits: v }
}

/// An `i64` scalar.
#[no_mangle]
pub extern "C" fn ost_scalar_i64(v: i64) -> ost_scalar {
    ost_scalar { type_: OST_I64, bits: v as u64 }
}

/// An `f32` scalar.
#[no_mangle]
pub extern "C" fn ost_scalar_f32(v: f32) -> ost_scalar {
    ost_scalar { type_: OST_F32, bits: v.to_bits() as u64 }
}

/// An `f64` scalar.
#[no_mangle]
pub extern "C" fn ost_scalar_f64(v: f64) -> ost_scalar {
    ost_scalar { type_: OST_F64, bits: v.to_bits() }
}

/// A new, empty graph. Free it with `ost_graph_free`. At most 4,095 graphs are alive at once (their
/// ids are told apart by a tag of 12 bits): one more is refused with `OST_ERR_STATE` (a plan does not
/// need its graph: free graphs once compiled). A graph numbers at most 262,144 buffers, kernels, slots
/// and nodes each.
///
/// # Safety
/// `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_new(out: *mut *mut ost_graph) -> ost_status {
    guard(|| {
        need(out, "out")?;
        let key = register_graph(Graph::new(), Vec::new(), Vec::new(), PathBuf::from("."), None)?;
        // SAFETY: checked non-NULL above; the caller vouches it is writable.
        unsafe { put(out, key as *mut ost_graph, "out") }
    })
}

/// Loads a graph file (TOML; the format of `ostinato run`): buffers with their initial contents,
/// kernels with their implementations per backend, slots and nodes. Errors name `path:line`.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_load(path: *const c_char, out: *mut *mut ost_graph) -> ost_status {
    guard(|| {
        // SAFETY: the caller vouches for a NUL-terminated string.
        let path = unsafe { text(path, "path") }?;
        need(out, "out")?;
        let f = ostinato::file::load(std::path::Path::new(path), &ostinato_runtime::BackendKind::names()).map_err(|e| (OST_ERR_FILE, e.to_string()))?;
        let base_dir = f.base_dir().to_path_buf();
        let key = register_graph(f.graph, f.impls, f.inits, base_dir, Some(path.to_string()))?;
        // SAFETY: checked non-NULL above.
        unsafe { put(out, key as *mut ost_graph, "out") }
    })
}

/// Frees a graph (plans made from it stay valid). NULL is a no-op; a pointer that is not a live graph
/// (freed already) is refused with `OST_ERR_HANDLE`.
#[no_mangle]
pub extern "C" fn ost_graph_free(g: *mut ost_graph) -> ost_status {
    guard(|| unregister(g as usize, "graph", |o| matches!(o, Object::Graph(_))))
}

/// Declares a buffer of `size` bytes; its id goes to `id`. An id is opaque (not an index): it names
/// this buffer of this graph only, and any other graph refuses it (`OST_ERR_HANDLE`).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_buffer(g: *mut ost_graph, name: *const c_char, size: u64, id: *mut u32) -> ost_status {
    // SAFETY: forwarded with the caller's promises; device 0.
    unsafe { ost_graph_add_buffer_on(g, name, size, 0, id) }
}

/// Declares buffer `name` of `size` bytes on `device` of the DAG (0 for a one-device DAG; a kernel runs
/// on its buffers' device, a collective spans one buffer pair per device).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_buffer_on(g: *mut ost_graph, name: *const c_char, size: u64, device: u32, id: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        need(id, "id")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        g.tag.room(IdKind::Buffer, g.graph.buffers().len())?;
        let b = g.graph.add_buffer_on(name, size, device).map_err(graph_err)?;
        g.inits.push(None);
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(IdKind::Buffer, b.0), "id") }
    })
}

/// Records a collective: `op` is `"all_reduce"`, `"all_gather"` or `"reduce_scatter"`, `dtype` its
/// element type (`OST_U32` … `OST_F64`), rank `r` sends `send[r]` and receives into `recv[r]` (`nranks`
/// each, one rank per device). Refused, naming rank, buffer and device, where the extents do not fit.
///
/// # Safety
/// `op` is a NUL-terminated string; `send` and `recv` point to `nranks` items each; `after` to `nafter`
/// items (or the count is 0); `node` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_collective(
    g: *mut ost_graph,
    op: *const c_char,
    dtype: u32,
    send: *const ost_slice,
    recv: *const ost_slice,
    nranks: usize,
    after: *const u32,
    nafter: usize,
    node: *mut u32,
) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string and for the item counts.
        let (name, send, recv, after) =
            unsafe { (text(op, "op")?, items(send, nranks, "send")?, items(recv, nranks, "recv")?, items(after, nafter, "after")?) };
        let op = ostinato::collective::CollectiveOp::parse(name)
            .ok_or_else(|| (OST_ERR_ARGUMENT, format!("op `{name}` is not all_reduce, all_gather or reduce_scatter")))?;
        let ty = scalar_type(dtype)?;
        need(node, "node")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let s = send.iter().enumerate().map(|(i, x)| g.slice(*x, &|| format!("send[{i}]"))).collect::<Fallible<Vec<_>>>()?;
        let r = recv.iter().enumerate().map(|(i, x)| g.slice(*x, &|| format!("recv[{i}]"))).collect::<Fallible<Vec<_>>>()?;
        let after = g.node_ids(after, "after")?;
        g.tag.room(IdKind::Node, g.graph.nodes().len())?;
        let n = g.graph.add_collective(op, ty, &s, &r, &after).map_err(graph_err)?;
        // SAFETY: checked non-NULL above.
        unsafe { put(node, g.id(IdKind::Node, n.0), "node") }
    })
}

/// Declares `name` as a view of `len` bytes at `offset` of buffer `parent` (hazards are computed on the
/// shared allocation).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_view(g: *mut ost_graph, name: *const c_char, parent: u32, offset: u64, len: u64, id: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        need(id, "id")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let parent = g.buffer_id(parent, &|| format!("view `{name}`: parent"))?;
        g.tag.room(IdKind::Buffer, g.graph.buffers().len())?;
        let b = g.graph.add_view(name, parent, offset, len).map_err(graph_err)?;
        g.inits.push(None);
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(IdKind::Buffer, b.0), "id") }
    })
}

/// Declares a kernel signature: `count` params in order.
///
/// # Safety
/// `name` and every `params[i].name` are NUL-terminated strings; `params` points to `count` items
/// (or `count` is 0); `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_kernel(g: *mut ost_graph, name: *const c_char, params: *const ost_param, count: usize, id: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string and `count` params.
        let (name, params) = unsafe { (text(name, "name")?, items(params, count, "params")?) };
        need(id, "id")?;
        let mut sig = KernelSig::new(name);
        for (i, p) in params.iter().enumerate() {
            // SAFETY: the caller vouches for each param's NUL-terminated name.
            let pname = unsafe { text(p.name, &format!("params[{i}].name")) }?;
            let mode = |k: u32| match k {
                OST_PARAM_READ => Some(Access::Read),
                OST_PARAM_WRITE => Some(Access::Write),
                OST_PARAM_READ_WRITE => Some(Access::ReadWrite),
                _ => None,
            };
            sig = match (p.kind, mode(p.kind & !OST_PARAM_VOUCHED)) {
                (OST_PARAM_INFER, _) => sig.buffer_infer(pname),
                (k, Some(a)) if k & OST_PARAM_VOUCHED != 0 => sig.buffer_vouched(pname, a),
                (_, Some(a)) => sig.buffer(pname, a),
                (t, None) => sig.scalar(
                    pname,
                    scalar_type(t).map_err(|(s, m)| {
                        (s, format!("param `{pname}`: {m}; a buffer param declares OST_PARAM_READ, _WRITE, _READ_WRITE (each may be or'ed with OST_PARAM_VOUCHED) or OST_PARAM_INFER"))
                    })?,
                ),
            };
        }
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        g.tag.room(IdKind::Kernel, g.graph.kernels().len())?;
        let k = g.graph.add_kernel(sig).map_err(graph_err)?;
        g.impls.push(BTreeMap::new());
        g.host_fns.push(None);
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(IdKind::Kernel, k.0), "id") }
    })
}

/// Declares that kernel `kernel`'s buffer params `a` and `b` may bind overlapping bytes in one launch
/// although one is written (the kernel's code orders their accesses itself). Without it such a launch
/// is refused when recorded.
///
/// # Safety
/// `a` and `b` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_kernel_may_alias(g: *mut ost_graph, kernel: u32, a: *const c_char, b: *const c_char) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for two NUL-terminated strings.
        let (a, b) = unsafe { (text(a, "a")?, text(b, "b")?) };
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let kernel = g.kernel_id(kernel, &|| "kernel".into())?;
        g.graph.declare_aliasing(kernel, a, b).map_err(graph_err)
    })
}

/// Names kernel `kernel`'s implementation for `backend` (`"host"`, `"cuda"`): `source` is
/// `"builtin:NAME"` or a file (`.cu` compiled by NVRTC, `.ptx`, `.cubin`; relative to the graph
/// file's folder, or to the working directory); `entry` is its symbol (NULL: the kernel's name).
///
/// # Safety
/// `backend` and `source` are NUL-terminated strings; `entry` is NULL or one.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_set_kernel_impl(
    g: *mut ost_graph,
    kernel: u32,
    backend: *const c_char,
    source: *const c_char,
    entry: *const c_char,
) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for NUL-terminated strings.
        let (backend, source) = unsafe { (text(backend, "backend")?, text(source, "source")?) };
        // SAFETY: as above, where not NULL.
        let entry = if entry.is_null() { None } else { Some(unsafe { text(entry, "entry") }?) };
        let kind: ostinato_runtime::BackendKind = backend.parse().map_err(|e: ostinato_runtime::RuntimeError| (OST_ERR_ARGUMENT, e.to_string()))?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let kernel = g.kernel_id(kernel, &|| "kernel".into())?;
        let base = g.base_dir.clone();
        let slot = &mut g.impls[kernel.index()];
        let mut r = KernelRef::file(source);
        r.base_dir = base;
        r.entry = entry.map(str::to_string);
        slot.insert(kind.as_str().to_string(), r);
        Ok(())
    })
}

/// Declares a patchable scalar slot with its initial value; its id goes to `id`.
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_slot(g: *mut ost_graph, name: *const c_char, initial: ost_scalar, id: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        need(id, "id")?;
        let v = scalar(initial)?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        g.tag.room(IdKind::Slot, g.graph.slots().len())?;
        let s = g.graph.add_slot(name, v).map_err(graph_err)?;
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(IdKind::Slot, s.0), "id") }
    })
}

/// Records a launch of `kernel` with `grid` and `block` (3 values each), `shared_bytes` of dynamic
/// shared memory and `nargs` args in param order, after the nodes in `after` (explicit edges, beside
/// those the data flow implies); its node id goes to `node`.
///
/// # Safety
/// `grid` and `block` point to 3 `uint32_t` each; `args` to `nargs` items, `after` to `nafter` (or
/// the count is 0); `node` to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_launch(
    g: *mut ost_graph,
    kernel: u32,
    grid: *const u32,
    block: *const u32,
    shared_bytes: u32,
    args: *const ost_arg,
    nargs: usize,
    after: *const u32,
    nafter: usize,
    node: *mut u32,
) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for 3 values each, `nargs` args and `nafter` node ids.
        let (grid, block, args, after) =
            unsafe { (items(grid, 3, "grid")?, items(block, 3, "block")?, items(args, nargs, "args")?, items(after, nafter, "after")?) };
        if grid.is_empty() || block.is_empty() {
            return Err((OST_ERR_NULL, "grid and block need 3 values each".into()));
        }
        need(node, "node")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let kernel = g.kernel_id(kernel, &|| "kernel".into())?;
        let mut converted = Vec::new();
        converted.try_reserve_exact(args.len()).map_err(|_| (OST_ERR_IO, format!("cannot allocate {nargs} args")))?;
        for (i, a) in args.iter().enumerate() {
            converted.push(match a.kind {
                OST_ARG_BUFFER => Arg::Buffer(g.slice(a.slice, &|| format!("args[{i}].slice"))?),
                OST_ARG_SCALAR => Arg::Scalar(scalar(a.scalar)?),
                OST_ARG_SLOT => Arg::Slot(g.slot_id(a.slot, &|| format!("args[{i}].slot"))?),
                k => return Err((OST_ERR_ARGUMENT, format!("args[{i}].kind {k} is not OST_ARG_BUFFER, _SCALAR or _SLOT"))),
            });
        }
        let after = g.node_ids(after, "after")?;
        g.tag.room(IdKind::Node, g.graph.nodes().len())?;
        let launch = Launch::new([grid[0], grid[1], grid[2]], [block[0], block[1], block[2]]).shared(shared_bytes);
        let n = g.graph.add_launch(kernel, launch, &converted, &after).map_err(graph_err)?;
        // SAFETY: checked non-NULL above.
        unsafe { put(node, g.id(IdKind::Node, n.0), "node") }
    })
}

/// Records a copy of `src` to `dst` (equal lengths), after the nodes in `after`.
///
/// # Safety
/// `after` points to `nafter` items (or `nafter` is 0); `node` to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_copy(g: *mut ost_graph, src: ost_slice, dst: ost_slice, after: *const u32, nafter: usize, node: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for `nafter` items.
        let after = unsafe { items(after, nafter, "after") }?;
        need(node, "node")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let (s, d) = (g.slice(src, &|| "src".into())?, g.slice(dst, &|| "dst".into())?);
        let after = g.node_ids(after, "after")?;
        g.tag.room(IdKind::Node, g.graph.nodes().len())?;
        let n = g.graph.add_copy(s, d, &after).map_err(graph_err)?;
        // SAFETY: checked non-NULL above.
        unsafe { put(node, g.id(IdKind::Node, n.0), "node") }
    })
}

/// Records a fill of `dst` with the 32-bit `value`, after the nodes in `after`.
///
/// # Safety
/// `after` points to `nafter` items (or `nafter` is 0); `node` to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_add_fill(g: *mut ost_graph, dst: ost_slice, value: u32, after: *const u32, nafter: usize, node: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for `nafter` items.
        let after = unsafe { items(after, nafter, "after") }?;
        need(node, "node")?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let d = g.slice(dst, &|| "dst".into())?;
        let after = g.node_ids(after, "after")?;
        g.tag.room(IdKind::Node, g.graph.nodes().len())?;
        let n = g.graph.add_fill(d, value, &after).map_err(graph_err)?;
        // SAFETY: checked non-NULL above.
        unsafe { put(node, g.id(IdKind::Node, n.0), "node") }
    })
}

/// Adds an explicit edge: node `after` runs after node `before` (either may be the later recorded).
#[no_mangle]
pub extern "C" fn ost_graph_add_edge(g: *mut ost_graph, before: u32, after: u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let before = NodeId(g.index(before, IdKind::Node, &|| "before".into())?);
        let after = NodeId(g.index(after, IdKind::Node, &|| "after".into())?);
        g.graph.add_edge(before, after).map_err(graph_err)
    })
}

/// Plans the graph: the exact transitive reduction of its hazards and explicit edges. The plan is
/// independent of the graph afterwards (free either first).
///
/// # Safety
/// `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ost_plan_compile(g: *const ost_graph, out: *mut *mut ost_plan) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        need(out, "out")?;
        let g = g.lock().unwrap_or_else(|p| p.into_inner());
        // Params declared OST_PARAM_INFER take the modes their kernels' code shows.
        let mut graph = g.graph.clone();
        ostinato_runtime::contract::resolve_inferred(&mut graph, &g.impls).map_err(|(_, e)| (crate::status_of(e.kind()), e.to_string()))?;
        let plan = Plan::compile(&graph).map_err(|e| (crate::status_of(e.kind()), e.to_string()))?;
        let p = CPlan { plan, impls: g.impls.clone(), host_fns: g.host_fns.clone(), inits: g.inits.clone(), file: g.file.clone() };
        let key = crate::register(Object::Plan(Arc::new(p)));
        // SAFETY: checked non-NULL above.
        unsafe { put(out, key as *mut ost_plan, "out") }
    })
}

/// Frees a plan (execs made from it stay valid). NULL is a no-op; a freed plan is refused.
#[no_mangle]
pub extern "C" fn ost_plan_free(p: *mut ost_plan) -> ost_status {
    guard(|| unregister(p as usize, "plan", |o| matches!(o, Object::Plan(_))))
}

/// The number of edges the plan kept.
///
/// # Safety
/// `count` points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_plan_edge_count(p: *const ost_plan, count: *mut usize) -> ost_status {
    guard(|| {
        let p = plan_of(p)?;
        // SAFETY: the caller vouches for a writable `size_t`.
        unsafe { put(count, p.plan.edges().len(), "count") }
    })
}

/// The number of nodes of the plan.
///
/// # Safety
/// `count` points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_plan_node_count(p: *const ost_plan, count: *mut usize) -> ost_status {
    guard(|| {
        let p = plan_of(p)?;
        // SAFETY: the caller vouches for a writable `size_t`.
        unsafe { put(count, p.plan.node_count(), "count") }
    })
}
