//! What a trace becomes: the trace-event JSON parsed back and validated against the format (metadata,
//! complete and flow events, each flow bound to a bar of its row, rows whose bars never overlap, every
//! node in exactly one bar per replay), the SVG timeline, and `run --trace` / `--trace-svg` with
//! `--check`: traced replays compute the host oracle's bytes. On the host always; on Vulkan and CUDA
//! where a device is found (else a SKIP line).

use std::collections::BTreeMap;
use std::path::PathBuf;

use ostinato::{KernelRef, Plan};
use ostinato_runtime::{BackendKind, BackendSpec, ExecOptions, RunOptions, Session};
use ostinato_testkit::random_graphs::random_mix_program;
use proptest::prelude::*;
use serde_json::Value;

/// Checks `json` against the Chrome trace-event format as the runtime writes it, and that it shows
/// every node of an `n`-node plan exactly once in each of `replays` replays. Returns the number of
/// bars of nodes.
fn validate(json: &Value, n: usize, replays: usize) -> Result<usize, String> {
    let events = json.get("traceEvents").and_then(Value::as_array).ok_or("no traceEvents array")?;
    match json.get("displayTimeUnit").and_then(Value::as_str) {
        Some("ns" | "ms") => {}
        other => return Err(format!("displayTimeUnit {other:?}")),
    }
    let num = |e: &Value, k: &str| e.get(k).and_then(Value::as_f64).ok_or(format!("{k} is not a number in {e}"));
    let int = |e: &Value, k: &str| e.get(k).and_then(Value::as_u64).ok_or(format!("{k} is not an unsigned integer in {e}"));
    let mut bars: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    let mut named_rows = Vec::new();
    let mut flows: BTreeMap<u64, Vec<(String, u64, f64)>> = BTreeMap::new();
    let mut seen = vec![vec![0usize; n]; replays];
    let mut node_bars = 0;
    for e in events {
        let ph = e.get("ph").and_then(Value::as_str).ok_or(format!("no ph in {e}"))?;
        int(e, "pid")?;
        let name = e.get("name").and_then(Value::as_str).ok_or(format!("no name in {e}"))?;
        match ph {
            "M" => {
                let args = e.get("args").ok_or("metadata without args")?;
                match name {
                    "process_name" => drop(args.get("name").and_then(Value::as_str).ok_or("process_name without a name")?),
                    "thread_name" => {
                        args.get("name").and_then(Value::as_str).ok_or("thread_name without a name")?;
                        named_rows.push(int(e, "tid")?);
                    }
                    "thread_sort_index" => drop(args.get("sort_index").and_then(Value::as_u64).ok_or("sort index not an integer")?),
                    other => return Err(format!("unknown metadata event {other}")),
                }
            }
            "X" => {
                let (tid, ts, dur) = (int(e, "tid")?, num(e, "ts")?, num(e, "dur")?);
                if ts < 0.0 || dur < 0.0 || !e.get("cat").is_some_and(Value::is_string) || !e.get("args").is_some_and(Value::is_object) {
                    return Err(format!("bad complete event {e}"));
                }
                bars.entry(tid).or_default().push((ts, ts + dur));
                if e["cat"] == "node" {
                    node_bars += 1;
                    let r = int(&e["args"], "replay")? as usize;
                    let members: Vec<u64> = match e["args"].get("members") {
                        Some(m) => m.as_array().ok_or("members not an array")?.iter().filter_map(Value::as_u64).collect(),
                        None => vec![int(&e["args"], "node")?],
                    };
                    for m in members {
                        *seen.get_mut(r).and_then(|s| s.get_mut(m as usize)).ok_or(format!("replay {r} node {m} out of range"))? += 1;
                    }
                }
            }
            "s" | "f" => {
                if ph == "f" && e.get("bp").and_then(Value::as_str) != Some("e") {
                    return Err(format!("a flow end not bound to its enclosing slice: {e}"));
                }
                if !["full", "programmatic", "barrier", "handoff"].contains(&name) {
                    return Err(format!("flow named {name}"));
                }
                if !e["args"].get("gap_ns").is_some_and(Value::is_i64) {
                    return Err(format!("a flow without its gap (consumer start less producer end) in ns: {e}"));
                }
                flows.entry(int(e, "id")?).or_default().push((ph.to_string(), int(e, "tid")?, num(e, "ts")?));
            }
            other => return Err(format!("unknown phase {other}")),
        }
    }
    for (tid, list) in &mut bars {
        if !named_rows.contains(tid) {
            return Err(format!("row {tid} has bars but no thread_name"));
        }
        list.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if let Some(w) = list.windows(2).find(|w| w[1].0 < w[0].1 - 1e-9) {
            return Err(format!("row {tid}: bars {:?} and {:?} overlap", w[0], w[1]));
        }
    }
    for (id, ends) in &flows {
        let kinds: Vec<&str> = ends.iter().map(|(p, _, _)| p.as_str()).collect();
        if kinds != ["s", "f"] {
            return Err(format!("flow {id} has ends {kinds:?}"));
        }
        for (_, tid, ts) in ends {
            let inside = bars.get(tid).is_some_and(|l| l.iter().any(|&(a, b)| a - 1e-9 <= *ts && *ts <= b + 1e-9));
            if !inside {
                return Err(format!("flow {id} at {ts} µs lies in no bar of row {tid}"));
            }
        }
    }
    for (r, counts) in seen.iter().enumerate() {
        if let Some(v) = counts.iter().position(|&c| c != 1) {
            return Err(format!("replay {r}: node {v} appears {} times", counts[v]));
        }
    }
    Ok(node_bars)
}

fn host_exec(plan: &Plan, threads: usize) -> Box<dyn ostinato_runtime::ExecHandle> {
    let session = Session::open(&BackendSpec::Host { threads: Some(threads), check_races: true }).unwrap();
    let name = |k: usize| plan.graph().kernels()[k].name.replace("mix_alt", "mix");
    session.instantiate(plan, &|k| Ok(KernelRef::builtin(&name(k)))).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_json_of_a_host_trace_is_valid_trace_event_format(seed in 0u64..1 << 40, nodes in 1usize..40, threads in 0usize..4) {
        let prog = random_mix_program(seed, nodes);
        let plan = Plan::compile(&prog.graph).unwrap();
        let mut exec = host_exec(&plan, threads);
        exec.write_inits(&prog.inits).unwrap();
        let t = exec.trace(2).unwrap();
        let text = serde_json::to_string(&ostinato_runtime::trace::chrome_json(&t, &plan).unwrap()).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(validate(&back, plan.node_count(), 2), Ok(2 * plan.node_count()));
        let flows = back["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "s").count();
        prop_assert_eq!(flows, 2 * plan.edges().len());
        let svg = ostinato_runtime::trace::svg(&t, &plan).unwrap();
        prop_assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        prop_assert!(svg.matches("<rect").count() > 2 * plan.node_count());
    }
}

/// Slot values reach the args as the replays ran with them.
#[test]
fn a_bar_carries_its_nodes_args_with_the_slots_values() {
    let prog = random_mix_program(3, 12);
    let plan = Plan::compile(&prog.graph).unwrap();
    let mut exec = host_exec(&plan, 2);
    exec.set_slot(prog.salt_slot, ostinato::Scalar::u32(4242)).unwrap();
    let t = exec.trace(1).unwrap();
    let json = ostinato_runtime::trace::chrome_json(&t, &plan).unwrap();
    let bars: Vec<&Value> = json["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "node" && e["args"]["kernel"] == "mix").collect();
    assert!(!bars.is_empty());
    assert!(bars.iter().all(|e| e["args"]["grid"].is_array() && e["args"]["param out"].as_str().is_some_and(|s| s.contains('['))));
    let slotted: Vec<&&Value> = bars.iter().filter(|e| e["args"]["param salt"].as_str().is_some_and(|s| s.starts_with("slot"))).collect();
    assert!(slotted.iter().all(|e| e["args"]["param salt"] == "slot salt = 4242"), "{slotted:?}");
}

/// A fused group is one bar naming its members (its name and its args), and a tile hand-off is a
/// flow of its own kind in the JSON and a teal arrow in the SVG: a trace as the CUDA backend makes it
/// for a chain a -> b -> c whose a and b run fused and whose c waits for b tile by tile.
#[test]
fn a_fused_group_is_one_bar_naming_its_members_and_a_handoff_is_its_own_flow() {
    use ostinato::{Access, Arg, EdgeKind, Graph, KernelSig, Launch, NodeId, Span, Trace};
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64).unwrap();
    let k = g.add_kernel(KernelSig::new("step").buffer("o", Access::ReadWrite)).unwrap();
    for _ in 0..3 {
        g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(x)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let unit_of = [0, 0, 1];
    let t = Trace {
        backend: "cuda".into(),
        places: vec!["stream 13".into()],
        units: vec![vec![NodeId(0), NodeId(1)], vec![NodeId(2)]],
        edges: ostinato::trace::edges_of(&plan, &unit_of, |_| EdgeKind::Handoff),
        replays: vec![vec![Span { unit: 0, place: 0, start_ns: 1_000, end_ns: 9_000 }, Span { unit: 1, place: 0, start_ns: 2_000, end_ns: 12_000 }]],
        ..Trace::default()
    };
    t.check(&plan).unwrap();
    let json = ostinato_runtime::trace::chrome_json(&t, &plan).unwrap();
    validate(&json, 3, 1).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let fused: Vec<&Value> = events.iter().filter(|e| e["cat"] == "node" && e["args"]["members"].is_array()).collect();
    assert_eq!(fused.len(), 1);
    assert_eq!(fused[0]["name"], "fused: step + step");
    assert_eq!(fused[0]["args"]["members"], serde_json::json!([0, 1]));
    let flows: Vec<&str> = events.iter().filter(|e| e["ph"] == "s").map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(flows, ["handoff"], "the fused edge is no flow; the hand-off is one");
    let svg = ostinato_runtime::trace::svg(&t, &plan).unwrap();
    assert!(svg.contains("#009688"), "the hand-off arrow is drawn");
    assert!(svg.contains("teal arrows: tile hand-offs"));
}

fn mix_example() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}")).join("examples/mix.toml")
}

fn run_traced(backend: BackendKind, name: &str) -> Result<(ostinato_runtime::RunReport, Value, String), ostinato_runtime::RuntimeError> {
    let dir = std::env::temp_dir().join(format!("ostinato-trace-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, svg) = (dir.join("t.json"), dir.join("t.svg"));
    let o = RunOptions {
        backend,
        exec: ExecOptions::default(),
        replays: 3,
        check: true,
        dump: None,
        dot: None,
        max_lanes: 4,
        trace: Some(json.clone()),
        trace_svg: Some(svg.clone()),
    };
    let r = ostinato_runtime::run_file(&mix_example(), &o);
    let out = r.map(|r| (r, serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(), std::fs::read_to_string(&svg).unwrap()));
    let _ = std::fs::remove_dir_all(dir);
    out
}

/// `run --trace --trace-svg --check` on the host: the traced replays pass the check.
#[test]
fn run_with_a_trace_passes_its_check_on_the_host() {
    let (r, json, svg) = run_traced(BackendKind::Host, "host").unwrap();
    assert!(r.checked);
    assert_eq!(validate(&json, 5, 3), Ok(15));
    assert!(r.notes.iter().any(|n| n.starts_with("trace: replay 2:")), "{:?}", r.notes);
    // The host keeps every edge as a full dependency: each consumer starts after its producer ended.
    let gaps = r.notes.iter().find(|n| n.contains("full edges between bars")).unwrap_or_else(|| panic!("{:?}", r.notes));
    assert!(gaps.ends_with("; 0 consumers began before their producer ended"), "{gaps}");
    assert!(svg.contains("host: 5 nodes"));
}

/// The same on Vulkan (lavapipe in CI), where a device is found.
#[test]
fn run_with_a_trace_passes_its_check_on_vulkan() {
    match run_traced(BackendKind::Vulkan, "vulkan") {
        Ok((r, json, _)) => {
            assert!(r.checked);
            let bars = validate(&json, 5, 3).unwrap();
            assert!(bars <= 15 && bars > 0);
        }
        Err(e) if e.kind() == ostinato::ErrorKind::BackendMissing => ostinato_testkit::skip(&format!("SKIP run_with_a_trace_passes_its_check_on_vulkan: {e}")),
        Err(e) => panic!("{e}"),
    }
}

/// The same on CUDA (graph mode; CUPTI from the toolkit or a wheel), where a driver is found.
#[test]
fn run_with_a_trace_passes_its_check_on_cuda() {
    match run_traced(BackendKind::Cuda, "cuda") {
        Ok((r, json, _)) => {
            assert!(r.checked);
            validate(&json, 5, 3).unwrap();
        }
        Err(e) if e.kind() == ostinato::ErrorKind::BackendMissing => ostinato_testkit::skip(&format!("SKIP run_with_a_trace_passes_its_check_on_cuda: {e}")),
        Err(e) => panic!("{e}"),
    }
}
