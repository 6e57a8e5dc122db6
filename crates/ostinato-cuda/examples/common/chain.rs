//! The 941-node chain of 1-block `add_one` launches that `chain_floor_probe`, `host_call_probe` and
//! `exec_spread_probe` time, as an Ostinato plan and as a stream-captured graph, and chains side by side
//! (shared by `#[path]`).

// Each probe that includes this file uses only some of it.
#![allow(dead_code)]

use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_cuda::raw::{Args, CapturedGraph, Stream};
use ostinato_cuda::{CudaKernel, Dims};

pub const NODES: usize = 941;

/// One block of 256 threads: every launch of the chain.
pub const DIMS: Dims = Dims { grid: [1, 1, 1], block: [256, 1, 1], shared: 0 };

pub fn add_one_sig() -> KernelSig {
    KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

/// The chain recorded on one 1 KiB buffer, planned; and that buffer.
pub fn chain_plan() -> Result<(Plan, BufferId), String> {
    let s = |x: ostinato::GraphError| x.to_string();
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024).map_err(s)?;
    let k = g.add_kernel(add_one_sig()).map_err(s)?;
    for _ in 0..NODES {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).map_err(s)?;
    }
    Ok((Plan::compile(&g).map_err(|x| x.to_string())?, x))
}

/// `lanes` chains of `len` 1-block `add_one` launches, one buffer each, recorded interleaved (one
/// node of every chain, then the next), planned with up to `lanes` lanes.
pub fn lanes_plan(lanes: usize, len: usize) -> Result<Plan, String> {
    let s = |x: ostinato::GraphError| x.to_string();
    let mut g = Graph::new();
    let k = g.add_kernel(add_one_sig()).map_err(s)?;
    let xs = (0..lanes).map(|i| g.add_buffer(format!("x{i}"), 1024)).collect::<Result<Vec<_>, _>>().map_err(s)?;
    for _ in 0..len {
        for &x in &xs {
            g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).map_err(s)?;
        }
    }
    Plan::compile_with(&g, ostinato::PlanOptions { max_lanes: lanes }).map_err(|x| x.to_string())
}

/// The chain captured from `stream`: `NODES` launches of `k` on the buffer at `x`, each with the
/// programmatic-serialization attribute when `pdl` (the kernel must then wait).
pub fn capture_chain(k: &CudaKernel, x: u64, stream: &Stream, pdl: bool) -> Result<CapturedGraph, String> {
    capture_launches(k, x, stream, pdl, NODES)
}

/// `count` launches of the chain's kernel captured from `stream` (`capture_chain` is `NODES` of them).
pub fn capture_launches(k: &CudaKernel, x: u64, stream: &Stream, pdl: bool, count: usize) -> Result<CapturedGraph, String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let mut args = Args::new(&[x, 256]);
    stream.begin_capture().map_err(e)?;
    let launched = (0..count).try_for_each(|_| stream.launch(k, DIMS, &mut args, pdl));
    let graph = stream.end_capture().map_err(e)?;
    launched.map_err(e)?;
    Ok(graph)
}
