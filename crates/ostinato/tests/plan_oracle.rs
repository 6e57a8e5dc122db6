#![allow(clippy::needless_range_loop)] // brute-force oracles read best as index loops
//! The planner against a brute-force oracle on random graphs: the plan's edges must be exactly the
//! transitive reduction of (all-pairs hazards ∪ explicit edges), with the right hazard kinds; cycles must
//! be reported with a real cycle; lanes must order every edge.

use ostinato::rng::XorShift64 as Rng;
use std::collections::BTreeSet;

use ostinato::{Access, Arg, Graph, Hazards, KernelSig, Launch, NodeId, Plan, PlanError, PlanOptions, Scalar, ScalarType, Slice};
use proptest::prelude::*;

/// A random graph: a few allocations (some with views), kernels of 1–3 buffer params with random
/// modes, copies, fills, and random explicit edges (mostly forward; `backward` adds some reversed ones).
fn random_graph(seed: u64, nodes: usize, backward: bool) -> Graph {
    let mut r = Rng::seeded(seed);
    let mut g = Graph::new();
    let nbuf = 1 + r.below(4) as usize;
    for b in 0..nbuf {
        let size = 8 + 4 * r.below(16);
        let id = g.add_buffer(format!("b{b}"), size).unwrap();
        if r.below(3) == 0 {
            let off = r.below(size / 2);
            let len = 1 + r.below(size - off);
            g.add_view(format!("v{b}"), id, off, len).unwrap();
        }
    }
    let modes = [Access::Read, Access::Write, Access::ReadWrite];
    let mut kernels = Vec::new();
    for k in 0..3 {
        let mut sig = KernelSig::new(format!("k{k}"));
        for p in 0..=k {
            sig = sig.buffer(format!("p{p}"), modes[r.below(3) as usize]);
        }
        sig = sig.scalar("s", ScalarType::U32);
        // The planner's oracle covers nodes whose own params overlap: every pair is declared aliasing.
        for a in 0..=k {
            for b in a + 1..=k {
                sig = sig.may_alias(&format!("p{a}"), &format!("p{b}")).unwrap();
            }
        }
        kernels.push(g.add_kernel(sig).unwrap());
    }
    let nb = g.buffers().len() as u64;
    let slice = |r: &mut Rng, g: &Graph| {
        let b = ostinato::BufferId(r.below(nb) as u32);
        let size = g.buffer(b).size;
        let off = r.below(size);
        let len = 1 + r.below(size - off);
        Slice { buffer: b, offset: off, len }
    };
    for i in 0..nodes {
        let mut after = Vec::new();
        if i > 0 && r.below(5) == 0 {
            after.push(NodeId(r.below(i as u64) as u32));
        }
        match r.below(10) {
            0 => {
                let s = slice(&mut r, &g);
                let d = slice(&mut r, &g);
                let len = s.len.min(d.len);
                // may be refused when the two overlap on one allocation; then record a fill instead
                if g.add_copy(Slice { len, ..s }, Slice { len, ..d }, &after).is_err() {
                    let b = ostinato::BufferId(0);
                    g.add_fill(Slice { buffer: b, offset: 0, len: 4 }, 7, &after).unwrap();
                }
            }
            1 => {
                let b = ostinato::BufferId(0);
                g.add_fill(Slice { buffer: b, offset: 4 * r.below(2), len: 4 }, 1, &after).unwrap();
            }
            _ => {
                let k = kernels[r.below(3) as usize];
                let np = g.kernel(k).params.len() - 1;
                let mut args: Vec<Arg> = (0..np).map(|_| Arg::Buffer(slice(&mut r, &g))).collect();
                args.push(Arg::Scalar(Scalar::u32(0)));
                g.add_launch(k, Launch::linear(1, 32), &args, &after).unwrap();
            }
        }
    }
    if backward && nodes > 1 {
        for _ in 0..1 + r.below(2) {
            let a = NodeId(r.below(nodes as u64) as u32);
            let b = NodeId(r.below(nodes as u64) as u32);
            if a != b {
                g.add_edge(a, b).unwrap();
            }
        }
    }
    g
}

/// Brute force: direct hazards of every pair, explicit edges, closure by DFS, reduction by definition.
struct Oracle {
    n: usize,
    direct: Vec<Vec<bool>>,
    kinds: Vec<Vec<Hazards>>,
    explicit: Vec<Vec<bool>>,
    reach: Vec<Vec<bool>>,
}

fn oracle(g: &Graph) -> Oracle {
    let n = g.nodes().len();
    let mut direct = vec![vec![false; n]; n];
    let mut kinds = vec![vec![Hazards::default(); n]; n];
    let mut explicit = vec![vec![false; n]; n];
    for i in 0..n {
        for j in 0..n {
            let (ai, aj) = (g.accesses(NodeId(i as u32)), g.accesses(NodeId(j as u32)));
            let mut h = Hazards::default();
            for a in &ai {
                for b in &aj {
                    if a.root == b.root && a.start < b.end && b.start < a.end {
                        h = h | ostinato::hazard_between(a.access, b.access);
                    }
                }
            }
            kinds[i][j] = h;
            if i < j && !h.is_empty() {
                direct[i][j] = true;
            }
        }
        for a in &g.nodes()[i].after {
            direct[a.index()][i] = true;
            explicit[a.index()][i] = true;
        }
    }
    let mut reach = vec![vec![false; n]; n];
    for s in 0..n {
        let mut stack: Vec<usize> = (0..n).filter(|&t| direct[s][t]).collect();
        while let Some(t) = stack.pop() {
            if !reach[s][t] {
                reach[s][t] = true;
                stack.extend((0..n).filter(|&u| direct[t][u]));
            }
        }
    }
    Oracle { n, direct, kinds, explicit, reach }
}

impl Oracle {
    fn cyclic(&self) -> bool {
        (0..self.n).any(|i| self.reach[i][i])
    }
    fn reduction(&self) -> BTreeSet<(u32, u32)> {
        let mut out = BTreeSet::new();
        for u in 0..self.n {
            for v in 0..self.n {
                if self.direct[u][v] && !(0..self.n).any(|w| w != u && w != v && self.reach[u][w] && self.reach[w][v]) {
                    out.insert((u as u32, v as u32));
                }
            }
        }
        out
    }
}

fn check_plan(g: &Graph, max_lanes: usize) -> Result<(), TestCaseError> {
    let o = oracle(g);
    let planned = Plan::compile_with(g, PlanOptions { max_lanes });
    if o.cyclic() {
        let Err(PlanError::Cycle { cycle }) = planned else {
            return Err(TestCaseError::fail(format!("oracle sees a cycle, planner said {planned:?}")));
        };
        prop_assert!(!cycle.is_empty());
        for (i, &a) in cycle.iter().enumerate() {
            let b = cycle[(i + 1) % cycle.len()] as usize;
            prop_assert!(o.direct[a as usize][b], "reported cycle {cycle:?} uses a non-edge {a}->{b}");
        }
        return Ok(());
    }
    let plan = planned.map_err(|e| TestCaseError::fail(e.to_string()))?;
    let got: BTreeSet<(u32, u32)> = plan.edges().iter().map(|e| (e.from.0, e.to.0)).collect();
    prop_assert_eq!(&got, &o.reduction());
    for e in plan.edges() {
        prop_assert_eq!(e.hazards, o.kinds[e.from.index()][e.to.index()], "kinds of {:?}", e);
        prop_assert_eq!(e.explicit, o.explicit[e.from.index()][e.to.index()]);
    }
    // order is topological
    let mut pos = vec![0; o.n];
    for (i, v) in plan.order().iter().enumerate() {
        pos[v.index()] = i;
    }
    for e in plan.edges() {
        prop_assert!(pos[e.from.index()] < pos[e.to.index()]);
    }
    // levels: the longest path to each node over every direct dependency (implied ones included),
    // relaxed to a fixpoint in no particular order
    let mut longest = vec![0u32; o.n];
    for _ in 0..o.n {
        for u in 0..o.n {
            for v in 0..o.n {
                if o.direct[u][v] {
                    longest[v] = longest[v].max(longest[u] + 1);
                }
            }
        }
    }
    prop_assert_eq!(plan.levels(), longest);
    // lanes: bounded, each lane in order, and every edge ordered by lane order or a (transitive) wait
    let lanes = plan.lanes();
    prop_assert!(lanes.count() <= max_lanes);
    prop_assert_eq!(lanes.all().iter().map(Vec::len).sum::<usize>(), o.n);
    for l in lanes.all() {
        for w in l.windows(2) {
            prop_assert!(pos[w[0].index()] < pos[w[1].index()]);
        }
    }
    // happens-before implied by lanes + waits must cover every edge
    let n = o.n;
    let mut hb = vec![vec![false; n]; n];
    for l in lanes.all() {
        for (i, a) in l.iter().enumerate() {
            for b in &l[i + 1..] {
                hb[a.index()][b.index()] = true;
            }
        }
    }
    for v in 0..n {
        for w in lanes.waits(NodeId(v as u32)) {
            hb[w.index()][v] = true;
        }
    }
    for k in plan.order() {
        for i in 0..n {
            if hb[i][k.index()] {
                for j in 0..n {
                    if hb[k.index()][j] {
                        hb[i][j] = true;
                    }
                }
            }
        }
    }
    for e in plan.edges() {
        prop_assert!(hb[e.from.index()][e.to.index()], "edge {:?} not ordered by lanes/waits", e);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn edges_equal_transitive_reduction(seed in any::<u64>(), nodes in 1usize..40, lanes in 1usize..6) {
        check_plan(&random_graph(seed, nodes, false), lanes)?;
    }

    #[test]
    fn explicit_edges_any_direction(seed in any::<u64>(), nodes in 2usize..24) {
        check_plan(&random_graph(seed, nodes, true), 3)?;
    }

    #[test]
    fn fingerprint_is_a_function_of_the_graph(seed in any::<u64>(), nodes in 1usize..20) {
        let g = random_graph(seed, nodes, false);
        let a = Plan::compile(&g).unwrap().fingerprint();
        let b = Plan::compile(&g.clone()).unwrap().fingerprint();
        prop_assert_eq!(a, b);
        let h = random_graph(seed ^ 0x5555, nodes, false);
        if h != g {
            prop_assert_ne!(a, Plan::compile(&h).unwrap().fingerprint());
        }
    }
}

#[test]
fn fingerprint_is_pinned() {
    // A fixed graph's fingerprint must not drift between builds (caches and reports key on it).
    let g = random_graph(42, 16, false);
    assert_eq!(Plan::compile(&g).unwrap().fingerprint(), Plan::compile(&random_graph(42, 16, false)).unwrap().fingerprint());
    let mut g2 = Graph::new();
    let x = g2.add_buffer("x", 16).unwrap();
    let k = g2.add_kernel(KernelSig::new("k").buffer("x", Access::ReadWrite)).unwrap();
    g2.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(x)], &[]).unwrap();
    assert_eq!(format!("{:016x}", Plan::compile(&g2).unwrap().fingerprint()), PINNED_FINGERPRINT);
}

// Format v2: buffers carry their device.
const PINNED_FINGERPRINT: &str = "430010fc60df36dd";
