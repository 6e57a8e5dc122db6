//! Host kernels of the Llama decode step: bf16 weights and KV cache, f32 activations and accumulation.
//! Their CUDA twins live in `kernels/llama.cu` (this crate) with the same signatures and the same math (the
//! same bf16 rounding of the KV cache, the same RoPE angles from the same frequency table); summation
//! order differs, so the two agree within the decode check's tolerance, not bit for bit. Projections
//! spread their rows over the machine's cores: the host backend is the oracle of the full-size model.
//!
//! bf16 tensors are stored two per 32-bit word, little-endian: element `2i` is the low half of word `i`.
//!
//! What crosses kernels is the CUDA kernels': the QKV projection leaves the new K and V rows in
//! `kv_new` and the attention appends them; the attention leaves per-split softmax partials that the
//! output projection merges (here one split holds the whole range, the others are empty); the streaming
//! projections leave their work counter at zero.

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

/// `out[r] = W[rows(r)] · x` for `r < n`, W bf16 row-major with `x.len()` columns, rows spread over the
/// available cores.
fn project(w: &Words<'_>, x: &[f32], n: usize, rows: impl Fn(usize) -> usize + Sync) -> Vec<f32> {
    let k = x.len();
    let dot = |r: usize| {
        let base = rows(r) * k;
        let mut acc = 0.0f32;
        for (j, xv) in x.iter().enumerate() {
            acc += bf16_at(w, base + j) * xv;
        }
        acc
    };
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

/// The pack's entries of QKV, attention and the output projection, each built for one shape class
/// (kernels/llama.cu: a kernel's registers are those of its largest path): (name, the widest hidden
/// for QKV, the head dim for attention and O).
pub const QKV_ENTRIES: [(&str, u32); 2] = [("llama_qkv", 2048), ("llama_qkv_h3072", 3072)];
pub const ATTN_ENTRIES: [(&str, u32); 2] = [("llama_attn", 64), ("llama_attn_hd128", 128)];
pub const O_ENTRIES: [(&str, u32); 2] = [("llama_o", 64), ("llama_o_hd128", 128)];

/// The entry of `entries` for `size`: the first whose bound holds (`exact`: equals it).
pub fn entry_for(entries: &[(&'static str, u32)], size: u32, exact: bool) -> Option<&'static str> {
    entries.iter().find(|(_, b)| if exact { *b == size } else { size <= *b }).map(|(n, _)| *n)
}

/// `llama_qkv(q, kv_new, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps)`: the
/// normed q/k/v projection with RoPE; q to `q` (f32), the new K and V rows to `kv_new` (bf16,
/// `[2][kv_heads][head_dim]`), which the attention appends to the cache. `name`: one of
/// [`QKV_ENTRIES`].
pub fn qkv_sig(name: &str) -> KernelSig {
    sig(
        name,
        &[
            ("q", Some(W), U),
            ("kv_new", Some(W), U),
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

/// `llama_attn(part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits, head_dim)`:
/// appends `kv_new` to the caches at `pos` and writes each split's softmax partial per query head to
/// `part` ([`partial_floats`] floats per (KV head, split, group member)), which `llama_o` merges.
/// `name`: one of [`ATTN_ENTRIES`].
pub fn attn_sig(name: &str) -> KernelSig {
    sig(
        name,
        &[
            ("part", Some(W), U),
            ("kcache", Some(RW), U),
            ("vcache", Some(RW), U),
            ("q", Some(R), U),
            ("kv_new", Some(R), U),
            ("pos", None, U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("max_seq", None, U),
            ("splits", None, U),
            ("head_dim", None, U),
        ],
    )
}

/// Floats of one attention partial for heads of `head_dim`: the running max, the sum, two pads, the
/// head's weighted sums (`ll_rec` in kernels/llama_common.cu).
pub const fn partial_floats(head_dim: u32) -> usize {
    head_dim as usize + 4
}

/// `llama_o(x: read_write f32[m], part: read, w: read bf16[m*heads*head_dim], m, heads, kv_heads, splits,
/// pos, max_seq, head_dim)`: merges the attention partials of the splits that got rows at `pos` and adds
/// `W attn` to x. `name`: one of [`O_ENTRIES`].
pub fn o_sig(name: &str) -> KernelSig {
    sig(
        name,
        &[
            ("x", Some(RW), U),
            ("part", Some(R), U),
            ("w", Some(R), U),
            ("m", None, U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("splits", None, U),
            ("pos", None, U),
            ("max_seq", None, U),
            ("head_dim", None, U),
        ],
    )
}

/// `llama_attn_merge(out: write f32[heads*head_dim], part: read, heads, kv_heads, splits, pos, max_seq,
/// head_dim)`: the attention output merged from the partials of the splits that got rows at `pos`, for
/// an output projection that streams its weights (`llama_down` as `x += Wo out`).
pub fn attn_merge_sig() -> KernelSig {
    sig(
        "llama_attn_merge",
        &[
            ("out", Some(W), U),
            ("part", Some(R), U),
            ("heads", None, U),
            ("kv_heads", None, U),
            ("splits", None, U),
            ("pos", None, U),
            ("max_seq", None, U),
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

/// `llama_lm_head(logits, part, counter, ticket, token, history, x, ln, emb, vocab, hidden, eps, pos,
/// max_seq)`: the greedy token to `token[0]` and, where `pos < max_seq`, to `history[pos]` (u32 per
/// position: the tokens of a run of dependent steps).
pub fn lm_head_sig() -> KernelSig {
    sig(
        "llama_lm_head",
        &[
            ("logits", Some(W), U),
            ("part", Some(RW), U),
            ("counter", Some(RW), U),
            ("ticket", Some(RW), U),
            ("token", Some(W), U),
            ("history", Some(W), U),
            ("x", Some(R), U),
            ("ln", Some(R), U),
            ("emb", Some(R), U),
            ("vocab", None, U),
            ("hidden", None, U),
            ("eps", None, F),
            ("pos", None, U),
            ("max_seq", None, U),
        ],
    )
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

pub fn qkv(name: &'static str) -> HostKernel {
    HostKernel::new(qkv_sig(name), move |cx| {
        let pos = cx.u32(6)? as usize;
        let (hidden, heads, kvh, hd) = (cx.u32(7)? as usize, cx.u32(8)? as usize, cx.u32(9)? as usize, cx.u32(10)? as usize);
        if entry_for(&QKV_ENTRIES, hidden as u32, false) != Some(name) {
            return Err(format!("{name}: hidden {hidden} is not this entry's width"));
        }
        let eps = cx.f32(11)?;
        let views: Vec<_> = (0..6).map(|i| cx.buffer(i)).collect::<Result<_, _>>()?;
        let half = hd / 2;
        let rows = (heads + 2 * kvh) * hd;
        let q = views[0].words(heads * hd, true)?;
        let kv_new = halves(&views[1], 2 * kvh * hd, true)?;
        let x = f32s(&views[2].words(hidden, false)?, hidden);
        let ln = halves(&views[3], hidden, false)?;
        let w = halves(&views[4], rows * hidden, false)?;
        let freq = f32s(&views[5].words(half, false)?, half);
        let xn = rmsnorm(&x, &ln, eps);
        let y = project(&w, &xn, rows, |r| r);
        for head in 0..heads + 2 * kvh {
            for j in 0..half {
                let (mut a, mut b) = (y[head * hd + j], y[head * hd + j + half]);
                if head < heads + kvh {
                    let (s, c) = (pos as f32 * freq[j]).sin_cos();
                    (a, b) = (a * c - b * s, b * c + a * s);
                }
                if head < heads {
                    q.set_f32(head * hd + j, a);
                    q.set_f32(head * hd + j + half, b);
                } else {
                    // K heads, then V heads.
                    let at = (head - heads) * hd + j;
                    bf16_store(&kv_new, at, a);
                    bf16_store(&kv_new, at + half, b);
                }
            }
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

/// `hd`, where entry `name` of `entries` is the one built for it (the CUDA entry is built for its own
/// head dim).
fn head_dim_of(entries: &[(&'static str, u32)], name: &str, hd: u32) -> Result<usize, String> {
    match entry_for(entries, hd, true) {
        Some(n) if n == name => Ok(hd as usize),
        _ => Err(format!("{name}: head_dim {hd} is not the head dim this entry is built for")),
    }
}

pub fn attn(name: &'static str) -> HostKernel {
    HostKernel::new(attn_sig(name), move |cx| {
        let pos = cx.u32(5)? as usize;
        let (heads, kvh, max_seq, splits) = (cx.u32(6)? as usize, cx.u32(7)? as usize, cx.u32(8)? as usize, cx.u32(9)? as usize);
        let hd = head_dim_of(&ATTN_ENTRIES, name, cx.u32(10)?)?;
        let rec_floats = partial_floats(hd as u32);
        if kvh == 0 || heads % kvh != 0 || splits == 0 {
            return Err(format!("{name}: {heads} query heads do not group over {kvh} KV heads in {splits} splits"));
        }
        if pos >= max_seq {
            return Err(format!("{name}: pos {pos} is past the cache's {max_seq} rows"));
        }
        let group = heads / kvh;
        let (pv, kv, vv, qv, nv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?, cx.buffer(4)?);
        let part = pv.words(kvh * splits * group * rec_floats, true)?;
        let kc = halves(&kv, kvh * max_seq * hd, true)?;
        let vc = halves(&vv, kvh * max_seq * hd, true)?;
        let q = f32s(&qv.words(heads * hd, false)?, heads * hd);
        let fresh = halves(&nv, 2 * kvh * hd, false)?;
        // 1 / sqrt(hd) in f32, as the kernel's constant.
        let qscale = 1.0 / (hd as f32).sqrt();
        // The append, then attention over rows 0..=pos; the whole range is split 0's partial.
        for h in 0..kvh {
            for d in 0..hd {
                bf16_store(&kc, (h * max_seq + pos) * hd + d, bf16_at(&fresh, h * hd + d));
                bf16_store(&vc, (h * max_seq + pos) * hd + d, bf16_at(&fresh, (kvh + h) * hd + d));
            }
        }
        for hq in 0..heads {
            let (h, g) = (hq / group, hq % group);
            let base = h * max_seq * hd;
            let scores: Vec<f32> = (0..=pos).map(|t| (0..hd).map(|d| q[hq * hd + d] * bf16_at(&kc, base + t * hd + d)).sum::<f32>() * qscale).collect();
            let m = scores.iter().copied().fold(f32::MIN, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
            let mut p = Partial { m, l: e.iter().sum(), acc: vec![0.0; hd] };
            for (d, a) in p.acc.iter_mut().enumerate() {
                *a = (0..=pos).map(|t| e[t] * bf16_at(&vc, base + t * hd + d)).sum();
            }
            let empty = Partial { m: f32::MIN, l: 0.0, acc: vec![0.0; hd] };
            for s in 0..splits {
                let rec = ((h * splits + s) * group + g) * rec_floats;
                let r = if s == 0 { &p } else { &empty };
                for (i, v) in [r.m, r.l, 0.0, 0.0].iter().chain(r.acc.iter()).enumerate() {
                    part.set_f32(rec + i, *v);
                }
            }
        }
        Ok(())
    })
}

/// The attention splits that get rows at `pos` (kernels/llama.cu, `ll_attn`): one per 64 rows, at least
/// min(8, splits), at most splits; the output projection reads only theirs.
fn live_splits(pos: u32, max_seq: u32, splits: u32) -> u32 {
    let rows = pos.min(max_seq - 1) + 1;
    splits.min(splits.min(8).max(rows.div_ceil(64)))
}

/// The attention output (`heads * hd` floats) merged from attention's partials in `part`: those of the
/// splits that got rows at `pos` (of a cache of `max_seq`), and of them the ones with a row, as the CUDA
/// kernels merge them.
fn merged_attention(part: &BufView<'_>, heads: usize, kvh: usize, splits: usize, hd: usize, pos: u32, max_seq: u32) -> Result<Vec<f32>, String> {
    if max_seq == 0 {
        return Err("max_seq is 0".into());
    }
    if kvh == 0 || heads % kvh != 0 {
        return Err(format!("{heads} query heads do not group over {kvh} KV heads"));
    }
    let used = live_splits(pos, max_seq, splits as u32) as usize;
    let (group, rec_floats) = (heads / kvh, partial_floats(hd as u32));
    let part = part.words(heads * splits * rec_floats, false)?;
    let mut attn = vec![0.0f32; heads * hd];
    for hq in 0..heads {
        let (h, g) = (hq / group, hq % group);
        let rec = |s: usize| ((h * splits + s) * group + g) * rec_floats;
        let live: Vec<usize> = (0..used).filter(|&s| part.f32(rec(s) + 1) > 0.0).collect();
        let mx = live.iter().map(|&s| part.f32(rec(s))).fold(f32::MIN, f32::max);
        let scale: Vec<f32> = live.iter().map(|&s| (part.f32(rec(s)) - mx).exp()).collect();
        let l: f32 = live.iter().zip(&scale).map(|(&s, c)| part.f32(rec(s) + 1) * c).sum();
        for d in 0..hd {
            let o: f32 = live.iter().zip(&scale).map(|(&s, c)| part.f32(rec(s) + 4 + d) * c).sum();
            attn[hq * hd + d] = o / l;
        }
    }
    Ok(attn)
}

pub fn o(name: &'static str) -> HostKernel {
    HostKernel::new(o_sig(name), move |cx| {
        let (m, heads, kvh, splits) = (cx.u32(3)? as usize, cx.u32(4)? as usize, cx.u32(5)? as usize, cx.u32(6)? as usize);
        let (pos, max_seq) = (cx.u32(7)?, cx.u32(8)?);
        let hd = head_dim_of(&O_ENTRIES, name, cx.u32(9)?)?;
        let (xv, pv, wv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let attn = merged_attention(&pv, heads, kvh, splits, hd, pos, max_seq).map_err(|e| format!("{name}: {e}"))?;
        let x = xv.words(m, true)?;
        let w = halves(&wv, m * heads * hd, false)?;
        let y = project(&w, &attn, m, |r| r);
        for (i, yv) in y.iter().enumerate() {
            x.set_f32(i, x.f32(i) + yv);
        }
        Ok(())
    })
}

pub fn attn_merge() -> HostKernel {
    HostKernel::new(attn_merge_sig(), |cx| {
        let (heads, kvh, splits) = (cx.u32(2)? as usize, cx.u32(3)? as usize, cx.u32(4)? as usize);
        let (pos, max_seq, hd) = (cx.u32(5)?, cx.u32(6)?, cx.u32(7)?);
        if hd != 64 && hd != 128 {
            return Err(format!("llama_attn_merge: head_dim {hd} is neither 64 nor 128"));
        }
        let hd = hd as usize;
        let (ov, pv) = (cx.buffer(0)?, cx.buffer(1)?);
        let attn = merged_attention(&pv, heads, kvh, splits, hd, pos, max_seq).map_err(|e| format!("llama_attn_merge: {e}"))?;
        let out = ov.words(heads * hd, true)?;
        for (i, a) in attn.iter().enumerate() {
            out.set_f32(i, *a);
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
        let (vocab, hidden, eps) = (cx.u32(9)? as usize, cx.u32(10)? as usize, cx.f32(11)?);
        let (pos, max_seq) = (cx.u32(12)? as usize, cx.u32(13)? as usize);
        let (lv, tkv, tv, hv, xv, nv, ev) = (cx.buffer(0)?, cx.buffer(3)?, cx.buffer(4)?, cx.buffer(5)?, cx.buffer(6)?, cx.buffer(7)?, cx.buffer(8)?);
        let logits = lv.words(vocab, true)?;
        let token = tv.words(1, true)?;
        let history = hv.words(max_seq, true)?;
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
            history.set_u32(pos, best as u32);
        }
        reset_ticket(&tkv)
    })
}

/// Every Llama kernel (every entry of each).
pub fn all() -> Vec<HostKernel> {
    let mut out = vec![embed()];
    out.extend(QKV_ENTRIES.iter().map(|(n, _)| qkv(n)));
    out.extend(ATTN_ENTRIES.iter().map(|(n, _)| attn(n)));
    out.extend(O_ENTRIES.iter().map(|(n, _)| o(n)));
    out.extend([attn_merge(), down(), ffn_in(), lm_head()]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_class_has_its_entry_and_a_twin_refuses_another_class() {
        assert_eq!(entry_for(&QKV_ENTRIES, 2048, false), Some("llama_qkv"));
        assert_eq!(entry_for(&QKV_ENTRIES, 2056, false), Some("llama_qkv_h3072"));
        assert_eq!(entry_for(&QKV_ENTRIES, 3080, false), None);
        assert_eq!(entry_for(&ATTN_ENTRIES, 128, true), Some("llama_attn_hd128"));
        assert_eq!(entry_for(&O_ENTRIES, 96, true), None);
        assert_eq!(head_dim_of(&ATTN_ENTRIES, "llama_attn_hd128", 128), Ok(128));
        for (name, hd) in [("llama_attn", 128), ("llama_attn_hd128", 64), ("llama_attn", 96), ("llama_o", 64)] {
            let got = head_dim_of(&ATTN_ENTRIES, name, hd);
            assert!(got.as_ref().is_err_and(|e| e.starts_with(name)), "{name} {hd}: {got:?}");
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even_like_the_cuda_twin() {
        // The CUDA kernels round with u + 0x7fff + ((u >> 16) & 1): check the crate agrees on ties.
        for bits in [0x3f80_8000u32, 0x3f81_8000, 0x3f80_7fff, 0xbf80_8001, 0x4049_0fdb] {
            let u = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
            assert_eq!(half::bf16::from_f32(f32::from_bits(bits)).to_bits() as u32, u, "{bits:#x}");
        }
    }
}
