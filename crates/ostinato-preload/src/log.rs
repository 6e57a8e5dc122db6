//! The interposer's settings (environment variables) and its log: one JSON line per instantiated
//! graph (`"event": "instantiate"`: the graph read back, the decision) and one per destroyed
//! executable graph (`"event": "exec_destroy"`: how often it was launched).
//!
//! - `OSTINATO_PRELOAD_ADOPT=0` (or `off`, `false`): observe only, never adopt (adoption is on by
//!   default; `ostinato_preload_set_adopt` switches it for graphs instantiated later).
//! - `OSTINATO_PRELOAD_EDGES=needed`: an adopted graph submits only the orderings the code needs
//!   (a study option; by default it keeps the captured edges and changes only their fences).
//! - `OSTINATO_PRELOAD_LOG=path` appends the lines to `path`; `-` writes them to stderr. With neither
//!   adoption nor a log the interposer only forwards calls: it keeps no image, reads no graph.
//! - `OSTINATO_PRELOAD_IMAGE_BUDGET=bytes`: the most bytes of code images kept (default 1 GiB).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::Serialize;

use crate::adopt::{AdoptedEdge, DroppedEdge, Orderings};
use crate::decide::Decision;
use crate::model::{Edge, GraphModel, Hex, Node, NodeBody};

/// The default image budget.
pub const DEFAULT_BUDGET: usize = 1 << 30;

/// Where the log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Stderr,
    File(PathBuf),
}

/// The settings, read once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where the log goes (`None`: no log).
    pub log: Option<Target>,
    pub budget: usize,
    /// Whether adoptable graphs are adopted (at start).
    pub adopt: bool,
    /// Which orderings an adopted graph submits.
    pub orderings: Orderings,
}

impl Config {
    /// The settings from variables (`get(name)`).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Config {
        let log = get("OSTINATO_PRELOAD_LOG").filter(|v| !v.is_empty()).map(|v| if v == "-" { Target::Stderr } else { Target::File(v.into()) });
        let budget = get("OSTINATO_PRELOAD_IMAGE_BUDGET").and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_BUDGET);
        let adopt = !get("OSTINATO_PRELOAD_ADOPT").is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no"));
        let orderings = if get("OSTINATO_PRELOAD_EDGES").is_some_and(|v| v.trim() == "needed") { Orderings::Needed } else { Orderings::Captured };
        Config { log, budget, adopt, orderings }
    }
}

/// The open log.
pub struct Sink(Mutex<Box<dyn Write + Send>>);

impl Sink {
    /// Opens `target` (a file is appended to).
    pub fn open(target: &Target) -> std::io::Result<Sink> {
        let w: Box<dyn Write + Send> = match target {
            Target::Stderr => Box::new(std::io::stderr()),
            Target::File(p) => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(p)?),
        };
        Ok(Sink(Mutex::new(w)))
    }

    /// Writes one line, whole (a failed write is dropped: the log never fails the application).
    pub fn line(&self, line: &str) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let _ = w.write_all(&bytes).and_then(|()| w.flush());
    }
}

/// Node and edge counts of a graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub nodes: usize,
    pub edges: usize,
    pub kernels: usize,
    pub programmatic_edges: usize,
}

impl Counts {
    pub fn of(g: &GraphModel) -> Counts {
        Counts {
            nodes: g.nodes.len(),
            edges: g.edges.len(),
            kernels: g.nodes.iter().filter(|n| matches!(n.body, NodeBody::Kernel(_))).count(),
            programmatic_edges: g.edges.iter().filter(|e| e.programmatic).count(),
        }
    }
}

/// How one instantiate call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The entry point the application called.
    pub api: &'static str,
    pub graph: u64,
    /// The executable graph it made (0 on failure).
    pub exec: u64,
    /// The real call's `CUresult`.
    pub result: i32,
    /// Microseconds spent reading the graph back and deciding.
    pub read_us: u64,
}

#[derive(Serialize)]
struct InstantiateLine<'a> {
    event: &'static str,
    seq: u64,
    pid: u32,
    api: &'static str,
    graph: Hex,
    exec: Hex,
    result: i32,
    flags: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    arch: Option<u32>,
    counts: Counts,
    decision: &'a Decision,
    adoption: &'a AdoptionLog,
    nodes: &'a [Node],
    edges: &'a [Edge],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    read_us: u64,
}

/// What became of an instantiated graph: adopted (replayed as the adopted graph), or not, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdoptionLog {
    /// `adopted`, `not_adopted` or `off`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The adopted graph's edges, the captured ones it does not submit, and counts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<AdoptedEdge>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<DroppedEdge>,
    pub programmatic: usize,
    pub new_programmatic: usize,
    /// Microseconds spent deriving the edges and building the adopted executable graph.
    pub adopt_us: u64,
}

impl AdoptionLog {
    pub fn not(status: &'static str, why: impl Into<String>) -> AdoptionLog {
        AdoptionLog { status, why: Some(why.into()), ..AdoptionLog::default() }
    }
}

/// The line of one instantiated graph (`seq`: its number in this process).
pub fn instantiate_line(seq: u64, call: &Call, graph: &GraphModel, decision: &Decision, adoption: &AdoptionLog) -> String {
    let line = InstantiateLine {
        event: "instantiate",
        seq,
        pid: std::process::id(),
        api: call.api,
        graph: Hex(call.graph),
        exec: Hex(call.exec),
        result: call.result,
        flags: graph.flags,
        arch: graph.arch,
        counts: Counts::of(graph),
        decision,
        adoption,
        nodes: &graph.nodes,
        edges: &graph.edges,
        error: graph.error.as_deref(),
        read_us: call.read_us,
    };
    serde_json::to_string(&line).unwrap_or_else(|e| format!("{{\"event\":\"instantiate\",\"seq\":{seq},\"error\":\"{e}\"}}"))
}

/// The longest node label an explanation keeps (kernel names are mangled C++ and can run to kilobytes).
const LABEL_CHARS: usize = 160;

#[derive(Serialize)]
struct Explanation<'a> {
    seq: u64,
    api: &'static str,
    graph: Hex,
    exec: Hex,
    counts: Counts,
    /// Each node: its type, and a kernel's name (cut to [`LABEL_CHARS`] characters).
    nodes: Vec<String>,
    /// The captured edges (`from`, `to`, programmatic).
    captured: Vec<(usize, usize, bool)>,
    decision: &'a Decision,
    adoption: &'a AdoptionLog,
    /// Without `nodes` and `captured` (the budget for explanations was spent).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    brief: bool,
}

/// What `ostinato_preload_explain` returns for one executable graph: its instantiate line without the
/// params (the nodes as labels, the captured edges, the decision and the adoption with every edge kept
/// or dropped and why); `brief`: without the nodes and captured edges (`"brief": true`), for graphs
/// past the state's explanation budget.
pub fn explanation(seq: u64, call: &Call, graph: &GraphModel, decision: &Decision, adoption: &AdoptionLog, brief: bool) -> String {
    let label = |n: &Node| match &n.body {
        NodeBody::Kernel(k) => {
            let name = k.name.as_deref().unwrap_or("?");
            let cut: String = name.chars().take(LABEL_CHARS).collect();
            format!("kernel {cut}{}", if cut.len() < name.len() { "…" } else { "" })
        }
        NodeBody::Memset(_) => "memset".into(),
        NodeBody::Memcpy(_) => "memcpy".into(),
        NodeBody::Other { name, .. } => (*name).into(),
        NodeBody::Unreadable { .. } => "unreadable".into(),
    };
    let e = Explanation {
        seq,
        api: call.api,
        graph: Hex(call.graph),
        exec: Hex(call.exec),
        counts: Counts::of(graph),
        nodes: if brief { Vec::new() } else { graph.nodes.iter().map(label).collect() },
        captured: if brief { Vec::new() } else { graph.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect() },
        decision,
        adoption,
        brief,
    };
    serde_json::to_string(&e).unwrap_or_else(|e| format!("{{\"seq\":{seq},\"error\":\"{e}\"}}"))
}

#[derive(Serialize)]
struct DestroyLine {
    event: &'static str,
    seq: u64,
    pid: u32,
    exec: Hex,
    launches: u64,
    adoptable: bool,
    /// Launches that ran the adopted graph.
    adopted_launches: u64,
}

/// The line of one destroyed executable graph (`seq`: the instantiate it came from).
pub fn destroy_line(seq: u64, exec: u64, launches: u64, adoptable: bool, adopted_launches: u64) -> String {
    let line = DestroyLine { event: "exec_destroy", seq, pid: std::process::id(), exec: Hex(exec), launches, adoptable, adopted_launches };
    serde_json::to_string(&line).unwrap_or_default()
}

#[derive(Serialize)]
struct RevokeLine {
    event: &'static str,
    seq: u64,
    pid: u32,
    exec: Hex,
    api: &'static str,
}

/// The line of an adoption given up (`api` changed the application's executable graph in place: from
/// then on its launches run the application's own graph, changed).
pub fn revoke_line(seq: u64, exec: u64, api: &'static str) -> String {
    serde_json::to_string(&RevokeLine { event: "adoption_revoked", seq, pid: std::process::id(), exec: Hex(exec), api }).unwrap_or_default()
}

#[derive(Serialize)]
struct PatchLine {
    event: &'static str,
    seq: u64,
    pid: u32,
    exec: Hex,
    api: &'static str,
    read_us: u64,
}

/// The line of a node param change (`api`) made on an adopted executable graph in place: read back
/// (`read_us`), the change leaves the adopted edges as they were.
pub fn patch_line(seq: u64, exec: u64, api: &'static str, read_us: u64) -> String {
    serde_json::to_string(&PatchLine { event: "node_params_patched", seq, pid: std::process::id(), exec: Hex(exec), api, read_us }).unwrap_or_default()
}

#[derive(Serialize)]
struct UpdateLine<'a> {
    event: &'static str,
    seq: u64,
    pid: u32,
    exec: Hex,
    graph: Hex,
    api: &'static str,
    result: i32,
    read_us: u64,
    adoption: &'a AdoptionLog,
}

/// The line of an executable graph updated in place (`call.api`, from `call.graph`; `seq`: the
/// instantiate it came from) with what the adoption made of the new graph: adopted again, or not
/// (then the adoption is revoked, in a line of its own).
pub fn update_line(seq: u64, call: &Call, adoption: &AdoptionLog) -> String {
    let line = UpdateLine {
        event: "exec_update",
        seq,
        pid: std::process::id(),
        exec: Hex(call.exec),
        graph: Hex(call.graph),
        api: call.api,
        result: call.result,
        read_us: call.read_us,
        adoption,
    };
    serde_json::to_string(&line).unwrap_or_default()
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
