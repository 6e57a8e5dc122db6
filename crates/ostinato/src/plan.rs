//! Planning: hazards → the transitive reduction of (hazards ∪ explicit edges) → order, lanes, fingerprint.
//!
//! Algorithm (n nodes, e hazard-frontier edges, a accesses; see `docs/design.md`):
//! 1. Per root allocation an interval map holds, for every byte range, its last writer and the readers
//!    since. A node's hazard predecessors are that frontier over its extents: a reader depends on the last
//!    writer; a writer on the last writer and every reader since. Every other hazard pair is implied
//!    transitively (an earlier access of a byte conflicts with that byte's later writer), so the frontier's
//!    closure equals the closure of the full hazard relation. O(a log a + e).
//! 2. Explicit edges are added; Kahn's algorithm with a min-heap gives the order (recording order where
//!    edges allow) and finds cycles.
//! 3. In that order, each node keeps a predecessor `p` iff `p` is not an ancestor of another predecessor:
//!    predecessors are visited latest first and ancestor bitsets (triangular, n²/2 bits) are OR-ed in.
//!    O(e · n/64).
//! 4. Each kept edge carries the hazard kinds computed directly from the two nodes' declared accesses.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::PlanError;
use crate::frontier::AccessFrontier;
use crate::graph::{Access, Arg, Graph, NodeId, NodeOp, SlotId};
use crate::lanes::Lanes;

/// Hazard kinds carried by an edge, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hazards(pub u8);

impl Hazards {
    pub const RAW: Hazards = Hazards(1);
    pub const WAR: Hazards = Hazards(2);
    pub const WAW: Hazards = Hazards(4);
    pub fn contains(self, other: Hazards) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// True when the consumer must see the producer's writes (RAW); WAR/WAW need only execution order.
    pub fn needs_visibility(self) -> bool {
        self.contains(Hazards::RAW)
    }
    pub fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.contains(Hazards::RAW) {
            v.push("RAW");
        }
        if self.contains(Hazards::WAR) {
            v.push("WAR");
        }
        if self.contains(Hazards::WAW) {
            v.push("WAW");
        }
        v
    }
}

impl std::ops::BitOr for Hazards {
    type Output = Hazards;
    fn bitor(self, o: Hazards) -> Hazards {
        Hazards(self.0 | o.0)
    }
}

/// The hazard kinds between an earlier access `a` and a later access `b` of overlapping bytes.
pub fn hazard_between(a: Access, b: Access) -> Hazards {
    let mut h = Hazards::default();
    if a.writes() && b.reads() {
        h = h | Hazards::RAW;
    }
    if a.reads() && b.writes() {
        h = h | Hazards::WAR;
    }
    if a.writes() && b.writes() {
        h = h | Hazards::WAW;
    }
    h
}

/// One ordering the plan keeps: `from` completes before `to` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Edge {
    pub from: NodeId,
    pub to: NodeId,
    /// Direct hazards between the two nodes' declared accesses (empty for a pure explicit edge).
    pub hazards: Hazards,
    /// The user asked for this ordering explicitly.
    pub explicit: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Upper bound on lanes (streams/queues) for backends that submit to several; 1..=64.
    pub max_lanes: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions { max_lanes: 4 }
    }
}

/// A compiled plan: the graph, its minimal edges, an order, lanes and a fingerprint. Immutable.
#[derive(Clone, Debug)]
pub struct Plan {
    graph: Graph,
    options: PlanOptions,
    edges: Vec<Edge>,
    preds: Vec<Vec<u32>>,
    succs: Vec<Vec<u32>>,
    /// Per node, the earlier nodes it has a direct hazard with on the access frontier (before the
    /// reduction; explicit edges not included).
    hazard_preds: Vec<Vec<u32>>,
    order: Vec<NodeId>,
    lanes: Lanes,
    fingerprint: u64,
    slot_uses: Vec<Vec<(NodeId, usize)>>,
}

impl Plan {
    /// Plans `graph` with default options.
    pub fn compile(graph: &Graph) -> Result<Plan, PlanError> {
        Self::compile_with(graph, PlanOptions::default())
    }

    pub fn compile_with(graph: &Graph, options: PlanOptions) -> Result<Plan, PlanError> {
        if options.max_lanes == 0 || options.max_lanes > 64 {
            return Err(PlanError::BadOption(format!("max_lanes must be 1..=64, got {}", options.max_lanes)));
        }
        if let Some((k, p)) = graph.kernels().iter().find_map(|k| k.pending().map(|p| (k, p))) {
            return Err(PlanError::PendingAccess { kernel: k.name.clone(), param: p.name.clone() });
        }
        let n = graph.nodes().len();
        let mut preds = hazard_frontier_preds(graph);
        let mut hazard_preds = preds.clone();
        for p in &mut hazard_preds {
            p.sort_unstable();
            p.dedup();
        }
        for (v, node) in graph.nodes().iter().enumerate() {
            for a in &node.after {
                preds[v].push(a.0);
            }
            preds[v].sort_unstable();
            preds[v].dedup();
        }
        let order = topo_order(n, &preds)?;
        // Ancestor bitsets (n²/16 bytes) while they fit the budget; past it a search whose memory is
        // O(nodes + edges). Both give the exact transitive reduction (a test compares them).
        let kept = if ancestor_words(n) as u64 * 8 <= PLAN_MEMORY_BUDGET { reduce(n, &preds, &order)? } else { reduce_by_search(n, &preds, &order) };
        let mut edges = Vec::new();
        for (v, ps) in kept.iter().enumerate() {
            let to = NodeId(v as u32);
            for &p in ps {
                let from = NodeId(p);
                let explicit = graph.node(to).after.contains(&from);
                edges.push(Edge { from, to, hazards: direct_hazards(graph, from, to), explicit });
            }
        }
        Ok(Self::assemble(graph.clone(), options, edges, order, hazard_preds))
    }

    fn assemble(graph: Graph, options: PlanOptions, mut edges: Vec<Edge>, order: Vec<NodeId>, hazard_preds: Vec<Vec<u32>>) -> Plan {
        let n = graph.nodes().len();
        edges.sort_unstable_by_key(|e| (e.from, e.to));
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        for e in &edges {
            preds[e.to.index()].push(e.from.0);
            succs[e.from.index()].push(e.to.0);
        }
        let lanes = Lanes::build(&order, &preds, options.max_lanes);
        let mut slot_uses = vec![Vec::new(); graph.slots().len()];
        for (v, node) in graph.nodes().iter().enumerate() {
            if let NodeOp::Kernel { args, .. } = &node.op {
                for (i, a) in args.iter().enumerate() {
                    if let Arg::Slot(s) = a {
                        slot_uses[s.index()].push((NodeId(v as u32), i));
                    }
                }
            }
        }
        let fingerprint = crate::fingerprint::fingerprint(&graph, options.max_lanes);
        Plan { graph, options, edges, preds, succs, hazard_preds, order, lanes, fingerprint, slot_uses }
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    pub fn options(&self) -> PlanOptions {
        self.options
    }
    /// The kept edges, sorted by (from, to).
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }
    pub fn node_count(&self) -> usize {
        self.graph.nodes().len()
    }
    /// Direct predecessors of a node in the reduced graph.
    pub fn preds(&self, n: NodeId) -> &[u32] {
        &self.preds[n.index()]
    }
    pub fn succs(&self, n: NodeId) -> &[u32] {
        &self.succs[n.index()]
    }
    /// The earlier nodes `n` has a direct hazard with on the access frontier, ascending: for every byte
    /// it touches, that byte's last writer, and (where `n` writes it) the readers since. Every hazard of
    /// `n` with an earlier node is one of these or implied through them byte by byte, which makes them
    /// what block-level ordering must honour ([`Plan::tile_relation`]); the kept edges are their
    /// transitive reduction (with the explicit edges).
    pub fn hazard_preds(&self, n: NodeId) -> &[u32] {
        &self.hazard_preds[n.index()]
    }
    /// How the blocks of `to` depend on the blocks of `from` (`crate::tiles::relation`).
    pub fn tile_relation(&self, from: NodeId, to: NodeId) -> crate::tiles::TileRelation {
        crate::tiles::relation(&self.graph, from, to)
    }
    /// A topological order: recording order wherever the explicit edges allow it.
    pub fn order(&self) -> &[NodeId] {
        &self.order
    }
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }
    /// Each node's dependency level, by node index: 0 without predecessors, else one more than its
    /// highest predecessor's (the edges of the longest path to it). Nodes of one level have no edge
    /// between them, so a single queue orders the plan with one barrier between consecutive levels.
    pub fn levels(&self) -> Vec<u32> {
        let mut level = vec![0u32; self.node_count()];
        for &v in &self.order {
            level[v.index()] = self.preds(v).iter().map(|&u| level[u as usize] + 1).max().unwrap_or(0);
        }
        level
    }
    /// A stable 64-bit fingerprint of everything that shapes the plan (not slot values).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    /// The (node, arg index) pairs that read a slot.
    pub fn slot_uses(&self, slot: SlotId) -> &[(NodeId, usize)] {
        &self.slot_uses[slot.index()]
    }
    pub fn edge(&self, from: NodeId, to: NodeId) -> Option<&Edge> {
        self.edges.binary_search_by_key(&(from, to), |e| (e.from, e.to)).ok().map(|i| &self.edges[i])
    }

    /// A copy of this plan with one edge removed: a deliberately WRONG plan, for testing that checkers
    /// and differential tests catch a missing ordering. Never use it to run real work.
    #[doc(hidden)]
    pub fn without_edge_for_testing(&self, from: NodeId, to: NodeId) -> Plan {
        let edges = self.edges.iter().copied().filter(|e| !(e.from == from && e.to == to)).collect();
        Self::assemble(self.graph.clone(), self.options, edges, self.order.clone(), self.hazard_preds.clone())
    }

    /// A human explanation of every edge: which params of which nodes conflict on which bytes.
    pub fn explain(&self) -> String {
        let g = &self.graph;
        let mut s = String::new();
        for e in &self.edges {
            let kinds = if e.hazards.is_empty() { "explicit".to_string() } else { e.hazards.names().join("+") };
            s.push_str(&format!("{} -> {}: {}", g.describe_node(e.from), g.describe_node(e.to), kinds));
            if e.explicit && !e.hazards.is_empty() {
                s.push_str(" (also explicit)");
            }
            s.push('\n');
            let tiled = !g.node(e.from).tiles.is_empty() || !g.node(e.to).tiles.is_empty();
            if tiled && !e.hazards.is_empty() {
                s.push_str(&format!("    {}\n", self.tile_relation(e.from, e.to).describe()));
            }
            for a in g.accesses(e.from) {
                for b in g.accesses(e.to) {
                    let h = hazard_between(a.access, b.access);
                    if a.root == b.root && a.start < b.end && b.start < a.end && !h.is_empty() {
                        let (lo, hi) = (a.start.max(b.start), a.end.min(b.end));
                        s.push_str(&format!(
                            "    {}: `{}` {} / `{}` {} on `{}` bytes [{lo}, {hi})\n",
                            h.names().join("+"),
                            g.param_name(e.from, a.param),
                            a.access.as_str(),
                            g.param_name(e.to, b.param),
                            b.access.as_str(),
                            g.buffer(a.root).name
                        ));
                    }
                }
            }
        }
        s
    }
}

/// Hazard kinds between two nodes' declared accesses, `from` taken as the earlier.
pub fn direct_hazards(g: &Graph, from: NodeId, to: NodeId) -> Hazards {
    let mut h = Hazards::default();
    g.for_each_access(from, |a| {
        g.for_each_access(to, |b| {
            if a.root == b.root && a.start < b.end && b.start < a.end {
                h = h | hazard_between(a.access, b.access);
            }
        })
    });
    h
}

/// For every node, its hazard-frontier predecessors (unsorted, may repeat).
fn hazard_frontier_preds(g: &Graph) -> Vec<Vec<u32>> {
    let n = g.nodes().len();
    let mut frontier = AccessFrontier::new(g.buffers().len());
    let mut preds = vec![Vec::new(); n];
    let mut acc = Vec::new();
    for (v, pv) in preds.iter_mut().enumerate() {
        acc.clear();
        g.for_each_access(NodeId(v as u32), |a| acc.push(a));
        for a in &acc {
            frontier.conflicts(a, |u, _, _| pv.push(u));
        }
        frontier.record(v as u32, &acc);
    }
    preds
}

/// Kahn's algorithm, smallest node first; on a cycle, returns one cycle's nodes.
fn topo_order(n: usize, preds: &[Vec<u32>]) -> Result<Vec<NodeId>, PlanError> {
    let mut indeg: Vec<u32> = preds.iter().map(|p| p.len() as u32).collect();
    let mut succs = vec![Vec::new(); n];
    for (v, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p as usize].push(v as u32);
        }
    }
    let mut heap: BinaryHeap<Reverse<u32>> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(v)) = heap.pop() {
        order.push(NodeId(v));
        for &s in &succs[v as usize] {
            indeg[s as usize] -= 1;
            if indeg[s as usize] == 0 {
                heap.push(Reverse(s));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every unemitted node has an unemitted predecessor: walk predecessors until one repeats.
    let start = (0..n).find(|&v| indeg[v] > 0).expect("some node was not emitted");
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    let mut v = start;
    while seen[v] == usize::MAX {
        seen[v] = path.len();
        path.push(v as u32);
        v = *preds[v].iter().find(|&&p| indeg[p as usize] > 0).expect("an unemitted node has an unemitted pred") as usize;
    }
    let mut cycle = path[seen[v]..].to_vec();
    cycle.reverse(); // walked against the edges; report in execution direction
    let min_at = cycle.iter().enumerate().min_by_key(|(_, &x)| x).map_or(0, |(i, _)| i);
    cycle.rotate_left(min_at);
    Err(PlanError::Cycle { cycle })
}

/// The most memory the planner's ancestor bitsets may take: n²/16 bytes for n nodes, so up to about
/// 227,000 nodes. A larger graph is reduced by a search whose memory is O(nodes + edges) instead.
pub const PLAN_MEMORY_BUDGET: u64 = 3 << 30;

/// 64-bit words of the triangular ancestor bitsets of `n` nodes (the node at position p: ceil(p/64)).
fn ancestor_words(n: usize) -> usize {
    (0..n).map(|p| p.div_ceil(64)).sum()
}

/// The same reduction as [`reduce`] without ancestor sets: for each node, its candidate predecessors
/// latest first; a candidate already reached backwards from a kept (later) one is redundant, else it
/// is kept and its ancestors are walked, through the edges kept so far (which have the full graph's
/// reachability), down to the earliest candidate's position only. Memory: positions, one visit stamp
/// per node and a stack, O(nodes + edges). Time: O(edges) on chains (one candidate each: no walk),
/// the span between a node and its earliest candidate otherwise.
fn reduce_by_search(n: usize, preds: &[Vec<u32>], order: &[NodeId]) -> Vec<Vec<u32>> {
    let mut pos = vec![0usize; n];
    for (i, v) in order.iter().enumerate() {
        pos[v.index()] = i;
    }
    let mut kept: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut visited = vec![0u32; n];
    let mut stamp = 0u32;
    let mut cands: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    for v in order {
        let v = v.index();
        cands.clear();
        cands.extend_from_slice(&preds[v]);
        if cands.len() <= 1 {
            kept[v] = cands.clone();
            continue;
        }
        cands.sort_unstable_by_key(|&u| std::cmp::Reverse(pos[u as usize]));
        let floor = pos[*cands.last().unwrap_or(&0) as usize];
        stamp = stamp.wrapping_add(1);
        if stamp == 0 {
            visited.fill(0);
            stamp = 1;
        }
        let mut mine = Vec::new();
        for &u in &cands {
            if visited[u as usize] == stamp {
                continue; // an ancestor of a kept, later candidate
            }
            mine.push(u);
            stack.clear();
            stack.extend(kept[u as usize].iter().copied().filter(|&w| pos[w as usize] >= floor));
            while let Some(x) = stack.pop() {
                if visited[x as usize] == stamp {
                    continue;
                }
                visited[x as usize] = stamp;
                stack.extend(kept[x as usize].iter().copied().filter(|&w| pos[w as usize] >= floor && visited[w as usize] != stamp));
            }
        }
        mine.sort_unstable();
        kept[v] = mine;
    }
    kept
}

/// Keeps, for each node, the predecessors that are not ancestors of another predecessor.
fn reduce(n: usize, preds: &[Vec<u32>], order: &[NodeId]) -> Result<Vec<Vec<u32>>, PlanError> {
    let mut pos = vec![0usize; n];
    for (i, v) in order.iter().enumerate() {
        pos[v.index()] = i;
    }
    // Triangular bitsets: the node at position p stores its ancestors' positions (< p) in ceil(p/64) words.
    let words = |p: usize| p.div_ceil(64);
    let mut offset = vec![0usize; n + 1];
    for p in 0..n {
        offset[p + 1] = offset[p] + words(p);
    }
    let bytes = offset[n] as u64 * 8;
    let mut anc: Vec<u64> = Vec::new();
    anc.try_reserve_exact(offset[n]).map_err(|_| PlanError::OutOfMemory { nodes: n, bytes })?;
    anc.resize(offset[n], 0);
    let mut covered = vec![0u64; words(n)];
    let mut kept = vec![Vec::new(); n];
    let mut ps: Vec<usize> = Vec::new();
    for (p_v, v) in order.iter().enumerate() {
        ps.clear();
        ps.extend(preds[v.index()].iter().map(|&u| pos[u as usize]));
        ps.sort_unstable_by(|a, b| b.cmp(a));
        let wv = words(p_v);
        covered[..wv].fill(0);
        for &pu in ps.iter() {
            if covered[pu / 64] >> (pu % 64) & 1 == 0 {
                kept[v.index()].push(order[pu].0);
                let src = &anc[offset[pu]..offset[pu + 1]];
                for (c, a) in covered.iter_mut().zip(src) {
                    *c |= *a;
                }
                covered[pu / 64] |= 1 << (pu % 64);
            }
        }
        anc[offset[p_v]..offset[p_v + 1]].copy_from_slice(&covered[..wv]);
        kept[v.index()].sort_unstable();
    }
    Ok(kept)
}

impl Plan {
    /// The plan as one JSON object: `nodes` (count), `edges` ([from, to] pairs), `hazards` (per edge),
    /// `explicit` (per edge), `order`, `lanes` (node lists), `waits` (cross-lane waits) and `fingerprint`.
    pub fn to_json(&self) -> serde_json::Value {
        let g = &self.graph;
        serde_json::json!({
            "nodes": self.node_count(),
            "buffers": g.buffers().len(),
            "kernels": g.kernels().iter().map(|k| k.name.clone()).collect::<Vec<_>>(),
            "edges": self.edges.iter().map(|e| [e.from.0, e.to.0]).collect::<Vec<_>>(),
            "hazards": self.edges.iter().map(|e| e.hazards.names()).collect::<Vec<_>>(),
            "explicit": self.edges.iter().map(|e| e.explicit).collect::<Vec<_>>(),
            "order": self.order.iter().map(|n| n.0).collect::<Vec<_>>(),
            "lanes": self.lanes.all().iter().map(|l| l.iter().map(|n| n.0).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "waits": (0..self.node_count()).map(|v| self.lanes.waits(NodeId(v as u32)).iter().map(|n| n.0).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "fingerprint": format!("{:016x}", self.fingerprint),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift64;

    /// Random DAGs given as candidate predecessors (in recording order, some far back, some nodes
    /// with none): the search gives exactly the bitsets' reduction.
    #[test]
    fn the_search_reduction_equals_the_bitset_reduction() {
        let mut r = XorShift64::seeded(0x7e57);
        for case in 0..400 {
            let n = 1 + r.below(160) as usize;
            let preds: Vec<Vec<u32>> = (0..n)
                .map(|v| {
                    let k = if v == 0 { 0 } else { r.below(6) as usize };
                    let mut p: Vec<u32> = (0..k).map(|_| r.below(v as u64) as u32).collect();
                    if case % 3 == 0 && v > 0 {
                        p.push((v - 1) as u32); // chain-like
                    }
                    p.sort_unstable();
                    p.dedup();
                    p
                })
                .collect();
            let order: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
            assert_eq!(reduce_by_search(n, &preds, &order), reduce(n, &preds, &order).unwrap(), "case {case}, {n} nodes");
        }
    }
}
