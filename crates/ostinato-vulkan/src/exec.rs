//! The Vulkan backend: `Backend` + `Exec` over one command buffer recorded once ([`crate::commands`]
//! decides it), replayed by one submit each. A node whose scalars are all constants gets them as push
//! constants, recorded with its dispatch (where its kernel has a push-constant pipeline: WGSL). A node
//! that takes a slot reads its scalars from a mapped storage buffer (device-local where the device
//! can map such memory), one region per node: `set_slot` writes those bytes and re-records nothing.

use std::sync::Arc;

use ostinato::{check_bindings, check_slot, Arg, Backend, BufferBinding, BufferId, Exec, KernelRef, KernelSig, NodeId, NodeOp, Plan, Scalar, SlotId};

use crate::commands::{commands, Cmd};
use crate::ffi::{self, Buffer, Context};
use crate::kernel::VulkanKernel;
use crate::lanes::Segment;
use crate::record::{LaneRun, Recording, Submission};
use crate::VkError;

/// How a Vulkan exec uses the device's compute queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueMode {
    /// One command buffer on one queue (barriers order everything).
    #[default]
    One,
    /// Each plan lane on a queue of its own (as many as the device has, up to
    /// [`crate::MAX_QUEUES`]), cross-lane edges as timeline-semaphore waits ([`crate::lanes`]);
    /// one queue where the plan has one lane or the device one queue.
    Lanes,
}

/// The Vulkan backend on one device.
#[derive(Clone)]
pub struct VulkanBackend {
    ctx: Arc<Context>,
    queues: QueueMode,
}

/// Memory a user could bind to a buffer on Vulkan: none yet (every buffer is the exec's own), so
/// `BufferBinding::External` cannot be built for this backend.
#[derive(Debug)]
pub enum VulkanMemory {}

impl VulkanBackend {
    /// Opens the Vulkan device `OSTINATO_VK_DEVICE` names (a name substring), else the first with a
    /// compute queue, a discrete GPU first.
    pub fn open() -> Result<VulkanBackend, VkError> {
        Ok(VulkanBackend { ctx: Context::open()?, queues: QueueMode::default() })
    }
    pub fn with_context(ctx: Arc<Context>) -> VulkanBackend {
        VulkanBackend { ctx, queues: QueueMode::default() }
    }
    /// The same backend, its execs using the device's queues as `queues` says.
    pub fn with_queues(mut self, queues: QueueMode) -> VulkanBackend {
        self.queues = queues;
        self
    }
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Backend for VulkanBackend {
    type Kernel = VulkanKernel;
    type Memory = VulkanMemory;
    type Exec = VulkanExec;
    type Error = VkError;

    fn name(&self) -> &'static str {
        "vulkan"
    }

    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<VulkanKernel, VkError> {
        crate::kernel::bind(&self.ctx, sig, reference)
    }

    fn instantiate(&self, plan: &Plan, kernels: Vec<VulkanKernel>, buffers: Vec<BufferBinding<VulkanMemory>>) -> Result<VulkanExec, VkError> {
        VulkanExec::new(&self.ctx, plan, kernels, &buffers, self.queues)
    }
}

/// A plan instantiated on Vulkan.
pub struct VulkanExec {
    plan: Plan,
    ctx: Arc<Context>,
    _kernels: Vec<VulkanKernel>,
    roots: Vec<Option<Buffer>>,
    params: Buffer,
    /// Nodes that take their scalars as push constants.
    pushed: usize,
    /// Per slot: the byte offsets in `params` of every use, with the value's size.
    slot_uses: Vec<Vec<(usize, usize)>>,
    cmds: Vec<Cmd>,
    /// The lanes' segments where the exec runs its lanes on several queues.
    segments: Option<Vec<Vec<Segment>>>,
    recorded: Submission,
}

fn usage(m: String) -> VkError {
    VkError::Usage(m)
}

impl VulkanExec {
    fn new(
        ctx: &Arc<Context>,
        plan: &Plan,
        kernels: Vec<VulkanKernel>,
        buffers: &[BufferBinding<VulkanMemory>],
        queues: QueueMode,
    ) -> Result<VulkanExec, VkError> {
        check_bindings(plan, kernels.len(), buffers, |m| match *m {})?;
        let g = plan.graph();
        ostinato::check_single_device(plan, "vulkan").map_err(|e| VkError::NotApplicable(e.to_string()))?;
        if let Some(i) = g.nodes().iter().position(|n| matches!(n.op, NodeOp::Collective { .. })) {
            return Err(VkError::NotApplicable(format!(
                "{}: collectives run on CUDA with NCCL; the Vulkan backend has none",
                g.describe_node(NodeId(i as u32))
            )));
        }
        let align = ctx.min_storage_align;
        // Params: one aligned region per kernel node, initial scalars and slot values written in.
        let mut param_at = vec![None; plan.node_count()];
        let mut total = 0u64;
        for (i, node) in g.nodes().iter().enumerate() {
            if let NodeOp::Kernel { kernel, launch, args } = &node.op {
                let k = &kernels[kernel.index()];
                if let Some(wg) = k.workgroup {
                    if wg != launch.block {
                        return Err(VkError::NotApplicable(format!(
                            "node n{i} (kernel `{}`): launched with block {:?}, but the shader's workgroup size is {wg:?}",
                            k.name, launch.block
                        )));
                    }
                }
                for (p, a) in g.kernel(*kernel).params.iter().zip(args) {
                    if let Arg::Buffer(s) = a {
                        let (_, start, _) = g.root_extent(*s);
                        if start % align != 0 {
                            return Err(VkError::NotApplicable(format!(
                                "node n{i} (kernel `{}`): param `{}` starts at byte {start} of its buffer; this device binds storage buffers at multiples of {align} bytes",
                                k.name, p.name
                            )));
                        }
                    }
                }
                let slotted = args.iter().any(|a| matches!(a, Arg::Slot(_)));
                if k.params_bytes > 0 && (slotted || k.push.is_none()) {
                    param_at[i] = Some(total);
                    total += (k.params_bytes as u64).div_ceil(align) * align;
                }
            }
        }
        let mut params = Buffer::mapped_device_local(ctx, total.max(4))?;
        let mut slot_uses = vec![Vec::new(); g.slots().len()];
        {
            let bytes = params.bytes().ok_or_else(|| usage("the params buffer is not mapped".into()))?;
            for (i, node) in g.nodes().iter().enumerate() {
                let (NodeOp::Kernel { kernel, args, .. }, Some(base)) = (&node.op, param_at[i]) else { continue };
                let k = &kernels[kernel.index()];
                let scalars = args.iter().filter(|a| matches!(a, Arg::Scalar(_) | Arg::Slot(_)));
                for (a, off) in scalars.zip(&k.scalar_offsets) {
                    let at = (base + *off as u64) as usize;
                    let v = match a {
                        Arg::Scalar(v) => *v,
                        Arg::Slot(s) => {
                            slot_uses[s.index()].push((at, g.slots()[s.index()].ty.size()));
                            g.slots()[s.index()].initial
                        }
                        _ => continue,
                    };
                    let n = v.ty.size();
                    bytes[at..at + n].copy_from_slice(&v.bits.to_le_bytes()[..n]);
                }
            }
        }
        let mut roots = Vec::with_capacity(g.buffers().len());
        for (i, b) in g.buffers().iter().enumerate() {
            roots.push(if b.root.index() == i { Some(Buffer::new(ctx, b.size, false).map_err(|e| usage(format!("buffer `{}`: {e}", b.name)))?) } else { None });
        }
        let cmds = commands(plan);
        let root = |id: BufferId| roots[id.index()].as_ref().ok_or_else(|| usage(format!("buffer #{id} has no memory")));
        // Descriptor sets and storage-buffer descriptors the kernel nodes among `list` bind.
        let sets_for = |list: &[Cmd]| -> (u32, u32) {
            list.iter().fold((0, 0), |(s, d), c| match c {
                Cmd::Node(n) => match &g.node(*n).op {
                    NodeOp::Kernel { kernel, .. } => (s + 1, d + kernels[kernel.index()].pipeline.bindings),
                    _ => (s, d),
                },
                Cmd::Barrier { .. } => (s, d),
            })
        };
        let transfers = g.nodes().iter().any(|n| !matches!(n.op, NodeOp::Kernel { .. }));
        let mut pushed = 0;
        // Records `list` into `rec`; counts the dispatches that take push constants.
        let mut record = |rec: &Recording, list: &[Cmd]| -> Result<(), VkError> {
            for c in list {
                match c {
                    Cmd::Barrier { visible, .. } => {
                        let list: Vec<(&Buffer, u64, u64)> = visible.iter().map(|&(r, s, e)| root(r).map(|b| (b, s, e - s))).collect::<Result<_, _>>()?;
                        rec.barrier(&list, false);
                    }
                    Cmd::Node(n) => match &g.node(*n).op {
                        NodeOp::Kernel { kernel, launch, args } => {
                            let k = &kernels[kernel.index()];
                            let mut bindings = Vec::new();
                            for a in args {
                                if let Arg::Buffer(s) = a {
                                    let (r, start, end) = g.root_extent(*s);
                                    bindings.push((root(r)?, start, (end - start).max(4)));
                                }
                            }
                            match (param_at[n.index()], &k.push) {
                                (Some(at), _) => {
                                    bindings.push((&params, at, k.params_bytes as u64));
                                    rec.dispatch(&k.pipeline, &bindings, &[], launch.grid)?;
                                }
                                (None, Some(push)) if k.params_bytes > 0 => {
                                    let mut bytes = vec![0u8; push.push_bytes as usize];
                                    let scalars = args.iter().filter_map(|a| if let Arg::Scalar(v) = a { Some(v) } else { None });
                                    for (v, &off) in scalars.zip(&k.scalar_offsets) {
                                        let n = v.ty.size();
                                        bytes[off as usize..off as usize + n].copy_from_slice(&v.bits.to_le_bytes()[..n]);
                                    }
                                    rec.dispatch(push, &bindings, &bytes, launch.grid)?;
                                    pushed += 1;
                                }
                                (None, _) => rec.dispatch(&k.pipeline, &bindings, &[], launch.grid)?,
                            }
                        }
                        NodeOp::Copy { src, dst } => {
                            let ((sr, ss, se), (dr, ds, _)) = (g.root_extent(*src), g.root_extent(*dst));
                            if sr == dr && ss < ds + (se - ss) && ds < se {
                                return Err(usage(format!("node n{n}: a copy within buffer `{}` whose source and destination overlap", g.buffer(sr).name)));
                            }
                            rec.copy(root(sr)?, ss, root(dr)?, ds, se - ss);
                        }
                        NodeOp::Collective { .. } => return Err(VkError::NotApplicable(format!("node n{n}: a collective (refused above)"))),
                        NodeOp::Fill { dst, value } => {
                            let (r, s, e) = g.root_extent(*dst);
                            if s % 4 != 0 || (e - s) % 4 != 0 {
                                return Err(usage(format!(
                                    "node n{n}: a fill of bytes {s}..{e} of `{}`: Vulkan fills whole 4-byte words at 4-byte offsets",
                                    g.buffer(r).name
                                )));
                            }
                            rec.fill(root(r)?, s, e - s, *value);
                        }
                    },
                }
            }
            Ok(())
        };
        let lanes_used = queues == QueueMode::Lanes && ctx.queue_count() > 1 && plan.lanes().count() > 1;
        let (recorded, segments) = if lanes_used {
            let segs = crate::lanes::segments(plan);
            let mut lanes = Vec::with_capacity(segs.len());
            for lane in &segs {
                let mut bufs = Vec::with_capacity(lane.len());
                for (k, seg) in lane.iter().enumerate() {
                    let (sets, descriptors) = sets_for(&seg.cmds);
                    let rec = Recording::begin_segment(ctx, sets, descriptors, transfers, k == 0)?;
                    record(&rec, &seg.cmds)?;
                    bufs.push((rec.finish_segment(k + 1 == lane.len())?, seg.waits.clone()));
                }
                lanes.push(bufs);
            }
            (Submission::Lanes(LaneRun::new(ctx, lanes)?), Some(segs))
        } else {
            let (sets, descriptors) = sets_for(&cmds);
            let rec = Recording::begin(ctx, sets, descriptors, transfers)?;
            // Replays follow each other: the first barrier orders this one after the previous submission.
            rec.barrier(&[], true);
            record(&rec, &cmds)?;
            (Submission::Queue(rec.finish()?), None)
        };
        Ok(VulkanExec { plan: plan.clone(), ctx: ctx.clone(), _kernels: kernels, roots, params, pushed, slot_uses, cmds, segments, recorded })
    }

    /// The one-queue command list (for golden tests and `ostinato plan --explain`; what runs where the
    /// exec uses one queue).
    pub fn commands(&self) -> &[Cmd] {
        &self.cmds
    }

    /// The lanes' command segments, where the exec runs its lanes on several queues.
    pub fn segments(&self) -> Option<&[Vec<Segment>]> {
        self.segments.as_deref()
    }

    /// GPU µs of the last replay (the command buffer's timestamps), once it finished; `None` where the
    /// queue has no timestamps.
    pub fn last_gpu_us(&mut self) -> Result<Option<f64>, VkError> {
        self.recorded.wait()?;
        self.recorded.last_gpu_us()
    }

    /// How many dispatches take their scalars as push constants (the rest that have scalars read them
    /// from the params buffer).
    pub fn pushed_dispatches(&self) -> usize {
        self.pushed
    }

    pub fn device_name(&self) -> &str {
        &self.ctx.name
    }

    /// The root memory and offset of `buffer`'s `len` bytes at `offset`, checked.
    fn locate(&self, buffer: BufferId, offset: u64, len: u64) -> Result<(&Buffer, u64), VkError> {
        let g = self.plan.graph();
        let d = g.buffers().get(buffer.index()).ok_or_else(|| usage(format!("unknown buffer #{buffer}")))?;
        if offset.checked_add(len).is_none_or(|end| end > d.size) {
            return Err(usage(format!("buffer `{}`: bytes {offset}+{len} lie outside its {} bytes", d.name, d.size)));
        }
        let root = self.roots[d.root.index()].as_ref().ok_or_else(|| usage(format!("buffer `{}` has no memory", d.name)))?;
        Ok((root, d.root_offset + offset))
    }
}

impl Exec for VulkanExec {
    type Error = VkError;
    type Memory = VulkanMemory;

    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn replay(&mut self) -> Result<(), VkError> {
        self.recorded.submit()
    }

    fn wait(&mut self) -> Result<(), VkError> {
        self.recorded.wait()
    }

    /// Waits for submitted replays (they keep the value they were submitted with), then writes the
    /// value into every use's bytes of the params buffer.
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), VkError> {
        check_slot(&self.plan, slot, value)?;
        self.recorded.wait()?;
        let bytes = self.params.bytes().ok_or_else(|| usage("the params buffer is not mapped".into()))?;
        for &(at, n) in &self.slot_uses[slot.index()] {
            bytes[at..at + n].copy_from_slice(&value.bits.to_le_bytes()[..n]);
        }
        Ok(())
    }

    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), VkError> {
        self.recorded.wait()?;
        let (root, at) = self.locate(buffer, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let mut staging = Buffer::new(&self.ctx, data.len() as u64, true)?;
        staging.bytes().ok_or_else(|| usage("staging not mapped".into()))?[..data.len()].copy_from_slice(data);
        ffi::copy(&self.ctx, &staging, 0, root, at, data.len() as u64)
    }

    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), VkError> {
        self.recorded.wait()?;
        let (root, at) = self.locate(buffer, offset, out.len() as u64)?;
        if out.is_empty() {
            return Ok(());
        }
        let mut staging = Buffer::new(&self.ctx, out.len() as u64, true)?;
        ffi::copy(&self.ctx, root, at, &staging, 0, out.len() as u64)?;
        out.copy_from_slice(&staging.bytes().ok_or_else(|| usage("staging not mapped".into()))?[..out.len()]);
        Ok(())
    }

    fn rebind(&mut self, _buffer: BufferId, memory: VulkanMemory) -> Result<(), VkError> {
        match memory {}
    }
}
