//! One decode step recorded as one graph: embedding gather, per layer the fused norm + QKV + RoPE,
//! split attention with the KV append, the merge of its partials + output projection + residual, fused
//! norm + gate/up + SiLU·mul, down projection + residual; then the fused final norm + LM head + greedy
//! argmax, whose token the next step's gather reads (and whose trace row records it). Five kernels per
//! layer, 82 for Llama-3.2-1B; the position is a slot patched per token.
//!
//! Fusion choices (docs/llama.md): every RMS norm runs inside the projection that consumes it (each
//! block recomputes the 8 KB sum of squares of its input — cheaper than a kernel boundary), its scale
//! applied to the dot products; RoPE runs in the QKV projection's epilogue (a warp owns the two rows
//! each rotation pairs), which leaves the new K and V rows for the attention to append (so the
//! attention may read the cache before its wait: no node still running writes it); the output
//! projection merges the attention's partials (no last-block merge); the residual adds run in the O and
//! down projections' epilogues, and the LM head's blocks reduce their argmax, so nothing needs a second
//! kernel. QKV, attention and the output projection declare per-block tile maps
//! ([`crate::geometry`]): which rows of `qkv`, which cache head and which partials each block touches.

use crate::geometry as geo;
use crate::host as sigs;
use ostinato::file::BufferInit;
use ostinato::{Arg, BufferId, Graph, KernelId, Launch, Scalar, SlotId, TileMap};

use crate::{LlamaConfig, LlamaError};

/// How the step is recorded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOptions {
    /// Blocks per KV head of the attention kernel (each takes an equal share of rows 0..=pos), at most
    /// 32 and at most 128 / (query heads per KV head); 0 picks by the cache's capacity:
    /// [`default_splits`].
    pub attn_splits: u32,
    /// Seed of the random weights and KV cache (`BufferInit::RandomBf16`).
    pub seed: u64,
    /// The position slot's initial value.
    pub pos: u32,
    /// The token the first step gathers.
    pub token: u32,
    /// Blocks of each streaming projection (gate/up, down, LM head: persistent bulk-copy pipelines whose
    /// tiles after the first rounds go by ticket): one per SM of an H200 by default, the most that fit
    /// (192 KiB of shared-memory stages each). More than fit at once slows the step: a block that starts
    /// late still owns its first tiles.
    pub gemv_blocks: u32,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions { attn_splits: 0, seed: 1, pos: 0, token: 1, gemv_blocks: 132 }
    }
}

/// Attention splits per KV head when the options leave it to the step: as many as make 128 attention
/// blocks over the KV heads for caches up to 2,048 positions, 256 beyond (Llama-3.2-1B's 16 and 32 per
/// KV head, measured: docs/llama.md), at most 32 and capped by what `llama_o` merges (128 partials per
/// KV head).
pub fn default_splits(c: &LlamaConfig) -> u32 {
    let blocks = if c.max_seq <= 2048 { 128 } else { 256 };
    (blocks / c.kv_heads.max(1)).clamp(1, MAX_SPLITS).min(MAX_PARTIALS / (c.heads / c.kv_heads.max(1)).max(1)).max(1)
}

/// Most attention splits (kernels/llama.cu: LL_MAX_SPLITS).
const MAX_SPLITS: u32 = 32;
/// Most partials per KV head the output projection merges (LL_MAX_RECS): splits × group.
const MAX_PARTIALS: u32 = 128;
/// The weights of one layer, by buffer.
#[derive(Clone, Copy, Debug)]
pub struct LayerBuffers {
    pub ln1: BufferId,
    pub wqkv: BufferId,
    pub wo: BufferId,
    pub ln2: BufferId,
    pub wgu: BufferId,
    pub wd: BufferId,
    pub kcache: BufferId,
    pub vcache: BufferId,
    /// The layer's attention partials (written by its attention, merged by its output projection).
    pub attn_part: BufferId,
}

/// The recorded step.
#[derive(Clone, Debug)]
pub struct LlamaStep {
    pub config: LlamaConfig,
    pub graph: Graph,
    /// Every buffer's initial contents (weights and KV cache random from the seed, norms 1.0).
    pub inits: Vec<Option<BufferInit>>,
    /// Buffers whose initial bytes are data rather than a pattern (the RoPE frequency table).
    pub data: Vec<(BufferId, Vec<u8>)>,
    pub pos: SlotId,
    pub token: BufferId,
    pub logits: BufferId,
    /// The greedy trace: per position, the token the LM head chose there, its logit, the second-best
    /// logit and the largest |logit| ([`sigs::TRACE_WORDS`] words; [`sigs::TRACE_UNWRITTEN`] until written).
    pub trace: BufferId,
    /// The residual stream (f32, hidden).
    pub x: BufferId,
    pub embed: BufferId,
    pub norm: BufferId,
    pub layers: Vec<LayerBuffers>,
    /// Kernel launches per step.
    pub dispatches: usize,
}

/// The bf16 pattern of 1.0 in both halves of a word.
const BF16_ONES: u32 = 0x3f80_3f80;

/// The standard deviation `transformers` initialises Llama weights with (`initializer_range`), as a
/// uniform draw's half-width: U(-a, a) has standard deviation a / sqrt(3).
const WEIGHT_SCALE: f32 = 0.02 * 1.732_050_8;

/// Records the step for `c`.
pub fn record(c: &LlamaConfig, o: StepOptions) -> Result<LlamaStep, LlamaError> {
    c.validate()?;
    let group = c.heads / c.kv_heads;
    let o = StepOptions { attn_splits: if o.attn_splits == 0 { default_splits(c) } else { o.attn_splits }, ..o };
    if o.attn_splits > MAX_SPLITS || o.attn_splits * group > MAX_PARTIALS {
        return Err(LlamaError::Config {
            field: "attn_splits".into(),
            reason: format!(
                "{} is more than {MAX_SPLITS} or, times the {group} query heads per KV head, more than {MAX_PARTIALS} partials (kernels/llama.cu: LL_MAX_SPLITS, LL_MAX_RECS); 0 picks by max_seq",
                o.attn_splits
            ),
        });
    }
    if o.gemv_blocks == 0 {
        return Err(LlamaError::Config { field: "gemv_blocks".into(), reason: "must be positive".into() });
    }
    if o.token >= c.vocab {
        return Err(LlamaError::Config { field: "token".into(), reason: format!("{} is past the vocabulary of {}", o.token, c.vocab) });
    }
    let (h, q, kv, f, v) = (c.hidden as u64, (c.heads * c.head_dim) as u64, (c.kv_heads * c.head_dim) as u64, c.ffn as u64, c.vocab as u64);
    let mut g = Graph::new();
    let mut inits: Vec<Option<BufferInit>> = Vec::new();
    let base = o.seed.wrapping_mul(1000);
    let mut seed = base;
    let mut buf = |g: &mut Graph, name: String, bytes: u64, init: BufferInit| -> Result<BufferId, LlamaError> {
        let b = g.add_buffer(name, bytes)?;
        inits.push(Some(init));
        Ok(b)
    };
    let mut random = || {
        seed += 1;
        BufferInit::RandomBf16 { seed, scale: WEIGHT_SCALE }
    };
    let embed = buf(&mut g, "embed".into(), 2 * v * h, random())?;
    let norm = buf(&mut g, "norm".into(), 2 * h, BufferInit::Const(BF16_ONES))?;
    let rope = buf(&mut g, "rope_freq".into(), 4 * (c.head_dim as u64 / 2), BufferInit::Zero)?;
    let x = buf(&mut g, "x".into(), 4 * h, BufferInit::Zero)?;
    // Every row of the fused q/k/v projection, f32: the query heads, then the new K and V rows.
    let qkv = buf(&mut g, "qkv".into(), 4 * (q + 2 * kv), BufferInit::Zero)?;
    let act = buf(&mut g, "act".into(), 4 * f, BufferInit::Zero)?;
    let logits = buf(&mut g, "logits".into(), 4 * v, BufferInit::Zero)?;
    let token = buf(&mut g, "token".into(), 4, BufferInit::Const(o.token))?;
    let trace = buf(&mut g, "trace".into(), 4 * sigs::TRACE_WORDS as u64 * c.max_seq as u64, BufferInit::Const(sigs::TRACE_UNWRITTEN))?;
    // The streaming projections' work counters (zero between launches: each launch resets its own).
    let ffn_ticket = buf(&mut g, "ffn_ticket".into(), 4, BufferInit::Zero)?;
    let down_ticket = buf(&mut g, "down_ticket".into(), 4, BufferInit::Zero)?;
    let head_ticket = buf(&mut g, "head_ticket".into(), 4, BufferInit::Zero)?;
    // Streaming projections (kernels/llama_stream.cu): persistent grids of at most `gemv_blocks`
    // blocks, at most one per tile. The LM head's blocks leave 4 words each in `head_part`.
    let stream = |tiles: u32, normed: bool| Launch::linear(tiles.min(o.gemv_blocks), geo::STREAM_THREADS).shared(geo::stream_smem(c, normed));
    let [ffn_tiles, down_tiles, head_tiles] = geo::stream_tiles(c);
    let head_blocks = head_tiles.min(o.gemv_blocks);
    let head_part = buf(&mut g, "head_part".into(), 16 * head_blocks as u64, BufferInit::Zero)?;
    let head_count = buf(&mut g, "head_count".into(), 4, BufferInit::Zero)?;
    let part_bytes = 4 * (c.kv_heads * o.attn_splits * group) as u64 * sigs::partial_floats(c.head_dim) as u64;
    let mut layers = Vec::with_capacity(c.layers as usize);
    for l in 0..c.layers {
        let mut w = |name: &str, bytes: u64, init: BufferInit| buf(&mut g, format!("layers.{l}.{name}"), bytes, init);
        let ln1 = w("ln1", 2 * h, BufferInit::Const(BF16_ONES))?;
        let wqkv = w("wqkv", 2 * (q + 2 * kv) * h, random())?;
        let wo = w("wo", 2 * h * q, random())?;
        let ln2 = w("ln2", 2 * h, BufferInit::Const(BF16_ONES))?;
        let wgu = w("wgu", 2 * 2 * f * h, random())?;
        let wd = w("wd", 2 * h * f, random())?;
        // The cache starts random too: rows below the position stand for an earlier context.
        let cache = (kv * c.max_seq as u64) * 2;
        let kcache = w("kcache", cache, BufferInit::RandomBf16 { seed: base + 500 + 2 * l as u64, scale: 1.0 })?;
        let vcache = w("vcache", cache, BufferInit::RandomBf16 { seed: base + 501 + 2 * l as u64, scale: 1.0 })?;
        let attn_part = w("attn_part", part_bytes, BufferInit::Zero)?;
        layers.push(LayerBuffers { ln1, wqkv, wo, ln2, wgu, wd, kcache, vcache, attn_part });
    }
    let k = |g: &mut Graph, sig| -> Result<KernelId, LlamaError> { Ok(g.add_kernel(sig)?) };
    let [k_embed, k_qkv, k_attn, k_o, k_ffn, k_down, k_head] =
        [sigs::embed_sig(), sigs::qkv_sig(), sigs::attn_sig(), sigs::o_sig(), sigs::ffn_in_sig(), sigs::down_sig(), sigs::lm_head_sig()].map(|s| k(&mut g, s));
    let (k_embed, k_qkv, k_attn, k_o, k_ffn, k_down, k_head) = (k_embed?, k_qkv?, k_attn?, k_o?, k_ffn?, k_down?, k_head?);
    let pos = g.add_slot("pos", Scalar::u32(o.pos))?;
    let u = |n: u32| Arg::Scalar(Scalar::u32(n));
    let eps = Arg::Scalar(Scalar::f32(c.rms_eps));
    let b = Arg::Whole;
    let mut dispatches = 0;
    let mut launch = |g: &mut Graph, kernel, l: Launch, args: &[Arg], maps: &geo::Maps| -> Result<(), LlamaError> {
        let tiles: Vec<(&str, TileMap)> = maps.iter().map(|(n, m)| (*n, m.clone())).collect();
        g.add_launch_tiled(kernel, l, args, &tiles, &[])?;
        dispatches += 1;
        Ok(())
    };
    let none = geo::Maps::new();
    launch(&mut g, k_embed, Launch::linear(c.hidden.div_ceil(256), 256), &[b(x), b(embed), b(token), u(c.hidden)], &none)?;
    let (qkv_maps, attn_maps, o_maps) = (geo::qkv_maps(c), geo::attn_maps(c, o.attn_splits), geo::o_maps(c, o.attn_splits));
    let qkv_launch = Launch::new(geo::qkv_grid(c), [32 * geo::qkv_warps(c), 1, 1]).shared(geo::qkv_smem(c));
    let attn_launch = Launch::new([o.attn_splits, c.kv_heads, 1], [geo::LL_THREADS, 1, 1]).shared(geo::attn_smem(c));
    let o_launch = Launch::new(geo::o_grid(c), [geo::LL_THREADS, 1, 1]).shared(geo::o_smem(c, o.attn_splits));
    for lb in &layers {
        launch(
            &mut g,
            k_qkv,
            qkv_launch,
            &[b(qkv), b(x), b(lb.ln1), b(lb.wqkv), b(rope), Arg::Slot(pos), u(c.hidden), u(c.heads), u(c.kv_heads), u(c.head_dim), eps],
            &qkv_maps,
        )?;
        launch(
            &mut g,
            k_attn,
            attn_launch,
            &[b(lb.attn_part), b(lb.kcache), b(lb.vcache), b(qkv), Arg::Slot(pos), u(c.heads), u(c.kv_heads), u(c.max_seq), u(o.attn_splits), u(c.head_dim)],
            &attn_maps,
        )?;
        launch(&mut g, k_o, o_launch, &[b(x), b(lb.attn_part), b(lb.wo), u(c.hidden), u(c.heads), u(c.kv_heads), u(o.attn_splits), u(c.head_dim)], &o_maps)?;
        launch(&mut g, k_ffn, stream(ffn_tiles, true), &[b(act), b(ffn_ticket), b(x), b(lb.ln2), b(lb.wgu), u(c.ffn), u(c.hidden), eps], &none)?;
        launch(&mut g, k_down, stream(down_tiles, false), &[b(x), b(down_ticket), b(lb.wd), b(act), u(c.hidden), u(c.ffn)], &none)?;
    }
    launch(
        &mut g,
        k_head,
        stream(head_tiles, true),
        &[
            b(logits),
            b(head_part),
            b(head_count),
            b(head_ticket),
            b(token),
            b(trace),
            b(x),
            b(norm),
            b(embed),
            Arg::Slot(pos),
            u(c.max_seq),
            u(c.vocab),
            u(c.hidden),
            eps,
        ],
        &none,
    )?;
    let freq: Vec<u8> = c.rope_freq().iter().flat_map(|f| f.to_le_bytes()).collect();
    Ok(LlamaStep { config: *c, graph: g, inits, data: vec![(rope, freq)], pos, token, logits, trace, x, embed, norm, layers, dispatches })
}

impl LlamaStep {
    /// Bytes one step at `pos` reads from weights and KV cache (the memory floor's numerator).
    pub fn bytes_read(&self, pos: u32) -> u64 {
        self.config.weight_bytes() + self.config.kv_bytes(pos)
    }

    /// Every buffer's initial bytes: the patterns of [`LlamaStep::inits`] with [`LlamaStep::data`] over
    /// them. Large: the full model's weights.
    pub fn initial_bytes(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self
            .graph
            .buffers()
            .iter()
            .zip(&self.inits)
            .map(|(b, i)| {
                let mut v = vec![0u8; b.size as usize];
                if let Some(init) = i {
                    init.fill(&mut v);
                }
                v
            })
            .collect();
        for (id, bytes) in &self.data {
            out[id.index()] = bytes.clone();
        }
        out
    }
}
