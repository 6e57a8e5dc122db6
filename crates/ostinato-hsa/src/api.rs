//! The HSA calls the backend makes, behind one trait: [`crate::rocr::Rocr`] implements it over
//! `libhsa-runtime64.so.1` loaded at run time; the `ostinato-aql-sim` test tool implements it with a
//! simulated packet processor. The backend writes AQL packets into the ring and kernel arguments into
//! kernarg memory itself, through the host addresses these calls return, exactly as on ROCr.

use std::time::Duration;

use crate::error::HsaError;

/// A signal (`hsa_signal_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(pub u64);

/// A device address (coarse-grained GPU memory: the host never dereferences it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevicePtr(pub u64);

/// A loaded, frozen executable (`hsa_executable_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Executable(pub u64);

/// A GPU agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentInfo {
    /// `hsa_agent_t`.
    pub handle: u64,
    /// The ISA name (`gfx1100`).
    pub name: String,
    /// The marketing name (`AMD Radeon RX 7900 XTX`), where the runtime says.
    pub product: String,
    /// `GPU-…`, where the runtime says.
    pub uuid: String,
    /// `0000:03:00.0`.
    pub pci_bus_id: String,
    pub compute_units: u32,
    pub wavefront_size: u32,
    pub workgroup_max_size: u32,
    pub queue_min_size: u32,
    pub queue_max_size: u32,
}

/// An AQL queue: its ring of `size` 64-byte packet slots at host address `ring`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueInfo {
    /// `hsa_queue_t*`.
    pub handle: u64,
    pub ring: usize,
    /// Packets; a power of two.
    pub size: u32,
    pub doorbell: Signal,
}

/// A kernel symbol of a loaded executable, as the runtime reports it (from the kernel descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT`: the kernel descriptor's device address.
    pub kernel_object: u64,
    pub kernarg_segment_size: u32,
    pub kernarg_segment_alignment: u32,
    pub group_segment_size: u32,
    pub private_segment_size: u32,
    pub dynamic_callstack: bool,
}

/// The HSA runtime calls the backend uses.
///
/// Handles passed to the `unsafe` methods must come from this same object and still be alive; the
/// backend never uses a handle after destroying or freeing it.
pub trait HsaApi: Send + Sync {
    /// What this is: the library loaded and its path, or the simulator and its seed.
    fn describe(&self) -> String;
    /// True for the simulated packet processor (every result it gives is a simulated one).
    fn is_simulated(&self) -> bool;
    /// The GPU agents, in the runtime's order.
    fn agents(&self) -> Result<Vec<AgentInfo>, HsaError>;
    /// A single-producer AQL queue of at least `packets` slots (a power of two) on `agent`.
    fn create_queue(&self, agent: &AgentInfo, packets: u32) -> Result<QueueInfo, HsaError>;
    /// # Safety
    /// `q` came from [`HsaApi::create_queue`] and is used no more.
    unsafe fn destroy_queue(&self, q: &QueueInfo);
    /// `hsa_queue_load_read_index_scacquire`.
    /// # Safety
    /// `q` is a live queue of this runtime.
    unsafe fn load_read_index(&self, q: &QueueInfo) -> u64;
    /// `hsa_queue_load_write_index_relaxed`.
    /// # Safety
    /// `q` is a live queue of this runtime.
    unsafe fn load_write_index(&self, q: &QueueInfo) -> u64;
    /// `hsa_queue_store_write_index_relaxed`.
    /// # Safety
    /// `q` is a live queue of this runtime.
    unsafe fn store_write_index(&self, q: &QueueInfo, index: u64);
    /// `hsa_signal_store_screlease(q->doorbell_signal, last_index)`: packets up to `last_index` are
    /// published.
    /// # Safety
    /// `q` is a live queue of this runtime.
    unsafe fn ring_doorbell(&self, q: &QueueInfo, last_index: u64);
    fn create_signal(&self, initial: i64) -> Result<Signal, HsaError>;
    /// # Safety
    /// `s` came from [`HsaApi::create_signal`], no packet in flight uses it, and it is used no more.
    unsafe fn destroy_signal(&self, s: Signal);
    /// `hsa_signal_store_relaxed`.
    /// # Safety
    /// `s` is a live signal of this runtime.
    unsafe fn store_signal(&self, s: Signal, value: i64);
    /// `hsa_signal_load_scacquire`.
    /// # Safety
    /// `s` is a live signal of this runtime.
    unsafe fn load_signal(&self, s: Signal) -> i64;
    /// `hsa_signal_wait_scacquire(s, LT, value, timeout)`: the value observed (which may still be
    /// `>= value`: the wait may return early).
    /// # Safety
    /// `s` is a live signal of this runtime.
    unsafe fn wait_signal_below(&self, s: Signal, value: i64, timeout: Duration) -> i64;
    /// Coarse-grained device memory of `agent`.
    fn allocate_device(&self, agent: &AgentInfo, bytes: u64) -> Result<DevicePtr, HsaError>;
    /// Host memory for kernel arguments (the kernarg pool), visible to `agent`: its host address.
    fn allocate_kernarg(&self, agent: &AgentInfo, bytes: u64) -> Result<usize, HsaError>;
    /// # Safety
    /// `p` came from [`HsaApi::allocate_device`], nothing in flight uses it, and it is used no more.
    unsafe fn free_device(&self, p: DevicePtr);
    /// # Safety
    /// `p` came from [`HsaApi::allocate_kernarg`], nothing in flight uses it, and it is used no more.
    unsafe fn free_kernarg(&self, p: usize);
    /// `hsa_memory_copy` from host bytes to device memory.
    /// # Safety
    /// `dst` points at `src.len()` bytes of live device memory of this runtime.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), HsaError>;
    /// `hsa_memory_copy` from device memory to host bytes.
    /// # Safety
    /// `src` points at `dst.len()` bytes of live device memory of this runtime.
    unsafe fn copy_from_device(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), HsaError>;
    /// `hsa_amd_memory_fill`: `words` u32s of `value`.
    /// # Safety
    /// `dst` points at `4 * words` bytes of live device memory of this runtime.
    unsafe fn fill_device(&self, dst: DevicePtr, value: u32, words: u64) -> Result<(), HsaError>;
    /// Loads a code object for `agent` into a new frozen executable.
    fn load_code_object(&self, agent: &AgentInfo, code: &[u8]) -> Result<Executable, HsaError>;
    /// The kernel symbol `name` (`<kernel>.kd`).
    /// # Safety
    /// `exe` is a live executable of this runtime.
    unsafe fn kernel_symbol(&self, exe: Executable, agent: &AgentInfo, name: &str) -> Result<KernelSymbol, HsaError>;
    /// # Safety
    /// `exe` came from [`HsaApi::load_code_object`], nothing in flight runs its kernels, and it is
    /// used no more.
    unsafe fn destroy_executable(&self, exe: Executable);
    /// An asynchronous error the runtime reported (a queue error), if any since the last call.
    fn take_queue_error(&self) -> Option<String>;
}
