//! The trace as Chrome trace-event JSON (the format Perfetto and `chrome://tracing` open): one
//! process, one thread per row (metadata events name and order them), a complete event (`X`) per
//! bar with the node's args as recorded, a flow (`s` → `f`) per edge and replay named by how the
//! backend kept it, and the idle gaps on a row of their own. Times are µs from the trace's first bar.

use ostinato::{EdgeKind, Plan, Trace};
use serde_json::{json, Value};

use super::{check_shape, node_args, origin, rows, unit_name};
use crate::error::RuntimeError;

/// The process id every event carries.
const PID: u64 = 1;

/// The trace-event JSON object of `trace` (of `plan`).
pub fn chrome_json(trace: &Trace, plan: &Plan) -> Result<Value, RuntimeError> {
    check_shape(trace, plan)?;
    let t0 = origin(trace);
    let us = |ns: u64| (ns.saturating_sub(t0)) as f64 / 1000.0;
    let (row_of, labels) = rows(trace);
    let idle_row = labels.len();
    let mut events = vec![json!({"ph": "M", "pid": PID, "name": "process_name", "args": {"name": format!("ostinato {} replay", trace.backend)}})];
    for (tid, label) in labels.iter().chain(std::iter::once(&"idle".to_string())).enumerate() {
        events.push(json!({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": label}}));
        events.push(json!({"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}));
    }
    let unit_of = trace.unit_of(plan.node_count());
    let mut flow_id = 0u64;
    for (r, spans) in trace.replays.iter().enumerate() {
        let mut bar_of = vec![usize::MAX; trace.units.len()];
        for (i, s) in spans.iter().enumerate() {
            bar_of[s.unit as usize] = i;
            let members = &trace.units[s.unit as usize];
            let mut args = match members.as_slice() {
                [one] => node_args(plan, *one, &trace.slots),
                _ => json!({
                    "members": members.iter().map(|m| m.0).collect::<Vec<_>>(),
                    "kernels": members.iter().map(|m| super::node_name(plan, *m)).collect::<Vec<_>>(),
                }),
            };
            args["replay"] = r.into();
            args["place"] = trace.places[s.place as usize].clone().into();
            events.push(json!({
                "ph": "X", "pid": PID, "tid": row_of[r][i], "cat": "node",
                "name": unit_name(plan, members), "ts": us(s.start_ns), "dur": s.duration_ns() as f64 / 1000.0, "args": args,
            }));
        }
        for e in trace.edges.iter().filter(|e| e.kind != EdgeKind::Fused) {
            let bar = |v: ostinato::NodeId| unit_of.get(v.index()).and_then(|&u| bar_of.get(u)).copied().filter(|&i| i != usize::MAX);
            let (Some(a), Some(b)) = (bar(e.from), bar(e.to)) else { continue };
            let (pa, pb) = (&spans[a], &spans[b]);
            let name = e.kind.as_str();
            // The consumer's start less the producer's end (negative where it began first).
            let args = json!({"from": e.from.0, "to": e.to.0, "replay": r, "gap_ns": pb.gap_after(pa)});
            events.push(json!({"ph": "s", "pid": PID, "tid": row_of[r][a], "id": flow_id, "cat": "edge", "name": name, "ts": us(pa.start_ns), "args": args}));
            events.push(
                json!({"ph": "f", "bp": "e", "pid": PID, "tid": row_of[r][b], "id": flow_id, "cat": "edge", "name": name, "ts": us(pb.start_ns), "args": args}),
            );
            flow_id += 1;
        }
        if let Some(sum) = trace.summary(r) {
            for (a, b) in sum.gaps {
                events.push(json!({"ph": "X", "pid": PID, "tid": idle_row, "cat": "idle", "name": "idle", "ts": us(a), "dur": (b - a) as f64 / 1000.0, "args": {"replay": r}}));
            }
        }
    }
    let summaries: Vec<Value> = (0..trace.replays.len())
        .filter_map(|r| trace.summary(r))
        .map(|s| json!({"step_ns": s.step_ns, "sum_ns": s.sum_ns, "busy_ns": s.busy_ns, "idle_ns": s.idle_ns, "gaps": s.gaps.len()}))
        .collect();
    Ok(json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "backend": trace.backend,
            "clock": trace.clock,
            "origin_ns": t0,
            "plan_fingerprint": format!("{:016x}", plan.fingerprint()),
            "nodes": plan.node_count(),
            "edges": plan.edges().len(),
            "notes": trace.notes,
            "replays": summaries,
        },
    }))
}
