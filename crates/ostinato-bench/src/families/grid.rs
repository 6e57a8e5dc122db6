//! dispatch-grid: chains of `add_one` (the backends' built-in) of one to 941 dispatches over one to
//! 8,192 blocks, serial or as four independent chains. A launch of more than one block declares
//! add_one's per-block tile map on `x` (its stated footprint, `ostinato::builtins::block_footprint`:
//! block `b` of `G` blocks of 256 threads over `G·256` floats touches floats `b·256 .. b·256 + 256`), as
//! a user who knows the kernel records it: each block of a node then needs only its own block of the
//! node before, so a chain can run block by block (on CUDA and Vulkan: one kernel of its grid).

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, Scalar, ScalarType, TileMap};

use crate::workload::{Check, Kernels, UserLaunch, Workload};

pub fn add_one_sig() -> KernelSig {
    KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

/// dispatch-grid: `count` add_one dispatches of `blocks`×256 threads; serial (one buffer) or
/// independent (4 chains on 4 buffers, recorded interleaved in ONE program order). With more than one
/// block the recording declares add_one's per-block tile map on `x` (the module doc says which).
pub fn dispatch_grid(count: usize, blocks: u32, independent: bool, replays: usize) -> Workload {
    let lanes = if independent { 4 } else { 1 };
    let n = blocks * 256;
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 4 * n as u64).expect("fresh")).collect();
    let k = g.add_kernel(add_one_sig()).expect("fresh");
    // Block b's 256 floats of x: add_one's footprint on a grid of exactly n / 256 blocks.
    let tiles: Vec<(&str, TileMap)> = if blocks > 1 { vec![("x", TileMap::linear(1024, 1024).expect("a non-empty row"))] } else { Vec::new() };
    let mut user = Vec::new();
    for _ in 0..count {
        for (l, &b) in bufs.iter().enumerate() {
            g.add_launch_tiled(k, Launch::linear(blocks, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(n))], &tiles, &[]).expect("valid");
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
        kernels: Kernels::Builtins,
        protocol: None,
    }
}

/// The family's rows for `s`: serial and independent chains of 1, 50, 200 and 941 one-block dispatches,
/// and of 941 over more blocks (128, 1,024 and 8,192 on the GPU; `--blocks` replaces them).
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    use crate::BenchBackend;
    let (counts, default_blocks): (&[usize], &[u32]) = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => (&[1, 50, 200, 941], &[128, 1024, 8192]),
        (BenchBackend::Cuda, true) => (&[1, 941], &[8192]),
        (BenchBackend::Host, false) => (&[1, 50, 200, 941], &[128]),
        (BenchBackend::Host, true) => (&[1, 50, 941], &[]),
    };
    // Each grid row once: a listed block count that repeats, or 1 where the 941 × 1 row already exists,
    // would be a second row with the same id.
    let mut blocks: Vec<u32> = Vec::new();
    for &b in s.grid_blocks.unwrap_or(default_blocks) {
        let built_in = b == 1 && counts.contains(&941);
        if !built_in && !blocks.contains(&b) {
            blocks.push(b);
        }
    }
    let mut rows = Vec::new();
    for independent in [false, true] {
        for &c in counts {
            rows.push(dispatch_grid(c, 1, independent, s.replays(1)));
        }
        for &b in &blocks {
            rows.push(dispatch_grid(941, b, independent, s.replays(1)));
        }
    }
    rows
}
