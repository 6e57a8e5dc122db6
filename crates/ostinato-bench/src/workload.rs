//! The benchmark's workloads, the rows of the dispatch matrix (`docs/reproduce.md` lists them): each is
//! a recorded graph plus what every arm needs to run and check it the same way: initial contents,
//! replays per sample, a slot schedule, which buffers the oracle checks and how, and the stream
//! schedule a skilled CUDA user would write by hand for the baselines.

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, NodeId, Scalar, ScalarType, Slice, SlotId};

/// How outputs are compared with the host oracle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Bit for bit.
    Exact,
    /// f32 buffers: relative L2 error ‖got − want‖ / ‖want‖ at most this (and no NaN).
    RelL2(f64),
    /// Decode: checked buffer 0 holds logits, within this of the oracle's relative to their largest
    /// magnitude; buffer 1 the greedy token, equal to the oracle's wherever the oracle's top-1 margin
    /// exceeds that tolerance ([`ostinato_llama::agree`]).
    Logits(f32),
}

/// One launch of the hand-written baseline: on which stream, after which nodes' events.
#[derive(Clone, Debug)]
pub struct UserLaunch {
    pub stream: usize,
    pub waits: Vec<NodeId>,
}

pub struct Workload {
    /// Stable row id, e.g. `grid/serial/n941/b1`.
    pub id: String,
    pub family: &'static str,
    pub graph: Graph,
    pub inits: Vec<Option<BufferInit>>,
    /// Buffers whose initial bytes are data rather than a pattern (they replace the pattern's).
    pub data: Vec<(BufferId, Vec<u8>)>,
    /// Bytes of weights and cache one replay reads (decode rows: the memory floor's numerator).
    pub bytes_per_replay: Option<u64>,
    /// Decode rows: the model and the position every replay runs at.
    pub model: Option<(ostinato_llama::LlamaConfig, u32)>,
    /// Replays of the whole graph per timed sample.
    pub replays: usize,
    /// A slot patched before every replay, with its value for replay r.
    pub slot_schedule: Option<(SlotId, Vec<Scalar>)>,
    pub checked: Vec<BufferId>,
    pub check: Check,
    /// Kernel dispatches per replay (the divisor of "time per dispatch").
    pub dispatches: usize,
    /// The baseline's stream assignment, in recording order; `streams` streams in all.
    pub user: Vec<UserLaunch>,
    pub streams: usize,
    /// The workload is independent chains (baselines fork/join over `streams` streams).
    pub independent: bool,
}

pub fn add_one_sig() -> KernelSig {
    KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

/// dispatch-grid: `count` add_one dispatches of `blocks`×256 threads; serial (one buffer) or
/// independent (4 chains on 4 buffers, recorded interleaved in ONE program order).
pub fn dispatch_grid(count: usize, blocks: u32, independent: bool, replays: usize) -> Workload {
    let lanes = if independent { 4 } else { 1 };
    let n = blocks * 256;
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 4 * n as u64).expect("fresh")).collect();
    let k = g.add_kernel(add_one_sig()).expect("fresh");
    let mut user = Vec::new();
    for _ in 0..count {
        for (l, &b) in bufs.iter().enumerate() {
            g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(n))], &[]).expect("valid");
            user.push(UserLaunch { stream: l, waits: vec![] });
        }
    }
    let kind = if independent { "indep" } else { "serial" };
    Workload {
        id: format!("grid/{kind}/n{count}/b{blocks}"),
        family: if independent { "dispatch-grid independent" } else { "dispatch-grid serial" },
        inits: vec![Some(BufferInit::ConstF32(0.0)); lanes],
        checked: bufs,
        graph: g,
        data: Vec::new(),
        bytes_per_replay: None,
        model: None,
        replays,
        slot_schedule: None,
        check: Check::Exact,
        dispatches: count * lanes,
        user,
        streams: lanes,
        independent,
    }
}

/// chain fusion: `len` dependent add_one nodes of one block of `threads` threads over `elems` floats
/// (`side == false`), or `len` independent such nodes on their own buffers (`side == true`: fused
/// under `on` they share a block, one after the other; under `auto` they stay side by side).
pub fn fusion(len: usize, threads: u32, elems: u32, side: bool, replays: usize) -> Workload {
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = (0..if side { len } else { 1 }).map(|l| g.add_buffer(format!("x{l}"), 4 * elems as u64).expect("fresh")).collect();
    let k = g.add_kernel(add_one_sig()).expect("fresh");
    let mut user = Vec::new();
    for i in 0..len {
        let (b, stream) = if side { (bufs[i], i % 4) } else { (bufs[0], 0) };
        g.add_launch(k, Launch::linear(1, threads), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(elems))], &[]).expect("valid");
        user.push(UserLaunch { stream, waits: vec![] });
    }
    let kind = if side { "side" } else { "chain" };
    Workload {
        id: format!("fusion/{kind}/n{len}/t{threads}/e{elems}"),
        family: "chain fusion",
        inits: vec![Some(BufferInit::ConstF32(0.0)); bufs.len()],
        checked: bufs.clone(),
        graph: g,
        data: Vec::new(),
        bytes_per_replay: None,
        model: None,
        replays,
        slot_schedule: None,
        check: Check::Exact,
        dispatches: len,
        user,
        streams: if side { 4 } else { 1 },
        independent: side,
    }
}

pub fn mix_sig() -> KernelSig {
    ostinato_host::builtins::mix_sig()
}

/// fan-out/fan-in: a producer writes P; `k` consumers each read P and write their own slice of C; a
/// reducer reads all of C. The skilled user spreads consumers over 4 streams with events.
pub fn fan(k: usize, words: u32, replays: usize) -> Workload {
    let mut g = Graph::new();
    let src = g.add_buffer("src", 4 * words as u64).expect("fresh");
    let p = g.add_buffer("p", 4 * words as u64).expect("fresh");
    let c = g.add_buffer("c", 4 * words as u64 * k as u64).expect("fresh");
    let r = g.add_buffer("r", 4 * words as u64).expect("fresh");
    let mix = g.add_kernel(mix_sig()).expect("fresh");
    let blocks = words.div_ceil(256);
    let call = |g: &mut Graph, out: Slice, inp: Slice, salt: u32| {
        let args = [
            Arg::Buffer(out),
            Arg::Buffer(inp),
            Arg::Scalar(Scalar::u32((out.len / 4) as u32)),
            Arg::Scalar(Scalar::u32((inp.len / 4) as u32)),
            Arg::Scalar(Scalar::u32(salt)),
        ];
        g.add_launch(mix, Launch::linear(blocks, 256), &args, &[]).expect("valid")
    };
    let (wp, wsrc, wr, wc) = (g.whole(p), g.whole(src), g.whole(r), g.whole(c));
    let producer = call(&mut g, wp, wsrc, 1);
    let mut user = vec![UserLaunch { stream: 0, waits: vec![] }];
    let mut last_on = [None::<NodeId>; 4];
    for i in 0..k {
        let out = Slice { buffer: c, offset: 4 * words as u64 * i as u64, len: 4 * words as u64 };
        let node = call(&mut g, out, wp, 2 + i as u32);
        let s = i % 4;
        user.push(UserLaunch { stream: s, waits: if i < 4 && s != 0 { vec![producer] } else { vec![] } });
        last_on[s] = Some(node);
    }
    let reducer_waits = last_on.iter().enumerate().filter(|(s, _)| *s != 0).filter_map(|(_, n)| *n).collect();
    call(&mut g, wr, wc, 99);
    user.push(UserLaunch { stream: 0, waits: reducer_waits });
    Workload {
        id: format!("fan/k{k}/w{words}"),
        family: "fan-out/fan-in",
        inits: vec![Some(BufferInit::Random(11)), Some(BufferInit::Zero), Some(BufferInit::Random(12)), Some(BufferInit::Zero)],
        checked: vec![p, c, r],
        graph: g,
        data: Vec::new(),
        bytes_per_replay: None,
        model: None,
        replays,
        slot_schedule: None,
        check: Check::Exact,
        dispatches: k + 2,
        user,
        streams: 4.min(k),
        independent: false,
    }
}

/// Decode-shape parameters (Llama-3.2-1B-like at full size).
#[derive(Clone, Copy, Debug)]
pub struct DecodeShape {
    pub hidden: u32,
    pub layers: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub ffn: u32,
    pub max_seq: u32,
    /// Position of the first token of a sample; each replay advances it by one.
    pub pos0: u32,
}

impl DecodeShape {
    pub const LLAMA_1B: DecodeShape = DecodeShape { hidden: 2048, layers: 16, heads: 32, kv_heads: 8, head_dim: 64, ffn: 8192, max_seq: 1024, pos0: 512 };
    /// A shrunken stack for the host backend (same structure, ~1/64 of the weights).
    pub const HOST_SMALL: DecodeShape = DecodeShape { hidden: 256, layers: 4, heads: 4, kv_heads: 2, head_dim: 64, ffn: 1024, max_seq: 128, pos0: 64 };
}

/// The decode-shaped layer stack: per layer rmsnorm, qkv gemv, rope (q and k), kv store, attention
/// over the cache up to the position slot, o-proj gemv, residual add, rmsnorm, gate/up gemv, silu·mul,
/// down gemv, residual add. f32, plain kernels; the position slot is patched every replay.
pub fn decode(s: DecodeShape, replays: usize) -> Workload {
    let mut g = Graph::new();
    let f = |n: u32| 4 * n as u64;
    let (h, hd, nh, nkv, ffn) = (s.hidden, s.head_dim, s.heads, s.kv_heads, s.ffn);
    let q_len = nh * hd;
    let kv_len = nkv * hd;
    let qkv_len = q_len + 2 * kv_len;
    let x = g.add_buffer("x", f(h)).expect("fresh");
    let hbuf = g.add_buffer("h", f(h)).expect("fresh");
    let qkv = g.add_buffer("qkv", f(qkv_len)).expect("fresh");
    let att = g.add_buffer("att", f(q_len)).expect("fresh");
    let o = g.add_buffer("o", f(h)).expect("fresh");
    let gu = g.add_buffer("gu", f(2 * ffn)).expect("fresh");
    let act = g.add_buffer("act", f(ffn)).expect("fresh");
    let d = g.add_buffer("d", f(h)).expect("fresh");
    // x starts random; the seven scratch buffers start zeroed.
    let mut inits = vec![Some(BufferInit::RandomF32 { seed: 1, scale: 1.0 })];
    inits.extend(std::iter::repeat_n(Some(BufferInit::Zero), 7));
    let sig = |name: &str, ps: &[(&str, Option<Access>)]| {
        let mut k = KernelSig::new(name);
        for (p, a) in ps {
            k = match a {
                Some(a) => k.buffer(*p, *a),
                None => k.scalar(*p, if *p == "eps" { ScalarType::F32 } else { ScalarType::U32 }),
            };
        }
        k
    };
    use Access::{Read as R, ReadWrite as RW, Write as W};
    let rmsnorm = g.add_kernel(sig("rmsnorm", &[("out", Some(W)), ("x", Some(R)), ("w", Some(R)), ("n", None), ("eps", None)])).expect("fresh");
    let gemv = g.add_kernel(sig("gemv", &[("y", Some(W)), ("w", Some(R)), ("x", Some(R)), ("m", None), ("k", None)])).expect("fresh");
    let rope = g.add_kernel(sig("rope", &[("qk", Some(RW)), ("pos", None), ("heads", None), ("head_dim", None)])).expect("fresh");
    let kv_store = g
        .add_kernel(sig("kv_store", &[("kcache", Some(RW)), ("vcache", Some(RW)), ("k", Some(R)), ("v", Some(R)), ("pos", None), ("kv", None)]))
        .expect("fresh");
    let attention = g
        .add_kernel(sig(
            "attention",
            &[
                ("out", Some(W)),
                ("q", Some(R)),
                ("kcache", Some(R)),
                ("vcache", Some(R)),
                ("pos", None),
                ("heads", None),
                ("kv_heads", None),
                ("head_dim", None),
            ],
        ))
        .expect("fresh");
    let add = g.add_kernel(sig("add", &[("x", Some(RW)), ("y", Some(R)), ("n", None)])).expect("fresh");
    let silu = g.add_kernel(sig("silu_mul", &[("out", Some(W)), ("gate_up", Some(R)), ("n", None)])).expect("fresh");
    let pos = g.add_slot("pos", Scalar::u32(s.pos0)).expect("fresh");
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    let sl = |b: BufferId, off: u32, len: u32| Arg::Buffer(Slice { buffer: b, offset: f(off), len: f(len) });
    let gemv_launch = |m: u32| Launch::linear(m.div_ceil(8), 256);
    let mut dispatches = 0;
    for l in 0..s.layers {
        let mut weight = |g: &mut Graph, name: &str, len: u64, init: BufferInit| {
            let b = g.add_buffer(format!("{name}{l}"), len).expect("fresh");
            inits.push(Some(init));
            b
        };
        let seed = 100 + l as u64 * 16;
        let ln1 = weight(&mut g, "ln1_", f(h), BufferInit::ConstF32(1.0));
        let wqkv = weight(&mut g, "wqkv", f(qkv_len) * h as u64, BufferInit::RandomF32 { seed, scale: 1.0 / (h as f32).sqrt() });
        let wo = weight(&mut g, "wo", f(h) * q_len as u64, BufferInit::RandomF32 { seed: seed + 1, scale: 1.0 / (q_len as f32).sqrt() });
        let ln2 = weight(&mut g, "ln2_", f(h), BufferInit::ConstF32(1.0));
        let wgu = weight(&mut g, "wgu", f(2 * ffn) * h as u64, BufferInit::RandomF32 { seed: seed + 2, scale: 1.0 / (h as f32).sqrt() });
        let wd = weight(&mut g, "wdown", f(h) * ffn as u64, BufferInit::RandomF32 { seed: seed + 3, scale: 1.0 / (ffn as f32).sqrt() });
        let kc = weight(&mut g, "kcache", f(kv_len) * s.max_seq as u64, BufferInit::RandomF32 { seed: seed + 4, scale: 1.0 });
        let vc = weight(&mut g, "vcache", f(kv_len) * s.max_seq as u64, BufferInit::RandomF32 { seed: seed + 5, scale: 1.0 });
        let mut k = |g: &mut Graph, kernel, launch: Launch, args: &[Arg]| {
            g.add_launch(kernel, launch, args, &[]).expect("valid by construction");
            dispatches += 1;
        };
        k(&mut g, rmsnorm, Launch::linear(1, 1024), &[Arg::Whole(hbuf), Arg::Whole(x), Arg::Whole(ln1), u(h), Arg::Scalar(Scalar::f32(1e-5))]);
        k(&mut g, gemv, gemv_launch(qkv_len), &[Arg::Whole(qkv), Arg::Whole(wqkv), Arg::Whole(hbuf), u(qkv_len), u(h)]);
        k(&mut g, rope, Launch::linear((nh + nkv) * hd / 2 / 256 + 1, 256), &[sl(qkv, 0, q_len + kv_len), Arg::Slot(pos), u(nh + nkv), u(hd)]);
        k(
            &mut g,
            kv_store,
            Launch::linear(kv_len.div_ceil(256), 256),
            &[Arg::Whole(kc), Arg::Whole(vc), sl(qkv, q_len, kv_len), sl(qkv, q_len + kv_len, kv_len), Arg::Slot(pos), u(kv_len)],
        );
        k(
            &mut g,
            attention,
            Launch::linear(nh, 128).shared(4 * s.max_seq),
            &[Arg::Whole(att), sl(qkv, 0, q_len), Arg::Whole(kc), Arg::Whole(vc), Arg::Slot(pos), u(nh), u(nkv), u(hd)],
        );
        k(&mut g, gemv, gemv_launch(h), &[Arg::Whole(o), Arg::Whole(wo), Arg::Whole(att), u(h), u(q_len)]);
        k(&mut g, add, Launch::linear(h.div_ceil(256), 256), &[Arg::Whole(x), Arg::Whole(o), u(h)]);
        k(&mut g, rmsnorm, Launch::linear(1, 1024), &[Arg::Whole(hbuf), Arg::Whole(x), Arg::Whole(ln2), u(h), Arg::Scalar(Scalar::f32(1e-5))]);
        k(&mut g, gemv, gemv_launch(2 * ffn), &[Arg::Whole(gu), Arg::Whole(wgu), Arg::Whole(hbuf), u(2 * ffn), u(h)]);
        k(&mut g, silu, Launch::linear(ffn.div_ceil(256), 256), &[Arg::Whole(act), Arg::Whole(gu), u(ffn)]);
        k(&mut g, gemv, gemv_launch(h), &[Arg::Whole(d), Arg::Whole(wd), Arg::Whole(act), u(h), u(ffn)]);
        k(&mut g, add, Launch::linear(h.div_ceil(256), 256), &[Arg::Whole(x), Arg::Whole(d), u(h)]);
    }
    let user = (0..g.nodes().len()).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect();
    let schedule = (0..replays).map(|r| Scalar::u32(s.pos0 + r as u32)).collect();
    Workload {
        id: format!("decode/h{}-l{}", s.hidden, s.layers),
        family: "decode-shaped",
        checked: vec![x],
        graph: g,
        inits,
        data: Vec::new(),
        bytes_per_replay: None,
        model: None,
        replays,
        slot_schedule: Some((pos, schedule)),
        check: Check::RelL2(1e-3),
        dispatches,
        user,
        streams: 1,
        independent: false,
    }
}

/// Largest |Δlogit| the decode rows allow against the host oracle, relative to the largest |logit| (the
/// same math in f32 on the CPU in its own summation order; its KV cache rounds to bf16 as the GPU's
/// does, so a rounding that flips is the largest source).
pub const LLAMA_LOGIT_TOL: f32 = 1e-2;

/// The Llama decode step (`ostinato-llama`: Llama-3.2-1B on the GPU, the shrunk model on the host)
/// at position `pos` of a random context: one step per replay, the greedy token and logits checked.
pub fn llama(config: ostinato_llama::LlamaConfig, pos: u32, replays: usize) -> Workload {
    let step = ostinato_llama::record(&config, ostinato_llama::StepOptions { pos, ..Default::default() }).expect("the built-in configs are valid");
    let user = (0..step.graph.nodes().len()).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect();
    let name = if config.hidden == 2048 { "1b".to_string() } else { format!("h{}-l{}", config.hidden, config.layers) };
    Workload {
        id: format!("llama/{name}/pos{pos}"),
        family: "llama decode",
        checked: vec![step.logits, step.token],
        inits: step.inits.clone(),
        data: step.data.clone(),
        bytes_per_replay: Some(step.bytes_read(pos)),
        model: Some((config, pos)),
        replays,
        slot_schedule: Some((step.pos, vec![Scalar::u32(pos); replays])),
        check: Check::Logits(LLAMA_LOGIT_TOL),
        dispatches: step.dispatches,
        user,
        streams: 1,
        independent: false,
        graph: step.graph,
    }
}
