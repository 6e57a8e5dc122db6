//! packed dot: each thread adds into its output the dot product of 8 words of two vectors as packed
//! int8 quads (`__dp4a`; on Vulkan `dot4I8Packed` where the device has the packed integer dot product),
//! f16 pairs or bf16 pairs (f32 accumulation, word order, low half first) — 256 threads (one block) to
//! 1 M (64 MB read per op). The checks are exact: int8 sums wrap in u32, and every f16 or bf16 product
//! is exact in f32, so each implementation's one rounding per step is the same (FMA or not) in the same
//! order. The f16 inputs are normal numbers (no implementation flushes them).

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};

use super::quant::f16_to_f32;
use super::reduction::size_name;
use super::Scope;
use crate::pack::{CudaUnit, PackKernel, Wgsl};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Generate, Mode, Workload};
use crate::BenchBackend;

/// Words of a and b per thread (`DOT_K` in `dot.cu`).
pub const WORDS: usize = 8;

/// The packed element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packed {
    I8,
    F16,
    Bf16,
}

impl Packed {
    pub const ALL: [Packed; 3] = [Packed::I8, Packed::F16, Packed::Bf16];
    pub fn as_str(self) -> &'static str {
        match self {
            Packed::I8 => "i8",
            Packed::F16 => "f16",
            Packed::Bf16 => "bf16",
        }
    }
    /// A word's two halves as f32 (low first).
    fn halves(self, w: u32) -> [f32; 2] {
        match self {
            Packed::F16 => [f16_to_f32(w as u16), f16_to_f32((w >> 16) as u16)],
            _ => [f32::from_bits(w << 16), f32::from_bits(w & 0xffff_0000)],
        }
    }
}

pub fn sig(t: Packed) -> KernelSig {
    KernelSig::new(format!("dot_{}", t.as_str()))
        .buffer("out", Access::ReadWrite)
        .buffer("a", Access::Read)
        .buffer("b", Access::Read)
        .scalar("n", ScalarType::U32)
}

/// Kernel `dot_{t}`.
pub fn kernel(t: Packed) -> PackKernel {
    let wgsl = match t {
        Packed::I8 => Wgsl::with_packed_dot(include_str!("../../kernels/dot_i8.wgsl")),
        Packed::F16 => {
            Wgsl::one(format!("{}\n{}", include_str!("../../kernels/f16.wgsl"), include_str!("../../kernels/dot_half.wgsl").replace("UNPACK(", "f16x2(")))
        }
        Packed::Bf16 => Wgsl::one(include_str!("../../kernels/dot_half.wgsl").replace("UNPACK(", "bf16x2(")),
    };
    PackKernel::new(sig(t), CudaUnit::Dot, true, wgsl, move |cx| {
        let (out, a, b) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let n = cx.u32(3)? as usize;
        let (o, wa, wb) = (out.words(n, true)?, a.words(n * WORDS, false)?, b.words(n * WORDS, false)?);
        for i in 0..n {
            let words = (i * WORDS..(i + 1) * WORDS).map(|j| (wa.u32(j), wb.u32(j)));
            if t == Packed::I8 {
                let s: i32 = words.map(|(x, y)| (0..4).map(|k| ((x >> (8 * k)) as u8 as i8 as i32) * ((y >> (8 * k)) as u8 as i8 as i32)).sum::<i32>()).sum();
                o.set_u32(i, o.u32(i).wrapping_add(s as u32));
            } else {
                let mut s = 0f32;
                for (x, y) in words {
                    let (x, y) = (t.halves(x), t.halves(y));
                    // Each product is exact: one rounding per step, as FMA rounds.
                    s += x[0] * y[0];
                    s += x[1] * y[1];
                }
                o.set_f32(i, o.f32(i) + s);
            }
        }
        Ok(())
    })
}

/// `n` words of pairs of `t` from `seed`: random bytes (i8), or normal halves of random sign and
/// mantissa in binades 2^-8 to 2 (f16, bf16).
fn input(t: Packed, words: usize, seed: u64) -> (Option<BufferInit>, Option<Generate>) {
    let half = move |r: &mut ostinato::rng::XorShift64| -> u32 {
        let sign = (r.below(2) as u32) << 15;
        let e = r.below(9) as u32; // binades 2^-8 .. 2^0
        match t {
            Packed::F16 => sign | ((e + 15 - 8) << 10) | r.below(1 << 10) as u32,
            _ => sign | ((e + 127 - 8) << 7) | r.below(1 << 7) as u32,
        }
    };
    let make = move || {
        let mut r = ostinato::rng::XorShift64::seeded(seed);
        (0..words).flat_map(|_| (half(&mut r) | half(&mut r) << 16).to_le_bytes()).collect()
    };
    match t {
        Packed::I8 => (Some(BufferInit::Random(seed)), None),
        _ => (None, Some(std::sync::Arc::new(make) as Generate)),
    }
}

/// One row: ten ops of `n` threads.
pub fn row(t: Packed, n: u32, mode: Mode, replays: usize) -> Workload {
    let stride = slice_stride(4 * n as u64);
    let words = n as usize * WORDS;
    let mut g = Graph::new();
    let out = g.add_buffer("out", stride * mode.slices() as u64).expect("fresh");
    let a = g.add_buffer("a", 4 * words as u64).expect("fresh");
    let b = g.add_buffer("b", 4 * words as u64).expect("fresh");
    let kern = kernel(t);
    let k = g.add_kernel(kern.sig.clone()).expect("fresh");
    let user = record_ops(&mut g, mode, |op| {
        vec![(k, Launch::linear(n.div_ceil(256), 256), vec![Arg::Buffer(op_slice(out, mode, op, stride, 4 * n as u64)), whole(a), whole(b), u32_arg(n)])]
    });
    let id = format!("dot/{}/{}/n{}", t.as_str(), mode.as_str(), size_name(n));
    let mut w = family_row(id, mode.family("packed dot serial", "packed dot independent"), g, mode, user, vec![kern], replays);
    let out_init = if t == Packed::I8 { BufferInit::Random(0xd070) } else { BufferInit::RandomF32 { seed: 0xd070, scale: 1.0 } };
    let (ia, da) = input(t, words, 0xd071 + n as u64);
    let (ib, db) = input(t, words, 0xd072 + n as u64);
    w.inits = vec![Some(out_init), ia, ib];
    w.data = [(a, da), (b, db)].into_iter().filter_map(|(id, d)| d.map(|d| (id, d))).collect();
    w.checked = vec![out];
    w
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    let sizes: &[u32] = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => &[256, 1 << 16, 1 << 20],
        (BenchBackend::Cuda, true) => &[256, 1 << 20],
        (BenchBackend::Host, false) => &[256, 1 << 16],
        (BenchBackend::Host, true) => &[1 << 12],
    };
    Mode::BOTH.iter().flat_map(|&m| Packed::ALL.iter().flat_map(move |&t| sizes.iter().map(move |&n| row(t, n, m, s.replays(1))))).collect()
}
