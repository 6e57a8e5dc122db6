//! two-stage reduction: each op is two kernels — per-block partials of n elements (`reduce2_partials`),
//! then one block sums the partials into the output (`reduce2_final`) — in f32 (random floats; the host
//! twins add in the kernels' order, so the check is exact) and u32, over 64 K to 8 M elements.

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};

use super::reduction::{block_partials, blocks, final_sum, input, size_name, wgsl, Elem, BLOCK};
use super::Scope;
use crate::pack::{CudaUnit, PackKernel};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Mode, Workload};
use crate::BenchBackend;

/// `reduce2_partials_{elem}(part: write, x: read, n)`.
pub fn partials(elem: Elem) -> PackKernel {
    let sig =
        KernelSig::new(format!("reduce2_partials_{}", elem.as_str())).buffer("part", Access::Write).buffer("x", Access::Read).scalar("n", ScalarType::U32);
    let src = wgsl(include_str!("../../kernels/reduce2_partials.wgsl"), elem, true, false);
    PackKernel::new(sig, CudaUnit::Reduce, true, src, move |cx| {
        let (part, x) = (cx.buffer(0)?, cx.buffer(1)?);
        let n = cx.u32(2)? as usize;
        let grid = cx.launch.grid[0] as usize;
        let out = part.words(grid, true)?;
        for (b, p) in block_partials(elem, &x.words(n, false)?, n, grid).into_iter().enumerate() {
            out.set_u32(b, p);
        }
        Ok(())
    })
}

/// `reduce2_final_{elem}(acc: read_write, part: read, m)`, launched as one block.
pub fn final_kernel(elem: Elem) -> PackKernel {
    let sig =
        KernelSig::new(format!("reduce2_final_{}", elem.as_str())).buffer("acc", Access::ReadWrite).buffer("part", Access::Read).scalar("m", ScalarType::U32);
    let src = wgsl(include_str!("../../kernels/reduce2_final.wgsl"), elem, false, false);
    PackKernel::new(sig, CudaUnit::Reduce, true, src, move |cx| {
        let (acc, part) = (cx.buffer(0)?, cx.buffer(1)?);
        let m = cx.u32(2)? as usize;
        let p = part.words(m, false)?;
        let partials: Vec<u32> = (0..m).map(|i| p.u32(i)).collect();
        let a = acc.words(1, true)?;
        a.set_u32(0, elem.add(a.u32(0), final_sum(elem, &partials)));
        Ok(())
    })
}

/// One row: ten two-stage reductions of `n` elements.
pub fn row(elem: Elem, n: u32, mode: Mode, replays: usize) -> Workload {
    let grid = blocks(n, 1024);
    let mut g = Graph::new();
    let acc = g.add_buffer("acc", 256 * mode.slices() as u64).expect("fresh");
    let x = g.add_buffer("x", 4 * n as u64).expect("fresh");
    let stride = slice_stride(4 * grid as u64);
    let part = g.add_buffer("part", stride * mode.slices() as u64).expect("fresh");
    let (k1, k2) = (partials(elem), final_kernel(elem));
    let (p1, p2) = (g.add_kernel(k1.sig.clone()).expect("fresh"), g.add_kernel(k2.sig.clone()).expect("fresh"));
    let user = record_ops(&mut g, mode, |op| {
        let slice = Arg::Buffer(op_slice(part, mode, op, stride, 4 * grid as u64));
        vec![
            (p1, Launch::linear(grid, BLOCK), vec![slice, whole(x), u32_arg(n)]),
            (p2, Launch::linear(1, BLOCK), vec![Arg::Buffer(op_slice(acc, mode, op, 256, 4)), slice, u32_arg(grid)]),
        ]
    });
    let id = format!("reduce2/{}/{}/n{}", elem.as_str(), mode.as_str(), size_name(n));
    let mut w = family_row(id, mode.family("two-stage reduction serial", "two-stage reduction independent"), g, mode, user, vec![k1, k2], replays);
    let (init, data) = input(elem, false, n, 0x2570 + n as u64);
    w.inits = vec![Some(BufferInit::Zero), init, Some(BufferInit::Zero)];
    w.data = data.map(|d| vec![(x, d)]).unwrap_or_default();
    w.checked = vec![acc];
    w
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    let sizes: &[u32] = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => &[1 << 16, 1 << 20, 1 << 23],
        (BenchBackend::Cuda, true) => &[1 << 20],
        (BenchBackend::Host, false) => &[1 << 16, 1 << 20],
        (BenchBackend::Host, true) => &[1 << 16],
    };
    Mode::BOTH.iter().flat_map(|&m| Elem::BOTH.iter().flat_map(move |&e| sizes.iter().map(move |&n| row(e, n, m, s.replays(1))))).collect()
}
