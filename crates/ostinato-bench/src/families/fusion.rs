//! chain fusion: dependent (or independent) one-block `add_one` nodes, the rows of the fusion policy.

use ostinato::file::BufferInit;
use ostinato::{Arg, BufferId, Graph, Launch, Scalar};

use crate::workload::{Check, Kernels, UserLaunch, Workload};

/// chain fusion: `len` dependent add_one nodes of one block of `threads` threads over `elems` floats
/// (`side == false`), or `len` independent such nodes on their own buffers (`side == true`: fused
/// under `on` they share a block, one after the other; under `auto` they stay side by side).
pub fn fusion(len: usize, threads: u32, elems: u32, side: bool, replays: usize) -> Workload {
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = (0..if side { len } else { 1 }).map(|l| g.add_buffer(format!("x{l}"), 4 * elems as u64).expect("fresh")).collect();
    let k = g.add_kernel(super::grid::add_one_sig()).expect("fresh");
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
        kernels: Kernels::Builtins,
        protocol: None,
    }
}

/// Chain fusion's policy rows (docs/fences.md decision 12): chain length, block size, work per node,
/// and independent nodes that `on` would put one after the other in a block — every one in the full
/// matrices, a chain and a side-by-side row in the host's quick one (the GPU's quick matrix has none).
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    let all = [
        (2, 256, 256, false),
        (8, 256, 256, false),
        (64, 256, 256, false),
        (64, 32, 32, false),
        (64, 1024, 1024, false),
        (64, 256, 65536, false),
        (16, 256, 256, true),
        (16, 256, 65536, true),
    ];
    let picked: Vec<(usize, u32, u32, bool)> = match (s.backend, s.quick) {
        (_, false) => all.to_vec(),
        (crate::BenchBackend::Cuda, true) => Vec::new(),
        (crate::BenchBackend::Host, true) => vec![all[1], all[6]],
    };
    picked.into_iter().map(|(len, threads, elems, side)| fusion(len, threads, elems, side, s.replays(1))).collect()
}
