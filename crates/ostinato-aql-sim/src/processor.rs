//! The packet processor: queues of AQL packets read from their rings, launched in order, run and
//! completed in whatever order the HSA queue semantics allow, chosen adversarially by a seeded
//! scheduler. A dispatch reads memory when it becomes active and its stores land when its active
//! phase ends; fences move the visibility points of [`crate::memory`].

use std::collections::HashMap;
use std::sync::Arc;

use ostinato::rng::XorShift64;
use ostinato::Launch;
use ostinato_host::{CallArg, HostMemory};
use ostinato_hsa::abi::{self, decode_header, Header, Scope, PACKET_BYTES, PACKET_TYPE_BARRIER_AND, PACKET_TYPE_INVALID, PACKET_TYPE_KERNEL_DISPATCH};
use ostinato_hsa::codeobject::KernelInfo;
use ostinato_hsa::AgentInfo;

use crate::hostmem::HostBlock;
use crate::memory::{DeviceMemory, Visibility, Writer};
use crate::twins::{decode, Decoded, Twins};

/// A loaded kernel: its metadata and the host twin that runs it.
pub struct SimKernel {
    pub info: KernelInfo,
    pub twin: Option<ostinato_host::HostKernel>,
}

pub struct SimQueue {
    pub handle: u64,
    pub ring: HostBlock,
    pub size: u32,
    pub read_index: u64,
    pub write_index: u64,
    /// Packets below this index are published (the doorbell's last value + 1).
    pub published: u64,
    /// The next packet to launch.
    pub next: u64,
    pub live: bool,
}

#[derive(Debug)]
enum Work {
    Dispatch { kernel_object: u64, kernarg_address: usize, kernarg: Vec<u8>, grid: [u32; 3], workgroup: [u16; 3] },
    BarrierAnd { deps: [u64; 5] },
}

#[derive(Debug)]
enum Phase {
    Launched,
    /// Active: the stores it will make, (allocation address, offset, bytes).
    Active(Vec<(u64, usize, Vec<u8>)>),
    Ended,
    Waiting,
}

#[derive(Debug)]
struct InFlight {
    /// Its entry in the dispatch log, when one is kept.
    record: Option<usize>,
    queue: usize,
    index: u64,
    header: Header,
    completion: u64,
    work: Work,
    phase: Phase,
}

/// What a seed makes the scheduler prefer: a weight per kind of step and per queue.
#[derive(Clone, Debug)]
pub struct Strategy {
    launch: u64,
    start: u64,
    end: u64,
    complete: u64,
    queue: Vec<u64>,
}

impl Strategy {
    pub fn seeded(rng: &mut XorShift64) -> Strategy {
        let mut w = || [1, 4, 16][rng.below(3) as usize];
        Strategy { launch: w(), start: w(), end: w(), complete: w(), queue: (0..8).map(|_| w()).collect() }
    }
}

/// Visibility points (simulated times).
#[derive(Clone, Copy, Debug, Default)]
pub struct Fences {
    /// The latest release at agent scope or wider.
    pub released_gpu: u64,
    /// The latest release at system scope.
    pub released_system: u64,
    /// What a dispatch becoming active now sees.
    pub acquired: Visibility,
    /// The GPU stores the host sees (released to the system before its last acquire).
    pub host_sees: u64,
}

/// Counters a run reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets: u64,
    pub dispatches: u64,
    /// Dispatches that became active seeing stale bytes somewhere in their buffers.
    pub stale_views: u64,
    pub steps: u64,
}

/// What one dispatch computed: its kernarg address, and every allocation it reached as its host twin
/// left it (the bytes it saw, with its own stores).
#[derive(Clone, Debug)]
pub struct DispatchRecord {
    pub kernarg_address: u64,
    pub outputs: Vec<(u64, Vec<u8>)>,
    /// When it became active, and when its active phase ended (its stores landed).
    pub start: u64,
    pub end: u64,
}

pub struct State {
    /// Each dispatch's record, when a test asked for them.
    pub log: Option<Vec<DispatchRecord>>,
    pub rng: XorShift64,
    pub strategy: Strategy,
    pub time: u64,
    pub agent: AgentInfo,
    pub signals: HashMap<u64, i64>,
    pub next_handle: u64,
    pub queues: Vec<SimQueue>,
    pub kernarg: Vec<HostBlock>,
    pub device: DeviceMemory,
    pub kernels: HashMap<u64, SimKernel>,
    pub executables: HashMap<u64, Vec<u64>>,
    pub twins: Twins,
    pub fault: Option<String>,
    pub stopped: bool,
    pub fences: Fences,
    pub stats: Stats,
    in_flight: Vec<InFlight>,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Launch(usize),
    Start(usize),
    End(usize),
    Complete(usize),
}

impl State {
    pub fn new(seed: u64, agent: AgentInfo, twins: Twins) -> State {
        let mut rng = XorShift64::seeded(seed);
        let strategy = Strategy::seeded(&mut rng);
        State {
            log: None,
            rng,
            strategy,
            time: 1,
            agent,
            signals: HashMap::new(),
            next_handle: 1,
            queues: Vec::new(),
            kernarg: Vec::new(),
            device: DeviceMemory::default(),
            kernels: HashMap::new(),
            executables: HashMap::new(),
            twins,
            fault: None,
            stopped: false,
            fences: Fences::default(),
            stats: Stats::default(),
            in_flight: Vec::new(),
        }
    }

    /// A fresh handle (signals, queues, executables, kernel objects: never dereferenced).
    pub fn handle(&mut self, base: u64) -> u64 {
        self.next_handle += 1;
        base + 64 * self.next_handle
    }

    pub fn tick(&mut self) -> u64 {
        self.time += 1;
        self.time
    }

    fn stop(&mut self, why: String) {
        if self.fault.is_none() {
            self.fault = Some(format!("simulated packet processor: {why}"));
        }
        self.stopped = true;
    }

    /// Runs up to `n` steps (fewer when nothing can happen).
    pub fn run(&mut self, n: u64) {
        for _ in 0..n {
            if !self.step() {
                return;
            }
        }
    }

    /// Runs one step the scheduler picks among those possible; false when none is.
    pub fn step(&mut self) -> bool {
        if self.stopped {
            return false;
        }
        let steps = self.possible();
        if steps.is_empty() {
            return false;
        }
        let weight = |s: &Step, st: &State| -> u64 {
            let (kind, q) = match *s {
                Step::Launch(q) => (st.strategy.launch, q),
                Step::Start(i) => (st.strategy.start, st.in_flight[i].queue),
                Step::End(i) => (st.strategy.end, st.in_flight[i].queue),
                Step::Complete(i) => (st.strategy.complete, st.in_flight[i].queue),
            };
            kind * st.strategy.queue[q % st.strategy.queue.len()]
        };
        let total: u64 = steps.iter().map(|s| weight(s, self)).sum();
        let mut pick = self.rng.below(total);
        let mut chosen = steps[0];
        for s in &steps {
            let w = weight(s, self);
            if pick < w {
                chosen = *s;
                break;
            }
            pick -= w;
        }
        self.stats.steps += 1;
        match chosen {
            Step::Launch(q) => self.launch(q),
            Step::Start(i) => self.start(i),
            Step::End(i) => self.end(i),
            Step::Complete(i) => self.complete(i),
        }
        true
    }

    /// Whether a deadlock is all that is left: packets published or in flight, none able to move.
    pub fn stuck(&self) -> Option<String> {
        let waiting: Vec<String> = self
            .in_flight
            .iter()
            .filter(|p| matches!(p.phase, Phase::Waiting))
            .map(|p| format!("barrier-AND packet {} of queue {}", p.index, p.queue))
            .chain(
                self.queues
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| q.live && q.next < q.published)
                    .map(|(i, q)| format!("packet {} of queue {i} unlaunched", q.next)),
            )
            .collect();
        (!waiting.is_empty()).then(|| waiting.join(", "))
    }

    fn possible(&mut self) -> Vec<Step> {
        let mut out = Vec::new();
        for q in 0..self.queues.len() {
            if self.can_launch(q) {
                out.push(Step::Launch(q));
            }
        }
        for (i, p) in self.in_flight.iter().enumerate() {
            match &p.phase {
                Phase::Launched => out.push(Step::Start(i)),
                Phase::Active(_) => out.push(Step::End(i)),
                Phase::Ended => out.push(Step::Complete(i)),
                Phase::Waiting => {
                    if let Work::BarrierAnd { deps } = &p.work {
                        if deps.iter().all(|&d| d == 0 || self.signals.get(&d) == Some(&0)) {
                            out.push(Step::Complete(i));
                        }
                    }
                }
            }
        }
        out
    }

    fn can_launch(&self, q: usize) -> bool {
        let queue = &self.queues[q];
        if !queue.live || queue.next >= queue.published {
            return false;
        }
        let mine = || self.in_flight.iter().filter(|p| p.queue == q);
        // A barrier-AND blocks its queue until it completes.
        if mine().any(|p| matches!(p.work, Work::BarrierAnd { .. })) {
            return false;
        }
        let slot = (queue.next % queue.size as u64) as usize * PACKET_BYTES;
        let header = (queue.ring.load_word_acquire(slot) & 0xFFFF) as u16;
        // A packet whose barrier bit is set launches once every earlier packet completed.
        let barrier = header >> abi::HEADER_BARRIER & 1 == 1;
        !(barrier && mine().next().is_some())
    }

    fn launch(&mut self, q: usize) {
        let (index, slot) = {
            let queue = &self.queues[q];
            (queue.next, (queue.next % queue.size as u64) as usize * PACKET_BYTES)
        };
        let mut packet = [0u8; PACKET_BYTES];
        self.queues[q].ring.read(slot, &mut packet);
        let first = self.queues[q].ring.load_word_acquire(slot);
        packet[0..4].copy_from_slice(&first.to_le_bytes());
        let at = |what: &str| format!("queue {q} packet {index}: {what}");
        let Some(header) = decode_header(first as u16) else { return self.stop(at(&format!("header {:#06x} has reserved bits or scopes set", first as u16))) };
        if header.packet_type == PACKET_TYPE_INVALID {
            return self.stop(at("the doorbell announced it but its header is INVALID (published after the doorbell, or written to the wrong slot)"));
        }
        let work = match header.packet_type {
            PACKET_TYPE_KERNEL_DISPATCH => match self.check_dispatch(&packet) {
                Ok(w) => w,
                Err(e) => return self.stop(at(&e)),
            },
            PACKET_TYPE_BARRIER_AND => {
                if abi::u16_at(&packet, 2) != 0 || abi::u32_at(&packet, 4) != 0 || abi::u64_at(&packet, 48) != 0 {
                    return self.stop(at("barrier-AND reserved fields are not zero"));
                }
                let mut deps = [0u64; 5];
                for (i, d) in deps.iter_mut().enumerate() {
                    *d = abi::u64_at(&packet, abi::barrier_and::DEP_SIGNAL + 8 * i);
                    if *d != 0 && !self.signals.contains_key(d) {
                        return self.stop(at(&format!("dependency signal {d:#x} is no live signal")));
                    }
                }
                Work::BarrierAnd { deps }
            }
            t => return self.stop(at(&format!("packet type {t} is not one the backend should send"))),
        };
        let completion = abi::u64_at(&packet, 56);
        if completion != 0 && !self.signals.contains_key(&completion) {
            return self.stop(at(&format!("completion signal {completion:#x} is no live signal")));
        }
        // The slot is consumed: invalid again, and the read index moves on.
        self.queues[q].ring.store_word(slot, PACKET_TYPE_INVALID as u32);
        self.queues[q].next += 1;
        self.queues[q].read_index += 1;
        self.stats.packets += 1;
        let phase = if matches!(work, Work::Dispatch { .. }) {
            self.acquire(header.acquire);
            Phase::Launched
        } else {
            Phase::Waiting
        };
        self.tick();
        self.in_flight.push(InFlight { record: None, queue: q, index, header, completion, work, phase });
    }

    fn check_dispatch(&self, p: &[u8; PACKET_BYTES]) -> Result<Work, String> {
        use abi::dispatch as d;
        let dims = abi::u16_at(p, d::SETUP);
        let workgroup = [abi::u16_at(p, d::WORKGROUP_SIZE_X), abi::u16_at(p, d::WORKGROUP_SIZE_Y), abi::u16_at(p, d::WORKGROUP_SIZE_Z)];
        let grid = [abi::u32_at(p, d::GRID_SIZE_X), abi::u32_at(p, d::GRID_SIZE_Y), abi::u32_at(p, d::GRID_SIZE_Z)];
        if !(1..=3).contains(&dims) {
            return Err(format!("setup dimensions {dims}"));
        }
        if abi::u16_at(p, d::RESERVED0) != 0 || abi::u64_at(p, d::RESERVED2) != 0 {
            return Err("dispatch reserved fields are not zero".into());
        }
        if workgroup.contains(&0) || grid.contains(&0) {
            return Err(format!("work-group {workgroup:?} or grid {grid:?} has a zero dimension"));
        }
        let kernel_object = abi::u64_at(p, d::KERNEL_OBJECT);
        let k = self.kernels.get(&kernel_object).ok_or_else(|| format!("kernel object {kernel_object:#x} is no loaded kernel"))?;
        let items: u32 = workgroup.iter().map(|&w| w as u32).product();
        if items > k.info.max_flat_workgroup_size.min(self.agent.workgroup_max_size) {
            return Err(format!("a work-group of {items} work-items; `{}` takes at most {}", k.info.name, k.info.max_flat_workgroup_size));
        }
        if abi::u32_at(p, d::GROUP_SEGMENT_SIZE) < k.info.group_segment_fixed_size
            || abi::u32_at(p, d::PRIVATE_SEGMENT_SIZE) < k.info.private_segment_fixed_size
        {
            return Err(format!("segment sizes below `{}`'s fixed group/private sizes", k.info.name));
        }
        let kernarg_address = abi::u64_at(p, d::KERNARG_ADDRESS) as usize;
        let size = k.info.kernarg_segment_size as usize;
        if kernarg_address % 16 != 0 {
            return Err(format!("kernarg address {kernarg_address:#x} is not 16-byte aligned"));
        }
        let block = self
            .kernarg
            .iter()
            .find(|b| b.contains(kernarg_address, size.max(1)))
            .ok_or_else(|| format!("kernarg address {kernarg_address:#x}+{size} is not kernarg memory"))?;
        let mut kernarg = vec![0u8; size];
        block.read(kernarg_address - block.address(), &mut kernarg);
        Ok(Work::Dispatch { kernel_object, kernarg_address, kernarg, grid, workgroup })
    }

    fn acquire(&mut self, scope: Scope) {
        if scope >= Scope::Agent {
            self.fences.acquired.gpu = self.fences.acquired.gpu.max(self.fences.released_gpu);
        }
        if scope == Scope::System {
            self.fences.acquired.host = self.time;
        }
    }

    fn release(&mut self, scope: Scope) {
        let now = self.tick();
        if scope >= Scope::Agent {
            self.fences.released_gpu = now;
        }
        if scope == Scope::System {
            self.fences.released_system = now;
        }
    }

    /// The kernarg bytes of in-flight packet `i` must still be the ones it launched with.
    fn kernarg_unchanged(&mut self, i: usize) -> bool {
        let Work::Dispatch { kernarg_address, kernarg, .. } = &self.in_flight[i].work else { return true };
        let now = self.kernarg.iter().find(|b| b.contains(*kernarg_address, kernarg.len().max(1))).map(|b| {
            let mut v = vec![0u8; kernarg.len()];
            b.read(kernarg_address - b.address(), &mut v);
            v
        });
        if now.as_ref() == Some(kernarg) {
            return true;
        }
        let (q, index) = (self.in_flight[i].queue, self.in_flight[i].index);
        self.stop(format!("queue {q} packet {index}: its kernarg memory changed (or was freed) while the dispatch was in flight"));
        false
    }

    fn start(&mut self, i: usize) {
        if !self.kernarg_unchanged(i) {
            return;
        }
        let (q, index) = (self.in_flight[i].queue, self.in_flight[i].index);
        match self.execute(i) {
            Ok(stores) => {
                self.tick();
                self.stats.dispatches += 1;
                self.in_flight[i].phase = Phase::Active(stores);
            }
            Err(e) => self.stop(format!("queue {q} packet {index}: {e}")),
        }
    }

    /// Runs dispatch `i`'s host twin on the bytes it sees; returns the stores it makes.
    fn execute(&mut self, i: usize) -> Result<Vec<(u64, usize, Vec<u8>)>, String> {
        let Work::Dispatch { kernel_object, kernarg, grid, workgroup, kernarg_address } = &self.in_flight[i].work else { return Ok(Vec::new()) };
        let k = self.kernels.get(kernel_object).ok_or("its kernel was unloaded while it was in flight")?;
        let twin = k.twin.as_ref().ok_or_else(|| format!("kernel `{}` has no host twin", k.info.name))?;
        let decoded = decode(&twin.sig, &k.info.args, kernarg)?;
        let vis = self.fences.acquired;
        // Each allocation a pointer reaches, seen stale (what this dispatch sees) and fresh.
        let mut allocs: Vec<usize> = Vec::new();
        let mut args = Vec::with_capacity(decoded.len());
        for d in &decoded {
            args.push(match *d {
                Decoded::Scalar(v) => CallArg::Scalar(v),
                Decoded::Pointer { address, access } => {
                    let (a, off) = self.device.find(address).ok_or_else(|| format!("a pointer argument ({address:#x}) points at no device allocation"))?;
                    let m = allocs.iter().position(|&x| x == a).unwrap_or_else(|| {
                        allocs.push(a);
                        allocs.len() - 1
                    });
                    CallArg::Buffer { memory: m, start: off as u64, len: (self.device.get(a).len() - off) as u64, access }
                }
            });
        }
        let stale: Vec<Vec<u8>> = allocs.iter().map(|&a| self.device.get(a).view(vis)).collect();
        let fresh: Vec<Vec<u8>> = allocs.iter().map(|&a| self.device.get(a).latest()).collect();
        let blocks = [grid[0].div_ceil(workgroup[0] as u32), grid[1].div_ceil(workgroup[1] as u32), grid[2].div_ceil(workgroup[2] as u32)];
        let launch = Launch::new(blocks, [workgroup[0] as u32, workgroup[1] as u32, workgroup[2] as u32]);
        let run = |views: &[Vec<u8>]| -> Result<Vec<Vec<u8>>, String> {
            let mems: Vec<Arc<HostMemory>> = views
                .iter()
                .map(|v| {
                    let m = HostMemory::try_zeroed(v.len() as u64)?;
                    m.write(0, v);
                    Ok(Arc::new(m))
                })
                .collect::<Result<_, String>>()?;
            twin.call(&args, &mems, launch)?;
            Ok(mems.iter().map(|m| m.to_vec()).collect())
        };
        let out = run(&stale).map_err(|e| format!("kernel `{}` faulted on its host twin: {e}", k.info.name))?;
        // A store of the byte's own stale value shows only against the fresh bytes: run again there.
        let out_fresh = if stale != fresh {
            self.stats.stale_views += 1;
            run(&fresh).ok()
        } else {
            None
        };
        if let Some(log) = &mut self.log {
            let outputs = allocs.iter().zip(&out).map(|(&a, o)| (self.device.get(a).address, o.clone())).collect();
            log.push(DispatchRecord { kernarg_address: *kernarg_address as u64, outputs, start: self.time, end: u64::MAX });
            self.in_flight[i].record = Some(log.len() - 1);
        }
        let mut stores = Vec::new();
        for (j, &a) in allocs.iter().enumerate() {
            let changed = |b: usize| out[j][b] != stale[j][b] || out_fresh.as_ref().is_some_and(|f| f[j][b] != fresh[j][b]);
            let mut b = 0;
            while b < out[j].len() {
                if !changed(b) {
                    b += 1;
                    continue;
                }
                let s = b;
                while b < out[j].len() && changed(b) {
                    b += 1;
                }
                stores.push((self.device.get(a).address, s, out[j][s..b].to_vec()));
            }
        }
        Ok(stores)
    }

    fn end(&mut self, i: usize) {
        let now = self.tick();
        let Phase::Active(stores) = std::mem::replace(&mut self.in_flight[i].phase, Phase::Ended) else { return };
        if let (Some(log), Some(r)) = (&mut self.log, self.in_flight[i].record) {
            log[r].end = now;
        }
        for (address, offset, bytes) in stores {
            match self.device.find(address) {
                Some((a, 0)) => self.device.get_mut(a).store(now, Writer::Gpu, offset, &bytes),
                _ => {
                    return self.stop(format!(
                        "queue {} packet {}: device memory freed while the dispatch was in flight",
                        self.in_flight[i].queue, self.in_flight[i].index
                    ))
                }
            }
        }
    }

    fn complete(&mut self, i: usize) {
        if !self.kernarg_unchanged(i) {
            return;
        }
        let p = self.in_flight.remove(i);
        if matches!(p.work, Work::BarrierAnd { .. }) {
            self.acquire(p.header.acquire);
        }
        self.release(p.header.release);
        if p.completion != 0 {
            if let Some(v) = self.signals.get_mut(&p.completion) {
                *v -= 1;
            }
        }
    }
}
