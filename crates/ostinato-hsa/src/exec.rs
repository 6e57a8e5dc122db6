//! [`HsaExec`]: a plan's AQL program, retained. Instantiation builds every packet once (two replay
//! sets: each has its kernarg segment and its signals, so the host prepares one replay while the
//! other runs); a replay copies its set's packets into the queues' rings, publishing each header last,
//! and rings each queue's doorbell once; slots are patched in the set's kernarg memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ostinato::{check_bindings, check_range, check_rebind, check_single_device, check_slot, BufferBinding, BufferId, Exec, Plan, Scalar, SlotId};

use crate::abi::{self, Scope, PACKET_BYTES};
use crate::api::{AgentInfo, DevicePtr, HsaApi, QueueInfo, Signal};
use crate::backend::{HsaBackend, HsaKernel, HsaMemory};
use crate::codeobject::{self, KernargLayout};
use crate::error::HsaError;
use crate::kernarg::KernargPlan;
use crate::program::{AqlProgram, Callee, PacketOp};
use crate::ring::HostRegion;

/// How long `wait` waits for replays before the exec is faulted.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything an exec holds of the runtime; freed on drop (queues first).
struct Resources {
    api: Arc<dyn HsaApi>,
    queues: Vec<QueueInfo>,
    signals: Vec<Signal>,
    kernarg: Vec<usize>,
    device: Vec<DevicePtr>,
}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: every handle came from `api` and is released once, here, after the exec waited for
        // its replays (or was faulted and will submit nothing more).
        unsafe {
            for q in &self.queues {
                self.api.destroy_queue(q);
            }
            for s in &self.signals {
                self.api.destroy_signal(*s);
            }
            for k in &self.kernarg {
                self.api.free_kernarg(*k);
            }
            for d in &self.device {
                self.api.free_device(*d);
            }
        }
    }
}

/// Where a root buffer lives.
#[derive(Clone, Copy, Debug)]
enum Root {
    Owned(DevicePtr),
    External(HsaMemory),
    /// A view: its root holds the memory.
    View,
}

impl Root {
    fn address(self) -> u64 {
        match self {
            Root::Owned(p) => p.0,
            Root::External(m) => m.ptr.0,
            Root::View => 0,
        }
    }
}

/// One replay set: its kernarg segment, its signals and its packets per queue.
struct ReplaySet {
    kernarg: HostRegion,
    signals: Vec<Signal>,
    packets: Vec<Vec<[u8; PACKET_BYTES]>>,
    in_flight: bool,
    /// The replay number last submitted with this set (to wait for the older set first).
    submitted: u64,
}

/// A plan instantiated on an HSA agent.
pub struct HsaExec {
    plan: Arc<Plan>,
    program: AqlProgram,
    kernarg: KernargPlan,
    roots: Vec<Root>,
    sets: Vec<ReplaySet>,
    rings: Vec<HostRegion>,
    next_set: usize,
    replays: u64,
    slot_values: Vec<Scalar>,
    slot_dirty: Vec<u8>,
    faulted: Option<String>,
    wait_timeout: Option<Duration>,
    /// Per queue, scratch of `submit`: the write index a replay starts at, the packets written.
    start: Vec<u64>,
    written: Vec<u64>,
    _kernels: Vec<HsaKernel>,
    res: Resources,
}

impl HsaExec {
    pub(crate) fn new(backend: &HsaBackend, plan: &Plan, kernels: Vec<HsaKernel>, buffers: Vec<BufferBinding<HsaMemory>>) -> Result<HsaExec, HsaError> {
        Self::with_program(backend, plan, kernels, buffers, &|_| {})
    }

    /// Instantiates with the lowered program changed by `mutate` first: a deliberately WRONG program,
    /// for mutation tests proving the simulator catches a missing barrier bit, fence or dependency.
    /// Never use it to run real work.
    #[doc(hidden)]
    pub fn with_program(
        backend: &HsaBackend,
        plan: &Plan,
        kernels: Vec<HsaKernel>,
        buffers: Vec<BufferBinding<HsaMemory>>,
        mutate: &dyn Fn(&mut AqlProgram),
    ) -> Result<HsaExec, HsaError> {
        let g = plan.graph();
        check_single_device(plan, "hsa").map_err(|source| HsaError::Range { operation: "instantiate", source })?;
        check_bindings(plan, kernels.len(), &buffers, |m| m.len)?;
        let user: Vec<_> = buffers.iter().map(|b| if let BufferBinding::External(m) = b { Some(m.extent()) } else { None }).collect();
        ostinato::check_disjoint_roots(plan, &user)?;
        for (sig, k) in g.kernels().iter().zip(&kernels) {
            codeobject::check_signature(sig, &k.info).map_err(|reason| HsaError::Kernel { kernel: sig.name.clone(), reason })?;
        }
        let mut program = crate::lower::lower(plan)?;
        mutate(&mut program);
        let copy = backend.bind_builtin(&crate::builtins::copy_sig(), crate::builtins::COPY)?;
        let fill = backend.bind_builtin(&crate::builtins::fill_sig(), crate::builtins::FILL)?;
        let kernel_of = |c: Callee| match c {
            Callee::Kernel(k) => &kernels[k.index()],
            Callee::Copy => &copy,
            Callee::Fill => &fill,
        };
        for d in &program.dispatches {
            check_geometry(backend.agent(), kernel_of(d.callee), d, &g.describe_node(d.node))?;
        }
        let layouts: Vec<&KernargLayout> = program.dispatches.iter().map(|d| &kernel_of(d.callee).layout).collect();
        let kernarg = KernargPlan::new(&program.dispatches, &layouts, g.slots().len())
            .map_err(|reason| HsaError::Unsupported { what: "kernel arguments".into(), reason })?;
        let api = backend.api.clone();
        let mut res = Resources { api: api.clone(), queues: Vec::new(), signals: Vec::new(), kernarg: Vec::new(), device: Vec::new() };
        let roots = allocate_roots(&mut res, backend.agent(), plan, buffers)?;
        let slot_values: Vec<Scalar> = g.slots().iter().map(|s| s.initial).collect();
        let mut sets = Vec::with_capacity(2);
        for _ in 0..2 {
            let base = api.allocate_kernarg(backend.agent(), kernarg.bytes as u64)?;
            res.kernarg.push(base);
            // SAFETY: the runtime just allocated these `bytes` of host-visible kernarg memory; the exec
            // alone writes them, and frees them (in `res`) after its replays.
            let region = unsafe { HostRegion::new(base, kernarg.bytes) };
            let bytes = kernarg.render(&|r| roots[r.index()].address(), &|s| slot_values[s.index()]);
            region.write(0, &bytes);
            let mut signals = Vec::with_capacity(program.signals as usize);
            for _ in 0..program.signals {
                let s = api.create_signal(0)?;
                res.signals.push(s);
                signals.push(s);
            }
            sets.push(ReplaySet { kernarg: region, signals, packets: Vec::new(), in_flight: false, submitted: 0 });
        }
        for set in &mut sets {
            set.packets = encode(&program, &kernarg, set, &kernel_of);
        }
        let mut rings = Vec::new();
        for packets in &sets[0].packets {
            let a = backend.agent();
            let want = (2 * packets.len()).max(a.queue_min_size as usize).max(2).next_power_of_two().min(a.queue_max_size.max(1) as usize);
            let q = api.create_queue(a, want as u32)?;
            res.queues.push(q);
            // SAFETY: the runtime's ring of `size` packet slots, alive until the queue is destroyed (in
            // `res`, after the exec's last replay); only this exec produces into it.
            rings.push(unsafe { HostRegion::new(q.ring, q.size as usize * PACKET_BYTES) });
        }
        let slot_dirty = vec![0; g.slots().len()];
        let nq = rings.len();
        drop(copy);
        Ok(HsaExec {
            plan: Arc::new(plan.clone()),
            program,
            kernarg,
            roots,
            sets,
            rings,
            next_set: 0,
            replays: 0,
            slot_values,
            slot_dirty,
            faulted: None,
            wait_timeout: backend.wait_timeout,
            start: vec![0; nq],
            written: vec![0; nq],
            _kernels: kernels.into_iter().chain([fill]).collect(),
            res,
        })
    }

    /// The AQL program the exec replays.
    pub fn program(&self) -> &AqlProgram {
        &self.program
    }

    /// Replay set `s`'s packets, per queue, as encoded at instantiation.
    pub fn packets(&self, set: usize) -> &[Vec<[u8; PACKET_BYTES]>] {
        &self.sets[set % 2].packets
    }

    /// The kernarg address of node `node`'s dispatch in replay set `set` (replay r uses set r % 2).
    pub fn kernarg_address(&self, set: usize, node: ostinato::NodeId) -> u64 {
        (self.sets[set % 2].kernarg.base() + self.kernarg.block[node.index()]) as u64
    }

    /// The device address of a buffer's root allocation.
    pub fn root_address(&self, buffer: BufferId) -> u64 {
        self.roots[self.plan.graph().buffer(buffer).root.index()].address()
    }

    /// The queues' sizes in packets.
    pub fn queue_sizes(&self) -> Vec<u32> {
        self.res.queues.iter().map(|q| q.size).collect()
    }

    fn check_usable(&self, operation: &'static str) -> Result<(), HsaError> {
        match &self.faulted {
            Some(why) => Err(HsaError::State { operation, reason: format!("the exec is faulted ({why})") }),
            None => Ok(()),
        }
    }

    fn fault(&mut self, why: String) -> HsaError {
        self.faulted = Some(why.clone());
        HsaError::Fault(why)
    }

    /// Waits for replay set `s`'s replay.
    fn wait_set(&mut self, s: usize) -> Result<(), HsaError> {
        if !self.sets[s].in_flight {
            return Ok(());
        }
        let done = self.sets[s].signals[self.program.done.0 as usize];
        let deadline = self.wait_timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            // SAFETY: `done` is a live signal of this exec.
            let v = unsafe { self.res.api.wait_signal_below(done, 1, Duration::from_millis(100)) };
            if v < 1 {
                self.sets[s].in_flight = false;
                return Ok(());
            }
            if let Some(e) = self.res.api.take_queue_error() {
                return Err(self.fault(format!("replay {}: the queue reported an error: {e}", self.sets[s].submitted)));
            }
            if let (Some(deadline), Some(t)) = (deadline, self.wait_timeout) {
                if Instant::now() > deadline {
                    return Err(self.fault(format!("replay {} did not complete within {t:?}", self.sets[s].submitted)));
                }
            }
        }
    }

    fn idle(&mut self, operation: &'static str) -> Result<(), HsaError> {
        self.check_usable(operation)?;
        self.wait()
    }

    /// Copies set `set`'s packets into every queue's ring after its write index and rings each
    /// doorbell: once per queue when the packets fit the free slots (a ring holds two replays), else
    /// once per batch that fits, going round the queues so that none waits on a packet of another
    /// still unwritten.
    fn submit(&mut self, set: usize) -> Result<(), HsaError> {
        let api = self.res.api.clone();
        for (q, queue) in self.res.queues.iter().enumerate() {
            // SAFETY: every queue is a live queue of this exec (here and below).
            self.start[q] = unsafe { api.load_write_index(queue) };
            self.written[q] = 0;
        }
        let deadline = self.wait_timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let mut progress = false;
            let mut done = true;
            for q in 0..self.res.queues.len() {
                let queue = &self.res.queues[q];
                let (start, written) = (&self.start, &mut self.written);
                let n = self.sets[set].packets[q].len() as u64;
                let i = written[q];
                if i == n {
                    continue;
                }
                done = false;
                let size = queue.size as u64;
                // SAFETY: as above.
                let read = unsafe { api.load_read_index(queue) };
                let free = size.saturating_sub(start[q] + i - read);
                if free == 0 {
                    continue;
                }
                let k = free.min(n - i);
                // SAFETY: as above.
                unsafe { api.store_write_index(queue, start[q] + i + k) };
                for j in i..i + k {
                    self.rings[q].publish_packet(((start[q] + j) % size) as usize, &self.sets[set].packets[q][j as usize]);
                }
                // SAFETY: as above.
                unsafe { api.ring_doorbell(queue, start[q] + i + k - 1) };
                written[q] = i + k;
                progress = true;
            }
            if done {
                return Ok(());
            }
            if !progress {
                if let Some(e) = api.take_queue_error() {
                    return Err(self.fault(format!("submitting replay {}: {e}", self.sets[set].submitted)));
                }
                if let (Some(deadline), Some(t)) = (deadline, self.wait_timeout) {
                    if Instant::now() > deadline {
                        return Err(self.fault(format!("submitting replay {}: no ring slot freed within {t:?}", self.sets[set].submitted)));
                    }
                }
                std::thread::yield_now();
            }
        }
    }
}

/// The work-group and grid of dispatch `d` must fit its kernel and the agent.
fn check_geometry(agent: &AgentInfo, k: &HsaKernel, d: &crate::program::Dispatch, node: &str) -> Result<(), HsaError> {
    let items: u64 = d.workgroup_size.iter().map(|&w| w as u64).product();
    let limit = (k.info.max_flat_workgroup_size as u64).min(agent.workgroup_max_size as u64);
    if items > limit {
        return Err(HsaError::Unsupported {
            what: node.to_string(),
            reason: format!("a work-group of {items} work-items; kernel `{}` on {} takes at most {limit}", k.info.name, agent.name),
        });
    }
    Ok(())
}

/// Allocates (and zeroes) every root buffer the exec owns; views get no memory.
fn allocate_roots(res: &mut Resources, agent: &AgentInfo, plan: &Plan, buffers: Vec<BufferBinding<HsaMemory>>) -> Result<Vec<Root>, HsaError> {
    let mut roots = Vec::with_capacity(buffers.len());
    for (i, (decl, b)) in plan.graph().buffers().iter().zip(buffers).enumerate() {
        roots.push(match b {
            BufferBinding::External(m) => Root::External(m),
            BufferBinding::Allocate if decl.root.index() != i => Root::View,
            BufferBinding::Allocate => {
                let p = res.api.allocate_device(agent, decl.size).map_err(|e| match e {
                    HsaError::Status { call, status, name } => HsaError::OutOfMemory {
                        operation: "instantiate",
                        reason: format!("buffer `{}` ({} bytes): {call}: {name} ({status:#x})", decl.name, decl.size),
                    },
                    other => other,
                })?;
                res.device.push(p);
                // SAFETY: `p` is `decl.size` bytes of device memory just allocated; zeroing whole
                // words covers it (the allocation granule is a page).
                unsafe { res.api.fill_device(p, 0, decl.size.div_ceil(4)) }?;
                Root::Owned(p)
            }
        });
    }
    Ok(roots)
}

/// Every packet of one replay set, encoded.
fn encode<'k>(program: &AqlProgram, kernarg: &KernargPlan, set: &ReplaySet, kernel_of: &dyn Fn(Callee) -> &'k HsaKernel) -> Vec<Vec<[u8; PACKET_BYTES]>> {
    let signal = |s: Option<crate::program::SignalId>| s.map_or(0, |s| set.signals[s.0 as usize].0);
    program
        .queues
        .iter()
        .map(|packets| {
            packets
                .iter()
                .map(|p| match &p.op {
                    PacketOp::Dispatch { node } => {
                        let d = &program.dispatches[node.index()];
                        let k = kernel_of(d.callee);
                        let fields = abi::DispatchFields {
                            dimensions: d.dimensions,
                            workgroup_size: d.workgroup_size,
                            grid_size: d.grid_size,
                            private_segment_size: k.symbol.private_segment_size,
                            group_segment_size: k.symbol.group_segment_size + d.dynamic_group_bytes,
                            kernel_object: k.symbol.kernel_object,
                            kernarg_address: (set.kernarg.base() + kernarg.block[node.index()]) as u64,
                            completion_signal: signal(p.completion),
                        };
                        abi::encode_dispatch(abi::header(abi::PACKET_TYPE_KERNEL_DISPATCH, p.barrier, p.acquire, p.release), &fields)
                    }
                    PacketOp::BarrierAnd { deps } => {
                        let deps: Vec<u64> = deps.iter().map(|d| set.signals[d.0 as usize].0).collect();
                        abi::encode_barrier_and(abi::header(abi::PACKET_TYPE_BARRIER_AND, p.barrier, p.acquire, p.release), &deps, signal(p.completion))
                    }
                })
                .collect()
        })
        .collect()
}

impl Exec for HsaExec {
    type Error = HsaError;
    type Memory = HsaMemory;

    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn replay(&mut self) -> Result<(), HsaError> {
        self.check_usable("replay")?;
        let s = self.next_set;
        self.wait_set(s)?;
        // The set's previous replay completed: its kernargs and signals are free to rewrite.
        for (slot, dirty) in self.slot_dirty.iter_mut().enumerate() {
            if *dirty >> s & 1 == 1 {
                let v = self.slot_values[slot].le_bytes();
                for &(o, size) in &self.kernarg.slots[slot] {
                    self.sets[s].kernarg.write(o, &v[..size.min(8)]);
                }
                *dirty &= !(1 << s);
            }
        }
        for &sig in &self.sets[s].signals {
            // SAFETY: a live signal of this exec, which no packet in flight uses (its set is idle).
            unsafe { self.res.api.store_signal(sig, 1) };
        }
        self.replays += 1;
        self.sets[s].submitted = self.replays;
        self.sets[s].in_flight = true;
        self.submit(s)?;
        self.next_set = 1 - s;
        Ok(())
    }

    fn wait(&mut self) -> Result<(), HsaError> {
        let mut order = [0usize, 1];
        order.sort_by_key(|&s| self.sets[s].submitted);
        for s in order {
            self.wait_set(s)?;
        }
        Ok(())
    }

    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), HsaError> {
        self.check_usable("set_slot")?;
        check_slot(&self.plan, slot, value)?;
        self.slot_values[slot.index()] = value;
        self.slot_dirty[slot.index()] = 0b11;
        Ok(())
    }

    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), HsaError> {
        self.idle("write_buffer")?;
        let at = self.device_address("write_buffer", buffer, offset, data.len() as u64)?;
        // SAFETY: `at` is `data.len()` bytes inside a live root allocation (range checked).
        unsafe { self.res.api.copy_to_device(at, data) }
    }

    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), HsaError> {
        self.idle("read_buffer")?;
        let at = self.device_address("read_buffer", buffer, offset, out.len() as u64)?;
        // SAFETY: as in `write_buffer`.
        unsafe { self.res.api.copy_from_device(out, at) }
    }

    fn rebind(&mut self, buffer: BufferId, memory: HsaMemory) -> Result<(), HsaError> {
        self.idle("rebind")?;
        check_rebind(&self.plan, buffer, memory.len)?;
        let g = self.plan.graph();
        let mut roots: Vec<_> = self
            .roots
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Root::Owned(p) => Some(HsaMemory { ptr: *p, len: g.buffers()[i].size }.extent()),
                Root::External(m) => Some(m.extent()),
                Root::View => None,
            })
            .collect();
        roots[buffer.index()] = Some(memory.extent());
        ostinato::check_disjoint_roots(&self.plan, &roots)?;
        let old = std::mem::replace(&mut self.roots[buffer.index()], Root::External(memory));
        for set in &self.sets {
            for &(o, root, offset) in self.kernarg.pointers.iter().filter(|p| p.1 == buffer) {
                let _ = root;
                set.kernarg.write(o, &(memory.ptr.0 + offset).to_le_bytes());
            }
        }
        if let Root::Owned(p) = old {
            self.res.device.retain(|d| *d != p);
            // SAFETY: the exec allocated `p`, no replay is in flight, and no kernarg points at it now.
            unsafe { self.res.api.free_device(p) };
        }
        Ok(())
    }

    /// Not yet: timing AQL dispatches needs ROCr's profiling (a completion signal per dispatch and
    /// `hsa_amd_profiling_get_dispatch_time`), which this backend's packets do not carry. Refused
    /// before anything runs.
    fn trace(&mut self, _replays: usize) -> Result<ostinato::Trace, HsaError> {
        Err(HsaError::Unsupported {
            what: "trace".into(),
            reason: "the HSA backend cannot time dispatches yet (that needs ROCr's per-dispatch profiling: hsa_amd_profiling_get_dispatch_time on a completion signal per packet); trace on host, CUDA or Vulkan".into(),
        })
    }
}

impl HsaExec {
    fn device_address(&self, operation: &'static str, buffer: BufferId, offset: u64, len: u64) -> Result<DevicePtr, HsaError> {
        check_range(&self.plan, buffer, offset, len).map_err(|source| HsaError::Range { operation, source })?;
        let decl = self.plan.graph().buffer(buffer);
        Ok(DevicePtr(self.roots[decl.root.index()].address() + decl.root_offset + offset))
    }

    /// How many fences of each scope the program has (acquire, release), for notes.
    pub fn fence_counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for (_, _, p) in self.program.packets() {
            for s in [p.acquire, p.release] {
                match s {
                    Scope::None => {}
                    Scope::Agent => c.0 += 1,
                    Scope::System => c.1 += 1,
                }
            }
            c.2 += p.barrier as usize;
        }
        c
    }
}

impl Drop for HsaExec {
    fn drop(&mut self) {
        if self.faulted.is_none() {
            let _ = self.wait();
        }
    }
}
