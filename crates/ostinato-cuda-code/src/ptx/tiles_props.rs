//! A property test of the tile-map check: random kernels whose addresses are affine in the block and
//! thread index (with a loop, a bounds check, signed or unsigned indices, 4- or 8-byte elements, or the
//! built-ins' grid-stride loop), written as CUDA C and compiled by NVRTC (through its disk cache), are
//! checked against random declared maps, and each verdict against the true footprint, enumerated
//! thread by thread: the check must never verify a map the footprint leaves (nor contradict one it
//! keeps), and should verify most true maps. It skips where NVRTC is not found.

use ostinato::rng::XorShift64 as Rng;
use ostinato::tiles::{block_at, block_count};
use ostinato::{TileMap, TileRange};

use super::tiles::{Verdict, IGNORE_STRIDES};
use super::tiles_tests::verdicts;

/// One generated kernel: `x[a·bx + b·by + c·tx + d·ty + e + s·k]` for `k < n` (or once), where
/// `tx < lim`; or, `grid_stride`, `x[s·i + e]` over the grid-stride loop `i < n`; or, `mask`,
/// `x[(a·bx) | ((tx & mask)·c) | e]` where `(tx & mask)·c < lim` (an `or` the compiler may or may not
/// have proved an add: the bits of its operands meet or not).
#[derive(Clone, Debug)]
struct Kernel {
    name: String,
    wide: bool,
    signed: bool,
    looped: bool,
    grid_stride: bool,
    mask: Option<u64>,
    coef: [u64; 6],
}

impl Kernel {
    fn esz(&self) -> u64 {
        if self.wide {
            8
        } else {
            4
        }
    }
    fn source(&self) -> String {
        let [a, b, c, d, e, s] = self.coef;
        let t = if self.wide { "double" } else { "float" };
        if self.grid_stride {
            return format!(
                "extern \"C\" __global__ void {}({t}* x, unsigned n, unsigned lim) {{\n  OST_GRID_STRIDE(i, n) {{ x[{s}u * i + {e}u] += 1; }}\n}}\n",
                self.name
            );
        }
        if let Some(m) = self.mask {
            return format!(
                "extern \"C\" __global__ void {}({t}* x, unsigned n, unsigned lim) {{\n  unsigned lane = threadIdx.x & {m}u;\n  if (lane * {c}u < lim) x[({a}u * blockIdx.x) | (lane * {c}u) | {e}u] += 1;\n}}\n",
                self.name
            );
        }
        let (ity, suffix) = if self.signed { ("int", "") } else { ("unsigned", "u") };
        let idx = format!("{a}{suffix} * bx + {b}{suffix} * by + {c}{suffix} * tx + {d}{suffix} * ty + {e}{suffix}");
        let body = if self.looped { format!("for ({ity} k = 0; k < ({ity})n; ++k) x[{idx} + {s}{suffix} * k] += 1;") } else { format!("x[{idx}] += 1;") };
        format!(
            "extern \"C\" __global__ void {}({t}* x, unsigned n, unsigned lim) {{\n  {ity} bx = blockIdx.x, by = blockIdx.y, tx = threadIdx.x, ty = threadIdx.y;\n  if (tx < ({ity})lim) {{ {body} }}\n}}\n",
            self.name
        )
    }
    /// Every byte range block `blk` touches (element offsets × size).
    fn footprint(&self, grid: [u32; 3], block: [u32; 3], n: u64, lim: u64, blk: [u32; 3], f: &mut dyn FnMut(u64)) {
        let [a, b, c, d, e, s] = self.coef;
        if self.grid_stride {
            let t: u64 = block.iter().map(|&x| u64::from(x)).product();
            let g = block_count(grid);
            let lb = u64::from(blk[0]) + u64::from(grid[0]) * (u64::from(blk[1]) + u64::from(grid[1]) * u64::from(blk[2]));
            let mut i = lb * t;
            while i < n {
                for j in i..(i + t).min(n) {
                    f(s * j + e);
                }
                i += g * t;
            }
            return;
        }
        let (bx, by) = (u64::from(blk[0]), u64::from(blk[1]));
        if let Some(m) = self.mask {
            for ty in 0..u64::from(block[1]) {
                for tx in 0..u64::from(block[0]) {
                    let lane = tx & m;
                    let _ = ty;
                    if lane * c < lim {
                        f((a * bx) | (lane * c) | e);
                    }
                }
            }
            return;
        }
        for ty in 0..u64::from(block[1]) {
            for tx in 0..u64::from(block[0]).min(lim) {
                let base = a * bx + b * by + c * tx + d * ty + e;
                if self.looped {
                    (0..n).for_each(|k| f(base + s * k));
                } else {
                    f(base);
                }
            }
        }
    }
}

fn random_kernel(r: &mut Rng, i: usize) -> Kernel {
    let grid_stride = r.below(5) == 0;
    let coef = [r.below(80), r.below(600), 1 + r.below(3), r.below(80), r.below(40), r.below(40)];
    let coef = if grid_stride { [0, 0, 0, 0, coef[4], 1 + r.below(2)] } else { coef };
    // One kernel in four masks a lane and ors it in: block strides that are powers of two above the
    // lane's bits (the or is an add) or not, constants below, between or among them.
    let mask = (!grid_stride && r.below(4) == 0).then(|| [7, 15, 31, 0x18, 0x38][r.below(5) as usize]);
    let coef = match mask {
        Some(_) => {
            [[64, 128, 256, 512, 96, 100][r.below(6) as usize], 0, [1, 2, 4, 3][r.below(4) as usize], 0, [0, 1, 2, 64, 128, 5, 1024][r.below(7) as usize], 0]
        }
        None => coef,
    };
    Kernel { name: format!("prop{i}"), wide: r.below(3) == 0, signed: r.below(2) == 0, looped: r.below(3) == 0, grid_stride, mask, coef }
}

/// Whether every block's footprint lies in its tile.
fn holds(k: &Kernel, grid: [u32; 3], block: [u32; 3], n: u64, lim: u64, map: &TileMap) -> bool {
    (0..block_count(grid)).all(|i| {
        let blk = block_at(grid, i);
        let mut ok = true;
        k.footprint(grid, block, n, lim, blk, &mut |el| ok &= map.covers(blk, el * k.esz(), (el + 1) * k.esz()));
        ok
    })
}

/// Candidate maps for one launch: block 0's hull moved by the code's strides (true), and it cut,
/// shifted, moved by the wrong stride, a map of everything, and rows of threads `ty` where they fit.
fn candidate_maps(k: &Kernel, grid: [u32; 3], block: [u32; 3], n: u64, lim: u64) -> Vec<TileMap> {
    let esz = k.esz();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    k.footprint(grid, block, n, lim, [0; 3], &mut |el| {
        lo = lo.min(el * esz);
        hi = hi.max((el + 1) * esz);
    });
    let mut all = 0u64;
    for i in 0..block_count(grid) {
        k.footprint(grid, block, n, lim, block_at(grid, i), &mut |el| all = all.max((el + 1) * esz));
    }
    if lo == u64::MAX {
        return Vec::new();
    }
    let [a, b, c, d, e, s] = k.coef;
    let t: u64 = block.iter().map(|&x| u64::from(x)).product();
    let stride = if k.grid_stride { [t * s * esz, t * s * esz * u64::from(grid[0]), 0] } else { [a * esz, b * esz, 0] };
    let len = hi - lo;
    let mut maps = vec![
        TileRange::span(lo, stride, len),
        TileRange::span(lo, stride, len.saturating_sub(esz).max(1)),
        TileRange::span(lo + esz, stride, len),
        TileRange::span(lo, [stride[0] + esz, stride[1], 0], len),
        TileRange::span(0, [0, 0, 0], all),
    ];
    let row = (c * (lim.min(u64::from(block[0])) - 1) + 1) * esz;
    if !k.grid_stride && !k.looped && block[1] > 1 && d * esz >= row {
        maps.push(TileRange::span(e * esz, stride, row).with_rows(u64::from(block[1]), d * esz));
        maps.push(TileRange::span(e * esz, stride, row).with_rows(u64::from(block[1]) - 1, d * esz));
    }
    maps.into_iter().filter_map(|r| TileMap::new(vec![r]).ok()).collect()
}

/// A map drawn at random near the footprint: one or two ranges, strides, base, length and rows each
/// off or not.
fn random_map(r: &mut Rng, near: &TileMap) -> Option<TileMap> {
    let t = near.ranges()[0];
    let mut ranges = Vec::new();
    for _ in 0..1 + r.below(2) {
        let mut jitter = |v: u64, scale: u64| match r.below(4) {
            0 => v,
            1 => v + 4 * r.below(scale),
            2 => v.saturating_sub(4 * r.below(scale)),
            _ => 4 * r.below(scale * 8),
        };
        let stride = [jitter(t.stride[0], 4), jitter(t.stride[1], 4), 0];
        let (base, len) = (jitter(t.base, 8), jitter(t.len, 16).max(1));
        let rows = 1 + r.below(3);
        let pitch = len + 4 * r.below(64);
        ranges.push(TileRange::span(base, stride, len).with_rows(rows, pitch));
    }
    TileMap::new(ranges).ok()
}

/// What the generated cases gave: over the affine kernels (verified, true maps, contradicted,
/// checked), over the masked ones (verified, true maps), and over all, the unsound verdicts.
#[derive(Default)]
struct Counts {
    verified: usize,
    true_maps: usize,
    contradicted: usize,
    checked: usize,
    masked_verified: usize,
    masked_true: usize,
    unsound: usize,
}

/// The seed and the number of kernels: 0x711e5 and 40, or `TILE_PROPS_SEED` and `TILE_PROPS_KERNELS`
/// for a longer campaign (`TILE_PROPS_SEED=7 TILE_PROPS_KERNELS=2000 cargo test -p ostinato-cuda-code
/// --release tiles_props -- --nocapture`, with NVRTC; the lower bounds on how many maps are decided
/// hold for the default case).
fn campaign() -> (u64, usize) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    (var("TILE_PROPS_SEED").unwrap_or(0x711e5), var("TILE_PROPS_KERNELS").map_or(40, |n| n.clamp(1, 100_000) as usize))
}

fn run_cases() -> Option<Counts> {
    let (seed, count) = campaign();
    let mut r = Rng::seeded(seed);
    let kernels: Vec<Kernel> = (0..count).map(|i| random_kernel(&mut r, i)).collect();
    let source = format!("#include \"ostinato.cuh\"\n{}", kernels.iter().map(Kernel::source).collect::<String>());
    let ptx = match crate::compile::compile("tile_props.cu", &source, "compute_90", crate::PdlTrigger::AfterWait) {
        Ok(c) => c.ptx,
        Err(crate::CodeError::NvrtcMissing(why)) => {
            eprintln!("SKIPPED: the tile-map property test needs NVRTC: {why}");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let mut counts = Counts::default();
    for k in &kernels {
        for _ in 0..3 {
            let grid = [1 + r.below(5) as u32, 1 + r.below(3) as u32, 1];
            let block = [[16u32, 32, 64][r.below(3) as usize], [1u32, 2, 4][r.below(3) as usize], 1];
            let g = block_count(grid) * u64::from(block[0] * block[1]);
            let lim = 1 + r.below(u64::from(block[0]));
            let n = if k.grid_stride { 1 + r.below(2 * g) } else { 1 + r.below(5) };
            let mut maps = candidate_maps(k, grid, block, n, lim);
            if let Some(first) = maps.first().cloned() {
                maps.extend((0..4).filter_map(|_| random_map(&mut r, &first)));
            }
            for map in maps {
                let truth = holds(k, grid, block, n, lim, &map);
                let v = verdicts(&ptx, &k.name, grid, block, &[None, Some(n), Some(lim)], &[Some(map.clone()), None, None]);
                let verdict = &v[0].1;
                if k.mask.is_some() {
                    // An `or` is an add only where the bits miss: the check verifies those maps and
                    // leaves the others unknown; only its soundness is asserted of every one.
                    counts.masked_true += usize::from(truth);
                    counts.masked_verified += usize::from(truth && matches!(verdict, Verdict::Verified));
                    if matches!(verdict, Verdict::Verified) && !truth {
                        counts.unsound += 1;
                        if !IGNORE_STRIDES.with(|c| c.get()) {
                            eprintln!("UNSOUND: {k:?} grid {grid:?} block {block:?} n {n} lim {lim} map {map:?}");
                        }
                    }
                    continue;
                }
                counts.checked += 1;
                counts.true_maps += usize::from(truth);
                match verdict {
                    Verdict::Verified if !truth => {
                        counts.unsound += 1;
                        if !IGNORE_STRIDES.with(|c| c.get()) {
                            eprintln!("UNSOUND: {k:?} grid {grid:?} block {block:?} n {n} lim {lim} map {map:?}");
                        }
                    }
                    Verdict::Verified => counts.verified += 1,
                    Verdict::Contradicted { .. } => {
                        assert!(!truth, "{k:?} grid {grid:?} block {block:?} n {n} lim {lim}: a true map {map:?} contradicted: {verdict:?}");
                        counts.contradicted += 1;
                    }
                    Verdict::Unknown { .. } => {
                        if std::env::var_os("TILE_PROPS_DEBUG").is_some() {
                            eprintln!("UNKNOWN (a {} map): ", if truth { "true" } else { "false" });
                            eprintln!("  {k:?} grid {grid:?} block {block:?} n {n} lim {lim} map {map:?}: {verdict:?}");
                        }
                    }
                }
            }
        }
    }
    Some(counts)
}

#[test]
fn random_affine_kernels_never_verify_a_map_their_footprint_leaves() {
    let Some(c) = run_cases() else { return };
    eprintln!(
        "{} maps checked: {} of {} true maps verified ({:.0}%), {} of {} false maps contradicted; masked kernels: {} of {} true maps verified",
        c.checked,
        c.verified,
        c.true_maps,
        100.0 * c.verified as f64 / c.true_maps.max(1) as f64,
        c.contradicted,
        c.checked - c.true_maps,
        c.masked_verified,
        c.masked_true
    );
    assert_eq!(c.unsound, 0);
    assert!(c.verified * 10 >= c.true_maps * 9, "only {} of {} true maps verified", c.verified, c.true_maps);
    assert!(c.contradicted * 10 >= (c.checked - c.true_maps) * 9, "only {} of {} false maps contradicted", c.contradicted, c.checked - c.true_maps);
    assert!(c.masked_verified > 0, "no masked kernel's true map verified: the or-as-add rules never engaged");
}

#[test]
fn the_property_test_catches_a_check_that_trusts_block_zero() {
    IGNORE_STRIDES.with(|c| c.set(true));
    let r = run_cases();
    IGNORE_STRIDES.with(|c| c.set(false));
    let Some(c) = r else { return };
    assert!(c.unsound > 0, "the mutated check verified no false map: the property test would not catch it");
}
