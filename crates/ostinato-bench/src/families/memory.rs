//! memory latency: every thread issues L = 1 to 64 independent loads at hashed places of a 128 MB table
//! (larger than the H200's L2, so each load misses it), then adds them into its output (u32, exact) —
//! two blocks of 128 threads per SM of the H200 (264), and one block (a latency and launch floor).

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};

use super::Scope;
use crate::pack::{CudaUnit, PackKernel, Wgsl};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Mode, Workload};
use crate::BenchBackend;

/// Threads per block (the WGSL workgroup).
pub const BLOCK: u32 = 128;

/// Loads in flight per thread, one kernel each (`mem_l{L}`).
pub const LOADS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The kernels' 32-bit mix (lowbias32), as `memory.cu` and `memory.wgsl` compute it.
pub fn hash(mut v: u32) -> u32 {
    v ^= v >> 16;
    v = v.wrapping_mul(0x7feb_352d);
    v ^= v >> 15;
    v = v.wrapping_mul(0x846c_a68b);
    v ^= v >> 16;
    v
}

pub fn sig(loads: u32) -> KernelSig {
    KernelSig::new(format!("mem_l{loads}"))
        .buffer("out", Access::ReadWrite)
        .buffer("table", Access::Read)
        .scalar("mask", ScalarType::U32)
        .scalar("salt", ScalarType::U32)
}

/// Kernel `mem_l{loads}`.
pub fn kernel(loads: u32) -> PackKernel {
    let wgsl = include_str!("../../kernels/memory.wgsl").replace("LOADS", &format!("{loads}u"));
    PackKernel::new(sig(loads), CudaUnit::Memory, true, Wgsl::one(wgsl), move |cx| {
        let (out, table) = (cx.buffer(0)?, cx.buffer(1)?);
        let (mask, salt) = (cx.u32(2)?, cx.u32(3)?);
        let threads = (cx.launch.grid[0] * cx.launch.block[0]) as usize;
        let (o, t) = (out.words(threads, true)?, table.words(mask as usize + 1, false)?);
        for i in 0..threads {
            let s =
                (0..loads).fold(0u32, |s, j| s.wrapping_add(t.u32((hash((i as u32).wrapping_mul(loads).wrapping_add(j).wrapping_add(salt)) & mask) as usize)));
            o.set_u32(i, o.u32(i).wrapping_mul(3).wrapping_add(s));
        }
        Ok(())
    })
}

/// One row: ten ops of `blocks` × 128 threads issuing `loads` loads each into a table of `table_words`
/// (a power of two).
pub fn row(loads: u32, blocks: u32, table_words: u32, mode: Mode, replays: usize) -> Workload {
    let threads = blocks * BLOCK;
    let stride = slice_stride(4 * threads as u64);
    let mut g = Graph::new();
    let out = g.add_buffer("out", stride * mode.slices() as u64).expect("fresh");
    let table = g.add_buffer("table", 4 * table_words as u64).expect("fresh");
    let kern = kernel(loads);
    let k = g.add_kernel(kern.sig.clone()).expect("fresh");
    let user = record_ops(&mut g, mode, |op| {
        let args =
            vec![Arg::Buffer(op_slice(out, mode, op, stride, 4 * threads as u64)), whole(table), u32_arg(table_words - 1), u32_arg(0x5a17 * (op as u32 + 1))];
        vec![(k, Launch::linear(blocks, BLOCK), args)]
    });
    let id = format!("memlat/{}/l{loads}/b{blocks}", mode.as_str());
    let mut w = family_row(id, mode.family("memory latency serial", "memory latency independent"), g, mode, user, vec![kern], replays);
    w.inits = vec![Some(BufferInit::Random(0x3e30)), Some(BufferInit::Random(0x3e31))];
    w.checked = vec![out];
    w
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    // (loads, blocks) and the table: 128 MB on the GPU (the H200's L2 is 50 MB), 4 MB on the host. Every
    // count of loads over two blocks per SM; one block (a fused chain's case: each fused kernel is
    // compiled at run time) at 1 and 16.
    let every = |blocks: u32| LOADS.iter().map(move |&l| (l, blocks));
    let (configs, table): (Vec<(u32, u32)>, u32) = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => (every(264).chain([(1, 1), (16, 1)]).collect(), 1 << 25),
        (BenchBackend::Cuda, true) => (vec![(1, 264), (64, 264)], 1 << 25),
        (BenchBackend::Host, false) => (every(8).chain([(1, 1), (16, 1)]).collect(), 1 << 20),
        (BenchBackend::Host, true) => (vec![(16, 1)], 1 << 20),
    };
    Mode::BOTH.iter().flat_map(|&m| configs.iter().map(move |&(l, b)| row(l, b, table, m, s.replays(1)))).collect()
}
