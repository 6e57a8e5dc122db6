//! The CUDA exec: a plan lowered once into either one explicit CUDA graph (default; replay is one
//! `cuGraphLaunch`) or eager per-lane streams with events for the cross-lane waits the plan kept.

use std::ffi::CString;
use std::sync::{Arc, Mutex};

use ostinato::{check_range, check_rebind, check_slot, BufferId, Exec, NodeId, Plan, Scalar, SlotId};

use crate::error::{CudaError, Result};
use crate::ffi::{Context, DeviceAlloc, Event, Function, Graph, GraphExec, GraphNode, KernelArgs, Stream};
use crate::graph_build::CollectiveCall;
use crate::launch_thread::{Command, LaunchFault, LaunchThread, Submitter};
use crate::lower::{ArgValue, Lowering};
use crate::nccl::Communicator;
use crate::options::{DeviceMemory, ExternalStream};

mod backend;
mod instantiate;
mod records;
mod setup;
mod shape;
mod trace;
mod tune;

pub use backend::CudaBackend;
pub use setup::setup_stage_list;
pub use trace::CUPTI_ORDER_SLACK_NS;
pub use tune::{tuning_replays, EdgeTypesRule, Tune, Tuned, CONFIRM_REPLAYS, PDL_MARGIN, TUNE_MARGIN, TUNE_SAMPLES};

/// One way graph mode submits a run plan: a graph exec, the graph node of each launch (for patching),
/// the function each launch runs (its build), and which plan's launches these are (`0`: the
/// replayer's `run`, `1`: its `other`).
struct Submission {
    exec: GraphExec,
    nodes: Vec<GraphNode>,
    funcs: Vec<Function>,
    shape: usize,
}

/// What a replay submits, past the shared stream.
enum Work {
    /// `subs[tune::active(..)]` is what a replay launches; the others (`auto`'s alternatives,
    /// `exec/tune.rs`) are launched in turn while `tuning` measures them, and dropped (`None`) once it
    /// has chosen.
    Graph { subs: Vec<Option<Submission>>, tuning: Option<Box<tune::Tuning>> },
    /// Lane 0 runs on the exec's main stream; `side[i]` runs lane `i + 1`, and `lane_end[i]` joins it
    /// back into the main stream at the end of a replay. `funcs`: each launch's function.
    Eager { funcs: Vec<Function>, side: Vec<Stream>, done: Vec<Option<Event>>, start: Event, lane_end: Vec<Event> },
}

impl Work {
    /// Gives launch `i` of plan `shape` its node in every graph exec of that plan the arguments `args`
    /// (eager mode: nothing to do, the next launch reads them).
    fn patch(&self, shape: usize, i: usize, dims: crate::lower::Dims, args: &mut KernelArgs) -> Result<()> {
        if let Work::Graph { subs, .. } = self {
            for s in subs.iter().flatten().filter(|s| s.shape == shape) {
                s.exec.set_kernel_params(s.nodes[i], &s.funcs[i], dims, args)?;
            }
        }
        Ok(())
    }
}

/// Everything `replay` and `set_slot` touch: the caller's thread owns it, or the exec's launch thread
/// (a graph exec must not be used from two threads at once, so it lives on exactly one).
struct Replayer {
    /// The launches a replay submits (until the measurement has chosen: those of `auto`'s plan).
    run: Launches,
    /// While graph mode measures submissions of a second plan (the unfused one,
    /// `exec/instantiate.rs`): its launches, patched as `run`'s; once the measurement has chosen,
    /// gone (or, where it chose a submission of this plan, swapped into `run`).
    other: Option<Box<Launches>>,
    /// Eager mode, per launch: the instance of captured work it launches (empty in graph mode).
    children: Vec<Option<GraphExec>>,
    comm: Option<Communicator>,
    ctx: Arc<Context>,
    work: Work,
    /// What the measurement of graph mode's submissions chose, once it has.
    tuned: tune::Chosen,
    main: Arc<Stream>,
    /// Timing events (start, stop), recorded on `main` by whichever thread owns the replayer.
    timer: [Arc<Event>; 2],
    /// How long a wait for the stream may take (`CudaOptions::wait_timeout`).
    wait_timeout: Option<std::time::Duration>,
    /// The exec's name in errors.
    label: Arc<str>,
    /// What tracing and NVTX need (behind a pointer: the plain replay path never reads it but for
    /// NVTX's one check).
    observe: Box<Observe>,
}

/// The launches of one plan the exec may submit, as the replayer patches them.
struct Launches {
    plan: Arc<Plan>,
    /// `auto`'s lowering of `plan`: each launch's geometry and arguments (the same in every
    /// submission of this plan).
    lowering: Arc<Lowering>,
    args: Vec<KernelArgs>,
    /// Per launch: the NCCL call of a collective node (`None`: a kernel).
    calls: Vec<Option<CollectiveCall>>,
}

impl Launches {
    /// Gives every use of `slot` the value `bits`; `work` patches only the nodes whose argument
    /// changed, in its submissions of plan `shape`.
    fn set_slot_bits(&mut self, work: &Work, shape: usize, slot: SlotId, bits: u64) -> Result<()> {
        for &(node, arg) in self.plan.slot_uses(slot) {
            let i = node.index();
            if self.args[i].get(arg) == bits {
                continue;
            }
            self.args[i].set(arg, bits);
            work.patch(shape, i, self.lowering.launches[i].dims, &mut self.args[i]).map_err(|e| e.at(self.plan.graph().describe_node(node)))?;
        }
        Ok(())
    }

    /// Points every launch argument into root buffer `root` at `base` (plus the argument's offset);
    /// `work` patches only the nodes whose argument changed, in its submissions of plan `shape`.
    fn rebind_bits(&mut self, work: &Work, shape: usize, root: BufferId, base: u64) -> Result<()> {
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
            if changed {
                work.patch(shape, i, l.dims, &mut self.args[i]).map_err(|e| e.at(self.plan.graph().describe_node(l.node)))?;
            }
        }
        Ok(())
    }
}

/// The replayer's side of observing replays.
struct Observe {
    /// Graph mode, while a trace runs: the graph instantiated again with CUPTI watching.
    traced: Arc<Mutex<Option<GraphExec>>>,
    /// The NVTX names of a replay and of each launch, where a profiler listened at instantiation.
    names: Option<NvtxNames>,
}

/// What NVTX ranges are called: a replay, and each launch of an eager replay.
struct NvtxNames {
    replay: CString,
    launches: Arc<[CString]>,
}

/// Calls made around each launch of an eager replay (none on the plain path: it compiles to nothing).
trait Marks {
    fn before(&mut self, launch: usize) -> Result<()>;
    fn after(&mut self, launch: usize) -> Result<()>;
}

struct NoMarks;
impl Marks for NoMarks {
    #[inline(always)]
    fn before(&mut self, _: usize) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn after(&mut self, _: usize) -> Result<()> {
        Ok(())
    }
}

/// An NVTX range per launch, named as the node.
struct NvtxMarks(Arc<[CString]>);
impl Marks for NvtxMarks {
    fn before(&mut self, launch: usize) -> Result<()> {
        if let Some(n) = self.0.get(launch) {
            crate::nvtx::push(n);
        }
        Ok(())
    }
    fn after(&mut self, _: usize) -> Result<()> {
        crate::nvtx::pop();
        Ok(())
    }
}

/// A traced eager replay: each launch's calls tagged with (replay, launch) for CUPTI, inside its
/// NVTX range where a profiler listens.
struct CuptiMarks {
    replay: u32,
    nvtx: Option<NvtxMarks>,
}
impl Marks for CuptiMarks {
    fn before(&mut self, launch: usize) -> Result<()> {
        if let Some(m) = &mut self.nvtx {
            m.before(launch)?;
        }
        crate::cupti::push_external(records::tag(self.replay, Some(launch)))
    }
    fn after(&mut self, launch: usize) -> Result<()> {
        crate::cupti::pop_external()?;
        match &mut self.nvtx {
            Some(m) => m.after(launch),
            None => Ok(()),
        }
    }
}

enum Placement {
    /// Boxed: the replayer is large, and the other placements are not.
    Caller(Box<Replayer>),
    Thread(LaunchThread<Replayer>),
    /// Only while the exec is dropped.
    Stopped,
}

/// What an exec's PDL and fusion policies decided against ([`CudaExec::decisions`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decisions {
    /// Full edges of the graph-mode submission with why (node ids of the run plan).
    pub full_edges: Vec<(NodeId, NodeId, crate::lower::FullEdge)>,
    /// How many of its edges are programmatic.
    pub programmatic_edges: usize,
    /// How many of the user's nodes run inside fused kernels.
    pub fused_nodes: usize,
    /// The user's nodes that run by themselves, with why.
    pub unfused: Vec<(NodeId, String)>,
    /// How many submissions the exec measures over its first replays (`exec/tune.rs`; 1: graph mode
    /// with nothing to measure, 0: eager mode), and once it has, what it measured and chose (the
    /// edges above are the chosen submission's).
    pub candidates: usize,
    pub tuned: Option<Tuned>,
    /// Where `instantiate`'s wall time went, stage by stage in order (checks, fusion, hand-offs,
    /// lowering, memory, streams, each candidate submission's graph built and instantiated, the rest).
    pub setup: Vec<(String, std::time::Duration)>,
}

/// A retained CUDA instantiation of a plan.
pub struct CudaExec {
    /// The user's plan.
    plan: Arc<Plan>,
    /// Its launches' tile maps as checked against their code (checked again when a slot they read is
    /// patched).
    tile_checks: ostinato_cuda_code::tilemaps::TileChecks,
    /// The plans that run (`auto`'s first; a second where graph mode measures the unfused plan too):
    /// `plan`, or `plan` with its fused groups as single nodes, with what fusion and hand-offs made of
    /// each.
    shapes: Vec<shape::RunShape>,
    /// Which of `shapes` each of `lowerings` lowers.
    shape_of: Vec<usize>,
    /// Root buffers a child graph uses (a collective's NCCL call, captured work: the addresses live in
    /// the captured calls, so they are not rebindable), with the node that uses each.
    fixed_roots: Vec<(BufferId, String)>,
    /// The captured work the exec runs: what keeps its memory alive, held until the exec's work is done.
    captured: Vec<Arc<crate::captured::CapturedGraph>>,
    /// The lowerings graph mode may submit (`auto`'s first; eager mode: `auto`'s only),
    /// and each one's graph as built (read back by the tests and `ostinato run --dot`) with the node
    /// of each launch (graph mode only).
    lowerings: Vec<Arc<Lowering>>,
    graphs: Vec<(Graph, Vec<GraphNode>)>,
    /// What the measurement of the submissions chose, once it has (set by the replayer).
    tuned: tune::Chosen,
    ctx: Arc<Context>,
    /// The allocation the exec made for each root buffer (by buffer id; `None` for views and
    /// external memory).
    allocs: Vec<Option<DeviceAlloc>>,
    /// Device address of each root allocation (by buffer id; views hold 0).
    base: Vec<u64>,
    main: Arc<Stream>,
    timer: [Arc<Event>; 2],
    replayer: Placement,
    /// The exec's name in errors: its plan's fingerprint and size.
    label: Arc<str>,
    /// Shared with the replayer: the graph a trace instantiates again (graph mode, during a trace).
    traced: Arc<Mutex<Option<GraphExec>>>,
    /// Set by a wait that timed out or a sticky driver error: every later call is refused.
    fault: Option<Fault>,
    /// `instantiate`'s stages with their wall times ([`Decisions::setup`]).
    setup: Vec<(String, std::time::Duration)>,
}

/// Why an exec refuses further use.
#[derive(Clone, Debug)]
struct Fault {
    reason: String,
    /// Work it submitted may still be running (a wait timed out): dropping the exec then leaves its
    /// device memory, streams and graph to the process instead of waiting for ever.
    running: bool,
}

impl Replayer {
    fn enqueue(&mut self) -> Result<()> {
        match (&self.work, &self.observe.names) {
            (Work::Graph { .. }, None) => self.launch_graph(),
            (Work::Graph { .. }, Some(names)) => {
                crate::nvtx::push(&names.replay);
                let r = self.launch_graph();
                crate::nvtx::pop();
                r
            }
            (Work::Eager { .. }, None) => self.enqueue_eager(&mut NoMarks),
            (Work::Eager { .. }, Some(names)) => {
                let mut marks = NvtxMarks(names.launches.clone());
                crate::nvtx::push(&names.replay);
                let r = self.enqueue_eager(&mut marks);
                crate::nvtx::pop();
                r
            }
        }
    }

    /// A graph-mode replay: the active submission, or while the submissions are measured the one the
    /// measurement runs next, between its events; then the measurement's finished events are read,
    /// and once all are, the fastest submission becomes the active one and the others are destroyed
    /// (every launch of theirs has completed: its stop event has).
    fn launch_graph(&mut self) -> Result<()> {
        let Work::Graph { subs, tuning } = &mut self.work else {
            return Err(CudaError::Internal { op: "replay", reason: "a graph replay of an eager exec".into() });
        };
        let active = tune::active(&self.tuned);
        let Some(t) = tuning else { return launched(subs, active)?.exec.launch(&self.main) };
        match t.next() {
            Some(c) => t.launch(&launched(subs, c)?.exec, &self.main)?,
            None => launched(subs, active)?.exec.launch(&self.main)?,
        }
        match t.poll()? {
            tune::Polled::Pending => {}
            tune::Polled::Narrowed { challenger } => {
                for (k, s) in subs.iter_mut().enumerate() {
                    if k != 0 && k != challenger {
                        *s = None;
                    }
                }
            }
            tune::Polled::Chosen(chosen) => {
                for (k, s) in subs.iter_mut().enumerate() {
                    if k != chosen.chosen {
                        *s = None;
                    }
                }
                // A submission of the other plan: its launches are the ones patched from now on.
                if let (Some(Some(kept)), Some(other)) = (subs.get_mut(chosen.chosen), self.other.as_mut()) {
                    if kept.shape == 1 {
                        std::mem::swap(&mut self.run, &mut **other);
                        kept.shape = 0;
                    }
                }
                self.other = None;
                *tuning = None;
                // Set once: this is the only place that sets it, and `tuning` is gone now.
                let _ = self.tuned.set(chosen);
            }
        }
        Ok(())
    }

    /// One traced replay: graph mode launches the traced graph, eager mode tags every launch.
    fn enqueue_traced(&mut self, replay: u32) -> Result<()> {
        if let Work::Graph { .. } = &self.work {
            let traced = self.observe.traced.lock().unwrap_or_else(|p| p.into_inner());
            let exec = traced.as_ref().ok_or(CudaError::Internal { op: "trace", reason: "no traced graph to launch".into() })?;
            crate::cupti::push_external(records::tag(replay, None))?;
            let r = exec.launch(&self.main);
            crate::cupti::pop_external()?;
            return r;
        }
        let mut marks = CuptiMarks { replay, nvtx: self.observe.names.as_ref().map(|n| NvtxMarks(n.launches.clone())) };
        self.enqueue_eager(&mut marks)
    }

    /// Gives the traced graph every kernel node's present params (slots patched and buffers rebound
    /// since the graph was built live in the exec's own graph exec only).
    fn trace_params(&mut self) -> Result<()> {
        let Work::Graph { subs, .. } = &self.work else { return Ok(()) };
        let sub = launched(subs, tune::active(&self.tuned))?;
        let traced = self.observe.traced.lock().unwrap_or_else(|p| p.into_inner());
        let exec = traced.as_ref().ok_or(CudaError::Internal { op: "trace", reason: "no traced graph to patch".into() })?;
        let run = &mut self.run;
        for (i, l) in run.lowering.launches.iter().enumerate() {
            if run.calls[i].is_none() {
                exec.set_kernel_params(sub.nodes[i], &sub.funcs[i], l.dims, &mut run.args[i]).map_err(|e| e.at(run.plan.graph().describe_node(l.node)))?;
            }
        }
        Ok(())
    }

    /// An eager replay: each lane's launches on its stream, `marks` around each.
    fn enqueue_eager(&mut self, marks: &mut impl Marks) -> Result<()> {
        match &self.work {
            Work::Graph { .. } => Err(CudaError::Internal { op: "replay", reason: "an eager replay of a graph exec".into() }),
            Work::Eager { funcs, side, done, start, lane_end } => {
                let run = &mut self.run;
                let lanes = run.plan.lanes();
                if !side.is_empty() {
                    start.record(&self.main)?;
                }
                for s in side {
                    s.wait_event(start)?;
                }
                for &v in run.plan.order() {
                    let lane = lanes.lane_of(v);
                    let s = if lane == 0 { &*self.main } else { &side[lane - 1] };
                    for w in lanes.waits(v) {
                        if let Some(e) = &done[w.index()] {
                            s.wait_event(e)?;
                        }
                    }
                    let i = v.index();
                    let pdl = run.lowering.eager_pdl[i] && lanes.waits(v).is_empty();
                    marks.before(i)?;
                    match (&run.calls[i], &self.comm, self.children.get(i).and_then(Option::as_ref)) {
                        (Some(call), Some(comm), _) => call.enqueue(comm, s)?,
                        (_, _, Some(child)) => child.launch(s)?,
                        _ => s.launch(&funcs[i], run.lowering.launches[i].dims, &mut run.args[i], pdl)?,
                    }
                    marks.after(i)?;
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

    /// Gives every use of `slot` the value `bits` from the next launch on, in every plan a replay may
    /// submit; graph mode patches only the nodes whose argument changed.
    fn set_slot_bits(&mut self, slot: SlotId, bits: u64) -> Result<()> {
        self.run.set_slot_bits(&self.work, 0, slot, bits)?;
        match &mut self.other {
            Some(other) => other.set_slot_bits(&self.work, 1, slot, bits),
            None => Ok(()),
        }
    }

    /// Points every launch argument into root buffer `root` at `base` (plus the argument's offset), in
    /// every plan a replay may submit; graph mode patches only the nodes whose argument changed, no
    /// rebuild.
    fn rebind_bits(&mut self, root: BufferId, base: u64) -> Result<()> {
        self.run.rebind_bits(&self.work, 0, root, base)?;
        match &mut self.other {
            Some(other) => other.rebind_bits(&self.work, 1, root, base),
            None => Ok(()),
        }
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
            Command::TraceParams => self.trace_params(),
            Command::TracedLaunch(r) => self.enqueue_traced(r),
        }
    }
}

/// Submission `k` of a graph exec, which must not have been destroyed.
fn launched(subs: &[Option<Submission>], k: usize) -> Result<&Submission> {
    subs.get(k).and_then(Option::as_ref).ok_or_else(|| CudaError::Internal { op: "replay", reason: format!("graph submission {k} was destroyed") })
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
    /// Number of programmatic (PDL) edges in the submission.
    pub fn programmatic_edges(&self) -> usize {
        match self.graph() {
            Some(_) => self.lowering().edges.iter().filter(|e| e.programmatic).count(),
            None => self.lowering().eager_pdl.iter().filter(|p| **p).count(),
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
        match self.graph() {
            Some((graph, _)) => graph.write_dot(path),
            None => Err(CudaError::Unsupported { op: "write_dot", reason: "eager mode submits no graph".into() }),
        }
    }
    /// Graph mode: the edges of the submitted graph as the driver holds them, `(from, to, programmatic)`
    /// by node index, sorted (what the tests compare with the lowering, whichever way the graph was built).
    pub fn submitted_edges(&self) -> Result<Vec<(usize, usize, bool)>> {
        self.drain("submitted_edges")?;
        let Some((graph, nodes)) = self.graph() else {
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
        self.tile_checks.check_patch(self.plan.graph(), slot, value)?;
        self.on_stream("set_slot", Command::SetSlot(slot, value.bits), false)?;
        self.tile_checks.patched(slot, value);
        Ok(())
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
        let g = self.plan.graph();
        let mut roots: Vec<_> = (0..g.buffers().len())
            .map(|i| (g.buffers()[i].root.index() == i).then(|| ostinato::MemoryExtent { space: 0, start: self.base[i], len: g.buffers()[i].size }))
            .collect();
        roots[buffer.index()] = Some(memory.extent());
        ostinato::check_disjoint_roots(&self.plan, &roots)?;
        if let Some((_, node)) = self.fixed_roots.iter().find(|(root, _)| *root == buffer) {
            return Err(CudaError::Unsupported {
                op: "rebind",
                reason: format!(
                    "buffer `{}` is used by {node}, whose captured call holds its address: instantiate again instead",
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

    /// CUPTI's records of every kernel; graph mode launches a graph instantiated again from the exec's
    /// own while CUPTI watched, so its records name the nodes (`exec/trace.rs`).
    fn trace(&mut self, replays: usize) -> Result<ostinato::Trace> {
        self.trace_replays(replays)
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
            std::mem::forget(std::mem::take(&mut self.graphs));
            std::mem::forget(std::mem::take(&mut self.captured));
            return;
        }
        // The launch thread submits what it still holds and ends before the streams are waited for
        // and the memory is freed.
        if let Placement::Thread(t) = std::mem::replace(&mut self.replayer, Placement::Stopped) {
            if let (Some(r), _) = t.stop() {
                self.replayer = Placement::Caller(Box::new(r));
            }
        }
        let _ = self.main.synchronize();
        if let Placement::Caller(r) = &self.replayer {
            r.synchronize_side();
        }
    }
}
