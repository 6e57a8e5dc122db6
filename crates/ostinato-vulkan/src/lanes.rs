//! Pure translation of a plan into command segments for several queues ([`LanePlan`]): each plan lane
//! on a queue of its own, cut into segments only where a wait needs one, and, within a lane, a
//! pipeline barrier before a node with an edge from a node of its lane recorded since the last
//! barrier (as [`crate::commands`] does for one queue). Golden tests pin it; [`check`] proves every
//! edge, and every hazard between one replay and the next, ordered.
//!
//! Why it is correct (Vulkan 1.3, "Synchronization and Cache Control", "Semaphore Signaling" and
//! "Semaphore Waiting"): a semaphore signal operation's first synchronisation scope is every command
//! submitted earlier to its queue, with all their memory accesses made available; a wait operation's
//! second scope is every command of its batch *and every command later in submission order on its
//! queue*, with the memory made visible. So a wait on segment `k` of a lane orders every node of that
//! lane up to the end of segment `k` before the waiting segment and everything after it on the
//! waiting queue: what a lane learnt by one wait it knows for the rest of its segments, this replay
//! and the next ones, and a lane waits only for what it does not know yet (vector clocks: a segment
//! that completed knows everything its lane waited for before it).
//!
//! How it is cut: a producer's segment ends when a node of another lane first needs it (not after
//! every node another lane waits for: a lane's consumers of one producer share one segment and one
//! wait); a consumer that needs what its lane does not know yet starts a segment with that wait (the
//! nodes before it run without waiting for it). Replays are ordered by waits at each lane's first
//! segment for the previous replay's last segment of every lane whose nodes conflict with its own
//! (overlapping bytes, one of them writing, or an explicit edge between them; always its own lane),
//! dropped where the lane already knows it. Segments are submitted in the order they closed, each
//! after every segment it waits for, so no batch ever waits on a batch queued behind it (lanes may
//! share a queue).

use ostinato::{BufferId, NodeId, Plan};

use crate::commands::{coalesce, writes, Cmd};

/// A lane's progress: (replay, segment) — everything of the lane up to and including that segment of
/// that replay has completed.
type Point = (u64, usize);

/// Per lane, the latest point known complete (`None`: nothing yet).
type Clock = Vec<Option<Point>>;

fn join(into: &mut Clock, other: &Clock) {
    for (a, b) in into.iter_mut().zip(other) {
        if *b > *a {
            *a = *b;
        }
    }
}

/// One command buffer of a lane: its commands, and the segments (lane, index) of the same replay it
/// waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub cmds: Vec<Cmd>,
    pub waits: Vec<(usize, usize)>,
}

/// What a replay on several queues submits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanePlan {
    /// Each lane's segments, in lane order.
    pub lanes: Vec<Vec<Segment>>,
    /// Per lane: the lanes whose last segment of the previous replay its first segment waits for
    /// (from the second replay on).
    pub replay_waits: Vec<Vec<usize>>,
    /// Every segment (lane, index) in the order they closed: each after every segment it waits for.
    pub order: Vec<(usize, usize)>,
}

/// What one replay (from the second on) submits: `vkQueueSubmit` calls, batches (one per segment),
/// semaphore waits, and the waits on a semaphore another queue signals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneCounts {
    pub queue_submits: usize,
    pub batches: usize,
    pub waits: usize,
    pub cross_queue_waits: usize,
}

/// Segments being cut: each lane's, which are open, what each lane knows complete, and each closed
/// segment's clock once it completed (replay 0 standing for "this replay").
struct Cutter {
    segs: Vec<Vec<Segment>>,
    open: Vec<bool>,
    known: Vec<Clock>,
    after: Vec<Vec<Clock>>,
    order: Vec<(usize, usize)>,
}

impl Cutter {
    fn close(&mut self, l: usize) {
        if !self.open[l] {
            return;
        }
        self.open[l] = false;
        let k = self.segs[l].len() - 1;
        let mut c = self.known[l].clone();
        c[l] = Some((0, k));
        self.after[l].push(c);
        self.order.push((l, k));
    }

    /// Ends lane `m`'s open segment right after its command `pos` (a node): the commands after it stay
    /// open as the lane's next segment (with no wait of its own: its lane knows what the closed one
    /// waited for). The lane's command stream, and so its barriers, do not change.
    fn split(&mut self, m: usize, pos: usize, seg_of: &mut [(usize, usize, usize)]) {
        let k = self.segs[m].len() - 1;
        let rest = self.segs[m][k].cmds.split_off(pos + 1);
        self.close(m);
        if !rest.is_empty() {
            for (i, c) in rest.iter().enumerate() {
                if let Cmd::Node(w) = c {
                    seg_of[w.index()] = (m, k + 1, i);
                }
            }
            self.segs[m].push(Segment { cmds: rest, waits: Vec::new() });
            self.open[m] = true;
        }
    }

    fn knows(&self, l: usize, (m, k): (usize, usize)) -> bool {
        self.known[l][m] >= Some((0, k))
    }

    /// `targets` without those another of them implies (it completed knowing them complete).
    fn reduce(&self, targets: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let implied = |t: (usize, usize)| targets.iter().any(|&o| o != t && self.after[o.0][o.1][t.0] >= Some((0, t.1)));
        targets.iter().copied().filter(|&t| !implied(t)).collect()
    }
}

/// The plan's lanes as segments for several queues.
pub fn lower(plan: &Plan) -> LanePlan {
    let lanes = plan.lanes();
    let n = lanes.count();
    let mut c = Cutter { segs: vec![Vec::new(); n], open: vec![false; n], known: vec![vec![None; n]; n], after: vec![Vec::new(); n], order: Vec::new() };
    // Each node's lane, segment and command index in it.
    let mut seg_of = vec![(usize::MAX, usize::MAX, usize::MAX); plan.node_count()];
    // Nodes of each lane recorded since its last barrier.
    let mut pending: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for &v in plan.order() {
        let l = lanes.lane_of(v);
        // The latest node of each other lane that `v` reads after (lanes are recorded in plan order,
        // so it is recorded): its segment ends right after it, unless it ended already.
        let mut latest: Vec<Option<(usize, usize)>> = vec![None; n];
        for &u in plan.preds(v) {
            let (m, k, i) = seg_of[u as usize];
            if m != l && latest[m] < Some((k, i)) {
                latest[m] = Some((k, i));
            }
        }
        let mut targets: Vec<(usize, usize)> = Vec::new();
        for (m, at) in latest.iter().enumerate() {
            let Some((k, i)) = *at else { continue };
            if c.open[m] && k + 1 == c.segs[m].len() {
                c.split(m, i, &mut seg_of);
            }
            if !c.knows(l, (m, k)) {
                targets.push((m, k));
            }
        }
        if !targets.is_empty() {
            c.close(l);
        }
        if !c.open[l] {
            c.segs[l].push(Segment::default());
            c.open[l] = true;
        }
        let targets = c.reduce(&targets);
        for &(m, k) in &targets {
            let learnt = c.after[m][k].clone();
            join(&mut c.known[l], &learnt);
        }
        let k = c.segs[l].len() - 1;
        let seg = &mut c.segs[l][k];
        seg.waits.extend(targets);
        let edges: Vec<(NodeId, NodeId)> = plan.preds(v).iter().map(|&u| NodeId(u)).filter(|u| pending[l].contains(u)).map(|u| (u, v)).collect();
        if !edges.is_empty() {
            let visible: Vec<(BufferId, u64, u64)> = coalesce(pending[l].iter().flat_map(|&u| writes(plan, u)).collect());
            seg.cmds.push(Cmd::Barrier { visible, edges });
            pending[l].clear();
        }
        seg.cmds.push(Cmd::Node(v));
        seg_of[v.index()] = (l, k, seg.cmds.len() - 1);
        pending[l].push(v);
    }
    for l in 0..n {
        c.close(l);
    }
    let replay_waits = replay_waits(plan, &c.segs, &c.order);
    LanePlan { lanes: c.segs, replay_waits, order: c.order }
}

/// Which lanes' nodes conflict (`[m][l]`): overlapping bytes of one root with one side writing, or an
/// explicit edge between them; every lane with itself.
pub fn conflicts(plan: &Plan) -> Vec<Vec<bool>> {
    let lanes = plan.lanes();
    let n = lanes.count();
    let g = plan.graph();
    let (mut reads, mut writes) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    let mut out = vec![vec![false; n]; n];
    for v in 0..plan.node_count() {
        let l = lanes.lane_of(NodeId(v as u32));
        g.for_each_access(NodeId(v as u32), |a| {
            if a.access.reads() {
                reads[l].push((a.root, a.start, a.end));
            }
            if a.access.writes() {
                writes[l].push((a.root, a.start, a.end));
            }
        });
        for &u in &g.node(NodeId(v as u32)).after {
            let m = lanes.lane_of(u);
            out[m][l] = true;
            out[l][m] = true;
        }
    }
    let (reads, writes): (Vec<_>, Vec<_>) = (reads.into_iter().map(coalesce).collect(), writes.into_iter().map(coalesce).collect());
    for m in 0..n {
        for l in 0..n {
            out[m][l] |= m == l || overlaps(&writes[m], &writes[l]) || overlaps(&writes[m], &reads[l]) || overlaps(&reads[m], &writes[l]);
        }
    }
    out
}

/// Whether two sorted, coalesced lists of (root, start, end) share a byte.
fn overlaps(a: &[(BufferId, u64, u64)], b: &[(BufferId, u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        if x.0 == y.0 && x.1 < y.2 && y.1 < x.2 {
            return true;
        }
        if (x.0, x.2) <= (y.0, y.2) {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// Per lane, the lanes whose previous replay's last segment its first segment waits for: every
/// conflicting lane (itself included) it does not already know complete there. Replays are simulated
/// (the first has nothing before it); what a replay needs no longer changes from the second on, and
/// the second's and third's are joined.
fn replay_waits(plan: &Plan, segs: &[Vec<Segment>], order: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let n = segs.len();
    let need = conflicts(plan);
    let last: Vec<usize> = segs.iter().map(|s| s.len() - 1).collect();
    let mut known: Vec<Clock> = vec![vec![None; n]; n];
    let mut prev_last: Vec<Clock> = vec![vec![None; n]; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for r in 1..=3u64 {
        let mut after: Vec<Vec<Clock>> = segs.iter().map(|s| vec![Vec::new(); s.len()]).collect();
        for &(l, k) in order {
            for &(m, j) in &segs[l][k].waits {
                let learnt = after[m][j].clone();
                join(&mut known[l], &learnt);
            }
            if k == 0 && r > 1 {
                let done = |clock: &Clock, m: usize| clock[m] >= Some((r - 1, last[m]));
                let wanted: Vec<usize> = (0..n).filter(|&m| need[m][l] && !done(&known[l], m)).collect();
                let kept: Vec<usize> = wanted.iter().copied().filter(|&m| !wanted.iter().any(|&o| o != m && done(&prev_last[o], m))).collect();
                for &m in &kept {
                    join(&mut known[l], &prev_last[m]);
                    if !out[l].contains(&m) {
                        out[l].push(m);
                    }
                }
            }
            let mut c = known[l].clone();
            c[l] = Some((r, k));
            after[l][k] = c;
        }
        prev_last = (0..n).map(|m| after[m][last[m]].clone()).collect();
    }
    for w in &mut out {
        w.sort_unstable();
    }
    out
}

impl LanePlan {
    /// The `vkQueueSubmit` calls of one replay with lane `l` on queue `l % queues`: (queue, its
    /// batches in order). Each batch comes after every batch it waits for; a call takes every batch
    /// of its queue that is ready, so a lane's batches that wait for nothing new share a call.
    pub fn submissions(&self, queues: usize) -> Vec<(usize, Vec<(usize, usize)>)> {
        let queues = queues.max(1);
        let n = self.lanes.len();
        let mut next = vec![0usize; n];
        let mut emitted: Vec<Vec<bool>> = self.lanes.iter().map(|l| vec![false; l.len()]).collect();
        let mut left = self.order.len();
        let mut out = Vec::new();
        let ready =
            |l: usize, next: &[usize], emitted: &[Vec<bool>]| next[l] < self.lanes[l].len() && self.lanes[l][next[l]].waits.iter().all(|&(m, j)| emitted[m][j]);
        while left > 0 {
            // The first segment in closing order not yet submitted is ready (closing order is topological).
            let Some(&(first, _)) = self.order.iter().find(|&&(l, k)| !emitted[l][k]) else { break };
            let q = first % queues;
            let mut call = Vec::new();
            let mut progress = true;
            while progress {
                progress = false;
                for l in (0..n).filter(|l| l % queues == q) {
                    while ready(l, &next, &emitted) {
                        emitted[l][next[l]] = true;
                        call.push((l, next[l]));
                        next[l] += 1;
                        left -= 1;
                        progress = true;
                    }
                }
            }
            out.push((q, call));
        }
        out
    }

    /// What one replay from the second on submits with lane `l` on queue `l % queues`.
    pub fn counts(&self, queues: usize) -> LaneCounts {
        let queues = queues.max(1);
        let cross = |a: usize, b: usize| a % queues != b % queues;
        let mut c = LaneCounts { queue_submits: self.submissions(queues).len(), ..LaneCounts::default() };
        for (l, lane) in self.lanes.iter().enumerate() {
            c.batches += lane.len();
            for s in lane {
                c.waits += s.waits.len();
                c.cross_queue_waits += s.waits.iter().filter(|w| cross(w.0, l)).count();
            }
            c.waits += self.replay_waits[l].len();
            c.cross_queue_waits += self.replay_waits[l].iter().filter(|&&m| cross(m, l)).count();
        }
        c
    }
}

/// Checks `lp` against the plan: every node recorded once; `order` lists every segment once, a lane's
/// in index order, each after the segments it waits for; an edge within a lane has a barrier between
/// its ends (in the lane's commands, across segments) making the producer's writes visible; an edge
/// across lanes has its consumer's lane knowing the producer's segment complete once the consumer's
/// segment has waited; and each lane's first segment knows complete the previous replay's last
/// segment of every lane whose nodes conflict with its own. What a lane knows is simulated over three
/// replays by the rule in the module's header, from the waits alone.
pub fn check(plan: &Plan, lp: &LanePlan) -> Result<(), String> {
    let segs = &lp.lanes;
    let n = segs.len();
    let mut at = vec![None; plan.node_count()];
    for (l, lane) in segs.iter().enumerate() {
        if lane.is_empty() {
            return Err(format!("lane {l} has no segment"));
        }
        let mut i = 0usize;
        for (k, s) in lane.iter().enumerate() {
            for c in &s.cmds {
                if let Cmd::Node(v) = c {
                    if at[v.index()].replace((l, k, i)).is_some() {
                        return Err(format!("node n{v} is recorded twice"));
                    }
                }
                i += 1;
            }
        }
    }
    if let Some(v) = at.iter().position(Option::is_none) {
        return Err(format!("node n{v} is not recorded"));
    }
    let mut seen: Vec<Vec<bool>> = segs.iter().map(|l| vec![false; l.len()]).collect();
    for &(l, k) in &lp.order {
        if seen.get(l).and_then(|s| s.get(k)).is_none() || seen[l][k] || (k > 0 && !seen[l][k - 1]) {
            return Err(format!("segment {k} of lane {l} is out of order in the submission order"));
        }
        if let Some(&(m, j)) = segs[l][k].waits.iter().find(|&&(m, j)| !seen.get(m).and_then(|s| s.get(j)).copied().unwrap_or(false)) {
            return Err(format!("segment {k} of lane {l} is submitted before segment {j} of lane {m}, which it waits for"));
        }
        seen[l][k] = true;
    }
    if seen.iter().flatten().any(|s| !s) {
        return Err("the submission order leaves out a segment".into());
    }
    // What each lane knows once each of its segments has waited, in the first replay (the replays
    // after it know more); and whether later replays' first segments know the replay before.
    let last: Vec<usize> = segs.iter().map(|s| s.len() - 1).collect();
    let need = conflicts(plan);
    let mut known: Vec<Clock> = vec![vec![None; n]; n];
    let mut prev_last: Vec<Clock> = vec![vec![None; n]; n];
    let mut first_replay: Vec<Vec<Clock>> = segs.iter().map(|s| vec![Vec::new(); s.len()]).collect();
    let mut replay_error = None;
    for r in 1..=3u64 {
        let mut after: Vec<Vec<Clock>> = segs.iter().map(|s| vec![Vec::new(); s.len()]).collect();
        for &(l, k) in &lp.order {
            for &(m, j) in &segs[l][k].waits {
                let learnt = after[m][j].clone();
                join(&mut known[l], &learnt);
            }
            if k == 0 && r > 1 {
                for &m in &lp.replay_waits[l] {
                    join(&mut known[l], &prev_last[m].clone());
                }
                if let Some(m) = (0..n).find(|&m| need[m][l] && known[l][m] < Some((r - 1, last[m]))) {
                    replay_error.get_or_insert(format!(
                        "replay {r} of lane {l} may start before replay {} of lane {m}, whose nodes conflict with its own, completed",
                        r - 1
                    ));
                }
            }
            if r == 1 {
                first_replay[l][k] = known[l].clone();
            }
            let mut c = known[l].clone();
            c[l] = Some((r, k));
            after[l][k] = c;
        }
        prev_last = (0..n).map(|m| after[m][last[m]].clone()).collect();
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
        } else if first_replay[lv][kv][lu] < Some((1, ku)) {
            return Err(format!("edge n{} -> n{} crosses lanes {lu} -> {lv} without a wait on the producer's segment", e.from, e.to));
        }
    }
    replay_error.map_or(Ok(()), Err)
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

    /// The benchmark's fan (`fan/k{k}`): a producer writes `p`; `k` consumers each read `p` and write
    /// their own slice of `c`; a reducer reads all of `c`. Four lanes.
    fn bench_fan(k: u64) -> Plan {
        let mut g = Graph::new();
        let [src, p, r] = ["src", "p", "r"].map(|n| g.add_buffer(n, 4096).unwrap());
        let c = g.add_buffer("c", 4096 * k).unwrap();
        let mix = g.add_kernel(ostinato_testkit::random_graphs::mix_sig()).unwrap();
        let l = Launch::linear(4, 256);
        let u = |v: u32| Arg::Scalar(Scalar::u32(v));
        let (wp, wsrc, wr, wc) = (g.whole(p), g.whole(src), g.whole(r), g.whole(c));
        let call = |g: &mut Graph, out: ostinato::Slice, inp: ostinato::Slice, salt: u32| {
            g.add_launch(mix, l, &[Arg::Buffer(out), Arg::Buffer(inp), u((out.len / 4) as u32), u((inp.len / 4) as u32), u(salt)], &[]).unwrap();
        };
        call(&mut g, wp, wsrc, 1);
        for i in 0..k {
            call(&mut g, ostinato::Slice { buffer: c, offset: 4096 * i, len: 4096 }, wp, 2 + i as u32);
        }
        call(&mut g, wr, wc, 99);
        Plan::compile_with(&g, PlanOptions { max_lanes: 4 }).unwrap()
    }

    fn nodes(lp: &LanePlan) -> Vec<Vec<Vec<u32>>> {
        lp.lanes
            .iter()
            .map(|l| l.iter().map(|s| s.cmds.iter().filter_map(|c| if let Cmd::Node(n) = c { Some(n.0) } else { None }).collect()).collect())
            .collect()
    }

    fn waits(lp: &LanePlan) -> Vec<Vec<Vec<(usize, usize)>>> {
        lp.lanes.iter().map(|l| l.iter().map(|s| s.waits.clone()).collect()).collect()
    }

    #[test]
    fn golden_a_fan_on_two_lanes() {
        let plan = fan();
        let lp = lower(&plan);
        check(&plan, &lp).unwrap();
        // Lane 0: the producer (its segment ends when lane 1 first needs it, right after it), then c0
        // and the first reducer, then the second reducer waiting for lane 1's consumer; lane 1: c1
        // after the producer. Replays: lane 0 waits for its own previous replay (which waited for
        // lane 1's); lane 1 learns both from its wait on this replay's producer.
        assert_eq!(nodes(&lp), vec![vec![vec![0], vec![1, 3], vec![4]], vec![vec![2]]], "{lp:?}");
        assert_eq!(waits(&lp), vec![vec![vec![], vec![], vec![(1, 0)]], vec![vec![(0, 0)]]]);
        assert_eq!(lp.replay_waits, vec![vec![0], vec![]]);
        assert_eq!(lp.order, vec![(0, 0), (1, 0), (0, 1), (0, 2)]);
        assert_eq!(lp.submissions(2), vec![(0, vec![(0, 0), (0, 1)]), (1, vec![(1, 0)]), (0, vec![(0, 2)])]);
        assert_eq!(lp.counts(2), LaneCounts { queue_submits: 3, batches: 4, waits: 3, cross_queue_waits: 2 });
        // On one queue, every lane's batches in one call.
        assert_eq!(lp.counts(1), LaneCounts { queue_submits: 1, batches: 4, waits: 3, cross_queue_waits: 0 });
    }

    /// Per lane: how many segments, and how many waits in all (the same replay's).
    fn shape(lp: &LanePlan) -> Vec<(usize, usize)> {
        lp.lanes.iter().map(|l| (l.len(), l.iter().map(|s| s.waits.len()).sum())).collect()
    }

    #[test]
    fn golden_the_benchmark_fans_cut_a_segment_only_where_a_wait_needs_one() {
        // Both fans: lane 0 runs the producer, a share of the consumers, then the reducer waiting for
        // the three other lanes; lanes 1-3 run their consumers in one segment after one wait on the
        // producer. Per replay 5 `vkQueueSubmit` calls, 6 batches and 7 waits (6 across queues; the
        // seventh orders lane 0 after its previous replay, which waited for every other lane's): a
        // segment per consumer, 16 waits ordering each replay after the previous one and a wait per
        // consumer on the producer and by the reducer made the 16-consumer fan 15 batches and 40 waits.
        for k in [4u64, 16] {
            let plan = bench_fan(k);
            let lp = lower(&plan);
            check(&plan, &lp).unwrap();
            assert_eq!(shape(&lp), vec![(3, 3), (1, 1), (1, 1), (1, 1)], "fan of {k}: {lp:?}");
            assert_eq!(lp.replay_waits, vec![vec![0], vec![], vec![], vec![]], "fan of {k}");
            assert_eq!(lp.counts(4), LaneCounts { queue_submits: 5, batches: 6, waits: 7, cross_queue_waits: 6 }, "fan of {k}");
        }
    }

    #[test]
    fn golden_independent_chains_wait_only_for_their_own_previous_replay() {
        // Four chains on buffers of their own: nothing crosses lanes in a replay or between replays.
        let mut g = Graph::new();
        let k = g.add_kernel(ostinato_testkit::random_graphs::mix_sig()).unwrap();
        let u = |v: u32| Arg::Scalar(Scalar::u32(v));
        let bufs: Vec<_> = (0..4).map(|i| (g.add_buffer(format!("x{i}"), 1024).unwrap(), g.add_buffer(format!("y{i}"), 1024).unwrap())).collect();
        for step in 0..5 {
            for &(x, y) in &bufs {
                g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Whole(y), u(256), u(256), u(step)], &[]).unwrap();
            }
        }
        let plan = Plan::compile_with(&g, PlanOptions { max_lanes: 4 }).unwrap();
        let lp = lower(&plan);
        check(&plan, &lp).unwrap();
        assert_eq!(shape(&lp), vec![(1, 0); 4]);
        assert_eq!(lp.replay_waits, vec![vec![0], vec![1], vec![2], vec![3]]);
        assert_eq!(lp.counts(4), LaneCounts { queue_submits: 4, batches: 4, waits: 4, cross_queue_waits: 0 });
    }

    #[test]
    fn a_missing_wait_barrier_or_replay_wait_or_a_wrong_order_is_caught() {
        let plan = fan();
        let lp = lower(&plan);
        let mut no_wait = lp.clone();
        no_wait.lanes[1][0].waits.clear();
        assert!(check(&plan, &no_wait).unwrap_err().contains("without a wait"));
        let mut no_barrier = lp.clone();
        for s in &mut no_barrier.lanes[0] {
            s.cmds.retain(|c| !matches!(c, Cmd::Barrier { .. }));
        }
        assert!(check(&plan, &no_barrier).unwrap_err().contains("no barrier"));
        let mut no_replay_wait = lp.clone();
        no_replay_wait.replay_waits[0].clear();
        assert!(check(&plan, &no_replay_wait).unwrap_err().contains("may start before replay"), "{:?}", check(&plan, &no_replay_wait));
        let mut early = lp.clone();
        early.order.swap(0, 1);
        assert!(check(&plan, &early).unwrap_err().contains("submitted before"), "{:?}", check(&plan, &early));
    }

    /// Lanes `m` and `l` conflict, the slow way: some pair of their nodes touches overlapping bytes
    /// with one writing, or has an explicit edge.
    fn conflicts_by_pairs(plan: &Plan) -> Vec<Vec<bool>> {
        let (g, lanes) = (plan.graph(), plan.lanes());
        let n = lanes.count();
        let mut out = vec![vec![false; n]; n];
        for (l, row) in out.iter_mut().enumerate() {
            row[l] = true;
        }
        for a in 0..plan.node_count() as u32 {
            for b in 0..plan.node_count() as u32 {
                let (na, nb) = (NodeId(a), NodeId(b));
                let touch = g
                    .accesses(na)
                    .iter()
                    .any(|x| g.accesses(nb).iter().any(|y| x.root == y.root && x.start < y.end && y.start < x.end && (x.access.writes() || y.access.writes())));
                if touch || g.node(nb).after.contains(&na) || g.node(na).after.contains(&nb) {
                    out[lanes.lane_of(na)][lanes.lane_of(nb)] = true;
                }
            }
        }
        out
    }

    #[test]
    fn random_programs_segment_correctly() {
        let (mut cross, mut replay, mut batches, mut mutants) = (0, 0, 0, 0);
        for seed in 0..300u64 {
            let prog = ostinato_testkit::random_graphs::random_mix_program(seed, 5 + (seed as usize * 7) % 80);
            for max_lanes in 1..=4 {
                let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
                let lp = lower(&plan);
                check(&plan, &lp).unwrap_or_else(|e| panic!("seed {seed}, {max_lanes} lanes: {e}"));
                if seed % 10 == 0 {
                    assert_eq!(conflicts(&plan), conflicts_by_pairs(&plan), "seed {seed}, {max_lanes} lanes");
                }
                for queues in 1..=max_lanes {
                    let calls = lp.submissions(queues);
                    let mut flat: Vec<(usize, usize)> =
                        calls.iter().flat_map(|(q, c)| c.iter().inspect(move |s| assert_eq!(s.0 % queues, *q))).copied().collect();
                    let topo = LanePlan { order: flat.clone(), ..lp.clone() };
                    check(&plan, &topo).unwrap_or_else(|e| panic!("seed {seed}, {max_lanes} lanes on {queues} queues: {e}"));
                    flat.sort_unstable();
                    assert_eq!(flat.len(), lp.order.len());
                }
                if seed % 20 == 0 {
                    // Every wait is needed: without any one of them the checker finds an unordered edge
                    // or replay.
                    for (l, lane) in lp.lanes.iter().enumerate() {
                        for (k, seg) in lane.iter().enumerate() {
                            for w in 0..seg.waits.len() {
                                let mut cut = lp.clone();
                                cut.lanes[l][k].waits.remove(w);
                                assert!(check(&plan, &cut).is_err(), "seed {seed}: wait {w} of segment {k} of lane {l} is not needed");
                                mutants += 1;
                            }
                        }
                        for w in 0..lp.replay_waits[l].len() {
                            let mut cut = lp.clone();
                            cut.replay_waits[l].remove(w);
                            assert!(check(&plan, &cut).is_err(), "seed {seed}: replay wait {w} of lane {l} is not needed");
                            mutants += 1;
                        }
                    }
                }
                cross += lp.lanes.iter().flatten().map(|s| s.waits.len()).sum::<usize>();
                replay += lp.replay_waits.iter().map(Vec::len).sum::<usize>();
                batches += lp.lanes.iter().map(Vec::len).sum::<usize>();
            }
        }
        assert!(cross > 1000 && replay > 300 && mutants > 50, "{cross} cross-lane waits, {replay} replay waits, {batches} batches, {mutants} mutants");
        eprintln!("300 random programs on 1-4 lanes: {batches} batches, {cross} cross-lane waits, {replay} replay waits; {mutants} plans with one wait removed all caught");
    }
}
