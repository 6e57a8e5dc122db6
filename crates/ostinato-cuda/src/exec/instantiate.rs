//! Instantiating a plan on the CUDA backend, stage by stage: check, fuse and lower, place memory,
//! make each launch's function and arguments, build the submission (a graph, or eager streams).

use std::sync::Arc;

use ostinato::{check_bindings, BindError, BufferBinding, BufferId, NodeId, NodeOp, ParamKind, Plan};

use crate::captured::CapturedGraph;
use ostinato_cuda_code::tilemaps::{KernelCode, TileChecks};

use super::setup::Stopwatch;
use super::shape::RunShape;
use super::{CudaBackend, CudaExec, Launches, Placement, Replayer, Work};
use crate::error::{CudaError, Result};
use crate::ffi::{DeviceAlloc, Event, Function, KernelArgs, Stream};
use crate::graph_build::{build_graph, CollectiveCall, Collectives};
use crate::launch_thread::LaunchThread;
use crate::lower::{lower_with, ArgValue, Callee, KernelPdl, Lowering, MixedBuilds, PdlMode, ShapeMode};
use crate::module::CudaKernel;
use crate::nccl::Communicator;
use crate::options::{DeviceMemory, ExecMode, ExternalStream, LaunchOn, StreamPriority};

impl CudaBackend {
    /// Like [`Backend::instantiate`](ostinato::Backend::instantiate), but the exec replays on the user's `stream` (its main stream; eager
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

    pub(super) fn build_exec(
        &self,
        plan: &Plan,
        kernels: Vec<CudaKernel>,
        buffers: Vec<BufferBinding<DeviceMemory>>,
        external: Option<ExternalStream>,
    ) -> Result<CudaExec> {
        let mut clock = Stopwatch::start();
        self.ctx.bind()?;
        let _range = crate::nvtx::Range::new(|| format!("ostinato instantiate plan {:016x} ({} nodes)", plan.fingerprint(), plan.node_count()));
        self.check_instantiate(plan, &kernels, &buffers)?;
        let tile_checks = check_tile_maps(plan, &kernels)?;
        clock.lap("checks");
        let (copy_k, fill_k) = self.helpers.clone();
        // The user's plan (buffers, slots, `Exec::plan`) and the plan that runs: the same, or with its
        // fused groups as single nodes (same buffers and slots).
        let user_plan = plan;
        let user_arc = Arc::new(plan.clone());
        let verified_maps = VerifiedMaps::new(&tile_checks);
        let verified = |v: NodeId, p: usize| verified_maps.holds(plan, &kernels, v, p);
        let staging = (self.options.tile_staging == crate::options::TileStaging::Auto).then_some(&verified as &dyn Fn(NodeId, usize) -> bool);
        let fusion = crate::fusion::build::fuse(&self.device, self.options.trigger, plan, &kernels, (&copy_k, &fill_k), self.options.fusion, staging)?;
        let (fused, unfused) = (fusion.fused, fusion.unfused);
        clock.lap("fusion");
        // Launches side by side may run slower than apart (kernels whose overlap costs them more than
        // the launches save): graph mode then measures the unfused plan too, with the user's kernels.
        let side_by_side = fused.as_ref().is_some_and(|f| f.side_by_side > 0);
        let user_kernels = (side_by_side && self.options.mode == ExecMode::Graph && self.policy_measures()).then(|| kernels.clone());
        let (plan, kernels, fused_nodes, units) = match &fused {
            Some(f) => (&f.plan, f.kernels.clone(), f.fused_nodes, f.units.clone()),
            None => (plan, kernels, 0, ostinato::trace::unit_per_node(plan.node_count())),
        };
        let staged_tiles = fused.as_ref().map_or((0, 0), |f| f.staged.iter().flatten().fold((0, 0), |(n, b), (_, len)| (n + 1, b + len)));
        // Tile hand-offs: the nodes that wait for exactly the producer blocks they need launch
        // wrappers of their bodies, with flags and wait tables as buffers of the exec's own.
        let handed = crate::handoff::build::handoff(&self.device, self.options.trigger, plan, &kernels, self.options.handoff)?;
        clock.lap("hand-offs");
        let (plan, kernels, internal) = match &handed {
            Some(h) => (&h.plan, h.kernels.clone(), h.inits.as_slice()),
            None => (plan, kernels, &[][..]),
        };
        let shape = RunShape {
            run_plan: Arc::new(plan.clone()),
            fused_nodes,
            staged_tiles,
            handoffs: handed.as_ref().map_or(0, |h| h.consumers),
            unfused,
            handoff_pairs: handed.as_ref().map_or_else(Vec::new, |h| h.pairs.clone()),
            units,
        };
        let kernel_pdl: Vec<KernelPdl> = kernels.iter().map(CudaKernel::pdl).collect();
        let helpers_pdl = copy_k.pdl_capable && fill_k.pdl_capable;
        let lowering = lower_with(plan, &kernel_pdl, helpers_pdl, self.options.pdl)?;
        clock.lap("lowering");
        let mut buffers = buffers;
        buffers.resize_with(plan.graph().buffers().len(), || BufferBinding::Allocate);
        let (allocs, base) = self.place_roots(plan, &buffers)?;
        for (b, bytes) in internal {
            crate::ffi::copy_to_device(base[b.index()], bytes)?;
        }
        clock.lap("memory");
        // Collectives (one rank: every buffer is on this device): NCCL calls on the exec's streams,
        // captured into child graphs in graph mode.
        let calls: Vec<Option<CollectiveCall>> = lowering.launches.iter().map(|l| CollectiveCall::of(plan, l.node, &base)).collect();
        let comm = if calls.iter().any(Option::is_some) { Some(Communicator::single(self.device.info().ordinal)?) } else { None };
        // Captured work (its graph copied at bind): a child graph in graph mode, an instance of its own
        // on its lane in eager mode.
        let captured: Vec<Option<Arc<CapturedGraph>>> =
            lowering.launches.iter().map(|l| if let Callee::Kernel(k) = l.callee { kernels[k.index()].captured.clone() } else { None }).collect();
        let main = Arc::new(match external {
            Some(e) => Stream::external(&self.ctx, e.handle())?,
            None => self.new_stream()?,
        });
        let mut args = launch_arg_values(plan, &lowering, &base);
        let helpers = (&copy_k, &fill_k);
        clock.lap("streams and arguments");
        let mut shapes = vec![shape];
        let (work, parts, other, children) = match self.options.mode {
            ExecMode::Graph => {
                let collectives = Collectives { calls: &calls, comm: comm.as_ref(), ctx: &self.ctx, captured: &captured };
                let measured = self.measures(&lowering);
                let candidates = match measured {
                    true => super::tune::candidates(plan, &kernel_pdl, helpers_pdl, self.options.pdl, lowering),
                    false => vec![("auto".to_string(), lowering)],
                };
                let mut parts = GraphParts::default();
                let target = Target { plan, kernels: &kernels, shape: 0, collectives: &collectives, main: &main };
                self.add_submissions(&mut parts, &target, helpers, candidates, &mut args, &mut clock)?;
                let mut other = None;
                if let Some(user_kernels) = user_kernels.filter(|_| measured) {
                    if let Some(mut unfused) = self.unfused_plan(&user_arc, &user_kernels, helpers_pdl, &base) {
                        clock.lap("lowering the unfused plan");
                        self.add_unfused(&mut parts, &user_kernels, &mut unfused, &main, &mut clock)?;
                        other = Some(unfused);
                    }
                }
                let tuning = parts.tuning(self.options.tune_edge_types)?;
                let subs = std::mem::take(&mut parts.subs);
                (Work::Graph { subs, tuning }, parts, other, Vec::new())
            }
            ExecMode::Eager => {
                let funcs = self.launch_funcs(&lowering, &kernels, helpers);
                self.opt_in_shared(plan, &lowering, &funcs)?;
                let children = captured.iter().map(|c| c.as_ref().map(|c| c.instance(&main)).transpose()).collect::<Result<Vec<_>>>()?;
                let parts = GraphParts { candidates: vec![("auto".to_string(), lowering)], shape_of: vec![0], ..GraphParts::default() };
                let work = self.eager_work(plan, funcs)?;
                clock.lap("eager streams");
                (work, parts, None, children)
            }
        };
        let lowerings: Vec<Arc<Lowering>> = parts.candidates.into_iter().map(|(_, l)| Arc::new(l)).collect();
        // Each plan's launches, with its `auto` lowering: the first candidate of its shape.
        let run = Launches { plan: shapes[0].run_plan.clone(), lowering: lowerings[0].clone(), args, calls };
        let other = match other {
            Some(u) => {
                let first = parts.shape_of.iter().position(|&s| s == 1);
                let first = first.ok_or_else(|| CudaError::Internal { op: "instantiate", reason: "the unfused plan has no submission".into() })?;
                shapes.push(u.shape);
                Some(Box::new(Launches { plan: user_arc.clone(), lowering: lowerings[first].clone(), args: u.args, calls: u.calls }))
            }
            None => None,
        };
        let timer = [Arc::new(Event::new(true)?), Arc::new(Event::new(true)?)];
        let label: Arc<str> = format!("exec of plan {:016x} ({} nodes)", user_plan.fingerprint(), user_plan.node_count()).into();
        let names = nvtx_names(user_plan, plan, &shapes[0].units);
        let traced = Arc::new(std::sync::Mutex::new(None));
        let tuned: super::tune::Chosen = Arc::default();
        let replayer = Replayer {
            run,
            other,
            children,
            comm,
            ctx: self.ctx.clone(),
            work,
            tuned: tuned.clone(),
            main: main.clone(),
            timer: timer.clone(),
            wait_timeout: self.options.wait_timeout,
            label: label.clone(),
            observe: Box::new(super::Observe { traced: traced.clone(), names }),
        };
        let replayer = match self.options.launch {
            LaunchOn::Caller => Placement::Caller(Box::new(replayer)),
            LaunchOn::Thread { spin } => {
                Placement::Thread(LaunchThread::start(replayer, spin).map_err(|reason| CudaError::Internal { op: "instantiate", reason })?)
            }
        };
        Ok(CudaExec {
            tile_checks,
            fixed_roots: fixed_roots(&shapes[0].run_plan, &lowerings[0]),
            captured: captured.into_iter().flatten().collect(),
            plan: user_arc,
            shapes,
            shape_of: parts.shape_of,
            lowerings,
            graphs: parts.graphs,
            tuned,
            ctx: self.ctx.clone(),
            allocs,
            base,
            main,
            timer,
            replayer,
            label,
            traced,
            fault: None,
            setup: clock.finish("the rest"),
        })
    }

    /// Builds each of `candidates` (lowerings of `target`'s plan, with `args` its launches' argument
    /// values) as a graph exec, and adds it to `parts`; each one's build is a lap of `clock`.
    fn add_submissions(
        &self,
        parts: &mut GraphParts,
        target: &Target,
        helpers: (&CudaKernel, &CudaKernel),
        candidates: Vec<(String, Lowering)>,
        args: &mut [KernelArgs],
        clock: &mut Stopwatch,
    ) -> Result<()> {
        let Target { plan, kernels, shape, collectives, main } = *target;
        for (label, low) in candidates {
            let funcs = self.launch_funcs(&low, kernels, helpers);
            self.opt_in_shared(plan, &low, &funcs)?;
            let (graph, exec, nodes) = build_graph(plan, &low, &funcs, args, main, self.options.build, collectives)?;
            clock.lap(format!("submission `{label}`"));
            parts.subs.push(Some(super::Submission { exec, nodes: nodes.clone(), funcs, shape }));
            parts.graphs.push((graph, nodes));
            parts.candidates.push((label, low));
            parts.shape_of.push(shape);
        }
        Ok(())
    }

    /// Adds the submissions of `unfused` ([`unfused_plan`](Self::unfused_plan), run with the user's
    /// `kernels`) to `parts`, as shape 1; its candidates move into `parts`.
    fn add_unfused(&self, parts: &mut GraphParts, kernels: &[CudaKernel], unfused: &mut UnfusedPlan, main: &Stream, clock: &mut Stopwatch) -> Result<()> {
        // No collective and no captured work: every launch is a kernel node of the graph.
        let none = vec![None; unfused.calls.len()];
        let collectives = Collectives { calls: &unfused.calls, comm: None, ctx: &self.ctx, captured: &none };
        let plan = unfused.shape.run_plan.clone();
        let target = Target { plan: &plan, kernels, shape: 1, collectives: &collectives, main };
        let candidates = std::mem::take(&mut unfused.candidates);
        let (copy_k, fill_k) = (&self.helpers.0, &self.helpers.1);
        self.add_submissions(parts, &target, (copy_k, fill_k), candidates, &mut unfused.args, clock)
    }

    /// The unfused plan graph mode measures beside a fused one that runs launches side by side: the
    /// user's `plan` with the user's kernels, without fusion or hand-offs (so with no buffer of the
    /// exec's own: its arguments point into the same roots, `base`), its candidate submissions
    /// (labelled `unfused, …`; `auto`'s own first), its launches' arguments and its shape. `None`
    /// where `auto`'s policy refuses to lower it, or where it launches a child graph (which the exec
    /// does not measure).
    fn unfused_plan(&self, plan: &Arc<Plan>, kernels: &[CudaKernel], helpers_pdl: bool, base: &[u64]) -> Option<UnfusedPlan> {
        let kernel_pdl: Vec<KernelPdl> = kernels.iter().map(CudaKernel::pdl).collect();
        let lowering = lower_with(plan, &kernel_pdl, helpers_pdl, self.options.pdl).ok()?;
        if lowering.launches.iter().any(|l| l.child_graph) {
            return None;
        }
        let args = launch_arg_values(plan, &lowering, base);
        let calls = lowering.launches.iter().map(|_| None).collect();
        let candidates: Vec<(String, Lowering)> = super::tune::candidates(plan, &kernel_pdl, helpers_pdl, self.options.pdl, lowering)
            .into_iter()
            .map(|(label, l)| (format!("unfused, {label}"), l))
            .collect();
        let why = "the exec measured its unfused submission faster than its launches side by side";
        let shape = RunShape {
            run_plan: plan.clone(),
            fused_nodes: 0,
            staged_tiles: (0, 0),
            handoffs: 0,
            unfused: (0..plan.node_count()).map(|v| (NodeId(v as u32), why.to_string())).collect(),
            handoff_pairs: Vec::new(),
            units: ostinato::trace::unit_per_node(plan.node_count()),
        };
        Some(UnfusedPlan { candidates, args, calls, shape })
    }

    /// What instantiation requires of its inputs: bindings of the plan's shape, every buffer on this
    /// device, launches within its limits, and each kernel bound against its own signature.
    fn check_instantiate(&self, plan: &Plan, kernels: &[CudaKernel], buffers: &[BufferBinding<DeviceMemory>]) -> Result<()> {
        check_bindings(plan, kernels.len(), buffers, |m| m.len())?;
        let user: Vec<_> = buffers.iter().map(|b| if let BufferBinding::External(m) = b { Some(m.extent()) } else { None }).collect();
        ostinato::check_disjoint_roots(plan, &user)?;
        ostinato::check_single_device(plan, "cuda").map_err(|source| CudaError::Range { op: "instantiate", source })?;
        self.device.info().limits.check(plan).map_err(|reason| CudaError::Unsupported { op: "instantiate", reason })?;
        for (sig, k) in plan.graph().kernels().iter().zip(kernels) {
            let kinds = |s: &ostinato::KernelSig| s.params.iter().map(|p| p.kind.clone()).collect::<Vec<ParamKind>>();
            if kinds(sig) != kinds(&k.sig) {
                return Err(BindError::Signature {
                    kernel: sig.name.clone(),
                    reason: format!("implementation `{}` was checked against another signature", k.name),
                }
                .into());
            }
        }
        Ok(())
    }

    /// One allocation per root buffer unless bound externally, zeroed (a buffer no node writes reads
    /// as zeros, as on the host; one memset each and one synchronize, at instantiate only): the
    /// allocations (by buffer id) and each root's device address (views hold 0). The user's memory
    /// is used as it is.
    fn place_roots(&self, plan: &Plan, buffers: &[BufferBinding<DeviceMemory>]) -> Result<(Vec<Option<DeviceAlloc>>, Vec<u64>)> {
        let g = plan.graph();
        let mut allocs: Vec<Option<DeviceAlloc>> = (0..g.buffers().len()).map(|_| None).collect();
        let mut base = vec![0u64; g.buffers().len()];
        for (i, (decl, b)) in g.buffers().iter().zip(buffers).enumerate() {
            if decl.root.index() != i {
                continue;
            }
            base[i] = match b {
                BufferBinding::External(m) => m.ptr(),
                BufferBinding::Allocate => {
                    let a = DeviceAlloc::new(&self.ctx, decl.size as usize).map_err(|e| e.at(format!("buffer `{}`", decl.name)))?;
                    a.zero().map_err(|e| e.at(format!("buffer `{}`", decl.name)))?;
                    let p = a.ptr();
                    allocs[i] = Some(a);
                    p
                }
            };
        }
        if allocs.iter().any(Option::is_some) {
            crate::ffi::synchronize()?;
        }
        Ok((allocs, base))
    }

    /// Whether graph mode measures its candidate submissions of `lowering`'s plan (`exec/tune.rs`): the
    /// options allow it ([`policy_measures`](Self::policy_measures)) and no launch is a child graph.
    fn measures(&self, lowering: &Lowering) -> bool {
        self.policy_measures() && !lowering.launches.iter().any(|l| l.child_graph)
    }

    /// Whether the options let graph mode measure its candidate submissions: the `auto` policy and
    /// shape, tuning on.
    fn policy_measures(&self) -> bool {
        let p = self.options.pdl;
        self.options.tune == super::Tune::Auto && p.mode == PdlMode::Auto && p.shape == ShapeMode::Auto && p.mixed_builds == MixedBuilds::Off
    }

    /// Each launch's function: the build its edges call for.
    fn launch_funcs(&self, lowering: &Lowering, kernels: &[CudaKernel], (copy_k, fill_k): (&CudaKernel, &CudaKernel)) -> Vec<Function> {
        let eager = self.options.mode == ExecMode::Eager;
        lowering
            .launches
            .iter()
            .map(|l| {
                let k = match l.callee {
                    Callee::Kernel(k) => &kernels[k.index()],
                    Callee::Copy => copy_k,
                    // A collective launches no kernel of ours (its NCCL call is in `calls`): a placeholder.
                    Callee::Fill | Callee::Collective => fill_k,
                };
                k.build(if eager { l.eager_variant } else { l.variant }).clone()
            })
            .collect()
    }

    /// Shared memory past the default a block gets: each function launched with more (static and
    /// dynamic together) is let ask for its largest launch's dynamic bytes; more than the opt-in
    /// gives is refused, naming the node.
    fn opt_in_shared(&self, plan: &Plan, lowering: &Lowering, funcs: &[Function]) -> Result<()> {
        let limits = self.device.info().limits;
        let mut wanted: Vec<(&Function, u32)> = Vec::new();
        for (l, f) in lowering.launches.iter().zip(funcs).filter(|(l, _)| l.dims.shared > 0) {
            let total = u64::from(f.static_shared_bytes()?) + u64::from(l.dims.shared);
            if total > u64::from(limits.max_shared_opt_in) {
                return Err(CudaError::Unsupported {
                    op: "instantiate",
                    reason: format!(
                        "{}: {} bytes of shared memory ({} dynamic), the device gives at most {} per block",
                        plan.graph().describe_node(l.node),
                        total,
                        l.dims.shared,
                        limits.max_shared_opt_in
                    ),
                });
            }
            if total > u64::from(limits.max_shared_bytes) {
                match wanted.iter_mut().find(|(g, _)| g.handle() == f.handle()) {
                    Some((_, most)) => *most = (*most).max(l.dims.shared),
                    None => wanted.push((f, l.dims.shared)),
                }
            }
        }
        wanted.into_iter().try_for_each(|(f, bytes)| f.allow_dynamic_shared(bytes))
    }

    /// A stream of the exec's own, at the options' priority.
    fn new_stream(&self) -> Result<Stream> {
        match self.options.priority {
            StreamPriority::Default => Stream::new(&self.ctx),
            StreamPriority::High => Stream::with_greatest_priority(&self.ctx),
        }
    }

    /// Eager mode's submission: a stream per lane past the first, an event per node another lane waits
    /// for, and the events that fork the lanes from the main stream and join them back.
    fn eager_work(&self, plan: &Plan, funcs: Vec<Function>) -> Result<Work> {
        let side = (1..plan.lanes().count()).map(|_| self.new_stream()).collect::<Result<Vec<_>>>()?;
        let mut done: Vec<Option<Event>> = (0..plan.node_count()).map(|_| None).collect();
        for v in 0..plan.node_count() {
            for w in plan.lanes().waits(NodeId(v as u32)) {
                if done[w.index()].is_none() {
                    done[w.index()] = Some(Event::new(false)?);
                }
            }
        }
        let lane_end = (0..side.len()).map(|_| Event::new(false)).collect::<Result<Vec<_>>>()?;
        Ok(Work::Eager { funcs, side, done, start: Event::new(false)?, lane_end })
    }
}

/// What graph mode submits, as it is built: each candidate submission (`auto`'s first) with its
/// label and lowering, its graph exec, its graph with the node of each launch, and which plan's
/// launches it submits.
#[derive(Default)]
struct GraphParts {
    candidates: Vec<(String, Lowering)>,
    subs: Vec<Option<super::Submission>>,
    graphs: Vec<(crate::ffi::Graph, Vec<crate::ffi::GraphNode>)>,
    shape_of: Vec<usize>,
}

/// The plan whose submissions [`add_submissions`](CudaBackend::add_submissions) builds: its kernels,
/// which of the exec's shapes it is, its collectives' calls and the stream it builds on.
#[derive(Clone, Copy)]
struct Target<'a> {
    plan: &'a Plan,
    kernels: &'a [CudaKernel],
    shape: usize,
    collectives: &'a Collectives<'a>,
    /// The stream the graphs are built and uploaded on.
    main: &'a Stream,
}

/// The unfused plan graph mode measures beside a fused one ([`CudaBackend::unfused_plan`]).
struct UnfusedPlan {
    candidates: Vec<(String, Lowering)>,
    args: Vec<KernelArgs>,
    calls: Vec<Option<CollectiveCall>>,
    shape: RunShape,
}

impl GraphParts {
    /// The measurement of the candidates (`None`: one submission, nothing to measure); those of the
    /// unfused plan (shape 1) are another plan's ([`super::tune::margins`]).
    fn tuning(&self, rule: super::tune::EdgeTypesRule) -> Result<Option<Box<super::tune::Tuning>>> {
        if self.candidates.len() < 2 {
            return Ok(None);
        }
        let own = self.shape_of.iter().filter(|&&s| s == 0).count();
        Ok(Some(Box::new(super::tune::Tuning::new(
            self.candidates.iter().map(|(label, _)| label.clone()).collect(),
            super::tune::margins(&self.candidates, own),
            super::tune::first_quartiles(&self.candidates, rule, own),
        )?)))
    }
}

/// Each launch's argument values (the same in every submission: only builds and edges differ).
fn launch_arg_values(plan: &Plan, lowering: &Lowering, base: &[u64]) -> Vec<KernelArgs> {
    let g = plan.graph();
    let value = |a: &ArgValue| match a {
        ArgValue::Pointer { root, offset } => base[root.index()] + offset,
        ArgValue::Bits(b) => *b,
        ArgValue::Slot(s) => g.slots()[s.index()].initial.bits,
    };
    lowering.launches.iter().map(|l| KernelArgs::new(&l.args.iter().map(value).collect::<Vec<u64>>())).collect()
}

/// Each launch's tile maps checked against its kernel's PTX (`ostinato_cuda_code::tilemaps`): the
/// built-ins are left to their stated footprints (`ostinato::builtins`), code without PTX (machine code,
/// captured work) is not read.
fn check_tile_maps(plan: &Plan, kernels: &[CudaKernel]) -> Result<TileChecks> {
    let code: Vec<KernelCode> = kernels
        .iter()
        .map(|k| match (k.build.builtin, k.build.info(), k.build.ptx.as_deref()) {
            (true, _, _) => KernelCode::Stated,
            (false, Some(module), Some(ptx)) => KernelCode::Ptx { module, ptx, entry: &k.entry, name: &k.build.name },
            (false, _, _) => KernelCode::Unread(format!("module `{}` was loaded as {}, not PTX", k.build.name, k.build.loaded)),
        })
        .collect();
    Ok(TileChecks::check_graph(plan.graph(), &code)?)
}

/// Whether a node's tile map on a kernel param holds by the code, asked of every member of every
/// fused group: verified from the kernel's PTX (not vouched), or, for a built-in, covered by its
/// stated footprint in every block (`ostinato::builtins`, with the slots at their initial values; a
/// patch that would break it is refused by the same check in the runtime). Both answers are looked up,
/// not searched: the maps verified by (node, param) once, and a built-in's check once per launch alike
/// (it goes block by block: `LaunchChecks`).
struct VerifiedMaps {
    from_ptx: std::collections::HashSet<(NodeId, String)>,
    builtins: std::cell::RefCell<ostinato::builtins::LaunchChecks>,
}

impl VerifiedMaps {
    fn new(checks: &TileChecks) -> VerifiedMaps {
        let from_ptx = checks.accepted.iter().filter(|a| a.vouched.is_none()).map(|a| (a.node, a.param.clone())).collect();
        VerifiedMaps { from_ptx, builtins: Default::default() }
    }

    /// Whether node `v`'s tile map on its kernel param `p` holds by the code.
    fn holds(&self, plan: &Plan, kernels: &[CudaKernel], v: NodeId, p: usize) -> bool {
        let g = plan.graph();
        let NodeOp::Kernel { kernel, .. } = &g.node(v).op else { return false };
        if g.tile_map(v, p).is_none() {
            return false;
        }
        let k = &kernels[kernel.index()];
        if k.build.builtin {
            let initial = |s: ostinato::SlotId| g.slots()[s.index()].initial;
            return self.builtins.borrow_mut().check(g, v, &k.entry, &initial).is_ok();
        }
        self.from_ptx.contains(&(v, g.param_name(v, p)))
    }
}

/// The NVTX names of a replay and of each launch of `run_plan` (its node's, or its fused members'),
/// made only where a profiler listens.
fn nvtx_names(user_plan: &Plan, run_plan: &Plan, units: &[Vec<NodeId>]) -> Option<super::NvtxNames> {
    if !crate::nvtx::active() {
        return None;
    }
    let text = |s: String| std::ffi::CString::new(s.replace('\0', " ")).unwrap_or_default();
    let g = user_plan.graph();
    let launches = (0..run_plan.node_count())
        .map(|i| match units.get(i).map(Vec::as_slice) {
            Some([one]) => text(format!("ostinato {}", g.describe_node(*one))),
            Some(members) if !members.is_empty() => text(format!("ostinato fused: {} nodes from {}", members.len(), g.describe_node(members[0]))),
            _ => text(format!("ostinato {}", run_plan.graph().describe_node(NodeId(i as u32)))),
        })
        .collect();
    Some(super::NvtxNames { replay: text(format!("ostinato replay of plan {:016x} ({} nodes)", user_plan.fingerprint(), user_plan.node_count())), launches })
}

/// Root buffers a child graph uses (a collective's NCCL call, captured work: their pointers live in the
/// captured calls, so they are not rebindable), each with the node that uses it.
fn fixed_roots(plan: &Plan, lowering: &Lowering) -> Vec<(BufferId, String)> {
    lowering
        .launches
        .iter()
        .filter(|l| l.child_graph)
        .flat_map(|l| {
            let what = if l.callee == Callee::Collective { "a collective" } else { "captured work" };
            let user = format!("{what} ({})", plan.graph().describe_node(l.node));
            plan.graph().accesses(l.node).into_iter().map(move |a| (a.root, user.clone()))
        })
        .collect()
}
