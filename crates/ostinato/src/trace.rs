//! A replay seen node by node: what every backend's [`crate::Exec::trace`] returns. Per replay, one
//! bar per submitted unit — a node, or a fused group naming its members — with its start and end on the
//! device's clock and the place it ran (a worker thread, a stream, a queue); beside them the plan's
//! edges with the way the backend kept each (a full dependency, a programmatic one, a barrier, or
//! inside one fused kernel). The checks a test asks of a trace ([`Trace::check`]) and the sums a report
//! prints ([`Trace::summary`], [`Trace::critical_path`]) are pure functions of it. Drawing it (Perfetto
//! JSON, SVG) is the runtime's.

use crate::graph::{NodeId, Scalar};
use crate::plan::Plan;
use crate::ErrorKind;

/// How a backend kept one edge of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// The consumer starts once the producer completed (a graph dependency, stream order, an event, a
    /// dependency counter).
    Full,
    /// The consumer may start before the producer completed and waits inside its code (CUDA's
    /// programmatic dependent launch): its bar may overlap the producer's.
    Programmatic,
    /// A barrier between the two commands of one queue (a pipeline barrier, an AQL barrier): the
    /// consumer starts once the producer completed.
    Barrier,
    /// Both ends run inside one fused kernel: ordered by the kernel's own code, one bar for both.
    Fused,
    /// A tile hand-off: the consumer may start before the producer completed and each of its blocks
    /// waits, in its code, for exactly the producer blocks whose bytes it needs (CUDA's per-tile
    /// hand-offs): its bar may overlap the producer's.
    Handoff,
}

impl EdgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Full => "full",
            EdgeKind::Programmatic => "programmatic",
            EdgeKind::Barrier => "barrier",
            EdgeKind::Fused => "fused",
            EdgeKind::Handoff => "handoff",
        }
    }
    /// Whether the consumer's bar must start at or after the producer's bar ended.
    pub fn orders_completion(self) -> bool {
        matches!(self, EdgeKind::Full | EdgeKind::Barrier)
    }
}

/// One edge of the plan as the backend kept it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceEdge {
    pub from: NodeId,
    pub to: NodeId,
    pub kind: EdgeKind,
}

/// One bar: unit `unit` ran at place `place` from `start_ns` to `end_ns` (the trace's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub unit: u32,
    pub place: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Span {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// This bar's start less `producer`'s end, in ns: the gap across an edge from `producer` to this
    /// bar, negative where this bar began first.
    pub fn gap_after(&self, producer: &Span) -> i64 {
        self.start_ns as i64 - producer.end_ns as i64
    }
}

/// Replays timed node by node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The backend's name (`host`, `cuda`, `vulkan`).
    pub backend: String,
    /// What the times are (`CLOCK_MONOTONIC ns since the exec was made`, `CUPTI device timestamps, ns`).
    pub clock: String,
    /// Where units ran: `places[span.place]` (`worker 2`, `stream 13`, `queue 0`).
    pub places: Vec<String>,
    /// What each submitted unit runs: one node, or a fused group's members in the order they run.
    pub units: Vec<Vec<NodeId>>,
    /// Every edge of the plan, with how the backend kept it.
    pub edges: Vec<TraceEdge>,
    /// Per replay, one span per unit (in no particular order).
    pub replays: Vec<Vec<Span>>,
    /// The slots' values the replays ran with, by slot id (empty where the exec did not say).
    pub slots: Vec<Scalar>,
    /// What a reader should know about how the times were taken.
    pub notes: Vec<String>,
    /// How far the clock's stamps taken at two places may disagree, in ns: [`Trace::check`] calls a
    /// consumer out of order only where it starts more than this before its producer ended. 0 for a
    /// clock read the same way everywhere (the host's monotonic clock, one Vulkan queue's timestamps);
    /// CUDA's CUPTI stamps are read by code CUPTI adds to each kernel, on whichever SMs run it
    /// (`docs/trace.md`).
    pub order_slack_ns: u64,
}

/// A trace that disagrees with its plan (or with itself).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("replay {replay}: node n{node} has no bar")]
    Missing { replay: usize, node: u32 },
    #[error("replay {replay}: node n{node} appears {count} times")]
    Repeated { replay: usize, node: u32, count: usize },
    #[error("unit {unit} names node n{node}, which the plan does not have")]
    UnknownNode { unit: usize, node: u32 },
    #[error("replay {replay}: a bar names unit {unit} or place {place}, which the trace does not have")]
    UnknownUnit { replay: usize, unit: u32, place: u32 },
    #[error("replay {replay}: unit {unit} ends ({end} ns) before it starts ({start} ns)")]
    Inverted { replay: usize, unit: u32, start: u64, end: u64 },
    #[error(
        "replay {replay}: {kind} edge n{from} -> n{to}: n{to} starts at {start} ns, before n{from} ended at {end} ns (more than the clock's {slack} ns apart)"
    )]
    Order { replay: usize, from: u32, to: u32, kind: &'static str, start: u64, end: u64, slack: u64 },
    #[error("the trace has {got} edges, the plan {want}")]
    Edges { want: usize, got: usize },
}

impl TraceError {
    /// A trace that disagrees with its plan is a result that differs from what the plan says.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Mismatch
    }
}

/// What one replay's bars add up to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// First start and last end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// `end_ns - start_ns`: the replay's time on the device.
    pub step_ns: u64,
    /// Every bar's duration, added up (more than `busy_ns` where bars overlap).
    pub sum_ns: u64,
    /// Time some bar ran (the union of the bars).
    pub busy_ns: u64,
    /// Time no bar ran between the first start and the last end: `step_ns - busy_ns`.
    pub idle_ns: u64,
    /// The idle intervals, in time order.
    pub gaps: Vec<(u64, u64)>,
}

/// One unit per node of an `n`-node plan (nothing fused).
pub fn unit_per_node(n: usize) -> Vec<Vec<NodeId>> {
    (0..n as u32).map(|v| vec![NodeId(v)]).collect()
}

/// The units of a plan recorded again with fused groups as single nodes: `node_of[v]` is the node of
/// the run plan (of `run_nodes`) that runs user node `v`; each unit lists its members in id order.
pub fn units_from(node_of: &[NodeId], run_nodes: usize) -> Vec<Vec<NodeId>> {
    let mut units = vec![Vec::new(); run_nodes];
    for (v, u) in node_of.iter().enumerate() {
        if let Some(unit) = units.get_mut(u.index()) {
            unit.push(NodeId(v as u32));
        }
    }
    units
}

/// Every edge of `plan` with the kind `kind_of` gives it, or [`EdgeKind::Fused`] where both ends are
/// members of one unit (`unit_of[node]`).
pub fn edges_of(plan: &Plan, unit_of: &[usize], kind_of: impl Fn(&crate::Edge) -> EdgeKind) -> Vec<TraceEdge> {
    plan.edges()
        .iter()
        .map(|e| {
            let fused = unit_of.get(e.from.index()).is_some_and(|u| unit_of.get(e.to.index()) == Some(u));
            TraceEdge { from: e.from, to: e.to, kind: if fused { EdgeKind::Fused } else { kind_of(e) } }
        })
        .collect()
}

/// Edge gaps ([`Trace::edge_gaps`]) summed up: how many, their median, least and most, in ns, and how
/// many consumers began before their producer ended (the negative ones).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GapSummary {
    pub edges: usize,
    pub median_ns: f64,
    pub least_ns: i64,
    pub most_ns: i64,
    pub early: usize,
}

impl GapSummary {
    /// The summary of `gaps` (ns), `None` for none.
    pub fn of(gaps: &[i64]) -> Option<GapSummary> {
        let mut v = gaps.to_vec();
        v.sort_unstable();
        let (&least_ns, &most_ns) = (v.first()?, v.last()?);
        let m = v.len() / 2;
        let median_ns = if v.len() % 2 == 1 { v[m] as f64 } else { (v[m - 1] as f64 + v[m] as f64) / 2.0 };
        Some(GapSummary { edges: v.len(), median_ns, least_ns, most_ns, early: v.iter().filter(|&&g| g < 0).count() })
    }
}

impl Trace {
    /// The unit that runs each node (`usize::MAX` for a node no unit names).
    pub fn unit_of(&self, nodes: usize) -> Vec<usize> {
        let mut out = vec![usize::MAX; nodes];
        for (u, members) in self.units.iter().enumerate() {
            for m in members {
                if let Some(slot) = out.get_mut(m.index()) {
                    *slot = u;
                }
            }
        }
        out
    }

    /// [`Trace::unit_of`] over every node some unit names.
    fn unit_of_named(&self) -> Vec<usize> {
        self.unit_of(self.units.iter().flatten().map(|m| m.index() + 1).max().unwrap_or(0))
    }

    /// Each unit's bar among `spans` (one replay's), `None` where it has none.
    fn bar_of(&self, spans: &[Span]) -> Vec<Option<Span>> {
        let mut bar_of = vec![None; self.units.len()];
        for s in spans {
            if let Some(slot) = bar_of.get_mut(s.unit as usize) {
                *slot = Some(*s);
            }
        }
        bar_of
    }

    /// Checks the trace against `plan`: every unit names nodes of the plan and every bar a unit and a
    /// place of the trace; in every replay every node appears in exactly one bar, no bar ends before
    /// it starts, and for every edge whose kind orders completion (full, barrier) the consumer's bar
    /// starts at or after the producer's ended, within the clock's [`Trace::order_slack_ns`]. The
    /// trace lists every edge of the plan.
    pub fn check(&self, plan: &Plan) -> Result<(), TraceError> {
        let n = plan.node_count();
        for (u, members) in self.units.iter().enumerate() {
            if let Some(m) = members.iter().find(|m| m.index() >= n) {
                return Err(TraceError::UnknownNode { unit: u, node: m.0 });
            }
        }
        if self.edges.len() != plan.edges().len() {
            return Err(TraceError::Edges { want: plan.edges().len(), got: self.edges.len() });
        }
        let unit_of = self.unit_of(n);
        for (r, spans) in self.replays.iter().enumerate() {
            let mut seen = vec![0usize; n];
            let mut bar_of: Vec<Option<Span>> = vec![None; self.units.len()];
            for s in spans {
                let unit = self.units.get(s.unit as usize);
                if unit.is_none() || s.place as usize >= self.places.len() {
                    return Err(TraceError::UnknownUnit { replay: r, unit: s.unit, place: s.place });
                }
                if s.end_ns < s.start_ns {
                    return Err(TraceError::Inverted { replay: r, unit: s.unit, start: s.start_ns, end: s.end_ns });
                }
                for m in unit.into_iter().flatten() {
                    seen[m.index()] += 1;
                }
                bar_of[s.unit as usize] = Some(*s);
            }
            if let Some(v) = seen.iter().position(|&c| c == 0) {
                return Err(TraceError::Missing { replay: r, node: v as u32 });
            }
            if let Some(v) = seen.iter().position(|&c| c > 1) {
                return Err(TraceError::Repeated { replay: r, node: v as u32, count: seen[v] });
            }
            for e in self.edges.iter().filter(|e| e.kind.orders_completion()) {
                let bar = |v: NodeId| unit_of.get(v.index()).and_then(|&u| bar_of.get(u).copied().flatten());
                if let (Some(a), Some(b)) = (bar(e.from), bar(e.to)) {
                    if b.start_ns.saturating_add(self.order_slack_ns) < a.end_ns {
                        let (from, to, kind, slack) = (e.from.0, e.to.0, e.kind.as_str(), self.order_slack_ns);
                        return Err(TraceError::Order { replay: r, from, to, kind, start: b.start_ns, end: a.end_ns, slack });
                    }
                }
            }
        }
        Ok(())
    }

    /// The edge that orders completion whose consumer started least long after its producer ended,
    /// over every replay: the time between (negative where the consumer started first), the replay and
    /// the edge; `None` without such an edge. How close the trace came to an order error, and how far
    /// a clock's stamps at two places disagreed.
    pub fn tightest_order_gap(&self) -> Option<(i64, usize, TraceEdge)> {
        let unit_of = self.unit_of_named();
        let mut least: Option<(i64, usize, TraceEdge)> = None;
        for (r, spans) in self.replays.iter().enumerate() {
            let bar_of = self.bar_of(spans);
            let bar = |v: NodeId| unit_of.get(v.index()).and_then(|&u| bar_of.get(u).copied().flatten());
            for e in self.edges.iter().filter(|e| e.kind.orders_completion()) {
                if let (Some(a), Some(b)) = (bar(e.from), bar(e.to)) {
                    let gap = b.gap_after(&a);
                    if least.is_none_or(|(l, _, _)| gap < l) {
                        least = Some((gap, r, *e));
                    }
                }
            }
        }
        least
    }

    /// Replay `r`'s edges between two units, each with the time from its producer's end to its
    /// consumer's start, in ns: negative where the consumer's bar began first (a programmatic edge or a
    /// hand-off whose consumer was resident, and waiting, before its producer ended). Edges inside one
    /// unit and edges of a unit without a bar are left out; several edges between the same two units
    /// give one entry (the first). Empty for a replay the trace lacks.
    pub fn edge_gaps(&self, r: usize) -> Vec<(TraceEdge, i64)> {
        let Some(spans) = self.replays.get(r) else { return Vec::new() };
        let (unit_of, bar_of) = (self.unit_of_named(), self.bar_of(spans));
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for e in &self.edges {
            let (Some(&a), Some(&b)) = (unit_of.get(e.from.index()), unit_of.get(e.to.index())) else { continue };
            if a == b || seen.contains(&(a, b)) {
                continue;
            }
            if let (Some(Some(pa)), Some(Some(pb))) = (bar_of.get(a), bar_of.get(b)) {
                seen.insert((a, b));
                out.push((*e, pb.gap_after(pa)));
            }
        }
        out
    }

    /// The time of [`Trace::tightest_order_gap`] alone.
    pub fn tightest_order_gap_ns(&self) -> Option<i64> {
        self.tightest_order_gap().map(|(gap, _, _)| gap)
    }

    /// Replay `r`'s sums: its step time, the bars' durations added up, the time some bar ran and the
    /// idle intervals between the first start and the last end. `None` for a replay the trace lacks.
    pub fn summary(&self, r: usize) -> Option<ReplaySummary> {
        let spans = self.replays.get(r)?;
        let mut bars: Vec<(u64, u64)> = spans.iter().map(|s| (s.start_ns, s.end_ns.max(s.start_ns))).collect();
        bars.sort_unstable();
        let (Some(first), Some(last)) = (bars.first().map(|b| b.0), bars.iter().map(|b| b.1).max()) else {
            return Some(ReplaySummary::default());
        };
        let sum_ns = bars.iter().map(|(s, e)| e - s).sum();
        let (mut busy_ns, mut gaps, mut reach) = (0u64, Vec::new(), first);
        for &(s, e) in &bars {
            if s > reach {
                gaps.push((reach, s));
            }
            if e > reach {
                busy_ns += e - s.max(reach);
                reach = e;
            }
        }
        let step_ns = last - first;
        Some(ReplaySummary { start_ns: first, end_ns: last, step_ns, sum_ns, busy_ns, idle_ns: step_ns - busy_ns, gaps })
    }

    /// Replay `r`'s critical path, as indices into `replays[r]` from the first bar to the last: from
    /// the bar that ends last, each step goes to the predecessor (through an edge of another unit) that
    /// ended last — the one this bar waited for — until a bar with no predecessor.
    pub fn critical_path(&self, r: usize) -> Vec<usize> {
        let Some(spans) = self.replays.get(r) else { return Vec::new() };
        let unit_of = self.unit_of_named();
        let mut span_of = vec![usize::MAX; self.units.len()];
        for (i, s) in spans.iter().enumerate() {
            if let Some(slot) = span_of.get_mut(s.unit as usize) {
                *slot = i;
            }
        }
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); self.units.len()];
        for e in &self.edges {
            let (a, b) = (unit_of.get(e.from.index()).copied(), unit_of.get(e.to.index()).copied());
            if let (Some(a), Some(b)) = (a, b) {
                if a != b && a < preds.len() && b < preds.len() && !preds[b].contains(&a) {
                    preds[b].push(a);
                }
            }
        }
        let Some(mut at) = (0..spans.len()).max_by_key(|&i| (spans[i].end_ns, std::cmp::Reverse(i))) else { return Vec::new() };
        let mut path = vec![at];
        while let Some(next) = preds[spans[at].unit as usize]
            .iter()
            .map(|&u| span_of[u])
            .filter(|&i| i != usize::MAX && !path.contains(&i))
            .max_by_key(|&i| (spans[i].end_ns, std::cmp::Reverse(i)))
        {
            path.push(next);
            at = next;
        }
        path.reverse();
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, Arg, Graph, KernelSig, Launch};

    /// a -> b (RAW on x), c independent.
    fn plan() -> Plan {
        let mut g = Graph::new();
        let x = g.add_buffer("x", 64).unwrap();
        let y = g.add_buffer("y", 64).unwrap();
        let k = g.add_kernel(KernelSig::new("k").buffer("o", Access::ReadWrite)).unwrap();
        g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(x)], &[]).unwrap();
        g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(x)], &[]).unwrap();
        g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(y)], &[]).unwrap();
        Plan::compile(&g).unwrap()
    }

    fn trace(p: &Plan, bars: &[(u32, u64, u64)]) -> Trace {
        let units = unit_per_node(p.node_count());
        let unit_of: Vec<usize> = (0..p.node_count()).collect();
        Trace {
            backend: "test".into(),
            places: vec!["lane".into()],
            edges: edges_of(p, &unit_of, |_| EdgeKind::Full),
            units,
            replays: vec![bars.iter().map(|&(unit, s, e)| Span { unit, place: 0, start_ns: s, end_ns: e }).collect()],
            ..Trace::default()
        }
    }

    #[test]
    fn a_trace_that_keeps_every_edge_passes_and_one_that_breaks_an_edge_is_named() {
        let p = plan();
        trace(&p, &[(0, 0, 10), (1, 10, 20), (2, 5, 30)]).check(&p).unwrap();
        let e = trace(&p, &[(0, 0, 10), (1, 9, 20), (2, 5, 30)]).check(&p).unwrap_err();
        assert_eq!(e, TraceError::Order { replay: 0, from: 0, to: 1, kind: "full", start: 9, end: 10, slack: 0 });
        // A clock whose stamps at two places may disagree by 2 ns: 1 ns early passes, 3 ns does not.
        let mut t = trace(&p, &[(0, 0, 10), (1, 9, 20), (2, 5, 30)]);
        t.order_slack_ns = 2;
        t.check(&p).unwrap();
        assert_eq!(t.tightest_order_gap_ns(), Some(-1));
        let mut t = trace(&p, &[(0, 0, 10), (1, 7, 20), (2, 5, 30)]);
        t.order_slack_ns = 2;
        assert!(matches!(t.check(&p), Err(TraceError::Order { start: 7, end: 10, slack: 2, .. })));
        // A programmatic edge or a tile hand-off may overlap.
        for kind in [EdgeKind::Programmatic, EdgeKind::Handoff] {
            let mut t = trace(&p, &[(0, 0, 10), (1, 9, 20), (2, 5, 30)]);
            t.edges[0].kind = kind;
            t.check(&p).unwrap();
            assert_eq!(t.tightest_order_gap_ns(), None, "no edge that orders completion");
        }
    }

    #[test]
    fn a_missing_or_repeated_node_and_a_bar_of_no_unit_are_refused() {
        let p = plan();
        assert_eq!(trace(&p, &[(0, 0, 10), (1, 10, 20)]).check(&p).unwrap_err(), TraceError::Missing { replay: 0, node: 2 });
        assert_eq!(trace(&p, &[(0, 0, 10), (1, 10, 20), (2, 0, 1), (2, 1, 2)]).check(&p).unwrap_err(), TraceError::Repeated { replay: 0, node: 2, count: 2 });
        assert!(matches!(trace(&p, &[(0, 0, 10), (1, 10, 20), (7, 0, 1)]).check(&p), Err(TraceError::UnknownUnit { unit: 7, .. })));
        assert!(matches!(trace(&p, &[(0, 10, 0), (1, 10, 20), (2, 0, 1)]).check(&p), Err(TraceError::Inverted { .. })));
        // A fused unit of a and b: one bar names both; its inner edge is not checked.
        let mut t = trace(&p, &[(0, 0, 20), (1, 5, 30)]);
        t.units = vec![vec![NodeId(0), NodeId(1)], vec![NodeId(2)]];
        t.edges = edges_of(&p, &[0, 0, 1], |_| EdgeKind::Full);
        assert_eq!(t.edges[0].kind, EdgeKind::Fused);
        t.check(&p).unwrap();
    }

    #[test]
    fn the_summary_adds_durations_and_finds_the_idle_gaps() {
        let p = plan();
        let t = trace(&p, &[(0, 100, 110), (1, 115, 130), (2, 105, 112)]);
        let s = t.summary(0).unwrap();
        assert_eq!((s.start_ns, s.end_ns, s.step_ns), (100, 130, 30));
        assert_eq!(s.sum_ns, 10 + 15 + 7);
        assert_eq!((s.busy_ns, s.idle_ns), (27, 3));
        assert_eq!(s.gaps, vec![(112, 115)]);
        assert_eq!(t.summary(1), None);
    }

    #[test]
    fn the_critical_path_follows_the_predecessor_that_ended_last() {
        let p = plan();
        // c ends last, and has no predecessor: the path is c alone.
        assert_eq!(trace(&p, &[(0, 0, 10), (1, 10, 20), (2, 0, 25)]).critical_path(0), vec![2]);
        // b ends last: a then b.
        let t = trace(&p, &[(2, 0, 5), (0, 0, 10), (1, 10, 20)]);
        assert_eq!(t.critical_path(0), vec![1, 2]);
    }

    #[test]
    fn edge_gaps_give_each_edge_between_units_its_consumers_start_less_its_producers_end() {
        let p = plan();
        // a -> b: b starts 3 ns before a ends (a programmatic edge), then 4 ns after.
        let mut t = trace(&p, &[(0, 0, 10), (1, 7, 20), (2, 5, 30)]);
        t.edges[0].kind = EdgeKind::Programmatic;
        assert_eq!(t.edge_gaps(0), vec![(t.edges[0], -3)]);
        let t = trace(&p, &[(0, 0, 10), (1, 14, 20), (2, 5, 30)]);
        assert_eq!(t.edge_gaps(0), vec![(t.edges[0], 4)]);
        assert_eq!(t.edge_gaps(1), vec![], "a replay the trace lacks");
        // Inside one fused unit there is no gap to give.
        let mut t = trace(&p, &[(0, 0, 20), (1, 5, 30)]);
        t.units = vec![vec![NodeId(0), NodeId(1)], vec![NodeId(2)]];
        t.edges = edges_of(&p, &[0, 0, 1], |_| EdgeKind::Full);
        assert_eq!(t.edge_gaps(0), vec![]);
    }

    #[test]
    fn a_gap_summary_gives_count_median_extremes_and_the_early_consumers() {
        assert_eq!(GapSummary::of(&[]), None);
        assert_eq!(GapSummary::of(&[5, -3, 1]), Some(GapSummary { edges: 3, median_ns: 1.0, least_ns: -3, most_ns: 5, early: 1 }));
        assert_eq!(GapSummary::of(&[4, -2, -1, 7]), Some(GapSummary { edges: 4, median_ns: 1.5, least_ns: -2, most_ns: 7, early: 2 }));
    }

    #[test]
    fn units_from_a_rewrite_list_each_run_nodes_members() {
        let node_of = [NodeId(0), NodeId(0), NodeId(1), NodeId(0)];
        assert_eq!(units_from(&node_of, 2), vec![vec![NodeId(0), NodeId(1), NodeId(3)], vec![NodeId(2)]]);
    }
}
