//! Golden and property tests of the lowering.

use super::*;
use ostinato::{Access, Graph, KernelSig, Launch, Scalar, ScalarType, Slice};

fn chain(blocks: u32) -> Plan {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let b = g.add_buffer("b", 4096).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let pos = g.add_slot("pos", Scalar::u32(5)).unwrap();
    g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Whole(a), Arg::Slot(pos)], &[]).unwrap();
    g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Buffer(Slice { buffer: a, offset: 1024, len: 1024 }), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    g.add_copy(Slice { buffer: a, offset: 0, len: 4096 }, Slice { buffer: b, offset: 0, len: 4096 }, &[]).unwrap();
    g.add_fill(Slice { buffer: b, offset: 0, len: 16 }, 7, &[]).unwrap();
    Plan::compile(&g).unwrap()
}

#[test]
fn golden_a_kernel_that_does_not_wait_gets_full_edges_in_and_out_programmatic() {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let sig = |n: &str| KernelSig::new(n).buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let pdl = g.add_kernel(sig("add_one")).unwrap();
    let user = g.add_kernel(sig("user")).unwrap();
    for k in [pdl, pdl, user, pdl] {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let low = lower(&plan, &[true, false], true, PdlPolicy::new(PdlMode::On));
    // n1 keeps its early trigger: the full edge n1 -> n2 makes n2 wait for n1's completion.
    assert_eq!(
        low.describe(&plan),
        "shape plan\n\
         kernel n0 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, 8) [pdl-early]\n\
         kernel n1 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, 8) [pdl-early]\n\
         kernel n2 user<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, 8)\n\
         kernel n3 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, 8) [pdl-early]\n\
         edge n0 -> n1 programmatic\n\
         edge n1 -> n2\n\
         edge n2 -> n3 programmatic\n"
    );
}

#[test]
fn golden_captured_work_gets_full_edges_both_ways() {
    // add_one, add_one, captured work, add_one on one buffer: a child graph has no programmatic
    // port, so the edge out of it is full too (a kernel that merely does not wait keeps a
    // programmatic out-edge, resolved at its completion).
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let pdl = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let work = g.add_kernel(KernelSig::new("captured").buffer_vouched("x", Access::ReadWrite)).unwrap();
    let add = |g: &mut Graph| g.add_launch(pdl, Launch::linear(1, 256), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    add(&mut g);
    add(&mut g);
    g.add_launch(work, Launch::linear(1, 1), &[Arg::Whole(a)], &[]).unwrap();
    add(&mut g);
    let plan = Plan::compile(&g).unwrap();
    let kernels = [KernelPdl::plain(true), KernelPdl { child_graph: true, ..KernelPdl::plain(false) }];
    let low = lower_with(&plan, &kernels, true, PdlPolicy::new(PdlMode::On)).unwrap();
    let prog: Vec<(u32, u32, bool)> = low.edges.iter().map(|e| (e.from.0, e.to.0, e.programmatic)).collect();
    assert_eq!(prog, vec![(0, 1, true), (1, 2, false), (2, 3, false)]);
    assert_eq!(low.launches.iter().map(|l| l.child_graph).collect::<Vec<_>>(), vec![false, false, true, false]);
    assert_eq!(low.eager_pdl, vec![false, true, false, false], "eager mode: no programmatic launch after captured work");
}

#[test]
fn auto_needs_one_small_end_and_a_narrow_fan() {
    let d = |b: u32| Dims { grid: [b, 1, 1], block: [256, 1, 1], shared: 0 };
    let auto = PdlPolicy::new(PdlMode::Auto);
    assert!(auto.programmatic(&d(1), &d(2048), true, 1, 1), "small producer, large consumer");
    assert!(auto.programmatic(&d(2048), &d(32), true, 1, 1), "large producer, small consumer");
    assert!(auto.programmatic(&d(512), &d(8192), true, 1, 1), "the smaller end at the limit");
    assert!(!auto.programmatic(&d(1024), &d(8192), true, 1, 1), "the smaller end above it");
    assert!(!auto.programmatic(&d(2048), &d(2048), true, 1, 1), "both ends large");
    assert!(!auto.programmatic(&d(2048), &d(8192), true, 1, 1), "the smaller end above the limit");
    assert!(auto.programmatic(&d(256), &d(2048), true, 1, 4), "256 blocks in each of 4 lanes");
    assert!(!auto.programmatic(&d(512), &d(2048), true, 1, 4), "512 blocks in each of 4 lanes");
    assert!(!auto.programmatic(&d(1), &d(1), true, AUTO_MAX_FANOUT + 1, 1), "a wide fan");
    assert!(!auto.programmatic(&d(1), &d(1), false, 1, 1), "a consumer that does not wait");
}

#[test]
fn golden_graph_lowering_auto_small_grids() {
    let plan = chain(1);
    let low = lower(&plan, &[true], true, PdlPolicy::default());
    assert_eq!(
        low.describe(&plan),
        "shape plan\n\
         kernel n0 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, $pos) [pdl-early]\n\
         kernel n1 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+1024, 256) [pdl-early]\n\
         kernel n2 ostinato_copy<<<[4, 1, 1],[256, 1, 1],0>>>(&b+0, &a+0, 4096) [pdl-early]\n\
         kernel n3 ostinato_fill<<<[1, 1, 1],[256, 1, 1],0>>>(&b+0, 7, 4) [pdl-early]\n\
         edge n0 -> n1 programmatic\n\
         edge n1 -> n2 programmatic\n\
         edge n2 -> n3 programmatic\n"
    );
    assert_eq!(low.eager_pdl, vec![false, true, true, true]);
    let low = lower(&chain(8), &[true], true, PdlPolicy::default());
    assert!(low.edges.iter().all(|e| e.programmatic), "8-block chain: PDL gains");
    assert!(low.launches.iter().all(|l| l.variant == Variant::Late), "8 blocks: the after-wait build (entry trigger measured to lose)");
}

#[test]
fn auto_keeps_full_edges_between_large_grids_and_into_incapable_consumers() {
    let plan = chain(8192);
    let low = lower(&plan, &[true], true, PdlPolicy::default());
    let prog: Vec<bool> = low.edges.iter().map(|e| e.programmatic).collect();
    assert_eq!(prog, vec![false, true, true], "8192 -> 8192 blocks: PDL measured to lose; into the 4-block copy and on to the fill it keeps PDL");
    let low = lower(&chain(1), &[false], true, PdlPolicy::new(PdlMode::On));
    let prog: Vec<bool> = low.edges.iter().map(|e| e.programmatic).collect();
    assert_eq!(prog, vec![false, true, true], "never programmatic into a kernel that does not wait");
    let low = lower(&chain(1), &[true], true, PdlPolicy::new(PdlMode::Off));
    assert!(low.edges.iter().all(|e| !e.programmatic) && low.eager_pdl.iter().all(|p| !p));
    let low = lower(&chain(8192), &[true], true, PdlPolicy::new(PdlMode::On));
    assert!(low.edges.iter().all(|e| e.programmatic));
    assert!(low.launches.iter().all(|l| l.variant == Variant::Late), "big grids: one after-wait build");
    let low = lower(&chain(8192), &[true], true, PdlPolicy::new(PdlMode::Off));
    assert!(low.launches.iter().all(|l| l.variant == Variant::Plain), "no programmatic edge: the build without griddepcontrol");
}

#[test]
fn auto_scales_the_block_limit_by_side_by_side_lanes() {
    let p = PdlPolicy::default();
    let d = |b| Dims { grid: [b, 1, 1], block: [256, 1, 1], shared: 0 };
    assert!(p.programmatic(&d(512), &d(512), true, 1, 1), "one 512-block chain: gained in both driver states");
    assert!(!p.programmatic(&d(1024), &d(1024), true, 1, 1), "one 1,024-block chain: lost 7-9% to the plain graph in a fresh process");
    assert!(p.programmatic(&d(512), &d(512), true, 1, 2), "two side-by-side 512-block chains: 1,024 in all");
    assert!(!p.programmatic(&d(2048), &d(2048), true, 1, 1), "one 2,048-block chain: measured to lose");
    assert!(p.programmatic(&d(256), &d(256), true, 1, 4), "four side-by-side 256-block chains: gained 9%");
    assert!(!p.programmatic(&d(512), &d(512), true, 1, 4), "four side-by-side 512-block chains: measured to lose");
}

#[test]
fn one_graph_edge_per_plan_edge() {
    let plan = chain(1);
    let low = lower(&plan, &[true], true, PdlPolicy::default());
    let pairs: Vec<(u32, u32)> = low.edges.iter().map(|e| (e.from.0, e.to.0)).collect();
    let want: Vec<(u32, u32)> = plan.edges().iter().map(|e| (e.from.0, e.to.0)).collect();
    assert_eq!(pairs, want);
}

/// One producer writing `p`, `k` consumers reading it (each writing its own slice of `c`), one
/// reducer reading all of `c`; 1-block kernels.
fn fan(k: u64) -> Plan {
    let mut g = Graph::new();
    let p = g.add_buffer("p", 1024).unwrap();
    let c = g.add_buffer("c", 1024 * k).unwrap();
    let r = g.add_buffer("r", 1024).unwrap();
    let sig = KernelSig::new("mix").buffer("out", Access::Write).buffer("inp", Access::Read);
    let mix = g.add_kernel(sig).unwrap();
    let (wp, wc, wr) = (g.whole(p), g.whole(c), g.whole(r));
    g.add_launch(mix, Launch::linear(1, 256), &[Arg::Buffer(wp), Arg::Buffer(wr)], &[]).unwrap();
    for i in 0..k {
        let out = Slice { buffer: c, offset: 1024 * i, len: 1024 };
        g.add_launch(mix, Launch::linear(1, 256), &[Arg::Buffer(out), Arg::Buffer(wp)], &[]).unwrap();
    }
    g.add_launch(mix, Launch::linear(1, 256), &[Arg::Buffer(wr), Arg::Buffer(wc)], &[]).unwrap();
    Plan::compile(&g).unwrap()
}

#[test]
fn golden_auto_submits_a_sixteen_wide_fan_as_four_pdl_chains() {
    let plan = fan(16);
    let low = lower(&plan, &[true], true, PdlPolicy::default());
    assert_eq!(low.shape, GraphShape::Lanes);
    let edges: Vec<String> = low.edges.iter().map(|e| format!("{}->{}{}", e.from.0, e.to.0, if e.programmatic { "p" } else { "" })).collect();
    // lane 0: producer, consumers 1, 5, 9, 13, reducer; lanes 1-3: consumers 2.., 3.., 4..; the
    // other lanes wait for the producer, the reducer waits for their tails.
    assert_eq!(
        edges.join(" "),
        "0->1p 1->5p 5->9p 9->13p 13->17p 2->6p 6->10p 10->14p 3->7p 7->11p 11->15p 4->8p 8->12p 12->16p \
         0->2p 0->3p 0->4p 14->17p 15->17p 16->17p"
    );
    assert!(low.edges.iter().all(|e| e.programmatic), "every link has fan <= 4 in the lane shape");
    let plain = lower(&plan, &[true], true, PdlPolicy { shape: ShapeMode::Plan, ..PdlPolicy::default() });
    assert_eq!(plain.edges.len(), 32, "plan shape: producer -> 16 consumers -> reducer");
    assert!(plain.edges.iter().all(|e| !e.programmatic), "a 16-wide fan of programmatic edges measured to lose");
}

#[test]
fn auto_keeps_the_plan_shape_outside_the_measured_fan_band_or_without_pdl() {
    let shape = |k, mode| lower(&fan(k), &[true], true, PdlPolicy::new(mode)).shape;
    assert_eq!(shape(4, PdlMode::Auto), GraphShape::Plan, "a 4-wide fan is programmatic as it is");
    assert_eq!(shape(8, PdlMode::Auto), GraphShape::Lanes);
    assert_eq!(shape(32, PdlMode::Auto), GraphShape::Lanes);
    assert_eq!(shape(64, PdlMode::Auto), GraphShape::Plan, "a 64-wide fan: no shape measured better on every H200");
    assert_eq!(shape(16, PdlMode::Off), GraphShape::Plan, "without PDL the lanes only cost concurrency");
    assert_eq!(shape(16, PdlMode::On), GraphShape::Lanes);
}

/// `k` independent nodes of `blocks` blocks (each writes its own slice): no edge at all.
fn independent(k: u64, blocks: u32) -> Plan {
    let mut g = Graph::new();
    let c = g.add_buffer("c", 1024 * k).unwrap();
    let fill = g.add_kernel(KernelSig::new("fill").buffer("out", Access::Write)).unwrap();
    for i in 0..k {
        let out = Slice { buffer: c, offset: 1024 * i, len: 1024 };
        g.add_launch(fill, Launch::linear(blocks, 256), &[Arg::Buffer(out)], &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

#[test]
fn golden_auto_submits_ten_independent_nodes_as_four_chains_not_ten_branches() {
    let plan = independent(10, 64);
    assert!(plan.edges().is_empty());
    let low = lower(&plan, &[true], true, PdlPolicy::default());
    assert_eq!(low.shape, GraphShape::Lanes, "ten roots are a fan of ten");
    let edges: Vec<String> = low.edges.iter().map(|e| format!("{}->{}{}", e.from.0, e.to.0, if e.programmatic { "p" } else { "" })).collect();
    assert_eq!(edges.join(" "), "0->4p 4->8p 1->5p 5->9p 2->6p 3->7p");
    // Outside the band, or without PDL, each node stays its own branch.
    let shape = |k, blocks, mode| lower(&independent(k, blocks), &[true], true, PdlPolicy::new(mode)).shape;
    assert_eq!(shape(4, 64, PdlMode::Auto), GraphShape::Plan, "four roots are four branches either way");
    assert_eq!(shape(64, 64, PdlMode::Auto), GraphShape::Plan);
    assert_eq!(shape(10, 64, PdlMode::Off), GraphShape::Plan);
    // Lane links between large grids are full edges: four chains, as a four-stream capture.
    let big = lower(&independent(10, 8192), &[true], true, PdlPolicy::default());
    assert_eq!(big.shape, GraphShape::Lanes);
    assert!(big.edges.iter().all(|e| !e.programmatic), "8,192-block grids: no PDL under auto");
}

/// Reachability in a graph given as edges over `n` nodes listed in topological order.
fn closure(n: usize, order: &[NodeId], edges: &[(NodeId, NodeId)]) -> Vec<Vec<bool>> {
    let mut succ = vec![Vec::new(); n];
    for &(u, v) in edges {
        succ[u.index()].push(v.index());
    }
    let mut reach = vec![vec![false; n]; n];
    for &u in order.iter().rev() {
        for &v in &succ[u.index()] {
            reach[u.index()][v] = true;
            let row = reach[v].clone();
            for (w, r) in row.into_iter().enumerate() {
                reach[u.index()][w] |= r;
            }
        }
    }
    reach
}

#[test]
fn the_lane_shape_implies_every_plan_edge_on_random_programs() {
    let mut checked = 0;
    for seed in 0..300u64 {
        let prog = ostinato_testkit::random_graphs::random_mix_program(seed, 5 + (seed as usize * 13) % 90);
        for max_lanes in 1..=6 {
            let plan = Plan::compile_with(&prog.graph, ostinato::PlanOptions { max_lanes }).unwrap();
            let edges = lane_shape_edges(&plan);
            let reach = closure(plan.node_count(), plan.order(), &edges);
            for e in plan.edges() {
                assert!(reach[e.from.index()][e.to.index()], "seed {seed}, {max_lanes} lanes: plan edge {} -> {} not implied", e.from, e.to);
                checked += 1;
            }
            let pos: Vec<usize> = {
                let mut p = vec![0; plan.node_count()];
                for (i, v) in plan.order().iter().enumerate() {
                    p[v.index()] = i;
                }
                p
            };
            assert!(edges.iter().all(|(u, v)| pos[u.index()] < pos[v.index()]), "lane edges follow the plan's order (no cycle)");
        }
    }
    assert!(checked > 10_000, "only {checked} plan edges checked");
}

#[test]
fn non_waiting_kernels_get_no_programmatic_edge() {
    let (mut into_plain, mut programmatic) = (0, 0);
    for seed in 0..100u64 {
        let prog = ostinato_testkit::random_graphs::random_two_kernel_program(seed, 20 + (seed as usize * 11) % 100);
        let plan = Plan::compile_with(&prog.graph, ostinato::PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let g = plan.graph();
        // kernel 0 `mix` is capable, kernel 1 `mix_alt` is not; copies and fills (helpers) are.
        let plain = |v: NodeId| matches!(&g.node(v).op, NodeOp::Kernel { kernel, .. } if kernel.index() == 1);
        for mode in [PdlMode::On, PdlMode::Auto] {
            for shape in [ShapeMode::Plan, ShapeMode::Lanes] {
                let low = lower(&plan, &[true, false], true, PdlPolicy { shape, ..PdlPolicy::new(mode) });
                for e in &low.edges {
                    assert!(!(plain(e.to) && e.programmatic), "seed {seed} {mode:?} {shape:?}: programmatic edge into plain n{}", e.to);
                    into_plain += usize::from(plain(e.to));
                    programmatic += usize::from(e.programmatic);
                }
                for (v, pdl) in low.eager_pdl.iter().enumerate() {
                    assert!(!(*pdl && plain(NodeId(v as u32))), "seed {seed}: eager PDL launch of plain n{v}");
                }
            }
        }
    }
    assert!(into_plain > 1000 && programmatic > 1000, "{into_plain} edges into plain, {programmatic} programmatic");
}
