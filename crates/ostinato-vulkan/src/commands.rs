//! Pure translation of a [`Plan`] into the Vulkan backend's command list: the nodes by dependency level
//! (a node's level is one more than its predecessors' highest; plan order within a level), and a
//! pipeline barrier only before a node that has an edge from a node recorded since the last barrier:
//! one barrier per level, as few as any single command buffer can have (each edge of the longest path
//! needs its own). In plan order, side-by-side chains would take a barrier per node (`P1 F1 P2 F2 …`).
//! Golden tests pin it; [`check`] proves a list orders every edge and makes every producer's writes
//! visible (a list with a barrier deleted fails it).
//!
//! The memory model (Vulkan 1.3 spec, "Synchronization and Cache Control": §7.1 execution and memory
//! dependencies, §7.6 pipeline barriers, §7.7.3 buffer memory barriers): a barrier's first
//! synchronisation scope is every command before it in submission order and its second every command
//! after it, so one barrier orders all pending producers before the node that needs them. A
//! write-after-read hazard needs only that execution dependency; read-after-write and write-after-write
//! also need the producer's writes made available and visible, which the barrier's buffer memory
//! barriers do for exactly the bytes the pending producers wrote (not only the bytes this consumer
//! touches: a later consumer whose edge the plan reduced away relies on the same barrier).

use ostinato::{BufferId, NodeId, NodeOp, Plan};

/// One command of the recorded buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// Orders every earlier command before every later one; `visible` lists the bytes `(root, start,
    /// end)` whose writes it makes visible (empty: an execution dependency only). `edges` are the plan
    /// edges it is there for.
    Barrier { visible: Vec<(BufferId, u64, u64)>, edges: Vec<(NodeId, NodeId)> },
    /// A node: a dispatch, a `vkCmdCopyBuffer` or a `vkCmdFillBuffer`.
    Node(NodeId),
}

/// The write extents of node `n` on root buffers.
pub(crate) fn writes(plan: &Plan, n: NodeId) -> Vec<(BufferId, u64, u64)> {
    plan.graph().accesses(n).into_iter().filter(|a| a.access.writes()).map(|a| (a.root, a.start, a.end)).collect()
}

/// Byte ranges sorted, with overlapping and adjacent ranges of one root merged (one buffer memory
/// barrier each: a fan's consumers writing neighbouring slices need one).
pub(crate) fn coalesce(mut ranges: Vec<(BufferId, u64, u64)>) -> Vec<(BufferId, u64, u64)> {
    ranges.sort();
    let mut out: Vec<(BufferId, u64, u64)> = Vec::with_capacity(ranges.len());
    for (r, s, e) in ranges {
        match out.last_mut() {
            Some(last) if last.0 == r && s <= last.2 => last.2 = last.2.max(e),
            _ => out.push((r, s, e)),
        }
    }
    out
}

/// Plan order, stably sorted by dependency level ([`Plan::levels`]).
pub fn level_order(plan: &Plan) -> Vec<NodeId> {
    let level = plan.levels();
    let mut order = plan.order().to_vec();
    order.sort_by_key(|v| level[v.index()]);
    order
}

/// The command list for `plan`.
pub fn commands(plan: &Plan) -> Vec<Cmd> {
    let mut out = Vec::with_capacity(plan.node_count() * 2);
    let mut pending: Vec<NodeId> = Vec::new();
    let mut is_pending = vec![false; plan.node_count()];
    for v in level_order(plan) {
        let edges: Vec<(NodeId, NodeId)> = plan.preds(v).iter().filter(|&&u| is_pending[u as usize]).map(|&u| (NodeId(u), v)).collect();
        if !edges.is_empty() {
            let visible = coalesce(pending.iter().flat_map(|&u| writes(plan, u)).collect());
            out.push(Cmd::Barrier { visible, edges });
            for u in pending.drain(..) {
                is_pending[u.index()] = false;
            }
        }
        out.push(Cmd::Node(v));
        pending.push(v);
        is_pending[v.index()] = true;
    }
    out
}

/// Checks that `cmds` runs every node once, orders every edge of `plan` with a barrier between its
/// ends, and that the first barrier after each node makes all of its writes visible.
pub fn check(plan: &Plan, cmds: &[Cmd]) -> Result<(), String> {
    let mut pos = vec![usize::MAX; plan.node_count()];
    for (i, c) in cmds.iter().enumerate() {
        if let Cmd::Node(n) = c {
            if pos[n.index()] != usize::MAX {
                return Err(format!("node n{n} is recorded twice"));
            }
            pos[n.index()] = i;
        }
    }
    if let Some(n) = pos.iter().position(|p| *p == usize::MAX) {
        return Err(format!("node n{n} is not recorded"));
    }
    let next_barrier = |from: usize| cmds[from..].iter().position(|c| matches!(c, Cmd::Barrier { .. })).map(|i| i + from);
    for e in plan.edges() {
        let (u, v) = (pos[e.from.index()], pos[e.to.index()]);
        match next_barrier(u) {
            Some(b) if b < v => {
                let Cmd::Barrier { visible, .. } = &cmds[b] else { unreachable!("next_barrier finds barriers") };
                for w in writes(plan, e.from) {
                    if !visible.iter().any(|x| x.0 == w.0 && x.1 <= w.1 && w.2 <= x.2) {
                        return Err(format!("the barrier after n{} does not make its write of bytes {}..{} of root {} visible", e.from, w.1, w.2, w.0));
                    }
                }
            }
            _ => return Err(format!("edge n{} -> n{} has no barrier between its ends", e.from, e.to)),
        }
    }
    Ok(())
}

/// Whether a node is a kernel (a dispatch) rather than a copy or fill (a transfer).
pub fn is_dispatch(plan: &Plan, n: NodeId) -> bool {
    matches!(plan.graph().node(n).op, NodeOp::Kernel { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, Arg, Graph, KernelSig, Launch, Scalar, ScalarType, Slice};

    fn k(g: &mut Graph) -> ostinato::KernelId {
        g.add_kernel(KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n", ScalarType::U32)).unwrap()
    }

    #[test]
    fn independent_nodes_share_no_barrier_and_a_war_edge_makes_nothing_visible() {
        let mut g = Graph::new();
        let [a, b, c] = ["a", "b", "c"].map(|n| g.add_buffer(n, 1024).unwrap());
        let kk = k(&mut g);
        let n = Arg::Scalar(Scalar::u32(1));
        let l = Launch::linear(1, 256);
        g.add_launch(kk, l, &[Arg::Whole(a), Arg::Whole(c), n], &[]).unwrap(); // n0 writes a, reads c
        g.add_launch(kk, l, &[Arg::Whole(b), Arg::Whole(c), n], &[]).unwrap(); // n1 writes b: independent
        g.add_launch(kk, l, &[Arg::Buffer(Slice { buffer: c, offset: 0, len: 512 }), Arg::Whole(a), n], &[]).unwrap(); // n2: RAW on a, WAR on c
        let plan = Plan::compile(&g).unwrap();
        let cmds = commands(&plan);
        assert_eq!(
            cmds,
            vec![
                Cmd::Node(NodeId(0)),
                Cmd::Node(NodeId(1)),
                Cmd::Barrier { visible: vec![(a, 0, 1024), (b, 0, 1024)], edges: vec![(NodeId(0), NodeId(2)), (NodeId(1), NodeId(2))] },
                Cmd::Node(NodeId(2)),
            ]
        );
        check(&plan, &cmds).unwrap();
        // Delete the barrier, or drop a byte range from it: both are caught.
        let without: Vec<Cmd> = cmds.iter().filter(|c| !matches!(c, Cmd::Barrier { .. })).cloned().collect();
        assert!(check(&plan, &without).unwrap_err().contains("no barrier between"));
        let mut narrow = cmds.clone();
        narrow[2] = Cmd::Barrier { visible: vec![(b, 0, 1024)], edges: vec![] };
        assert!(check(&plan, &narrow).unwrap_err().contains("does not make its write"));
    }

    #[test]
    fn neighbouring_writes_share_one_range() {
        let b = BufferId(0);
        assert_eq!(
            coalesce(vec![(b, 64, 128), (b, 0, 64), (BufferId(1), 0, 4), (b, 200, 300), (b, 250, 260)]),
            vec![(b, 0, 128), (b, 200, 300), (BufferId(1), 0, 4)]
        );
    }

    #[test]
    fn a_write_after_read_alone_is_an_execution_dependency() {
        let mut g = Graph::new();
        let [a, c] = ["a", "c"].map(|n| g.add_buffer(n, 1024).unwrap());
        let kk = g.add_kernel(KernelSig::new("r").buffer("x", Access::Read).scalar("n", ScalarType::U32)).unwrap();
        g.add_launch(kk, Launch::linear(1, 256), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[]).unwrap();
        g.add_fill(g.whole(a), 7, &[]).unwrap();
        g.add_copy(g.whole(a), g.whole(c), &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        let cmds = commands(&plan);
        assert_eq!(cmds[1], Cmd::Barrier { visible: vec![], edges: vec![(NodeId(0), NodeId(1))] });
        assert_eq!(cmds[3], Cmd::Barrier { visible: vec![(a, 0, 1024)], edges: vec![(NodeId(1), NodeId(2))] });
        check(&plan, &cmds).unwrap();
    }

    #[test]
    fn side_by_side_chains_share_their_barriers() {
        // Ten pairs producer -> consumer on their own buffers, recorded in plan order P0 F0 P1 F1 …:
        // one barrier for all ten edges.
        let mut g = Graph::new();
        let kk = k(&mut g);
        let (n, l) = (Arg::Scalar(Scalar::u32(1)), Launch::linear(1, 256));
        for i in 0..10 {
            let [p, f] = ["p", "f"].map(|x| g.add_buffer(format!("{x}{i}"), 256).unwrap());
            g.add_launch(kk, l, &[Arg::Whole(p), Arg::Whole(f), n], &[]).unwrap();
            g.add_launch(kk, l, &[Arg::Whole(f), Arg::Whole(p), n], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let cmds = commands(&plan);
        check(&plan, &cmds).unwrap();
        let barriers: Vec<usize> = cmds.iter().enumerate().filter(|(_, c)| matches!(c, Cmd::Barrier { .. })).map(|(i, _)| i).collect();
        assert_eq!(barriers, vec![10], "{cmds:?}");
    }

    #[test]
    fn random_plans_take_one_barrier_per_level_and_order_every_edge() {
        let mut r = ostinato::rng::XorShift64::seeded(0x1e7e1);
        for seed in 0..200 {
            let mut g = Graph::new();
            let bufs: Vec<BufferId> = (0..4).map(|i| g.add_buffer(format!("b{i}"), 1024).unwrap()).collect();
            let kk = k(&mut g);
            for _ in 0..(2 + r.below(14)) {
                let o = r.below(4) as usize;
                let (o, i) = (bufs[o], bufs[(o + 1 + r.below(3) as usize) % 4]);
                let off = 256 * r.below(3);
                let out = Arg::Buffer(Slice { buffer: o, offset: off, len: 256 });
                g.add_launch(kk, Launch::linear(1, 256), &[out, Arg::Whole(i), Arg::Scalar(Scalar::u32(1))], &[]).unwrap();
            }
            let plan = Plan::compile(&g).unwrap();
            let cmds = commands(&plan);
            check(&plan, &cmds).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // The longest path's edge count (`Plan::levels`, checked against a brute-force oracle in
            // `plan_oracle`): no single command buffer orders it with fewer barriers.
            let barriers = cmds.iter().filter(|c| matches!(c, Cmd::Barrier { .. })).count();
            assert_eq!(barriers, plan.levels().into_iter().max().unwrap_or(0) as usize, "seed {seed}: {cmds:?}");
        }
    }
}
