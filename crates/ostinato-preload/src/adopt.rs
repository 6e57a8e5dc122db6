//! Adopting an adoptable graph ([`crate::decide`]): which of its captured orderings the code needs,
//! and which of those may be programmatic (PDL) edges. A pure function of the read-back model.
//!
//! **Orderings.** By default ([`Orderings::Captured`]) the adopted graph keeps every captured edge
//! and changes only fences. With [`Orderings::Needed`]: each node's footprint is what its code touches: for a kernel, every allocation
//! segment a pointer word of a param holds (`cuMemGetAddressRange`), with the access the PTX shows for
//! that param; for a memset, the bytes it sets; a memcpy, or a kernel whose accessed param holds no
//! pointer the driver could place, touches anything. An ordering `a` before `b` is needed where `a`
//! reaches `b` in the captured graph and their footprints conflict (one writes bytes the other
//! touches). The adopted graph submits the transitive reduction of the needed orderings: every needed
//! ordering is implied, and every submitted edge orders two nodes the captured graph ordered — the
//! adopted graph never orders what the application left unordered, and never leaves unordered what
//! the code needs ordered. Two nodes the application left unordered stay so, even where their
//! segments overlap (a caching allocator puts many tensors in one segment: the application's own
//! graph says they may run side by side).
//!
//! **Fences.** A submitted edge is programmatic where the captured edge was, or where both ends are
//! kernels, the consumer's PTX is certified to wait (`griddepcontrol.wait`) before it writes memory,
//! reads before its wait only segments no node of the graph writes and updates nothing atomically
//! there, and the CUDA backend's `auto` fence policy takes PDL for the two grids and the fan
//! ([`PdlPolicy::full_because`], `docs/fences.md`). Otherwise it is a full dependency, and the
//! adoption says why.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use ostinato::contract::Observed;
use ostinato_runtime::ostinato_cuda::{Dims, PdlMode, PdlPolicy};

use crate::code::{CodeStatus, PdlCode};
use crate::model::{GraphModel, KernelNode, MemsetNode, NodeBody};

/// The most nodes adopted (the needed orderings are found over every pair the graph orders).
pub const MAX_ADOPTED_NODES: usize = 4096;

/// Which orderings an adopted graph submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orderings {
    /// The captured edges, each with its fence (the default): the graph's shape is the
    /// application's, so only fences change. Measured on the H200: dropping the orderings the code
    /// does not need turned `graph_app`'s one root into three, and the driver's launch cost per
    /// parallel branch (`docs/fences.md`, decision 6) made it 0.69x its own graph.
    Captured,
    /// The transitive reduction of the orderings the code needs (`OSTINATO_PRELOAD_EDGES=needed`).
    Needed,
}

/// One edge of the adopted graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AdoptedEdge {
    pub from: usize,
    pub to: usize,
    pub programmatic: bool,
    /// The captured graph had this edge (of either type).
    pub captured: bool,
    /// Why it is a full dependency (`None`: programmatic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full: Option<String>,
}

/// A captured edge the adopted graph does not submit, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DroppedEdge {
    pub from: usize,
    pub to: usize,
    pub why: &'static str,
}

/// The adopted graph's edges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Adoption {
    pub edges: Vec<AdoptedEdge>,
    pub dropped: Vec<DroppedEdge>,
}

impl Adoption {
    pub fn programmatic(&self) -> usize {
        self.edges.iter().filter(|e| e.programmatic).count()
    }
    /// Programmatic edges the captured graph did not have as such.
    pub fn new_programmatic(&self, model: &GraphModel) -> usize {
        let captured: BTreeSet<(usize, usize)> = model.edges.iter().filter(|e| e.programmatic).map(|e| (e.from, e.to)).collect();
        self.edges.iter().filter(|e| e.programmatic && !captured.contains(&(e.from, e.to))).count()
    }
    /// Whether the adopted graph submits exactly the captured edges (nothing to gain).
    pub fn same_as_captured(&self, model: &GraphModel) -> bool {
        let mut captured: Vec<(usize, usize, bool)> = model.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect();
        let mut adopted: Vec<(usize, usize, bool)> = self.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect();
        captured.sort_unstable();
        captured.dedup();
        adopted.sort_unstable();
        captured == adopted
    }
}

/// Bytes `[lo, hi)`, written or only read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
    write: bool,
}

/// What a node touches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Footprint {
    Known(Vec<Range>),
    /// Anything (a memcpy, or an access the driver could not place).
    Any,
}

impl Footprint {
    fn conflicts(&self, other: &Footprint) -> bool {
        match (self, other) {
            (Footprint::Known(a), Footprint::Known(b)) => a.iter().any(|x| b.iter().any(|y| (x.write || y.write) && x.lo < y.hi && y.lo < x.hi)),
            _ => true,
        }
    }
    /// Whether it writes any byte of `[lo, hi)`.
    fn writes(&self, lo: u64, hi: u64) -> bool {
        match self {
            Footprint::Known(rs) => rs.iter().any(|r| r.write && r.lo < hi && lo < r.hi),
            Footprint::Any => true,
        }
    }
}

fn kernel_footprint(k: &KernelNode) -> Footprint {
    let mut ranges = Vec::new();
    for p in &k.params {
        let write = match p.access {
            None | Some(Observed::None) => continue,
            Some(Observed::Read) => false,
            Some(Observed::Write | Observed::ReadWrite) => true,
            Some(Observed::Unknown) => return Footprint::Any,
        };
        if p.pointers.is_empty() {
            return Footprint::Any;
        }
        for w in &p.pointers {
            let hi = w.base.0.saturating_add(w.size);
            ranges.push(Range { lo: w.base.0, hi, write });
        }
    }
    Footprint::Known(ranges)
}

fn memset_footprint(m: &MemsetNode) -> Footprint {
    let row = m.width.saturating_mul(u64::from(m.element_size));
    let span = m.pitch.saturating_mul(m.height.saturating_sub(1)).saturating_add(row);
    Footprint::Known(vec![Range { lo: m.dst.0, hi: m.dst.0.saturating_add(span), write: true }])
}

fn footprint(body: &NodeBody) -> Footprint {
    match body {
        NodeBody::Kernel(k) => kernel_footprint(k),
        NodeBody::Memset(m) => memset_footprint(m),
        _ => Footprint::Any,
    }
}

/// A set of nodes as bits.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn union(&mut self, other: &Bits) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a |= b);
    }
}

/// The nodes in an order every edge goes forward in (`Err` on a cycle).
fn topological(n: usize, succs: &[Vec<usize>]) -> Result<Vec<usize>, String> {
    let mut indegree = vec![0usize; n];
    succs.iter().flatten().for_each(|&v| indegree[v] += 1);
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    ready.reverse();
    let mut order = Vec::with_capacity(n);
    while let Some(u) = ready.pop() {
        order.push(u);
        for &v in &succs[u] {
            indegree[v] -= 1;
            if indegree[v] == 0 {
                ready.push(v);
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err("the captured edges form a cycle".into())
    }
}

/// Adopts `model` (adoptable by [`crate::decide::decide`]) under `policy` (the CUDA backend's `auto`
/// by default, [`default_policy`]).
pub fn adopt(model: &GraphModel, policy: &PdlPolicy, orderings: Orderings) -> Result<Adoption, String> {
    let n = model.nodes.len();
    if n > MAX_ADOPTED_NODES {
        return Err(format!("{n} nodes, more than the {MAX_ADOPTED_NODES} adopted"));
    }
    let mut captured_succs = vec![Vec::new(); n];
    for e in &model.edges {
        if e.from >= n || e.to >= n {
            return Err(format!("edge {} -> {} names a node past {n}", e.from, e.to));
        }
        captured_succs[e.from].push(e.to);
    }
    let order = topological(n, &captured_succs)?;
    // What each node reaches in the captured graph.
    let mut reach = vec![Bits::new(n); n];
    for &u in order.iter().rev() {
        for &v in &captured_succs[u] {
            let below = reach[v].clone();
            reach[u].set(v);
            reach[u].union(&below);
        }
    }
    let prints: Vec<Footprint> = model.nodes.iter().map(|node| footprint(&node.body)).collect();
    if orderings == Orderings::Captured {
        let mut kept = captured_succs;
        kept.iter_mut().for_each(|vs| {
            vs.sort_unstable();
            vs.dedup();
        });
        return Ok(fences(model, policy, &prints, &kept, &reach, &order));
    }
    // The needed orderings (u before v), each u's in topological order of v.
    let needed: Vec<Vec<usize>> = (0..n).map(|u| order.iter().copied().filter(|&v| reach[u].get(v) && prints[u].conflicts(&prints[v])).collect()).collect();
    // Their transitive reduction: u -> v is kept unless a kept successor of u already reaches v.
    let mut closure = vec![Bits::new(n); n];
    let mut kept: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &u in order.iter().rev() {
        let mut covered = Bits::new(n);
        for &v in &needed[u] {
            if !covered.get(v) {
                kept[u].push(v);
                covered.set(v);
                let below = closure[v].clone();
                covered.union(&below);
            }
        }
        closure[u] = covered;
    }
    Ok(fences(model, policy, &prints, &kept, &closure, &order))
}

/// The fence of each kept ordering, and the captured edges not kept.
fn fences(model: &GraphModel, policy: &PdlPolicy, prints: &[Footprint], kept: &[Vec<usize>], closure: &[Bits], order: &[usize]) -> Adoption {
    let n = model.nodes.len();
    let mut captured: HashMap<(usize, usize), bool> = HashMap::new();
    for e in &model.edges {
        *captured.entry((e.from, e.to)).or_insert(false) |= e.programmatic;
    }
    let (mut outs, mut ins) = (vec![0usize; n], vec![0usize; n]);
    for (u, vs) in kept.iter().enumerate() {
        outs[u] = vs.len();
        vs.iter().for_each(|&v| ins[v] += 1);
    }
    let width = widest_level(n, kept, order);
    let mut edges = Vec::new();
    for &u in order {
        for &v in &kept[u] {
            let was = captured.get(&(u, v)).copied();
            let full = if was == Some(true) { None } else { full_because(model, policy, prints, u, v, outs[u].max(ins[v]), width) };
            edges.push(AdoptedEdge { from: u, to: v, programmatic: full.is_none(), captured: was.is_some(), full });
        }
    }
    let mut dropped: Vec<DroppedEdge> = captured
        .keys()
        .filter(|&&(u, v)| !kept[u].contains(&v))
        .map(|&(u, v)| {
            let why = if closure[u].get(v) { "implied by the edges kept" } else { "the code orders nothing through it (no conflicting access)" };
            DroppedEdge { from: u, to: v, why }
        })
        .collect();
    dropped.sort_unstable_by_key(|d| (d.from, d.to));
    Adoption { edges, dropped }
}

/// The most nodes at one depth of the kept orderings (how many run side by side, for the policy).
fn widest_level(n: usize, kept: &[Vec<usize>], order: &[usize]) -> usize {
    let mut depth = vec![0usize; n];
    for &u in order {
        for &v in &kept[u] {
            depth[v] = depth[v].max(depth[u] + 1);
        }
    }
    let mut count: HashMap<usize, usize> = HashMap::new();
    depth.iter().for_each(|&d| *count.entry(d).or_default() += 1);
    count.values().copied().max().unwrap_or(1)
}

fn kernel(model: &GraphModel, i: usize) -> Option<&KernelNode> {
    match &model.nodes[i].body {
        NodeBody::Kernel(k) => Some(k),
        _ => None,
    }
}

fn dims(k: &KernelNode) -> Dims {
    Dims { grid: k.grid, block: k.block, shared: k.shared_bytes }
}

/// Why u -> v is a full dependency (`None`: it may be programmatic).
fn full_because(model: &GraphModel, policy: &PdlPolicy, prints: &[Footprint], u: usize, v: usize, fan: usize, width: usize) -> Option<String> {
    let (Some(producer), Some(consumer)) = (kernel(model, u), kernel(model, v)) else {
        return Some("an end is not a kernel".into());
    };
    let CodeStatus::Analysed { pdl, .. } = &consumer.code else {
        return Some("the consumer's code was not analysed".into());
    };
    match pdl {
        PdlCode::NotCertified { why } => return Some(format!("the consumer is not certified to wait: {why}")),
        PdlCode::Certified { atomics, .. } if !atomics.is_empty() => return Some("the consumer updates memory atomically before its wait".into()),
        PdlCode::Certified { reads, .. } => {
            for &p in reads {
                let Some(param) = consumer.params.get(p) else { return Some(format!("the consumer reads param {p} before its wait, past its params")) };
                for w in &param.pointers {
                    let (lo, hi) = (w.base.0, w.base.0.saturating_add(w.size));
                    if let Some(writer) = prints.iter().position(|f| f.writes(lo, hi)) {
                        return Some(format!("the consumer reads param {p} before its wait, a segment node {writer} writes"));
                    }
                }
            }
        }
    }
    policy.full_because(&dims(producer), &dims(consumer), true, fan, width).map(|f| f.to_string())
}

/// The CUDA backend's `auto` fence policy.
pub fn default_policy() -> PdlPolicy {
    PdlPolicy::new(PdlMode::Auto)
}

#[cfg(test)]
#[path = "adopt_tests.rs"]
mod tests;
