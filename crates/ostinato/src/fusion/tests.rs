//! The core's fusion rules against hand-built plans.

use super::*;
use crate::{Access, Graph, Launch, Scalar, ScalarType, Slice};

/// `lanes` chains of `len` one-block nodes on their own buffers, recorded interleaved.
fn chains(lanes: usize, len: usize) -> Plan {
    let mut g = Graph::new();
    let bufs: Vec<_> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 1024).unwrap()).collect();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for _ in 0..len {
        for &b in &bufs {
            g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        }
    }
    Plan::compile(&g).unwrap()
}

fn every(plan: &Plan) -> Vec<Option<Fusable>> {
    vec![Some(Fusable { key: FuseKey { block: [256, 1, 1], grid: [1, 1, 1], source: 0 }, uses_shared: false, alone: false }); plan.node_count()]
}

/// A chain of `len` nodes of 16 blocks over one buffer; node `halo` (if any) also reads its right
/// neighbour block's first word; tile maps everywhere unless `bare`.
fn block_chain(len: usize, halo: Option<usize>, bare: Option<usize>) -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 16 * 1024 + 4).unwrap();
    let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
    let row = crate::TileMap::linear(1024, 1024).unwrap();
    let wide = crate::TileMap::new(vec![crate::TileRange::span(0, [1024, 0, 0], 1028)]).unwrap();
    for i in 0..len {
        let map = if halo == Some(i) { wide.clone() } else { row.clone() };
        let tiles = if bare == Some(i) { vec![] } else { vec![("x", map)] };
        g.add_launch_tiled(k, Launch::linear(16, 256), &[Arg::Whole(x)], &tiles, &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

fn every_multi(plan: &Plan) -> Vec<Option<Fusable>> {
    vec![Some(Fusable { key: FuseKey { block: [256, 1, 1], grid: [16, 1, 1], source: 0 }, uses_shared: false, alone: false }); plan.node_count()]
}

#[test]
fn a_block_local_chain_of_many_blocks_fuses_and_a_cross_block_dependency_cuts_it() {
    let plan = block_chain(8, None, None);
    let gs = groups(&plan, &every_multi(&plan), FusionMode::Auto);
    assert_eq!(gs.iter().map(|g| (g.lanes.len(), g.len())).collect::<Vec<_>>(), [(1, 8)]);
    // Node 3 reads a word of the next block's tile: node 4 (which writes it) may not follow it
    // block by block, nor node 3 its predecessor (which wrote that word in another block).
    let plan = block_chain(8, Some(3), None);
    let gs = groups(&plan, &every_multi(&plan), FusionMode::Auto);
    assert_eq!(gs.iter().map(Group::len).collect::<Vec<_>>(), [3, 4]);
    // A node without a map orders as a whole node: it fuses with neither neighbour.
    let plan = block_chain(8, None, Some(5));
    let gs = groups(&plan, &every_multi(&plan), FusionMode::On);
    assert_eq!(gs.iter().map(Group::len).collect::<Vec<_>>(), [5, 2]);
}

/// Every launch of `plan` fusable, keyed by its own grid and block (the components' tests too).
pub(super) fn keyed(plan: &Plan) -> Vec<Option<Fusable>> {
    plan.graph()
        .nodes()
        .iter()
        .map(|n| match &n.op {
            crate::NodeOp::Kernel { launch, .. } => {
                Some(Fusable { key: FuseKey { block: launch.block, grid: launch.grid, source: 0 }, uses_shared: false, alone: false })
            }
            _ => None,
        })
        .collect()
}

/// `auto` puts side by side the independent launches of many blocks that are runs of their own, of
/// at most [`AUTO_MAX_SIDE_BY_SIDE_THREADS`] threads, waiting for and feeding the same nodes; `on`
/// puts every unrelated multi-block run of one grid side by side.
#[test]
fn auto_puts_single_launches_of_many_blocks_side_by_side_within_its_limits() {
    // (name, grid, launches per buffer as a block-local chain, buffers, a consumer of buffer 0)
    let cases: [(&str, u32, usize, usize, bool, usize, usize); 5] = [
        // name, grid, chain length, buffers, consumer, auto's lanes side by side, on's
        ("four single launches", 16, 1, 4, false, 4, 4),
        ("a consumer of the first", 16, 1, 4, true, 4, 4),
        ("at the thread limit", 2048, 1, 3, false, 3, 3),
        ("over the thread limit", 2049, 1, 3, false, 0, 3),
        ("block-local chains", 16, 2, 3, false, 0, 3),
    ];
    for (name, grid, len, bufs, consumer, auto_lanes, on_lanes) in cases {
        let mut g = Graph::new();
        let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
        let row = crate::TileMap::linear(1024, 1024).unwrap();
        let xs: Vec<_> = (0..bufs).map(|i| g.add_buffer(format!("x{i}"), u64::from(grid) * 1024).unwrap()).collect();
        for _ in 0..len {
            for &x in &xs {
                g.add_launch_tiled(k, Launch::linear(grid, 256), &[Arg::Whole(x)], &[("x", row.clone())], &[]).unwrap();
            }
        }
        if consumer {
            let c = g.add_kernel(KernelSig::new("read").buffer("x", Access::Read)).unwrap();
            g.add_launch(c, Launch::linear(1, 32), &[Arg::Whole(xs[0])], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        for (mode, want) in [(FusionMode::Auto, auto_lanes), (FusionMode::On, on_lanes)] {
            let gs = all_groups(&plan, &keyed(&plan), mode);
            let sided: Vec<&Group> = gs.iter().filter(|gr| gr.is_side_by_side()).collect();
            let lanes = sided.iter().map(|gr| gr.lanes.len()).sum::<usize>();
            assert_eq!(lanes, want, "{name}, {mode:?}: {gs:?}");
            assert!(sided.len() <= 1, "{name}, {mode:?}: one group side by side at most: {gs:?}");
            for gr in &sided {
                assert!(gr.lanes.iter().all(|l| l.len() == len), "{name}, {mode:?}: whole runs as lanes: {gs:?}");
            }
            if mode == FusionMode::Auto && len > 1 {
                // Each chain still fuses block by block into a kernel of its own grid.
                assert_eq!(gs.iter().map(|gr| (gr.lanes.len(), gr.len())).collect::<Vec<_>>(), vec![(1, len); bufs], "{name}");
            }
        }
    }
}

/// A body that needs its block alone (`Fusable::alone`: a block barrier on CUDA) is a run of its
/// own in every mode, and fuses only as a lane of its own beside others.
#[test]
fn a_body_that_needs_its_block_alone_fuses_only_as_a_lane_of_its_own() {
    let alone = |fs: Vec<Option<Fusable>>| fs.into_iter().map(|f| f.map(|f| Fusable { alone: true, ..f })).collect::<Vec<_>>();
    let lane_lengths = |gs: &[Group]| gs.iter().flat_map(|g| g.lanes.iter().map(Vec::len)).collect::<Vec<_>>();
    // Four chains of three: no chain fuses; each level's four bodies go side by side (under `auto`
    // too: one kernel per level, each waiting for the level before as a whole).
    let plan = chains(4, 3);
    for mode in [FusionMode::Auto, FusionMode::On] {
        let gs = groups(&plan, &alone(every(&plan)), mode);
        assert_eq!(gs.iter().map(|g| g.lanes.len()).collect::<Vec<_>>(), [4; 3], "{mode:?}: {gs:?}");
        assert_eq!(lane_lengths(&gs), [1; 12], "{mode:?}: {gs:?}");
    }
    // A chain of five whose middle body needs its block alone: it cuts the chain in two.
    let plan = chains(1, 5);
    let mut f = every(&plan);
    f[2] = f[2].map(|f| Fusable { alone: true, ..f });
    let gs = groups(&plan, &f, FusionMode::Auto);
    assert_eq!(gs.iter().map(|g| g.nodes().map(|v| v.0).collect::<Vec<_>>()).collect::<Vec<_>>(), [vec![0, 1], vec![3, 4]]);
    // Four independent one-block launches: one fused launch of four blocks.
    let plan = chains(4, 1);
    let gs = groups(&plan, &alone(every(&plan)), FusionMode::Auto);
    assert_eq!(lane_lengths(&gs), [1; 4]);
    // Multi-block launches: single ones side by side; block-local chains not fused, each level's
    // launches side by side.
    // (chain length, grid, auto's lanes, on's): 16 blocks of 256 threads are within the limit of
    // a body alone, 65 are over it.
    for (len, grid, auto_lanes, on_lanes) in [(1, 16, vec![1; 3], vec![1; 3]), (2, 16, vec![1; 6], vec![1; 6]), (1, 65, vec![], vec![1; 3])] {
        let mut g = Graph::new();
        let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
        let row = crate::TileMap::linear(1024, 1024).unwrap();
        let xs: Vec<_> = (0..3).map(|i| g.add_buffer(format!("x{i}"), u64::from(grid) * 1024).unwrap()).collect();
        for _ in 0..len {
            for &x in &xs {
                g.add_launch_tiled(k, Launch::linear(grid, 256), &[Arg::Whole(x)], &[("x", row.clone())], &[]).unwrap();
            }
        }
        let plan = Plan::compile(&g).unwrap();
        assert_eq!(lane_lengths(&all_groups(&plan, &alone(keyed(&plan)), FusionMode::Auto)), auto_lanes, "chains of {len}, grid {grid}, auto");
        assert_eq!(lane_lengths(&all_groups(&plan, &alone(keyed(&plan)), FusionMode::On)), on_lanes, "chains of {len}, grid {grid}, on");
        let fused = all_groups(&plan, &keyed(&plan), FusionMode::Auto);
        assert!(fused.iter().any(|g| g.len() > 1), "the same bodies without a barrier fuse");
    }
}

#[test]
fn a_chain_is_one_group_with_a_barrier_between_dependent_bodies() {
    let plan = chains(1, 10);
    let gs = groups(&plan, &every(&plan), FusionMode::Auto);
    assert_eq!((gs.len(), gs[0].lanes.len(), gs[0].len()), (1, 1, 10));
    let bars = barriers(&plan, &gs[0].lanes[0], |_| false);
    assert!(!bars[0] && bars[1..].iter().all(|b| *b));
    assert!(groups(&plan, &every(&plan), FusionMode::Off).is_empty());
}

#[test]
fn independent_chains_are_the_lanes_of_one_group_and_the_rewrite_keeps_every_ordering() {
    let plan = chains(4, 5);
    let gs = groups(&plan, &every(&plan), FusionMode::Auto);
    assert_eq!((gs.len(), gs[0].lanes.len(), gs[0].len()), (1, 4, 20));
    // One fused launch reading and writing every buffer; a node that no group holds stays.
    let sig = KernelSig::new("fused").buffer("p0", Access::ReadWrite);
    let args = [Arg::Buffer(Slice { buffer: crate::BufferId(0), offset: 0, len: 1024 })];
    let rw = rewrite(&plan, &gs, &[FusedLaunch { sig: &sig, launch: Launch::linear(4, 256), args: &args }]).unwrap();
    assert_eq!(rw.graph.nodes().len(), 1);
    assert!(rw.node_of.iter().all(|n| n.index() == 0));
    // A node that cannot fuse cuts the run: two groups around it.
    let plan = chains(1, 9);
    let mut f = every(&plan);
    f[4] = None;
    let gs = groups(&plan, &f, FusionMode::Auto);
    assert_eq!(gs.iter().map(Group::len).collect::<Vec<_>>(), [4, 4]);
    let sigs: Vec<KernelSig> = (0..gs.len()).map(|i| KernelSig::new(format!("f{i}")).buffer("x", Access::ReadWrite)).collect();
    let args = [Arg::Whole(crate::BufferId(0))];
    let launches: Vec<FusedLaunch> = sigs.iter().map(|sig| FusedLaunch { sig, launch: Launch::linear(1, 256), args: &args }).collect();
    let rw = rewrite(&plan, &gs, &launches).unwrap();
    let fused_plan = Plan::compile(&rw.graph).unwrap();
    assert_eq!(fused_plan.node_count(), 3);
    assert_eq!(fused_plan.edges().len(), 2, "group, node 4, group: a chain");
}

/// Launches of one kernel, each a run of its own, that wait for the same nodes go side by side under
/// `auto` even where they feed different nodes, a group counting as one node: ten two-stage
/// reductions (a 16-block first stage, then a one-block second stage that waits for it) are two
/// launches. A second stage of another kernel, or one that also waits for a node of its own, stays
/// apart.
#[test]
fn each_level_of_independent_two_stage_chains_is_one_launch_under_auto() {
    /// Ten two-stage chains; `odd` changes chain 0's second stage: "other kernel" (of the same key),
    /// or "extra wait" (it also reads a buffer a fill writes first).
    fn two_stage(odd: Option<&str>) -> Plan {
        let mut g = Graph::new();
        let first = g.add_kernel(KernelSig::new("partials").buffer("p", Access::Write)).unwrap();
        let sig = |name: &str| KernelSig::new(name).buffer("p", Access::Read).buffer("acc", Access::ReadWrite).buffer("e", Access::Read);
        let (second, other) = (g.add_kernel(sig("final")).unwrap(), g.add_kernel(sig("final_other")).unwrap());
        let fill = g.add_kernel(KernelSig::new("fill").buffer("e", Access::Write)).unwrap();
        let es: Vec<_> = (0..10).map(|c| g.add_buffer(format!("e{c}"), 64).unwrap()).collect();
        if odd == Some("extra wait") {
            g.add_launch(fill, Launch::linear(2, 32), &[Arg::Whole(es[0])], &[]).unwrap();
        }
        for (c, &e) in es.iter().enumerate() {
            let (p, acc) = (g.add_buffer(format!("p{c}"), 64).unwrap(), g.add_buffer(format!("acc{c}"), 4).unwrap());
            g.add_launch(first, Launch::linear(16, 256), &[Arg::Whole(p)], &[]).unwrap();
            let k = if c == 0 && odd == Some("other kernel") { other } else { second };
            g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(p), Arg::Whole(acc), Arg::Whole(e)], &[]).unwrap();
        }
        Plan::compile(&g).unwrap()
    }
    // Keyed by grid and block; the fill (its own grid) is fusable with nothing.
    let shape = |gs: &[Group]| gs.iter().map(|g| (g.key.grid[0], g.lanes.len(), g.len())).collect::<Vec<_>>();
    let plan = two_stage(None);
    for mode in [FusionMode::Auto, FusionMode::On] {
        assert_eq!(shape(&all_groups(&plan, &keyed(&plan), mode)), [(16, 10, 10), (1, 10, 10)], "{mode:?}");
    }
    for odd in ["other kernel", "extra wait"] {
        let plan = two_stage(Some(odd));
        assert_eq!(shape(&all_groups(&plan, &keyed(&plan), FusionMode::Auto)), [(16, 10, 10), (1, 9, 9)], "{odd}");
    }
}
