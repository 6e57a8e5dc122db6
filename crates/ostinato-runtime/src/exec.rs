//! One exec of any backend behind one object-safe trait, so a shell holds "an exec" without naming
//! its backend.

use std::any::Any;
use std::sync::Arc;

use ostinato::file::BufferInit;
use ostinato::{pieces, BufferId, Exec, Plan, Scalar, SlotId};
use ostinato_host::HostMemory;

use crate::error::RuntimeError;
use crate::kind::BackendKind;

/// Buffers by name, with their bytes, in declaration order.
pub type NamedBuffers = Vec<(String, Vec<u8>)>;

/// Memory the user owns, for binding a buffer at instantiation or rebinding it later.
#[derive(Clone, Debug)]
pub enum Memory {
    Host(Arc<HostMemory>),
    #[cfg(feature = "cuda")]
    Cuda(ostinato_cuda::DeviceMemory),
}

impl Memory {
    /// `len` zeroed bytes of host memory (an error, not an abort, when they cannot be had).
    pub fn host_zeroed(len: u64) -> Result<Memory, RuntimeError> {
        Ok(Memory::Host(Arc::new(HostMemory::try_zeroed(len).map_err(RuntimeError::Usage)?)))
    }
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Memory::Host(_) => "host",
            #[cfg(feature = "cuda")]
            Memory::Cuda(_) => "cuda",
        }
    }
    pub(crate) fn into_host(self, operation: &'static str) -> Result<Arc<HostMemory>, RuntimeError> {
        match self {
            Memory::Host(m) => Ok(m),
            #[allow(unreachable_patterns)]
            other => Err(RuntimeError::WrongMemory { operation, given: other.backend(), backend: "host" }),
        }
    }
    #[cfg(feature = "cuda")]
    pub(crate) fn into_cuda(self, operation: &'static str) -> Result<ostinato_cuda::DeviceMemory, RuntimeError> {
        match self {
            Memory::Cuda(m) => Ok(m),
            other => Err(RuntimeError::WrongMemory { operation, given: other.backend(), backend: "cuda" }),
        }
    }
}

/// A retained exec of any backend. The contract is [`ostinato::Exec`]'s, the same on every backend.
pub trait ExecHandle: Send {
    fn backend(&self) -> BackendKind;
    fn plan(&self) -> &Plan;
    /// Submits one replay of the whole plan (asynchronous backends return once submitted).
    fn replay(&mut self) -> Result<(), RuntimeError>;
    /// Returns once every submitted replay finished; reports their first failure.
    fn wait(&mut self) -> Result<(), RuntimeError>;
    /// Patches a slot for the following replays (its type is checked).
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), RuntimeError>;
    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), RuntimeError>;
    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), RuntimeError>;
    /// Rebinds a root buffer to other memory of the same length, between replays.
    fn rebind(&mut self, buffer: BufferId, memory: Memory) -> Result<(), RuntimeError>;
    /// Runs `replays` replays one after another with every node timed (CUPTI on CUDA, timestamp
    /// queries on Vulkan, the worker threads' clock on the host): the buffers end as after `replays`
    /// untraced replays. [`crate::trace`] draws the result.
    fn trace(&mut self, replays: usize) -> Result<ostinato::Trace, RuntimeError>;
    /// What the backend chose that a user may want to know (inline replays, programmatic edges).
    fn notes(&self) -> &[String];
    /// The backend's own exec (`ostinato_host::HostExec`, `ostinato_cuda::CudaExec`), for what only
    /// that backend offers.
    fn backend_exec(&mut self) -> &mut dyn Any;
}

impl dyn ExecHandle + '_ {
    /// A slot by name.
    pub fn slot_id(&self, name: &str) -> Result<SlotId, RuntimeError> {
        self.plan().graph().slot_by_name(name).ok_or_else(|| RuntimeError::UnknownName { what: "slot", name: name.into() })
    }
    /// A buffer by name.
    pub fn buffer_id(&self, name: &str) -> Result<BufferId, RuntimeError> {
        self.plan().graph().buffer_by_name(name).ok_or_else(|| RuntimeError::UnknownName { what: "buffer", name: name.into() })
    }
    /// Patches the slot called `name`.
    pub fn set_slot_named(&mut self, name: &str, value: Scalar) -> Result<(), RuntimeError> {
        let id = self.slot_id(name)?;
        self.set_slot(id, value)
    }
    /// Writes every buffer's initial contents (`None` entries, such as views, are skipped), in
    /// pieces of [`ostinato::PIECE`] bytes: no full host copy of a buffer is made.
    pub fn write_inits(&mut self, inits: &[Option<BufferInit>]) -> Result<(), RuntimeError> {
        let sizes: Vec<u64> = self.plan().graph().buffers().iter().map(|b| b.size).collect();
        ostinato::for_each_init_piece(inits, &sizes, |buffer, offset, bytes| self.write_buffer(buffer, offset, bytes))
    }

    /// Calls `f(name, offset, bytes)` for each root buffer, piece by piece ([`ostinato::PIECE`] bytes at a time).
    pub fn for_each_root_piece(&mut self, mut f: impl FnMut(&str, u64, &[u8]) -> Result<(), RuntimeError>) -> Result<(), RuntimeError> {
        let roots: Vec<(BufferId, String, u64)> = self.roots();
        let mut piece = Vec::new();
        for (id, name, size) in roots {
            for (offset, len) in pieces(size) {
                piece.resize(len, 0);
                self.read_buffer(id, offset, &mut piece)?;
                f(&name, offset, &piece)?;
            }
        }
        Ok(())
    }

    fn roots(&self) -> Vec<(BufferId, String, u64)> {
        self.plan()
            .graph()
            .buffers()
            .iter()
            .enumerate()
            .filter(|(i, b)| b.root.index() == *i)
            .map(|(i, b)| (BufferId(i as u32), b.name.clone(), b.size))
            .collect()
    }
    /// `len` bytes of `buffer` from `offset`, in a vector of their own: the range is checked against the
    /// buffer before anything is allocated, and the allocation is fallible (an error, never an abort).
    pub fn read_vec(&mut self, buffer: BufferId, offset: u64, len: u64) -> Result<Vec<u8>, RuntimeError> {
        ostinato::check_range(self.plan(), buffer, offset, len).map_err(|source| RuntimeError::Range { operation: "read", source })?;
        let name = self.plan().graph().buffer(buffer).name.clone();
        let mut out = zeroed_bytes(len, &name)?;
        self.read_buffer(buffer, offset, &mut out)?;
        Ok(out)
    }
    /// Every root buffer's bytes, by name, in declaration order (views are read through their roots).
    pub fn read_roots(&mut self) -> Result<NamedBuffers, RuntimeError> {
        let roots = self.roots();
        let mut out = Vec::with_capacity(roots.len());
        for (id, name, size) in roots {
            let mut bytes = zeroed_bytes(size, &name)?;
            self.read_buffer(id, 0, &mut bytes)?;
            out.push((name, bytes));
        }
        Ok(out)
    }
}

/// A zeroed host byte vector for buffer `name`, or an error naming it when it cannot be had.
pub(crate) fn zeroed_bytes(size: u64, name: &str) -> Result<Vec<u8>, RuntimeError> {
    let refuse = || RuntimeError::OutOfMemory(format!("buffer `{name}`: cannot allocate {size} bytes of host memory to stage it"));
    let n = usize::try_from(size).map_err(|_| refuse())?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| refuse())?;
    v.resize(n, 0);
    Ok(v)
}

/// Converts a [`Memory`] into a backend's own memory type (for `operation`, named in the error).
pub(crate) trait BackendMemory: Sized {
    fn from_memory(m: Memory, operation: &'static str) -> Result<Self, RuntimeError>;
}

impl BackendMemory for Arc<HostMemory> {
    fn from_memory(m: Memory, operation: &'static str) -> Result<Self, RuntimeError> {
        m.into_host(operation)
    }
}

#[cfg(feature = "cuda")]
impl BackendMemory for ostinato_cuda::DeviceMemory {
    fn from_memory(m: Memory, operation: &'static str) -> Result<Self, RuntimeError> {
        m.into_cuda(operation)
    }
}

/// The runtime's [`Memory`] has no Vulkan kind yet (the Vulkan crate's Rust API binds user memory:
/// `ostinato_vulkan::VulkanMemory`): through the runtime every Vulkan buffer is the exec's own.
#[cfg(feature = "vulkan")]
impl BackendMemory for ostinato_vulkan::VulkanMemory {
    fn from_memory(m: Memory, operation: &'static str) -> Result<Self, RuntimeError> {
        Err(RuntimeError::WrongMemory { operation, given: m.backend(), backend: "vulkan" })
    }
}

/// The HSA backend binds no user memory through the runtime yet: every buffer is the exec's own.
#[cfg(feature = "hsa")]
impl BackendMemory for ostinato_hsa::HsaMemory {
    fn from_memory(m: Memory, operation: &'static str) -> Result<Self, RuntimeError> {
        Err(RuntimeError::WrongMemory { operation, given: m.backend(), backend: "hsa" })
    }
}

/// A backend's exec as an [`ExecHandle`].
pub(crate) struct Wrapped<E> {
    pub exec: E,
    pub kind: BackendKind,
    pub notes: Vec<String>,
    /// The built-in launches' extents, checked again on every patch of a slot they read.
    pub extents: crate::extents::BuiltinExtents,
    /// Each slot's value from the next replay on (what a trace reports the replays ran with).
    pub slots: Vec<Scalar>,
}

impl<E> ExecHandle for Wrapped<E>
where
    E: Exec + Send + 'static,
    E::Memory: BackendMemory,
    RuntimeError: From<E::Error>,
{
    fn backend(&self) -> BackendKind {
        self.kind
    }
    fn plan(&self) -> &Plan {
        self.exec.plan()
    }
    fn replay(&mut self) -> Result<(), RuntimeError> {
        Ok(self.exec.replay()?)
    }
    fn wait(&mut self) -> Result<(), RuntimeError> {
        Ok(self.exec.wait()?)
    }
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), RuntimeError> {
        ostinato::check_slot(self.exec.plan(), slot, value)?;
        let mut extents = std::mem::take(&mut self.extents);
        let checked = extents.check_patch(self.exec.plan(), slot, value);
        self.extents = extents;
        checked?;
        self.exec.set_slot(slot, value)?;
        if let Some(s) = self.slots.get_mut(slot.index()) {
            *s = value;
        }
        Ok(())
    }
    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), RuntimeError> {
        Ok(self.exec.write_buffer(buffer, offset, data)?)
    }
    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), RuntimeError> {
        Ok(self.exec.read_buffer(buffer, offset, out)?)
    }
    fn rebind(&mut self, buffer: BufferId, memory: Memory) -> Result<(), RuntimeError> {
        Ok(self.exec.rebind(buffer, E::Memory::from_memory(memory, "rebind")?)?)
    }
    fn trace(&mut self, replays: usize) -> Result<ostinato::Trace, RuntimeError> {
        let mut t = self.exec.trace(replays)?;
        if t.slots.is_empty() {
            t.slots = self.slots.clone();
        }
        Ok(t)
    }
    fn notes(&self) -> &[String] {
        &self.notes
    }
    fn backend_exec(&mut self) -> &mut dyn Any {
        &mut self.exec
    }
}
