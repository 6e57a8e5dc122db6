//! What a host kernel sees: typed, bounds- and access-checked views of its declared extents, its
//! scalars (slots read at the replay's value) and its launch geometry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ostinato::{Access, KernelSig, Launch, ParamKind, Scalar, ScalarType, TileMap};

use crate::memory::HostMemory;

/// A host kernel body: runs one node; an `Err` is a fault of the kernel, reported with the node.
pub type KernelBody = Arc<dyn Fn(&KernelCtx) -> Result<(), String> + Send + Sync>;

/// A kernel's host implementation: its signature (checked against the graph's) and its body.
#[derive(Clone)]
pub struct HostKernel {
    pub sig: KernelSig,
    pub body: KernelBody,
    /// The body runs once per block of the launch ([`KernelCtx::block`]), as the GPU runs it, so that
    /// a node's tile maps can be checked access by access; `false`: once for the whole launch.
    pub per_block: bool,
}

impl std::fmt::Debug for HostKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostKernel({})", self.sig.name)
    }
}

impl HostKernel {
    pub fn new(sig: KernelSig, body: impl Fn(&KernelCtx) -> Result<(), String> + Send + Sync + 'static) -> Self {
        HostKernel { sig, body: Arc::new(body), per_block: false }
    }

    /// A body that computes one block of the launch per call (its index in [`KernelCtx::block`]); the
    /// exec calls it for every block in turn. A node whose params carry tile maps needs such a body:
    /// each access of block `b` is checked against block `b`'s tile.
    pub fn per_block(sig: KernelSig, body: impl Fn(&KernelCtx) -> Result<(), String> + Send + Sync + 'static) -> Self {
        HostKernel { sig, body: Arc::new(body), per_block: true }
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
        let prepared = self.prepare_call(args, memory)?;
        let cx = KernelCtx { args: &prepared, memory, slots: &[], launch, block: None, tiles: &[], names: Some(&self.sig) };
        self.unwound(|| self.run(&cx))
    }

    /// Runs block `block` of a launch of this per-block kernel, outside any exec, with `tiles` (per
    /// param, the node's map or `None`; empty: none) checked as an exec checks them. A tool that runs
    /// blocks in an order of its own (a simulated fused kernel, whose blocks run in any order) calls
    /// this. A body of the whole launch is refused.
    pub fn call_block(&self, args: &[CallArg], memory: &[Arc<HostMemory>], launch: Launch, block: [u32; 3], tiles: &[Option<TileMap>]) -> Result<(), String> {
        if !self.per_block {
            return Err(format!("kernel `{}` runs the whole launch in one call: it has no block to run", self.sig.name));
        }
        if (0..3).any(|d| block[d] >= launch.grid[d]) {
            return Err(format!("block {block:?} is outside the grid {:?}", launch.grid));
        }
        let prepared = self.prepare_call(args, memory)?;
        let cx = KernelCtx { args: &prepared, memory, slots: &[], launch, block: Some(block), tiles, names: Some(&self.sig) };
        self.unwound(|| (self.body)(&cx))
    }

    /// `args` as the body reads them, each buffer within its memory (else an error naming the memory).
    fn prepare_call(&self, args: &[CallArg], memory: &[Arc<HostMemory>]) -> Result<Vec<PreparedArg>, String> {
        let outside = |a: &CallArg| match *a {
            CallArg::Buffer { memory: m, start, len, .. } => memory.get(m).is_none_or(|mem| start.checked_add(len).is_none_or(|e| e > mem.len())).then_some(m),
            CallArg::Scalar(_) => None,
        };
        if let Some(m) = args.iter().find_map(outside) {
            return Err(format!("kernel `{}`: a buffer argument lies outside memory {m}", self.sig.name));
        }
        Ok(args
            .iter()
            .map(|a| match *a {
                CallArg::Buffer { memory: m, start, len, access } => PreparedArg::Buffer { root: m, start, len, access },
                CallArg::Scalar(v) => PreparedArg::Scalar(v),
            })
            .collect())
    }

    /// `body`'s result, or an error naming this kernel where it panicked.
    fn unwound(&self, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|_| Err(format!("kernel `{}` panicked", self.sig.name)))
    }

    /// Runs the body over `cx`'s launch: once, or once per block (x fastest) for a per-block body.
    pub(crate) fn run(&self, cx: &KernelCtx) -> Result<(), String> {
        if !self.per_block {
            return (self.body)(cx);
        }
        let grid = cx.launch.grid;
        let blocks = ostinato::tiles::block_count(grid);
        for i in 0..blocks {
            let block = ostinato::tiles::block_at(grid, i);
            (self.body)(&KernelCtx { block: Some(block), ..*cx }).map_err(|e| if blocks > 1 { format!("block {block:?}: {e}") } else { e })?;
        }
        Ok(())
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
#[derive(Clone, Copy)]
pub struct KernelCtx<'a> {
    pub(crate) args: &'a [PreparedArg],
    pub(crate) memory: &'a [Arc<HostMemory>],
    pub(crate) slots: &'a [AtomicU64],
    pub launch: Launch,
    /// The block a per-block body computes ([`HostKernel::per_block`]); `None` for a whole launch.
    pub(crate) block: Option<[u32; 3]>,
    /// Per param, the node's tile map (empty, or one entry per param).
    pub(crate) tiles: &'a [Option<TileMap>],
    /// The signature, for param names in messages.
    pub(crate) names: Option<&'a KernelSig>,
}

impl KernelCtx<'_> {
    /// The buffer view of param `i`. In a per-block body, a param with a tile map admits only the
    /// bytes of this block's tile.
    pub fn buffer(&self, i: usize) -> Result<BufView<'_>, String> {
        match self.args.get(i) {
            Some(PreparedArg::Buffer { root, start, len, access }) => {
                let tile = match (self.block, self.tiles.get(i)) {
                    (Some(b), Some(Some(m))) => Some((m, b)),
                    _ => None,
                };
                let name = self.names.and_then(|s| s.params.get(i)).map_or("", |p| p.name.as_str());
                Ok(BufView { mem: &self.memory[*root], start: *start, len: *len, access: *access, param: i, name, tile })
            }
            _ => Err(format!("param {i} is not a buffer")),
        }
    }

    /// The block this per-block body computes; `[0, 0, 0]` for a body of the whole launch.
    pub fn block(&self) -> [u32; 3] {
        self.block.unwrap_or([0, 0, 0])
    }

    /// The element runs a grid-stride loop over `n` elements gives this block, as `f(first, end)`: a
    /// GPU kernel's thread `t` of block `b` (linear indices, `T` threads a block, `G` blocks) takes
    /// elements `b·T + t + k·G·T`, so block `b` takes `b·T + k·G·T .. + T` for `k = 0, 1, …`. A body
    /// of the whole launch takes every element at once.
    pub fn grid_stride(&self, n: u64, mut f: impl FnMut(u64, u64) -> Result<(), String>) -> Result<(), String> {
        let Some(block) = self.block else { return if n == 0 { Ok(()) } else { f(0, n) } };
        let threads: u64 = self.launch.block.iter().map(|&d| u64::from(d)).product();
        let blocks = ostinato::tiles::block_count(self.launch.grid);
        let g = self.launch.grid;
        let b = u64::from(block[0]) + u64::from(g[0]) * (u64::from(block[1]) + u64::from(g[1]) * u64::from(block[2]));
        let mut start = b * threads;
        while start < n {
            f(start, (start + threads).min(n))?;
            start += blocks * threads;
        }
        Ok(())
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
    name: &'a str,
    /// The tile map that bounds this block's accesses, and the block.
    tile: Option<(&'a TileMap, [u32; 3])>,
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
        self.words_range(0, count, write)
    }

    /// Elements `first..first + count` as words (indexed from 0), checked once as [`BufView::words`]
    /// checks: in the extent, aligned, the mode allowing `write`, and in a per-block body with a tile
    /// map, every byte in this block's tile.
    pub fn words_range(&self, first: usize, count: usize, write: bool) -> Result<Words<'_>, String> {
        if count == 0 {
            return Ok(Words(&[]));
        }
        let (offset, bytes) = ((first as u64).saturating_mul(4), (count as u64).saturating_mul(4));
        self.check(offset, bytes, write, || format!("elements {first}..{}", first as u64 + count as u64))?;
        if self.start % 4 != 0 {
            return Err(format!("param {} extent starts at byte {}, not 4-byte aligned", self.param, self.start));
        }
        Ok(Words(self.mem.words(self.start + offset, count)))
    }

    /// Checks `n` bytes at `offset` of the extent for reading or writing; `what` names them in the
    /// error.
    #[inline]
    fn check(&self, offset: u64, n: u64, write: bool, what: impl Fn() -> String) -> Result<u64, String> {
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(format!("param {} {} lies outside its declared extent of {} bytes", self.param, what(), self.len));
        }
        if let Some((map, block)) = self.tile {
            if !map.covers(block, offset, offset + n) {
                return Err(format!(
                    "param `{}` {} (bytes {offset}..{} of its extent) lies outside block {block:?}'s tile: the kernel broke its declared tile map",
                    self.name,
                    what(),
                    offset + n
                ));
            }
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
