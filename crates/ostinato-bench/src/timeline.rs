//! The Llama row's picture: one decode step at position 1,024 traced node by node on CUDA — the
//! Ostinato arm's own exec (PDL and fusion `auto`), on the row's memory, after the row's graph arms —
//! written beside the report as Chrome/Perfetto JSON and an SVG timeline, with its sums for REPORT.md:
//! the step's time on the device, its kernels' time added up (more than the step where programmatic
//! edges let kernels overlap), the idle time and its gaps, and the untraced step beside it (what
//! tracing costs).

use std::path::Path;
use std::sync::Arc;

use ostinato::Exec;
use serde::{Deserialize, Serialize};

use super::arms::{bind_cuda, slot_value, OstinatoCuda, RowMemory};
use super::workload::Workload;

/// The position whose step gets its picture.
pub const TRACED_POS: u32 = 1024;
/// Steps traced (the report's sums are the last one's; the first follows an untraced warm-up step).
const STEPS: usize = 3;

/// What the report says of the traced step.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct StepTimeline {
    /// The files written beside the report.
    pub json: String,
    pub svg: String,
    /// Bars of a step (launches: a fused group is one) and the plan's programmatic edges among them.
    pub bars: usize,
    pub programmatic_edges: usize,
    /// Per traced step: its time on the device, its bars' durations added up, the time some bar ran,
    /// the idle time and the number of idle gaps, in µs.
    pub step_us: Vec<f64>,
    pub sum_us: Vec<f64>,
    pub busy_us: Vec<f64>,
    pub idle_us: Vec<f64>,
    pub gaps: Vec<usize>,
    /// The longest idle gap of the last step, µs.
    pub longest_gap_us: f64,
    /// Bars on the last step's critical path.
    pub critical_bars: usize,
    /// The same exec's step untraced (two events around one replay), µs.
    pub untraced_step_us: f64,
    /// The last step's edges between bars, grouped by producer and consumer kernel and edge kind: how
    /// long after its producer ended each consumer's bar began (negative where its first block began
    /// first, resident beside the producer and waiting).
    pub handovers: Vec<Handover>,
}

/// The edges of one traced step between kernel `from` and kernel `to` kept as `kind`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Handover {
    pub from: String,
    pub to: String,
    pub kind: String,
    pub edges: usize,
    /// The consumer's start less the producer's end, µs: the median, least and most over the edges.
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

/// `t`'s replay `r` edge gaps ([`ostinato::Trace::edge_gaps`]) grouped by the kernels at their ends
/// (a fused bar by its first member's kernel, marked `+`) and their kind, in the order first met.
pub fn handovers(t: &ostinato::Trace, plan: &ostinato::Plan, r: usize) -> Vec<Handover> {
    let g = plan.graph();
    let name = |v: ostinato::NodeId| match &g.node(v).op {
        ostinato::NodeOp::Kernel { kernel, .. } => g.kernel(*kernel).name.clone(),
        _ => format!("n{v}"),
    };
    let unit_of = t.unit_of(plan.node_count());
    let label = |v: ostinato::NodeId| match unit_of.get(v.index()).and_then(|&u| t.units.get(u)) {
        Some(members) if members.len() > 1 => format!("{}+", name(members[0])),
        _ => name(v),
    };
    let mut groups: Vec<(Handover, Vec<i64>)> = Vec::new();
    for (e, gap) in t.edge_gaps(r) {
        let (from, to, kind) = (label(e.from), label(e.to), e.kind.as_str().to_string());
        match groups.iter_mut().find(|(h, _)| h.from == from && h.to == to && h.kind == kind) {
            Some((_, v)) => v.push(gap),
            None => groups.push((Handover { from, to, kind, ..Handover::default() }, vec![gap])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(h, v)| {
            let s = ostinato::GapSummary::of(&v)?;
            let us = |ns: i64| ns as f64 / 1e3;
            Some(Handover { edges: s.edges, median_us: s.median_ns / 1e3, min_us: us(s.least_ns), max_us: us(s.most_ns), ..h })
        })
        .collect()
}

/// Whether `w` is the row whose step is traced.
pub fn traced_row(w: &Workload) -> bool {
    w.model.is_some_and(|(_, pos)| pos == TRACED_POS)
}

/// Traces `w`'s step on `backend` (the Ostinato arm's) and writes `<out>/<name>.json` and `.svg`.
pub fn trace_step(
    backend: &ostinato_cuda::CudaBackend,
    w: &Workload,
    memory: &Arc<RowMemory>,
    init: &[Option<Vec<u8>>],
    out: &Path,
) -> Result<StepTimeline, String> {
    let e = |what: &'static str| move |x: ostinato_cuda::CudaError| format!("{what}: {x}");
    let plan = ostinato::Plan::compile(&w.graph).map_err(|x| x.to_string())?;
    let kernels = bind_cuda(backend, w, &plan)?;
    let mut arm = OstinatoCuda::new(backend, w, kernels, memory, init)?;
    let exec = arm.exec_mut();
    if let Some((slot, v)) = slot_value(w, 0) {
        exec.set_slot(slot, v).map_err(e("set_slot"))?;
    }
    exec.replay().map_err(e("replay"))?;
    let untraced_step_us = exec.replay_timed(1).map_err(e("timed replay"))? * 1e3;
    let t = exec.trace(STEPS).map_err(e("trace"))?;
    std::fs::create_dir_all(out).map_err(|x| format!("{}: {x}", out.display()))?;
    let name = w.id.replace('/', "_");
    let (json, svg) = (out.join(format!("{name}.trace.json")), out.join(format!("{name}.trace.svg")));
    ostinato_runtime::trace::write(&t, exec.plan(), Some(&json), Some(&svg)).map_err(|x| x.to_string())?;
    let sums: Vec<ostinato::ReplaySummary> = (0..t.replays.len()).filter_map(|r| t.summary(r)).collect();
    let us = |ns: u64| ns as f64 / 1e3;
    let last = sums.last().cloned().unwrap_or_default();
    Ok(StepTimeline {
        json: file_name(&json),
        svg: file_name(&svg),
        bars: t.replays.last().map_or(0, Vec::len),
        programmatic_edges: t.edges.iter().filter(|e| e.kind == ostinato::EdgeKind::Programmatic).count(),
        step_us: sums.iter().map(|s| us(s.step_ns)).collect(),
        sum_us: sums.iter().map(|s| us(s.sum_ns)).collect(),
        busy_us: sums.iter().map(|s| us(s.busy_ns)).collect(),
        idle_us: sums.iter().map(|s| us(s.idle_ns)).collect(),
        gaps: sums.iter().map(|s| s.gaps.len()).collect(),
        longest_gap_us: last.gaps.iter().map(|(a, b)| us(b - a)).fold(0.0, f64::max),
        critical_bars: t.critical_path(t.replays.len().saturating_sub(1)).len(),
        untraced_step_us,
        handovers: handovers(&t, exec.plan(), t.replays.len().saturating_sub(1)),
    })
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The report's section on the traced step (empty where no row was traced).
pub fn markdown(rows: &[(&str, &Result<StepTimeline, String>)]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(s, "\n## One step, node by node\n");
    let _ = writeln!(
        s,
        "The Ostinato arm's exec (PDL and fusion `auto`) traced with CUPTI ({STEPS} steps after an untraced one; sums of the last). \
         Open the JSON in Perfetto (ui.perfetto.dev) or `chrome://tracing`; the SVG marks the critical path in red.\n"
    );
    let _ = writeln!(
        s,
        "| row | bars | programmatic edges | step µs (untraced) | kernels added up µs | busy µs | idle µs (gaps, longest) | critical path bars | files |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for (id, r) in rows {
        match r {
            Ok(t) => {
                let last = |v: &[f64]| v.last().copied().unwrap_or(0.0);
                let _ = writeln!(
                    s,
                    "| {id} | {} | {} | {:.1} ({:.1}) | {:.1} | {:.1} | {:.1} ({}, {:.2}) | {} | [{}]({}), [{}]({}) |",
                    t.bars,
                    t.programmatic_edges,
                    last(&t.step_us),
                    t.untraced_step_us,
                    last(&t.sum_us),
                    last(&t.busy_us),
                    last(&t.idle_us),
                    t.gaps.last().copied().unwrap_or(0),
                    t.longest_gap_us,
                    t.critical_bars,
                    t.json,
                    t.json,
                    t.svg,
                    t.svg
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| {id} | trace failed: {e} | | | | | | | |");
            }
        }
    }
    for (id, t) in rows.iter().filter_map(|(id, r)| r.as_ref().ok().map(|t| (id, t))).filter(|(_, t)| !t.handovers.is_empty()) {
        let _ = writeln!(
            s,
            "\n{id}: where each kernel's bar began against its producer's end, µs (negative: its first block was resident, and waiting, before the producer ended)\n"
        );
        let _ = writeln!(s, "| producer | consumer | edge | edges | median | least | most |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for h in &t.handovers {
            let _ = writeln!(s, "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |", h.from, h.to, h.kind, h.edges, h.median_us, h.min_us, h.max_us);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handovers_group_the_edges_by_their_kernels_and_kind() {
        use ostinato::{Access, Arg, EdgeKind, Graph, KernelSig, Launch, Plan, Span, Trace};
        // p -> q -> p -> q, each reading and writing x.
        let mut g = Graph::new();
        let x = g.add_buffer("x", 64).unwrap();
        let p = g.add_kernel(KernelSig::new("p").buffer("x", Access::ReadWrite)).unwrap();
        let q = g.add_kernel(KernelSig::new("q").buffer("x", Access::ReadWrite)).unwrap();
        for k in [p, q, p, q] {
            g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(x)], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let unit_of: Vec<usize> = (0..4).collect();
        let bars = [(0, 0, 10_000), (1, 9_000, 20_000), (2, 22_000, 30_000), (3, 27_000, 40_000)];
        let t = Trace {
            places: vec!["stream".into()],
            units: ostinato::trace::unit_per_node(4),
            edges: ostinato::trace::edges_of(&plan, &unit_of, |_| EdgeKind::Programmatic),
            replays: vec![bars.iter().map(|&(unit, start_ns, end_ns)| Span { unit, place: 0, start_ns, end_ns }).collect()],
            ..Trace::default()
        };
        let h = handovers(&t, &plan, 0);
        let row = |from: &str, to: &str, edges, median_us, min_us, max_us| Handover {
            from: from.into(),
            to: to.into(),
            kind: "programmatic".into(),
            edges,
            median_us,
            min_us,
            max_us,
        };
        assert_eq!(h, vec![row("p", "q", 2, -2.0, -3.0, -1.0), row("q", "p", 1, 2.0, 2.0, 2.0)]);
    }

    #[test]
    fn the_report_section_gives_the_last_steps_sums_and_links_the_files() {
        let t = StepTimeline {
            json: "llama_1b_pos1024.trace.json".into(),
            svg: "llama_1b_pos1024.trace.svg".into(),
            bars: 82,
            programmatic_edges: 81,
            step_us: vec![900.0, 830.5],
            sum_us: vec![950.0, 870.25],
            busy_us: vec![899.0, 829.0],
            idle_us: vec![1.0, 1.5],
            gaps: vec![2, 3],
            longest_gap_us: 0.75,
            critical_bars: 82,
            untraced_step_us: 827.0,
            handovers: vec![Handover {
                from: "llama_o".into(),
                to: "llama_ffn_in".into(),
                kind: "programmatic".into(),
                edges: 16,
                median_us: -0.84,
                min_us: -1.5,
                max_us: 0.25,
            }],
        };
        let ok = Ok(t);
        let failed = Err("CUPTI unavailable".to_string());
        let md = markdown(&[("llama/1b/pos1024", &ok), ("llama/1b/pos1024@64", &failed)]);
        assert!(md.contains("## One step, node by node"), "{md}");
        assert!(md.contains("| llama/1b/pos1024 | 82 | 81 | 830.5 (827.0) | 870.2 | 829.0 | 1.5 (3, 0.75) | 82 | [llama_1b_pos1024.trace.json](llama_1b_pos1024.trace.json)"), "{md}");
        assert!(md.contains("| llama/1b/pos1024@64 | trace failed: CUPTI unavailable |"), "{md}");
        assert!(md.contains("| llama_o | llama_ffn_in | programmatic | 16 | -0.84 | -1.50 | 0.25 |"), "{md}");
        assert_eq!(markdown(&[]), "");
    }
}
