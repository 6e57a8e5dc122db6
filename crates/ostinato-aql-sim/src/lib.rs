//! A test tool, never a backend: a simulated AQL packet processor behind `ostinato-hsa`'s
//! [`HsaApi`], so the HSA backend's protocol logic (its packets, barrier bits, barrier-AND
//! dependencies, fence scopes, ring writes, doorbells, signals and double-buffered kernargs) runs in
//! CI without an AMD GPU.
//!
//! What it models, from `hsa.h` and the HSA 1.2 system architecture:
//! - queues whose rings and kernarg segments are host memory the backend writes through raw
//!   addresses; packets are read only up to the doorbell's index, must have a valid header by then,
//!   and are invalidated once consumed; signals; device memory at addresses the host never touches,
//!   filled with garbage until written;
//! - launch in queue order; the barrier bit; barrier-AND packets blocking their queue; everything else
//!   running concurrently and completing in any order a seeded scheduler picks (its weights per kind
//!   of step and per queue change with the seed);
//! - the memory model: a dispatch reads what it is guaranteed to see — stores of dispatches released
//!   (agent or system scope) before an acquire that preceded it, the host's stores after a
//!   system-scope acquire — and stale bytes otherwise; the host sees only what was released to the
//!   system. Dispatches run through their kernels' host twins ([`twins`]).
//!
//! Every result it produces is a simulated one.

mod hostmem;
pub mod memory;
mod processor;
pub mod twins;

use std::sync::Mutex;
use std::time::Duration;

use ostinato_hsa::{AgentInfo, DevicePtr, Executable, HsaApi, HsaError, KernelSymbol, QueueInfo, Signal};

use hostmem::HostBlock;
pub use processor::{DispatchRecord, Stats};
use processor::{SimKernel, SimQueue, State};
pub use twins::Twins;

/// How the simulated agent looks and how the scheduler picks.
#[derive(Clone)]
pub struct SimOptions {
    pub seed: u64,
    /// The agent's ISA (code objects must target it).
    pub isa: String,
    pub queue_min_size: u32,
    pub queue_max_size: u32,
    pub twins: Twins,
}

impl SimOptions {
    /// A gfx1100 agent with ROCr's usual queue sizes.
    pub fn seeded(seed: u64) -> SimOptions {
        SimOptions { seed, isa: "gfx1100".into(), queue_min_size: 64, queue_max_size: 1 << 17, twins: Twins::default() }
    }
}

/// The simulated HSA runtime with one GPU agent.
pub struct Simulator {
    seed: u64,
    state: Mutex<State>,
}

const SIGNAL_BASE: u64 = 0x5100_0000_0000;
const QUEUE_BASE: u64 = 0x5200_0000_0000;
const KERNEL_BASE: u64 = 0x6b00_0000_0000;

impl Simulator {
    pub fn new(o: SimOptions) -> Simulator {
        let agent = AgentInfo {
            handle: 1,
            name: o.isa.clone(),
            product: "simulated AQL packet processor".into(),
            uuid: "GPU-SIMULATED".into(),
            pci_bus_id: String::new(),
            compute_units: 0,
            wavefront_size: 32,
            workgroup_max_size: 1024,
            queue_min_size: o.queue_min_size,
            queue_max_size: o.queue_max_size,
        };
        Simulator { seed: o.seed, state: Mutex::new(State::new(o.seed, agent, o.twins)) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `twin` as the host twin of the code-object kernel `kernel`.
    pub fn register_twin(&self, kernel: &str, twin: ostinato_host::HostKernel) {
        self.state().twins.insert(kernel, twin);
    }

    /// Starts recording what every dispatch computed (for tests that compare node by node).
    pub fn record_dispatches(&self) {
        self.state().log.get_or_insert_with(Vec::new);
    }

    /// The dispatches recorded so far, in the order they became active.
    pub fn take_records(&self) -> Vec<DispatchRecord> {
        self.state().log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// What the packet processor did so far.
    pub fn stats(&self) -> Stats {
        self.state().stats
    }
}

fn invalid(call: &'static str, what: String) -> HsaError {
    HsaError::Status { call, status: 0x1001, name: format!("HSA_STATUS_ERROR_INVALID_ARGUMENT (simulated): {what}") }
}

impl HsaApi for Simulator {
    fn describe(&self) -> String {
        format!("the simulated AQL packet processor (ostinato-aql-sim, seed {})", self.seed)
    }

    fn is_simulated(&self) -> bool {
        true
    }

    fn agents(&self) -> Result<Vec<AgentInfo>, HsaError> {
        Ok(vec![self.state().agent.clone()])
    }

    fn create_queue(&self, agent: &AgentInfo, packets: u32) -> Result<QueueInfo, HsaError> {
        let mut s = self.state();
        if agent.handle != s.agent.handle {
            return Err(invalid("hsa_queue_create", "unknown agent".into()));
        }
        let size = packets.max(1).next_power_of_two().clamp(s.agent.queue_min_size, s.agent.queue_max_size);
        let ring = HostBlock::new(size as usize * 64).ok_or_else(|| invalid("hsa_queue_create", "no host memory for the ring".into()))?;
        for slot in 0..size as usize {
            ring.store_word(slot * 64, ostinato_hsa::abi::PACKET_TYPE_INVALID as u32);
        }
        let handle = s.handle(QUEUE_BASE);
        let doorbell = s.handle(SIGNAL_BASE);
        s.signals.insert(doorbell, -1);
        let info = QueueInfo { handle, ring: ring.address(), size, doorbell: Signal(doorbell) };
        s.queues.push(SimQueue { handle, ring, size, read_index: 0, write_index: 0, published: 0, next: 0, live: true });
        Ok(info)
    }

    unsafe fn destroy_queue(&self, q: &QueueInfo) {
        let mut s = self.state();
        s.queues.retain(|x| x.handle != q.handle);
    }

    unsafe fn load_read_index(&self, q: &QueueInfo) -> u64 {
        let mut s = self.state();
        s.step();
        s.queues.iter().find(|x| x.handle == q.handle).map_or(0, |x| x.read_index)
    }

    unsafe fn load_write_index(&self, q: &QueueInfo) -> u64 {
        self.state().queues.iter().find(|x| x.handle == q.handle).map_or(0, |x| x.write_index)
    }

    unsafe fn store_write_index(&self, q: &QueueInfo, index: u64) {
        let mut s = self.state();
        let bad = match s.queues.iter_mut().find(|x| x.handle == q.handle) {
            Some(x) if index >= x.write_index && index - x.read_index <= x.size as u64 => {
                x.write_index = index;
                None
            }
            Some(x) => Some(format!("write index {index} (read index {}, size {}): moved back or past the free slots", x.read_index, x.size)),
            None => Some("write index stored to an unknown queue".into()),
        };
        if let Some(why) = bad {
            s.fault.get_or_insert(format!("simulated packet processor: {why}"));
            s.stopped = true;
        }
    }

    unsafe fn ring_doorbell(&self, q: &QueueInfo, last_index: u64) {
        let mut s = self.state();
        let bad = match s.queues.iter_mut().find(|x| x.handle == q.handle) {
            Some(x) if last_index < x.write_index => {
                x.published = x.published.max(last_index + 1);
                None
            }
            Some(x) => Some(format!("doorbell {last_index} rung past the write index {}", x.write_index)),
            None => Some("doorbell of an unknown queue".into()),
        };
        if let Some(why) = bad {
            s.fault.get_or_insert(format!("simulated packet processor: {why}"));
            s.stopped = true;
            return;
        }
        s.signals.insert(q.doorbell.0, last_index as i64);
        // The GPU runs on while the host goes on: a few steps now, interleaved with what it does next.
        let n = s.rng.below(4);
        s.run(n);
    }

    fn create_signal(&self, initial: i64) -> Result<Signal, HsaError> {
        let mut s = self.state();
        let h = s.handle(SIGNAL_BASE);
        s.signals.insert(h, initial);
        Ok(Signal(h))
    }

    unsafe fn destroy_signal(&self, sig: Signal) {
        self.state().signals.remove(&sig.0);
    }

    unsafe fn store_signal(&self, sig: Signal, value: i64) {
        if let Some(v) = self.state().signals.get_mut(&sig.0) {
            *v = value;
        }
    }

    unsafe fn load_signal(&self, sig: Signal) -> i64 {
        let mut s = self.state();
        s.fences.host_sees = s.fences.released_system;
        s.signals.get(&sig.0).copied().unwrap_or(0)
    }

    unsafe fn wait_signal_below(&self, sig: Signal, value: i64, _timeout: Duration) -> i64 {
        let mut s = self.state();
        loop {
            let v = s.signals.get(&sig.0).copied().unwrap_or(i64::MIN);
            if v < value {
                // The wait's acquire: the host now sees what was released to the system.
                s.fences.host_sees = s.fences.released_system;
                let vis = ostinato_aql_sim_compact_point(&s);
                s.device.compact(vis);
                return v;
            }
            if !s.step() {
                if !s.stopped {
                    let why = s.stuck().unwrap_or_else(|| "no packet left to run".into());
                    s.fault = Some(format!("simulated packet processor: deadlock: the host waits for a signal no packet will decrement ({why})"));
                    s.stopped = true;
                }
                return v;
            }
        }
    }

    fn allocate_device(&self, _agent: &AgentInfo, bytes: u64) -> Result<DevicePtr, HsaError> {
        let mut s = self.state();
        let len = usize::try_from(bytes).map_err(|_| invalid("hsa_amd_memory_pool_allocate", format!("{bytes} bytes")))?;
        let State { device, rng, .. } = &mut *s;
        device.allocate(len, rng).map(DevicePtr).ok_or_else(|| HsaError::Status {
            call: "hsa_amd_memory_pool_allocate",
            status: 0x1008,
            name: format!("HSA_STATUS_ERROR_OUT_OF_RESOURCES (simulated): {bytes} bytes of host memory for the simulated pool"),
        })
    }

    fn allocate_kernarg(&self, _agent: &AgentInfo, bytes: u64) -> Result<usize, HsaError> {
        let block =
            usize::try_from(bytes).ok().and_then(HostBlock::new).ok_or_else(|| invalid("hsa_amd_memory_pool_allocate", format!("{bytes} kernarg bytes")))?;
        let address = block.address();
        self.state().kernarg.push(block);
        Ok(address)
    }

    unsafe fn free_device(&self, p: DevicePtr) {
        self.state().device.free(p.0);
    }

    unsafe fn free_kernarg(&self, p: usize) {
        self.state().kernarg.retain(|b| b.address() != p);
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), HsaError> {
        let mut s = self.state();
        let (a, off) =
            s.device.find_range(dst.0, src.len()).ok_or_else(|| invalid("hsa_memory_copy", format!("{}+{} is no device allocation", dst.0, src.len())))?;
        let now = s.tick();
        s.device.get_mut(a).store(now, memory::Writer::Host, off, src);
        Ok(())
    }

    unsafe fn copy_from_device(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), HsaError> {
        let s = self.state();
        let (a, off) =
            s.device.find_range(src.0, dst.len()).ok_or_else(|| invalid("hsa_memory_copy", format!("{}+{} is no device allocation", src.0, dst.len())))?;
        let view = s.device.get(a).view(memory::Visibility { gpu: s.fences.host_sees, host: u64::MAX });
        dst.copy_from_slice(&view[off..off + dst.len()]);
        Ok(())
    }

    unsafe fn fill_device(&self, dst: DevicePtr, value: u32, words: u64) -> Result<(), HsaError> {
        let mut s = self.state();
        let len = usize::try_from(words.saturating_mul(4)).map_err(|_| invalid("hsa_amd_memory_fill", format!("{words} words")))?;
        let (a, off) = s.device.find(dst.0).ok_or_else(|| invalid("hsa_amd_memory_fill", format!("{:#x} is no device allocation", dst.0)))?;
        // The allocation granule is a page: a fill may cover the tail past the bytes asked for.
        let len = len.min(s.device.get(a).len() - off);
        let bytes: Vec<u8> = (0..len).map(|i| value.to_le_bytes()[i % 4]).collect();
        let now = s.tick();
        s.device.get_mut(a).store(now, memory::Writer::Host, off, &bytes);
        Ok(())
    }

    fn load_code_object(&self, agent: &AgentInfo, code: &[u8]) -> Result<Executable, HsaError> {
        let object = ostinato_hsa::codeobject::parse(code).map_err(|e| HsaError::Status {
            call: "hsa_executable_load_agent_code_object",
            status: 0x1010,
            name: format!("HSA_STATUS_ERROR_INVALID_CODE_OBJECT (simulated): {e}"),
        })?;
        let mut s = self.state();
        if object.isa != agent.name {
            return Err(HsaError::Status {
                call: "hsa_executable_load_agent_code_object",
                status: 0x100F,
                name: format!("HSA_STATUS_ERROR_INVALID_ISA (simulated): {} on a {}", object.isa, agent.name),
            });
        }
        let exe = s.handle(KERNEL_BASE);
        let mut objects = Vec::new();
        for info in object.kernels {
            let ko = s.handle(KERNEL_BASE);
            let twin = s.twins.get(&info.name).cloned();
            s.kernels.insert(ko, SimKernel { info, twin });
            objects.push(ko);
        }
        s.executables.insert(exe, objects);
        Ok(Executable(exe))
    }

    unsafe fn kernel_symbol(&self, exe: Executable, _agent: &AgentInfo, name: &str) -> Result<KernelSymbol, HsaError> {
        let s = self.state();
        let objects = s.executables.get(&exe.0).ok_or_else(|| invalid("hsa_executable_get_symbol_by_name", "unknown executable".into()))?;
        let (ko, k) =
            objects.iter().filter_map(|o| s.kernels.get(o).map(|k| (*o, k))).find(|(_, k)| k.info.symbol == name).ok_or_else(|| HsaError::Status {
                call: "hsa_executable_get_symbol_by_name",
                status: 0x1013,
                name: format!("HSA_STATUS_ERROR_INVALID_SYMBOL_NAME (simulated): {name}"),
            })?;
        if k.twin.is_none() {
            return Err(HsaError::Kernel {
                kernel: k.info.name.clone(),
                reason: "the simulator runs each dispatch through its kernel's host twin, and this kernel has none (the built-ins and the copy and fill kernels have theirs; a graph file's host implementation of a kernel is its twin under `ostinato run --simulate`)".into(),
            });
        }
        Ok(KernelSymbol {
            kernel_object: ko,
            kernarg_segment_size: k.info.kernarg_segment_size,
            kernarg_segment_alignment: k.info.kernarg_segment_align.max(16),
            group_segment_size: k.info.group_segment_fixed_size,
            private_segment_size: k.info.private_segment_fixed_size,
            dynamic_callstack: k.info.uses_dynamic_stack,
        })
    }

    unsafe fn destroy_executable(&self, exe: Executable) {
        let mut s = self.state();
        if let Some(objects) = s.executables.remove(&exe.0) {
            for o in objects {
                s.kernels.remove(&o);
            }
        }
    }

    fn take_queue_error(&self) -> Option<String> {
        self.state().fault.take()
    }
}

/// The least any future reader will see: dispatches from now on see at least what is acquired now,
/// and the host what it has acquired.
fn ostinato_aql_sim_compact_point(s: &State) -> memory::Visibility {
    memory::Visibility { gpu: s.fences.acquired.gpu.min(s.fences.host_sees), host: s.fences.acquired.host }
}
