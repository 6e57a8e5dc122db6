//! Host kernels of the Llama decode step: bf16 weights and KV cache, f32 activations and accumulation.
//! Their CUDA twins live in `kernels/llama.cu` (this crate) with the same signatures and the same math (the
//! same bf16 rounding of the KV cache, the same RoPE angles from the same frequency table); summation
//! order differs, so the two agree within the decode check's tolerance, not bit for bit. Projections
//! spread their rows over the machine's cores: the host backend is the oracle of the full-size model.
//!
//! bf16 tensors are stored two per 32-bit word, little-endian: element `2i` is the low half of word `i`.
//!
//! What crosses kernels is the CUDA kernels': the QKV projection leaves every row (q, and the new K and
//! V rows) in `qkv` and the attention appends K and V to the cache; the attention leaves per-split
//! softmax partials that the output projection merges (here one split holds the whole range, the others
//! are empty); the streaming projections leave their work counter at zero; the LM head writes the
//! greedy token and its trace row.
//!
//! The QKV, attention and output-projection twins run one block at a time (`HostKernel::per_block`),
//! as the GPU's blocks share the work out, so that every access is checked against the block's tile
//! map (`crate::geometry`).

use ostinato::{Access, KernelSig, ScalarType};

use ostinato_host::kernel::{BufView, HostKernel, Words};

fn bf16_at(w: &Words<'_>, i: usize) -> f32 {
    let word = w.u32(i / 2);
    f32::from_bits(if i % 2 == 0 { word << 16 } else { word & 0xffff_0000 })
}

fn bf16_store(w: &Words<'_>, i: usize, v: f32) {
    let b = half::bf16::from_f32(v).to_bits() as u32;
    let word = w.u32(i / 2);
    w.set_u32(i / 2, if i % 2 == 0 { (word & 0xffff_0000) | b } else { (word & 0xffff) | (b << 16) });
}

fn f32s(w: &Words<'_>, n: usize) -> Vec<f32> {
    (0..n).map(|i| w.f32(i)).collect()
}

/// `w[first .. first + x.len()] · x` over bf16 elements of `w`: a word (two elements) at a time into
/// eight independent sums, added pairwise at the end — the twins' own order (the GPU's differs; each
/// is f32 accumulation), four times as fast as one running sum, whose every add waits for the last.
fn dot_bf16(w: &Words<'_>, first: usize, x: &[f32]) -> f32 {
    if first % 2 != 0 {
        return x.iter().enumerate().map(|(j, xv)| bf16_at(w, first + j) * xv).sum();
    }
    let (w0, pairs) = (first / 2, x.chunks_exact(2));
    let rest = pairs.remainder();
    let mut acc = [0.0f32; 8];
    for (i, p) in pairs.enumerate() {
        let word = w.u32(w0 + i);
        let a = &mut acc[2 * (i % 4)..2 * (i % 4) + 2];
        a[0] += f32::from_bits(word << 16) * p[0];
        a[1] += f32::from_bits(word & 0xffff_0000) * p[1];
    }
    let mut sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (j, xv) in rest.iter().enumerate() {
        sum += bf16_at(w, first + x.len() - rest.len() + j) * xv;
    }
    sum
}

/// `out[r] = W[rows(r)] · x` for `r < n`, W bf16 row-major with `x.len()` columns, rows spread over the
/// available cores.
fn project(w: &Words<'_>, x: &[f32], n: usize, rows: impl Fn(usize) -> usize + Sync) -> Vec<f32> {
    let k = x.len();
    let dot = |r: usize| dot_bf16(w, rows(r) * k, x);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(n.div_ceil(64)).max(1);
    if threads == 1 {
        return (0..n).map(dot).collect();
    }
    let per = n.div_ceil(threads);
    let mut out = vec![0.0f32; n];
    std::thread::scope(|s| {
        for (t, chunk) in out.chunks_mut(per).enumerate() {
            let dot = &dot;
            s.spawn(move || {
                for (i, o) in chunk.iter_mut().enumerate() {
                    *o = dot(t * per + i);
                }
            });
        }
    });
    out
}

/// RMS norm of `x` with bf16 weights `g`: `x * rsqrt(mean(x²) + eps) * g`.
fn rmsnorm(x: &[f32], g: &Words<'_>, eps: f32) -> Vec<f32> {
    let ss: f32 = x.iter().map(|v| v * v).sum();
    let scale = 1.0 / (ss / x.len() as f32 + eps).sqrt();
    x.iter().enumerate().map(|(i, v)| v * scale * bf16_at(g, i)).collect()
}

fn sig(name: &str, params: &[(&str, Option<Access>, ScalarType)]) -> KernelSig {
    params.iter().fold(KernelSig::new(name), |k, (p, a, t)| match a {
        Some(a) => k.buffer(*p, *a),
        None => k.scalar(*p, *t),
    })
}

const U: ScalarType = ScalarType::U32;
const F: ScalarType = ScalarType::F32;
use Access::{Read as R, ReadWrite as RW, Write as W};

/// `llama_embed(x: write f32[hidden], emb: read bf16[vocab*hidden], token: read u32[1], hidden)`.
pub fn embed_sig() -> KernelSig {
    sig("llama_embed", &[("x", Some(W), U), ("emb", Some(R), U), ("token", Some(R), U), ("hidden", None, U)])
}

/// `llama_qkv(qkv, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps)`: the normed
/// q/k/v projection with RoPE, every row to `qkv` (f32, `[heads + 2 kv_heads][head_dim]`: query heads,
/// then K heads, then V heads), from which the attention reads q and appends the new K and V rows to
/// the cache. Block `(x, y)` computes head `y`'s RoPE pairs `x·W .. x·W + W` (W warps a block).
pub fn qkv_sig() -> KernelSig {
    sig(
        "llama_qkv",
        &[
            ("qkv", Some(W), U),
            ("x", Some(R), U),
            ("ln", Some(R), U),
            ("wqkv", Some(R), U),
            ("rope_freq", Some(R), U),
            ("pos", None, U),
            ("hidden", None, U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("head_dim", None, U),
            ("eps", None, F),
        ],
    )
}

/// `llama_attn(part, kcache, vcache, qkv, pos, heads, kv_heads, max_seq, splits, head_dim)`: appends
/// the new K and V rows of `qkv` to the caches at `pos` (in bf16) and writes each split's softmax
/// partial per query head to `part` ([`partial_floats`] floats per (KV head, split, group member)),
/// which `llama_o` merges. Block `(s, h)` is split `s` of KV head `h`.
pub fn attn_sig() -> KernelSig {
    sig(
        "llama_attn",
        &[
            ("part", Some(W), U),
            ("kcache", Some(RW), U),
            ("vcache", Some(RW), U),
            ("qkv", Some(R), U),
            ("pos", None, U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("max_seq", None, U),
            ("splits", None, U),
            ("head_dim", None, U),
        ],
    )
}

/// Floats of one attention partial: the running max, the sum, two pads, the `head_dim` weighted sums.
pub const fn partial_floats(head_dim: u32) -> usize {
    4 + head_dim as usize
}

/// `llama_o(x: read_write f32[m], part: read, w: read bf16[m*heads*head_dim], m, heads, kv_heads,
/// splits, head_dim)`: merges the attention partials and adds `W attn` to x. Block `(b, h)` takes rows
/// `64 b .. 64 b + 64` of KV head `h`'s columns.
pub fn o_sig() -> KernelSig {
    sig(
        "llama_o",
        &[
            ("x", Some(RW), U),
            ("part", Some(R), U),
            ("w", Some(R), U),
            ("m", None, U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("splits", None, U),
            ("head_dim", None, U),
        ],
    )
}

/// `llama_down(x: read_write f32[m], ticket: read_write u32, w: read bf16[m*k], v: read f32[k], m, k)`:
/// `x += W v`; `ticket` is the kernel's work counter (zero before and after).
pub fn down_sig() -> KernelSig {
    sig("llama_down", &[("x", Some(RW), U), ("ticket", Some(RW), U), ("w", Some(R), U), ("v", Some(R), U), ("m", None, U), ("k", None, U)])
}

/// `llama_ffn_in(act: write f32[ffn], ticket, x, ln, wgu: read bf16[2*ffn*hidden], ffn, hidden, eps)`.
pub fn ffn_in_sig() -> KernelSig {
    sig(
        "llama_ffn_in",
        &[
            ("act", Some(W), U),
            ("ticket", Some(RW), U),
            ("x", Some(R), U),
            ("ln", Some(R), U),
            ("wgu", Some(R), U),
            ("ffn", None, U),
            ("hidden", None, U),
            ("eps", None, F),
        ],
    )
}

/// `llama_lm_head(logits, part, counter, ticket, token, trace, x, ln, emb, pos, max_seq, vocab, hidden,
/// eps)`: the final norm, the logits, the greedy token to `token[0]` (what the next step gathers) and,
/// where `pos < max_seq`, row `pos` of `trace` ([`TRACE_WORDS`] words: the token, then as f32 the top-1
/// logit, the second-best logit and the largest |logit|).
pub fn lm_head_sig() -> KernelSig {
    sig(
        "llama_lm_head",
        &[
            ("logits", Some(W), U),
            ("part", Some(RW), U),
            ("counter", Some(RW), U),
            ("ticket", Some(RW), U),
            ("token", Some(W), U),
            ("trace", Some(W), U),
            ("x", Some(R), U),
            ("ln", Some(R), U),
            ("emb", Some(R), U),
            ("pos", None, U),
            ("max_seq", None, U),
            ("vocab", None, U),
            ("hidden", None, U),
            ("eps", None, F),
        ],
    )
}

/// Words of one position's row of the greedy trace.
pub const TRACE_WORDS: usize = 4;

/// The words a trace row holds before the LM head wrote it (no token; NaN values).
pub const TRACE_UNWRITTEN: u32 = 0xffff_ffff;

/// 1 / sqrt(`head_dim`) as f32, as both twins scale attention scores: exact for 64.
pub fn attn_scale(head_dim: usize) -> f32 {
    (1.0 / (head_dim as f64).sqrt()) as f32
}

/// The words of a bf16 extent holding `count` elements.
fn halves<'a>(view: &'a BufView<'_>, count: usize, write: bool) -> Result<Words<'a>, String> {
    view.words(count.div_ceil(2), write)
}

pub fn embed() -> HostKernel {
    HostKernel::new(embed_sig(), |cx| {
        let hidden = cx.u32(3)? as usize;
        let (xv, ev, tv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let token = tv.words(1, false)?.u32(0) as usize;
        let rows = ev.len_bytes() as usize / (2 * hidden.max(1));
        if token >= rows {
            return Err(format!("llama_embed: token {token} is past the embedding's {rows} rows"));
        }
        let emb = halves(&ev, rows * hidden, false)?;
        let x = xv.words(hidden, true)?;
        for i in 0..hidden {
            x.set_f32(i, bf16_at(&emb, token * hidden + i));
        }
        Ok(())
    })
}

/// `W[row] · x` for a bf16 row of `x.len()` columns starting at row `row` of `view` (its words checked
/// against the block's tile).
fn row_dot(view: &BufView<'_>, row: usize, x: &[f32]) -> Result<f32, String> {
    let k = x.len();
    Ok(dot_bf16(&view.words_range(row * k / 2, k.div_ceil(2), false)?, 0, x))
}

pub fn qkv() -> HostKernel {
    HostKernel::per_block(qkv_sig(), |cx| {
        let pos = cx.u32(5)? as usize;
        let (hidden, heads, kvh, hd) = (cx.u32(6)? as usize, cx.u32(7)? as usize, cx.u32(8)? as usize, cx.u32(9)? as usize);
        let eps = cx.f32(10)?;
        let [bx, head, _] = cx.block().map(|b| b as usize);
        let warps = (cx.launch.block[0] / 32).max(1) as usize;
        let half = hd / 2;
        if head >= heads + 2 * kvh || hidden % 2 != 0 {
            return Err(format!("llama_qkv: block row {head} is past the {} heads, or hidden {hidden} is odd", heads + 2 * kvh));
        }
        let views: Vec<_> = (0..5).map(|i| cx.buffer(i)).collect::<Result<_, _>>()?;
        let x = f32s(&views[1].words(hidden, false)?, hidden);
        let ln = halves(&views[2], hidden, false)?;
        let xn = rmsnorm(&x, &ln, eps);
        for j in bx * warps..(bx * warps + warps).min(half) {
            let (mut a, mut b) = (row_dot(&views[3], head * hd + j, &xn)?, row_dot(&views[3], head * hd + j + half, &xn)?);
            if head < heads + kvh {
                let freq = views[4].words_range(j, 1, false)?.f32(0);
                let (s, c) = (pos as f32 * freq).sin_cos();
                (a, b) = (a * c - b * s, b * c + a * s);
            }
            views[0].words_range(head * hd + j, 1, true)?.set_f32(0, a);
            views[0].words_range(head * hd + j + half, 1, true)?.set_f32(0, b);
        }
        Ok(())
    })
}

/// One query head's softmax partial over some cache rows: (max, sum, unnormalised weighted sums).
struct Partial {
    m: f32,
    l: f32,
    acc: Vec<f32>,
}

impl Partial {
    fn store(&self, part: &Words<'_>, rec: usize) {
        for (i, v) in [self.m, self.l, 0.0, 0.0].iter().chain(self.acc.iter()).enumerate() {
            part.set_f32(rec + i, *v);
        }
    }
}

pub fn attn() -> HostKernel {
    HostKernel::per_block(attn_sig(), |cx| {
        let pos = cx.u32(4)? as usize;
        let (heads, kvh, max_seq, splits, hd) = (cx.u32(5)? as usize, cx.u32(6)? as usize, cx.u32(7)? as usize, cx.u32(8)? as usize, cx.u32(9)? as usize);
        if kvh == 0 || heads % kvh != 0 || splits == 0 || hd % 2 != 0 {
            return Err(format!("llama_attn: {heads} query heads do not group over {kvh} KV heads in {splits} splits of head dim {hd}"));
        }
        if pos >= max_seq {
            return Err(format!("llama_attn: pos {pos} is past the cache's {max_seq} rows"));
        }
        let (group, rec) = (heads / kvh, partial_floats(hd as u32));
        let [s, h, _] = cx.block().map(|b| b as usize);
        let (pv, kv, vv, qv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?);
        // This block's records: one per query head of KV head h.
        let part = pv.words_range((h * splits + s) * group * rec, group * rec, true)?;
        if s != 0 {
            // The whole range is split 0's partial; the other splits are empty.
            let empty = Partial { m: f32::MIN, l: 0.0, acc: vec![0.0; hd] };
            for g in 0..group {
                empty.store(&part, g * rec);
            }
            return Ok(());
        }
        // KV head h's cache rows; the append, then attention over rows 0..=pos.
        let kc = kv.words_range(h * max_seq * hd / 2, max_seq * hd / 2, true)?;
        let vc = vv.words_range(h * max_seq * hd / 2, max_seq * hd / 2, true)?;
        let fresh_k = f32s(&qv.words_range((heads + h) * hd, hd, false)?, hd);
        let fresh_v = f32s(&qv.words_range((heads + kvh + h) * hd, hd, false)?, hd);
        for d in 0..hd {
            bf16_store(&kc, pos * hd + d, fresh_k[d]);
            bf16_store(&vc, pos * hd + d, fresh_v[d]);
        }
        let q = f32s(&qv.words_range(h * group * hd, group * hd, false)?, group * hd);
        let scale = attn_scale(hd);
        for g in 0..group {
            let scores: Vec<f32> = (0..=pos).map(|t| (0..hd).map(|d| q[g * hd + d] * bf16_at(&kc, t * hd + d)).sum::<f32>() * scale).collect();
            let m = scores.iter().copied().fold(f32::MIN, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
            let acc = (0..hd).map(|d| (0..=pos).map(|t| e[t] * bf16_at(&vc, t * hd + d)).sum()).collect();
            Partial { m, l: e.iter().sum(), acc }.store(&part, g * rec);
        }
        Ok(())
    })
}

pub fn o() -> HostKernel {
    HostKernel::per_block(o_sig(), |cx| {
        let (m, heads, kvh, splits, hd) = (cx.u32(3)? as usize, cx.u32(4)? as usize, cx.u32(5)? as usize, cx.u32(6)? as usize, cx.u32(7)? as usize);
        if kvh == 0 || heads % kvh != 0 || hd % 2 != 0 {
            return Err(format!("llama_o: {heads} query heads do not group over {kvh} KV heads of head dim {hd}"));
        }
        let (group, rec, k) = (heads / kvh, partial_floats(hd as u32), heads * hd);
        let [b, h, _] = cx.block().map(|b| b as usize);
        let (xv, pv, wv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        // KV head h's query heads' partials merged (the splits with rows only), as the CUDA kernel does.
        let part = pv.words_range(h * splits * group * rec, splits * group * rec, false)?;
        let mut attn = vec![0.0f32; group * hd];
        for g in 0..group {
            let at = |sp: usize| (sp * group + g) * rec;
            let live: Vec<usize> = (0..splits).filter(|&sp| part.f32(at(sp) + 1) > 0.0).collect();
            let mx = live.iter().map(|&sp| part.f32(at(sp))).fold(f32::MIN, f32::max);
            let scale: Vec<f32> = live.iter().map(|&sp| (part.f32(at(sp)) - mx).exp()).collect();
            let l: f32 = live.iter().zip(&scale).map(|(&sp, c)| part.f32(at(sp) + 1) * c).sum();
            for d in 0..hd {
                let o: f32 = live.iter().zip(&scale).map(|(&sp, c)| part.f32(at(sp) + 4 + d) * c).sum();
                attn[g * hd + d] = o / l;
            }
        }
        let rows = (b * crate::geometry::O_ROWS as usize)..((b + 1) * crate::geometry::O_ROWS as usize).min(m);
        let x = xv.words_range(rows.start, rows.len(), true)?;
        for (i, r) in rows.enumerate() {
            let y = dot_bf16(&wv.words_range((r * k + h * group * hd) / 2, group * hd / 2, false)?, 0, &attn);
            x.set_f32(i, x.f32(i) + y);
        }
        Ok(())
    })
}

/// Leaves a kernel's work counter as the CUDA kernel does: zero.
fn reset_ticket(view: &BufView<'_>) -> Result<(), String> {
    view.words(1, true)?.set_u32(0, 0);
    Ok(())
}

pub fn down() -> HostKernel {
    HostKernel::new(down_sig(), |cx| {
        let (m, k) = (cx.u32(4)? as usize, cx.u32(5)? as usize);
        let (xv, tv, wv, vv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?);
        let x = xv.words(m, true)?;
        let w = halves(&wv, m * k, false)?;
        let v = f32s(&vv.words(k, false)?, k);
        let y = project(&w, &v, m, |r| r);
        for (i, yv) in y.iter().enumerate() {
            x.set_f32(i, x.f32(i) + yv);
        }
        reset_ticket(&tv)
    })
}

pub fn ffn_in() -> HostKernel {
    HostKernel::new(ffn_in_sig(), |cx| {
        let (ffn, hidden, eps) = (cx.u32(5)? as usize, cx.u32(6)? as usize, cx.f32(7)?);
        let (av, tv, xv, lv, wv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?, cx.buffer(4)?);
        let act = av.words(ffn, true)?;
        let x = f32s(&xv.words(hidden, false)?, hidden);
        let ln = halves(&lv, hidden, false)?;
        let w = halves(&wv, 2 * ffn * hidden, false)?;
        let xn = rmsnorm(&x, &ln, eps);
        let gu = project(&w, &xn, 2 * ffn, |r| r);
        for i in 0..ffn {
            let (g, u) = (gu[i], gu[ffn + i]);
            act.set_f32(i, g / (1.0 + (-g).exp()) * u);
        }
        reset_ticket(&tv)
    })
}

pub fn lm_head() -> HostKernel {
    HostKernel::new(lm_head_sig(), |cx| {
        let (pos, max_seq, vocab, hidden, eps) = (cx.u32(9)? as usize, cx.u32(10)? as usize, cx.u32(11)? as usize, cx.u32(12)? as usize, cx.f32(13)?);
        let (lv, tkv, tv, trv, xv, nv, ev) = (cx.buffer(0)?, cx.buffer(3)?, cx.buffer(4)?, cx.buffer(5)?, cx.buffer(6)?, cx.buffer(7)?, cx.buffer(8)?);
        let logits = lv.words(vocab, true)?;
        let token = tv.words(1, true)?;
        let x = f32s(&xv.words(hidden, false)?, hidden);
        let ln = halves(&nv, hidden, false)?;
        let emb = halves(&ev, vocab * hidden, false)?;
        let xn = rmsnorm(&x, &ln, eps);
        let y = project(&emb, &xn, vocab, |r| r);
        let mut best = 0;
        for (i, v) in y.iter().enumerate() {
            logits.set_f32(i, *v);
            if *v > y[best] {
                best = i;
            }
        }
        token.set_u32(0, best as u32);
        if pos < max_seq {
            // The trace row, as the CUDA kernel reduces it: the second-best value (a tie's equal value),
            // and the largest |logit| as max(top-1, -least).
            let second = y.iter().enumerate().filter(|&(i, _)| i != best).map(|(_, v)| *v).fold(f32::MIN, f32::max);
            let least = y.iter().copied().fold(f32::MAX, f32::min);
            let row = trv.words_range(TRACE_WORDS * pos, TRACE_WORDS, true)?;
            for (i, w) in [best as u32, y[best].to_bits(), second.to_bits(), y[best].max(-least).to_bits()].into_iter().enumerate() {
                row.set_u32(i, w);
            }
        }
        reset_ticket(&tkv)
    })
}

/// Every Llama kernel.
pub fn all() -> Vec<HostKernel> {
    vec![embed(), qkv(), attn(), o(), down(), ffn_in(), lm_head()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn bf16_rounds_to_nearest_even_like_the_cuda_twin() {
        // The CUDA kernels round with u + 0x7fff + ((u >> 16) & 1): check the crate agrees on ties.
        for bits in [0x3f80_8000u32, 0x3f81_8000, 0x3f80_7fff, 0xbf80_8001, 0x4049_0fdb] {
            let u = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
            assert_eq!(half::bf16::from_f32(f32::from_bits(bits)).to_bits() as u32, u, "{bits:#x}");
        }
    }
}
