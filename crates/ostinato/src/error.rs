//! Errors of recording and planning. Each names the node and param it is about.

use thiserror::Error;

/// A recording call was refused; the graph is unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GraphError {
    #[error("a {what} needs a non-empty name")]
    EmptyName { what: &'static str },
    /// Names are identifiers: they become file names (`run --dump`), C and Python identifiers.
    #[error(
        "{what} name {name:?} is not an identifier: up to {} ASCII letters, digits, `_`, `.` and `-`, starting with a letter or `_`",
        crate::graph::MAX_NAME_LEN
    )]
    BadName { what: &'static str, name: String },
    #[error("{what} `{name}` is declared twice")]
    DuplicateName { what: &'static str, name: String },
    #[error("buffer `{buffer}` has size 0")]
    EmptyBuffer { buffer: String },
    #[error("unknown buffer id {id}")]
    UnknownBuffer { id: u32 },
    #[error("view `{view}` ({offset}+{len}) lies outside buffer `{parent}` of {parent_size} bytes")]
    ViewOutOfRange { view: String, parent: String, offset: u64, len: u64, parent_size: u64 },
    #[error("node {node}: unknown kernel id {id}")]
    UnknownKernel { node: u32, id: u32 },
    #[error("node {node} ({kernel}): {got} args given but the signature has {expected} params")]
    ArgCount { node: u32, kernel: String, expected: usize, got: usize },
    #[error("node {node} ({kernel}): bad launch: {reason}")]
    BadLaunch { node: u32, kernel: String, reason: String },
    #[error("node {node}, param `{param}`: {reason}")]
    BadArg { node: u32, param: String, reason: String },
    #[error("node {node}, param `{param}`: empty extent of buffer `{buffer}` (length 0 declares no access)")]
    EmptySlice { node: u32, param: String, buffer: String },
    #[error("node {node}, param `{param}`: extent {offset}+{len} lies outside buffer `{buffer}` of {size} bytes")]
    SliceOutOfRange { node: u32, param: String, buffer: String, offset: u64, len: u64, size: u64 },
    #[error("node {node}, param `{param}`: slot `{slot}` is a {got} but the param is a {expected}")]
    SlotType { node: u32, param: String, slot: String, expected: &'static str, got: &'static str },
    #[error("node {node}: explicit edge names node {referenced}, which is not recorded")]
    UnknownNode { node: u32, referenced: u32 },
    #[error("node {node}: an explicit edge from a node to itself")]
    SelfEdge { node: u32 },
    #[error("node {node} ({what}): {detail}: a kernel runs on one device (copy between devices instead)")]
    MixedDevices { node: u32, what: String, detail: String },
    #[error("node {node} ({op}): {reason}")]
    Collective { node: u32, op: &'static str, reason: String },
}

/// Planning failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The union of hazard order and explicit edges has a cycle; `cycle` lists its nodes in order.
    #[error("explicit edges make a cycle: {}", describe_cycle(.cycle))]
    Cycle { cycle: Vec<u32> },
    #[error("plan option: {0}")]
    BadOption(String),
    /// The system would not give the planner the memory it asked for (within its budget).
    #[error("planning {nodes} nodes: the system refused {bytes} bytes of planner memory")]
    OutOfMemory { nodes: usize, bytes: u64 },
}

fn describe_cycle(c: &[u32]) -> String {
    let mut s: Vec<String> = c.iter().map(|n| format!("node {n}")).collect();
    if let Some(first) = c.first() {
        s.push(format!("node {first}"));
    }
    s.join(" -> ")
}

/// A slot patch was refused; the slot keeps its old value.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SlotError {
    #[error("unknown slot id {0}")]
    Unknown(u32),
    #[error("slot `{slot}` is a {ty} of {expected} bytes, got {got} bytes")]
    WrongSize { slot: String, ty: &'static str, expected: usize, got: usize },
    #[error("slot `{slot}` is a {expected}, got a {got}")]
    WrongType { slot: String, expected: &'static str, got: &'static str },
}

/// A kernel implementation does not fit the graph's signature.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BindError {
    #[error("kernel `{kernel}` has no implementation bound for backend `{backend}`")]
    Missing { kernel: String, backend: String },
    #[error("kernel `{kernel}`: implementation signature does not match the graph's: {reason}")]
    Signature { kernel: String, reason: String },
    #[error("buffer `{buffer}`: bound memory of {got} bytes, the graph declares {expected}")]
    BufferSize { buffer: String, expected: u64, got: u64 },
    #[error("buffer `{buffer}` is a view; bind its root buffer `{root}` instead")]
    BindView { buffer: String, root: String },
}
