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
use ostinato_runtime::{BackendKind, ExecOptions, KernelSource, Memory, RuntimeError, Session, WaitTimeout};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

mod errors;
mod exec;
mod framework;
mod objects;
use errors::err;
use exec::PyExec;
use framework::{framework_array, stream_handle, External};
use objects::{unsigned, Buffer, BufferSlice, Kernel, Owner, Slot};

/// A recording: buffers, kernels with declared access, slots, and nodes in program order. Its
/// `__dict__` holds what the Triton and PyTorch recorders keep per graph (`ostinato._tensors`).
#[pyclass(module = "ostinato", dict)]
struct PyGraph {
    graph: Graph,
    impls: Vec<BTreeMap<String, KernelSource>>,
    inits: Vec<Option<BufferInit>>,
    base_dir: PathBuf,
    /// Buffers bound to framework memory when recorded (a tensor's storage): bound on CUDA at every
    /// instantiation.
    externals: Vec<External>,
    /// This graph's identity: every object it hands out carries it, and an object of another graph is
    /// refused (its id would name another object here).
    owner: Owner,
    /// The graph file it was loaded from, if it was: where an error tells the user to add something.
    file: Option<String>,
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

/// A kernel signature from `(name, kind)` params (kind: an access, `infer` or a scalar type;
/// `(name, mode, "vouched")` vouches for a declared mode) and pairs of params that may alias.
fn signature(name: &str, params: &[Vec<String>], alias: Option<&[(String, String)]>) -> PyResult<KernelSig> {
    let mut sig = KernelSig::new(name);
    for item in params {
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
    for (a, b) in alias.into_iter().flatten() {
        sig = sig.may_alias(a, b).map_err(err)?;
    }
    Ok(sig)
}

impl PyGraph {
    /// A graph of its own identity over `graph`; `origin` says where it came from, for messages.
    fn recorded(graph: Graph, impls: Vec<BTreeMap<String, KernelSource>>, inits: Vec<Option<BufferInit>>, base_dir: PathBuf, origin: Option<&str>) -> PyGraph {
        PyGraph { graph, impls, inits, base_dir, externals: Vec::new(), owner: Owner::fresh(origin), file: None }
    }

    /// Declares `sig` with its implementation for each backend.
    fn add_kernel(&mut self, sig: KernelSig, impls: BTreeMap<String, KernelSource>) -> PyResult<Kernel> {
        let name = sig.name.clone();
        let id = self.graph.add_kernel(sig).map_err(err)?;
        self.impls.push(impls);
        Ok(Kernel { name, id: id.0, owner: self.owner.clone() })
    }

    /// A launch of `kernel` with its params by name in `args`.
    fn add_launch(
        &mut self,
        kernel: &Kernel,
        grid: &[u32],
        block: &[u32],
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
        self.owner.check(&kernel.owner, || format!("kernel `{}`", kernel.name))?;
        let sig = self.graph.kernels().get(kernel.id as usize).cloned().ok_or_else(|| err("unknown kernel"))?;
        for k in args.iter().flat_map(|d| d.keys()) {
            let k: String = k.extract()?;
            if sig.param_index(&k).is_none() {
                return Err(err(format!("launch of `{}`: the kernel has no param `{k}`", sig.name)));
            }
        }
        let mut converted = Vec::with_capacity(sig.params.len());
        for p in &sig.params {
            let v = args.map(|d| d.get_item(&p.name)).transpose()?.flatten();
            let v = v.ok_or_else(|| err(format!("launch of `{}`: missing arg `{}`", sig.name, p.name)))?;
            let what = format!("launch of `{}`, param `{}`", sig.name, p.name);
            converted.push(match &p.kind {
                ParamKind::Buffer(_) => Arg::Buffer(self.slice_arg(&v)?.ok_or_else(|| err(format!("{what}: give a Buffer or a slice of one")))?),
                ParamKind::Scalar(ty) => match v.cast::<Slot>() {
                    Ok(s) => {
                        let s = s.get();
                        self.owner.check(&s.owner, || format!("{what}: slot `{}`", s.name))?;
                        Arg::Slot(SlotId(s.id))
                    }
                    Err(_) => Arg::Scalar(scalar(*ty, &v, &what)?),
                },
            });
        }
        let after: Vec<NodeId> = after.unwrap_or_default().into_iter().map(NodeId).collect();
        let launch = Launch::new(dims(grid, "grid")?, dims(block, "block")?).shared(shared);
        Ok(self.graph.add_launch(KernelId(kernel.id), launch, &converted, &after).map_err(err)?.0)
    }

    fn slice_arg(&self, v: &Bound<'_, PyAny>) -> PyResult<Option<Slice>> {
        if let Ok(s) = v.cast::<BufferSlice>() {
            let s = s.get();
            self.owner.check(&s.owner, || format!("buffer `{}` (the slice [{}:{}])", s.buffer, s.offset, s.offset + s.len))?;
            return Ok(Some(Slice { buffer: BufferId(s.id), offset: s.offset, len: s.len }));
        }
        if let Ok(b) = v.cast::<Buffer>() {
            let b = b.get();
            self.owner.check(&b.owner, || format!("buffer `{}`", b.name))?;
            return Ok(Some(self.graph.whole(BufferId(b.id))));
        }
        Ok(None)
    }
}

#[pymethods]
impl PyGraph {
    #[new]
    fn new() -> Self {
        PyGraph::recorded(Graph::new(), Vec::new(), Vec::new(), PathBuf::from("."), None)
    }

    fn __repr__(&self) -> String {
        let g = &self.graph;
        format!(
            "Graph({}: {} buffers, {} kernels, {} slots, {} nodes)",
            self.owner.label(),
            g.buffers().len(),
            g.kernels().len(),
            g.slots().len(),
            g.nodes().len()
        )
    }

    /// Declares a buffer of `size` bytes; `init` is its initial contents (zero, iota, const:V,
    /// random:SEED, f32:V, randf:SEED:SCALE, randbf16:SEED:SCALE); `view_of=(buffer, offset)` makes it a
    /// view; `device=` places it on a device of the DAG (default 0; a view lies on its root's).
    #[pyo3(signature = (name, size, init=None, view_of=None, device=None))]
    fn buffer(
        &mut self,
        name: &str,
        size: &Bound<'_, PyAny>,
        init: Option<&str>,
        view_of: Option<(Buffer, Bound<'_, PyAny>)>,
        device: Option<u32>,
    ) -> PyResult<Buffer> {
        let size = unsigned(size, || format!("buffer `{name}`: size"))?;
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
            Some((parent, offset)) => {
                self.owner.check(&parent.owner, || format!("view `{name}`: its parent, buffer `{}`,", parent.name))?;
                let offset = unsigned(&offset, || format!("view `{name}`: offset"))?;
                self.graph.add_view(name, BufferId(parent.id), offset, size)
            }
        }
        .map_err(err)?;
        self.inits.push(init);
        Ok(Buffer { name: name.to_string(), id: id.0, size, owner: self.owner.clone() })
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
        let sig = signature(name, &params, alias.as_deref())?;
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
        self.add_kernel(sig, refs)
    }

    /// Records a Triton kernel launch as a node: `g.triton(kernel, grid, *args, **constexprs_and_options)`
    /// (`ostinato._triton.record`; docs/python-kernels.md). Returns the node's id.
    #[pyo3(signature = (kernel, grid, /, *args, **kwargs))]
    fn triton(
        slf: &Bound<'_, Self>,
        kernel: &Bound<'_, PyAny>,
        grid: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u32> {
        let record = slf.py().import("ostinato._triton")?.getattr("record")?;
        record.call((slf, kernel, grid, args), kwargs)?.extract()
    }

    /// Records a callable's PyTorch work as a node, captured once into a CUDA graph and replayed in
    /// place: `g.torch(fn, reads=[...], writes=[...])` (`ostinato._capture.record`;
    /// docs/python-kernels.md). Returns the node's id.
    #[pyo3(signature = (fn_, /, reads, writes, **kwargs))]
    fn torch(
        slf: &Bound<'_, Self>,
        fn_: &Bound<'_, PyAny>,
        reads: &Bound<'_, PyAny>,
        writes: &Bound<'_, PyAny>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u32> {
        let record = slf.py().import("ostinato._capture")?.getattr("record")?;
        record.call((slf, fn_, reads, writes), kwargs)?.extract()
    }

    /// Declares a kernel whose CUDA implementation is PTX with the cubin its compiler assembled from
    /// it (Triton's output): the cubin loads, the PTX is what the contract reads. `params` as for
    /// [`kernel`](Self::kernel). The declarations are checked against the PTX first (no device
    /// needed): one the code contradicts, or an `infer` it cannot settle, is refused, and nothing is
    /// declared; `infer` params take the modes the PTX shows.
    #[pyo3(signature = (name, params, ptx, cubin, entry, alias=None))]
    fn _kernel_assembled(
        &mut self,
        name: &str,
        params: Vec<Vec<String>>,
        ptx: String,
        cubin: Vec<u8>,
        entry: &str,
        alias: Option<Vec<(String, String)>>,
    ) -> PyResult<Kernel> {
        let mut sig = signature(name, &params, alias.as_deref())?;
        let r = KernelRef::code(&format!("{name}.ptx"), ptx).with_binary(cubin).with_entry(entry);
        let code = ostinato_runtime::contract::read_code(&sig, BackendKind::Cuda, &r).map_err(|why| err(format!("kernel `{name}`: {why}")))?;
        ostinato::contract::verify(&sig, &code).map_err(err)?;
        // Params declared `infer` settle now, from this code (the kernel's only implementation), so that
        // every launch is checked with its real modes.
        for (p, access) in ostinato::contract::infer(&sig, std::slice::from_ref(&code), "").map_err(err)? {
            sig.params[p].kind = ParamKind::Buffer(access);
            sig.params[p].decl = ostinato::AccessDecl::Inferred;
        }
        self.add_kernel(sig, BTreeMap::from([("cuda".to_string(), KernelSource::Ref(r))]))
    }

    /// Declares a kernel whose CUDA implementation is captured work: `graph` a `CUgraph` handle that
    /// `owner` keeps alive, with whatever its nodes address (`ostinato._capture` passes a
    /// `torch.cuda.CUDAGraph(keep_graph=True)` and the tensors it was captured on). Every param is a
    /// buffer param declared and vouched for; any two may alias (the captured work is one stream's
    /// work, which orders its own accesses).
    fn _kernel_captured(&mut self, name: &str, params: Vec<Vec<String>>, graph: u64, owner: Py<PyAny>, label: &str) -> PyResult<Kernel> {
        use ostinato_runtime::ostinato_cuda::CapturedWork;
        let names: Vec<&String> = params.iter().filter_map(|p| p.first()).collect();
        let pairs: Vec<(String, String)> =
            names.iter().enumerate().flat_map(|(i, a)| names[i + 1..].iter().map(move |b| ((*a).clone(), (*b).clone()))).collect();
        let sig = signature(name, &params, Some(&pairs))?;
        let owner: std::sync::Arc<dyn std::any::Any + Send + Sync> = std::sync::Arc::new(owner);
        // SAFETY: `ostinato._capture` hands over the raw graph of a `torch.cuda.CUDAGraph` captured with
        // `keep_graph=True` on the device of the node's tensors, which no other code holds or modifies;
        // `owner` holds that CUDAGraph (whose private memory pool its nodes use) and the node's tensors.
        #[allow(unsafe_code)]
        let work = unsafe { CapturedWork::from_raw(graph, owner, label) };
        self.add_kernel(sig, BTreeMap::from([("cuda".to_string(), KernelSource::Captured(work))]))
    }

    /// Binds `buffer` to framework memory for every CUDA instantiation: `memory` has a
    /// `__cuda_array_interface__` covering exactly the buffer's bytes and keeps them alive (each exec
    /// holds it); `device` is the CUDA device it lies on.
    fn _bind_external(&mut self, buffer: &Buffer, memory: Py<PyAny>, device: i32) -> PyResult<()> {
        self.owner.check(&buffer.owner, || format!("buffer `{}`", buffer.name))?;
        if self.externals.iter().any(|e| e.buffer == buffer.id) {
            return Err(err(format!("buffer `{}` is already bound to framework memory", buffer.name)));
        }
        self.externals.push(External { buffer: buffer.id, memory, device });
        Ok(())
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
        Ok(Slot { name: name.to_string(), id: id.0, ty: t.as_str(), owner: self.owner.clone() })
    }

    /// Records a launch: every param by name as a keyword (a `Buffer` or a slice of one for buffer
    /// params, a number or a `Slot` for scalars); `after=` nodes it must follow beyond the data flow.
    /// Returns the node's id.
    #[pyo3(signature = (kernel, grid, block, shared=0, after=None, **args))]
    fn launch(
        &mut self,
        kernel: &Kernel,
        grid: Vec<u32>,
        block: Vec<u32>,
        shared: u32,
        after: Option<Vec<u32>>,
        args: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u32> {
        self.add_launch(kernel, &grid, &block, shared, after, args)
    }

    /// [`launch`](Self::launch) with the args as one dict (param names may be `grid`, `block`...).
    #[pyo3(signature = (kernel, grid, block, shared, after, args))]
    fn _launch(&mut self, kernel: &Kernel, grid: Vec<u32>, block: Vec<u32>, shared: u32, after: Option<Vec<u32>>, args: &Bound<'_, PyDict>) -> PyResult<u32> {
        self.add_launch(kernel, &grid, &block, shared, after, Some(args))
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
    fn plan(&self, py: Python<'_>, max_lanes: usize) -> PyResult<PyPlan> {
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
        let externals = self.externals.iter().map(|e| e.clone_ref(py)).collect();
        Ok(PyPlan { plan, impls: self.impls.clone(), inits: self.inits.clone(), externals, file: self.file.clone() })
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
    externals: Vec<External>,
    /// The graph file of its graph, if loaded from one.
    file: Option<String>,
}

impl PyPlan {
    /// Refuses, before any device is opened, a kernel without an implementation for `backend`, saying
    /// how to declare one.
    fn check_implemented(&self, backend: BackendKind) -> PyResult<()> {
        let name = backend.as_str();
        for (k, sig) in self.plan.graph().kernels().iter().enumerate() {
            let impls = &self.impls[k];
            if impls.contains_key(name) {
                continue;
            }
            let builtin = impls.values().find_map(|s| match s {
                KernelSource::Ref(r) if r.builtin_name().is_some() => Some(format!("\"{}\"", r.source)),
                _ => None,
            });
            let (example, note) = match builtin {
                Some(b) => (b, ""),
                None => ("SOURCE".to_string(), " (SOURCE: a built-in, \"builtin:NAME\", or a kernel file)"),
            };
            let how = match &self.file {
                Some(file) => format!("add `{name} = {example}` to kernel `{}` in {file}{note}", sig.name),
                None => format!("declare one with the `{name}=` keyword of Graph.kernel: {name}={example}{note}"),
            };
            let has = if impls.is_empty() { "none".to_string() } else { impls.keys().cloned().collect::<Vec<_>>().join(", ") };
            return Err(err(errors::Refusal {
                kind: ostinato::ErrorKind::Bind,
                message: format!("kernel `{}` has no implementation for the {name} backend (it has: {has}): {how}", sig.name),
            }));
        }
        Ok(())
    }
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
        py: Python<'_>,
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
        self.check_implemented(kind)?;
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
        if let (false, Some(e)) = (kind == BackendKind::Cuda, self.externals.first()) {
            return Err(err(format!("buffer `{}` was recorded on CUDA memory: instantiate the plan on cuda", g.buffers()[e.buffer as usize].name)));
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
            framework::bind_recorded(py, (&self.plan, &self.externals), bind, (&mut buffers, &mut keep), &mut exec_options.device)?;
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
            .map(|(i, init)| {
                let named = bind.is_some_and(|b| b.contains(&g.buffers()[i].name).unwrap_or(false));
                if named || self.externals.iter().any(|e| e.buffer as usize == i) {
                    None
                } else {
                    *init
                }
            })
            .collect();
        exec.write_inits(&inits).map_err(err)?;
        Ok(PyExec { exec: std::sync::Mutex::new(exec), keep: std::sync::Mutex::new(keep) })
    }
}

/// Loads a graph file (the format of `ostinato run`).
#[pyfunction]
fn load(path: PathBuf) -> PyResult<PyGraph> {
    let f = ostinato::file::load(&path, &BackendKind::names()).map_err(err)?;
    let base_dir = f.base_dir().to_path_buf();
    let impls = f.impls.into_iter().map(|m| m.into_iter().map(|(b, r)| (b, KernelSource::Ref(r))).collect()).collect();
    let file = path.display().to_string();
    let mut g = PyGraph::recorded(f.graph, impls, f.inits, base_dir, Some(&format!("loaded from {file}")));
    g.file = Some(file);
    Ok(g)
}

/// The buffers and slots of a loaded graph, by name (for `launch` on a loaded graph).
#[pyfunction]
fn names(g: &PyGraph) -> (Vec<(String, u64)>, Vec<String>) {
    (g.graph.buffers().iter().map(|b| (b.name.clone(), b.size)).collect(), g.graph.slots().iter().map(|s| s.name.clone()).collect())
}

/// Buffers whose initial bytes are data: (name, bytes).
type StepData = Vec<(String, Py<PyBytes>)>;

/// Records one Llama decode step (the graph of `ostinato-llama`: its kernel pack's CUDA C on CUDA, their host
/// twins on the host): `config_json` is a Hugging Face `config.json` text (default: Llama-3.2-1B; the
/// kernels take Llama-3.2-3B's shape too, and refuse by field what they do), `max_seq` the KV cache's
/// positions. Returns the graph (buffers named `embed`, `norm`,
/// `layers.{l}.{ln1,wqkv,wo,ln2,wgu,wd,kcache,vcache}`, `token`, `history` (the greedy token of the step
/// at position p in u32 word p), `logits`; slot `pos`) and the buffers whose initial bytes are data, as
/// (name, bytes): write them after instantiating. `o_proj`: the output projection's form by name
/// (`ostinato_llama::OutputProjection`: `registers`, `stream`).
#[pyfunction]
#[pyo3(signature = (config_json=None, max_seq=1024, seed=1, attn_splits=0, gemv_blocks=None, o_proj="registers"))]
fn llama_step(
    py: Python<'_>,
    config_json: Option<&str>,
    max_seq: u32,
    seed: u64,
    attn_splits: u32,
    gemv_blocks: Option<u32>,
    o_proj: &str,
) -> PyResult<(PyGraph, StepData)> {
    let config = match config_json {
        Some(text) => ostinato_llama::LlamaConfig::from_hf_json(text, max_seq).map_err(err)?,
        None => ostinato_llama::LlamaConfig::llama_3_2_1b(max_seq),
    };
    let defaults = ostinato_llama::StepOptions::default();
    let o_proj = o_proj.parse().map_err(err)?;
    let options = ostinato_llama::StepOptions { seed, attn_splits, gemv_blocks: gemv_blocks.unwrap_or(defaults.gemv_blocks), o_proj, ..defaults };
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
    Ok((PyGraph::recorded(step.graph, impls, step.inits, PathBuf::from("."), Some("llama_step")), data))
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
