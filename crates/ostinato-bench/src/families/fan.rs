//! fan-out/fan-in: a producer, `k` consumers of its output on their own slices, a reducer.

use ostinato::file::BufferInit;
use ostinato::{Arg, Graph, KernelSig, Launch, NodeId, Scalar, Slice};

use crate::workload::{Check, Kernels, UserLaunch, Workload};

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
        kernels: Kernels::Builtins,
        protocol: None,
    }
}

/// The family's rows for `s`: 4, 16 and 64 consumers of 1,024 words (`--fans` replaces the counts).
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    let mut fans: Vec<usize> = Vec::new();
    let mut rows = Vec::new();
    for &k in s.fan_widths.unwrap_or(if s.quick { &[4] } else { &[4, 16, 64] }) {
        if !fans.contains(&k) {
            fans.push(k);
            rows.push(fan(k, 1024, s.replays(1)));
        }
    }
    rows
}
