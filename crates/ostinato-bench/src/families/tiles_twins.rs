//! The tiles family's kernels (`kernels/tiles.cu`, `kernels/tiles_*.wgsl`) with their host twins, run
//! block by block (`HostKernel::per_block`) so that the host checks every access against its block's
//! tile. The float twins compute what the CUDA kernels compute in the order they compute it: lane `l`
//! of a row's warp takes elements `l, l + 32, …` in order, the 32 lane values meet in the butterfly
//! ([`butterfly`]), every operation is IEEE-rounded (the CUDA C writes each one `__f*_rn`; Rust never
//! contracts a multiply into an add). `e^x` ([`tl_exp`]) is the one operation that is not bit for bit
//! the GPU's: the kernels take the hardware's approximate `2^x` as production softmaxes do, at most 2
//! ulps from the twin's.

use ostinato::{Access, KernelSig, ScalarType};
use ostinato_host::kernel::KernelCtx;
use ostinato_host::HostKernel;

use crate::pack::{CudaUnit, PackKernel, Wgsl};

/// Lanes per row (a warp).
pub const LANES: usize = 32;

/// A row kernel's block: a warp per row (x the lane), 8 rows (y).
pub const ROW_BLOCK: [u32; 3] = [32, 8, 1];

/// The lowest finite f32: the row maximum of no element.
const NO_MAX: f32 = f32::MIN;

/// `a · b + c` as the kernels compute it (two roundings), or with one rounding where `contract` (what a
/// Vulkan driver may make of the WGSL: `tests` bound the difference).
#[inline]
fn madd(a: f32, b: f32, c: f32, contract: bool) -> f32 {
    if contract {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// The butterfly's result for 32 lane values (offsets 16, 8, 4, 2, 1, as every lane of the warp ends
/// with it): `v[l] = op(v[l], v[l + o])` for `l < o`, then `v[0]`.
pub fn butterfly(mut v: [f32; LANES], op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut o = LANES / 2;
    while o > 0 {
        for l in 0..o {
            v[l] = op(v[l], v[l + o]);
        }
        o /= 2;
    }
    v[0]
}

/// `log2 e`, the f32 nearest it.
const LOG2_E: f32 = std::f32::consts::LOG2_E;

/// `e^x` as `tl_exp` in `tiles.cu` takes it: `2^y` of the correctly rounded product `y = x log2 e`, 0
/// where that is below the smallest normal float (the hardware's `ex2.approx.ftz` flushes; it is at
/// most 2 ulps from this).
pub fn tl_exp(x: f32) -> f32 {
    let y = x * LOG2_E;
    if y < -126.0 {
        0.0
    } else {
        y.exp2()
    }
}

/// [`tl_exp`] moved by `ulps` ulps, up for even `j` and down for odd: what the hardware's or a
/// driver's approximate `exp2` may return instead.
fn tl_exp_off(x: f32, j: usize, ulps: u32) -> f32 {
    let e = tl_exp(x);
    if ulps == 0 || e == 0.0 {
        e
    } else if j % 2 == 0 {
        f32::from_bits(e.to_bits() + ulps)
    } else {
        f32::from_bits(e.to_bits() - ulps)
    }
}

/// The rows a block of a row kernel computes (a warp per row, `launch.block[1]` rows per block) below
/// `rows`, after checking that the launch has a warp per row.
fn block_rows(cx: &KernelCtx, rows: u32) -> Result<std::ops::Range<usize>, String> {
    if cx.launch.block[0] as usize != LANES || cx.launch.block[2] != 1 {
        return Err(format!("a row kernel runs a warp per row: blocks of 32 x R threads, not {:?}", cx.launch.block));
    }
    let per = cx.launch.block[1] as usize;
    let first = cx.block()[0] as usize * per;
    Ok(first.min(rows as usize)..(first + per).min(rows as usize))
}

/// Each lane's values of a row of `n` folded in lane order: lane `l` folds elements `l, l + 32, …`.
fn lanes(n: usize, init: f32, mut f: impl FnMut(f32, usize) -> f32) -> [f32; LANES] {
    let mut v = [init; LANES];
    for (l, acc) in v.iter_mut().enumerate() {
        for c in (l..n).step_by(LANES) {
            *acc = f(*acc, c);
        }
    }
    v
}

fn row_sig(name: &str, first: (&str, Access), second: (&str, Access)) -> KernelSig {
    KernelSig::new(name).buffer(first.0, first.1).buffer(second.0, second.1).scalar("rows", ScalarType::U32).scalar("n", ScalarType::U32)
}

/// A row kernel's WGSL: the shared helpers (the butterfly in workgroup memory, `tl_exp`) and the kernel.
fn row_wgsl(kernel: &str) -> Wgsl {
    Wgsl::one(format!("{}\n{kernel}", include_str!("../../kernels/tiles_common.wgsl")))
}

/// The residual layer's kernels `[rms_norm, rms_scale, residual_add]`, one CUDA code (`tiles_rms`),
/// so that a chain of them fuses into one kernel:
/// `rms_norm(h: write, x: read, rows, n, eps)`: `h[row] = x[row] / sqrt(mean(x[row]²) + eps)`;
/// `rms_scale(h: read_write, w: read, rows, n)`: `h[row][c] *= w[c]`;
/// `residual_add(x: read_write, h: read, rows, n)`: `x[row] += h[row]`.
pub fn rms_kernels() -> [PackKernel; 3] {
    rms_kernels_with(false)
}

/// [`rms_kernels`] whose twins contract each multiply-add where `contract`.
pub(crate) fn rms_kernels_with(contract: bool) -> [PackKernel; 3] {
    let norm = row_sig("rms_norm", ("h", Access::Write), ("x", Access::Read)).scalar("eps", ScalarType::F32);
    let norm_host = HostKernel::per_block(norm.clone(), move |cx| {
        let (rows, n, eps) = (cx.u32(2)?, cx.u32(3)? as usize, cx.f32(4)?);
        let (h, x) = (cx.buffer(0)?, cx.buffer(1)?);
        for row in block_rows(cx, rows)? {
            let (hr, xr) = (h.words_range(row * n, n, true)?, x.words_range(row * n, n, false)?);
            let ss = butterfly(
                lanes(n, 0.0, |s, c| {
                    let v = xr.f32(c);
                    madd(v, v, s, contract)
                }),
                |a, b| a + b,
            );
            let inv = 1.0 / (ss / n as f32 + eps).sqrt();
            for c in 0..n {
                hr.set_f32(c, xr.f32(c) * inv);
            }
        }
        Ok(())
    });
    let scale = row_sig("rms_scale", ("h", Access::ReadWrite), ("w", Access::Read));
    let scale_host = HostKernel::per_block(scale.clone(), |cx| {
        let (rows, n) = (cx.u32(2)?, cx.u32(3)? as usize);
        let (h, w) = (cx.buffer(0)?, cx.buffer(1)?);
        let w = w.words(n, false)?;
        for row in block_rows(cx, rows)? {
            let hr = h.words_range(row * n, n, true)?;
            for c in 0..n {
                hr.set_f32(c, hr.f32(c) * w.f32(c));
            }
        }
        Ok(())
    });
    let add = row_sig("residual_add", ("x", Access::ReadWrite), ("h", Access::Read));
    let add_host = HostKernel::per_block(add.clone(), |cx| {
        let (rows, n) = (cx.u32(2)?, cx.u32(3)? as usize);
        let (x, h) = (cx.buffer(0)?, cx.buffer(1)?);
        for row in block_rows(cx, rows)? {
            let (xr, hr) = (x.words_range(row * n, n, true)?, h.words_range(row * n, n, false)?);
            for c in 0..n {
                xr.set_f32(c, xr.f32(c) + hr.f32(c));
            }
        }
        Ok(())
    });
    let k = |sig: KernelSig, wgsl: &str, host: HostKernel| PackKernel::in_code(sig, CudaUnit::Tiles, "tiles_rms", true, row_wgsl(wgsl), host);
    [
        k(norm, include_str!("../../kernels/tiles_rms_norm.wgsl"), norm_host),
        k(scale, include_str!("../../kernels/tiles_rms_scale.wgsl"), scale_host),
        k(add, include_str!("../../kernels/tiles_residual_add.wgsl"), add_host),
    ]
}

/// `softmax_scale(x: read_write, c: read, rows, n)`: in place, `x[row] = c[row] · softmax(x[row])`
/// (the row's maximum subtracted, `e^x` stored, then scaled by `c[row] / sum`).
pub fn softmax_kernel() -> PackKernel {
    softmax_kernel_with(0)
}

/// [`softmax_kernel`] whose twin's `e^x` is `exp_ulps` ulps off ([`tl_exp_off`]).
pub(crate) fn softmax_kernel_with(exp_ulps: u32) -> PackKernel {
    let sig = row_sig("softmax_scale", ("x", Access::ReadWrite), ("c", Access::Read));
    let host = HostKernel::per_block(sig.clone(), move |cx| {
        let (rows, n) = (cx.u32(2)?, cx.u32(3)? as usize);
        let (x, c) = (cx.buffer(0)?, cx.buffer(1)?);
        let rs = block_rows(cx, rows)?;
        if rs.is_empty() {
            return Ok(());
        }
        let cs = c.words_range(rs.start, rs.len(), false)?;
        for (i, row) in rs.enumerate() {
            let xr = x.words_range(row * n, n, true)?;
            let m = butterfly(lanes(n, NO_MAX, |m, j| m.max(xr.f32(j))), f32::max);
            let sums = lanes(n, 0.0, |s, j| {
                let e = tl_exp_off(xr.f32(j) - m, j, exp_ulps);
                xr.set_f32(j, e);
                s + e
            });
            let f = cs.f32(i) / butterfly(sums, |a, b| a + b);
            for j in 0..n {
                xr.set_f32(j, xr.f32(j) * f);
            }
        }
        Ok(())
    });
    PackKernel::in_code(sig, CudaUnit::Tiles, "softmax_scale", true, row_wgsl(include_str!("../../kernels/tiles_softmax_scale.wgsl")), host)
}

/// `gemv_u32(y: write, w: read, x: read, rows, k)`: `y[row] = W[row] · x`, wrapping u32 (any order of
/// the sum gives the same word).
pub fn gemv_kernel() -> PackKernel {
    let sig = KernelSig::new("gemv_u32")
        .buffer("y", Access::Write)
        .buffer("w", Access::Read)
        .buffer("x", Access::Read)
        .scalar("rows", ScalarType::U32)
        .scalar("k", ScalarType::U32);
    let host = HostKernel::per_block(sig.clone(), |cx| {
        let (rows, k) = (cx.u32(3)?, cx.u32(4)? as usize);
        let (y, w, x) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let rs = block_rows(cx, rows)?;
        if rs.is_empty() {
            return Ok(());
        }
        let x = x.words(k, false)?;
        let out = y.words_range(rs.start, rs.len(), true)?;
        for (i, row) in rs.enumerate() {
            let wr = w.words_range(row * k, k, false)?;
            out.set_u32(i, (0..k).fold(0u32, |s, j| s.wrapping_add(wr.u32(j).wrapping_mul(x.u32(j)))));
        }
        Ok(())
    });
    PackKernel::in_code(sig, CudaUnit::Tiles, "gemv_u32", true, Wgsl::one(include_str!("../../kernels/tiles_gemv_u32.wgsl").to_string()), host)
}

/// `tile_spread(x: read_write, y: read, salt)` on a grid `(F, G)` of `threads`-thread blocks: block
/// `(i, j)` sets its tile `i + F j` of x (`threads` words) to `x · 3 + y's tile j + salt` (wrapping).
pub fn spread_kernel(threads: u32) -> PackKernel {
    let sig = KernelSig::new("tile_spread").buffer("x", Access::ReadWrite).buffer("y", Access::Read).scalar("salt", ScalarType::U32);
    let host = HostKernel::per_block(sig.clone(), |cx| {
        let [bx, by, _] = cx.block();
        let t = cx.launch.block[0] as usize;
        let tile = (bx + cx.launch.grid[0] * by) as usize;
        let (x, y, salt) = (cx.buffer(0)?, cx.buffer(1)?, cx.u32(2)?);
        let (x, y) = (x.words_range(t * tile, t, true)?, y.words_range(t * by as usize, t, false)?);
        for i in 0..t {
            x.set_u32(i, x.u32(i).wrapping_mul(3).wrapping_add(y.u32(i)).wrapping_add(salt));
        }
        Ok(())
    });
    let wgsl = include_str!("../../kernels/tiles_spread.wgsl").replace("WG_X", &threads.to_string());
    PackKernel::in_code(sig, CudaUnit::Tiles, "tiles_spread_gather", true, Wgsl::one(wgsl), host)
}

/// `tile_gather(y: read_write, x: read, fan)` on `threads`-thread blocks: block `j` sets y's tile `j` to
/// `y · 5 +` the sum of x's tiles `fan·j .. fan·j + fan - 1` (wrapping; `fan` a multiple of 4, the CUDA
/// kernel taking four tiles a step).
pub fn gather_kernel(threads: u32) -> PackKernel {
    let sig = KernelSig::new("tile_gather").buffer("y", Access::ReadWrite).buffer("x", Access::Read).scalar("fan", ScalarType::U32);
    let host = HostKernel::per_block(sig.clone(), |cx| {
        let j = cx.block()[0] as usize;
        let t = cx.launch.block[0] as usize;
        let fan = cx.u32(2)? as usize;
        if fan % 4 != 0 {
            return Err(format!("tile_gather sums its tiles four at a time: fan = {fan} must be a multiple of 4"));
        }
        let (y, x) = (cx.buffer(0)?, cx.buffer(1)?);
        let (y, x) = (y.words_range(t * j, t, true)?, x.words_range(t * fan * j, t * fan, false)?);
        for i in 0..t {
            let s = (0..fan).fold(0u32, |s, k| s.wrapping_add(x.u32(t * k + i)));
            y.set_u32(i, y.u32(i).wrapping_mul(5).wrapping_add(s));
        }
        Ok(())
    });
    let wgsl = include_str!("../../kernels/tiles_gather.wgsl").replace("WG_X", &threads.to_string());
    PackKernel::in_code(sig, CudaUnit::Tiles, "tiles_spread_gather", true, Wgsl::one(wgsl), host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tl_exp_is_e_to_the_x_within_the_rounding_of_its_product_and_flushes_below_the_normals() {
        // 2^y is within half an ulp; y, the rounded product of x and the f32 nearest log2 e, is within
        // |y| 2^-23 of x log2 e (the constant and the product each round by at most 2^-24 relative),
        // which moves 2^y by at most |y| 2^-23 ln 2 relative.
        let mut worst = 0f64;
        for i in 0..=400_000 {
            let x = -87.0 * i as f32 / 400_000.0;
            let (got, want) = (tl_exp(x) as f64, (x as f64).exp());
            let y = (x * LOG2_E).abs() as f64;
            let bound = 2f64.powi(-24) * (1.0 + 2.0 * y * std::f64::consts::LN_2) + 2f64.powi(-30);
            worst = worst.max((got - want).abs() / want / bound);
        }
        assert!(worst <= 1.0, "tl_exp is {worst} of its bound off");
        assert_eq!((tl_exp(0.0), tl_exp(-88.0), tl_exp(-87.0) > 0.0), (1.0, 0.0, true));
        assert_eq!((tl_exp_off(-1.0, 0, 2).to_bits(), tl_exp_off(-1.0, 1, 2).to_bits()), (tl_exp(-1.0).to_bits() + 2, tl_exp(-1.0).to_bits() - 2));
    }

    #[test]
    fn the_butterfly_adds_in_the_order_of_its_first_lane() {
        let v: [f32; LANES] = std::array::from_fn(|i| 1.0 + i as f32 * 1e-7);
        // Offsets 16, 8, 4, 2, 1 from lane 0: ((v0 + v16) + (v8 + v24)) + ...
        let mut w = v;
        for o in [16, 8, 4, 2, 1] {
            for l in 0..o {
                w[l] += w[l + o];
            }
        }
        assert_eq!(butterfly(v, |a, b| a + b).to_bits(), w[0].to_bits());
        assert_eq!(butterfly(v, f32::max), v[31]);
    }
}
