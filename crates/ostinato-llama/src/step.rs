//! One decode step recorded as one graph: embedding gather, per layer the fused norm + QKV + RoPE,
//! split attention with the KV append, the merge of its partials + output projection + residual, fused
//! norm + gate/up + SiLU·mul, down projection + residual; then the fused final norm + LM head + greedy
//! argmax, whose token the next step's gather reads and the history keeps by position. Five kernels per
//! layer, 82 for Llama-3.2-1B (six with the streamed output projection, [`OutputProjection`]); the
//! position is a slot patched per token.
//!
//! Fusion choices (docs/llama.md): every RMS norm runs inside the projection that consumes it (each
//! block recomputes the 8 KB sum of squares of its input — cheaper than a kernel boundary), its scale
//! applied to the dot products; RoPE runs in the QKV projection's epilogue (a warp owns the two rows
//! each rotation pairs), which leaves the new K and V rows for the attention to append (so the
//! attention may read the cache before its wait: no node still running writes it); the output
//! projection merges the attention's partials (no last-block merge); the residual adds run in the O and
//! down projections' epilogues, and the LM head's blocks reduce their argmax, so nothing needs a second
//! kernel.

use crate::host as sigs;
use ostinato::file::BufferInit;
use ostinato::{Arg, BufferId, Graph, KernelId, Launch, Scalar, SlotId};

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
    /// (180 KiB of shared-memory stages each). More than fit at once slows the step: a block that starts
    /// late still owns its first tiles.
    pub gemv_blocks: u32,
    /// How the output projection takes the attention's partials.
    pub o_proj: OutputProjection,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions { attn_splits: 0, seed: 1, pos: 0, token: 1, gemv_blocks: 132, o_proj: OutputProjection::default() }
    }
}

/// The form of the output projection (docs/llama.md, "The output projection of larger heads").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputProjection {
    /// `llama_o`: a block merges its KV head's attention partials in registers and holds all its
    /// weights in registers, requested before the wait. One kernel; measured on an H200 at 4.9 µs back
    /// to back for Llama-3.2-1B (8.4 MB), 25.6 µs for Llama-3.2-3B (18.9 MB: more than the register
    /// file holds at once).
    #[default]
    MergeInRegisters,
    /// `llama_attn_merge` writes the merged attention output, then `llama_down`'s bulk-copy pipeline
    /// streams W_o (`x += Wo·attn`). Two kernels, no weights in registers: for shapes whose W_o does
    /// not fit the register file. An input of at most 8,192 columns (heads × head dim).
    MergeThenStream,
}

impl ostinato::Named for OutputProjection {
    const ALL: &'static [Self] = &[OutputProjection::MergeInRegisters, OutputProjection::MergeThenStream];
    fn name(self) -> &'static str {
        match self {
            OutputProjection::MergeInRegisters => "registers",
            OutputProjection::MergeThenStream => "stream",
        }
    }
}

impl std::str::FromStr for OutputProjection {
    type Err = LlamaError;
    /// The form called `s` (`registers`, `stream`), or a config error naming the choices.
    fn from_str(s: &str) -> Result<Self, LlamaError> {
        use ostinato::Named;
        Self::from_name(s).ok_or_else(|| LlamaError::Config {
            field: "o_proj".into(),
            reason: format!("`{s}` is not a form of the output projection ({})", Self::names().join(", ")),
        })
    }
}

/// Attention splits per KV head when the options leave it to the step: the most, 32, whatever the
/// cache. The kernels use as many as the position needs (one per 64 rows, at least 8) and the output
/// projection reads only those, so an unused split costs an empty block; measured on an H200 (docs/llama.md),
/// 32 against 16 splits: 786 against 804 µs per step at position 1,024, 762 against 755 at 128.
pub fn default_splits(_c: &LlamaConfig) -> u32 {
    MAX_SPLITS
}

/// Most attention splits (kernels/llama_common.cu: LL_MAX_SPLITS; the output projection's merge gives each
/// split a lane).
const MAX_SPLITS: u32 = 32;
/// Warps (one RoPE pair each) per block of `llama_qkv` (LL_QKV_WARPS).
const QKV_WARPS: u32 = 4;
/// Threads of a streaming projection's block: 8 consumer warps and a producer warp (LB_THREADS).
const STREAM_THREADS: u32 = 288;
/// A streaming projection's shared-memory stages (LB_STAGES x LB_STAGE_BYTES), its dynamic shared
/// memory: past the 48 KiB a block gets by default, so the backend sets the opt-in.
const STREAM_STAGE_BYTES: u32 = 36 * 1024;
const STREAM_SHARED: u32 = 5 * STREAM_STAGE_BYTES;
/// Columns of an input chunk (LL_CHUNK): a unit of a streaming projection is a row's chunk.
const CHUNK: u32 = 2048;
/// Dot products (units) a streaming projection's tile holds at most (LB_MAX_UNITS).
const MAX_UNITS: u32 = 64;

/// The 2,048-column chunks of an input of `k` columns.
fn chunks(k: u32) -> u32 {
    k.div_ceil(CHUNK)
}

/// Dynamic shared memory of a streaming projection whose input is x ⊙ ln of `hidden` columns: the
/// stages, then the input (kernels/llama.cu, `llama_ffn_in`).
fn stream_norm_shared(hidden: u32) -> u32 {
    STREAM_SHARED + 4 * CHUNK * chunks(hidden)
}

/// The 2,048-column units of a row of `llama_down`'s input of `k` columns (1, 2 or 4: k <= 8,192).
fn quarters(k: u32) -> u32 {
    match k {
        0..=2048 => 1,
        2049..=4096 => 2,
        _ => 4,
    }
}

/// Most columns of `llama_down`'s input (four 2,048-column units a row).
const DOWN_MAX_K: u32 = 4 * CHUNK;

/// Tiles of a streaming projection over `rows` units of `unit_bytes` each, as the kernels cut them: as
/// many whole units as fill a stage, at most `most` (LB_MAX_UNITS over the dot products per unit).
fn stream_tiles(rows: u32, unit_bytes: u32, most: u32) -> u32 {
    rows.div_ceil((STREAM_STAGE_BYTES / unit_bytes).clamp(1, most))
}

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
    /// The greedy token of the step at position `p` in word `p` (u32 per cache position): a run of
    /// dependent steps, each gathering the token the one before wrote, is read back once at its end.
    pub history: BufferId,
    pub logits: BufferId,
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
    let o = checked_options(c, o)?;
    let group = c.heads / c.kv_heads;
    let (h, q, kv, f, v) = (c.hidden as u64, (c.heads * c.head_dim) as u64, (c.kv_heads * c.head_dim) as u64, c.ffn as u64, c.vocab as u64);
    let mut r = Recorder::new(o.seed);
    let init = r.random();
    let embed = r.buffer("embed".into(), 2 * v * h, init)?;
    let norm = r.buffer("norm".into(), 2 * h, BufferInit::Const(BF16_ONES))?;
    let rope = r.buffer("rope_freq".into(), 4 * (c.head_dim as u64 / 2), BufferInit::Zero)?;
    let x = r.buffer("x".into(), 4 * h, BufferInit::Zero)?;
    let qb = r.buffer("q".into(), 4 * q, BufferInit::Zero)?;
    let kv_new = r.buffer("kv_new".into(), 2 * 2 * kv, BufferInit::Zero)?;
    let act = r.buffer("act".into(), 4 * f, BufferInit::Zero)?;
    let logits = r.buffer("logits".into(), 4 * v, BufferInit::Zero)?;
    let token = r.buffer("token".into(), 4, BufferInit::Const(o.token))?;
    let history = r.buffer("history".into(), 4 * c.max_seq as u64, BufferInit::Zero)?;
    let partials = 4 * (c.kv_heads * o.attn_splits * group) as u64 * sigs::partial_floats(c.head_dim) as u64;
    let attn_part = r.buffer("attn_part".into(), partials, BufferInit::Zero)?;
    // The streaming projections' work counters (zero between launches: each launch resets its own).
    let ffn_ticket = r.buffer("ffn_ticket".into(), 4, BufferInit::Zero)?;
    let down_ticket = r.buffer("down_ticket".into(), 4, BufferInit::Zero)?;
    let head_ticket = r.buffer("head_ticket".into(), 4, BufferInit::Zero)?;
    // The LM head's blocks leave one (value, index) each in `head_part`.
    let head_tiles = stream_tiles(c.vocab, 2 * c.hidden, MAX_UNITS / chunks(c.hidden));
    let head_part = r.buffer("head_part".into(), 8 * head_tiles.min(o.gemv_blocks) as u64, BufferInit::Zero)?;
    let head_count = r.buffer("head_count".into(), 4, BufferInit::Zero)?;
    let layers = (0..c.layers).map(|l| LayerBuffers::add(&mut r, c, l, o.seed.wrapping_mul(1000))).collect::<Result<Vec<_>, _>>()?;
    let k = Kernels::add(&mut r.g, c, o.o_proj)?;
    // The streamed form's merged attention output and its projection's work counter.
    let streamed = match o.o_proj {
        OutputProjection::MergeInRegisters => None,
        OutputProjection::MergeThenStream => Some((r.buffer("attn_out".into(), 4 * q, BufferInit::Zero)?, r.buffer("o_ticket".into(), 4, BufferInit::Zero)?)),
    };
    let a = Activations { x, q: qb, kv_new, rope, attn_part, act, ffn_ticket, down_ticket, streamed };
    let pos = r.g.add_slot("pos", Scalar::u32(o.pos))?;
    let b = Arg::Whole;
    r.launch(k.embed, Launch::linear(c.hidden.div_ceil(256), 256), &[b(x), b(embed), b(token), u32_arg(c.hidden)])?;
    for lb in &layers {
        record_layer(&mut r, c, &o, &k, &a, lb, pos)?;
    }
    let (u, eps) = (u32_arg, Arg::Scalar(Scalar::f32(c.rms_eps)));
    r.launch(
        k.head,
        stream_launch(&o, head_tiles, stream_norm_shared(c.hidden)),
        &[
            b(logits),
            b(head_part),
            b(head_count),
            b(head_ticket),
            b(token),
            b(history),
            b(x),
            b(norm),
            b(embed),
            u(c.vocab),
            u(c.hidden),
            eps,
            Arg::Slot(pos),
            u(c.max_seq),
        ],
    )?;
    let freq: Vec<u8> = c.rope_freq().iter().flat_map(|f| f.to_le_bytes()).collect();
    let Recorder { g: graph, inits, dispatches, .. } = r;
    Ok(LlamaStep { config: *c, graph, inits, data: vec![(rope, freq)], pos, token, history, logits, x, embed, norm, layers, dispatches })
}

/// `o` with its attention splits resolved (0 picks [`default_splits`]), or the option `c` cannot take.
fn checked_options(c: &LlamaConfig, o: StepOptions) -> Result<StepOptions, LlamaError> {
    let o = StepOptions { attn_splits: if o.attn_splits == 0 { default_splits(c) } else { o.attn_splits }, ..o };
    let refuse = |field: &str, reason: String| Err(LlamaError::Config { field: field.into(), reason });
    if o.attn_splits > MAX_SPLITS {
        return refuse("attn_splits", format!("{} is more than {MAX_SPLITS} (kernels/llama_common.cu: LL_MAX_SPLITS); 0 picks the default", o.attn_splits));
    }
    if o.gemv_blocks == 0 {
        return refuse("gemv_blocks", "must be positive".into());
    }
    if o.o_proj == OutputProjection::MergeThenStream && c.heads * c.head_dim > DOWN_MAX_K {
        return refuse("o_proj", format!("the streamed output projection takes at most {DOWN_MAX_K} columns, not {} (heads × head_dim)", c.heads * c.head_dim));
    }
    if o.token >= c.vocab {
        return refuse("token", format!("{} is past the vocabulary of {}", o.token, c.vocab));
    }
    Ok(o)
}

/// The graph being recorded, each buffer's initial contents and the launches so far.
struct Recorder {
    g: Graph,
    inits: Vec<Option<BufferInit>>,
    /// The seed of the last random weight buffer (each takes the next).
    seed: u64,
    dispatches: usize,
}

impl Recorder {
    fn new(seed: u64) -> Recorder {
        Recorder { g: Graph::new(), inits: Vec::new(), seed: seed.wrapping_mul(1000), dispatches: 0 }
    }
    fn buffer(&mut self, name: String, bytes: u64, init: BufferInit) -> Result<BufferId, LlamaError> {
        let b = self.g.add_buffer(name, bytes)?;
        self.inits.push(Some(init));
        Ok(b)
    }
    /// The next weight buffer's contents: random bf16 of the weights' scale, from the next seed.
    fn random(&mut self) -> BufferInit {
        self.seed += 1;
        BufferInit::RandomBf16 { seed: self.seed, scale: WEIGHT_SCALE }
    }
    fn launch(&mut self, kernel: KernelId, l: Launch, args: &[Arg]) -> Result<(), LlamaError> {
        self.g.add_launch(kernel, l, args, &[])?;
        self.dispatches += 1;
        Ok(())
    }
}

impl LayerBuffers {
    /// Layer `l`'s weights and KV cache in `r` (the cache's seeds follow `base`, the step's seed × 1000).
    fn add(r: &mut Recorder, c: &LlamaConfig, l: u32, base: u64) -> Result<LayerBuffers, LlamaError> {
        let (h, q, kv, f) = (c.hidden as u64, (c.heads * c.head_dim) as u64, (c.kv_heads * c.head_dim) as u64, c.ffn as u64);
        let name = |part: &str| format!("layers.{l}.{part}");
        let ln1 = r.buffer(name("ln1"), 2 * h, BufferInit::Const(BF16_ONES))?;
        let init = r.random();
        let wqkv = r.buffer(name("wqkv"), 2 * (q + 2 * kv) * h, init)?;
        let init = r.random();
        let wo = r.buffer(name("wo"), 2 * h * q, init)?;
        let ln2 = r.buffer(name("ln2"), 2 * h, BufferInit::Const(BF16_ONES))?;
        let init = r.random();
        let wgu = r.buffer(name("wgu"), 2 * 2 * f * h, init)?;
        let init = r.random();
        let wd = r.buffer(name("wd"), 2 * h * f, init)?;
        // The cache starts random too: rows below the position stand for an earlier context.
        let cache = (kv * c.max_seq as u64) * 2;
        let kcache = r.buffer(name("kcache"), cache, BufferInit::RandomBf16 { seed: base + 500 + 2 * l as u64, scale: 1.0 })?;
        let vcache = r.buffer(name("vcache"), cache, BufferInit::RandomBf16 { seed: base + 501 + 2 * l as u64, scale: 1.0 })?;
        Ok(LayerBuffers { ln1, wqkv, wo, ln2, wgu, wd, kcache, vcache })
    }
}

/// The step's kernels, one per role (`o` is the merge before the streamed projection in that form).
struct Kernels {
    embed: KernelId,
    qkv: KernelId,
    attn: KernelId,
    o: KernelId,
    ffn: KernelId,
    down: KernelId,
    head: KernelId,
}

impl Kernels {
    fn add(g: &mut Graph, c: &LlamaConfig, o_proj: OutputProjection) -> Result<Kernels, LlamaError> {
        // The entries built for this shape (validate() admits only shapes some entry is built for).
        let entry = |entries: &[(&'static str, u32)], size: u32, exact: bool, field: &str| {
            sigs::entry_for(entries, size, exact)
                .ok_or_else(|| LlamaError::Config { field: field.into(), reason: format!("no kernel entry is built for {size}") })
        };
        let (qkv_name, attn_name, o_name) = (
            entry(&sigs::QKV_ENTRIES, c.hidden, false, "hidden_size")?,
            entry(&sigs::ATTN_ENTRIES, c.head_dim, true, "head_dim")?,
            entry(&sigs::O_ENTRIES, c.head_dim, true, "head_dim")?,
        );
        // The output projection's first kernel: llama_o, or the merge before llama_down streams W_o.
        let o_sig = match o_proj {
            OutputProjection::MergeInRegisters => sigs::o_sig(o_name),
            OutputProjection::MergeThenStream => sigs::attn_merge_sig(),
        };
        Ok(Kernels {
            embed: g.add_kernel(sigs::embed_sig())?,
            qkv: g.add_kernel(sigs::qkv_sig(qkv_name))?,
            attn: g.add_kernel(sigs::attn_sig(attn_name))?,
            o: g.add_kernel(o_sig)?,
            ffn: g.add_kernel(sigs::ffn_in_sig())?,
            down: g.add_kernel(sigs::down_sig())?,
            head: g.add_kernel(sigs::lm_head_sig())?,
        })
    }
}

/// The buffers every layer's launches share.
struct Activations {
    /// The residual stream.
    x: BufferId,
    q: BufferId,
    /// The new K and V rows the attention appends to the cache.
    kv_new: BufferId,
    rope: BufferId,
    attn_part: BufferId,
    act: BufferId,
    ffn_ticket: BufferId,
    down_ticket: BufferId,
    /// The streamed output projection's merged attention output and work counter.
    streamed: Option<(BufferId, BufferId)>,
}

/// A u32 scalar argument.
fn u32_arg(n: u32) -> Arg {
    Arg::Scalar(Scalar::u32(n))
}

/// A streaming projection's launch: a persistent grid of at most `gemv_blocks` blocks, at most one per
/// tile (kernels/llama.cu).
fn stream_launch(o: &StepOptions, tiles: u32, shared: u32) -> Launch {
    Launch::linear(tiles.min(o.gemv_blocks), STREAM_THREADS).shared(shared)
}

/// One layer's launches: QKV with RoPE, attention, the output projection (merged in registers, or the
/// merge then the streamed projection), gate/up, down.
fn record_layer(r: &mut Recorder, c: &LlamaConfig, o: &StepOptions, k: &Kernels, a: &Activations, lb: &LayerBuffers, pos: SlotId) -> Result<(), LlamaError> {
    let (b, u, eps) = (Arg::Whole, u32_arg, Arg::Scalar(Scalar::f32(c.rms_eps)));
    let group = c.heads / c.kv_heads;
    let pairs = (c.heads + 2 * c.kv_heads) * c.head_dim / 2;
    r.launch(
        k.qkv,
        Launch::linear(pairs.div_ceil(QKV_WARPS), QKV_WARPS * 32),
        &[b(a.q), b(a.kv_new), b(a.x), b(lb.ln1), b(lb.wqkv), b(a.rope), Arg::Slot(pos), u(c.hidden), u(c.heads), u(c.kv_heads), u(c.head_dim), eps],
    )?;
    r.launch(
        k.attn,
        Launch::new([o.attn_splits, c.kv_heads, 1], [256, 1, 1]),
        &[
            b(a.attn_part),
            b(lb.kcache),
            b(lb.vcache),
            b(a.q),
            b(a.kv_new),
            Arg::Slot(pos),
            u(c.heads),
            u(c.kv_heads),
            u(c.max_seq),
            u(o.attn_splits),
            u(c.head_dim),
        ],
    )?;
    match a.streamed {
        None => {
            let o_launch = Launch::new([c.hidden.div_ceil(64), c.kv_heads, 1], [256, 1, 1]);
            let args =
                [b(a.x), b(a.attn_part), b(lb.wo), u(c.hidden), u(c.heads), u(c.kv_heads), u(o.attn_splits), Arg::Slot(pos), u(c.max_seq), u(c.head_dim)];
            r.launch(k.o, o_launch, &args)?;
        }
        Some((attn_out, o_ticket)) => {
            let merge_launch = Launch::new([c.kv_heads, (group * c.head_dim).div_ceil(256), 1], [256, 1, 1]);
            let args = [b(attn_out), b(a.attn_part), u(c.heads), u(c.kv_heads), u(o.attn_splits), Arg::Slot(pos), u(c.max_seq), u(c.head_dim)];
            r.launch(k.o, merge_launch, &args)?;
            let qn = c.heads * c.head_dim;
            let o_tiles = stream_tiles(c.hidden, 2 * qn, MAX_UNITS / quarters(qn));
            r.launch(k.down, stream_launch(o, o_tiles, STREAM_SHARED), &[b(a.x), b(o_ticket), b(lb.wo), b(attn_out), u(c.hidden), u(qn)])?;
        }
    }
    // Units: a 2,048-column chunk of a (gate, up) pair's rows, of a row of the down projection (1, 2 or
    // 4 of them), of an LM-head row; at most 64 units a tile.
    let ffn_tiles = stream_tiles(c.ffn, 4 * c.hidden, MAX_UNITS / (2 * chunks(c.hidden)));
    let down_tiles = stream_tiles(c.hidden, 2 * c.ffn, MAX_UNITS / quarters(c.ffn));
    let ffn_launch = stream_launch(o, ffn_tiles, stream_norm_shared(c.hidden));
    r.launch(k.ffn, ffn_launch, &[b(a.act), b(a.ffn_ticket), b(a.x), b(lb.ln2), b(lb.wgu), u(c.ffn), u(c.hidden), eps])?;
    r.launch(k.down, stream_launch(o, down_tiles, STREAM_SHARED), &[b(a.x), b(a.down_ticket), b(lb.wd), b(a.act), u(c.hidden), u(c.ffn)])
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define name …` in the pack's CUDA source (the first definition: the build's
    /// default where an `#ifndef` guards it).
    fn define(name: &str) -> u32 {
        let prefix = format!("#define {name} ");
        let line = crate::pack::CUDA_SOURCE.lines().find_map(|l| l.trim().strip_prefix(prefix.as_str())).unwrap_or_else(|| panic!("no #define {name}"));
        line.trim().parse().unwrap_or_else(|e| panic!("#define {name} {line}: {e}"))
    }

    /// The step sizes launches and tiles by these constants, the kernels by their defines: a change to
    /// one side alone would launch too little shared memory or cut tiles the kernels do not.
    #[test]
    fn the_constants_the_step_mirrors_equal_the_kernels_defines() {
        assert_eq!(MAX_SPLITS, define("LL_MAX_SPLITS"));
        assert_eq!(QKV_WARPS, define("LL_QKV_WARPS"));
        assert_eq!(CHUNK, define("LL_CHUNK"));
        assert_eq!(STREAM_THREADS, (define("LB_CONSUMERS") + 1) * 32);
        assert_eq!(STREAM_STAGE_BYTES, define("LB_STAGE_BYTES"));
        assert_eq!(STREAM_SHARED, define("LB_STAGES") * define("LB_STAGE_BYTES"));
        assert_eq!(MAX_UNITS, define("LB_MAX_UNITS"));
    }
}
