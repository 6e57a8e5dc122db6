//! tiles: chains whose launches declare per-block tile maps (`ostinato::tiles`, `docs/tiles.md`), so
//! that the planner relates blocks instead of whole nodes. Four rows, one per relation the maps give:
//!
//! - `tiles/rms/…` (block-local): a residual stream of `layers` layers of RMS norm → scale by the
//!   layer's weight vector (every block reads all of it: a stride-0 map) → residual add, over rows of
//!   f32 with a warp per row (8 rows a block, no block barrier): block `b` of each kernel needs block
//!   `b` of the one before, so on CUDA the chain runs as one kernel of its grid (form a);
//! - `tiles/softmax/…` (block-local): an in-place per-row softmax scaled by a per-row constant, `depth`
//!   deep; the constants are about `-n`, so a row's values stay within a few units of -1 and every
//!   layer moves them (a block that missed a layer leaves its rows far from the oracle's);
//! - `tiles/sparse/…` (sparse): a 2-D spread of `F × G` blocks and a gather of `G` blocks, block `j` of
//!   the gather reading the `F` tiles blocks `(0..F, j)` wrote, alternating: on CUDA each gather block
//!   waits for exactly its producer blocks (a tile hand-off, form b);
//! - `tiles/dense/…` (whole nodes, the control row): a u32 GEMV chain `y = W x`, `x = W y`, … in which
//!   every block reads the whole vector the previous node wrote: more producer blocks per consumer block
//!   than a hand-off waits for (`MAX_TILE_DEPS`), so nothing changes and Ostinato must tie.
//!
//! The rms and softmax rows compare f32 with the oracle within a relative L2 error of [`FLOAT_TOL`]: the
//! CUDA kernels and the host twins perform the same roundings in the same order
//! ([`super::tiles_twins`]) but for `e^x`, the hardware's approximate `2^x` (at most 2 ulps off), and a
//! Vulkan driver may fuse a multiply into an add and has its own `exp2`. The u32 rows are exact.

use ostinato::file::BufferInit;
use ostinato::{Arg, Graph, KernelId, Launch, Scalar, Slice, TileMap, TileRange};

use super::tiles_twins::{gather_kernel, gemv_kernel, rms_kernels, softmax_kernel, spread_kernel, ROW_BLOCK};
use super::Scope;
use crate::pack::PackKernel;
use crate::workload::{bytes, Check, Kernels, Workload};
use crate::BenchBackend;

/// The relative L2 error the f32 rows allow: a few roundings' worth over their depth where a Vulkan
/// driver contracts a multiply-add or an `exp2` is 2 ulps off; a block that reads a stale tile moves its
/// rows by far more (`tests::a_stale_block_is_far_outside_the_float_tolerance_and_rounding_far_inside`).
pub const FLOAT_TOL: f64 = 1e-5;

/// Rows per block of the row kernels.
const ROWS_PER_BLOCK: u32 = ROW_BLOCK[1];

/// Block `b` touches rows `R b .. R b + R` of a row-major array of rows of `n` f32 (or u32).
fn rows_map(n: u32) -> TileMap {
    let bytes = 4 * u64::from(ROWS_PER_BLOCK) * u64::from(n);
    TileMap::linear(bytes, bytes).expect("a non-empty row map")
}

/// Every block touches the same `n` words (a broadcast read).
fn broadcast(n: u32) -> TileMap {
    TileMap::new(vec![TileRange::span(0, [0, 0, 0], 4 * u64::from(n))]).expect("a non-empty broadcast map")
}

fn u32s(v: u32) -> Arg {
    Arg::Scalar(Scalar::u32(v))
}

/// A tiled row: its graph, one stream, the pack's kernels bound in kernel-id order.
fn tiled_row(id: String, family: &'static str, graph: Graph, kernels: Vec<PackKernel>, replays: usize) -> Workload {
    Workload { kernels: Kernels::Pack(kernels.into()), ..Workload::new(id, family, graph, replays) }
}

fn add(g: &mut Graph, k: KernelId, launch: Launch, args: &[Arg], tiles: &[(&str, TileMap)]) {
    g.add_launch_tiled(k, launch, args, tiles, &[]).expect("a tiles row's launches are valid by construction");
}

/// The residual stream: `layers` layers of `h = rms_norm(x)`, `h *= w[layer]`, `x += h` over `rows`
/// rows (a multiple of 8) of `n` f32, each node on `rows / 8` blocks of 32 × 8 threads. Every buffer
/// param declares its tile map: the block's rows of x and h, all of the layer's weight slice.
pub fn rms_chain(rows: u32, n: u32, layers: u32, replays: usize) -> Workload {
    assert!(rows % ROWS_PER_BLOCK == 0 && rows > 0 && n > 0, "rms rows: whole blocks of rows");
    let mut g = Graph::new();
    let elems = 4 * u64::from(rows) * u64::from(n);
    let x = g.add_buffer("x", elems).expect("fresh");
    let h = g.add_buffer("h", elems).expect("fresh");
    let w = g.add_buffer("w", 4 * u64::from(n) * u64::from(layers)).expect("fresh");
    let kernels = rms_kernels();
    let [kn, ks, ka] = [0, 1, 2].map(|i| g.add_kernel(kernels[i].sig.clone()).expect("fresh"));
    let launch = Launch::new([rows / ROWS_PER_BLOCK, 1, 1], ROW_BLOCK);
    let (rmap, dims) = (rows_map(n), [u32s(rows), u32s(n)]);
    for l in 0..layers {
        let wl = Arg::Buffer(Slice { buffer: w, offset: 4 * u64::from(n) * u64::from(l), len: 4 * u64::from(n) });
        add(&mut g, kn, launch, &[Arg::Whole(h), Arg::Whole(x), dims[0], dims[1], Arg::Scalar(Scalar::f32(1e-5))], &[("h", rmap.clone()), ("x", rmap.clone())]);
        add(&mut g, ks, launch, &[Arg::Whole(h), wl, dims[0], dims[1]], &[("h", rmap.clone()), ("w", broadcast(n))]);
        add(&mut g, ka, launch, &[Arg::Whole(x), Arg::Whole(h), dims[0], dims[1]], &[("x", rmap.clone()), ("h", rmap.clone())]);
    }
    let mut r = tiled_row(format!("tiles/rms/r{rows}x{n}/l{layers}"), "tiles block-local", g, kernels.to_vec(), replays);
    r.inits = vec![Some(BufferInit::RandomF32 { seed: 0x71e0, scale: 1.0 }), Some(BufferInit::Zero), Some(BufferInit::RandomF32 { seed: 0x71e1, scale: 1.0 })];
    r.checked = vec![x, h];
    r.check = Check::RelL2(FLOAT_TOL);
    r
}

/// Per-row constants about `-n` (`-n·a`, `a` in [0.9, 1.1]): `x ↦ c · softmax(x)` then keeps a row's
/// values in a band of a few units below zero, alternating which elements are largest, so every layer
/// moves them.
fn softmax_constants(rows: u32, n: u32) -> Vec<u8> {
    let mut r = ostinato::rng::XorShift64::seeded(0x50f7);
    (0..rows).flat_map(|_| (-(n as f32) * (0.9 + 0.2 * r.below(1 << 20) as f32 / (1 << 20) as f32)).to_le_bytes()).collect()
}

/// `depth` in-place softmaxes of `rows` rows (a multiple of 8) of `n` f32, each scaled by its row's
/// constant: on `rows / 8` blocks of 32 × 8 threads, maps on x (the block's rows) and on the constants.
pub fn softmax_chain(rows: u32, n: u32, depth: u32, replays: usize) -> Workload {
    assert!(rows % ROWS_PER_BLOCK == 0 && rows > 0 && n > 0, "softmax rows: whole blocks of rows");
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * u64::from(rows) * u64::from(n)).expect("fresh");
    let c = g.add_buffer("c", 4 * u64::from(rows)).expect("fresh");
    let kernel = softmax_kernel();
    let k = g.add_kernel(kernel.sig.clone()).expect("fresh");
    let launch = Launch::new([rows / ROWS_PER_BLOCK, 1, 1], ROW_BLOCK);
    for _ in 0..depth {
        add(&mut g, k, launch, &[Arg::Whole(x), Arg::Whole(c), u32s(rows), u32s(n)], &[("x", rows_map(n)), ("c", rows_map(1))]);
    }
    let mut r = tiled_row(format!("tiles/softmax/r{rows}x{n}/d{depth}"), "tiles block-local", g, vec![kernel], replays);
    r.inits = vec![Some(BufferInit::RandomF32 { seed: 0x50f8, scale: 2.0 }), None];
    r.data = vec![(c, bytes(softmax_constants(rows, n)))];
    r.checked = vec![x];
    r.check = Check::RelL2(FLOAT_TOL);
    r
}

/// `rounds` rounds of a spread over a grid of `fan × tiles` blocks of `threads` threads (block `(i, j)`
/// updates tile `i + fan·j` of x from tile `j` of y) and a gather of `tiles` blocks (block `j` updates
/// tile `j` of y from x's tiles `fan·j ..`): `2 · rounds` dependent nodes, u32, exact.
pub fn sparse_chain(fan: u32, tiles: u32, threads: u32, rounds: u32, replays: usize) -> Workload {
    let mut g = Graph::new();
    let tile = 4 * u64::from(threads);
    let x = g.add_buffer("x", tile * u64::from(fan) * u64::from(tiles)).expect("fresh");
    let y = g.add_buffer("y", tile * u64::from(tiles)).expect("fresh");
    let (spread, gather) = (spread_kernel(threads), gather_kernel(threads));
    let (ks, kg) = (g.add_kernel(spread.sig.clone()).expect("fresh"), g.add_kernel(gather.sig.clone()).expect("fresh"));
    let spread_tiles = [
        ("x", TileMap::new(vec![TileRange::span(0, [tile, tile * u64::from(fan), 0], tile)]).expect("a tile")),
        ("y", TileMap::new(vec![TileRange::span(0, [0, tile, 0], tile)]).expect("a tile")),
    ];
    let gather_tiles =
        [("y", TileMap::linear(tile, tile).expect("a tile")), ("x", TileMap::linear(tile * u64::from(fan), tile * u64::from(fan)).expect("tiles"))];
    for r in 0..rounds {
        add(&mut g, ks, Launch::new([fan, tiles, 1], [threads, 1, 1]), &[Arg::Whole(x), Arg::Whole(y), u32s(r + 1)], &spread_tiles);
        add(&mut g, kg, Launch::linear(tiles, threads), &[Arg::Whole(y), Arg::Whole(x), u32s(fan)], &gather_tiles);
    }
    let id = format!("tiles/sparse/p{}c{tiles}/d{}", fan * tiles, 2 * rounds);
    let mut w = tiled_row(id, "tiles sparse", g, vec![spread, gather], replays);
    w.inits = vec![Some(BufferInit::Random(0x5a11)), Some(BufferInit::Random(0x5a12))];
    w.checked = vec![x, y];
    w
}

/// `depth` GEMVs `y = W x`, `x = W y`, … of a `rows × rows` u32 matrix (wrapping), on `rows / 8` blocks
/// of 32 × 8 threads: each block writes its 8 rows and reads all of the vector (a stride-0 map).
pub fn dense_chain(rows: u32, depth: u32, replays: usize) -> Workload {
    assert!(rows % ROWS_PER_BLOCK == 0 && rows > 0, "dense rows: whole blocks of rows");
    let mut g = Graph::new();
    let w = g.add_buffer("w", 4 * u64::from(rows) * u64::from(rows)).expect("fresh");
    let x = g.add_buffer("x", 4 * u64::from(rows)).expect("fresh");
    let y = g.add_buffer("y", 4 * u64::from(rows)).expect("fresh");
    let kernel = gemv_kernel();
    let k = g.add_kernel(kernel.sig.clone()).expect("fresh");
    let launch = Launch::new([rows / ROWS_PER_BLOCK, 1, 1], ROW_BLOCK);
    let maps = [("y", rows_map(1)), ("w", rows_map(rows)), ("x", broadcast(rows))];
    for i in 0..depth {
        let (out, inp) = if i % 2 == 0 { (y, x) } else { (x, y) };
        add(&mut g, k, launch, &[Arg::Whole(out), Arg::Whole(w), Arg::Whole(inp), u32s(rows), u32s(rows)], &maps);
    }
    let mut r = tiled_row(format!("tiles/dense/r{rows}/d{depth}"), "tiles dense", g, vec![kernel], replays);
    r.inits = vec![Some(BufferInit::Random(0xde05)), Some(BufferInit::Random(0xde06)), Some(BufferInit::Zero)];
    r.checked = vec![x, y];
    r
}

/// The family's rows for `s`: on the GPU the four at sizes where one replay takes tens of µs to a
/// millisecond (`--quick`: the residual stream and the sparse chain); on the host smaller ones (the
/// dense row keeps its 128 blocks, so that its relation stays whole-node).
pub fn rows(s: &Scope) -> Vec<Workload> {
    let r = s.replays(1);
    match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => {
            vec![rms_chain(4096, 2048, 16, r), softmax_chain(4096, 1024, 16, r), sparse_chain(16, 64, 256, 100, r), dense_chain(1024, 40, r)]
        }
        (BenchBackend::Cuda, true) => vec![rms_chain(4096, 2048, 16, r), sparse_chain(16, 64, 256, 100, r)],
        (BenchBackend::Host, false) => {
            vec![rms_chain(512, 512, 16, r), softmax_chain(512, 512, 16, r), sparse_chain(16, 64, 256, 20, r), dense_chain(1024, 20, r)]
        }
        (BenchBackend::Host, true) => vec![rms_chain(64, 256, 4, r), softmax_chain(64, 256, 4, r), sparse_chain(4, 16, 64, 10, r), dense_chain(1024, 6, r)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::{self, Arm, ArmKind, HostArm};
    use crate::matrix::{compare, init_bytes};
    use ostinato::tiles::{DenseReason, TileRelation};
    use ostinato::{NodeId, Plan};

    fn scope(backend: BenchBackend, quick: bool) -> Scope<'static> {
        Scope { backend, quick, grid_blocks: None, fan_widths: None, replays: None }
    }

    /// Every frontier predecessor of every node with its relation.
    fn frontier(plan: &Plan) -> Vec<(NodeId, NodeId, TileRelation)> {
        (0..plan.node_count() as u32)
            .map(NodeId)
            .flat_map(|v| plan.hazard_preds(v).iter().map(move |&u| (NodeId(u), v, plan.tile_relation(NodeId(u), v))).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn the_tiled_rows_relate_their_blocks_as_their_ids_say() {
        let mut rows = rows(&scope(BenchBackend::Cuda, false));
        rows.extend(super::super::grid::rows(&scope(BenchBackend::Cuda, false)).into_iter().filter(|w| !w.id.ends_with("/b1")));
        assert_eq!(rows.len(), 4 + 6);
        for w in &rows {
            let plan = Plan::compile(&w.graph).unwrap();
            let f = frontier(&plan);
            assert!(!f.is_empty(), "{}", w.id);
            let g = plan.graph();
            let name = |v: NodeId| match &g.node(v).op {
                ostinato::NodeOp::Kernel { kernel, .. } => g.kernel(*kernel).name.clone(),
                _ => String::new(),
            };
            for (u, v, r) in &f {
                let at = format!("{}: node {u} ({}) → node {v} ({}): {}", w.id, name(*u), name(*v), r.describe());
                match (w.id.split('/').nth(1).unwrap_or_default(), name(*u).as_str(), name(*v).as_str()) {
                    ("serial" | "indep" | "rms" | "softmax", _, _) => assert!(r.is_block_local(), "{at}"),
                    // A gather block waits for the 16 spread blocks that wrote (and read) its tiles.
                    ("sparse", "tile_spread", "tile_gather") => {
                        assert!(matches!(r, TileRelation::Sparse(d) if d.max_per_consumer() == 16 && d.pairs() == 1024), "{at}")
                    }
                    // A spread block waits for the one gather block whose tile of y it reads.
                    ("sparse", "tile_gather", "tile_spread") => {
                        assert!(matches!(r, TileRelation::Sparse(d) if d.max_per_consumer() == 1 && d.pairs() == 1024), "{at}")
                    }
                    ("sparse", a, b) if a == b => assert!(r.is_block_local(), "{at}"),
                    // The vector a node reads was written by all of the previous node's blocks: more than a
                    // hand-off waits for. (The vector it rewrites, two nodes back, is block-local.)
                    ("dense", _, _) if v.0 == u.0 + 1 => assert!(matches!(r, TileRelation::Dense(DenseReason::TooDense { .. })), "{at}"),
                    ("dense", _, _) => assert!(v.0 == u.0 + 2 && r.is_block_local(), "{at}"),
                    _ => panic!("{at}: unexpected"),
                }
            }
        }
    }

    #[test]
    fn every_scope_has_tiles_rows_and_the_host_arms_match_the_oracle_on_the_quick_ones() {
        for (backend, quick) in [(BenchBackend::Cuda, false), (BenchBackend::Cuda, true), (BenchBackend::Host, false), (BenchBackend::Host, true)] {
            assert!(!rows(&scope(backend, quick)).is_empty(), "{backend:?} quick={quick}");
        }
        for w in rows(&scope(BenchBackend::Host, true)) {
            let init = init_bytes(&w);
            let want = arms::oracle(&w, &init).unwrap_or_else(|e| panic!("{}: {e}", w.id));
            let mut arm = HostArm::new(&w, ArmKind::OstinatoHost, &init).unwrap();
            for _ in 0..2 {
                let s = arm.sample(&w, &init).unwrap_or_else(|e| panic!("{}: {e}", w.id));
                compare(&w.check, &init, &want, &s.outputs).unwrap_or_else(|e| panic!("{}: {e}", w.id));
            }
        }
    }

    /// `w` with node `node` launched on one block fewer: that block's rows miss the node.
    fn one_block_short(w: &Workload, node: usize) -> Workload {
        let g = &w.graph;
        let mut out = g.without_nodes();
        for (v, n) in g.nodes().iter().enumerate() {
            let ostinato::NodeOp::Kernel { kernel, launch, args } = &n.op else { unreachable!("a tiles row launches kernels") };
            let mut launch = *launch;
            if v == node {
                launch.grid[0] -= 1;
            }
            let tiles: Vec<(&str, TileMap)> = n.tiles.iter().map(|t| (g.kernel(*kernel).params[t.param].name.as_str(), t.map.clone())).collect();
            out.add_launch_tiled(*kernel, launch, args, &tiles, &n.after).unwrap();
        }
        Workload {
            graph: out,
            kernels: w.kernels.clone(),
            inits: w.inits.clone(),
            data: w.data.clone(),
            checked: w.checked.clone(),
            ..Workload::new(w.id.clone(), w.family, Graph::new(), w.replays)
        }
    }

    /// The relative L2 error of `got` against `want` over every checked buffer.
    fn rel_l2(want: &[Vec<u8>], got: &[Vec<u8>]) -> f64 {
        let f = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect::<Vec<f64>>();
        let (mut num, mut den) = (0f64, 0f64);
        for (w, g) in want.iter().zip(got) {
            for (a, b) in f(w).iter().zip(f(g)) {
                num += (a - b) * (a - b);
                den += a * a;
            }
        }
        (num / den).sqrt()
    }

    #[test]
    fn a_stale_block_is_far_outside_the_float_tolerance_and_rounding_far_inside() {
        use super::super::tiles_twins::{rms_kernels_with, softmax_kernel_with};
        // 512 blocks as on the GPU (short rows keep the host fast); the GPU rows' full row length for the
        // rounding comparison, on fewer rows. Rounding: the RMS twins with contracted multiply-adds, the
        // softmax twin with every e^x 2 ulps off (the hardware's ex2.approx bound), alternating in sign.
        for (w, rounded) in [
            (rms_chain(4096, 64, 16, 1), rms_kernels_with(true).to_vec()),
            (softmax_chain(4096, 64, 16, 1), vec![softmax_kernel_with(2)]),
            (rms_chain(64, 2048, 16, 1), rms_kernels_with(true).to_vec()),
            (softmax_chain(64, 1024, 16, 1), vec![softmax_kernel_with(2)]),
        ] {
            let init = init_bytes(&w);
            let want = arms::oracle(&w, &init).unwrap();
            let fused = Workload { kernels: Kernels::Pack(rounded.into()), ..one_block_short(&w, usize::MAX) };
            let rounding = rel_l2(&want, &arms::oracle(&fused, &init).unwrap());
            assert!(rounding > 0.0 && rounding < FLOAT_TOL / 10.0, "{}: the rounding moves it by {rounding:e}", w.id);
            let nodes = w.graph.nodes().len();
            for node in [0, nodes / 2, nodes - 2] {
                let stale = rel_l2(&want, &arms::oracle(&one_block_short(&w, node), &init).unwrap());
                assert!(stale > 10.0 * FLOAT_TOL, "{}: the last block missing node {node} moves it by {stale:e} only", w.id);
                eprintln!("{}: rounding {rounding:.2e}, the last block missing node {node} {stale:.2e}", w.id);
            }
        }
    }
}
