//! The contract every backend implements. A backend only translates a [`Plan`]: it never re-derives
//! hazards, and it submits exactly the plan's edges (or a stronger ordering it documents).

use crate::error::{BindError, SlotError, UsageError};
use crate::graph::{BufferId, KernelSig, Scalar, SlotId};
use crate::kernel_ref::KernelRef;
use crate::plan::Plan;
use crate::trace::Trace;

/// Where a buffer's memory comes from at instantiation.
#[derive(Clone, Debug)]
pub enum BufferBinding<M> {
    /// The exec allocates (and frees) the buffer, zeroed at instantiate on every backend: bytes no
    /// node or write touches read as zeros.
    Allocate,
    /// Memory the user owns and keeps alive for the exec's lifetime; its length is checked. Its bytes
    /// are the user's: instantiate and `rebind` neither zero nor write them.
    External(M),
}

/// One `Allocate` binding per buffer of `plan`: the exec owns all its memory.
pub fn allocate_all<M>(plan: &Plan) -> Vec<BufferBinding<M>> {
    plan.graph().buffers().iter().map(|_| BufferBinding::Allocate).collect()
}

/// A backend: turns kernel references into its kernels, and a plan plus bindings into a retained
/// [`Exec`].
pub trait Backend {
    /// One kernel's implementation on this backend (a host function, a CUDA function, a pipeline).
    type Kernel;
    /// User-owned memory this backend can bind a buffer to.
    type Memory;
    type Exec: Exec<Memory = Self::Memory, Error = Self::Error>;
    type Error: std::error::Error + Send + Sync + 'static;

    fn name(&self) -> &'static str;

    /// Turns `reference` (a built-in's name, a file, the backend's options) into this backend's
    /// implementation of `sig`, checked against it: a kernel that takes other params, an unknown
    /// built-in, a file the backend cannot read and an option it does not know are errors naming the
    /// kernel. Nothing is guessed.
    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<Self::Kernel, Self::Error>;

    /// Instantiates `plan`. `kernels[k]` implements the graph's kernel `k`; `buffers[b]` binds buffer
    /// `b` (views must be `Allocate`: they share their root's memory). On error nothing is left alive.
    fn instantiate(&self, plan: &Plan, kernels: Vec<Self::Kernel>, buffers: Vec<BufferBinding<Self::Memory>>) -> Result<Self::Exec, Self::Error>;
}

/// A retained, replayable instantiation of a plan.
///
/// The contract every backend keeps:
/// - `replay` submits the whole plan once; `wait` returns when every submitted replay finished and
///   reports the first failure among them.
/// - `set_slot` checks the value against the slot's declared type (a wrong type is refused and the
///   slot keeps its value) and gives every use of the slot the new value from the next `replay` on.
///   Replays submitted before it keep the value they were submitted with, or — on a backend that
///   cannot snapshot — the call is refused while one is in flight; it never changes a replay already
///   submitted, and it never re-records or re-plans.
/// - `rebind` points a root buffer at other memory of the same length from the next replay on (views
///   of it follow); it is refused while a replay is in flight, for a view, and at another length.
///   After it returns the exec no longer touches the previous memory (memory the exec had allocated
///   itself is freed). The new memory is used as it is: its bytes are the user's, not zeroed.
/// - `write_buffer` and `read_buffer` wait for submitted replays first.
/// - `trace(n)` waits for submitted replays, then runs `n` replays one after another with every node
///   timed (`docs/trace.md`): the buffers end as after `n` replays, with the same bytes; a backend
///   that cannot time nodes (no profiling library, a queue without timestamps) refuses with an error
///   naming what is missing and runs nothing. Untraced replays pay nothing for it.
pub trait Exec {
    type Error: std::error::Error + Send + Sync + 'static;
    /// User-owned memory a buffer can be rebound to (the backend's [`Backend::Memory`]).
    type Memory;

    fn plan(&self) -> &Plan;
    /// Submits one replay of the whole plan. On asynchronous backends it returns once submitted.
    fn replay(&mut self) -> Result<(), Self::Error>;
    /// Blocks until every submitted replay finished; reports any failure of theirs.
    fn wait(&mut self) -> Result<(), Self::Error>;
    /// Patches a slot for the following replays. Refused while a replay is in flight.
    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), Self::Error>;
    /// Writes bytes into a buffer (no replay in flight).
    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), Self::Error>;
    /// Reads bytes of a buffer (no replay in flight).
    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), Self::Error>;
    /// Rebinds root buffer `buffer` to `memory` (same length) for the following replays.
    fn rebind(&mut self, buffer: BufferId, memory: Self::Memory) -> Result<(), Self::Error>;
    /// Runs `replays` replays one after another, each node timed: one [`Trace`] of them all.
    fn trace(&mut self, replays: usize) -> Result<Trace, Self::Error>;
}

/// For a backend whose exec drives one device: every buffer must lie on device 0 (`Err` names the
/// first that does not, and its device).
pub fn check_single_device(plan: &Plan, backend: &str) -> Result<(), UsageError> {
    match plan.graph().buffers().iter().find(|b| b.device != 0) {
        Some(b) => Err(UsageError::OtherDevice { buffer: b.name.clone(), device: b.device, backend: backend.to_string() }),
        None => Ok(()),
    }
}

/// Checks a rebinding against the plan: a known root buffer (views follow their root), and memory of
/// its declared length.
pub fn check_rebind(plan: &Plan, buffer: BufferId, len: u64) -> Result<(), BindError> {
    let g = plan.graph();
    let decl = g.buffers().get(buffer.index()).ok_or_else(|| BindError::BufferSize { buffer: format!("#{buffer}"), expected: 0, got: len })?;
    if decl.root != buffer {
        return Err(BindError::BindView { buffer: decl.name.clone(), root: g.buffer(decl.root).name.clone() });
    }
    if len != decl.size {
        return Err(BindError::BufferSize { buffer: decl.name.clone(), expected: decl.size, got: len });
    }
    Ok(())
}

/// Binds every kernel of `plan` on `backend` with [`Backend::bind_kernel`], kernel `k` from
/// `reference(k)`; the first refusal is returned (it names the kernel).
pub fn bind_all<B: Backend>(backend: &B, plan: &Plan, reference: impl Fn(usize) -> KernelRef) -> Result<Vec<B::Kernel>, B::Error> {
    plan.graph().kernels().iter().enumerate().map(|(k, sig)| backend.bind_kernel(sig, &reference(k))).collect()
}

/// Binds every kernel of `plan` on `backend` to the built-in of the kernel's own name.
pub fn bind_builtins<B: Backend>(backend: &B, plan: &Plan) -> Result<Vec<B::Kernel>, B::Error> {
    bind_all(backend, plan, |k| KernelRef::builtin(&plan.graph().kernels()[k].name))
}

/// Checks a slot patch against the plan: known slot, same type.
pub fn check_slot(plan: &Plan, slot: SlotId, value: Scalar) -> Result<(), SlotError> {
    let decl = plan.graph().slots().get(slot.index()).ok_or(SlotError::Unknown(slot.0))?;
    if decl.ty != value.ty {
        return Err(SlotError::WrongType { slot: decl.name.clone(), expected: decl.ty.as_str(), got: value.ty.as_str() });
    }
    Ok(())
}

/// Checks the shape of bindings against the plan: one kernel per signature, one binding per buffer, no
/// external binding of a view, and external lengths equal to the declared sizes.
pub fn check_bindings<M>(plan: &Plan, kernel_count: usize, buffers: &[BufferBinding<M>], len_of: impl Fn(&M) -> u64) -> Result<(), BindError> {
    let g = plan.graph();
    if kernel_count != g.kernels().len() {
        return Err(BindError::Signature { kernel: "*".into(), reason: format!("{} implementations given for {} kernels", kernel_count, g.kernels().len()) });
    }
    if buffers.len() != g.buffers().len() {
        return Err(BindError::BufferSize { buffer: "*".into(), expected: g.buffers().len() as u64, got: buffers.len() as u64 });
    }
    for (i, (decl, b)) in g.buffers().iter().zip(buffers).enumerate() {
        if let BufferBinding::External(m) = b {
            if decl.root.index() != i {
                return Err(BindError::BindView { buffer: decl.name.clone(), root: g.buffer(decl.root).name.clone() });
            }
            let got = len_of(m);
            if got != decl.size {
                return Err(BindError::BufferSize { buffer: decl.name.clone(), expected: decl.size, got });
            }
        }
    }
    Ok(())
}

/// Where a root buffer's memory lies, for telling whether two roots share bytes: an address space (one
/// for a process's device or host addresses; a Vulkan buffer's handle) and a byte range in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryExtent {
    pub space: u64,
    pub start: u64,
    pub len: u64,
}

/// An address space, the furthest end reached in it, and the buffer whose extent reaches there.
type Reach = (u64, u64, usize);

/// Refuses roots bound to overlapping memory where some node writes one of them: the plan orders
/// only what the graph says shares bytes (views of one root), so their nodes would race. Roots that
/// no node writes may share memory (tied weights bound twice). `extents[i]` is buffer `i`'s memory
/// where it is a root whose memory is known (`None` for a view, or memory the exec allocated itself,
/// which overlaps nothing). One sort and one sweep: O(n log n) in the roots, plus the plan's accesses.
pub fn check_disjoint_roots(plan: &Plan, extents: &[Option<MemoryExtent>]) -> Result<(), BindError> {
    let g = plan.graph();
    let written = g.written_roots();
    let mut known: Vec<(MemoryExtent, usize)> = extents.iter().enumerate().filter_map(|(i, e)| e.filter(|e| e.len > 0).map(|e| (e, i))).collect();
    known.sort_by_key(|(e, _)| (e.space, e.start));
    // Sweeping by start: the furthest end so far of any extent, and of a written one (with whose).
    let (mut any, mut wrote): (Option<Reach>, Option<Reach>) = (None, None);
    let name = |k: usize| g.buffers().get(k).map_or_else(|| format!("#{k}"), |d| d.name.clone());
    for &(e, i) in &known {
        let is_written = written.get(i).copied().unwrap_or(true);
        let reaches = |r: Option<Reach>| r.filter(|&(space, end, _)| space == e.space && e.start < end).map(|(_, _, j)| j);
        if let Some(j) = reaches(wrote).or(if is_written { reaches(any) } else { None }) {
            return Err(BindError::SharedMemory { a: name(j), b: name(i) });
        }
        let end = e.start.saturating_add(e.len);
        let further = |r: Option<Reach>| match r {
            Some((space, far, j)) if space == e.space && far >= end => Some((space, far, j)),
            _ => Some((e.space, end, i)),
        };
        any = further(any);
        if is_written {
            wrote = further(wrote);
        }
    }
    Ok(())
}

/// Checks that an in-bounds `len`-byte access at `offset` fits buffer `buffer`.
pub fn check_range(plan: &Plan, buffer: BufferId, offset: u64, len: u64) -> Result<(), UsageError> {
    let b = plan.graph().buffers().get(buffer.index()).ok_or(UsageError::UnknownBuffer { id: buffer.0 })?;
    if offset.checked_add(len).is_none_or(|e| e > b.size) {
        return Err(UsageError::OutOfRange { buffer: b.name.clone(), offset, len, size: b.size });
    }
    Ok(())
}

/// Writes every buffer's initial contents (`None` entries, such as views, are skipped).
pub fn write_inits<E: Exec>(exec: &mut E, inits: &[Option<crate::file::BufferInit>]) -> Result<(), E::Error> {
    let sizes: Vec<u64> = exec.plan().graph().buffers().iter().map(|b| b.size).collect();
    for_each_init_piece(inits, &sizes, |buffer, offset, bytes| exec.write_buffer(buffer, offset, bytes))
}

/// How many bytes are staged at a time when a buffer is initialised, compared or dumped.
pub const PIECE: usize = 1 << 20;

/// `(offset, len)` of each [`PIECE`] of a `size`-byte buffer.
pub fn pieces(size: u64) -> impl Iterator<Item = (u64, usize)> {
    (0..size.div_ceil(PIECE as u64)).map(move |i| (i * PIECE as u64, (size - i * PIECE as u64).min(PIECE as u64) as usize))
}

/// Calls `write(buffer, offset, bytes)` with each buffer's initial contents (`inits[b]`, for buffers of
/// `sizes[b]` bytes; `None` entries, such as views, are skipped), a [`PIECE`] at a time: no full host
/// copy of a buffer is made.
pub fn for_each_init_piece<E>(
    inits: &[Option<crate::file::BufferInit>],
    sizes: &[u64],
    mut write: impl FnMut(BufferId, u64, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut piece = Vec::new();
    for (i, (init, &size)) in inits.iter().zip(sizes).enumerate() {
        if let Some(init) = init {
            let mut stream = init.stream();
            for (offset, len) in pieces(size) {
                piece.resize(len, 0);
                stream.fill_next(&mut piece);
                write(BufferId(i as u32), offset, &piece)?;
            }
        }
    }
    Ok(())
}

/// Reads every root buffer (views are read through their roots): `(id, bytes)` in buffer order.
pub fn read_roots<E: Exec>(exec: &mut E) -> Result<Vec<(BufferId, Vec<u8>)>, E::Error> {
    let roots: Vec<(BufferId, u64)> =
        exec.plan().graph().buffers().iter().enumerate().filter(|(i, b)| b.root.index() == *i).map(|(i, b)| (BufferId(i as u32), b.size)).collect();
    let mut out = Vec::with_capacity(roots.len());
    for (id, size) in roots {
        let mut bytes = vec![0u8; size as usize];
        exec.read_buffer(id, 0, &mut bytes)?;
        out.push((id, bytes));
    }
    Ok(out)
}
