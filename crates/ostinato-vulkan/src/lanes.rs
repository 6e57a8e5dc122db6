//! Pure translation of a plan into command segments for several queues: each plan lane on a queue of
//! its own, cut into segments where an edge crosses lanes — a consumer's segment waits (a timeline
//! semaphore) for the producer's segment, which ends after the producer — and, within a lane, a
//! pipeline barrier before a node with an edge from a node of its lane recorded since the last
//! barrier (as [`crate::commands`] does for one queue). Golden tests pin it; [`check`] proves every
//! edge ordered.
//!
//! Why it is correct (Vulkan 1.3, "Synchronization and Cache Control"): a semaphore signal operation's
//! first synchronisation scope is every command submitted earlier to its queue, with all their memory
//! accesses made available; a wait operation's second scope is every command of its batch and later,
//! with the memory made visible. So a wait on segment `k` of a lane orders every node of that lane up
//! to the end of segment `k` before the waiting segment, on any queue.

use ostinato::{BufferId, NodeId, Plan};

use crate::commands::{coalesce, writes, Cmd};

/// One command buffer of a lane: its commands, and the segments (lane, index) it waits for in the
/// same replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub cmds: Vec<Cmd>,
    pub waits: Vec<(usize, usize)>,
}

/// Each lane's segments, in lane order.
pub fn segments(plan: &Plan) -> Vec<Vec<Segment>> {
    let lanes = plan.lanes();
    let mut seg_of = vec![(usize::MAX, usize::MAX); plan.node_count()];
    let mut out: Vec<Vec<Segment>> = vec![Vec::new(); lanes.count()];
    // Lanes are recorded in plan order, so a producer's segment exists before its consumer's.
    let mut pending: Vec<Vec<NodeId>> = vec![Vec::new(); lanes.count()];
    let mut open = vec![false; lanes.count()];
    for &v in plan.order() {
        let l = lanes.lane_of(v);
        let cross: Vec<(usize, usize)> = plan.preds(v).iter().map(|&u| NodeId(u)).filter(|&u| lanes.lane_of(u) != l).map(|u| seg_of[u.index()]).collect();
        if !open[l] || !cross.is_empty() {
            out[l].push(Segment { cmds: Vec::new(), waits: Vec::new() });
            open[l] = true;
        }
        let seg = out[l].last_mut().expect("a segment was just opened");
        for w in cross {
            if !seg.waits.contains(&w) {
                seg.waits.push(w);
            }
        }
        let edges: Vec<(NodeId, NodeId)> = plan.preds(v).iter().map(|&u| NodeId(u)).filter(|u| pending[l].contains(u)).map(|u| (u, v)).collect();
        if !edges.is_empty() {
            let visible: Vec<(BufferId, u64, u64)> = coalesce(pending[l].iter().flat_map(|&u| writes(plan, u)).collect());
            seg.cmds.push(Cmd::Barrier { visible, edges });
            pending[l].clear();
        }
        seg.cmds.push(Cmd::Node(v));
        pending[l].push(v);
        seg_of[v.index()] = (l, out[l].len() - 1);
        // A node another lane waits for ends its segment (the segment's signal follows it).
        if plan.succs(v).iter().any(|&w| lanes.lane_of(NodeId(w)) != l) {
            open[l] = false;
        }
    }
    out
}

/// Checks that `segs` runs every node once, that an edge within a lane has a barrier between its ends
/// (in the lane's commands, across segments) making the producer's writes visible, and that an edge
/// across lanes has its consumer's segment waiting for the producer's segment or a later one of its lane.
pub fn check(plan: &Plan, segs: &[Vec<Segment>]) -> Result<(), String> {
    let mut at = vec![None; plan.node_count()];
    for (l, lane) in segs.iter().enumerate() {
        let mut i = 0usize;
        for (k, s) in lane.iter().enumerate() {
            for c in &s.cmds {
                if let Cmd::Node(n) = c {
                    if at[n.index()].replace((l, k, i)).is_some() {
                        return Err(format!("node n{n} is recorded twice"));
                    }
                }
                i += 1;
            }
        }
    }
    if let Some(n) = at.iter().position(Option::is_none) {
        return Err(format!("node n{n} is not recorded"));
    }
    for e in plan.edges() {
        let (Some((lu, ku, iu)), Some((lv, kv, iv))) = (at[e.from.index()], at[e.to.index()]) else { unreachable!("checked above") };
        if lu == lv {
            let flat: Vec<&Cmd> = segs[lu].iter().flat_map(|s| &s.cmds).collect();
            let b = flat[iu..iv].iter().position(|c| matches!(c, Cmd::Barrier { .. })).map(|p| p + iu);
            let Some(Cmd::Barrier { visible, .. }) = b.map(|b| flat[b]) else {
                return Err(format!("edge n{} -> n{} has no barrier between its ends in lane {lu}", e.from, e.to));
            };
            for w in writes(plan, e.from) {
                if !visible.iter().any(|x| x.0 == w.0 && x.1 <= w.1 && w.2 <= x.2) {
                    return Err(format!("the barrier after n{} does not make its write of bytes {}..{} of root {} visible", e.from, w.1, w.2, w.0));
                }
            }
        } else if !segs[lv][kv].waits.iter().any(|&(l, k)| l == lu && k >= ku) {
            return Err(format!("edge n{} -> n{} crosses lanes {lu} -> {lv} without a wait on the producer's segment", e.from, e.to));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, Arg, Graph, KernelSig, Launch, PlanOptions, Scalar, ScalarType};

    fn fan() -> Plan {
        // A producer on p, two consumers into c0 and c1, a reducer reading both.
        let mut g = Graph::new();
        let [p, c0, c1, r] = ["p", "c0", "c1", "r"].map(|n| g.add_buffer(n, 1024).unwrap());
        let k = g.add_kernel(KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n", ScalarType::U32)).unwrap();
        let n = Arg::Scalar(Scalar::u32(1));
        let l = Launch::linear(1, 256);
        g.add_launch(k, l, &[Arg::Whole(p), Arg::Whole(r), n], &[]).unwrap();
        g.add_launch(k, l, &[Arg::Whole(c0), Arg::Whole(p), n], &[]).unwrap();
        g.add_launch(k, l, &[Arg::Whole(c1), Arg::Whole(p), n], &[]).unwrap();
        g.add_launch(k, l, &[Arg::Whole(r), Arg::Whole(c0), n], &[]).unwrap();
        g.add_launch(k, l, &[Arg::Whole(r), Arg::Whole(c1), n], &[]).unwrap();
        Plan::compile_with(&g, PlanOptions { max_lanes: 2 }).unwrap()
    }

    #[test]
    fn golden_a_fan_on_two_lanes() {
        let plan = fan();
        let segs = segments(&plan);
        check(&plan, &segs).unwrap();
        assert_eq!(segs.len(), 2);
        let lane_nodes: Vec<Vec<Vec<u32>>> = segs
            .iter()
            .map(|l| l.iter().map(|s| s.cmds.iter().filter_map(|c| if let Cmd::Node(n) = c { Some(n.0) } else { None }).collect()).collect())
            .collect();
        let waits: Vec<Vec<Vec<(usize, usize)>>> = segs.iter().map(|l| l.iter().map(|s| s.waits.clone()).collect()).collect();
        // Lane 0: producer (ends its segment: lane 1 waits for it), then c0 and the two reducers, the
        // second reducer waiting for lane 1's consumer; lane 1: c1 after the producer.
        assert_eq!(lane_nodes, vec![vec![vec![0], vec![1, 3], vec![4]], vec![vec![2]]], "{segs:?}");
        assert_eq!(waits, vec![vec![vec![], vec![], vec![(1, 0)]], vec![vec![(0, 0)]]]);
    }

    #[test]
    fn a_missing_wait_or_barrier_is_caught() {
        let plan = fan();
        let segs = segments(&plan);
        let mut no_wait = segs.clone();
        no_wait[1][0].waits.clear();
        assert!(check(&plan, &no_wait).unwrap_err().contains("without a wait"));
        let mut no_barrier = segs.clone();
        for s in &mut no_barrier[0] {
            s.cmds.retain(|c| !matches!(c, Cmd::Barrier { .. }));
        }
        assert!(check(&plan, &no_barrier).unwrap_err().contains("no barrier"));
    }

    #[test]
    fn random_programs_segment_correctly() {
        let mut cross = 0;
        for seed in 0..300u64 {
            let prog = ostinato_testkit::random_graphs::random_mix_program(seed, 5 + (seed as usize * 7) % 80);
            for max_lanes in 1..=4 {
                let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
                let segs = segments(&plan);
                check(&plan, &segs).unwrap_or_else(|e| panic!("seed {seed}, {max_lanes} lanes: {e}"));
                cross += segs.iter().flatten().map(|s| s.waits.len()).sum::<usize>();
            }
        }
        assert!(cross > 1000, "{cross} cross-lane waits");
    }
}
