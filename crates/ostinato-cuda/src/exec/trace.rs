//! Tracing CUDA replays with CUPTI's Activity API (`crate::cupti`). Each traced replay's driver
//! calls are tagged with an external correlation id — (replay, launch) around each eager launch,
//! (replay) around a graph launch — so every kernel, memcpy and memset record CUPTI writes names the
//! replay it belongs to. A graph exec's records name their node by the id of the node's clone in the
//! exec: graph mode therefore instantiates the exec's own graph once more per trace with CUPTI's clone
//! callback on (original node → clone id), gives it every kernel node's present params, and launches
//! it in place of the exec's graph exec, which nothing touches. The records become one bar per launch
//! (several records of one launch, as a collective's, merge into one), on the stream CUPTI reports.

use std::collections::HashMap;

use ostinato::{EdgeKind, Exec, NodeId, Span, Trace};

use super::records::{attribute, Attributed, Records};
use super::CudaExec;
use crate::cupti::{ActivityWatch, Collected};
use crate::error::{CudaError, Result};
use crate::launch_thread::Command;

/// How far CUPTI's stamps of two kernels may disagree. CUPTI times a concurrent kernel with code it
/// adds to the kernel, which reads the GPU's timer on the SMs that run it, and converts the reading to
/// the host's clock; its documentation bounds neither. On the H200 a consumer of a full graph edge was
/// stamped 0.70 µs before its producer's end (the graph held the edge, the bytes were the oracle's);
/// a lost ordering shows as an overlap of a whole kernel (`gpu_trace`'s dropped-edge test), far above
/// this bound.
pub const CUPTI_ORDER_SLACK_NS: u64 = 1_000;

impl CudaExec {
    /// Runs `replays` traced replays (see the module docs) and builds their trace.
    pub(super) fn trace_replays(&mut self, replays: usize) -> Result<Trace> {
        self.refuse_if_faulted("trace")?;
        if self.graph().is_some() && self.lowering().launches.iter().any(|l| l.child_graph) {
            return Err(CudaError::Unsupported {
                op: "trace",
                reason: "a graph with collectives or captured work: their kernels run in child graphs whose nodes a trace cannot name; trace in eager mode"
                    .into(),
            });
        }
        let replays32 = u32::try_from(replays).map_err(|_| CudaError::Usage { op: "trace", reason: format!("{replays} replays: at most {}", u32::MAX) })?;
        self.wait()?;
        let watch = ActivityWatch::begin()?;
        self.ctx.bind()?;
        let mut clone_to_launch: HashMap<u64, usize> = HashMap::new();
        if let Some((graph, _)) = self.graph() {
            let exec = watch.watch_clones(|| graph.instantiate())?;
            // Uploaded before the first traced launch, as the exec's own graph was: no replay of the
            // trace includes the upload.
            exec.upload(&self.main)?;
            *self.traced.lock().unwrap_or_else(|p| p.into_inner()) = Some(exec);
        }
        let ran = self.run_traced(replays32);
        // The traced graph is idle now (or the exec is faulted): it goes on the caller's thread.
        let traced = self.traced.lock().unwrap_or_else(|p| p.into_inner()).take();
        if self.fault.as_ref().is_some_and(|f| f.running) {
            std::mem::forget(traced);
        }
        let collected = watch.finish();
        ran?;
        let collected = collected?;
        if let Some((_, nodes)) = self.graph() {
            let launch_of: HashMap<usize, usize> = nodes.iter().enumerate().map(|(i, n)| (n.handle(), i)).collect();
            clone_to_launch = collected.clones.iter().filter_map(|&(original, id)| launch_of.get(&original).map(|&i| (id, i))).collect();
        }
        self.build_trace(&collected, replays, &clone_to_launch)
    }

    /// The traced replays on the thread that owns the replayer, then a wait for them.
    fn run_traced(&mut self, replays: u32) -> Result<()> {
        if self.graph().is_some() {
            self.on_stream("trace", Command::TraceParams, false)?;
        }
        for r in 0..replays {
            self.on_stream("trace", Command::TracedLaunch(r), false)?;
        }
        self.on_stream("trace", Command::Synchronize, true)
    }

    /// One bar per launch and replay from the records, or an error saying what is missing.
    fn build_trace(&self, c: &Collected, replays: usize, clone_to_launch: &HashMap<u64, usize>) -> Result<Trace> {
        let launches = self.lowering().launches.len();
        let graph = self.graph().is_some();
        let each: Vec<Records> = self
            .lowering()
            .launches
            .iter()
            .map(|l| match (graph, l.child_graph) {
                (true, _) => Records::GraphKernel,
                (false, false) => Records::Kernel,
                (false, true) => Records::Merged,
            })
            .collect();
        let Attributed { bars, kinds, ours, unnamed } =
            attribute(&c.activities, &c.external, clone_to_launch, replays, &each).map_err(|reason| CudaError::Internal { op: "trace", reason })?;
        let mut streams: Vec<u32> = bars.iter().flatten().flatten().map(|b| b.2).collect();
        streams.sort_unstable();
        streams.dedup();
        let mut spans = Vec::with_capacity(replays);
        for (r, row) in bars.iter().enumerate() {
            let mut out = Vec::with_capacity(launches);
            for (i, bar) in row.iter().enumerate() {
                let Some((start_ns, end_ns, stream)) = *bar else {
                    return Err(CudaError::Internal {
                        op: "trace",
                        reason: format!(
                            "replay {r}: {} has no CUPTI record ({} records, {ours} of these replays, {unnamed} naming no node of the exec; {} external ids, {} graph-node clones seen, {} records dropped{})",
                            self.run_plan().graph().describe_node(NodeId(i as u32)),
                            c.activities.len(),
                            c.external.len(),
                            c.clones.len(),
                            c.dropped,
                            if c.problems.is_empty() { String::new() } else { format!("; {}", c.problems.join("; ")) }
                        ),
                    });
                };
                let place = streams.binary_search(&stream).unwrap_or(0) as u32;
                out.push(Span { unit: i as u32, place, start_ns, end_ns });
            }
            spans.push(out);
        }
        let counted: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let mut notes = vec![format!("CUPTI: {}; records of these replays: {}", crate::cupti::library().unwrap_or_default(), counted.join(", "))];
        if self.graph().is_some() {
            notes.push("a traced replay launches the exec's graph instantiated again while CUPTI watched (so its records name their nodes), with the params of the exec's next replay; the exec's own graph exec is untouched".into());
        }
        if c.dropped > 0 {
            notes.push(format!("CUPTI dropped {} records", c.dropped));
        }
        if unnamed > 0 {
            notes.push(format!(
                "{unnamed} records of these replays time no node (a graph launch's memcpy or memset records, records naming no node of the exec)"
            ));
        }
        let mut trace = Trace {
            backend: "cuda".into(),
            clock: "CUPTI activity timestamps (the GPU's clock as CUPTI reports it), ns".into(),
            places: streams.iter().map(|s| format!("stream {s}")).collect(),
            units: self.shape().units.clone(),
            edges: self.edge_kinds(),
            replays: spans,
            slots: Vec::new(),
            notes,
            order_slack_ns: CUPTI_ORDER_SLACK_NS,
        };
        if let Some((gap, r, e)) = trace.tightest_order_gap() {
            let place = |v: NodeId| {
                let unit = self.shape().units.iter().position(|m| m.contains(&v));
                let bar = unit.and_then(|u| trace.replays[r].iter().find(|s| s.unit as usize == u));
                bar.map_or("?".to_string(), |b| trace.places[b.place as usize].clone())
            };
            let note = format!(
                "tightest full edge: n{} ({}) -> n{} ({}) in replay {r}, the consumer started {gap} ns after its producer ended (stamps may disagree by up to {CUPTI_ORDER_SLACK_NS} ns)",
                e.from.0,
                place(e.from),
                e.to.0,
                place(e.to)
            );
            trace.notes.push(note);
        }
        Ok(trace)
    }

    /// Each edge of the user's plan as the submission keeps it: inside one fused kernel, a tile
    /// hand-off (a programmatic edge into a consumer that waits for its producer tile by tile; over a
    /// full edge the producer has completed, so the edge is full), or between two launches as a
    /// programmatic edge (graph mode: the lowering's flag, or where the lowering has
    /// no such edge, programmatic unless full edges alone reach it; eager mode: a launch made with the
    /// programmatic attribute after its producer on one stream) or a full one.
    fn edge_kinds(&self) -> Vec<ostinato::TraceEdge> {
        let run = self.run_plan();
        let unit_of = {
            let mut u = vec![usize::MAX; self.plan.node_count()];
            for (i, members) in self.shape().units.iter().enumerate() {
                for m in members {
                    u[m.index()] = i;
                }
            }
            u
        };
        let mut programmatic: HashMap<(usize, usize), bool> = HashMap::new();
        let mut full_succs: Vec<Vec<usize>> = vec![Vec::new(); run.node_count()];
        for e in &self.lowering().edges {
            programmatic.insert((e.from.index(), e.to.index()), e.programmatic);
            if !e.programmatic {
                full_succs[e.from.index()].push(e.to.index());
            }
        }
        let full_path = |a: usize, b: usize| {
            let (mut seen, mut stack) = (vec![false; full_succs.len()], vec![a]);
            while let Some(x) = stack.pop() {
                if x == b {
                    return true;
                }
                for &y in &full_succs[x] {
                    if !std::mem::replace(&mut seen[y], true) {
                        stack.push(y);
                    }
                }
            }
            false
        };
        let lanes = run.lanes();
        let handoff = |a: usize, b: usize| self.shape().handoff_pairs.contains(&(NodeId(a as u32), NodeId(b as u32)));
        ostinato::trace::edges_of(&self.plan, &unit_of, |e| {
            let (a, b) = (unit_of[e.from.index()], unit_of[e.to.index()]);
            let is_programmatic = match self.graph() {
                Some(_) => programmatic.get(&(a, b)).copied().unwrap_or_else(|| !full_path(a, b)),
                None => {
                    let v = NodeId(b as u32);
                    self.lowering().eager_pdl[b] && lanes.waits(v).is_empty() && lanes.lane_of(NodeId(a as u32)) == lanes.lane_of(v)
                }
            };
            match (is_programmatic, handoff(a, b)) {
                (true, true) => EdgeKind::Handoff,
                (true, false) => EdgeKind::Programmatic,
                (false, _) => EdgeKind::Full,
            }
        })
    }
}
