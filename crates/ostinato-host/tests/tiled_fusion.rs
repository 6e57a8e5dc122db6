//! Multi-block chain fusion against the oracle: random tiled programs (`ostinato_testkit::tiled_graphs`)
//! grouped by the core's fusion policy, each group's blocks run in any order (forwards, backwards,
//! shuffled), every block running its members' block in turn, as a fused kernel runs them. The bytes
//! must be the serial program's. A mutation — a relation that is not block-local taken as one — must
//! make some program differ, so the test can fail when a tile dependency is lost. Fusion by components
//! too: the fused blocks in any order, each running its members' blocks of its component, and by brute
//! force: every two blocks of a group's members that share a byte (one writing) in one component
//! (the benchmark's spread/gather chains test it further: `ostinato-bench/tests/tiles_components.rs`).

use ostinato::fusion::{all_groups, groups, groups_by, FusionMode, Group};
use ostinato::{NodeId, NodeOp, Plan, PlanOptions, TileRelation};
use ostinato_testkit::random_graphs::serial_result;
use ostinato_testkit::tiled_graphs::{launches_fusable, random_tiled_program, run_blockwise, BlockOrder};

fn multi_block(gs: &[Group]) -> impl Iterator<Item = &Group> {
    gs.iter().filter(|g| g.key.grid != [1, 1, 1])
}

#[test]
fn fused_tiled_programs_give_the_oracle_bits_in_any_block_order() {
    let (mut fused, mut total, mut sparse, mut local) = (0, 0, 0, 0);
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        for max_lanes in [1, 4] {
            let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
            let want = serial_result(&plan, &prog, 1).unwrap();
            for e in plan.edges() {
                match plan.tile_relation(e.from, e.to) {
                    TileRelation::BlockLocal => local += 1,
                    TileRelation::Sparse(_) => sparse += 1,
                    TileRelation::Dense(_) => {}
                }
            }
            for mode in [FusionMode::Auto, FusionMode::On] {
                let gs = groups(&plan, &launches_fusable(&plan), mode);
                fused += multi_block(&gs).map(Group::len).sum::<usize>();
                total += plan.node_count();
                for order in [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(seed)] {
                    let got = run_blockwise(&plan, &prog, &gs, order).unwrap();
                    assert_eq!(got, want, "seed {seed}, {max_lanes} lanes, {mode:?}, {order:?}: {gs:?}");
                }
            }
        }
    }
    eprintln!("{fused} of {total} nodes fused block by block; {local} block-local and {sparse} sparse kept edges");
    assert!(fused > total / 5, "{fused} of {total} nodes fused block by block");
    assert!(local > 100 && sparse > 100, "{local} block-local and {sparse} sparse edges");
}

#[test]
fn taking_one_sparse_relation_for_block_local_changes_some_program() {
    let mut caught = 0;
    let mut tried = 0;
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        let plan = Plan::compile(&prog.graph).unwrap();
        // The first sparse kept edge between two nodes of one shape: claim it block-local.
        let Some(e) = plan.edges().iter().find(|e| {
            let grid = |v: NodeId| match &plan.graph().node(v).op {
                NodeOp::Kernel { launch, .. } => Some((launch.grid, launch.block)),
                _ => None,
            };
            grid(e.from) == grid(e.to) && matches!(plan.tile_relation(e.from, e.to), TileRelation::Sparse(_))
        }) else {
            continue;
        };
        let wrong = |u: NodeId, v: NodeId| (u, v) == (e.from, e.to) || plan.tile_relation(u, v).is_block_local();
        let gs = groups_by(&plan, &launches_fusable(&plan), FusionMode::On, &wrong);
        if !gs.iter().any(|g| g.nodes().any(|n| n == e.from) && g.nodes().any(|n| n == e.to)) {
            continue;
        }
        tried += 1;
        let want = serial_result(&plan, &prog, 1).unwrap();
        // Blocks in every order: one of them runs the consumer's block before a producer block it needs.
        let differs = [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(seed)]
            .into_iter()
            .any(|o| run_blockwise(&plan, &prog, &gs, o).map_or(true, |got| got != want));
        caught += differs as usize;
    }
    eprintln!("the lost dependency showed in {caught} of {tried} programs");
    assert!(tried >= 20, "only {tried} programs could take the mutation");
    assert!(caught * 10 >= tried * 9, "the lost dependency showed in {caught} of {tried} programs");
}

#[test]
fn fused_components_give_the_oracle_bits_in_any_block_order() {
    let (mut fused, mut groups_made, mut total) = (0, 0, 0);
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        let plan = Plan::compile(&prog.graph).unwrap();
        let want = serial_result(&plan, &prog, 1).unwrap();
        for mode in [FusionMode::Auto, FusionMode::On] {
            // As a backend that fuses by components takes the groups.
            let gs = all_groups(&plan, &launches_fusable(&plan), mode);
            let comps: Vec<&Group> = gs.iter().filter(|g| g.components.is_some()).collect();
            fused += comps.iter().map(|g| g.len()).sum::<usize>();
            groups_made += comps.len();
            total += plan.node_count();
            for order in [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(seed)] {
                let got = run_blockwise(&plan, &prog, &gs, order).unwrap();
                assert_eq!(got, want, "seed {seed}, {mode:?}, {order:?}: {gs:?}");
            }
        }
    }
    eprintln!("{fused} of {total} nodes fused by components, in {groups_made} groups");
    assert!(groups_made >= 1, "{groups_made} groups of components");
}

/// The bytes block `block` of kernel node `v` may touch, by param: (root, first byte, past the last,
/// writes) — its tile map's pieces, or its whole slice where the param has none.
fn block_bytes(plan: &Plan, v: NodeId, block: [u32; 3]) -> Vec<(u32, u64, u64, bool)> {
    let g = plan.graph();
    let mut out = Vec::new();
    for a in g.accesses(v) {
        let writes = a.access.writes();
        match g.tile_map(v, a.param) {
            Some(map) => map.for_each_piece(block, |lo, hi| out.push((a.root.0, a.start + lo, a.start + hi, writes))),
            None => out.push((a.root.0, a.start, a.end, writes)),
        }
    }
    out
}

#[test]
fn every_block_hazard_inside_a_group_of_components_lies_within_one_component() {
    // Brute force against the union-find: for every two members of a group and every two of their
    // blocks that touch a common byte (one writing), the fused block that runs one runs the other.
    let (mut checked, mut groups_seen) = (0u64, 0);
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        let plan = Plan::compile(&prog.graph).unwrap();
        for mode in [FusionMode::Auto, FusionMode::On] {
            for gr in all_groups(&plan, &launches_fusable(&plan), mode) {
                let Some(c) = &gr.components else { continue };
                groups_seen += 1;
                let members = &gr.lanes[0];
                // Each member's component of each of its blocks (linear index).
                let comp: Vec<Vec<u64>> = c
                    .members
                    .iter()
                    .map(|m| {
                        let mut of = vec![u64::MAX; ostinato::tiles::block_count(m.grid) as usize];
                        for ci in 0..u64::from(c.count) {
                            for k in 0..m.per {
                                let b = m.block(ci, k) as usize;
                                assert_eq!(of[b], u64::MAX, "seed {seed}: block {b} in two components");
                                of[b] = ci;
                            }
                        }
                        assert!(of.iter().all(|&x| x != u64::MAX), "seed {seed}: a block in no component");
                        of
                    })
                    .collect();
                for i in 0..members.len() {
                    for j in i + 1..members.len() {
                        let (gi, gj) = (c.members[i].grid, c.members[j].grid);
                        for bi in 0..comp[i].len() {
                            let ti = block_bytes(&plan, members[i], ostinato::tiles::block_at(gi, bi as u64));
                            for bj in 0..comp[j].len() {
                                let tj = block_bytes(&plan, members[j], ostinato::tiles::block_at(gj, bj as u64));
                                let hazard = ti.iter().any(|a| tj.iter().any(|b| a.0 == b.0 && a.1 < b.2 && b.1 < a.2 && (a.3 || b.3)));
                                if hazard {
                                    checked += 1;
                                    assert_eq!(
                                        comp[i][bi], comp[j][bj],
                                        "seed {seed}, {mode:?}: n{} block {bi} and n{} block {bj} share a byte",
                                        members[i], members[j]
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!("{checked} block pairs with a common byte, in {groups_seen} groups of components, each within one component");
    assert!(checked > 1000 && groups_seen > 100, "{checked} pairs in {groups_seen} groups");
}

/// Under `on`, unrelated multi-block runs of one grid share a kernel side by side (a CUDA fused
/// kernel of `lanes × blocks` blocks); under `auto`, runs of one launch each that wait for and feed
/// the same nodes, or launches of one kernel that wait for the same nodes. Run with the fused blocks in any order, each running its lane's members' block,
/// the bytes are the serial program's.
#[test]
fn multi_block_runs_side_by_side_give_the_oracle_bits_in_any_block_order() {
    let (mut side, mut lanes_seen, mut auto_side) = (0, 0, 0);
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        for max_lanes in [1, 4] {
            let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
            let want = serial_result(&plan, &prog, 1).unwrap();
            for mode in [FusionMode::Auto, FusionMode::On] {
                let gs = all_groups(&plan, &launches_fusable(&plan), mode);
                let sided: Vec<&Group> = gs.iter().filter(|g| g.is_side_by_side()).collect();
                if mode == FusionMode::Auto {
                    // Single launches with equal ends, or of one kernel waiting for the same nodes (a
                    // group counting as one node).
                    let group_of = |u: u32| gs.iter().position(|h| h.nodes().any(|v| v.0 == u));
                    let waits = |v: NodeId| {
                        plan.preds(v).iter().map(|&u| group_of(u).map_or((false, u as usize), |h| (true, h))).collect::<std::collections::BTreeSet<_>>()
                    };
                    let kernel = |v: NodeId| match &plan.graph().node(v).op {
                        ostinato::NodeOp::Kernel { kernel, .. } => Some(*kernel),
                        _ => None,
                    };
                    for g in &sided {
                        let ends = |l: &Vec<NodeId>| (plan.preds(l[0]).to_vec(), plan.succs(l[0]).to_vec());
                        let level = |l: &Vec<NodeId>| (kernel(l[0]), waits(l[0]));
                        let single = g.lanes.iter().all(|l| l.len() == 1);
                        let equal_ends = g.lanes.iter().all(|l| ends(l) == ends(&g.lanes[0]));
                        let one_level = g.lanes.iter().all(|l| level(l) == level(&g.lanes[0]));
                        assert!(single && (equal_ends || one_level), "seed {seed}: auto's lanes: {g:?}");
                    }
                    auto_side += sided.len();
                }
                side += sided.len();
                lanes_seen += sided.iter().map(|g| g.lanes.len()).sum::<usize>();
                for order in [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(seed)] {
                    let got = run_blockwise(&plan, &prog, &gs, order).unwrap();
                    assert_eq!(got, want, "seed {seed}, {max_lanes} lanes, {mode:?}, {order:?}: {gs:?}");
                }
            }
        }
    }
    eprintln!("{side} groups of multi-block runs side by side ({auto_side} under auto), {lanes_seen} lanes");
    assert!(side >= 20 && auto_side >= 5, "only {side} groups side by side, {auto_side} under auto: the programs barely have unrelated runs of one grid");
}

/// Bodies that need their block alone (`Fusable::alone`: on CUDA, a block barrier), drawn at random:
/// each is a lane of its own wherever it fuses, in no group of components, and the groups still give
/// the serial program's bytes in any block order.
#[test]
fn bodies_that_need_their_block_alone_fuse_only_as_lanes_of_their_own() {
    let (mut alone_fused, mut alone_total) = (0, 0);
    for seed in 0..300u64 {
        let prog = random_tiled_program(seed, 4 + (seed as usize * 5) % 24);
        let plan = Plan::compile(&prog.graph).unwrap();
        let want = serial_result(&plan, &prog, 1).unwrap();
        // Every third launch (from a seed-dependent start) needs its block alone.
        let fusable: Vec<_> = launches_fusable(&plan)
            .into_iter()
            .enumerate()
            .map(|(v, f)| f.map(|f| ostinato::fusion::Fusable { alone: (v as u64 + seed) % 3 == 0, ..f }))
            .collect();
        let alone = |v: NodeId| fusable[v.index()].is_some_and(|f| f.alone);
        for mode in [FusionMode::Auto, FusionMode::On] {
            let gs = all_groups(&plan, &fusable, mode);
            for g in &gs {
                for l in g.lanes.iter().filter(|l| l.iter().any(|&v| alone(v))) {
                    assert!(l.len() == 1 && g.components.is_none() && g.lanes.len() > 1, "seed {seed}, {mode:?}: {g:?}");
                    alone_fused += 1;
                }
            }
            alone_total += (0..plan.node_count()).filter(|&v| alone(NodeId(v as u32))).count();
            for order in [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(seed)] {
                let got = run_blockwise(&plan, &prog, &gs, order).unwrap();
                assert_eq!(got, want, "seed {seed}, {mode:?}, {order:?}: {gs:?}");
            }
        }
    }
    eprintln!("{alone_fused} of {alone_total} bodies that need their block alone fused as lanes of their own");
    assert!(alone_fused >= 20, "only {alone_fused} such bodies fused: the programs barely have unrelated launches of one shape");
}
