//! decode-shaped: a Llama-1B-like layer stack of plain f32 kernels (the backends' built-ins) with a
//! per-token position slot.

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, BufferId, Graph, KernelId, KernelSig, Launch, Scalar, ScalarType, Slice};

use crate::workload::{Check, Kernels, UserLaunch, Workload};

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

/// The decode stack's kernels (the bench pack's built-ins), one id each.
struct DecodeKernels {
    rmsnorm: KernelId,
    gemv: KernelId,
    rope: KernelId,
    kv_store: KernelId,
    attention: KernelId,
    add: KernelId,
    silu: KernelId,
}

impl DecodeKernels {
    fn add(g: &mut Graph) -> DecodeKernels {
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
        DecodeKernels { rmsnorm, gemv, rope, kv_store, attention, add, silu }
    }
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
    let k = DecodeKernels::add(&mut g);
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
        let mut launch = |g: &mut Graph, kernel, launch: Launch, args: &[Arg]| {
            g.add_launch(kernel, launch, args, &[]).expect("valid by construction");
            dispatches += 1;
        };
        launch(&mut g, k.rmsnorm, Launch::linear(1, 1024), &[Arg::Whole(hbuf), Arg::Whole(x), Arg::Whole(ln1), u(h), Arg::Scalar(Scalar::f32(1e-5))]);
        launch(&mut g, k.gemv, gemv_launch(qkv_len), &[Arg::Whole(qkv), Arg::Whole(wqkv), Arg::Whole(hbuf), u(qkv_len), u(h)]);
        launch(&mut g, k.rope, Launch::linear((nh + nkv) * hd / 2 / 256 + 1, 256), &[sl(qkv, 0, q_len + kv_len), Arg::Slot(pos), u(nh + nkv), u(hd)]);
        launch(
            &mut g,
            k.kv_store,
            Launch::linear(kv_len.div_ceil(256), 256),
            &[Arg::Whole(kc), Arg::Whole(vc), sl(qkv, q_len, kv_len), sl(qkv, q_len + kv_len, kv_len), Arg::Slot(pos), u(kv_len)],
        );
        launch(
            &mut g,
            k.attention,
            Launch::linear(nh, 128).shared(4 * s.max_seq),
            &[Arg::Whole(att), sl(qkv, 0, q_len), Arg::Whole(kc), Arg::Whole(vc), Arg::Slot(pos), u(nh), u(nkv), u(hd)],
        );
        launch(&mut g, k.gemv, gemv_launch(h), &[Arg::Whole(o), Arg::Whole(wo), Arg::Whole(att), u(h), u(q_len)]);
        launch(&mut g, k.add, Launch::linear(h.div_ceil(256), 256), &[Arg::Whole(x), Arg::Whole(o), u(h)]);
        launch(&mut g, k.rmsnorm, Launch::linear(1, 1024), &[Arg::Whole(hbuf), Arg::Whole(x), Arg::Whole(ln2), u(h), Arg::Scalar(Scalar::f32(1e-5))]);
        launch(&mut g, k.gemv, gemv_launch(2 * ffn), &[Arg::Whole(gu), Arg::Whole(wgu), Arg::Whole(hbuf), u(2 * ffn), u(h)]);
        launch(&mut g, k.silu, Launch::linear(ffn.div_ceil(256), 256), &[Arg::Whole(act), Arg::Whole(gu), u(ffn)]);
        launch(&mut g, k.gemv, gemv_launch(h), &[Arg::Whole(d), Arg::Whole(wd), Arg::Whole(act), u(h), u(ffn)]);
        launch(&mut g, k.add, Launch::linear(h.div_ceil(256), 256), &[Arg::Whole(x), Arg::Whole(d), u(h)]);
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
        kernels: Kernels::Builtins,
        protocol: None,
    }
}

/// The family's row for `s`: the Llama-1B-like stack on the GPU (4 replays, one position each), a
/// shrunk one on the host.
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    vec![match s.backend {
        crate::BenchBackend::Cuda => decode(DecodeShape::LLAMA_1B, s.replays(4)),
        crate::BenchBackend::Host => decode(DecodeShape { layers: if s.quick { 2 } else { 4 }, ..DecodeShape::HOST_SMALL }, s.replays(2)),
    }]
}
