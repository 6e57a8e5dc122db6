//! What a host kernel sees: typed, bounds- and access-checked views of its declared extents, its
//! scalars (slots read at the replay's value) and its launch geometry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ostinato::{Access, KernelSig, Launch, ParamKind, Scalar, ScalarType};

use crate::memory::HostMemory;

/// A host kernel body: runs one node; an `Err` is a fault of the kernel, reported with the node.
pub type KernelBody = Arc<dyn Fn(&KernelCtx) -> Result<(), String> + Send + Sync>;

/// A kernel's host implementation: its signature (checked against the graph's) and its body.
#[derive(Clone)]
pub struct HostKernel {
    pub sig: KernelSig,
    pub body: KernelBody,
}

impl std::fmt::Debug for HostKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostKernel({})", self.sig.name)
    }
}

impl HostKernel {
    pub fn new(sig: KernelSig, body: impl Fn(&KernelCtx) -> Result<(), String> + Send + Sync + 'static) -> Self {
        HostKernel { sig, body: Arc::new(body) }
    }

    /// Checks this implementation against the graph's signature: same count, same kinds in order.
    pub fn check_signature(&self, graph_sig: &KernelSig) -> Result<(), String> {
        if self.sig.params.len() != graph_sig.params.len() {
            return Err(format!("the graph declares {} params, the implementation {}", graph_sig.params.len(), self.sig.params.len()));
        }
        for (g, h) in graph_sig.params.iter().zip(&self.sig.params) {
            if g.kind != h.kind {
                return Err(format!("param `{}` is {} in the graph but {} in the implementation (`{}`)", g.name, describe(&g.kind), describe(&h.kind), h.name));
            }
        }
        Ok(())
    }
}

/// An argument of [`HostKernel::call`]: a buffer extent in one of the given memories, or a value.
#[derive(Clone, Copy, Debug)]
pub enum CallArg {
    /// `len` bytes at `start` of `memory[memory]`, touched as `access` allows.
    Buffer {
        memory: usize,
        start: u64,
        len: u64,
        access: Access,
    },
    Scalar(Scalar),
}

impl HostKernel {
    /// Runs this kernel's body once, outside any exec: `args` in signature order over `memory`. A
    /// tool that executes kernels elsewhere (a simulated GPU) runs their host twins through this. An
    /// `Err` (or a panic of the body) is the kernel's fault, as a message.
    pub fn call(&self, args: &[CallArg], memory: &[Arc<HostMemory>], launch: Launch) -> Result<(), String> {
        let prepared: Vec<PreparedArg> = args
            .iter()
            .map(|a| match *a {
                CallArg::Buffer { memory: m, start, len, access } => PreparedArg::Buffer { root: m, start, len, access },
                CallArg::Scalar(v) => PreparedArg::Scalar(v),
            })
            .collect();
        if let Some(m) = args.iter().find_map(|a| match a {
            CallArg::Buffer { memory: m, start, len, .. } if memory.get(*m).is_none_or(|mem| start.checked_add(*len).is_none_or(|e| e > mem.len())) => Some(*m),
            _ => None,
        }) {
            return Err(format!("kernel `{}`: a buffer argument lies outside memory {m}", self.sig.name));
        }
        let cx = KernelCtx { args: &prepared, memory, slots: &[], launch };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.body)(&cx))) {
            Ok(r) => r,
            Err(_) => Err(format!("kernel `{}` panicked", self.sig.name)),
        }
    }
}

fn describe(k: &ParamKind) -> String {
    match k {
        ParamKind::Buffer(a) => format!("a {} buffer", a.as_str()),
        ParamKind::Scalar(t) => format!("a {} scalar", t.as_str()),
    }
}

/// A resolved argument of a prepared node.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PreparedArg {
    Buffer { root: usize, start: u64, len: u64, access: Access },
    Scalar(Scalar),
    Slot { index: usize, ty: ScalarType },
}

/// The context a kernel body runs with.
pub struct KernelCtx<'a> {
    pub(crate) args: &'a [PreparedArg],
    pub(crate) memory: &'a [Arc<HostMemory>],
    pub(crate) slots: &'a [AtomicU64],
    pub launch: Launch,
}

impl KernelCtx<'_> {
    /// The buffer view of param `i`.
    pub fn buffer(&self, i: usize) -> Result<BufView<'_>, String> {
        match self.args.get(i) {
            Some(PreparedArg::Buffer { root, start, len, access }) => {
                Ok(BufView { mem: &self.memory[*root], start: *start, len: *len, access: *access, param: i })
            }
            _ => Err(format!("param {i} is not a buffer")),
        }
    }

    /// The scalar value of param `i` (a slot's current value for slot args).
    pub fn scalar(&self, i: usize) -> Result<Scalar, String> {
        match self.args.get(i) {
            Some(PreparedArg::Scalar(s)) => Ok(*s),
            Some(PreparedArg::Slot { index, ty }) => Ok(Scalar { ty: *ty, bits: self.slots[*index].load(Ordering::Acquire) }),
            _ => Err(format!("param {i} is not a scalar")),
        }
    }

    pub fn u32(&self, i: usize) -> Result<u32, String> {
        self.scalar(i).map(|s| s.as_u32())
    }
    pub fn f32(&self, i: usize) -> Result<f32, String> {
        self.scalar(i).map(|s| s.as_f32())
    }
}

/// A view of one declared extent. Every access is checked: outside the extent, or a store through a
/// `read` param, is a fault of the kernel (it broke its declared access) and fails the replay.
#[derive(Clone, Copy)]
pub struct BufView<'a> {
    mem: &'a HostMemory,
    start: u64,
    len: u64,
    access: Access,
    param: usize,
}

impl BufView<'_> {
    /// Bytes in the extent.
    pub fn len_bytes(&self) -> u64 {
        self.len
    }
    /// Whole 4-byte elements in the extent.
    pub fn len_u32(&self) -> usize {
        (self.len / 4) as usize
    }

    #[inline]
    fn at(&self, i: usize, write: bool) -> Result<u64, String> {
        self.check(i as u64 * 4, 4, write, || format!("element {i}"))
    }

    /// The first `count` elements as words, with every check done once: the extent must be 4-byte
    /// aligned and hold `count` elements, and the access mode must allow `write` (or reading).
    pub fn words(&self, count: usize, write: bool) -> Result<Words<'_>, String> {
        if count == 0 {
            return Ok(Words(&[]));
        }
        self.at(count - 1, write)?;
        if self.start % 4 != 0 {
            return Err(format!("param {} extent starts at byte {}, not 4-byte aligned", self.param, self.start));
        }
        Ok(Words(self.mem.words(self.start, count)))
    }

    /// Checks `n` bytes at `offset` of the extent for reading or writing; `what` names them in the
    /// error.
    #[inline]
    fn check(&self, offset: u64, n: u64, write: bool, what: impl Fn() -> String) -> Result<u64, String> {
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(format!("param {} {} lies outside its declared extent of {} bytes", self.param, what(), self.len));
        }
        if write && !self.access.writes() {
            return Err(format!("param {} is declared `{}` but the kernel writes it", self.param, self.access.as_str()));
        }
        if !write && !self.access.reads() {
            return Err(format!("param {} is declared `{}` but the kernel reads it", self.param, self.access.as_str()));
        }
        Ok(self.start + offset)
    }

    /// Copies `out.len()` bytes from `offset` of the extent (checked).
    pub fn read_bytes(&self, offset: u64, out: &mut [u8]) -> Result<(), String> {
        self.mem.read(self.check(offset, out.len() as u64, false, || format!("bytes {offset}+{}", out.len()))?, out);
        Ok(())
    }

    /// Copies `data` to `offset` of the extent (checked).
    pub fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        self.mem.write(self.check(offset, data.len() as u64, true, || format!("bytes {offset}+{}", data.len()))?, data);
        Ok(())
    }

    #[inline]
    pub fn load_u32(&self, i: usize) -> Result<u32, String> {
        Ok(self.mem.load_u32(self.at(i, false)?))
    }
    #[inline]
    pub fn store_u32(&self, i: usize, v: u32) -> Result<(), String> {
        self.mem.store_u32(self.at(i, true)?, v);
        Ok(())
    }
    #[inline]
    pub fn load_f32(&self, i: usize) -> Result<f32, String> {
        self.load_u32(i).map(f32::from_bits)
    }
    /// Stores an f32, a NaN as [`CANONICAL_NAN`] (as [`Words::set_f32`]).
    #[inline]
    pub fn store_f32(&self, i: usize, v: f32) -> Result<(), String> {
        self.store_u32(i, if v.is_nan() { CANONICAL_NAN } else { v.to_bits() })
    }
}

/// Checked, aligned elements of one extent (see [`BufView::words`]); indexing past them panics, which
/// the executor reports as a kernel fault.
/// The f32 NaN NVIDIA GPUs produce for every NaN result of float arithmetic; the host stores it for
/// every NaN (see [`Words::set_f32`]).
pub const CANONICAL_NAN: u32 = 0x7FFF_FFFF;

#[derive(Clone, Copy)]
pub struct Words<'a>(&'a [std::sync::atomic::AtomicU32]);

impl Words<'_> {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    #[inline]
    pub fn u32(&self, i: usize) -> u32 {
        self.0[i].load(Ordering::Relaxed)
    }
    #[inline]
    pub fn set_u32(&self, i: usize, v: u32) {
        self.0[i].store(v, Ordering::Relaxed)
    }
    #[inline]
    pub fn f32(&self, i: usize) -> f32 {
        f32::from_bits(self.u32(i))
    }
    /// Stores an f32; a NaN is stored as the canonical NaN `0x7FFF_FFFF`, which is what NVIDIA GPUs'
    /// float arithmetic produces for every NaN result (the CPU would keep an input NaN's payload, or make
    /// `0xFFC0_0000`), so that the host oracle and the GPU agree bit for bit. `set_u32` stores any bits.
    #[inline]
    pub fn set_f32(&self, i: usize, v: f32) {
        self.set_u32(i, if v.is_nan() { CANONICAL_NAN } else { v.to_bits() })
    }
}
