//! geometry: one element-wise kernel (`geom_mix`, u32, exact) in the block and grid shapes a GPU program
//! uses — 1-D blocks of 32 to 1,024 threads over 1 to 8,192 blocks, and 2-D and 3-D blocks and grids —
//! one thread per element, so each row spans from one launch-bound block to 2 M elements (24 MB moved
//! per op).

use ostinato::file::BufferInit;
use ostinato::{Access, Arg, Graph, KernelSig, Launch, ScalarType};

use super::Scope;
use crate::pack::{CudaUnit, PackKernel, Wgsl};
use crate::workload::{family_row, op_slice, record_ops, slice_stride, u32_arg, whole, Mode, Workload};
use crate::BenchBackend;

/// A block shape and a grid shape (threads and blocks in x, y, z).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub block: [u32; 3],
    pub grid: [u32; 3],
}

impl Shape {
    pub const fn linear(block: u32, grid: u32) -> Shape {
        Shape { block: [block, 1, 1], grid: [grid, 1, 1] }
    }
    /// Threads in all: the row's element count.
    pub fn threads(&self) -> u32 {
        self.block.iter().chain(&self.grid).product()
    }
}

/// The rows' shapes on the GPU: from a 32-thread block to 2,048 blocks of 1,024, and 2-D and 3-D shapes.
pub const SHAPES: [Shape; 20] = [
    Shape::linear(32, 1),
    Shape::linear(32, 8192),
    Shape::linear(64, 1024),
    Shape::linear(64, 8192),
    Shape::linear(128, 64),
    Shape::linear(128, 1),
    Shape::linear(128, 8192),
    Shape::linear(256, 1),
    Shape::linear(256, 64),
    Shape::linear(256, 512),
    Shape::linear(256, 4096),
    Shape::linear(512, 64),
    Shape::linear(512, 2048),
    Shape::linear(1024, 1),
    Shape::linear(1024, 256),
    Shape::linear(1024, 2048),
    Shape { block: [16, 16, 1], grid: [8, 8, 1] },
    Shape { block: [32, 8, 1], grid: [64, 16, 1] },
    Shape { block: [8, 8, 4], grid: [4, 4, 4] },
    Shape { block: [4, 4, 4], grid: [1, 1, 1] },
];

pub fn sig() -> KernelSig {
    KernelSig::new("geom_mix").buffer("out", Access::ReadWrite).buffer("x", Access::Read).scalar("n", ScalarType::U32).scalar("salt", ScalarType::U32)
}

/// The kernel for workgroups of `block`.
pub fn kernel(block: [u32; 3]) -> PackKernel {
    let wgsl = include_str!("../../kernels/geometry.wgsl")
        .replace("WG_X", &format!("{}u", block[0]))
        .replace("WG_Y", &format!("{}u", block[1]))
        .replace("WG_Z", &format!("{}u", block[2]));
    PackKernel::new(sig(), CudaUnit::Geometry, true, Wgsl::one(wgsl), |cx| {
        let (out, x) = (cx.buffer(0)?, cx.buffer(1)?);
        let (n, salt) = (cx.u32(2)? as usize, cx.u32(3)?);
        let (o, xs) = (out.words(n, true)?, x.words(n, false)?);
        for i in 0..n {
            o.set_u32(i, o.u32(i).wrapping_mul(3).wrapping_add(xs.u32(i)).wrapping_add(salt));
        }
        Ok(())
    })
}

fn dims(v: [u32; 3]) -> String {
    match v {
        [x, 1, 1] => format!("{x}"),
        [x, y, 1] => format!("{x}x{y}"),
        [x, y, z] => format!("{x}x{y}x{z}"),
    }
}

/// One row: ten `geom_mix` ops of `shape` over `shape.threads()` elements each.
pub fn row(shape: Shape, mode: Mode, replays: usize) -> Workload {
    let n = shape.threads();
    let stride = slice_stride(4 * n as u64);
    let mut g = Graph::new();
    let out = g.add_buffer("out", stride * mode.slices() as u64).expect("fresh");
    let x = g.add_buffer("x", 4 * n as u64).expect("fresh");
    let k = g.add_kernel(sig()).expect("fresh");
    let launch = Launch { grid: shape.grid, block: shape.block, shared_bytes: 0 };
    let user = record_ops(&mut g, mode, |op| {
        let args = vec![Arg::Buffer(op_slice(out, mode, op, stride, 4 * n as u64)), whole(x), u32_arg(n), u32_arg(op as u32 + 1)];
        vec![(k, launch, args)]
    });
    let id = format!("geom/{}/b{}/g{}", mode.as_str(), dims(shape.block), dims(shape.grid));
    let mut w = family_row(id, mode.family("geometry serial", "geometry independent"), g, mode, user, vec![kernel(shape.block)], replays);
    w.inits = vec![Some(BufferInit::Random(0x6e0)), Some(BufferInit::Random(0x6e1))];
    w.checked = vec![out];
    w
}

/// The family's rows for `s`.
pub fn rows(s: &Scope) -> Vec<Workload> {
    let shapes: Vec<Shape> = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => SHAPES.to_vec(),
        (BenchBackend::Cuda, true) => vec![SHAPES[0], SHAPES[8], SHAPES[15], SHAPES[16]],
        (BenchBackend::Host, false) => SHAPES.iter().copied().filter(|s| s.threads() <= 1 << 18).collect(),
        (BenchBackend::Host, true) => vec![SHAPES[7], SHAPES[16]],
    };
    Mode::BOTH.iter().flat_map(|&m| shapes.iter().map(move |&sh| row(sh, m, s.replays(1)))).collect()
}
