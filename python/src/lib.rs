//! The Python extension `ostinato._ostinato`: conversion between Python values and the core and
//! runtime, nothing more. Errors become `ostinato.Error` (a subclass per error kind) with the runtime's
//! message; a panic is caught
//! by pyo3 and raised as a Python exception, never crossing as an abort.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use ostinato::file::BufferInit;
use ostinato::{
    Access, Arg, BufferBinding, BufferId, Graph, KernelId, KernelRef, KernelSig, Launch, NodeId, ParamKind, Plan, Scalar, ScalarType, Slice, SlotId,
};
use ostinato_runtime::{BackendKind, ExecHandle, ExecOptions, KernelSource, Memory, RuntimeError, Session, WaitTimeout};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PySlice};

mod errors;
use errors::err;

/// A byte range of a buffer (the declared extent of an access): `buffer[lo:hi]`.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
struct BufferSlice {
    #[pyo3(get)]
    buffer: String,
    id: u32,
    #[pyo3(get)]
    offset: u64,
    #[pyo3(get)]
    len: u64,
}

#[pymethods]
impl BufferSlice {
    fn __repr__(&self) -> String {
        format!("{}[{}:{}]", self.buffer, self.offset, self.offset + self.len)
    }
}

/// A declared buffer; `b[lo:hi]` is a byte slice of it, `b` alone the whole buffer.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
struct Buffer {
    #[pyo3(get)]
    name: String,
    id: u32,
    #[pyo3(get)]
    size: u64,
}

#[pymethods]
impl Buffer {
    fn __getitem__(&self, key: &Bound<'_, PySlice>) -> PyResult<BufferSlice> {
        let size = i64::try_from(self.size).map_err(|_| err(format!("buffer `{}`: {} bytes is past what Python slices index", self.name, self.size)))?;
        // Python clips a slice to the sequence; an extent past the buffer is an error instead.
        for (attr, end) in [("start", "first byte"), ("stop", "end")] {
            if let Ok(Some(v)) = key.getattr(attr).and_then(|v| v.extract::<Option<i64>>()) {
                if v > size || v < -size {
                    return Err(err(format!("buffer `{}`: slice {end} {v} lies outside its {} bytes", self.name, self.size)));
                }
            }
        }
        let ind = key.indices(size as isize)?;
        if ind.step != 1 {
            return Err(err(format!("buffer `{}`: a slice is a contiguous byte range (step 1)", self.name)));
        }
        let (lo, hi) = (ind.start as u64, ind.stop.max(ind.start) as u64);
        if hi > self.size {
            return Err(err(format!("buffer `{}`: [{lo}:{hi}] lies outside its {} bytes", self.name, self.size)));
        }
        Ok(BufferSlice { buffer: self.name.clone(), id: self.id, offset: lo, len: hi - lo })
    }
    fn __len__(&self) -> usize {
        self.size as usize
    }
    fn __repr__(&self) -> String {
        format!("Buffer({:?}, {} bytes)", self.name, self.size)
    }
}

/// A declared kernel signature.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
struct Kernel {
    #[pyo3(get)]
    name: String,
    id: u32,
}

/// A patchable scalar slot.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
struct Slot {
    #[pyo3(get)]
    name: String,
    id: u32,
}

/// A recording: buffers, kernels with declared access, slots, and nodes in program order.
#[pyclass(module = "ostinato")]
struct PyGraph {
    graph: Graph,
    impls: Vec<BTreeMap<String, KernelSource>>,
    inits: Vec<Option<BufferInit>>,
    base_dir: PathBuf,
}

fn scalar_type(name: &str) -> PyResult<ScalarType> {
    ScalarType::parse(name).ok_or_else(|| err(format!("`{name}` is not a scalar type (u32, i32, u64, i64, f32, f64)")))
}

/// A Python number as a scalar of type `ty`, range-checked.
fn scalar(ty: ScalarType, v: &Bound<'_, PyAny>, what: &str) -> PyResult<Scalar> {
    let bad = |e: PyErr| err(format!("{what}: {e} (a {})", ty.as_str()));
    Ok(match ty {
        ScalarType::U32 => Scalar::u32(v.extract().map_err(bad)?),
        ScalarType::I32 => Scalar::i32(v.extract().map_err(bad)?),
        ScalarType::U64 => Scalar::u64(v.extract().map_err(bad)?),
        ScalarType::I64 => Scalar::i64(v.extract().map_err(bad)?),
        ScalarType::F32 => Scalar::f32(v.extract().map_err(bad)?),
        ScalarType::F64 => Scalar::f64(v.extract().map_err(bad)?),
    })
}

impl PyGraph {
    fn slice_arg(&self, v: &Bound<'_, PyAny>) -> PyResult<Option<Slice>> {
        if let Ok(s) = v.cast::<BufferSlice>() {
            let s = s.get();
            return Ok(Some(Slice { buffer: BufferId(s.id), offset: s.offset, len: s.len }));
        }
        if let Ok(b) = v.cast::<Buffer>() {
            return Ok(Some(self.graph.whole(BufferId(b.get().id))));
        }
        Ok(None)
    }
}

#[pymethods]
impl PyGraph {
    #[new]
    fn new() -> Self {
        PyGraph { graph: Graph::new(), impls: Vec::new(), inits: Vec::new(), base_dir: PathBuf::from(".") }
    }

    /// Declares a buffer of `size` bytes; `init` is its initial contents (zero, iota, const:V,
    /// random:SEED, f32:V, randf:SEED:SCALE, randbf16:SEED:SCALE); `view_of=(buffer, offset)` makes it a
    /// view; `device=` places it on a device of the DAG (default 0; a view lies on its root's).
    #[pyo3(signature = (name, size, init=None, view_of=None, device=None))]
    fn buffer(&mut self, name: &str, size: u64, init: Option<&str>, view_of: Option<(Buffer, u64)>, device: Option<u32>) -> PyResult<Buffer> {
        if view_of.is_some() && device.is_some() {
            return Err(err(format!("view `{name}` lies on its root's device: drop `device`")));
        }
        let init = match (init, &view_of) {
            (Some(_), Some(_)) => return Err(err(format!("view `{name}` cannot have an init (initialise its root)"))),
            (Some(s), None) => Some(BufferInit::parse(s).ok_or_else(|| err(format!("buffer `{name}`: unknown init `{s}`")))?),
            (None, None) => Some(BufferInit::Zero),
            (None, Some(_)) => None,
        };
        let id = match view_of {
            None => self.graph.add_buffer_on(name, size, device.unwrap_or(0)),
            Some((parent, offset)) => self.graph.add_view(name, BufferId(parent.id), offset, size),
        }
        .map_err(err)?;
        self.inits.push(init);
        Ok(Buffer { name: name.to_string(), id: id.0, size })
    }

    /// Declares a kernel: `params` is a list of `(name, kind)`, kind `read`, `write`, `read_write` for
    /// a buffer (checked against the kernel's code when it binds), `infer` for a buffer whose access
    /// is read from the code when the graph is planned, or a scalar type; `(name, mode, "vouched")`
    /// vouches for a buffer's declared mode where the analysis of the code cannot tell. The keyword
    /// arguments name its implementation per backend (`host="builtin:mix"`, `cuda="builtin:mix"` or a
    /// `.cu`/`.ptx`/`.cubin` path; `cuda_entry=` its symbol). `alias=[("out", "inp")]` declares pairs
    /// of buffer params one launch may bind to overlapping bytes (the kernel orders them itself); other
    /// overlaps with a written param are refused when launched.
    #[pyo3(signature = (name, params, alias=None, **impls))]
    fn kernel(&mut self, name: &str, params: Vec<Vec<String>>, alias: Option<Vec<(String, String)>>, impls: Option<&Bound<'_, PyDict>>) -> PyResult<Kernel> {
        let mut sig = KernelSig::new(name);
        for item in &params {
            let (p, kind, vouched) = match item.as_slice() {
                [p, kind] => (p, kind, false),
                [p, kind, v] if v == "vouched" => (p, kind, true),
                _ => return Err(err(format!("kernel `{name}`: a param is (name, kind) or (name, mode, \"vouched\"), got {item:?}"))),
            };
            sig = match (kind.as_str(), Access::parse(kind)) {
                ("infer", _) if !vouched => sig.buffer_infer(p),
                (_, Some(a)) if vouched => sig.buffer_vouched(p, a),
                (_, Some(a)) => sig.buffer(p, a),
                _ if vouched => return Err(err(format!("kernel `{name}` param `{p}`: \"vouched\" vouches for a declared mode (read, write, read_write)"))),
                _ => sig.scalar(
                    p,
                    scalar_type(kind).map_err(|_| {
                        err(format!("kernel `{name}` param `{p}`: `{kind}` is neither an access (read, write, read_write, infer) nor a scalar type"))
                    })?,
                ),
            };
        }
        for (a, b) in alias.iter().flatten() {
            sig = sig.may_alias(a, b).map_err(err)?;
        }
        let mut refs = BTreeMap::new();
        let mut entries: HashMap<String, String> = HashMap::new();
        if let Some(d) = impls {
            for (k, v) in d.iter() {
                let k: String = k.extract()?;
                let v: String = v.extract().map_err(|_| err(format!("kernel `{name}`: `{k}` must be a string")))?;
                if let Some(backend) = k.strip_suffix("_entry") {
                    entries.insert(backend.to_string(), v);
                    continue;
                }
                let kind: BackendKind = k.parse().map_err(err)?;
                let mut r = KernelRef::file(&v);
                r.base_dir = self.base_dir.clone();
                refs.insert(kind.as_str().to_string(), KernelSource::Ref(r));
            }
        }
        for (backend, entry) in entries {
            match refs.get_mut(&backend) {
                Some(KernelSource::Ref(r)) => r.entry = Some(entry),
                _ => return Err(err(format!("kernel `{name}`: `{backend}_entry` without a `{backend}` implementation"))),
            }
        }
        let id = self.graph.add_kernel(sig).map_err(err)?;
        self.impls.push(refs);
        Ok(Kernel { name: name.to_string(), id: id.0 })
    }

    /// Declares a patchable slot of scalar type `ty` with its initial value.
    #[pyo3(signature = (name, ty, value=None))]
    fn slot(&mut self, name: &str, ty: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Slot> {
        let t = scalar_type(ty)?;
        let v = match value {
            Some(v) => scalar(t, v, &format!("slot `{name}`"))?,
            None => Scalar { ty: t, bits: 0 },
        };
        let id = self.graph.add_slot(name, v).map_err(err)?;
        Ok(Slot { name: name.to_string(), id: id.0 })
    }

    /// Records a launch: every param by name as a keyword (a `Buffer` or a slice of one for buffer
    /// params, a number or a `Slot` for scalars); `after=` nodes it must follow beyond the data flow.
    /// Returns the node's id.
    #[pyo3(signature = (kernel, grid, block, shared=0, after=None, **args))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &mut self,
        py: Python<'_>,
        kernel: &Kernel,
        grid: Vec<u32>,
        block: Vec<u32>,
        shared: u32,
        after: Option<Vec<u32>>,
        args: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u32> {
        let dims = |v: &[u32], what: &str| -> PyResult<[u32; 3]> {
            if v.is_empty() || v.len() > 3 {
                return Err(err(format!("launch of `{}`: `{what}` needs 1 to 3 dimensions", kernel.name)));
            }
            let mut d = [1u32; 3];
            d[..v.len()].copy_from_slice(v);
            Ok(d)
        };
        let sig = self.graph.kernels().get(kernel.id as usize).cloned().ok_or_else(|| err("unknown kernel"))?;
        let given = args.cloned().unwrap_or_else(|| PyDict::new(py));
        for k in given.keys() {
            let k: String = k.extract()?;
            if sig.param_index(&k).is_none() {
                return Err(err(format!("launch of `{}`: the kernel has no param `{k}`", sig.name)));
            }
        }
        let mut converted = Vec::with_capacity(sig.params.len());
        for p in &sig.params {
            let v = given.get_item(&p.name)?.ok_or_else(|| err(format!("launch of `{}`: missing arg `{}`", sig.name, p.name)))?;
            let what = format!("launch of `{}`, param `{}`", sig.name, p.name);
            converted.push(match &p.kind {
                ParamKind::Buffer(_) => Arg::Buffer(self.slice_arg(&v)?.ok_or_else(|| err(format!("{what}: give a Buffer or a slice of one")))?),
                ParamKind::Scalar(ty) => match v.cast::<Slot>() {
                    Ok(s) => Arg::Slot(SlotId(s.get().id)),
                    Err(_) => Arg::Scalar(scalar(*ty, &v, &what)?),
                },
            });
        }
        let after: Vec<NodeId> = after.unwrap_or_default().into_iter().map(NodeId).collect();
        let launch = Launch::new(dims(&grid, "grid")?, dims(&block, "block")?).shared(shared);
        Ok(self.graph.add_launch(KernelId(kernel.id), launch, &converted, &after).map_err(err)?.0)
    }

    /// Records a copy of `src` to `dst` (Buffers or slices of equal length).
    #[pyo3(signature = (src, dst, after=None))]
    fn copy(&mut self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, after: Option<Vec<u32>>) -> PyResult<u32> {
        let s = self.slice_arg(src)?.ok_or_else(|| err("copy: `src` must be a Buffer or a slice of one"))?;
        let d = self.slice_arg(dst)?.ok_or_else(|| err("copy: `dst` must be a Buffer or a slice of one"))?;
        let after: Vec<NodeId> = after.unwrap_or_default().into_iter().map(NodeId).collect();
        Ok(self.graph.add_copy(s, d, &after).map_err(err)?.0)
    }

    /// Records a fill of `dst` with the 32-bit `value`.
    #[pyo3(signature = (dst, value, after=None))]
    fn fill(&mut self, dst: &Bound<'_, PyAny>, value: u32, after: Option<Vec<u32>>) -> PyResult<u32> {
        let d = self.slice_arg(dst)?.ok_or_else(|| err("fill: `dst` must be a Buffer or a slice of one"))?;
        let after: Vec<NodeId> = after.unwrap_or_default().into_iter().map(NodeId).collect();
        Ok(self.graph.add_fill(d, value, &after).map_err(err)?.0)
    }

    /// Records a collective over the DAG's devices, one rank per device: `op` is `all_reduce`,
    /// `all_gather` or `reduce_scatter`, `dtype` the element type, `send[r]` and `recv[r]` rank `r`'s
    /// extents (Buffers or slices).
    #[pyo3(signature = (op, dtype, send, recv, after=None))]
    fn collective(&mut self, op: &str, dtype: &str, send: Vec<Bound<'_, PyAny>>, recv: Vec<Bound<'_, PyAny>>, after: Option<Vec<u32>>) -> PyResult<u32> {
        let op =
            ostinato::collective::CollectiveOp::parse(op).ok_or_else(|| err(format!("collective: `{op}` is not all_reduce, all_gather or reduce_scatter")))?;
        let ty = ScalarType::parse(dtype).ok_or_else(|| err(format!("collective: `{dtype}` is not u32, i32, f32, u64, i64 or f64")))?;
        let slices = |what: &str, v: &[Bound<'_, PyAny>]| -> PyResult<Vec<ostinato::Slice>> {
            v.iter()
                .enumerate()
                .map(|(r, x)| self.slice_arg(x)?.ok_or_else(|| err(format!("collective: `{what}[{r}]` must be a Buffer or a slice of one"))))
                .collect()
        };
        let (send, recv) = (slices("send", &send)?, slices("recv", &recv)?);
        let after: Vec<NodeId> = after.unwrap_or_default().into_iter().map(NodeId).collect();
        Ok(self.graph.add_collective(op, ty, &send, &recv, &after).map_err(err)?.0)
    }

    /// An explicit edge: node `after` runs after node `before`.
    fn edge(&mut self, before: u32, after: u32) -> PyResult<()> {
        self.graph.add_edge(NodeId(before), NodeId(after)).map_err(err)
    }

    /// Plans the graph: the exact transitive reduction of its hazards and explicit edges.
    #[pyo3(signature = (max_lanes=4))]
    fn plan(&self, max_lanes: usize) -> PyResult<PyPlan> {
        // Params declared `infer` take the modes their kernels' code shows.
        let mut graph = self.graph.clone();
        // The references the code is read from (a host function has no code to read: its kernel's modes
        // stay as declared).
        let refs: Vec<BTreeMap<String, KernelRef>> = self
            .impls
            .iter()
            .map(|m| m.iter().filter_map(|(b, s)| if let KernelSource::Ref(r) = s { Some((b.clone(), r.clone())) } else { None }).collect())
            .collect();
        ostinato_runtime::contract::resolve_inferred(&mut graph, &refs).map_err(|(_, e)| err(e))?;
        let plan = Plan::compile_with(&graph, ostinato::PlanOptions { max_lanes }).map_err(err)?;
        Ok(PyPlan { plan, impls: self.impls.clone(), inits: self.inits.clone() })
    }

    #[getter]
    fn nodes(&self) -> usize {
        self.graph.nodes().len()
    }
}

/// A plan: immutable, instantiable on any backend.
#[pyclass(module = "ostinato", frozen)]
struct PyPlan {
    plan: Plan,
    impls: Vec<BTreeMap<String, KernelSource>>,
    inits: Vec<Option<BufferInit>>,
}

/// A CUDA device pointer from an object with `__cuda_array_interface__` (torch, CuPy), checked for
/// contiguity and length.
fn cuda_array(obj: &Bound<'_, PyAny>, want: u64, name: &str) -> PyResult<(u64, u64)> {
    let cai = obj
        .getattr("__cuda_array_interface__")
        .map_err(|_| err(format!("bind `{name}`: the object has no __cuda_array_interface__ (a torch tensor or CuPy array on the GPU)")))?;
    let (ptr, _readonly): (u64, bool) = cai.get_item("data")?.extract()?;
    let shape: Vec<u64> = cai.get_item("shape")?.extract()?;
    let typestr: String = cai.get_item("typestr")?.extract()?;
    let itemsize: u64 = typestr.get(2..).and_then(|s| s.parse().ok()).ok_or_else(|| err(format!("bind `{name}`: typestr `{typestr}`")))?;
    let strides = cai.get_item("strides").ok().filter(|s| !s.is_none());
    if let Some(s) = strides {
        let s: Vec<i64> = s.extract()?;
        let mut expect = itemsize as i64;
        for (dim, stride) in shape.iter().zip(&s).rev() {
            if *dim > 1 && *stride != expect {
                return Err(err(format!("bind `{name}`: the array is not C-contiguous (strides {s:?})")));
            }
            expect *= *dim as i64;
        }
    }
    let bytes = shape.iter().product::<u64>() * itemsize;
    if bytes != want {
        return Err(err(format!("bind `{name}`: the array has {bytes} bytes, the buffer declares {want}")));
    }
    Ok((ptr, bytes))
}

// DLPack's C structs (dlpack.h, v0.8 and the unversioned capsule of v1): what `__dlpack__()` hands over.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DlTensor {
    data: *mut std::ffi::c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut std::ffi::c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// DLPack's device types for memory a CUDA kernel can address.
const DL_CUDA: i32 = 2;
const DL_CUDA_MANAGED: i32 = 13;

/// Framework memory to bind: its device pointer and length, and what keeps it alive (a DLPack capsule,
/// which the exec holds and whose destructor releases the tensor; `None` for
/// `__cuda_array_interface__`, whose owner the caller keeps alive).
type BoundArray = (u64, u64, Option<Py<PyAny>>);

/// Device memory from a torch tensor, a CuPy array, or any object with `__cuda_array_interface__` or
/// `__dlpack__`, checked for device, C-contiguity and byte length.
fn framework_array(obj: &Bound<'_, PyAny>, want: u64, name: &str) -> PyResult<BoundArray> {
    if obj.hasattr("__cuda_array_interface__")? {
        let (ptr, len) = cuda_array(obj, want, name)?;
        return Ok((ptr, len, None));
    }
    if !obj.hasattr("__dlpack__")? {
        return Err(err(format!(
            "bind `{name}`: the object has neither __cuda_array_interface__ nor __dlpack__ (a torch tensor, a CuPy array, any DLPack producer on the GPU)"
        )));
    }
    let capsule = obj.call_method0("__dlpack__")?;
    let capsule = capsule.cast_into::<pyo3::types::PyCapsule>().map_err(|_| err(format!("bind `{name}`: __dlpack__() did not return a capsule")))?;
    // The name check is DLPack's only type check: "dltensor" (not yet consumed, unversioned).
    let managed =
        capsule.pointer_checked(Some(c"dltensor")).map_err(|_| err(format!("bind `{name}`: __dlpack__() gave no unconsumed `dltensor` capsule")))?.as_ptr()
            as *const DlManagedTensor;
    // SAFETY: a live capsule named "dltensor" holds a DLManagedTensor (the DLPack contract); the
    // capsule is kept alive while its fields are read, and the shape/strides arrays hold `ndim` entries.
    #[allow(unsafe_code)]
    let (ptr, device, dims, strides, elem_bits) = unsafe {
        let t = &(*managed).dl_tensor;
        let n = t.ndim.max(0) as usize;
        let dims: Vec<i64> = if n == 0 || t.shape.is_null() { Vec::new() } else { std::slice::from_raw_parts(t.shape, n).to_vec() };
        let strides: Option<Vec<i64>> = if t.strides.is_null() || n == 0 { None } else { Some(std::slice::from_raw_parts(t.strides, n).to_vec()) };
        (t.data as u64 + t.byte_offset, t.device.device_type, dims, strides, t.dtype.bits as u64 * t.dtype.lanes as u64)
    };
    if device != DL_CUDA && device != DL_CUDA_MANAGED {
        return Err(err(format!("bind `{name}`: the DLPack tensor lives on device type {device} (kDLCPU = 1), not on a CUDA GPU (kDLCUDA = 2)")));
    }
    if elem_bits % 8 != 0 {
        return Err(err(format!("bind `{name}`: DLPack elements of {elem_bits} bits are not whole bytes")));
    }
    if let Some(s) = &strides {
        let mut expect = 1i64;
        for (d, st) in dims.iter().zip(s).rev() {
            if *d > 1 && *st != expect {
                return Err(err(format!("bind `{name}`: the DLPack tensor is not C-contiguous (strides {s:?} elements)")));
            }
            expect *= *d;
        }
    }
    let bytes = dims.iter().map(|d| (*d).max(0) as u64).product::<u64>() * (elem_bits / 8);
    if bytes != want {
        return Err(err(format!("bind `{name}`: the DLPack tensor has {bytes} bytes, the buffer declares {want}")));
    }
    Ok((ptr, bytes, Some(capsule.into_any().unbind())))
}

/// A stream handle from an int or an object with `cuda_stream` (torch) or `ptr` (CuPy).
fn stream_handle(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(h) = obj.extract::<u64>() {
        return Ok(h);
    }
    for attr in ["cuda_stream", "ptr"] {
        if let Ok(h) = obj.getattr(attr).and_then(|h| h.extract::<u64>()) {
            return Ok(h);
        }
    }
    Err(err("stream: give a torch.cuda.Stream, a CuPy stream or a CUstream handle (int)"))
}

#[pymethods]
impl PyPlan {
    /// The kept edges as `(from, to)` node ids.
    #[getter]
    fn edges(&self) -> Vec<(u32, u32)> {
        self.plan.edges().iter().map(|e| (e.from.0, e.to.0)).collect()
    }
    #[getter]
    fn nodes(&self) -> usize {
        self.plan.node_count()
    }
    /// Every edge with the params and bytes that force it.
    fn explain(&self) -> String {
        self.plan.explain()
    }

    /// Instantiates the plan on `backend` (`"host"`, `"cuda"`, `"vulkan"`). CUDA: `bind={"buffer":
    /// tensor}` binds buffers to framework memory (`__cuda_array_interface__`, whose arrays must
    /// outlive the exec, or DLPack, whose capsule the exec holds), `stream=` replays on a framework's
    /// stream (`torch.cuda.current_stream()`), `launch_thread=True` takes the driver's launch call off
    /// the caller's thread. `device=` picks the GPU; `threads=` the host's worker threads;
    /// `wait_timeout=` seconds a wait may take (0: for ever). Any other keyword is an exec option by
    /// name, checked on every backend: `fusion="auto"|"on"|"off"`, `pdl="auto"|"on"|"off"`,
    /// `mode="graph"|"eager"` (`ostinato.options()` lists them).
    #[pyo3(signature = (backend="host", bind=None, stream=None, device=None, launch_thread=false, threads=None, wait_timeout=None, **options))]
    // One Rust argument per Python keyword argument: the signature is the Python API.
    #[allow(clippy::too_many_arguments)]
    fn instantiate(
        &self,
        backend: &str,
        bind: Option<&Bound<'_, PyDict>>,
        stream: Option<&Bound<'_, PyAny>>,
        device: Option<String>,
        launch_thread: bool,
        threads: Option<usize>,
        wait_timeout: Option<f64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyExec> {
        let kind: BackendKind = backend.parse().map_err(err)?;
        let mut exec_options = ExecOptions::default();
        exec_options.device = device;
        exec_options.threads = threads;
        exec_options.wait_timeout = match wait_timeout {
            None => WaitTimeout::Default,
            Some(0.0) => WaitTimeout::Never,
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => WaitTimeout::After(std::time::Duration::from_secs_f64(s)),
            Some(s) => return Err(err(format!("wait_timeout: {s} is not a number of seconds from 0 to 1e9"))),
        };
        if launch_thread {
            exec_options.set("launch", "thread").map_err(err)?;
        }
        for (k, v) in options.iter().flat_map(|d| d.iter()) {
            let key: String = k.extract()?;
            let value: String = v.extract().map_err(|_| err(format!("option `{key}` takes a string")))?;
            exec_options.set(&key.replace('_', "-"), &value).map_err(err)?;
        }
        let g = self.plan.graph();
        let mut buffers = ostinato::allocate_all::<Memory>(&self.plan);
        let mut keep: Vec<Py<PyAny>> = Vec::new();
        if kind != BackendKind::Cuda && (bind.is_some_and(|b| !b.is_empty()) || stream.is_some()) {
            return Err(err(format!("the {kind} backend allocates its own memory and has no stream: use exec.write() to fill buffers")));
        }
        if kind == BackendKind::Cuda {
            use ostinato_runtime::ostinato_cuda::{DeviceMemory, ExternalStream};
            if let Some(b) = bind {
                for (k, v) in b.iter() {
                    let name: String = k.extract()?;
                    let id = g.buffer_by_name(&name).ok_or_else(|| err(format!("bind: no buffer `{name}`")))?;
                    let (ptr, len, owner) = framework_array(&v, g.buffer(id).size, &name)?;
                    keep.extend(owner);
                    // SAFETY: the pointer comes from the array's own interface; a DLPack capsule is
                    // held by the exec, and the docstring makes the caller keep an
                    // interface-bound array alive for the exec's lifetime.
                    #[allow(unsafe_code)]
                    let m = unsafe { DeviceMemory::new(ptr, len) };
                    buffers[id.index()] = BufferBinding::External(Memory::Cuda(m));
                }
            }
            // SAFETY: a framework's live stream, which the caller keeps alive for the exec's lifetime.
            #[allow(unsafe_code)]
            let stream = stream.map(stream_handle).transpose()?.map(|h| unsafe { ExternalStream::from_raw(h) });
            exec_options.stream = stream;
        }
        let spec = exec_options.spec(kind).map_err(err)?;
        let session = Session::open(&spec).map_err(err)?;
        let name = kind.as_str();
        let source = |k: usize| -> Result<KernelSource, RuntimeError> {
            self.impls[k].get(name).cloned().ok_or_else(|| RuntimeError::NoImplementation { kernel: g.kernels()[k].name.clone(), backend: name })
        };
        let mut exec = session.instantiate_sources(&self.plan, &source, buffers).map_err(err)?;
        // Buffers bound to framework memory keep the framework's contents; the rest get their init.
        let inits: Vec<Option<BufferInit>> = self
            .inits
            .iter()
            .enumerate()
            .map(|(i, init)| if bind.is_some_and(|b| b.contains(&g.buffers()[i].name).unwrap_or(false)) { None } else { *init })
            .collect();
        exec.write_inits(&inits).map_err(err)?;
        Ok(PyExec { exec: std::sync::Mutex::new(exec), keep: std::sync::Mutex::new(keep) })
    }
}

/// A retained exec: replay, patch slots, read and write buffers.
#[pyclass(module = "ostinato")]
struct PyExec {
    /// Behind a lock: Python threads may share an exec; their calls are serialised.
    exec: std::sync::Mutex<Box<dyn ExecHandle>>,
    /// The DLPack capsules of bound tensors: held for the exec's lifetime (their destructors release
    /// the tensors afterwards).
    keep: std::sync::Mutex<Vec<Py<PyAny>>>,
}

impl PyExec {
    fn inner(&self) -> std::sync::MutexGuard<'_, Box<dyn ExecHandle>> {
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyExec {
    /// Submits `count` replays (asynchronous on CUDA).
    #[pyo3(signature = (count=1))]
    fn replay(&self, count: u32) -> PyResult<()> {
        let mut exec = self.inner();
        for _ in 0..count {
            exec.replay().map_err(err)?;
        }
        Ok(())
    }
    /// Returns once every submitted replay finished.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        // The GIL is released while the GPU finishes; the lock is taken on the waiting thread.
        py.detach(|| self.inner().wait()).map_err(err)
    }
    /// Patches slot `name` for the following replays (the value is checked against its type).
    fn set_slot(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut exec = self.inner();
        let id = exec.slot_id(name).map_err(err)?;
        let ty = exec.plan().graph().slots()[id.index()].ty;
        let v = scalar(ty, value, &format!("slot `{name}`"))?;
        exec.set_slot(id, v).map_err(err)
    }
    /// The bytes of buffer `name` (from `offset`, `length` bytes or to the end).
    #[pyo3(signature = (name, offset=0, length=None))]
    fn read<'py>(&self, py: Python<'py>, name: &str, offset: u64, length: Option<u64>) -> PyResult<Bound<'py, PyBytes>> {
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        let size = exec.plan().graph().buffer(id).size;
        let len = length.unwrap_or(size.saturating_sub(offset));
        let out = exec.read_vec(id, offset, len).map_err(err)?;
        Ok(PyBytes::new(py, &out))
    }
    /// Writes `data` (bytes) into buffer `name` at `offset`.
    #[pyo3(signature = (name, data, offset=0))]
    fn write(&self, name: &str, data: &[u8], offset: u64) -> PyResult<()> {
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        exec.write_buffer(id, offset, data).map_err(err)
    }
    /// CUDA: rebinds buffer `name` to another framework array of the same length (between replays).
    fn rebind(&self, name: &str, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        let size = exec.plan().graph().buffer(id).size;
        let (ptr, len, owner) = framework_array(array, size, name)?;
        // SAFETY: as for `bind=` at instantiation.
        #[allow(unsafe_code)]
        let m = unsafe { ostinato_runtime::ostinato_cuda::DeviceMemory::new(ptr, len) };
        exec.rebind(id, Memory::Cuda(m)).map_err(err)?;
        // The previous capsule of this buffer may still be read by a replay in flight: all stay held.
        if let Ok(mut keep) = self.keep.lock() {
            keep.extend(owner);
        }
        Ok(())
    }
    /// Runs `replays` replays with every node timed (CUPTI on CUDA, timestamp queries on Vulkan, the
    /// worker threads' clock on the host); writes Chrome/Perfetto trace-event JSON to `json` and an
    /// SVG timeline to `svg` where given; returns the trace-event object (a dict).
    #[pyo3(signature = (replays=1, json=None, svg=None))]
    fn trace<'py>(&self, py: Python<'py>, replays: usize, json: Option<PathBuf>, svg: Option<PathBuf>) -> PyResult<Bound<'py, PyAny>> {
        let text = py
            .detach(|| {
                let mut exec = self.inner();
                let t = exec.trace(replays)?;
                ostinato_runtime::trace::write(&t, exec.plan(), json.as_deref(), svg.as_deref())?;
                Ok::<_, RuntimeError>(ostinato_runtime::trace::chrome_json(&t, exec.plan())?.to_string())
            })
            .map_err(err)?;
        py.import("json")?.call_method1("loads", (text,))
    }
    /// The backend's name.
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner().backend().as_str()
    }
}

/// Loads a graph file (the format of `ostinato run`).
#[pyfunction]
fn load(path: PathBuf) -> PyResult<PyGraph> {
    let f = ostinato::file::load(&path, &BackendKind::names()).map_err(err)?;
    let base_dir = f.base_dir().to_path_buf();
    let impls = f.impls.into_iter().map(|m| m.into_iter().map(|(b, r)| (b, KernelSource::Ref(r))).collect()).collect();
    Ok(PyGraph { graph: f.graph, impls, inits: f.inits, base_dir })
}

/// The buffers and slots of a loaded graph, by name (for `launch` on a loaded graph).
#[pyfunction]
fn names(g: &PyGraph) -> (Vec<(String, u64)>, Vec<String>) {
    (g.graph.buffers().iter().map(|b| (b.name.clone(), b.size)).collect(), g.graph.slots().iter().map(|s| s.name.clone()).collect())
}

/// Buffers whose initial bytes are data: (name, bytes).
type StepData = Vec<(String, Py<PyBytes>)>;

/// Records one Llama decode step (the graph of `ostinato-llama`: its kernel pack's CUDA C on CUDA, their host
/// twins on the host): `config_json` is a Hugging Face `config.json` text (default: Llama-3.2-1B),
/// `max_seq` the KV cache's positions. Returns the graph (buffers named `embed`, `norm`,
/// `layers.{l}.{ln1,wqkv,wo,ln2,wgu,wd,kcache,vcache}`, `token`, `logits`; slot `pos`) and the buffers
/// whose initial bytes are data, as (name, bytes): write them after instantiating.
#[pyfunction]
#[pyo3(signature = (config_json=None, max_seq=1024, seed=1, attn_splits=0, gemv_blocks=None))]
fn llama_step(py: Python<'_>, config_json: Option<&str>, max_seq: u32, seed: u64, attn_splits: u32, gemv_blocks: Option<u32>) -> PyResult<(PyGraph, StepData)> {
    let config = match config_json {
        Some(text) => ostinato_llama::LlamaConfig::from_hf_json(text, max_seq).map_err(err)?,
        None => ostinato_llama::LlamaConfig::llama_3_2_1b(max_seq),
    };
    let defaults = ostinato_llama::StepOptions::default();
    let options = ostinato_llama::StepOptions { seed, attn_splits, gemv_blocks: gemv_blocks.unwrap_or(defaults.gemv_blocks), ..defaults };
    let step = ostinato_llama::record(&config, options).map_err(err)?;
    // The Llama pack's kernels: its CUDA source by reference, its host twins as functions.
    let impls = step
        .graph
        .kernels()
        .iter()
        .map(|k| {
            let mut m = BTreeMap::new();
            if let Some(r) = ostinato_llama::pack::cuda_ref(&k.name) {
                m.insert("cuda".to_string(), KernelSource::Ref(r));
            }
            if let Some(h) = ostinato_llama::pack::host_kernel(&k.name) {
                m.insert("host".to_string(), KernelSource::Host(h));
            }
            m
        })
        .collect();
    let data = step.data.iter().map(|(b, bytes)| (step.graph.buffer(*b).name.clone(), PyBytes::new(py, bytes).unbind())).collect();
    Ok((PyGraph { graph: step.graph, impls, inits: step.inits, base_dir: PathBuf::from(".") }, data))
}

/// The exec options `Plan.instantiate` takes by name: `{name: (values, default first)}`.
#[pyfunction]
fn options() -> BTreeMap<&'static str, Vec<&'static str>> {
    ostinato_runtime::options::CHOICES.iter().map(|c| (c.key, (c.values)())).collect()
}

/// What each backend finds, as `ostinato devices` prints it.
#[pyfunction]
fn devices() -> String {
    ostinato_runtime::devices::describe()
}

#[pymodule]
fn _ostinato(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<PyGraph>()?;
    m.add_class::<PyPlan>()?;
    m.add_class::<PyExec>()?;
    m.add_class::<Buffer>()?;
    m.add_class::<BufferSlice>()?;
    m.add_class::<Kernel>()?;
    m.add_class::<Slot>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(names, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(options, m)?)?;
    m.add_function(wrap_pyfunction!(llama_step, m)?)?;
    Ok(())
}
