//! The f32 reference of the step: the same model written plainly on the CPU, independent of the graph
//! and of both backends' kernels — f32 activations *and* an f32 KV cache (the kernels round the cache
//! to bf16), textbook softmax attention, sequential sums. What every decode check compares against.

use crate::LlamaStep;

/// The reference model, from a step's buffers (weights as the step's initial bytes or a checkpoint's).
pub struct Reference {
    c: crate::LlamaConfig,
    bytes: Vec<Vec<u8>>,
    step: LlamaStep,
    /// Per layer, K and V rows by position (f32, [kv_heads][max_seq][64]).
    kcache: Vec<Vec<f32>>,
    vcache: Vec<Vec<f32>>,
}

fn bf(b: &[u8], i: usize) -> f32 {
    f32::from_bits((u16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as u32) << 16)
}

/// `W[r] · x` for every row r < rows of a bf16 row-major matrix, rows over the machine's cores.
fn matvec(w: &[u8], x: &[f32], rows: usize) -> Vec<f32> {
    let k = x.len();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(rows.div_ceil(256)).max(1);
    let per = rows.div_ceil(threads);
    let mut out = vec![0.0f32; rows];
    std::thread::scope(|s| {
        for (t, chunk) in out.chunks_mut(per).enumerate() {
            s.spawn(move || {
                for (i, o) in chunk.iter_mut().enumerate() {
                    let r = t * per + i;
                    *o = (0..k).map(|j| bf(w, r * k + j) * x[j]).sum();
                }
            });
        }
    });
    out
}

fn rmsnorm(x: &[f32], g: &[u8], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().enumerate().map(|(i, v)| v * s * bf(g, i)).collect()
}

impl Reference {
    /// `bytes[b]`: buffer b's contents (the KV caches' rows below the first position are the context).
    pub fn new(step: &LlamaStep, bytes: Vec<Vec<u8>>) -> Reference {
        let c = step.config;
        let decode = |b: &[u8]| (0..b.len() / 2).map(|i| bf(b, i)).collect::<Vec<f32>>();
        let kcache = step.layers.iter().map(|l| decode(&bytes[l.kcache.index()])).collect();
        let vcache = step.layers.iter().map(|l| decode(&bytes[l.vcache.index()])).collect();
        Reference { c, bytes, step: step.clone(), kcache, vcache }
    }

    fn buf(&self, id: ostinato::BufferId) -> &[u8] {
        &self.bytes[id.index()]
    }

    /// One step: gathers `token`, appends K and V at `pos`, returns the logits.
    pub fn step(&mut self, token: u32, pos: u32) -> Vec<f32> {
        let c = self.c;
        let (h, hd, nh, nkv, f) = (c.hidden as usize, c.head_dim as usize, c.heads as usize, c.kv_heads as usize, c.ffn as usize);
        let (half, group, max_seq, pos) = (hd / 2, nh / nkv, c.max_seq as usize, pos as usize);
        let freq = c.rope_freq();
        let emb = self.buf(self.step.embed);
        let mut x: Vec<f32> = (0..h).map(|i| bf(emb, token as usize * h + i)).collect();
        for l in 0..self.step.layers.len() {
            let lb = self.step.layers[l];
            let xn = rmsnorm(&x, self.buf(lb.ln1), c.rms_eps);
            let mut qkv = matvec(self.buf(lb.wqkv), &xn, (nh + 2 * nkv) * hd);
            // RoPE, rotate-half pairing, on the q and k heads.
            for head in 0..nh + nkv {
                for j in 0..half {
                    let (s, co) = (pos as f32 * freq[j]).sin_cos();
                    let (a, b) = (qkv[head * hd + j], qkv[head * hd + j + half]);
                    qkv[head * hd + j] = a * co - b * s;
                    qkv[head * hd + j + half] = b * co + a * s;
                }
            }
            for kvh in 0..nkv {
                for d in 0..hd {
                    self.kcache[l][(kvh * max_seq + pos) * hd + d] = qkv[(nh + kvh) * hd + d];
                    self.vcache[l][(kvh * max_seq + pos) * hd + d] = qkv[(nh + nkv + kvh) * hd + d];
                }
            }
            let mut attn = vec![0.0f32; nh * hd];
            for head in 0..nh {
                let kvh = head / group;
                let q = &qkv[head * hd..(head + 1) * hd];
                let scores: Vec<f32> =
                    (0..=pos).map(|t| (0..hd).map(|d| q[d] * self.kcache[l][(kvh * max_seq + t) * hd + d]).sum::<f32>() / (hd as f32).sqrt()).collect();
                let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f32 = e.iter().sum();
                for d in 0..hd {
                    attn[head * hd + d] = (0..=pos).map(|t| e[t] * self.vcache[l][(kvh * max_seq + t) * hd + d]).sum::<f32>() / z;
                }
            }
            let o = matvec(self.buf(lb.wo), &attn, h);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let xn = rmsnorm(&x, self.buf(lb.ln2), c.rms_eps);
            let gu = matvec(self.buf(lb.wgu), &xn, 2 * f);
            let act: Vec<f32> = (0..f).map(|i| gu[i] / (1.0 + (-gu[i]).exp()) * gu[f + i]).collect();
            let d = matvec(self.buf(lb.wd), &act, h);
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
        let xn = rmsnorm(&x, self.buf(self.step.norm), c.rms_eps);
        matvec(self.buf(self.step.embed), &xn, c.vocab as usize)
    }

    /// Checks a run of dependent greedy steps — step `s` at position `pos0 + s` gathers the token step
    /// `s - 1` wrote (`first` for step 0) and writes `tokens[s]` — by feeding the reference the run's own
    /// tokens: every `tokens[s]` must be a greedy choice of the reference's logits at its step within
    /// `rel_tol · max|logit|` (a near-tie either side may take; past a tie the two runs would otherwise
    /// part for good). Returns the reference's logits of the last step, for the caller to compare with
    /// the run's own; an error names the first step that fails.
    pub fn check_greedy_run(&mut self, first: u32, pos0: u32, tokens: &[u32], rel_tol: f32) -> Result<Vec<f32>, String> {
        if tokens.is_empty() {
            return Err("a greedy run of no steps".into());
        }
        if u64::from(pos0) + tokens.len() as u64 > u64::from(self.c.max_seq) {
            return Err(format!("a run of {} steps from position {pos0} passes the cache's {} positions", tokens.len(), self.c.max_seq));
        }
        let mut fed = first;
        let mut last = Vec::new();
        for (s, &t) in tokens.iter().enumerate() {
            let pos = pos0 + s as u32;
            last = self.step(fed, pos);
            let (best, scale) = (greedy_token(&last), logit_scale(&last));
            let Some(&got) = last.get(t as usize) else {
                return Err(format!("step {s} (position {pos}) wrote token {t}, past the vocabulary of {}", last.len()));
            };
            if last[best] - got > rel_tol * scale {
                return Err(format!(
                    "step {s} (position {pos}) wrote token {t} (reference logit {got:.4}), but the reference's greedy token is {best} ({:.4}): {:.2e} of the logits' scale below, more than {rel_tol:.0e}",
                    last[best],
                    (last[best] - got) / scale
                ));
            }
            fed = t;
        }
        Ok(last)
    }
}

/// The greedy token of `logits`: the index of the largest, ties to the lower index (as the LM head's
/// argmax and `torch.argmax`); 0 for no logits.
pub fn greedy_token(logits: &[f32]) -> usize {
    (0..logits.len()).fold(0, |b, i| if logits[i] > logits[b] { i } else { b })
}

/// The scale logit tolerances are relative to: the largest |logit| (at least the smallest positive f32).
fn logit_scale(logits: &[f32]) -> f32 {
    logits.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE)
}

/// How two logit vectors agree. The tolerance is relative to the reference's scale: every logit within
/// `rel_tol · max|want|`, and the greedy tokens equal wherever the reference's top-1 margin exceeds that
/// (a near-tie either side may take). Returns the largest difference relative to that scale.
pub fn agree(want: &[f32], got: &[f32], rel_tol: f32) -> Result<f32, String> {
    if got.len() != want.len() || got.iter().any(|v| !v.is_finite()) {
        return Err("logits hold a NaN or infinity, or have another length".into());
    }
    let scale = logit_scale(want);
    let tol = rel_tol * scale;
    let diff = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    if diff > tol {
        return Err(format!("logits differ by up to {diff:.3e}, {:.2e} of their scale {scale:.3} (tolerance {rel_tol:.1e})", diff / scale));
    }
    let (tw, tg) = (greedy_token(want), greedy_token(got));
    let second = want.iter().enumerate().filter(|(i, _)| *i != tw).map(|(_, v)| *v).fold(f32::NEG_INFINITY, f32::max);
    if tw != tg && want[tw] - second > tol {
        return Err(format!("greedy token {tg} but the reference's is {tw} with a margin of {:.3e} > {tol:.1e}", want[tw] - second));
    }
    Ok(diff / scale)
}
