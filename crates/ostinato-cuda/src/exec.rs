//! The CUDA exec: a plan lowered once into either one explicit CUDA graph (default; replay is one
//! `cuGraphLaunch`) or eager per-lane streams with events for the cross-lane waits the plan kept.

use std::sync::Arc;

use std::path::PathBuf;
use std::sync::Mutex;

use ostinato::{
    check_bindings, check_range, check_rebind, check_slot, Backend, BindError, BufferBinding, BufferId, Exec, KernelRef, KernelSig, NodeId, ParamKind, Plan,
    Scalar, SlotId,
};

use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::ffi::{Context, DeviceAlloc, Event, Function, Graph, GraphExec, GraphNode, KernelArgs, Stream};
use crate::graph_build::{build_graph, CollectiveCall, Collectives};
use crate::launch_thread::{Command, LaunchFault, LaunchThread, Submitter};
use crate::lower::{lower_with, ArgValue, Callee, KernelPdl, Lowering};
use crate::module::{BuiltinModules, CudaKernel, LoadedModule, ModuleSource};
use crate::nccl::Communicator;
use crate::options::{CudaOptions, DeviceMemory, ExecMode, ExternalStream, LaunchOn, StreamPriority};

/// The CUDA backend on one device.
pub struct CudaBackend {
    ctx: Arc<Context>,
    device: Device,
    options: CudaOptions,
    builtins: BuiltinModules,
    helpers: (CudaKernel, CudaKernel),
    /// Modules [`Backend::bind_kernel`] loaded from files, by path: each file is compiled and loaded
    /// once per backend, however many kernels it holds.
    files: Mutex<Vec<(PathBuf, Arc<LoadedModule>)>>,
}

impl CudaBackend {
    /// A backend on `device`. Loads the internal copy/fill kernels (NVRTC, cached).
    pub fn new(device: &Device, options: CudaOptions) -> Result<CudaBackend> {
        Self::with_builtins(device, &BuiltinModules::load(device, options.trigger)?, options)
    }
    /// A backend whose copy/fill kernels come from already loaded built-in modules (no second load).
    /// The modules' main build must be the one `options.trigger` names.
    pub fn with_builtins(device: &Device, modules: &BuiltinModules, options: CudaOptions) -> Result<CudaBackend> {
        if modules.trigger() != options.trigger {
            return Err(CudaError::Usage {
                op: "CudaBackend::with_builtins",
                reason: format!(
                    "the built-in modules were built with trigger `{}`, the options ask for `{}`",
                    modules.trigger().as_str(),
                    options.trigger.as_str()
                ),
            });
        }
        let (copy_sig, fill_sig) = (crate::builtins::copy_sig(), crate::builtins::fill_sig());
        let copy = modules.kernel("ostinato_copy", &copy_sig)?;
        let fill = modules.kernel("ostinato_fill", &fill_sig)?;
        Ok(CudaBackend {
            ctx: device.ctx.clone(),
            device: device.clone(),
            options,
            builtins: modules.clone(),
            helpers: (copy, fill),
            files: Mutex::new(Vec::new()),
        })
    }
    pub fn options(&self) -> CudaOptions {
        self.options
    }
    /// The device's architecture (`sm_90`).
    pub fn arch(&self) -> String {
        self.device.info().arch()
    }
    /// The device the backend runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The module of a kernel file, loaded once (same main trigger as the built-ins).
    fn file_module(&self, reference: &KernelRef) -> Result<Arc<LoadedModule>> {
        let path = reference.path();
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, m)) = files.iter().find(|(p, _)| *p == path) {
            return Ok(m.clone());
        }
        let m = Arc::new(LoadedModule::load(&self.device, &ModuleSource::from_path(&path)?, self.options.trigger)?);
        files.push((path, m.clone()));
        Ok(m)
    }
}

/// What a replay submits, past the shared stream.
enum Work {
    Graph {
        exec: GraphExec,
        /// Graph node of each launch (for patching).
        nodes: Vec<GraphNode>,
    },
    /// Lane 0 runs on the exec's main stream; `side[i]` runs lane `i + 1`, and `lane_end[i]` joins it
    /// back into the main stream at the end of a replay.
    Eager { side: Vec<Stream>, done: Vec<Option<Event>>, start: Event, lane_end: Vec<Event> },
}

/// Everything `replay` and `set_slot` touch: the caller's thread owns it, or the exec's launch thread
/// (a graph exec must not be used from two threads at once, so it lives on exactly one).
struct Replayer {
    /// Per launch: the NCCL call of a collective node (`None`: a kernel).
    calls: Vec<Option<CollectiveCall>>,
    comm: Option<Communicator>,
    ctx: Arc<Context>,
    plan: Arc<Plan>,
    lowering: Arc<Lowering>,
    funcs: Vec<Function>,
    args: Vec<KernelArgs>,
    work: Work,
    main: Arc<Stream>,
    /// Timing events (start, stop), recorded on `main` by whichever thread owns the replayer.
    timer: [Arc<Event>; 2],
    /// How long a wait for the stream may take (`CudaOptions::wait_timeout`).
    wait_timeout: Option<std::time::Duration>,
    /// The exec's name in errors.
    label: Arc<str>,
}

enum Placement {
    Caller(Replayer),
    Thread(LaunchThread<Replayer>),
    /// Only while the exec is dropped.
    Stopped,
}

/// A retained CUDA instantiation of a plan.
pub struct CudaExec {
    /// The user's plan.
    plan: Arc<Plan>,
    /// The plan that runs: `plan`, or `plan` with its fused groups as single nodes.
    run_plan: Arc<Plan>,
    /// How many of the user's nodes run inside fused kernels.
    fused_nodes: usize,
    /// Root buffers a collective uses (its pointers live in a captured NCCL call: not rebindable).
    collective_roots: Vec<BufferId>,
    /// The lowering of `run_plan`.
    lowering: Arc<Lowering>,
    ctx: Arc<Context>,
    /// The allocation the exec made for each root buffer (by buffer id; `None` for views and
    /// external memory).
    allocs: Vec<Option<DeviceAlloc>>,
    /// Device address of each root allocation (by buffer id; views hold 0).
    base: Vec<u64>,
    /// Graph mode: the graph as built (read back by the tests and `ostinato run --dot`) and the node of each launch.
    graph: Option<(Graph, Vec<GraphNode>)>,
    main: Arc<Stream>,
    timer: [Arc<Event>; 2],
    replayer: Placement,
    /// The exec's name in errors: its plan's fingerprint and size.
    label: Arc<str>,
    /// Set by a wait that timed out or a sticky driver error: every later call is refused.
    fault: Option<Fault>,
}

/// Why an exec refuses further use.
#[derive(Clone, Debug)]
struct Fault {
    reason: String,
    /// Work it submitted may still be running (a wait timed out): dropping the exec then leaves its
    /// device memory, streams and graph to the process instead of waiting for ever.
    running: bool,
}

impl Backend for CudaBackend {
    type Kernel = CudaKernel;
    type Memory = DeviceMemory;
    type Exec = CudaExec;
    type Error = CudaError;

    fn name(&self) -> &'static str {
        "cuda"
    }

    /// `builtin:NAME` (the built-in kernels, in all their builds), or a `.cu` (compiled by NVRTC), `.ptx`
    /// or `.cubin` file with an optional `entry`. Option `pdl`: declares the kernel PDL-capable (or
    /// not); where there is PTX it is certified from it, and a declaration the PTX contradicts is
    /// refused. Option `fusable = true`: the kernel (CUDA C, `extern "C"`) may run as a body of a fused
    /// kernel (`crate::fusion`); certified from its PTX as fused, refused naming what stands in the way.
    /// The built-ins are certified without a declaration.
    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<CudaKernel> {
        let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
        reference.check_options("cuda", &["pdl", "fusable"]).map_err(refuse)?;
        let pdl = reference.bool_option("pdl").map_err(refuse)?;
        let fusable = reference.bool_option("fusable").map_err(refuse)?;
        let entry = reference.entry_for(&sig.name);
        match reference.builtin_name() {
            Some(_) if pdl.is_some() || fusable.is_some() => {
                Err(refuse("built-in kernels are certified from their PTX; `pdl` and `fusable` are for a user's kernels".into()))
            }
            Some(_) => self.builtins.kernel(entry, sig),
            None => {
                let module = self.file_module(reference).map_err(|e| e.at(format!("kernel `{}`", sig.name)))?;
                let kernel = module.kernel(entry, sig, pdl)?;
                if fusable == Some(true) {
                    module.fusable_kernel(kernel, entry, sig)
                } else {
                    Ok(kernel)
                }
            }
        }
    }

    fn instantiate(&self, plan: &Plan, kernels: Vec<CudaKernel>, buffers: Vec<BufferBinding<DeviceMemory>>) -> Result<CudaExec> {
        self.build_exec(plan, kernels, buffers, None)
    }
}

impl CudaBackend {
    /// Like [`Backend::instantiate`], but the exec replays on the user's `stream` (its main stream; eager
    /// mode's further lanes still get streams of their own). Refused for a stream of another context,
    /// and with `StreamPriority::High` (an external stream keeps the priority its owner gave it).
    pub fn instantiate_on(&self, plan: &Plan, kernels: Vec<CudaKernel>, buffers: Vec<BufferBinding<DeviceMemory>>, stream: ExternalStream) -> Result<CudaExec> {
        if self.options.priority != StreamPriority::Default {
            return Err(CudaError::Usage {
                op: "instantiate_on",
                reason: "stream priority applies to streams the exec makes; an external stream keeps its owner's priority".into(),
            });
        }
        self.build_exec(plan, kernels, buffers, Some(stream))
    }

    fn build_exec(
        &self,
        plan: &Plan,
        kernels: Vec<CudaKernel>,
        buffers: Vec<BufferBinding<DeviceMemory>>,
        external: Option<ExternalStream>,
    ) -> Result<CudaExec> {
        self.ctx.bind()?;
        let g = plan.graph();
        check_bindings(plan, kernels.len(), &buffers, |m| m.len())?;
        ostinato::check_single_device(plan, "cuda").map_err(|source| CudaError::Range { op: "instantiate", source })?;
        self.device.info().limits.check(plan).map_err(|reason| CudaError::Unsupported { op: "instantiate", reason })?;
        for (sig, k) in g.kernels().iter().zip(&kernels) {
            let kinds = |s: &ostinato::KernelSig| s.params.iter().map(|p| p.kind.clone()).collect::<Vec<ParamKind>>();
            if kinds(sig) != kinds(&k.sig) {
                return Err(BindError::Signature {
                    kernel: sig.name.clone(),
                    reason: format!("implementation `{}` was checked against another signature", k.name),
                }
                .into());
            }
        }
        let (copy_k, fill_k) = self.helpers.clone();
        // The user's plan (buffers, slots, `Exec::plan`) and the plan that runs: the same, or with its
        // fused groups as single nodes (same buffers and slots).
        let user_plan = plan;
        let fused = crate::fusion::build::fuse(&self.device, self.options.trigger, plan, &kernels, (&copy_k, &fill_k), self.options.fusion)?;
        let (plan, kernels, fused_nodes) = match &fused {
            Some(f) => (&f.plan, f.kernels.clone(), f.fused_nodes),
            None => (plan, kernels, 0),
        };
        let helpers_pdl = copy_k.pdl_capable && fill_k.pdl_capable;
        let kernel_pdl: Vec<KernelPdl> = kernels.iter().map(CudaKernel::pdl).collect();
        let lowering = lower_with(plan, &kernel_pdl, helpers_pdl, self.options.pdl)?;
        let node_kernels: Vec<&CudaKernel> = lowering
            .launches
            .iter()
            .map(|l| match l.callee {
                Callee::Kernel(k) => &kernels[k.index()],
                Callee::Copy => &copy_k,
                // A collective launches no kernel of ours (its NCCL call is in `calls`): a placeholder.
                Callee::Fill | Callee::Collective => &fill_k,
            })
            .collect();

        // Memory: one allocation per root buffer unless bound externally.
        let mut allocs: Vec<Option<DeviceAlloc>> = (0..g.buffers().len()).map(|_| None).collect();
        let mut base = vec![0u64; g.buffers().len()];
        for (i, (decl, b)) in g.buffers().iter().zip(&buffers).enumerate() {
            if decl.root.index() != i {
                continue;
            }
            base[i] = match b {
                BufferBinding::External(m) => m.ptr(),
                BufferBinding::Allocate => {
                    let a = DeviceAlloc::new(&self.ctx, decl.size as usize).map_err(|e| e.at(format!("buffer `{}`", decl.name)))?;
                    let p = a.ptr();
                    allocs[i] = Some(a);
                    p
                }
            };
        }
        let value = |a: &ArgValue| match a {
            ArgValue::Pointer { root, offset } => base[root.index()] + offset,
            ArgValue::Bits(b) => *b,
            ArgValue::Slot(s) => g.slots()[s.index()].initial.bits,
        };
        // Collectives (one rank: every buffer is on this device): NCCL calls on the exec's streams,
        // captured into child graphs in graph mode.
        let calls: Vec<Option<CollectiveCall>> = lowering.launches.iter().map(|l| CollectiveCall::of(plan, l.node, &base)).collect();
        let comm = if calls.iter().any(Option::is_some) { Some(Communicator::single(self.device.info().ordinal)?) } else { None };
        let mut funcs = Vec::with_capacity(lowering.launches.len());
        let mut args = Vec::with_capacity(lowering.launches.len());
        let eager = self.options.mode == ExecMode::Eager;
        for (l, k) in lowering.launches.iter().zip(&node_kernels) {
            funcs.push(k.build(if eager { l.eager_variant } else { l.variant }).clone());
            args.push(KernelArgs::new(&l.args.iter().map(value).collect::<Vec<u64>>()));
        }
        let stream = || match self.options.priority {
            StreamPriority::Default => Stream::new(&self.ctx),
            StreamPriority::High => Stream::with_greatest_priority(&self.ctx),
        };
        let main = Arc::new(match external {
            Some(e) => Stream::external(&self.ctx, e.handle())?,
            None => stream()?,
        });
        let (work, graph) = match self.options.mode {
            ExecMode::Graph => {
                let collectives = Collectives { calls: &calls, comm: comm.as_ref(), ctx: &self.ctx };
                let (graph, exec, nodes) = build_graph(plan, &lowering, &funcs, &mut args, &main, self.options.build, &collectives)?;
                (Work::Graph { exec, nodes: nodes.clone() }, Some((graph, nodes)))
            }
            ExecMode::Eager => {
                let mut side = vec![];
                for _ in 1..plan.lanes().count() {
                    side.push(stream()?);
                }
                let mut done: Vec<Option<Event>> = (0..plan.node_count()).map(|_| None).collect();
                for v in 0..plan.node_count() {
                    for w in plan.lanes().waits(NodeId(v as u32)) {
                        if done[w.index()].is_none() {
                            done[w.index()] = Some(Event::new(false)?);
                        }
                    }
                }
                let lane_end = (0..side.len()).map(|_| Event::new(false)).collect::<Result<Vec<_>>>()?;
                (Work::Eager { side, done, start: Event::new(false)?, lane_end }, None)
            }
        };
        let timer = [Arc::new(Event::new(true)?), Arc::new(Event::new(true)?)];
        let label: Arc<str> = format!("exec of plan {:016x} ({} nodes)", user_plan.fingerprint(), user_plan.node_count()).into();
        let (run_plan, lowering) = (Arc::new(plan.clone()), Arc::new(lowering));
        let plan = Arc::new(user_plan.clone());
        let collective_roots: Vec<BufferId> = (0..plan.node_count())
            .filter(|&v| matches!(plan.graph().nodes()[v].op, ostinato::NodeOp::Collective { .. }))
            .flat_map(|v| plan.graph().accesses(NodeId(v as u32)).into_iter().map(|a| a.root))
            .collect();
        let replayer = Replayer {
            calls,
            comm,
            ctx: self.ctx.clone(),
            plan: run_plan.clone(),
            lowering: lowering.clone(),
            funcs,
            args,
            work,
            main: main.clone(),
            timer: timer.clone(),
            wait_timeout: self.options.wait_timeout,
            label: label.clone(),
        };
        let replayer = match self.options.launch {
            LaunchOn::Caller => Placement::Caller(replayer),
            LaunchOn::Thread { spin } => {
                Placement::Thread(LaunchThread::start(replayer, spin).map_err(|reason| CudaError::Internal { op: "instantiate", reason })?)
            }
        };
        Ok(CudaExec {
            plan,
            run_plan,
            fused_nodes,
            collective_roots,
            lowering,
            ctx: self.ctx.clone(),
            allocs,
            base,
            graph,
            main,
            timer,
            replayer,
            label,
            fault: None,
        })
    }
}

impl Replayer {
    fn enqueue(&mut self) -> Result<()> {
        match &self.work {
            Work::Graph { exec, .. } => exec.launch(&self.main),
            Work::Eager { side, done, start, lane_end } => {
                let lanes = self.plan.lanes();
                if !side.is_empty() {
                    start.record(&self.main)?;
                }
                for s in side {
                    s.wait_event(start)?;
                }
                for &v in self.plan.order() {
                    let lane = lanes.lane_of(v);
                    let s = if lane == 0 { &*self.main } else { &side[lane - 1] };
                    for w in lanes.waits(v) {
                        if let Some(e) = &done[w.index()] {
                            s.wait_event(e)?;
                        }
                    }
                    let i = v.index();
                    let pdl = self.lowering.eager_pdl[i] && lanes.waits(v).is_empty();
                    match (&self.calls[i], &self.comm) {
                        (Some(call), Some(comm)) => call.enqueue(comm, s)?,
                        _ => s.launch(&self.funcs[i], self.lowering.launches[i].dims, &mut self.args[i], pdl)?,
                    }
                    if let Some(e) = &done[i] {
                        e.record(s)?;
                    }
                }
                for (s, end) in side.iter().zip(lane_end) {
                    end.record(s)?;
                    self.main.wait_event(end)?;
                }
                Ok(())
            }
        }
    }

    /// Gives every use of `slot` the value `bits` from the next launch on; graph mode patches only the
    /// nodes whose argument changed.
    fn set_slot_bits(&mut self, slot: SlotId, bits: u64) -> Result<()> {
        for &(node, arg) in self.plan.slot_uses(slot) {
            let i = node.index();
            if self.args[i].get(arg) == bits {
                continue;
            }
            self.args[i].set(arg, bits);
            if let Work::Graph { exec, nodes } = &self.work {
                exec.set_kernel_params(nodes[i], &self.funcs[i], self.lowering.launches[i].dims, &mut self.args[i])
                    .map_err(|e| e.at(self.plan.graph().describe_node(node)))?;
            }
        }
        Ok(())
    }

    /// Points every launch argument into root buffer `root` at `base` (plus the argument's offset);
    /// graph mode patches only the nodes whose argument changed, no rebuild.
    fn rebind_bits(&mut self, root: BufferId, base: u64) -> Result<()> {
        for (i, l) in self.lowering.launches.iter().enumerate() {
            let mut changed = false;
            for (a, value) in l.args.iter().enumerate() {
                if let ArgValue::Pointer { root: r, offset } = value {
                    if *r == root && self.args[i].get(a) != base + offset {
                        self.args[i].set(a, base + offset);
                        changed = true;
                    }
                }
            }
            if let (true, Work::Graph { exec, nodes }) = (changed, &self.work) {
                exec.set_kernel_params(nodes[i], &self.funcs[i], l.dims, &mut self.args[i]).map_err(|e| e.at(self.plan.graph().describe_node(l.node)))?;
            }
        }
        Ok(())
    }

    /// Returns once everything submitted on the main stream has finished (every replay ends there:
    /// eager mode joins its side lanes into it), or gives up after the exec's wait timeout. Polls the
    /// stream: spinning at first (a replay's end is usually microseconds away), then yielding, then
    /// sleeping 50 µs between queries.
    fn wait_idle(&self) -> Result<()> {
        let Some(timeout) = self.wait_timeout else { return self.main.synchronize() };
        let start = std::time::Instant::now();
        while !self.main.is_idle()? {
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(CudaError::Timeout { exec: self.label.to_string(), ms: timeout.as_millis() });
            }
            match waited.as_micros() {
                0..=200 => std::hint::spin_loop(),
                201..=5000 => std::thread::yield_now(),
                _ => std::thread::sleep(std::time::Duration::from_micros(50)),
            }
        }
        Ok(())
    }

    /// Waits for the side streams (the main one is the exec's to wait for).
    fn synchronize_side(&self) {
        if let Work::Eager { side, .. } = &self.work {
            for s in side {
                let _ = s.synchronize();
            }
        }
    }
}

impl Submitter for Replayer {
    type Error = CudaError;
    fn start(&mut self) -> Result<()> {
        self.ctx.bind()
    }
    fn run(&mut self, command: Command) -> Result<()> {
        match command {
            Command::SetSlot(slot, bits) => self.set_slot_bits(slot, bits),
            Command::Rebind(root, base) => self.rebind_bits(root, base),
            Command::Launch => self.enqueue(),
            Command::Record(i) => self.timer[i].record(&self.main),
            Command::Synchronize => self.wait_idle(),
        }
    }
}

/// A launch thread's fault as the caller's error for `op`.
fn from_thread(op: &'static str) -> impl Fn(LaunchFault<CudaError>) -> CudaError {
    move |fault| match fault {
        LaunchFault::Failed(e) => e.at("on the exec's launch thread"),
        LaunchFault::AfterFailure => CudaError::State {
            op,
            reason: "a replay or patch failed on the exec's launch thread (that error was returned earlier); the exec submits nothing more".into(),
        },
        LaunchFault::Ended(reason) => CudaError::State { op, reason },
    }
}

impl CudaExec {
    /// The lowering this exec submits (what the golden tests pin).
    /// The plan that runs: the user's plan, or with its fused groups as single nodes (the
    /// [`lowering`](Self::lowering) is this plan's; its node ids are this plan's).
    pub fn run_plan(&self) -> &Plan {
        &self.run_plan
    }

    /// How many of the user's nodes run inside fused kernels (0: fusion off or nothing fused).
    pub fn fused_nodes(&self) -> usize {
        self.fused_nodes
    }

    pub fn lowering(&self) -> &Lowering {
        &self.lowering
    }
    /// Number of programmatic (PDL) edges in the submission.
    pub fn programmatic_edges(&self) -> usize {
        match &self.graph {
            Some(_) => self.lowering.edges.iter().filter(|e| e.programmatic).count(),
            None => self.lowering.eager_pdl.iter().filter(|p| **p).count(),
        }
    }
    /// The stream the exec replays on (its own, or the one it was instantiated on).
    pub fn stream(&self) -> ExternalStream {
        ExternalStream::vouched(self.main.handle())
    }
    /// Returns once every replay and patch posted so far has been handed to the driver, so that work
    /// the caller then enqueues on [`CudaExec::stream`] runs after those replays. Nothing to do on the
    /// caller's thread (each call reaches the driver before it returns); with a launch thread, waits
    /// for the thread (not for the GPU).
    pub fn flush(&mut self) -> Result<()> {
        self.drain("flush")
    }
    /// Which thread makes this exec's driver calls for replay and patch.
    pub fn launch_on_thread(&self) -> bool {
        matches!(self.replayer, Placement::Thread(_))
    }
    /// Graph mode: writes the driver's verbose DOT description of the submitted graph (kernel nodes with
    /// their launch params, edges with their type and ports) to `path`.
    pub fn write_dot(&self, path: &std::path::Path) -> Result<()> {
        self.drain("write_dot")?;
        match &self.graph {
            Some((graph, _)) => graph.write_dot(path),
            None => Err(CudaError::Unsupported { op: "write_dot", reason: "eager mode submits no graph".into() }),
        }
    }
    /// Graph mode: the edges of the submitted graph as the driver holds them, `(from, to, programmatic)`
    /// by node index, sorted (what the tests compare with the lowering, whichever way the graph was built).
    pub fn submitted_edges(&self) -> Result<Vec<(usize, usize, bool)>> {
        self.drain("submitted_edges")?;
        let Some((graph, nodes)) = &self.graph else {
            return Err(CudaError::Unsupported { op: "submitted_edges", reason: "eager mode submits no graph".into() });
        };
        let by_node: std::collections::HashMap<GraphNode, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let index = |n: GraphNode| {
            by_node.get(&n).copied().ok_or(CudaError::Internal { op: "submitted_edges", reason: "an edge names a node the exec did not add".into() })
        };
        let mut edges = graph.typed_edges()?.into_iter().map(|(f, t, p)| Ok((index(f)?, index(t)?, p))).collect::<Result<Vec<_>>>()?;
        edges.sort_unstable();
        Ok(edges)
    }
    /// Device address of a buffer (views included).
    pub fn device_ptr(&self, buffer: BufferId) -> Option<u64> {
        let d = self.plan.graph().buffers().get(buffer.index())?;
        Some(self.base[d.root.index()] + d.root_offset)
    }

    /// With a launch thread: returns once it has handed the driver everything posted so far, so that
    /// what the caller puts on the stream next comes after those replays.
    fn drain(&self, op: &'static str) -> Result<()> {
        match &self.replayer {
            Placement::Thread(t) => t.drain().map_err(from_thread(op)),
            Placement::Caller(_) | Placement::Stopped => Ok(()),
        }
    }

    /// Runs `command` on the thread that owns the replayer; `finish`: and returns only once it ran.
    /// Refused once the exec is faulted; a timeout or a sticky driver error faults it.
    fn on_stream(&mut self, op: &'static str, command: Command, finish: bool) -> Result<()> {
        self.refuse_if_faulted(op)?;
        let r = match &mut self.replayer {
            Placement::Caller(r) => r.run(command),
            Placement::Thread(t) => match t.post(command).map_err(from_thread(op)) {
                Ok(()) if finish => t.drain().map_err(from_thread(op)),
                other => other,
            },
            Placement::Stopped => Err(CudaError::State { op, reason: "the exec is being dropped".into() }),
        };
        self.note_fault(r)
    }

    /// An error from the exec's own work: remembered when it leaves the exec (or the context)
    /// unusable.
    fn note_fault<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            let running = matches!(e, CudaError::Timeout { .. });
            if (running || e.is_sticky()) && self.fault.is_none() {
                self.fault = Some(Fault { reason: e.to_string(), running });
            }
        }
        r
    }

    fn refuse_if_faulted(&self, op: &'static str) -> Result<()> {
        match &self.fault {
            None => Ok(()),
            Some(f) => Err(CudaError::State { op, reason: format!("{} refuses: it is faulted ({})", self.label, f.reason) }),
        }
    }

    /// Why the exec refuses further use, if it does.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_ref().map(|f| f.reason.as_str())
    }

    /// Records the start timing event on the exec's stream (see [`CudaExec::timer_stop_ms`]).
    pub fn timer_start(&mut self) -> Result<()> {
        self.on_stream("timer_start", Command::Record(0), false)
    }
    /// Records the stop event, waits for it, and returns the GPU milliseconds since `timer_start`.
    pub fn timer_stop_ms(&mut self) -> Result<f64> {
        self.on_stream("timer_stop_ms", Command::Record(1), false)?;
        self.on_stream("timer_stop_ms", Command::Synchronize, true)?;
        Ok(self.timer[1].elapsed_ms_since(&self.timer[0])? as f64)
    }

    /// Enqueues `count` replays between two timing events and returns the GPU time in milliseconds.
    pub fn replay_timed(&mut self, count: usize) -> Result<f64> {
        self.timer_start()?;
        for _ in 0..count {
            self.replay()?;
        }
        self.timer_stop_ms()
    }
}

impl Exec for CudaExec {
    type Error = CudaError;
    type Memory = DeviceMemory;

    fn plan(&self) -> &Plan {
        &self.plan
    }

    #[inline]
    fn replay(&mut self) -> Result<()> {
        self.on_stream("replay", Command::Launch, false)
    }

    fn wait(&mut self) -> Result<()> {
        self.on_stream("wait", Command::Synchronize, true)
    }

    /// Patches a slot. Launches already enqueued keep the values they were launched with (CUDA snapshots
    /// kernel params at launch), so this is safe even while replays are in flight. The value is checked
    /// here, on the caller's thread, also when a launch thread applies it.
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<()> {
        check_slot(&self.plan, slot, value)?;
        self.on_stream("set_slot", Command::SetSlot(slot, value.bits), false)
    }

    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        check_range(&self.plan, buffer, offset, data.len() as u64).map_err(|source| CudaError::Range { op: "write_buffer", source })?;
        self.wait()?;
        self.ctx.bind()?;
        let p = self.device_ptr(buffer).ok_or(CudaError::Range { op: "write_buffer", source: ostinato::UsageError::UnknownBuffer { id: buffer.0 } })?;
        let r = crate::ffi::copy_to_device(p + offset, data);
        self.note_fault(r)
    }

    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<()> {
        check_range(&self.plan, buffer, offset, out.len() as u64).map_err(|source| CudaError::Range { op: "read_buffer", source })?;
        self.wait()?;
        self.ctx.bind()?;
        let p = self.device_ptr(buffer).ok_or(CudaError::Range { op: "read_buffer", source: ostinato::UsageError::UnknownBuffer { id: buffer.0 } })?;
        let r = crate::ffi::copy_to_host(out, p + offset);
        self.note_fault(r)
    }

    /// Points root buffer `buffer` at the user's `memory` from the next replay on: graph mode patches
    /// the kernel nodes that use it in place (no rebuild), eager mode the launch arguments. Refused
    /// while anything the exec submitted may still run; an allocation the exec had made for the
    /// buffer is freed.
    fn rebind(&mut self, buffer: BufferId, memory: DeviceMemory) -> Result<()> {
        check_rebind(&self.plan, buffer, memory.len())?;
        if self.collective_roots.contains(&buffer) {
            return Err(CudaError::Unsupported {
                op: "rebind",
                reason: format!(
                    "buffer `{}` is used by a collective, whose NCCL call holds its address: instantiate again instead",
                    self.plan.graph().buffer(buffer).name
                ),
            });
        }
        self.refuse_if_faulted("rebind")?;
        // Every replay ends on the main stream (eager mode joins its side lanes into it), so an idle
        // main stream, once the launch thread has handed over all it holds, means nothing runs.
        self.drain("rebind")?;
        if !self.main.is_idle()? {
            return Err(CudaError::State {
                op: "rebind",
                reason: format!("buffer `{}`: a replay may still be running on the exec's stream; call wait() first", self.plan.graph().buffer(buffer).name),
            });
        }
        self.on_stream("rebind", Command::Rebind(buffer, memory.ptr()), true)?;
        self.base[buffer.index()] = memory.ptr();
        self.allocs[buffer.index()] = None;
        Ok(())
    }
}

impl Drop for CudaExec {
    fn drop(&mut self) {
        // Work that may still run (a wait timed out) keeps its memory, streams and graph: freeing them
        // would wait for it, perhaps for ever. They stay allocated until the process ends.
        if self.fault.as_ref().is_some_and(|f| f.running) {
            std::mem::forget(std::mem::take(&mut self.allocs));
            match std::mem::replace(&mut self.replayer, Placement::Stopped) {
                // The thread ends (every command after the failure is skipped); its replayer is kept.
                Placement::Thread(t) => std::mem::forget(t.stop().0),
                other => std::mem::forget(other),
            }
            std::mem::forget(self.graph.take());
            return;
        }
        // The launch thread submits what it still holds and ends before the streams are waited for
        // and the memory is freed.
        if let Placement::Thread(t) = std::mem::replace(&mut self.replayer, Placement::Stopped) {
            if let (Some(r), _) = t.stop() {
                self.replayer = Placement::Caller(r);
            }
        }
        let _ = self.main.synchronize();
        if let Placement::Caller(r) = &self.replayer {
            r.synchronize_side();
        }
    }
}
