//! reduction: the sum of n elements added into one output, in f32 and u32, four ways — every thread's
//! sum by an atomic (`atomic`), warp shuffles then an atomic per warp (`warp`), a shared-memory tree then
//! an atomic per block (`tree`), per-block partials summed by the last block (`partials`) — over 256
//! elements (one block) to 8 M (32 MB per op); the two-stage reduction (partials, then a one-block final
//! sum) is `two_stage`.
//!
//! The checks are exact. u32 sums wrap, so every order gives the same word. An f32 sum that atomics
//! combine has no fixed order, so the rows feed those kernels integers of at most `k` in magnitude with
//! `n · k ≤ 2^23`: every partial sum of any order is then an integer below 2^24 — exactly an f32 — and
//! every order gives the same f32 (the host twin checks that the data keep that promise). The
//! fixed-order kernels (`partials`, `two_stage`) take random floats, and their host twins add in the
//! kernels' order: thread by thread in grid-stride order, then the block's tree, then the partials.

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};
use ostinato_host::kernel::{KernelCtx, Words};

use super::Scope;
use crate::pack::{CudaUnit, PackKernel, Wgsl};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Generate, Mode, Workload};
use crate::BenchBackend;

/// Threads per block of every reduction kernel (`RB` in `reduce.cu`; the WGSL workgroup).
pub const BLOCK: u32 = 256;

/// The element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    U32,
}

impl Elem {
    pub const BOTH: [Elem; 2] = [Elem::F32, Elem::U32];
    pub fn as_str(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::U32 => "u32",
        }
    }
    fn zero(self) -> u32 {
        0
    }
    /// `a + b` on the bits of two elements.
    #[inline]
    pub fn add(self, a: u32, b: u32) -> u32 {
        match self {
            Elem::F32 => (f32::from_bits(a) + f32::from_bits(b)).to_bits(),
            Elem::U32 => a.wrapping_add(b),
        }
    }
}

/// How one reduction kernel combines its threads' sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Atomic,
    Warp,
    Tree,
    Partials,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Variant::Atomic, Variant::Warp, Variant::Tree, Variant::Partials];
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Atomic => "atomic",
            Variant::Warp => "warp",
            Variant::Tree => "tree",
            Variant::Partials => "partials",
        }
    }
    /// Atomics combine the sums (in no fixed order).
    fn unordered(self) -> bool {
        self != Variant::Partials
    }
    /// The most blocks a launch takes: a thread atomic per element of a large grid would serialise on
    /// one address, so the atomic kernel keeps its grid at two blocks per SM (each thread sums more).
    fn max_blocks(self) -> u32 {
        if self == Variant::Atomic {
            256
        } else {
            1024
        }
    }
}

/// Blocks of a launch over `n` elements: four per thread, at most `max`.
pub fn blocks(n: u32, max: u32) -> u32 {
    n.div_ceil(4 * BLOCK).clamp(1, max)
}

/// The WGSL of a reduction kernel: the shared tree, the grid-stride sum where it reads x, the element's
/// helpers, the kernel; `ELEM` filled in, and `ACC` (the atomic accumulator's type) u32. An f32 sum
/// into an atomic accumulator (`atomic_acc`) has two versions: a compare-exchange loop on the bits,
/// and, for a device with f32 atomic adds, one `atomicAdd` on an `atomic<f32>` (CUDA's `atomicAdd`).
pub fn wgsl(kernel: &str, elem: Elem, reads_x: bool, atomic_acc: bool) -> Wgsl {
    let ty = elem.as_str();
    let bits = match elem {
        Elem::F32 => include_str!("../../kernels/reduce_bits.f32.wgsl"),
        Elem::U32 => include_str!("../../kernels/reduce_bits.u32.wgsl"),
    };
    let local = if reads_x { include_str!("../../kernels/reduce_local.wgsl") } else { "" };
    let with = |add: &str, acc: &str| {
        format!("{kernel}\n{}\n{local}\n{bits}\n{add}", include_str!("../../kernels/reduce_common.wgsl")).replace("ELEM", ty).replace("ACC", acc)
    };
    match (atomic_acc, elem) {
        (false, _) => Wgsl::one(with("", "u32")),
        (true, Elem::U32) => Wgsl::one(with(include_str!("../../kernels/reduce_atomic_add.u32.wgsl"), "u32")),
        (true, Elem::F32) => Wgsl::with_float_atomic_add(
            with(include_str!("../../kernels/reduce_atomic_add.f32.wgsl"), "u32"),
            with(include_str!("../../kernels/reduce_atomic_add.f32-native.wgsl"), "f32"),
        ),
    }
}

/// The words of a checked view as element bits.
fn sum_seq(elem: Elem, x: &Words<'_>, n: usize) -> u32 {
    (0..n).fold(elem.zero(), |s, i| elem.add(s, x.u32(i)))
}

/// Each thread's grid-stride sum (thread g: `x[g]`, `x[g + G]`, ...), as the kernels add.
pub fn thread_sums(elem: Elem, x: &Words<'_>, n: usize, threads: usize) -> Vec<u32> {
    (0..threads).map(|g| (g..n).step_by(threads.max(1)).fold(elem.zero(), |s, i| elem.add(s, x.u32(i)))).collect()
}

/// The shared-memory tree of `v` (one block's values): `v[t] += v[t + o]` for o = 128, 64, ..., 1.
pub fn tree(elem: Elem, v: &mut [u32]) -> u32 {
    let mut o = v.len() / 2;
    while o > 0 {
        for t in 0..o {
            v[t] = elem.add(v[t], v[t + o]);
        }
        o /= 2;
    }
    v[0]
}

/// Each block's tree of its threads' grid-stride sums, in block order.
pub fn block_partials(elem: Elem, x: &Words<'_>, n: usize, grid: usize) -> Vec<u32> {
    let b = BLOCK as usize;
    let sums = thread_sums(elem, x, n, grid * b);
    sums.chunks(b).map(|c| tree(elem, &mut c.to_vec())).collect()
}

/// The final sum of `partials` by one block: thread t sums partials t, t + 256, ..., then the tree.
pub fn final_sum(elem: Elem, partials: &[u32]) -> u32 {
    let b = BLOCK as usize;
    let mut v: Vec<u32> = (0..b).map(|t| (t..partials.len()).step_by(b).fold(elem.zero(), |s, i| elem.add(s, partials[i]))).collect();
    tree(elem, &mut v)
}

/// Checks the promise that makes an unordered f32 sum exact: integers whose magnitudes, with acc's,
/// add up to at most 2^24.
fn exact_in_any_order(x: &Words<'_>, n: usize, acc: f32) -> Result<(), String> {
    let mut total = acc.abs() as f64;
    for i in 0..n {
        let v = x.f32(i);
        if v.fract() != 0.0 {
            return Err(format!("x[{i}] = {v} is not an integer: an unordered f32 sum of it is not exact"));
        }
        total += v.abs() as f64;
    }
    if total > (1u64 << 24) as f64 {
        return Err(format!("|acc| + Σ|x| = {total} passes 2^24: an unordered f32 sum of it is not exact"));
    }
    Ok(())
}

fn reduce_host(variant: Variant, elem: Elem) -> impl Fn(&KernelCtx) -> Result<(), String> + Send + Sync + 'static {
    move |cx| {
        let (acc, x) = (cx.buffer(0)?, cx.buffer(1)?);
        let n = cx.u32(if variant == Variant::Partials { 3 } else { 2 })? as usize;
        let (a, xs) = (acc.words(1, true)?, x.words(n, false)?);
        let grid = cx.launch.grid[0] as usize;
        let sum = if variant.unordered() {
            // Atomics add the sums in no fixed order; every order gives this word (see the module doc).
            if elem == Elem::F32 {
                exact_in_any_order(&xs, n, a.f32(0))?;
            }
            sum_seq(elem, &xs, n)
        } else {
            let partials = block_partials(elem, &xs, n, grid);
            let part_view = cx.buffer(2)?;
            let part = part_view.words(grid + 1, true)?;
            for (b, &p) in partials.iter().enumerate() {
                part.set_u32(b, p);
            }
            // The last block resets the ticket.
            part.set_u32(grid, 0);
            final_sum(elem, &partials)
        };
        a.set_u32(0, elem.add(a.u32(0), sum));
        Ok(())
    }
}

/// Kernel `reduce_{variant}_{elem}`: `(acc: read_write, x: read[, part: read_write], n)`.
pub fn kernel(variant: Variant, elem: Elem) -> PackKernel {
    let name = format!("reduce_{}_{}", variant.as_str(), elem.as_str());
    let mut sig = KernelSig::new(&name).buffer("acc", Access::ReadWrite).buffer("x", Access::Read);
    if variant == Variant::Partials {
        sig = sig.buffer("part", Access::ReadWrite);
    }
    sig = sig.scalar("n", ScalarType::U32);
    let src = match variant {
        Variant::Atomic => include_str!("../../kernels/reduce_atomic.wgsl"),
        Variant::Warp => include_str!("../../kernels/reduce_warp.wgsl"),
        Variant::Tree => include_str!("../../kernels/reduce_tree.wgsl"),
        Variant::Partials => include_str!("../../kernels/reduce_partials.wgsl"),
    };
    // Every variant is a fused body; the tree and the partials, with their block barriers, only as
    // the one body of a fused block (side by side with others).
    PackKernel::new(sig, CudaUnit::Reduce, true, wgsl(src, elem, true, variant.unordered()), reduce_host(variant, elem))
}

/// The input of `n` elements: random words (u32), random floats in [-1, 1) (f32, fixed order), or
/// integers of at most `2^23 / n` (at least 1, at most 64) in magnitude (f32, unordered).
pub fn input(elem: Elem, unordered: bool, n: u32, seed: u64) -> (Option<BufferInit>, Option<Generate>) {
    match (elem, unordered) {
        (Elem::U32, _) => (Some(BufferInit::Random(seed)), None),
        (Elem::F32, false) => (Some(BufferInit::RandomF32 { seed, scale: 1.0 }), None),
        (Elem::F32, true) => {
            let k = ((1u64 << 23) / n.max(1) as u64).clamp(1, 64);
            let make = move || {
                let mut r = ostinato::rng::XorShift64::seeded(seed);
                (0..n).flat_map(|_| ((r.below(2 * k + 1) as i64 - k as i64) as f32).to_le_bytes()).collect()
            };
            (None, Some(std::sync::Arc::new(make) as Generate))
        }
    }
}

/// `n` in row ids: 256, 64K, 1M, 8M.
pub fn size_name(n: u32) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

/// One row: ten reductions of `n` elements by `variant`.
pub fn row(variant: Variant, elem: Elem, n: u32, mode: Mode, replays: usize) -> Workload {
    let grid = blocks(n, variant.max_blocks());
    let mut g = Graph::new();
    let acc = g.add_buffer("acc", 256 * mode.slices() as u64).expect("fresh");
    let x = g.add_buffer("x", 4 * n as u64).expect("fresh");
    let part_stride = slice_stride(4 * (grid as u64 + 1));
    let part = (variant == Variant::Partials).then(|| g.add_buffer("part", part_stride * mode.slices() as u64).expect("fresh"));
    let kern = kernel(variant, elem);
    let k = g.add_kernel(kern.sig.clone()).expect("fresh");
    let launch = Launch::linear(grid, BLOCK);
    let user = record_ops(&mut g, mode, |op| {
        let mut args = vec![Arg::Buffer(op_slice(acc, mode, op, 256, 4)), whole(x)];
        if let Some(p) = part {
            args.push(Arg::Buffer(op_slice(p, mode, op, part_stride, 4 * (grid as u64 + 1))));
        }
        args.push(u32_arg(n));
        vec![(k, launch, args)]
    });
    let id = format!("reduce/{}-{}/{}/n{}", variant.as_str(), elem.as_str(), mode.as_str(), size_name(n));
    let mut w = family_row(id, mode.family("reduction serial", "reduction independent"), g, mode, user, vec![kern], replays);
    let (init, data) = input(elem, variant.unordered(), n, 0x5ed0 + n as u64);
    w.inits = vec![Some(BufferInit::Zero), init];
    if part.is_some() {
        w.inits.push(Some(BufferInit::Zero));
    }
    if let Some(d) = data {
        w.data.push((x, d));
    }
    w.checked = vec![acc];
    w
}

/// The family's sizes for `s`.
fn sizes(s: &Scope) -> &'static [u32] {
    match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => &[256, 1 << 16, 1 << 20, 1 << 23],
        (BenchBackend::Cuda, true) => &[256, 1 << 20],
        (BenchBackend::Host, false) => &[256, 1 << 16, 1 << 20],
        (BenchBackend::Host, true) => &[1 << 16],
    }
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    let mut out = Vec::new();
    for mode in Mode::BOTH {
        for variant in Variant::ALL {
            for elem in Elem::BOTH {
                for &n in sizes(s) {
                    out.push(row(variant, elem, n, mode, s.replays(1)));
                }
            }
        }
    }
    out
}
