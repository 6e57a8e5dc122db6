use super::*;
use crate::adopt::Orderings;
use crate::decide::decide;
use crate::model::{Edge, GraphModel, Node, NodeBody};

#[test]
fn settings_come_from_the_environment() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    assert_eq!(Config::from_vars(vars(&[])), Config { log: None, budget: DEFAULT_BUDGET, adopt: true, orderings: Orderings::Captured });
    assert_eq!(Config::from_vars(vars(&[("OSTINATO_PRELOAD_LOG", "")])).log, None);
    assert_eq!(Config::from_vars(vars(&[("OSTINATO_PRELOAD_LOG", "-")])).log, Some(Target::Stderr));
    let c = Config::from_vars(vars(&[("OSTINATO_PRELOAD_LOG", "/tmp/x.jsonl"), ("OSTINATO_PRELOAD_IMAGE_BUDGET", "4096")]));
    assert_eq!(c, Config { log: Some(Target::File("/tmp/x.jsonl".into())), budget: 4096, adopt: true, orderings: Orderings::Captured });
    assert_eq!(Config::from_vars(vars(&[("OSTINATO_PRELOAD_IMAGE_BUDGET", "lots")])).budget, DEFAULT_BUDGET);
    assert!(!Config::from_vars(vars(&[("OSTINATO_PRELOAD_ADOPT", "0")])).adopt);
    assert!(!Config::from_vars(vars(&[("OSTINATO_PRELOAD_ADOPT", "Off")])).adopt);
    assert!(Config::from_vars(vars(&[("OSTINATO_PRELOAD_ADOPT", "1")])).adopt);
    assert_eq!(Config::from_vars(vars(&[("OSTINATO_PRELOAD_EDGES", "needed")])).orderings, Orderings::Needed);
}

fn graph() -> GraphModel {
    GraphModel {
        flags: 0,
        arch: Some(90),
        nodes: vec![Node { index: 0, body: NodeBody::Other { code: 3, name: "host" } }, Node { index: 1, body: NodeBody::Other { code: 3, name: "host" } }],
        edges: vec![Edge::new(0, 1, 1, 0, 1)],
        handles: Vec::new(),
        error: None,
    }
}

#[test]
fn an_instantiate_line_is_one_json_object_with_the_graph_and_the_decision() {
    let g = graph();
    let call = Call { api: "cuGraphInstantiateWithFlags", graph: 0xabc, exec: 0xdef, result: 0, read_us: 12 };
    let line = instantiate_line(3, &call, &g, &decide(&g), &AdoptionLog::not("not_adopted", "falls through"));
    assert!(!line.contains('\n'));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"], "instantiate");
    assert_eq!(v["seq"], 3);
    assert_eq!(v["graph"], "0xabc");
    assert_eq!(v["exec"], "0xdef");
    assert_eq!(v["counts"]["nodes"], 2);
    assert_eq!(v["counts"]["programmatic_edges"], 1);
    assert_eq!(v["edges"][0]["programmatic"], true);
    assert_eq!(v["edges"][0]["from_port"], 1);
    assert_eq!(v["edges"][0]["type"], 1);
    assert_eq!(v["nodes"][1]["type"], "other");
    assert_eq!(v["nodes"][1]["name"], "host");
    assert_eq!(v["decision"]["verdict"], "fall_through");
    assert_eq!(v["decision"]["reasons"][0]["reason"], "node_type");
    assert_eq!(v["decision"]["reasons"][0]["node"], 0);
    assert!(v["decision"]["reason"].as_str().unwrap().contains("host node"));
}

#[test]
fn a_destroy_line_counts_launches() {
    let v: serde_json::Value = serde_json::from_str(&destroy_line(4, 0x10, 7, true, 5)).unwrap();
    assert_eq!(
        (v["event"].as_str(), v["seq"].as_u64(), v["launches"].as_u64(), v["adoptable"].as_bool()),
        (Some("exec_destroy"), Some(4), Some(7), Some(true))
    );
}

#[test]
fn a_file_sink_appends_whole_lines() {
    let path = std::env::temp_dir().join(format!("ostinato-preload-log-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    for _ in 0..2 {
        Sink::open(&Target::File(path.clone())).unwrap().line("{\"a\":1}");
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"a\":1}\n");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_explanation_labels_the_nodes_cuts_long_names_and_keeps_the_decision_and_the_adoption() {
    let mut g = graph();
    let long = "_Z".to_string() + &"x".repeat(500);
    g.nodes[1].body = NodeBody::Kernel(crate::model::KernelNode {
        name: Some(long),
        grid: [1; 3],
        block: [32, 1, 1],
        shared_bytes: 0,
        code: crate::code::CodeStatus::NotAnalysed { why: "machine code only".into() },
        params: Vec::new(),
        params_error: None,
    });
    let call = Call { api: "cuGraphInstantiateWithFlags", graph: 0xabc, exec: 0xdef, result: 0, read_us: 12 };
    let text = explanation(5, &call, &g, &decide(&g), &AdoptionLog::not("not_adopted", "falls through"), false);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["nodes"][0], "host");
    let label = v["nodes"][1].as_str().unwrap();
    assert!(label.starts_with("kernel _Zxx") && label.ends_with('…') && label.chars().count() == "kernel ".len() + LABEL_CHARS + 1, "{label}");
    assert_eq!(v["captured"], serde_json::json!([[0, 1, true]]));
    assert_eq!(v["decision"]["verdict"], "fall_through");
    assert_eq!(v["adoption"]["status"], "not_adopted");
    assert_eq!(v["exec"], "0xdef");
    assert!(!text.contains("\"params\""), "an explanation holds no params: {text}");
    assert!(v.get("brief").is_none());
    // Past the budget: the decision and the adoption, no labels or edges.
    let brief: serde_json::Value =
        serde_json::from_str(&explanation(5, &call, &g, &decide(&g), &AdoptionLog::not("not_adopted", "falls through"), true)).unwrap();
    assert_eq!((brief["brief"].as_bool(), brief["nodes"].as_array().map(Vec::len)), (Some(true), Some(0)));
    assert_eq!(brief["decision"]["verdict"], "fall_through");
}
