//! A trace as a person opens it: Chrome/Perfetto trace-event JSON ([`chrome_json`]) and an SVG
//! timeline ([`svg`]), both drawn from the plan the user recorded — bars named by their nodes' kernels
//! with the args as recorded, a row per place the backend ran them (a worker thread, a stream, a
//! queue; overlapping bars of one place on rows of their own), the plan's edges as flow arrows
//! labelled with how the backend kept them, the idle gaps, the critical path. `docs/trace.md`.

mod chrome;
mod svg;

use std::path::Path;

use ostinato::{Arg, NodeId, NodeOp, Plan, Scalar, ScalarType, Span, Trace};

pub use chrome::chrome_json;
pub use svg::svg;

use crate::error::RuntimeError;

/// Writes the trace-event JSON to `json` and the SVG timeline to `svg_path`, where given.
pub fn write(trace: &Trace, plan: &Plan, json: Option<&Path>, svg_path: Option<&Path>) -> Result<(), RuntimeError> {
    let io = |p: &Path, e: std::io::Error| RuntimeError::Io { path: p.display().to_string(), message: e.to_string() };
    if let Some(p) = json {
        let text = serde_json::to_string(&chrome_json(trace, plan)?).map_err(|e| RuntimeError::Io { path: p.display().to_string(), message: e.to_string() })?;
        std::fs::write(p, text).map_err(|e| io(p, e))?;
    }
    if let Some(p) = svg_path {
        std::fs::write(p, svg(trace, plan)?).map_err(|e| io(p, e))?;
    }
    Ok(())
}

/// Checks that `trace` describes `plan` (every unit names its nodes, every bar a unit and a place)
/// before it is drawn: a trace of another plan is an error, never a panic.
fn check_shape(trace: &Trace, plan: &Plan) -> Result<(), RuntimeError> {
    let n = plan.node_count();
    let bad = |what: String| RuntimeError::Usage(format!("the trace does not describe this plan ({n} nodes): {what}"));
    if let Some((u, m)) = trace.units.iter().enumerate().find_map(|(u, ms)| ms.iter().find(|m| m.index() >= n).map(|m| (u, m))) {
        return Err(bad(format!("unit {u} names node n{m}")));
    }
    for (r, spans) in trace.replays.iter().enumerate() {
        if let Some(s) = spans.iter().find(|s| s.unit as usize >= trace.units.len() || s.place as usize >= trace.places.len()) {
            return Err(bad(format!("replay {r} has a bar of unit {} at place {}", s.unit, s.place)));
        }
    }
    Ok(())
}

/// The rows bars are drawn on: per place, as few rows as keep each row's bars from overlapping
/// (earliest start first, each bar on the first row free by its start). Returns each bar's row (by
/// replay, in `replays[r]` order) and each row's label.
fn rows(trace: &Trace) -> (Vec<Vec<usize>>, Vec<String>) {
    let mut order: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (r, spans) in trace.replays.iter().enumerate() {
        order.extend(spans.iter().enumerate().map(|(i, s)| (s.start_ns, s.end_ns.max(s.start_ns), r, i)));
    }
    order.sort_unstable();
    // Per place: its rows' (index, last end).
    let mut free: Vec<Vec<(usize, u64)>> = vec![Vec::new(); trace.places.len()];
    let mut labels: Vec<(usize, usize)> = Vec::new();
    let mut row_of: Vec<Vec<usize>> = trace.replays.iter().map(|s| vec![0; s.len()]).collect();
    for (start, end, r, i) in order {
        let place = trace.replays[r][i].place as usize;
        let rows = &mut free[place];
        let row = match rows.iter_mut().find(|(_, last)| *last <= start) {
            Some(slot) => {
                slot.1 = end;
                slot.0
            }
            None => {
                labels.push((place, rows.len()));
                rows.push((labels.len() - 1, end));
                labels.len() - 1
            }
        };
        row_of[r][i] = row;
    }
    // Rows in place order, then sub-row order.
    let mut sorted: Vec<usize> = (0..labels.len()).collect();
    sorted.sort_by_key(|&i| labels[i]);
    let mut rank = vec![0; labels.len()];
    for (k, &i) in sorted.iter().enumerate() {
        rank[i] = k;
    }
    for rows in &mut row_of {
        for row in rows.iter_mut() {
            *row = rank[*row];
        }
    }
    let names = sorted
        .iter()
        .map(|&i| if labels[i].1 == 0 { trace.places[labels[i].0].clone() } else { format!("{} ·{}", trace.places[labels[i].0], labels[i].1) })
        .collect();
    (row_of, names)
}

/// A node's short name: its kernel's, `copy`, `fill`, or its collective.
fn node_name(plan: &Plan, v: NodeId) -> String {
    let g = plan.graph();
    match &g.node(v).op {
        NodeOp::Kernel { kernel, .. } => g.kernel(*kernel).name.clone(),
        NodeOp::Copy { .. } => "copy".into(),
        NodeOp::Fill { .. } => "fill".into(),
        NodeOp::Collective { op, .. } => op.as_str().into(),
    }
}

/// A unit's name: its node's, or for a fused group its members' (`fused ×12: a … b`).
fn unit_name(plan: &Plan, members: &[NodeId]) -> String {
    match members {
        [one] => node_name(plan, *one),
        [a, b] => format!("fused: {} + {}", node_name(plan, *a), node_name(plan, *b)),
        [first, .., last] => format!("fused ×{}: {} … {}", members.len(), node_name(plan, *first), node_name(plan, *last)),
        [] => "(empty)".into(),
    }
}

/// A scalar as text, by its type.
fn scalar_text(v: Scalar) -> String {
    match v.ty {
        ScalarType::U32 => (v.bits as u32).to_string(),
        ScalarType::I32 => (v.bits as u32 as i32).to_string(),
        ScalarType::U64 => v.bits.to_string(),
        ScalarType::I64 => (v.bits as i64).to_string(),
        ScalarType::F32 => f32::from_bits(v.bits as u32).to_string(),
        ScalarType::F64 => f64::from_bits(v.bits).to_string(),
    }
}

/// A node's args as recorded: each param by name — a buffer extent, a value, or a slot with the value
/// the traced replays ran with (`slots`, by slot id; `?` where the trace does not say).
fn node_args(plan: &Plan, v: NodeId, slots: &[Scalar]) -> serde_json::Value {
    let g = plan.graph();
    let mut out = serde_json::Map::new();
    out.insert("node".into(), v.0.into());
    out.insert("lane".into(), plan.lanes().lane_of(v).into());
    let slice = |s: &ostinato::Slice| format!("{}[{}..{}]", g.buffer(s.buffer).name, s.offset, s.offset + s.len);
    match &g.node(v).op {
        NodeOp::Kernel { kernel, launch, args } => {
            let sig = g.kernel(*kernel);
            out.insert("kernel".into(), sig.name.clone().into());
            out.insert("grid".into(), serde_json::json!(launch.grid));
            out.insert("block".into(), serde_json::json!(launch.block));
            out.insert("shared_bytes".into(), launch.shared_bytes.into());
            for (p, a) in sig.params.iter().zip(args) {
                let text = match a {
                    Arg::Buffer(s) => slice(s),
                    Arg::Whole(b) => g.buffer(*b).name.clone(),
                    Arg::Scalar(x) => scalar_text(*x),
                    Arg::Slot(s) => {
                        let value = slots.get(s.index()).map_or("?".into(), |x| scalar_text(*x));
                        format!("slot {} = {value}", g.slots()[s.index()].name)
                    }
                };
                out.insert(format!("param {}", p.name), text.into());
            }
        }
        NodeOp::Copy { src, dst } => {
            out.insert("src".into(), slice(src).into());
            out.insert("dst".into(), slice(dst).into());
        }
        NodeOp::Fill { dst, value } => {
            out.insert("dst".into(), slice(dst).into());
            out.insert("value".into(), format!("{value:#010x}").into());
        }
        NodeOp::Collective { op, dtype, .. } => {
            out.insert("collective".into(), op.as_str().into());
            out.insert("dtype".into(), dtype.as_str().into());
        }
    }
    serde_json::Value::Object(out)
}

/// The trace's earliest start: the zero of both drawings' time axes.
fn origin(trace: &Trace) -> u64 {
    trace.replays.iter().flatten().map(|s: &Span| s.start_ns).min().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, Graph, KernelSig, Launch};

    #[test]
    fn overlapping_bars_of_one_place_get_rows_of_their_own() {
        let mut g = Graph::new();
        let x = g.add_buffer("x", 64).unwrap();
        let k = g.add_kernel(KernelSig::new("k").buffer("o", Access::Read)).unwrap();
        for _ in 0..3 {
            g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(x)], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let bar = |unit, place, s, e| Span { unit, place, start_ns: s, end_ns: e };
        let t = Trace {
            places: vec!["stream 7".into(), "stream 9".into()],
            units: ostinato::trace::unit_per_node(3),
            replays: vec![vec![bar(0, 0, 0, 10), bar(1, 0, 5, 12), bar(2, 1, 0, 4)], vec![bar(0, 0, 20, 30), bar(1, 0, 30, 31), bar(2, 1, 20, 21)]],
            ..Trace::default()
        };
        let (row_of, labels) = rows(&t);
        assert_eq!(labels, ["stream 7", "stream 7 ·1", "stream 9"]);
        assert_eq!(row_of, vec![vec![0, 1, 2], vec![0, 0, 2]]);
        check_shape(&t, &plan).unwrap();
        let mut bad = t.clone();
        bad.replays[0][0].unit = 9;
        assert_eq!(check_shape(&bad, &plan).unwrap_err().kind(), ostinato::ErrorKind::Argument);
    }
}
