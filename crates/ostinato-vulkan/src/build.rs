//! Building a [`VulkanExec`] from a plan, in named stages: check what the exec can run, fuse chains
//! ([`crate::fusion`]), lay out each node's bindings and params, write the params buffer, allocate
//! the root buffers, record the command buffer(s).

use std::sync::Arc;

use ostinato::{check_bindings, Arg, BufferBinding, BufferId, NodeId, NodeOp, Plan, Scalar};

use crate::commands::{commands, Cmd};
use crate::error::MisalignedSlice;
use crate::exec::{Resources, Submission, VulkanExec, VulkanMemory};
use crate::ffi::{Buffer, Context, Pipeline};
use crate::fusion::{FusedDispatch, FusedPlan};
use crate::kernel::VulkanKernel;
use crate::lane_run::LaneRun;
use crate::lanes::LanePlan;
use crate::options::{ReplayOrdering, VulkanOptions};
use crate::record::{Finished, Recording};
use crate::submit::QueueRun;
use crate::{QueueMode, VkError};

/// Where a kernel node's params block lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Params {
    /// The kernel has no params block.
    None,
    /// Push constants, these bytes (every scalar a constant).
    Pushed(Vec<u8>),
    /// This byte offset of the params buffer (the node takes a slot, or its kernel has no push build).
    Buffer(u64),
}

/// Per slot: the byte offsets in the params buffer of every use, with the value's size.
pub(crate) type SlotUses = Vec<Vec<(usize, usize)>>;

/// Where an exec runs: its lanes on several queues (lane `l` on queue `l % queues`), or one queue,
/// with the reason where it was asked for lanes.
pub(crate) enum QueueUse {
    One { why: Option<String> },
    Lanes { plan: LanePlan, queues: usize },
}

/// Where an exec of `plan` runs with `options`; `lane_queues`: how many of the device's queues its
/// lanes use, where the backend was told (else all of them).
pub(crate) fn queue_use(ctx: &Context, plan: &Plan, options: VulkanOptions, lane_queues: Option<usize>) -> QueueUse {
    if options.queues != QueueMode::Lanes {
        return QueueUse::One { why: None };
    }
    let why = if plan.lanes().count() < 2 {
        Some("the plan has one lane, so there is nothing to run beside it".to_string())
    } else if !ctx.timeline {
        Some(format!("{} has no timeline semaphores, which order lanes on separate queues", ctx.name))
    } else if lane_queues.is_none() && ctx.queue_count() < 2 {
        Some(format!("{} has one compute queue", ctx.name))
    } else {
        None
    };
    match why {
        Some(why) => QueueUse::One { why: Some(format!("lanes asked for, one queue used: {why}")) },
        None => QueueUse::Lanes { plan: crate::lanes::lower(plan), queues: lane_queues.unwrap_or(ctx.queue_count()).clamp(1, ctx.queue_count()) },
    }
}

/// A kernel node's bindings and params.
#[derive(Clone, Debug)]
pub(crate) struct NodeLayout {
    /// Per buffer binding: the root, the aligned byte the binding starts at, and its range.
    pub(crate) bindings: Vec<(BufferId, u64, u64)>,
    pub(crate) params: Params,
    /// The params block's bytes as first written: scalars (slots at their initial values), then the
    /// bindings' element offsets.
    pub(crate) block: Vec<u8>,
    /// Byte offsets in `block` of each slot use, with its size.
    pub(crate) slot_uses: Vec<(ostinato::SlotId, usize, usize)>,
    /// The params block's bindings after the buffers': (offset in the block, range) each (one, the
    /// whole block, but for a fused dispatch: one per body function).
    pub(crate) params_bindings: Vec<(u64, u64)>,
    /// The kernel's pipeline as written ([`crate::kernel::AsWritten`]) where the node runs it (every
    /// element offset 0): pushed, its scalars alone; else `None`, the kernel's own pipelines.
    pub(crate) as_written: Option<Arc<Pipeline>>,
}

/// A kernel node's params block with its scalars written (slots at their initial values), and where
/// each slot is used in it.
#[allow(clippy::type_complexity)]
pub(crate) fn scalars_block(
    g: &ostinato::Graph,
    args: &[Arg],
    k: &VulkanKernel,
    n: NodeId,
) -> Result<(Vec<u8>, Vec<(ostinato::SlotId, usize, usize)>), VkError> {
    let mut block = vec![0u8; k.params_bytes as usize];
    let mut slot_uses = Vec::new();
    let scalars: Vec<&Arg> = args.iter().filter(|a| matches!(a, Arg::Scalar(_) | Arg::Slot(_))).collect();
    if scalars.len() != k.scalar_offsets.len() {
        return Err(VkError::Internal {
            op: "layout",
            reason: format!("node n{n}: {} scalars, the kernel's layout has {}", scalars.len(), k.scalar_offsets.len()),
        });
    }
    for (a, &at) in scalars.into_iter().zip(&k.scalar_offsets) {
        let at = at as usize;
        let v: Scalar = match a {
            Arg::Slot(s) => {
                let slot = &g.slots()[s.index()];
                slot_uses.push((*s, at, slot.ty.size()));
                slot.initial
            }
            Arg::Scalar(v) => *v,
            _ => unreachable!("only scalars and slots are left"),
        };
        let size = v.ty.size();
        block[at..at + size].copy_from_slice(&v.bits.to_le_bytes()[..size]);
    }
    Ok((block, slot_uses))
}

/// Builds the exec of `plan`.
pub(crate) fn build(
    ctx: &Arc<Context>,
    plan: &Plan,
    kernels: Vec<VulkanKernel>,
    buffers: &[BufferBinding<VulkanMemory>],
    options: VulkanOptions,
    lane_queues: Option<usize>,
) -> Result<VulkanExec, VkError> {
    check_bindings(plan, kernels.len(), buffers, |m| m.0.size())?;
    for (decl, b) in plan.graph().buffers().iter().zip(buffers) {
        if let BufferBinding::External(m) = b {
            check_same_device(ctx, decl, m)?;
        }
    }
    let user: Vec<_> = buffers.iter().map(|b| if let BufferBinding::External(m) = b { Some(extent(&m.0)) } else { None }).collect();
    ostinato::check_disjoint_roots(plan, &user)?;
    check_plan(ctx, plan, &kernels)?;
    // The tile checks and the fused modules' imports recurse over the kernels' expressions: on a stack
    // of their own, whatever thread instantiates.
    let (tile_maps, fused) = crate::wgsl::with_stack(|| (crate::fusion::map_uses(plan, &kernels), crate::fusion::fuse(ctx, plan, &kernels, options.fusion)))
        .map_err(|reason| VkError::Internal { op: "fusion", reason })?;
    let fused = fused?;
    let (run_plan, kernels, dispatches, fused_nodes, fused_barriers, units) = match fused {
        Some(FusedPlan { plan, kernels: all, dispatches, fused_nodes, fused_barriers, units }) => {
            (Some(plan), all, dispatches, fused_nodes, fused_barriers, units)
        }
        None => (None, kernels, Vec::new(), 0, 0, ostinato::trace::unit_per_node(plan.node_count())),
    };
    let runs = run_plan.as_ref().unwrap_or(plan);
    let mut layouts = layout_nodes(ctx, runs, &kernels, &dispatches, options.as_written)?;
    let (params, slot_uses) = write_params(ctx, runs, &mut layouts)?;
    let roots = allocate_roots(ctx, runs, buffers, options.wait_timeout)?;
    let cmds = commands(runs);
    let rec = Recorder { ctx, plan: runs, kernels: &kernels, layouts: &layouts, roots: &roots, params: &params };
    let queues = queue_use(ctx, runs, options, lane_queues);
    let (recorded, pushed) = rec.record(&cmds, options, &queues)?;
    Ok(VulkanExec {
        plan: plan.clone(),
        run_plan,
        ctx: ctx.clone(),
        options,
        fault: None,
        pushed,
        fused_nodes,
        fused_barriers,
        tile_maps,
        slot_uses,
        cmds,
        queues,
        units,
        res: Some(Resources { kernels, roots, params, recorded, layouts, traced: None, staging: Default::default() }),
    })
}

/// Refuses what the exec cannot run, naming the node: a buffer on another device, a collective, a
/// launch unlike the shader's workgroup, a grid or workgroup past the device's limits.
fn check_plan(ctx: &Context, plan: &Plan, kernels: &[VulkanKernel]) -> Result<(), VkError> {
    let g = plan.graph();
    ostinato::check_single_device(plan, "vulkan")?;
    let lim = &ctx.limits;
    for (i, node) in g.nodes().iter().enumerate() {
        let what = || g.describe_node(NodeId(i as u32));
        let NodeOp::Kernel { kernel, launch, .. } = &node.op else {
            if matches!(node.op, NodeOp::Collective { .. }) {
                return Err(VkError::NotApplicable(format!("{}: collectives run on CUDA with NCCL; the Vulkan backend has none", what())));
            }
            continue;
        };
        let k = &kernels[kernel.index()];
        if let Some(wg) = k.workgroup {
            if wg != launch.block {
                return Err(VkError::NotApplicable(format!(
                    "node n{i} (kernel `{}`): launched with block {:?}, but the shader's workgroup size is {wg:?}",
                    k.name, launch.block
                )));
            }
        }
        let wg = k.workgroup.unwrap_or(launch.block);
        let past = |what_: &str| VkError::NotApplicable(format!("{}: {what_} (this device: {})", what(), ctx.name));
        if (0..3).any(|d| launch.grid[d] > lim.workgroup_count[d]) {
            return Err(past(&format!("grid {:?} exceeds maxComputeWorkGroupCount {:?}", launch.grid, lim.workgroup_count)));
        }
        lim.check_workgroup(wg).map_err(|why| past(&why))?;
    }
    Ok(())
}

/// Where a binding starts: the largest byte at or below `start` that the device can bind at and from
/// which `start` lies a whole number of `element`-byte elements; with that number.
pub(crate) fn binding_start(start: u64, element: u64, align: u64) -> Option<(u64, u64)> {
    let element = element.max(1);
    // Candidates step down by whole elements; a multiple of `align` comes within `align` steps.
    (0..=align).map(|k| k * element).take_while(|&back| back <= start).map(|back| start - back).find(|a| a % align == 0).map(|a| (a, (start - a) / element))
}

/// Each kernel node's bindings and params block (fused dispatches' from `dispatches`); `as_written`:
/// whether a node that may run its kernel as written does ([`crate::VulkanOptions::as_written`]).
fn layout_nodes(
    ctx: &Arc<Context>,
    plan: &Plan,
    kernels: &[VulkanKernel],
    dispatches: &[Option<FusedDispatch>],
    as_written: bool,
) -> Result<Vec<Option<NodeLayout>>, VkError> {
    let g = plan.graph();
    let mut out = Vec::with_capacity(plan.node_count());
    for (i, node) in g.nodes().iter().enumerate() {
        let NodeOp::Kernel { kernel, args, .. } = &node.op else {
            out.push(None);
            continue;
        };
        if let Some(Some(d)) = dispatches.get(i) {
            out.push(Some(d.layout.clone()));
            continue;
        }
        out.push(Some(layout_kernel_node(ctx, plan, NodeId(i as u32), &kernels[kernel.index()], args, as_written)?));
    }
    Ok(out)
}

/// One kernel node's layout: each buffer slice bound from the aligned byte at or below its start, the
/// rest as an element offset in the params block; a node whose element offsets are all 0 runs the
/// kernel as written where the kernel keeps that module and `as_written` allows.
fn layout_kernel_node(ctx: &Arc<Context>, plan: &Plan, n: NodeId, k: &VulkanKernel, args: &[Arg], as_written: bool) -> Result<NodeLayout, VkError> {
    let g = plan.graph();
    let sig = g.kernel(match &g.node(n).op {
        NodeOp::Kernel { kernel, .. } => *kernel,
        _ => unreachable!("a kernel node"),
    });
    let align = ctx.min_storage_align;
    let (mut block, slot_uses) = scalars_block(g, args, k, n)?;
    let mut bindings = Vec::new();
    // Whether every binding starts on a boundary (no element offset): the node may run the kernel as written.
    let mut offsets_zero = true;
    let buffers = sig.params.iter().zip(args).filter_map(|(p, a)| if let Arg::Buffer(s) = a { Some((p, *s)) } else { None });
    for (b, (p, s)) in buffers.enumerate() {
        let (root, start, end) = g.root_extent(s);
        let info = &k.bindings[b];
        let misaligned = || {
            VkError::ElementOffset(Box::new(MisalignedSlice {
                node: format!("n{n}"),
                kernel: k.name.clone(),
                param: p.name.clone(),
                element: info.element.clone(),
                size: info.element_size,
                start,
                align,
            }))
        };
        let (at, off) = binding_start(start, info.element_size as u64, align).ok_or_else(misaligned)?;
        if off > 0 {
            offsets_zero = false;
            if let Err(why) = &info.offsets {
                return Err(VkError::NotApplicable(format!(
                    "node n{n} (kernel `{}`): param `{}` starts at byte {start} of its buffer, {off} elements past a {align}-byte binding boundary, but binding {b} cannot take an element offset: {why}",
                    k.name, p.name
                )));
            }
        }
        if let Some(base) = k.offsets_at {
            let o = base as usize + 4 * b;
            block[o..o + 4].copy_from_slice(&(off as u32).to_le_bytes());
        }
        if end - at > ctx.limits.storage_range as u64 {
            return Err(VkError::NotApplicable(format!(
                "node n{n} (kernel `{}`): param `{}` spans {} bytes, past maxStorageBufferRange {} of {}",
                k.name,
                p.name,
                end - at,
                ctx.limits.storage_range,
                ctx.name
            )));
        }
        bindings.push((root, at, (end - at).max(4)));
    }
    let slotted = args.iter().any(|a| matches!(a, Arg::Slot(_)));
    let params = match (k.params_bytes, &k.push) {
        (0, _) => Params::None,
        (_, Some(_)) if !slotted => Params::Pushed(block.clone()),
        _ => Params::Buffer(0),
    };
    let (params, as_written) = match (&k.as_written, params) {
        (Some(w), Params::Pushed(bytes)) if as_written && offsets_zero => {
            // The module as written takes the scalars alone.
            (Params::Pushed(bytes[..w.scalar_bytes as usize].to_vec()), Some(w.pipeline(ctx, true)?))
        }
        (Some(w), Params::Buffer(at)) if as_written && offsets_zero => (Params::Buffer(at), Some(w.pipeline(ctx, false)?)),
        (_, params) => (params, None),
    };
    let params_bindings = vec![(0, block.len() as u64)];
    Ok(NodeLayout { bindings, params, block, slot_uses, params_bindings, as_written })
}

/// The params buffer: each node's block that lives there, at the device's storage alignment; and per
/// slot, the byte offsets of its uses.
fn write_params(ctx: &Arc<Context>, plan: &Plan, layouts: &mut [Option<NodeLayout>]) -> Result<(Buffer, SlotUses), VkError> {
    let align = ctx.min_storage_align;
    let mut total = 0u64;
    for l in layouts.iter_mut().flatten() {
        if let Params::Buffer(at) = &mut l.params {
            *at = total;
            total += (l.block.len() as u64).div_ceil(align) * align;
        }
    }
    let mut params = Buffer::mapped_device_local(ctx, total.max(4))?;
    let mut slot_uses = vec![Vec::new(); plan.graph().slots().len()];
    let bytes = params.bytes().ok_or_else(|| VkError::Internal { op: "instantiate", reason: "the params buffer is not mapped".into() })?;
    for l in layouts.iter().flatten() {
        if let Params::Buffer(at) = l.params {
            let at = at as usize;
            bytes[at..at + l.block.len()].copy_from_slice(&l.block);
            for &(s, o, n) in &l.slot_uses {
                slot_uses[s.index()].push((at + o, n));
            }
        }
    }
    Ok((params, slot_uses))
}

/// A device buffer per root buffer of the plan: the user's memory where bound to it (as it is), else
/// the exec's own, zeroed (device memory comes back from the driver holding whatever it held: a
/// buffer no node writes reads as zeros, as on the host; `ffi::zero`, one submission waited for
/// `timeout` at most).
fn allocate_roots(
    ctx: &Arc<Context>,
    plan: &Plan,
    bindings: &[BufferBinding<VulkanMemory>],
    timeout: Option<std::time::Duration>,
) -> Result<Vec<Option<Arc<Buffer>>>, VkError> {
    let g = plan.graph();
    let mut roots = Vec::with_capacity(g.buffers().len());
    let mut owned = Vec::new();
    for (i, (b, binding)) in g.buffers().iter().zip(bindings).enumerate() {
        roots.push(match binding {
            _ if b.root.index() != i => None,
            BufferBinding::External(m) => Some(m.0.clone()),
            BufferBinding::Allocate => {
                let mem = Arc::new(Buffer::new(ctx, b.size, false)?);
                owned.push(mem.clone());
                Some(mem)
            }
        });
    }
    match crate::ffi::zero(ctx, &owned.iter().map(|b| &**b).collect::<Vec<_>>(), timeout) {
        Ok(()) => Ok(roots),
        Err(e) if e.faults() => {
            // The fills may still run: leak the buffers rather than free them under them.
            std::mem::forget(owned);
            std::mem::forget(roots);
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// Refuses user memory of another device than the exec's for `decl` (its size the core checks:
/// `check_bindings`, `check_rebind`).
pub(crate) fn check_same_device(ctx: &Arc<Context>, decl: &ostinato::BufferDecl, m: &VulkanMemory) -> Result<(), VkError> {
    if !m.0.is_on(ctx) {
        return Err(VkError::Argument(format!("buffer `{}`: the memory bound to it is a buffer of another Vulkan device than {}", decl.name, ctx.name)));
    }
    Ok(())
}

/// Where a buffer's bytes lie: its own handle's space (two bindings overlap only on one `VkBuffer`).
fn extent(b: &Buffer) -> ostinato::MemoryExtent {
    ostinato::MemoryExtent { space: ash::vk::Handle::as_raw(b.handle()), start: 0, len: b.size() }
}

/// Records the exec's command buffers again with root `buffer` on `memory`; the exec is left as it
/// was where recording fails. Its replays have completed (the caller waited).
pub(crate) fn rerecord(exec: &mut VulkanExec, buffer: BufferId, memory: Arc<Buffer>) -> Result<(), VkError> {
    let runs = exec.run_plan.as_ref().unwrap_or(&exec.plan);
    let res = exec.res.as_mut().ok_or_else(|| VkError::State { op: "rebind", reason: "the exec is being dropped".into() })?;
    let mut roots = res.roots.clone();
    roots[buffer.index()] = Some(memory);
    let extents: Vec<_> = roots.iter().map(|r| r.as_deref().map(extent)).collect();
    ostinato::check_disjoint_roots(runs, &extents)?;
    let rec = Recorder { ctx: &exec.ctx, plan: runs, kernels: &res.kernels, layouts: &res.layouts, roots: &roots, params: &res.params };
    let (recorded, _) = rec.record(&exec.cmds, exec.options, &exec.queues)?;
    res.recorded = recorded;
    res.roots = roots;
    res.traced = None;
    Ok(())
}

/// What recording needs of the exec being built (or of a built exec, for its traced recording).
pub(crate) struct Recorder<'a> {
    pub(crate) ctx: &'a Arc<Context>,
    pub(crate) plan: &'a Plan,
    pub(crate) kernels: &'a [VulkanKernel],
    pub(crate) layouts: &'a [Option<NodeLayout>],
    pub(crate) roots: &'a [Option<Arc<Buffer>>],
    pub(crate) params: &'a Buffer,
}

impl Recorder<'_> {
    fn root(&self, id: BufferId) -> Result<&Buffer, VkError> {
        self.roots[id.index()].as_deref().ok_or_else(|| VkError::Internal { op: "record", reason: format!("buffer #{id} has no memory") })
    }

    /// Descriptor sets and storage-buffer descriptors the kernel nodes among `list` bind.
    fn sets_for(&self, list: &[Cmd]) -> (u32, u32) {
        list.iter().fold((0, 0), |(s, d), c| match c {
            Cmd::Node(n) => match &self.layouts[n.index()] {
                Some(l) => (s + 1, d + l.bindings.len() as u32 + if matches!(l.params, Params::Buffer(_)) { l.params_bindings.len() as u32 } else { 0 }),
                None => (s, d),
            },
            Cmd::Barrier { .. } => (s, d),
        })
    }

    /// Whether the plan has copies or fills (barriers then span the transfer stage).
    fn transfers(&self) -> bool {
        self.plan.graph().nodes().iter().any(|n| !matches!(n.op, NodeOp::Kernel { .. }))
    }

    /// Records the plan's command list as the exec's submission (its lanes' segments where `queues`
    /// says so); returns it and how many dispatches take push constants.
    fn record(&self, cmds: &[Cmd], options: VulkanOptions, queues: &QueueUse) -> Result<(Submission, usize), VkError> {
        let ctx = self.ctx;
        if let QueueUse::Lanes { plan, queues } = queues {
            let (mut lanes, mut pushed) = (Vec::with_capacity(plan.lanes.len()), 0);
            for lane in &plan.lanes {
                let mut bufs = Vec::with_capacity(lane.len());
                for (k, seg) in lane.iter().enumerate() {
                    let (sets, descriptors) = self.sets_for(&seg.cmds);
                    let rec = Recording::begin_segment(ctx, sets, descriptors, self.transfers(), k == 0)?;
                    pushed += self.record_list(&rec, &seg.cmds)?;
                    bufs.push(rec.finish_segment(k + 1 == lane.len())?);
                }
                lanes.push(bufs);
            }
            return Ok((Submission::Lanes(LaneRun::new(ctx, plan, lanes, *queues)?), pushed));
        }
        let ordering = if options.ordering == ReplayOrdering::Timeline && !ctx.timeline { ReplayOrdering::Barrier } else { options.ordering };
        let (recordings, barrier, events, pushed) = self.record_one_queue(cmds, ordering)?;
        Ok((Submission::Queue(QueueRun::new(ctx, ordering, recordings, barrier, events)?), pushed))
    }

    /// The one-queue recordings for `ordering`: the command buffer (two, waiting on and setting events,
    /// for events; with a leading barrier for barrier), the one-barrier buffer for skip, the events.
    #[allow(clippy::type_complexity)]
    fn record_one_queue(&self, cmds: &[Cmd], ordering: ReplayOrdering) -> Result<(Vec<Finished>, Option<Finished>, Vec<ash::vk::Event>, usize), VkError> {
        let (sets, descriptors) = self.sets_for(cmds);
        let transfers = self.transfers();
        let events = if ordering == ReplayOrdering::Events { vec![self.ctx.event()?, self.ctx.event()?] } else { Vec::new() };
        let events_guard = EventsGuard { ctx: self.ctx, events };
        let mut recordings = Vec::new();
        let mut pushed = 0;
        for p in 0..if ordering == ReplayOrdering::Events { 2 } else { 1 } {
            let rec = Recording::begin(self.ctx, sets, descriptors, transfers)?;
            match ordering {
                ReplayOrdering::Barrier => rec.barrier(&[], true),
                ReplayOrdering::Events => rec.wait_event(events_guard.events[1 - p]),
                ReplayOrdering::Skip | ReplayOrdering::Timeline => {}
            }
            pushed = self.record_list(&rec, cmds)?;
            if ordering == ReplayOrdering::Events {
                rec.set_event(events_guard.events[p]);
            }
            recordings.push(rec.finish()?);
        }
        if ordering == ReplayOrdering::Events {
            // Replay 1 waits on the event the second recording sets: set it once beforehand from a
            // command buffer with the same stage mask (a wait's source stages must be exactly the
            // setters'; the host's `vkSetEvent` would make them HOST).
            let primer = Recording::begin_segment(self.ctx, 0, 0, transfers, false)?;
            primer.set_event(events_guard.events[1]);
            let primer = primer.finish_segment(false)?;
            crate::ffi::submit_once(self.ctx, primer.cmd, Some(crate::DEFAULT_WAIT_TIMEOUT))?;
        }
        let barrier = if ordering == ReplayOrdering::Skip {
            let rec = Recording::begin_segment(self.ctx, 0, 0, transfers, false)?;
            rec.barrier(&[], true);
            Some(rec.finish_segment(false)?)
        } else {
            None
        };
        Ok((recordings, barrier, events_guard.into_inner(), pushed))
    }

    /// The one-queue command list recorded once more with a timestamp before and after every node
    /// (queries `2k` and `2k + 1` for the `k`-th node of `cmds`): the command buffer a traced replay
    /// submits in place of the exec's own, which stays as it was.
    pub(crate) fn record_traced(&self, cmds: &[Cmd]) -> Result<Finished, VkError> {
        let (sets, descriptors) = self.sets_for(cmds);
        let nodes = cmds.iter().filter(|c| matches!(c, Cmd::Node(_))).count() as u32;
        let rec = Recording::begin_traced(self.ctx, sets, descriptors, self.transfers(), 2 * nodes)?;
        self.record_stamped(&rec, cmds, true)?;
        rec.finish_segment(false)
    }

    /// Records `list` into `rec`; returns how many dispatches take push constants.
    fn record_list(&self, rec: &Recording, list: &[Cmd]) -> Result<usize, VkError> {
        self.record_stamped(rec, list, false)
    }

    /// Records `list` into `rec`, each node between two timestamps where `stamped`; returns how many
    /// dispatches take push constants.
    fn record_stamped(&self, rec: &Recording, list: &[Cmd], stamped: bool) -> Result<usize, VkError> {
        let g = self.plan.graph();
        let mut pushed = 0;
        let mut k = 0u32;
        for c in list {
            if stamped && matches!(c, Cmd::Node(_)) {
                rec.stamp(2 * k, false);
            }
            match c {
                Cmd::Barrier { visible, .. } => {
                    let list: Vec<(&Buffer, u64, u64)> = visible.iter().map(|&(r, s, e)| self.root(r).map(|b| (b, s, e - s))).collect::<Result<_, _>>()?;
                    rec.barrier(&list, false);
                }
                Cmd::Node(n) => match &g.node(*n).op {
                    NodeOp::Kernel { kernel, launch, .. } => {
                        let (k, l) = (&self.kernels[kernel.index()], self.layouts[n.index()].as_ref());
                        let l = l.ok_or_else(|| VkError::Internal { op: "record", reason: format!("node n{n} has no layout") })?;
                        let mut bindings: Vec<(&Buffer, u64, u64)> =
                            l.bindings.iter().map(|&(r, at, range)| self.root(r).map(|b| (b, at, range))).collect::<Result<_, _>>()?;
                        match &l.params {
                            Params::Buffer(at) => {
                                bindings.extend(l.params_bindings.iter().map(|&(o, range)| (self.params, at + o, range)));
                                rec.dispatch(l.as_written.as_ref().unwrap_or(&k.pipeline), &bindings, &[], launch.grid)?;
                            }
                            Params::Pushed(bytes) => {
                                let push = l
                                    .as_written
                                    .as_ref()
                                    .or(k.push.as_ref())
                                    .ok_or_else(|| VkError::Internal { op: "record", reason: format!("node n{n}: no push-constant pipeline") })?;
                                let mut words = bytes.clone();
                                words.resize(bytes.len().div_ceil(4) * 4, 0);
                                rec.dispatch(push, &bindings, &words, launch.grid)?;
                                pushed += 1;
                            }
                            Params::None => rec.dispatch(&k.pipeline, &bindings, &[], launch.grid)?,
                        }
                    }
                    NodeOp::Copy { src, dst } => {
                        let ((sr, ss, se), (dr, ds, _)) = (g.root_extent(*src), g.root_extent(*dst));
                        if sr == dr && ss < ds + (se - ss) && ds < se {
                            return Err(VkError::Argument(format!(
                                "node n{n}: a copy within buffer `{}` whose source and destination overlap",
                                g.buffer(sr).name
                            )));
                        }
                        rec.copy(self.root(sr)?, ss, self.root(dr)?, ds, se - ss);
                    }
                    NodeOp::Collective { .. } => return Err(VkError::NotApplicable(format!("node n{n}: a collective (refused above)"))),
                    NodeOp::Fill { dst, value } => {
                        let (r, s, e) = g.root_extent(*dst);
                        if s % 4 != 0 || (e - s) % 4 != 0 {
                            return Err(VkError::Argument(format!(
                                "node n{n}: a fill of bytes {s}..{e} of `{}`: Vulkan fills whole 4-byte words at 4-byte offsets",
                                g.buffer(r).name
                            )));
                        }
                        rec.fill(self.root(r)?, s, e - s, *value);
                    }
                },
            }
            if stamped && matches!(c, Cmd::Node(_)) {
                rec.stamp(2 * k + 1, true);
                k += 1;
            }
        }
        Ok(pushed)
    }
}

/// Events made for a recording: destroyed if recording fails before a [`QueueRun`] owns them.
struct EventsGuard<'a> {
    ctx: &'a Context,
    events: Vec<ash::vk::Event>,
}

impl EventsGuard<'_> {
    fn into_inner(mut self) -> Vec<ash::vk::Event> {
        std::mem::take(&mut self.events)
    }
}

impl Drop for EventsGuard<'_> {
    fn drop(&mut self) {
        for e in self.events.drain(..) {
            self.ctx.destroy_event(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::binding_start;

    #[test]
    fn a_binding_starts_at_the_aligned_byte_a_whole_number_of_elements_below() {
        assert_eq!(binding_start(260, 4, 16), Some((256, 1)));
        assert_eq!(binding_start(256, 4, 16), Some((256, 0)));
        assert_eq!(binding_start(44, 4, 256), Some((0, 11)));
        // 12-byte elements at 16-byte alignment: 24 is 2 elements past 0, 16 is 0 past 16.
        assert_eq!(binding_start(24, 12, 16), Some((0, 2)));
        assert_eq!(binding_start(16, 12, 16), Some((16, 0)));
        // An 8-byte element starting at byte 4: no aligned byte lies a whole number of elements below.
        assert_eq!(binding_start(4, 8, 16), None);
        assert_eq!(binding_start(20, 8, 16), None);
        assert_eq!(binding_start(2, 4, 16), None);
        for start in (0..4096u64).step_by(4) {
            let (at, off) = binding_start(start, 4, 256).unwrap();
            assert!(at % 256 == 0 && at + 4 * off == start && start - at < 256);
        }
    }
}
