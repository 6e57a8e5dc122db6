//! Whether Ostinato could replay a graph, decided from its read-back model alone. A graph is
//! adoptable only if every node is a kernel, memset, memcpy (device to device) or empty node, every kernel's
//! code is known and analysed with no access the analysis cannot attribute and no write to
//! module-scope state, every edge is a full dependency or a programmatic (PDL) one, and it is not
//! instantiated for device launch. Anything else falls through to the real runtime, with every reason
//! found (node, type, kernel).

use std::fmt;

use serde::Serialize;

use ostinato::contract::Observed;

use crate::code::CodeStatus;
use crate::model::{Edge, GraphModel, KernelNode, Node, NodeBody, FLAG_DEVICE_LAUNCH};

/// `CU_GRAPH_NODE_TYPE_EMPTY`.
const NODE_EMPTY: u32 = 5;

/// The most reasons kept per graph (the first ones, in node order).
pub const MAX_REASONS: usize = 32;

/// Why a graph falls through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    DeviceLaunch { flags: u64 },
    ReadFailed { error: String },
    Empty,
    NodeType { node: usize, node_type: &'static str },
    Unreadable { node: usize, error: String },
    KernelParams { node: usize, kernel: String, error: String },
    KernelCode { node: usize, kernel: String, why: String },
    UnknownAccess { node: usize, kernel: String, param: usize },
    ModuleWrites { node: usize, kernel: String, evidence: String },
    MemcpyNotDevice { node: usize, src_type: u32, dst_type: u32 },
    Edge { from: usize, to: usize, from_port: u8, to_port: u8, edge_type: u8 },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::DeviceLaunch { flags } => write!(f, "instantiated for device launch (flags {flags:#x})"),
            Reason::ReadFailed { error } => write!(f, "the graph could not be read back: {error}"),
            Reason::Empty => write!(f, "the graph has no nodes"),
            Reason::NodeType { node, node_type } => write!(f, "node {node} is a {node_type} node"),
            Reason::Unreadable { node, error } => write!(f, "node {node} could not be read: {error}"),
            Reason::KernelParams { node, kernel, error } => write!(f, "node {node} (kernel `{kernel}`): its params could not be read: {error}"),
            Reason::KernelCode { node, kernel, why } => write!(f, "node {node} (kernel `{kernel}`): code not analysed: {why}"),
            Reason::UnknownAccess { node, kernel, param } => {
                write!(f, "node {node} (kernel `{kernel}`): param {param} has an access the analysis cannot attribute")
            }
            Reason::ModuleWrites { node, kernel, evidence } => write!(f, "node {node} (kernel `{kernel}`) writes module-scope state: {evidence}"),
            Reason::MemcpyNotDevice { node, src_type, dst_type } => {
                write!(f, "node {node} copies memory of types {src_type} to {dst_type} (device to device only)")
            }
            Reason::Edge { from, to, from_port, to_port, edge_type } => {
                write!(f, "edge {from} -> {to}: port {from_port} -> {to_port}, type {edge_type} (full or programmatic only)")
            }
        }
    }
}

/// The decision for one graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// `adoptable` or `fall_through`.
    pub verdict: &'static str,
    /// The first reason, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<Reason>,
}

impl Decision {
    pub fn adoptable(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// Decides for `graph`.
pub fn decide(graph: &GraphModel) -> Decision {
    let mut reasons = Vec::new();
    if graph.flags & FLAG_DEVICE_LAUNCH != 0 {
        reasons.push(Reason::DeviceLaunch { flags: graph.flags });
    }
    if let Some(error) = &graph.error {
        reasons.push(Reason::ReadFailed { error: error.clone() });
    } else if graph.nodes.is_empty() {
        reasons.push(Reason::Empty);
    }
    for node in &graph.nodes {
        node_reasons(node, &mut reasons);
    }
    reasons.extend(graph.edges.iter().filter(|e| !edge_adoptable(e)).map(|e| Reason::Edge {
        from: e.from,
        to: e.to,
        from_port: e.from_port,
        to_port: e.to_port,
        edge_type: e.kind,
    }));
    reasons.truncate(MAX_REASONS);
    Decision { verdict: if reasons.is_empty() { "adoptable" } else { "fall_through" }, reason: reasons.first().map(|r| r.to_string()), reasons }
}

/// A full dependency (port 0, type default) or a programmatic one (port 1, type programmatic).
fn edge_adoptable(e: &Edge) -> bool {
    e.to_port == 0 && matches!((e.from_port, e.kind), (0, 0) | (1, 1))
}

fn node_reasons(node: &Node, out: &mut Vec<Reason>) {
    let i = node.index;
    match &node.body {
        NodeBody::Kernel(k) => kernel_reasons(i, k, out),
        NodeBody::Memset(_) => {}
        NodeBody::Memcpy(m) if m.device_to_device() => {}
        NodeBody::Memcpy(m) => out.push(Reason::MemcpyNotDevice { node: i, src_type: m.src_type, dst_type: m.dst_type }),
        // An empty node orders and does nothing: adopted as it is, its edges full (no kernel end).
        NodeBody::Other { code: NODE_EMPTY, .. } => {}
        NodeBody::Other { name, .. } => out.push(Reason::NodeType { node: i, node_type: name }),
        NodeBody::Unreadable { error } => out.push(Reason::Unreadable { node: i, error: error.clone() }),
    }
}

fn kernel_reasons(node: usize, k: &KernelNode, out: &mut Vec<Reason>) {
    let kernel = k.name.clone().unwrap_or_else(|| "?".into());
    if let Some(error) = &k.params_error {
        out.push(Reason::KernelParams { node, kernel: kernel.clone(), error: error.clone() });
    }
    match &k.code {
        CodeStatus::NotAnalysed { why } => out.push(Reason::KernelCode { node, kernel, why: why.clone() }),
        CodeStatus::Analysed { module_writes, .. } => {
            if let Some(evidence) = module_writes.first() {
                out.push(Reason::ModuleWrites { node, kernel: kernel.clone(), evidence: evidence.clone() });
            }
            for p in k.params.iter().filter(|p| p.access == Some(Observed::Unknown)) {
                out.push(Reason::UnknownAccess { node, kernel: kernel.clone(), param: p.index });
            }
        }
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
