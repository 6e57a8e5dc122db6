//! The Vulkan backend: `Backend` + `Exec` over one command buffer recorded once ([`crate::commands`]
//! decides it), replayed by one submit each. A node whose scalars are all constants gets them as push
//! constants, recorded with its dispatch (where its kernel has a push-constant pipeline: WGSL). A node
//! that takes a slot reads its scalars from a mapped storage buffer (device-local where the device
//! can map such memory), one region per node: `set_slot` writes those bytes and re-records nothing.
//! How the exec is built is `build.rs`; how a replay is submitted and ordered, `submit.rs`.
//!
//! A wait is bounded by the exec's deadline (`VulkanOptions::wait_timeout`). A wait that times out, or
//! a lost device, faults the exec: it refuses every later call, and its drop leaks what the device may
//! still use rather than free it under running work. A healthy exec's drop waits for its replays
//! (within the deadline), then for the driver to be done with every submission on every queue of its
//! device (`Context::drain`), before it destroys anything. The memory an exec allocates is zeroed at
//! instantiate; memory the user binds is used as it is.

use std::sync::Arc;

use ostinato::{check_slot, Backend, BufferBinding, BufferId, Exec, KernelRef, KernelSig, Plan, Scalar, SlotId};

use crate::build::QueueUse;
use crate::commands::Cmd;
use crate::ffi::{Buffer, Context};
use crate::kernel::VulkanKernel;
use crate::lane_run::LaneRun;
use crate::lanes::{LaneCounts, LanePlan};
use crate::options::VulkanOptions;
use crate::submit::QueueRun;
use crate::{QueueMode, VkError};

/// The Vulkan backend on one device.
#[derive(Clone)]
pub struct VulkanBackend {
    ctx: Arc<Context>,
    options: VulkanOptions,
    /// How many of the device's queues lanes run on, where told (else all of them).
    lane_queues: Option<usize>,
}

/// Memory a user binds a root buffer to (`BufferBinding::External`, [`Exec::rebind`]): a [`Buffer`] of
/// the exec's device and of exactly the root's size, shared: the exec holds it while it may use it.
/// Its bytes are the user's: an exec never zeroes it (only the memory an exec allocates is zeroed at
/// instantiate) and writes it only where a node or `write_buffer` does.
/// Several execs (and the user's own command buffers) may share one; the user orders their own work
/// on it against the execs' replays (each replay's submission completes before `wait` returns). A
/// `VkBuffer` the user created on the device (`Context::device()`) becomes one through
/// [`Buffer::borrowed`].
#[derive(Clone)]
pub struct VulkanMemory(pub Arc<Buffer>);

impl std::fmt::Debug for VulkanMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VulkanMemory({:?}, {} bytes)", self.0.handle(), self.0.size())
    }
}

impl VulkanBackend {
    /// Opens the Vulkan device `OSTINATO_VK_DEVICE` names (a name substring), else the first with a
    /// compute queue, a discrete GPU first.
    pub fn open() -> Result<VulkanBackend, VkError> {
        Ok(Self::with_context(Context::open()?))
    }
    pub fn with_context(ctx: Arc<Context>) -> VulkanBackend {
        VulkanBackend { ctx, options: VulkanOptions::default(), lane_queues: None }
    }
    /// The same backend, its execs' lanes ([`QueueMode::Lanes`]) sharing `queues` of the device's
    /// queues (lane `l` on queue `l % queues`; at least one, at most the device's): each lane still
    /// submits its own segments, ordered by its own semaphore. One queue runs the lanes' ordering
    /// on a device of one queue, as tests do on lavapipe: correct, never faster than one command
    /// buffer.
    pub fn with_lane_queues(mut self, queues: usize) -> VulkanBackend {
        self.lane_queues = Some(queues.max(1));
        self
    }
    /// The same backend, its execs made with `options`.
    pub fn with_options(mut self, options: VulkanOptions) -> VulkanBackend {
        self.options = options;
        self
    }
    /// The same backend, its execs using the device's queues as `queues` says.
    pub fn with_queues(mut self, queues: QueueMode) -> VulkanBackend {
        self.options.queues = queues;
        self
    }
    pub fn options(&self) -> VulkanOptions {
        self.options
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
        crate::build::build(&self.ctx, plan, kernels, &buffers, self.options, self.lane_queues)
    }
}

/// What an exec submits per replay: one command buffer on one queue, or its lanes on several.
pub(crate) enum Submission {
    Queue(QueueRun),
    Lanes(LaneRun),
}

/// What the device may use while a replay runs: dropped only once no replay can (else leaked).
pub(crate) struct Resources {
    pub(crate) kernels: Vec<VulkanKernel>,
    /// Each root buffer's memory (the exec's own, or the user's), indexed by buffer id.
    pub(crate) roots: Vec<Option<Arc<Buffer>>>,
    pub(crate) params: Buffer,
    pub(crate) recorded: Submission,
    /// Each node's bindings and params (a traced recording binds the same).
    pub(crate) layouts: Vec<Option<crate::build::NodeLayout>>,
    /// The command list recorded with timestamps around every node, made by the first trace.
    pub(crate) traced: Option<crate::record::Finished>,
    /// Where `write_buffer` and `read_buffer` stage their bytes.
    pub(crate) staging: crate::transfer::Staging,
}

/// The memory of root buffer `root`.
fn root_memory<'a>(roots: &'a [Option<Arc<Buffer>>], root: BufferId, op: &'static str) -> Result<&'a Buffer, VkError> {
    roots[root.index()].as_deref().ok_or_else(|| VkError::Internal { op, reason: format!("root buffer #{root} has no memory") })
}

/// A plan instantiated on Vulkan.
pub struct VulkanExec {
    pub(crate) plan: Plan,
    /// What runs: the plan with fused groups as single nodes, where fusion applied.
    pub(crate) run_plan: Option<Plan>,
    pub(crate) ctx: Arc<Context>,
    pub(crate) options: VulkanOptions,
    /// Why the exec refuses further use (a wait that timed out, a lost device).
    pub(crate) fault: Option<String>,
    /// Nodes that take their scalars as push constants.
    pub(crate) pushed: usize,
    /// How many of the user's nodes run inside fused dispatches.
    pub(crate) fused_nodes: usize,
    /// Barriers between bodies inside the fused dispatches.
    pub(crate) fused_barriers: usize,
    /// How each declared tile map was taken.
    pub(crate) tile_maps: Vec<crate::MapUse>,
    /// Per slot: the byte offsets in `params` of every use, with the value's size.
    pub(crate) slot_uses: Vec<Vec<(usize, usize)>>,
    pub(crate) cmds: Vec<Cmd>,
    /// Where the exec runs: its lanes on several queues, or one queue.
    pub(crate) queues: crate::build::QueueUse,
    /// The user's nodes each node of the run plan runs (a trace's units).
    pub(crate) units: Vec<Vec<ostinato::NodeId>>,
    /// `None` only while the exec is dropped.
    pub(crate) res: Option<Resources>,
}

impl VulkanExec {
    /// The one-queue command list of the plan that runs (for golden tests and `ostinato plan
    /// --explain`; what runs where the exec uses one queue).
    pub fn commands(&self) -> &[Cmd] {
        &self.cmds
    }

    /// The lanes' segments, waits and submission order, where the exec runs its lanes on several
    /// queues ([`QueueMode::Lanes`]).
    pub fn lane_plan(&self) -> Option<&LanePlan> {
        match &self.queues {
            QueueUse::Lanes { plan, .. } => Some(plan),
            QueueUse::One { .. } => None,
        }
    }

    /// What each replay submits where the lanes run on several queues: `vkQueueSubmit` calls,
    /// batches, semaphore waits and those across queues (a cross-queue wait cost about 10 µs on the
    /// H200's driver: docs/fences-vulkan.md).
    pub fn lane_counts(&self) -> Option<LaneCounts> {
        match &self.queues {
            QueueUse::Lanes { plan, queues } => Some(plan.counts(*queues)),
            QueueUse::One { .. } => None,
        }
    }

    /// Why an exec asked to run its lanes on several queues runs on one: the plan has one lane, or
    /// the device one queue or no timeline semaphores. `None` where it runs as asked.
    pub fn lanes_fallback(&self) -> Option<&str> {
        match &self.queues {
            QueueUse::One { why } => why.as_deref(),
            QueueUse::Lanes { .. } => None,
        }
    }

    /// How many submitted replays the device has not finished (polls it). At most
    /// [`crate::MAX_REPLAYS_IN_FLIGHT`]: a replay past it first waits for old ones.
    pub fn replays_in_flight(&mut self) -> Result<u64, VkError> {
        let res = self.res("replays_in_flight")?;
        let r = match &mut res.recorded {
            Submission::Queue(r) => r.in_flight(),
            Submission::Lanes(r) => r.in_flight(),
        };
        self.note(r)
    }

    /// The plan that runs: the user's, or the one with fused groups as single nodes.
    pub fn run_plan(&self) -> &Plan {
        self.run_plan.as_ref().unwrap_or(&self.plan)
    }

    /// How many of the user's nodes run inside fused dispatches (0: fusion off or nothing fused).
    pub fn fused_nodes(&self) -> usize {
        self.fused_nodes
    }

    /// How many barriers the fused dispatches have between their bodies, all of them together: one
    /// before a body that depends on an earlier body of its workgroup, unless every byte the two touch
    /// is one invocation's in both (the built-ins' per-invocation footprint).
    pub fn fused_barriers(&self) -> usize {
        self.fused_barriers
    }

    /// How each tile map the plan declares was taken, node by node: verified from the kernel's code,
    /// vouched for, a built-in's stated footprint, or why not (the node is then ordered as a whole).
    pub fn tile_maps(&self) -> &[crate::MapUse] {
        &self.tile_maps
    }

    /// The exec's options.
    pub fn options(&self) -> VulkanOptions {
        self.options
    }

    /// Why the exec refuses further use, if it does.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    /// GPU µs of the last replay (the command buffer's timestamps), once it finished; `None` where the
    /// queue has no timestamps.
    pub fn last_gpu_us(&mut self) -> Result<Option<f64>, VkError> {
        self.wait()?;
        let res = self.res("last_gpu_us")?;
        match &mut res.recorded {
            Submission::Queue(r) => r.last_gpu_us(),
            Submission::Lanes(r) => r.last_gpu_us(),
        }
    }

    /// How many replays were submitted before the exec knew the previous one complete (so were
    /// ordered behind it on the device); 0 where the lanes run on several queues.
    pub fn ordered_replays(&self) -> u64 {
        match self.res.as_ref().map(|r| &r.recorded) {
            Some(Submission::Queue(r)) => r.ordered_replays(),
            _ => 0,
        }
    }

    /// How many dispatches take their scalars as push constants (the rest that have scalars read them
    /// from the params buffer).
    pub fn pushed_dispatches(&self) -> usize {
        self.pushed
    }

    /// How many dispatches run their kernel as written (no element offsets: every slice starts on a
    /// binding boundary), the code a hand-recorded command buffer runs.
    pub fn as_written_dispatches(&self) -> usize {
        let layouts = self.res.as_ref().map_or(&[][..], |r| &r.layouts[..]);
        layouts.iter().flatten().filter(|l| l.as_written.is_some()).count()
    }

    pub fn device_name(&self) -> &str {
        &self.ctx.name
    }

    pub(crate) fn res(&mut self, op: &'static str) -> Result<&mut Resources, VkError> {
        if let Some(f) = &self.fault {
            return Err(VkError::State { op, reason: format!("the exec on {} refuses: it is faulted ({f})", self.ctx.name) });
        }
        self.res.as_mut().ok_or_else(|| VkError::State { op, reason: "the exec is being dropped".into() })
    }

    /// An error from the exec's own work: remembered when it leaves the exec unusable.
    pub(crate) fn note<T>(&mut self, r: Result<T, VkError>) -> Result<T, VkError> {
        if let Err(e) = &r {
            if e.faults() && self.fault.is_none() {
                self.fault = Some(e.to_string());
            }
        }
        r
    }

    /// The root buffer and byte offset of `buffer`'s `len` bytes at `offset`, checked.
    fn locate(&self, buffer: BufferId, offset: u64, len: u64) -> Result<(ostinato::BufferId, u64), VkError> {
        ostinato::check_range(&self.plan, buffer, offset, len)?;
        let d = self.plan.graph().buffer(buffer);
        Ok((d.root, d.root_offset + offset))
    }

    pub(crate) fn wait_replays(&mut self, op: &'static str) -> Result<(), VkError> {
        let timeout = self.options.wait_timeout;
        let res = self.res(op)?;
        let r = match &mut res.recorded {
            Submission::Queue(r) => r.wait(timeout),
            Submission::Lanes(r) => r.wait(timeout),
        };
        self.note(r)
    }
}

impl Exec for VulkanExec {
    type Error = VkError;
    type Memory = VulkanMemory;

    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn replay(&mut self) -> Result<(), VkError> {
        let timeout = self.options.wait_timeout;
        let res = self.res("replay")?;
        let r = match &mut res.recorded {
            Submission::Queue(r) => r.submit(timeout),
            Submission::Lanes(r) => r.submit(timeout),
        };
        self.note(r)
    }

    fn wait(&mut self) -> Result<(), VkError> {
        self.wait_replays("wait")
    }

    /// Waits for submitted replays (they keep the value they were submitted with), then writes the
    /// value into every use's bytes of the params buffer.
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), VkError> {
        check_slot(&self.plan, slot, value)?;
        self.wait_replays("set_slot")?;
        let res = self.res.as_mut().ok_or_else(|| VkError::State { op: "set_slot", reason: "the exec is being dropped".into() })?;
        let bytes = res.params.bytes().ok_or_else(|| VkError::Internal { op: "set_slot", reason: "the params buffer is not mapped".into() })?;
        for &(at, n) in &self.slot_uses[slot.index()] {
            bytes[at..at + n].copy_from_slice(&value.bits.to_le_bytes()[..n]);
        }
        Ok(())
    }

    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), VkError> {
        self.wait_replays("write_buffer")?;
        let (ctx, timeout) = (self.ctx.clone(), self.options.wait_timeout);
        let (root, at) = self.locate(buffer, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let res = self.res("write_buffer")?;
        let r = crate::transfer::upload(&ctx, &mut res.staging, root_memory(&res.roots, root, "write_buffer")?, at, data, timeout);
        self.note(r)
    }

    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), VkError> {
        self.wait_replays("read_buffer")?;
        let (ctx, timeout) = (self.ctx.clone(), self.options.wait_timeout);
        let (root, at) = self.locate(buffer, offset, out.len() as u64)?;
        if out.is_empty() {
            return Ok(());
        }
        let res = self.res("read_buffer")?;
        let r = crate::transfer::download(&ctx, &mut res.staging, root_memory(&res.roots, root, "read_buffer")?, at, out, timeout);
        self.note(r)
    }

    /// Re-records the exec's command buffers on the new memory (a Vulkan command buffer holds its
    /// buffers' handles: nothing short of recording again moves them). Refused while a replay may
    /// run (the old memory could be freed under it): `wait()` first. The user's memory is used as it
    /// is: neither zeroed nor written until a node or `write_buffer` writes it.
    fn rebind(&mut self, buffer: BufferId, memory: VulkanMemory) -> Result<(), VkError> {
        let res = self.res("rebind")?;
        let idle = match &mut res.recorded {
            Submission::Queue(r) => r.idle(),
            Submission::Lanes(r) => r.idle(),
        };
        if !self.note(idle)? {
            return Err(VkError::State { op: "rebind", reason: "a replay is in flight; call wait() first".into() });
        }
        ostinato::check_rebind(&self.plan, buffer, memory.0.size())?;
        crate::build::check_same_device(&self.ctx, self.plan.graph().buffer(buffer), &memory)?;
        // Recording again frees the old command buffers and semaphores: the driver must be done with
        // every submission of them first (`Context::drain`).
        let drained = self.ctx.drain(self.options.wait_timeout);
        self.note(drained)?;
        let r = crate::build::rerecord(self, buffer, memory.0);
        self.note(r)
    }

    fn trace(&mut self, replays: usize) -> Result<ostinato::Trace, VkError> {
        crate::trace::trace(self, replays)
    }
}

impl Drop for VulkanExec {
    fn drop(&mut self) {
        // Replays may be in flight: wait for them (within the deadline) before anything they use is
        // destroyed. An exec that is faulted, or whose wait fails now, leaks its device objects: the
        // device may still be running work that uses them.
        // Then the queues are drained (`Context::drain`): the driver may still hold a completed
        // submission's semaphores and command buffers for a moment after it signals.
        let idle = self.fault.is_none() && self.wait_replays("drop").is_ok() && self.ctx.drain(self.options.wait_timeout).is_ok();
        if !idle {
            std::mem::forget(self.res.take());
        }
    }
}
