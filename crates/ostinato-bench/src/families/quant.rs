//! The quantized formats of the GEMV rows (`kernels/gemv.cu` gives the layouts): a seeded generator of
//! weights and activations in each, and the per-block arithmetic every implementation shares — the
//! integer dot of a block's quants and activations, its float scale, and its term of a row's sum. The
//! host twin ([`super::gemv`]) and the check's bound are built on these, so that they compute what the
//! kernels compute.

use half::f16;
use ostinato::rng::XorShift64;

/// A weight format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Q8_0,
    Q4_0,
    Q4K,
    Q6K,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Q8_0, Format::Q4_0, Format::Q4K, Format::Q6K];
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Q8_0 => "q8_0",
            Format::Q4_0 => "q4_0",
            Format::Q4K => "q4_k",
            Format::Q6K => "q6_k",
        }
    }
    /// Words of quants per block of 32 weights (the 6-bit format's high bits come after all rows').
    pub fn quant_words(self, rows: u32, k: u32) -> u64 {
        let blocks = rows as u64 * (k as u64 / 32);
        match self {
            Format::Q8_0 => blocks * 8,
            Format::Q4_0 | Format::Q4K => blocks * 4,
            Format::Q6K => blocks * 6,
        }
    }
    /// Words of scales of the whole matrix.
    pub fn scale_words(self, rows: u32, k: u32) -> u64 {
        let (blocks, supers) = (rows as u64 * (k as u64 / 32), rows as u64 * (k as u64 / 256));
        match self {
            Format::Q8_0 | Format::Q4_0 => blocks.div_ceil(2),
            Format::Q4K => supers * 5,
            Format::Q6K => supers * 3,
        }
    }
}

/// An f16 with a random mantissa and a binade in `lo..hi` (powers of two), positive: a normal f16 (no
/// implementation may flush it), whose products with another such are exact in f32.
fn scale(r: &mut XorShift64, lo: i32, hi: i32) -> u16 {
    let e = lo + r.below((hi - lo) as u64) as i32;
    (((e + 15) as u16) << 10) | (r.below(1 << 10) as u16)
}

/// The f16 bits as f32 (exact).
pub fn f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0), c.get(2).copied().unwrap_or(0), c.get(3).copied().unwrap_or(0)]))
        .collect()
}

fn halves_to_words(h: &[u16]) -> Vec<u32> {
    h.chunks(2).map(|c| c[0] as u32 | (c.get(1).copied().unwrap_or(0) as u32) << 16).collect()
}

/// A matrix of `rows` × `k` weights in `format`, and its activations, from `seed`.
#[derive(Clone, Debug)]
pub struct Problem {
    pub format: Format,
    pub rows: u32,
    pub k: u32,
    pub wq: Vec<u32>,
    pub ws: Vec<u32>,
    pub xq: Vec<u32>,
    pub xs: Vec<u32>,
}

impl Problem {
    /// Random quants (every code of the format) and scales: weight scales in [2^-9, 2^-5), activation
    /// scales in [2^-7, 2^-3), 6-bit scales and mins in 0..64, int8 scales in -127..=127.
    pub fn generate(format: Format, rows: u32, k: u32, seed: u64) -> Problem {
        let mut r = XorShift64::seeded(seed);
        let blocks = rows as usize * (k as usize / 32);
        let supers = blocks / 8;
        let bytes = |n: usize, r: &mut XorShift64| (0..n).map(|_| r.next_u64() as u8).collect::<Vec<u8>>();
        let int8 = |b: Vec<u8>| b.into_iter().map(|v| if v == 0x80 { 0x81 } else { v }).collect::<Vec<u8>>();
        let wq = match format {
            Format::Q8_0 => words_of(&int8(bytes(blocks * 32, &mut r))),
            Format::Q4_0 | Format::Q4K => words_of(&bytes(blocks * 16, &mut r)),
            Format::Q6K => words_of(&bytes(blocks * 24, &mut r)),
        };
        let ws = match format {
            Format::Q8_0 | Format::Q4_0 => halves_to_words(&(0..blocks).map(|_| scale(&mut r, -9, -5)).collect::<Vec<u16>>()),
            Format::Q4K => (0..supers)
                .flat_map(|_| {
                    let (d, dmin) = (scale(&mut r, -9, -5), scale(&mut r, -9, -5));
                    let six: Vec<u8> = (0..16).map(|_| r.below(64) as u8).collect();
                    let mut w = vec![d as u32 | (dmin as u32) << 16];
                    w.extend(words_of(&six));
                    w
                })
                .collect(),
            Format::Q6K => (0..supers)
                .flat_map(|_| {
                    let d = scale(&mut r, -9, -5);
                    let sc: Vec<u8> = (0..8).map(|_| (r.below(255) as i32 - 127) as i8 as u8).collect();
                    let mut w = vec![d as u32];
                    w.extend(words_of(&sc));
                    w
                })
                .collect(),
        };
        let xq = words_of(&int8(bytes(k as usize, &mut r)));
        let xs = halves_to_words(&(0..k / 32).map(|_| scale(&mut r, -7, -3)).collect::<Vec<u16>>());
        Problem { format, rows, k, wq, ws, xq, xs }
    }
}

fn byte(words: &[u32], i: usize) -> u8 {
    (words[i / 4] >> (8 * (i % 4))) as u8
}

fn half_at(words: &[u32], i: usize) -> f32 {
    f16_to_f32((words[i / 2] >> (16 * (i % 2))) as u16)
}

/// What one block (row `row`, block `j`) contributes: its integer parts and float scales — the term
/// is `(s1 · a) − (s2 · b)` with `s1 · a` alone where `s2` is zero (every format but `q4_k`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockTerm {
    pub s1: f32,
    pub a: i32,
    pub s2: f32,
    pub b: i32,
}

impl BlockTerm {
    /// The term as the kernels compute it: each operation rounded to f32, none fused.
    #[inline]
    pub fn value(&self) -> f32 {
        let t = self.s1 * self.a as f32;
        if self.s2 == 0.0 {
            t
        } else {
            t - self.s2 * self.b as f32
        }
    }
    /// |s1 · a| + |s2 · b| in exact arithmetic.
    pub fn magnitude(&self) -> f64 {
        (self.s1 as f64 * self.a as f64).abs() + (self.s2 as f64 * self.b as f64).abs()
    }
}

/// A weight code of `p` (row `row`, weight `i` of the row), as stored (unsigned for 4- and 6-bit).
pub fn code(p: &Problem, row: usize, i: usize) -> i32 {
    let nb = p.k as usize / 32;
    let (blk, e) = (row * nb + i / 32, i % 32);
    let nibble = |words: &[u32]| {
        let b = byte(words, blk * 16 + e % 16);
        (if e < 16 { b & 15 } else { b >> 4 }) as i32
    };
    match p.format {
        Format::Q8_0 => byte(&p.wq, blk * 32 + e) as i8 as i32,
        Format::Q4_0 | Format::Q4K => nibble(&p.wq),
        Format::Q6K => {
            let hi_base = p.rows as usize * nb * 16;
            let h = (byte(&p.wq, hi_base + blk * 8 + e % 8) >> (2 * (e / 8))) & 3;
            nibble(&p.wq) | (h as i32) << 4
        }
    }
}

/// Activation `i` (int8).
pub fn act(p: &Problem, i: usize) -> i32 {
    byte(&p.xq, i) as i8 as i32
}

/// A problem's codes and activations one per byte, and each activation block's sum: what the dots are
/// taken over (decoded once per kernel call, so that the dots vectorise).
pub struct Decoded {
    /// Row-major codes as stored (signed for 8-bit, 0..16 or 0..64 for 4- and 6-bit).
    pub codes: Vec<i8>,
    pub acts: Vec<i8>,
    pub xsums: Vec<i32>,
}

impl Problem {
    /// The codes and activations one per byte.
    pub fn decode(&self) -> Decoded {
        let (rows, k) = (self.rows as usize, self.k as usize);
        let nb = k / 32;
        let bytes = |w: &[u32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let wq = bytes(&self.wq);
        let codes: Vec<i8> = match self.format {
            Format::Q8_0 => wq[..rows * k].iter().map(|&b| b as i8).collect(),
            Format::Q4_0 | Format::Q4K | Format::Q6K => {
                let hi = rows * nb * 16;
                let mut c = vec![0i8; rows * k];
                for blk in 0..rows * nb {
                    for e in 0..32 {
                        let b = wq[blk * 16 + e % 16];
                        let mut q = if e < 16 { b & 15 } else { b >> 4 };
                        if self.format == Format::Q6K {
                            q |= ((wq[hi + blk * 8 + e % 8] >> (2 * (e / 8))) & 3) << 4;
                        }
                        c[blk * 32 + e] = q as i8;
                    }
                }
                c
            }
        };
        let acts: Vec<i8> = bytes(&self.xq)[..k].iter().map(|&b| b as i8).collect();
        let xsums = acts.chunks(32).map(|c| c.iter().map(|&v| v as i32).sum()).collect();
        Decoded { codes, acts, xsums }
    }
}

/// Block `j` of row `row`: its integer dot and scales, as every implementation computes them.
pub fn block_term(p: &Problem, d: &Decoded, row: usize, j: usize) -> BlockTerm {
    let nb = p.k as usize / 32;
    let blk = row * nb + j;
    let (w, x) = (&d.codes[blk * 32..blk * 32 + 32], &d.acts[j * 32..j * 32 + 32]);
    let dot: i32 = w.iter().zip(x).map(|(&a, &b)| a as i32 * b as i32).sum();
    let xsum = d.xsums[j];
    let dx = half_at(&p.xs, j);
    let (sup, sub) = (row * (nb / 8) + j / 8, j % 8);
    match p.format {
        Format::Q8_0 => BlockTerm { s1: half_at(&p.ws, blk) * dx, a: dot, s2: 0.0, b: 0 },
        Format::Q4_0 => BlockTerm { s1: half_at(&p.ws, blk) * dx, a: dot - 8 * xsum, s2: 0.0, b: 0 },
        Format::Q4K => {
            let w0 = p.ws[sup * 5];
            let (d, dmin) = (f16_to_f32(w0 as u16), f16_to_f32((w0 >> 16) as u16));
            let sc = byte(&p.ws, (sup * 5 + 1) * 4 + sub) as i32;
            let mn = byte(&p.ws, (sup * 5 + 3) * 4 + sub) as i32;
            BlockTerm { s1: d * dx, a: sc * dot, s2: dmin * dx, b: mn * xsum }
        }
        Format::Q6K => {
            let d = f16_to_f32(p.ws[sup * 3] as u16);
            let sc = byte(&p.ws, (sup * 3 + 1) * 4 + sub) as i8 as i32;
            BlockTerm { s1: d * dx, a: sc * (dot - 32 * xsum), s2: 0.0, b: 0 }
        }
    }
}

/// Lanes of a row (the CUDA twin's warp).
pub const LANES: usize = 32;

/// Row `row`'s sum as the kernels compute it: lane l adds the terms of blocks l, l + 32, ... in order,
/// then the lanes' sums are added pairwise at offsets 16, 8, 4, 2, 1 (the butterfly's order for lane 0).
pub fn row_sum(p: &Problem, d: &Decoded, row: usize) -> f32 {
    let nb = p.k as usize / 32;
    let mut lanes = [0f32; LANES];
    for (l, lane) in lanes.iter_mut().enumerate() {
        for j in (l..nb).step_by(LANES) {
            *lane += block_term(p, d, row, j).value();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_span_each_format_and_the_layout_sizes_match() {
        for f in Format::ALL {
            let p = Problem::generate(f, 16, 512, 3);
            assert_eq!(p.wq.len() as u64, f.quant_words(16, 512), "{f:?}");
            assert_eq!(p.ws.len() as u64, f.scale_words(16, 512), "{f:?}");
            let codes: Vec<i32> = (0..16 * 512).map(|i| code(&p, i / 512, i % 512)).collect();
            let (lo, hi) = (codes.iter().min().copied(), codes.iter().max().copied());
            let want = match f {
                Format::Q8_0 => (Some(-127), Some(127)),
                Format::Q4_0 | Format::Q4K => (Some(0), Some(15)),
                Format::Q6K => (Some(0), Some(63)),
            };
            assert_eq!((lo, hi), want, "{f:?}");
        }
    }

    #[test]
    fn the_decoded_codes_are_the_stored_ones() {
        for f in Format::ALL {
            let p = Problem::generate(f, 8, 1024, 5);
            let d = p.decode();
            for i in 0..8 * 1024 {
                assert_eq!(d.codes[i] as i32, code(&p, i / 1024, i % 1024), "{f:?} weight {i}");
            }
            assert!((0..1024).all(|i| d.acts[i] as i32 == act(&p, i)));
        }
    }

    #[test]
    fn a_block_term_is_the_dequantised_dot() {
        // The integer form against the weights dequantised one by one (f64, exact for these values).
        for f in Format::ALL {
            let p = Problem::generate(f, 8, 512, 9);
            let dec = p.decode();
            for (row, j) in [(0, 0), (3, 7), (7, 15)] {
                let t = block_term(&p, &dec, row, j);
                let exact = t.s1 as f64 * t.a as f64 - t.s2 as f64 * t.b as f64;
                let nb = p.k as usize / 32;
                let dx = half_at(&p.xs, j) as f64;
                let (sup, sub) = (row * (nb / 8) + j / 8, j % 8);
                let dequant = |i: usize| -> f64 {
                    let q = code(&p, row, j * 32 + i) as f64;
                    match f {
                        Format::Q8_0 => half_at(&p.ws, row * nb + j) as f64 * q,
                        Format::Q4_0 => half_at(&p.ws, row * nb + j) as f64 * (q - 8.0),
                        Format::Q4K => {
                            let w0 = p.ws[sup * 5];
                            let sc = byte(&p.ws, (sup * 5 + 1) * 4 + sub) as f64;
                            let mn = byte(&p.ws, (sup * 5 + 3) * 4 + sub) as f64;
                            f16_to_f32(w0 as u16) as f64 * sc * q - f16_to_f32((w0 >> 16) as u16) as f64 * mn
                        }
                        Format::Q6K => f16_to_f32(p.ws[sup * 3] as u16) as f64 * (byte(&p.ws, (sup * 3 + 1) * 4 + sub) as i8 as f64) * (q - 32.0),
                    }
                };
                let direct: f64 = (0..32).map(|i| dequant(i) * dx * act(&p, j * 32 + i) as f64).sum();
                assert!((exact - direct).abs() <= 1e-9 * direct.abs().max(1e-6), "{f:?} ({row}, {j}): {exact} vs {direct}");
            }
        }
    }
}
