//! The tile relation between two nodes against brute force: for every consumer block and every producer
//! block, whether some pair of their conflicting params touches one byte in common (bytes enumerated one
//! by one). Random maps (several ranges, rows, strides in x, y and z, zero strides), grids up to 3-D,
//! views at any offset, every access mode.

use ostinato::tiles::{block_at, block_count, relation, DenseReason, TileDeps, TileMap, TileRange, TileRelation, MAX_TILE_DEPS};
use ostinato::{hazard_between, Access, Arg, Graph, KernelSig, Launch, NodeId, Slice};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Side {
    grid: [u32; 3],
    /// (offset in the root, length, access, map ranges or none)
    params: Vec<(u64, u64, Access, Option<Vec<TileRange>>)>,
}

const ROOT: u64 = 2048;

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::Read), Just(Access::Write), Just(Access::ReadWrite)]
}

/// A range that fits a slice of `len` bytes for every block of `grid`, or none.
fn range(grid: [u32; 3], len: u64) -> impl Strategy<Value = Option<TileRange>> {
    (0u64..64, [0u64..96, 0u64..200, 0u64..300], 1u64..48, 1u64..4, 0u64..80).prop_map(move |(base, stride, l, rows, extra)| {
        let r = TileRange::span(base, stride, l).with_rows(rows, l + extra);
        let m = TileMap::new(vec![r]).ok()?;
        m.check_within(grid, len).ok().map(|_| r)
    })
}

fn side() -> impl Strategy<Value = Side> {
    ([1u32..7, 1u32..4, 1u32..3], 1usize..3).prop_flat_map(|(grid, n)| {
        let param = (0u64..ROOT / 2, 64u64..ROOT / 2, access(), 0usize..4, proptest::bool::weighted(0.9)).prop_flat_map(move |(off, len, a, k, mapped)| {
            proptest::collection::vec(range(grid, len), k.max(1)).prop_map(move |rs| {
                let rs: Vec<TileRange> = rs.into_iter().flatten().collect();
                (off, len, a, (mapped && !rs.is_empty()).then_some(rs))
            })
        });
        proptest::collection::vec(param, n).prop_map(move |params| Side { grid, params })
    })
}

/// Records the two sides as two launches over views of one root; `None` where the launch is refused
/// (two params of one launch overlapping with a write).
fn record(a: &Side, b: &Side) -> Option<(Graph, NodeId, NodeId)> {
    let mut g = Graph::new();
    let root = g.add_buffer("root", ROOT).ok()?;
    let mut nodes = Vec::new();
    for (si, s) in [a, b].into_iter().enumerate() {
        let mut sig = KernelSig::new(format!("k{si}"));
        for (pi, p) in s.params.iter().enumerate() {
            sig = sig.buffer(format!("p{pi}"), p.2);
        }
        let k = g.add_kernel(sig).ok()?;
        let mut args = Vec::new();
        let mut tiles = Vec::new();
        let names: Vec<String> = (0..s.params.len()).map(|pi| format!("p{pi}")).collect();
        for (pi, p) in s.params.iter().enumerate() {
            let v = g.add_view(format!("v{si}_{pi}"), root, p.0, p.1).ok()?;
            args.push(Arg::Buffer(Slice { buffer: v, offset: 0, len: p.1 }));
            if let Some(rs) = &p.3 {
                tiles.push((names[pi].as_str(), TileMap::new(rs.clone()).ok()?));
            }
        }
        nodes.push(g.add_launch_tiled(k, Launch::new(s.grid, [32, 1, 1]), &args, &tiles, &[]).ok()?);
    }
    Some((g, nodes[0], nodes[1]))
}

/// The root bytes block `blk` of side `s` touches through param `p`.
fn bytes(s: &Side, p: usize, blk: [u32; 3]) -> Vec<u64> {
    let (off, len, _, ref map) = s.params[p];
    match map {
        None => (off..off + len).collect(),
        Some(rs) => {
            let m = TileMap::new(rs.clone()).unwrap();
            (0..len).filter(|&o| m.touches(blk, o)).map(|o| off + o).collect()
        }
    }
}

/// For each consumer block, the producer blocks it depends on, by enumeration.
fn brute(a: &Side, b: &Side) -> Vec<Vec<u32>> {
    (0..block_count(b.grid))
        .map(|j| {
            let bj = block_at(b.grid, j);
            (0..block_count(a.grid) as u32)
                .filter(|&i| {
                    let ai = block_at(a.grid, u64::from(i));
                    (0..a.params.len()).any(|pa| {
                        (0..b.params.len()).any(|pb| {
                            !hazard_between(a.params[pa].2, b.params[pb].2).is_empty() && {
                                let x = bytes(a, pa, ai);
                                bytes(b, pb, bj).iter().any(|y| x.contains(y))
                            }
                        })
                    })
                })
                .collect()
        })
        .collect()
}

/// Two sides: independent, or the consumer on the producer's grid with its maps (each range's base moved
/// by a few bytes in some cases), so block-local and near-block-local relations are common.
fn pair() -> impl Strategy<Value = (Side, Side)> {
    (side(), side(), 0u8..3, proptest::collection::vec((access(), 0u64..9), 4)).prop_map(|(a, b, mode, tweaks)| {
        if mode == 0 {
            return (a, b);
        }
        let mut c = a.clone();
        for (p, (acc, shift)) in c.params.iter_mut().zip(&tweaks) {
            p.2 = *acc;
            if mode == 2 {
                if let Some(rs) = &mut p.3 {
                    for r in rs.iter_mut() {
                        r.base += shift * 4;
                    }
                    if TileMap::new(rs.clone()).unwrap().check_within(a.grid, p.1).is_err() {
                        p.3 = None;
                    }
                }
            }
        }
        (a, c)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    #[test]
    fn the_tile_relation_is_exactly_the_bytes_blocks_share((a, b) in pair()) {
        let Some((g, u, v)) = record(&a, &b) else { return Ok(()) };
        let want = brute(&a, &b);
        let unmapped = |s: &Side| s.params.iter().any(|p| p.3.is_none());
        let rel = relation(&g, u, v);
        match rel {
            TileRelation::BlockLocal => {
                prop_assert_eq!(a.grid, b.grid);
                for (j, w) in want.iter().enumerate() {
                    prop_assert!(w.iter().all(|&i| i as usize == j), "block {} depends on {:?}", j, w);
                }
            }
            TileRelation::Sparse(d) => {
                prop_assert_eq!(d.consumers(), want.len());
                for (j, w) in want.iter().enumerate() {
                    prop_assert_eq!(d.of(j), w.as_slice(), "consumer block {}", j);
                }
                let local = a.grid == b.grid && want.iter().enumerate().all(|(j, w)| w.iter().all(|&i| i as usize == j));
                prop_assert!(!local, "a block-local relation reported as sparse");
            }
            TileRelation::Dense(DenseReason::NoMap { .. }) => prop_assert!(unmapped(&a) || unmapped(&b)),
            TileRelation::Dense(DenseReason::TooDense { block, producers }) => {
                prop_assert!(want.iter().any(|w| w.len() > MAX_TILE_DEPS));
                prop_assert_eq!(want[block as usize].len(), producers);
            }
            TileRelation::Dense(DenseReason::Explicit) => prop_assert!(want.iter().all(|w| w.is_empty())),
            TileRelation::Dense(r) => prop_assert!(false, "unexpected {:?}", r),
        }
    }
}

/// A map's blocks over a grid, with the bytes of each (within `len` bytes of the slice).
fn block_bytes(m: &TileMap, grid: [u32; 3], len: u64) -> Vec<Vec<u64>> {
    (0..block_count(grid)).map(|i| (0..len).filter(|&o| m.touches(block_at(grid, i), o)).collect()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    /// `blocks_disjoint` (the relation's closed form for a map against itself) claims disjoint blocks
    /// only where no two blocks share a byte, counted byte by byte.
    #[test]
    fn blocks_claimed_disjoint_share_no_byte(grid in [1u32..6, 1u32..4, 1u32..3], ranges in proptest::collection::vec(range([5, 3, 2], 2048), 1..4)) {
        let rs: Vec<TileRange> = ranges.into_iter().flatten().collect();
        let Ok(m) = TileMap::new(rs) else { return Ok(()) };
        prop_assume!(m.check_within(grid, 2048).is_ok());
        if m.blocks_disjoint(grid) {
            let bytes = block_bytes(&m, grid, 2048);
            for (i, a) in bytes.iter().enumerate() {
                for b in &bytes[i + 1..] {
                    prop_assert!(a.iter().all(|x| !b.contains(x)), "blocks share a byte: {:?}", m);
                }
            }
        }
    }
}

#[test]
fn row_major_rows_and_tiles_are_proven_disjoint_and_overlaps_are_not() {
    let span = |base, stride, len| TileRange::span(base, stride, len);
    // Rows of a row-major array, one per block, of any length up to the stride.
    assert!(TileMap::linear(1024, 1024).unwrap().blocks_disjoint([8192, 1, 1]));
    assert!(TileMap::linear(1024, 512).unwrap().blocks_disjoint([64, 1, 1]));
    // 16 × 16-float tiles of a 64 × 64-float row-major array: x steps 64 bytes, y 16 rows of 256.
    let tile = TileMap::new(vec![span(0, [64, 4096, 0], 64).with_rows(16, 256)]).unwrap();
    assert!(tile.blocks_disjoint([4, 4, 1]));
    // Two ranges moving together (a row and its trailing flags), inside one stride.
    assert!(TileMap::new(vec![span(0, [1024, 0, 0], 1000), span(1000, [1024, 0, 0], 24)]).unwrap().blocks_disjoint([16, 1, 1]));
    // A halo (a range past the stride), ranges with different strides, a zero stride: not proven.
    assert!(!TileMap::new(vec![span(0, [1024, 0, 0], 1024), span(1024, [1024, 0, 0], 4)]).unwrap().blocks_disjoint([16, 1, 1]));
    assert!(!TileMap::new(vec![span(0, [1024, 0, 0], 512), span(512, [512, 0, 0], 4)]).unwrap().blocks_disjoint([16, 1, 1]));
    assert!(!TileMap::linear(0, 64).unwrap().blocks_disjoint([2, 1, 1]));
    assert!(TileMap::linear(0, 64).unwrap().blocks_disjoint([1, 1, 1]));
    // y's stride inside x's reach: blocks (4, 0) and (0, 1) would meet.
    assert!(!TileMap::new(vec![span(0, [64, 128, 0], 64)]).unwrap().blocks_disjoint([4, 2, 1]));
}

#[test]
fn a_chain_of_row_kernels_is_block_local_and_a_shifted_read_is_sparse() {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64 * 1024).unwrap();
    let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
    let row = TileMap::linear(1024, 1024).unwrap();
    let a = g.add_launch_tiled(k, Launch::linear(64, 256), &[Arg::Whole(x)], &[("x", row.clone())], &[]).unwrap();
    let b = g.add_launch_tiled(k, Launch::linear(64, 256), &[Arg::Whole(x)], &[("x", row)], &[]).unwrap();
    assert_eq!(relation(&g, a, b), TileRelation::BlockLocal);
    // Each block also reads its right neighbour's first word: a halo of one.
    let halo = TileMap::new(vec![TileRange::span(0, [1024, 0, 0], 1024), TileRange::span(1024, [1024, 0, 0], 4)]).unwrap();
    let r = g.add_kernel(KernelSig::new("halo").buffer("x", Access::Read)).unwrap();
    let c = g.add_launch_tiled(r, Launch::linear(63, 256), &[Arg::Whole(x)], &[("x", halo)], &[]).unwrap();
    match relation(&g, b, c) {
        TileRelation::Sparse(d) => {
            assert_eq!(d.consumers(), 63);
            assert_eq!(d.of(0), &[0, 1]);
            assert_eq!(d.of(62), &[62, 63]);
        }
        other => panic!("{other:?}"),
    }
    // Without a map on the consumer, whole nodes.
    let w = g.add_launch(k, Launch::linear(64, 256), &[Arg::Whole(x)], &[]).unwrap();
    assert!(matches!(relation(&g, c, w), TileRelation::Dense(DenseReason::NoMap { .. })));
}

/// A consumer block that reads only the row before its own depends on an earlier block: sparse, never
/// block-local, whether the offsets are solved once (one grid, one slice) or the relation is searched
/// block by block (slices that differ, grids that differ).
#[test]
fn a_read_of_the_row_before_is_sparse_on_either_path() {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 65 * 1024).unwrap();
    let w = g.add_kernel(KernelSig::new("row").buffer("x", Access::Write)).unwrap();
    let r = g.add_kernel(KernelSig::new("rows").buffer("x", Access::Read)).unwrap();
    let row = TileMap::linear(1024, 1024).unwrap();
    let next_row = TileMap::new(vec![TileRange::span(1024, [1024, 0, 0], 1024)]).unwrap();
    let (head, tail) = (Slice { buffer: x, offset: 0, len: 64 * 1024 }, Slice { buffer: x, offset: 1024, len: 64 * 1024 });
    let before = |d: &TileDeps| {
        assert_eq!(d.consumers(), 64);
        assert_eq!(d.of(0), &[] as &[u32]);
        assert_eq!(d.of(1), &[0]);
        assert_eq!(d.of(63), &[62]);
    };
    // Producer block p writes root row p + 1, consumer block b reads root row b: by the maps on one
    // slice, then by the slices.
    let p = g.add_launch_tiled(w, Launch::linear(64, 256), &[Arg::Whole(x)], &[("x", next_row)], &[]).unwrap();
    let c = g.add_launch_tiled(r, Launch::linear(64, 256), &[Arg::Whole(x)], &[("x", row.clone())], &[]).unwrap();
    match relation(&g, p, c) {
        TileRelation::Sparse(d) => before(&d),
        other => panic!("one slice: {other:?}"),
    }
    let p = g.add_launch_tiled(w, Launch::linear(64, 256), &[Arg::Buffer(tail)], &[("x", row.clone())], &[]).unwrap();
    let c = g.add_launch_tiled(r, Launch::linear(64, 256), &[Arg::Buffer(head)], &[("x", row)], &[]).unwrap();
    match relation(&g, p, c) {
        TileRelation::Sparse(d) => before(&d),
        other => panic!("two slices: {other:?}"),
    }
    // Consumer block b reads root rows 2b and 2b + 1, on half the grid.
    let c = g.add_launch_tiled(r, Launch::linear(32, 256), &[Arg::Buffer(head)], &[("x", TileMap::linear(2048, 2048).unwrap())], &[]).unwrap();
    match relation(&g, p, c) {
        TileRelation::Sparse(d) => {
            assert_eq!(d.of(0), &[0]);
            assert_eq!(d.of(1), &[1, 2]);
            assert_eq!(d.of(31), &[61, 62]);
        }
        other => panic!("half the grid: {other:?}"),
    }
}

#[test]
fn a_tile_outside_its_slice_a_scalar_param_and_a_second_map_are_refused() {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4096).unwrap();
    let k = g.add_kernel(KernelSig::new("k").buffer("x", Access::Read).scalar("n", ostinato::ScalarType::U32)).unwrap();
    let args = [Arg::Whole(x), Arg::Scalar(ostinato::Scalar::u32(1))];
    let m = TileMap::linear(1024, 1024).unwrap();
    let e = g.add_launch_tiled(k, Launch::linear(5, 32), &args, &[("x", m.clone())], &[]).unwrap_err();
    assert!(e.to_string().contains("node 0, param `k.x`: tile map: tile range 0: block [4, 0, 0]"), "{e}");
    let e = g.add_launch_tiled(k, Launch::linear(4, 32), &args, &[("n", m.clone())], &[]).unwrap_err();
    assert!(e.to_string().contains("belongs to a buffer param"), "{e}");
    let e = g.add_launch_tiled(k, Launch::linear(4, 32), &args, &[("x", m.clone()), ("x", m.clone())], &[]).unwrap_err();
    assert!(e.to_string().contains("two tile maps"), "{e}");
    let e = g.add_launch_tiled(k, Launch::linear(4, 32), &args, &[("y", m)], &[]).unwrap_err();
    assert!(e.to_string().contains("no such param"), "{e}");
    assert!(g.nodes().is_empty(), "nothing half-recorded");
}

#[test]
fn graph_files_declare_tile_maps_on_params_and_args() {
    let src = r#"
[[buffer]]
name = "x"
size = 8192
[[kernel]]
name = "row"
params = [{ name = "x", access = "read_write", tile = { stride = [1024], len = 1024 } }, { name = "n", scalar = "u32" }]
[[node]]
kernel = "row"
grid = [8]
block = [256]
args = { x = "x", n = 2048 }
[[node]]
kernel = "row"
grid = [4]
block = [256]
args = { x = { buffer = "x", tile = [{ stride = [2048], len = 1024 }, { base = 1024, stride = [2048, 0, 0], len = 512, rows = 2, pitch = 512 }] }, n = 2048 }
[[node]]
kernel = "row"
grid = [8]
block = [256]
args = { x = { buffer = "x", tile = "none" }, n = 2048 }
"#;
    let f = ostinato::file::parse(src, std::path::Path::new("t.toml"), &["host"]).unwrap();
    let g = &f.graph;
    assert_eq!(g.tile_map(NodeId(0), 0), Some(&TileMap::linear(1024, 1024).unwrap()));
    assert_eq!(g.tile_map(NodeId(1), 0).map(|m| m.ranges().len()), Some(2));
    assert_eq!(g.tile_map(NodeId(1), 0).unwrap().ranges()[1], TileRange::span(1024, [2048, 0, 0], 512).with_rows(2, 512));
    assert_eq!(g.tile_map(NodeId(2), 0), None);
    let bad = |edit: &str, want: &str| {
        let e =
            ostinato::file::parse(&src.replace("grid = [8]\nblock = [256]\nargs = { x = \"x\", n = 2048 }", edit), std::path::Path::new("t.toml"), &["host"])
                .unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    };
    bad("grid = [9]\nblock = [256]\nargs = { x = \"x\", n = 2048 }", "t.toml:8: node 0, param `row.x`: tile map: tile range 0: block [8, 0, 0]");
    bad("grid = [8]\nblock = [256]\nargs = { x = { buffer = \"x\", tile = { len = 4 } }, n = 2048 }", "needs `stride`");
    bad("grid = [8]\nblock = [256]\nargs = { x = { buffer = \"x\", tile = { stride = [4], len = 4, step = 1 } }, n = 2048 }", "unknown key `step`");
    bad("grid = [8]\nblock = [256]\nargs = { x = { buffer = \"x\", tile = 3 }, n = 2048 }", "a range table, a list of them");
}
