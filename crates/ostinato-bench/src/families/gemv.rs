//! quantized GEMV: y += W · x for weights in q8_0, q4_0, q4_K-like and q6_K-like blocks (scales per 32
//! or per 256 weights, dequantised in registers) and int8 activations in blocks of 32, over 8 rows (one
//! block: launch-bound) to 4,096 × 4,096 (17 MB of q8_0 per op: bandwidth-bound). The weights and
//! activations come from a seeded generator ([`super::quant`]).
//!
//! The check. Each block's integer dot is exact everywhere; its float part is a product of two f16
//! scales (exact in f32) times the dot, then sums in a fixed order (per lane, then the lanes' tree):
//! the CUDA kernel and the host twin perform the same roundings and agree bit for bit. A Vulkan driver
//! may fuse a multiply into the add that follows (SPIR-V allows it without `NoContraction`, which WGSL
//! cannot ask for), so the check allows each element the difference of two evaluations of the same
//! circuit: with `m` roundings on the longest path of a row's sum (at most 3 per term, one per block of
//! a lane, 5 for the lanes' tree, one for the add into y) and `γ_m = m·u / (1 − m·u)`, `u = 2^-24`, each
//! evaluation is within `γ_m · (|y_prev| + Σ|terms| + D_prev)` of the exact sum; over the sample's
//! ops on one element those deviations add up (`D`), and two evaluations differ by at most `2 D`.

use std::sync::Arc;

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};

use super::quant::{block_term, row_sum, Decoded, Format, Problem, LANES};
use super::Scope;
use crate::pack::{CudaUnit, PackKernel, Wgsl};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Bounds, Check, Generate, Mode, Workload, OPS};
use crate::BenchBackend;

/// Rows per block (a warp per row, blocks of 256 threads).
pub const ROWS_PER_BLOCK: u32 = 8;

pub fn sig(format: Format) -> KernelSig {
    KernelSig::new(format!("gemv_{}", format.as_str()))
        .buffer("y", Access::ReadWrite)
        .buffer("wq", Access::Read)
        .buffer("ws", Access::Read)
        .buffer("xq", Access::Read)
        .buffer("xs", Access::Read)
        .scalar("rows", ScalarType::U32)
        .scalar("k", ScalarType::U32)
}

/// The kernel of `format`.
pub fn kernel(format: Format) -> PackKernel {
    let term = match format {
        Format::Q8_0 => include_str!("../../kernels/gemv_q8_0.wgsl"),
        Format::Q4_0 => include_str!("../../kernels/gemv_q4_0.wgsl"),
        Format::Q4K => include_str!("../../kernels/gemv_q4_k.wgsl"),
        Format::Q6K => include_str!("../../kernels/gemv_q6_k.wgsl"),
    };
    let wgsl = Wgsl::with_packed_dot(&format!("{}\n{}", include_str!("../../kernels/f16.wgsl"), include_str!("../../kernels/gemv.wgsl").replace("TERM", term)));
    PackKernel::new(sig(format), CudaUnit::Gemv, true, wgsl, move |cx| {
        let (rows, k) = (cx.u32(5)?, cx.u32(6)?);
        if k % 256 != 0 || rows % ROWS_PER_BLOCK != 0 {
            return Err(format!("gemv: k = {k} must be a multiple of 256 and rows = {rows} of {ROWS_PER_BLOCK}"));
        }
        let read = |i: usize, n: u64| -> Result<Vec<u32>, String> {
            let view = cx.buffer(i)?;
            let w = view.words(n as usize, false)?;
            Ok((0..w.len()).map(|j| w.u32(j)).collect())
        };
        let p = Problem {
            format,
            rows,
            k,
            wq: read(1, format.quant_words(rows, k))?,
            ws: read(2, format.scale_words(rows, k))?,
            xq: read(3, k as u64 / 4)?,
            xs: read(4, (k as u64 / 32).div_ceil(2))?,
        };
        let d = p.decode();
        let y_view = cx.buffer(0)?;
        let y = y_view.words(rows as usize, true)?;
        for r in 0..rows as usize {
            y.set_f32(r, y.f32(r) + row_sum(&p, &d, r));
        }
        Ok(())
    })
}

/// Row `r`'s terms in exact arithmetic: the sum of their magnitudes, and their sum.
pub fn row_totals(p: &Problem, d: &Decoded, r: usize) -> (f64, f64) {
    (0..p.k as usize / 32)
        .map(|j| block_term(p, d, r, j))
        .fold((0f64, 0f64), |(m, s), t| (m + t.magnitude(), s + t.s1 as f64 * t.a as f64 - t.s2 as f64 * t.b as f64))
}

/// The most two evaluations of `ops` accumulations of a row of `k` columns into y may differ by (see
/// the module doc), from the row's exact terms (`totals`: [`row_totals`]) and y's initial value.
pub fn bound(totals: (f64, f64), k: u32, y0: f32, ops: usize) -> f32 {
    let (magnitude, sum) = totals;
    let m = (3 + (k as usize / 32).div_ceil(LANES) + 5 + 1) as f64;
    let u = f64::powi(2.0, -24);
    let gamma = m * u / (1.0 - m * u);
    let (mut y, mut dev) = (y0 as f64, 0f64);
    for _ in 0..ops {
        dev += gamma * (y.abs() + magnitude + dev);
        y += sum;
    }
    // Up, to an f32 no smaller than 2 D (a positive finite f32's next is its bits plus one).
    let b = (2.0 * dev) as f32;
    if (b as f64) < 2.0 * dev {
        f32::from_bits(b.to_bits() + 1)
    } else {
        b
    }
}

/// One row: ten GEMVs of `rows` × `k` in `format`.
pub fn row(format: Format, rows: u32, k: u32, mode: Mode, replays: usize) -> Workload {
    let seed = 0x9e70 + rows as u64 * 31 + k as u64 + format as u64;
    let problem = move || Problem::generate(format, rows, k, seed);
    let stride = slice_stride(4 * rows as u64);
    let mut g = Graph::new();
    let y = g.add_buffer("y", stride * mode.slices() as u64).expect("fresh");
    let words = [format.quant_words(rows, k), format.scale_words(rows, k), k as u64 / 4, (k as u64 / 32).div_ceil(2)];
    let ins: Vec<_> = ["wq", "ws", "xq", "xs"].iter().zip(words).map(|(n, w)| g.add_buffer(*n, 4 * w).expect("fresh")).collect();
    let kern = kernel(format);
    let kid = g.add_kernel(kern.sig.clone()).expect("fresh");
    let launch = Launch::linear(rows / ROWS_PER_BLOCK, 256);
    let user = record_ops(&mut g, mode, |op| {
        let mut args = vec![Arg::Buffer(op_slice(y, mode, op, stride, 4 * rows as u64))];
        args.extend(ins.iter().map(|&b| whole(b)));
        args.extend([u32_arg(rows), u32_arg(k)]);
        vec![(kid, launch, args)]
    });
    let id = format!("gemv/{}/{}/{rows}x{k}", format.as_str(), mode.as_str());
    let mut w = family_row(id, mode.family("quantized gemv serial", "quantized gemv independent"), g, mode, user, vec![kern], replays);
    // y starts random; its initial values enter the bound.
    let y_init = BufferInit::RandomF32 { seed: 0x9e71 + rows as u64, scale: 1.0 };
    let slices = mode.slices();
    let ops_per_element = if mode == Mode::Serial { OPS * replays } else { replays };
    let bounds = Bounds::new(move || {
        let p = problem();
        let decoded = p.decode();
        let totals: Vec<(f64, f64)> = (0..rows as usize).map(|r| row_totals(&p, &decoded, r)).collect();
        let mut y_bytes = vec![0u8; stride as usize * slices];
        y_init.fill(&mut y_bytes);
        let words_per_slice = stride as usize / 4;
        let mut bounds = vec![0f32; words_per_slice * slices];
        for s in 0..slices {
            for (r, &t) in totals.iter().enumerate() {
                let i = s * words_per_slice + r;
                let y0 = f32::from_le_bytes([y_bytes[4 * i], y_bytes[4 * i + 1], y_bytes[4 * i + 2], y_bytes[4 * i + 3]]);
                bounds[i] = bound(t, k, y0, ops_per_element);
            }
        }
        vec![bounds]
    });
    w.inits = vec![Some(y_init), None, None, None, None];
    w.data = ins
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let make: Generate = Arc::new(move || {
                let p = problem();
                let v = [&p.wq, &p.ws, &p.xq, &p.xs][i];
                v.iter().flat_map(|w| w.to_le_bytes()).collect()
            });
            (b, make)
        })
        .collect();
    w.checked = vec![y];
    w.check = Check::Within(bounds);
    w
}

/// The rows' shapes (rows × k) for `s`.
/// One block (8 rows), the launch-bound shape whose chains fuse, is a row of q8_0 and q6_k only: each fused
/// kernel is compiled at run time, and two formats show what fusion does to a GEMV chain.
fn shapes(s: &Scope, format: Format) -> Vec<(u32, u32)> {
    let one_block = matches!(format, Format::Q8_0 | Format::Q6K).then_some((8, 1024));
    let rest: &[(u32, u32)] = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => &[(512, 4096), (2048, 2048), (4096, 4096)],
        (BenchBackend::Cuda, true) => &[(4096, 4096)],
        (BenchBackend::Host, false) => &[(512, 4096), (2048, 2048)],
        (BenchBackend::Host, true) => &[],
    };
    let small = if s.quick && s.backend == BenchBackend::Host { Some((8, 1024)) } else { one_block };
    small.into_iter().chain(rest.iter().copied()).collect()
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    let mut out = Vec::new();
    for mode in Mode::BOTH {
        for format in Format::ALL {
            for (rows, k) in shapes(s, format) {
                out.push(row(format, rows, k, mode, s.replays(1)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::quant::BlockTerm;

    /// Row `r`'s sum with every multiply fused into the add that follows (`mul_add`), the other
    /// evaluation a Vulkan driver may make of the same WGSL.
    fn row_sum_fused(p: &Problem, d: &Decoded, r: usize) -> f32 {
        let nb = p.k as usize / 32;
        let mut lanes = [0f32; LANES];
        for (l, lane) in lanes.iter_mut().enumerate() {
            for j in (l..nb).step_by(LANES) {
                let BlockTerm { s1, a, s2, b } = block_term(p, d, r, j);
                *lane = if s2 == 0.0 { s1.mul_add(a as f32, *lane) } else { *lane + s1.mul_add(a as f32, -(s2 * b as f32)) };
            }
        }
        let mut o = LANES / 2;
        while o > 0 {
            for t in 0..o {
                lanes[t] += lanes[t + o];
            }
            o /= 2;
        }
        lanes[0]
    }

    #[test]
    fn the_bound_holds_between_the_fused_and_unfused_evaluations_and_catches_one_wrong_weight() {
        for f in Format::ALL {
            let p = Problem::generate(f, 64, 2048, 11);
            let d = p.decode();
            let mut widest = 0f64;
            for r in 0..64 {
                let t = row_totals(&p, &d, r);
                let (y0, ops) = (0.75f32, 10);
                let (mut plain, mut fused) = (y0, y0);
                for _ in 0..ops {
                    plain += row_sum(&p, &d, r);
                    fused += row_sum_fused(&p, &d, r);
                }
                let b = bound(t, p.k, y0, ops);
                let diff = (plain as f64 - fused as f64).abs();
                assert!(diff <= b as f64, "{f:?} row {r}: the two evaluations differ by {diff:e}, past the bound {b:e}");
                widest = widest.max(diff / b as f64);
                // One weight off by one code (one that counts: its activation and scale are not zero)
                // changes the sum by far more than the bound allows.
                let counts = |i: usize| {
                    let mut wrong = d.codes.clone();
                    wrong[r * 2048 + i] = if wrong[r * 2048 + i] == 0 { 1 } else { wrong[r * 2048 + i] - 1 };
                    let changed = Decoded { codes: wrong, acts: d.acts.clone(), xsums: d.xsums.clone() };
                    (row_totals(&p, &changed, r).1 != t.1).then(|| (y0 + row_sum(&p, &changed, r)) as f64 - (y0 + row_sum(&p, &d, r)) as f64)
                };
                let off = (0..2048).find_map(counts).expect("some weight counts");
                assert!(off.abs() > bound(t, p.k, y0, 1) as f64, "{f:?} row {r}: a wrong weight moves the sum by {off:e} only");
            }
            assert!(widest > 0.0, "{f:?}: the fused evaluation never differed, so the test shows nothing");
        }
    }
}
