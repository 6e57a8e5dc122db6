//! Chain fusion: runs of dependent 1-block nodes along the plan's lanes become one kernel whose block
//! `b` runs lane `b`'s run in plan order, with a `__syncthreads()` only where the plan has an edge
//! (or shared memory could be reused) between consecutive bodies. The fused segment is one node of
//! the submitted graph: it pays one launch floor instead of one per node.
//!
//! Three parts, all pure: [`groups`] picks what fuses (the policy below), [`source`] generates the
//! fused kernel's CUDA C and its signature, [`rewrite`] records the plan again with each group as one
//! node (its declared accesses the union of its members', so the planner derives its edges from the
//! same hazards). The backend compiles the source with NVRTC and lowers the rewritten plan as any
//! other.
//!
//! What may fuse is decided per node by the backend ([`Fusable`]): a kernel with CUDA C source whose
//! body is certified from its PTX as fused (`ptx::fused_body`), launched as one block; copies and fills
//! small enough for one block of the internal kernels.

pub mod build;
pub mod coherence;
pub mod rewrite;
pub mod source;

use std::collections::BTreeSet;

use ostinato::{NodeId, Plan};

/// An exec's fusion policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionMode {
    /// Every node launches by itself.
    Off,
    /// Fuse only where it cannot lose (docs/fences.md decision 12): runs in which each node depends on
    /// the one before it (in the unfused plan they run one after another anyway), merged across lanes
    /// only when the runs wait for the same nodes and the same nodes wait for them.
    #[default]
    Auto,
    /// Fuse every run of fusable nodes along a lane, independent neighbours included (a block then
    /// runs them one after the other instead of side by side), and merge runs across lanes wherever
    /// the result stays acyclic.
    On,
}

impl FusionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FusionMode::Off => "off",
            FusionMode::Auto => "auto",
            FusionMode::On => "on",
        }
    }
}

/// What makes two nodes' bodies fit in one fused kernel: the same block shape and the same source
/// (one translation unit: bodies of different sources could clash by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuseKey {
    pub block: [u32; 3],
    /// Identity of the source module (the backend numbers them).
    pub source: usize,
}

/// A node that may fuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fusable {
    pub key: FuseKey,
    /// The body touches shared memory (static or dynamic).
    pub uses_shared: bool,
}

/// One fused kernel: block `b` runs `lanes[b]` in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub key: FuseKey,
    pub lanes: Vec<Vec<NodeId>>,
}

impl Group {
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.lanes.iter().flatten().copied()
    }
    pub fn len(&self) -> usize {
        self.lanes.iter().map(Vec::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The most blocks (lanes) one fused kernel gets.
pub const MAX_FUSED_BLOCKS: usize = 1024;

/// The groups `mode` fuses in `plan`, given which nodes may fuse. Each group has at least two nodes;
/// no node is in two groups; contracting every group to one node leaves the plan acyclic, and no edge
/// joins two different lanes of a group.
pub fn groups(plan: &Plan, fusable: &[Option<Fusable>], mode: FusionMode) -> Vec<Group> {
    if mode == FusionMode::Off {
        return Vec::new();
    }
    let n = plan.node_count();
    let lanes = plan.lanes();
    let key = |v: NodeId| fusable.get(v.index()).copied().flatten().map(|f| f.key);
    // 1. Runs along each lane: consecutive fusable nodes of one key, cut where an edge enters a node
    //    from outside the run (but at its head) and after a node with an edge to another lane.
    let mut runs: Vec<Vec<NodeId>> = Vec::new();
    // The run each node was put in (usize::MAX: none yet).
    let mut run_of = vec![usize::MAX; n];
    let flush = |cur: &mut Vec<NodeId>, runs: &mut Vec<Vec<NodeId>>| {
        if !cur.is_empty() {
            runs.push(std::mem::take(cur));
        }
    };
    for lane in lanes.all() {
        let mut cur: Vec<NodeId> = Vec::new();
        for &v in lane {
            let Some(k) = key(v) else {
                flush(&mut cur, &mut runs);
                continue;
            };
            let joins = cur.last().is_some_and(|&last| {
                key(last) == Some(k)
                    && plan.preds(v).iter().all(|&u| run_of[u as usize] == runs.len())
                    && (mode == FusionMode::On || plan.preds(v).contains(&last.0))
            });
            if !joins {
                flush(&mut cur, &mut runs);
            }
            run_of[v.index()] = runs.len();
            cur.push(v);
            if plan.succs(v).iter().any(|&w| lanes.lane_of(NodeId(w)) != lanes.lane_of(v)) {
                flush(&mut cur, &mut runs);
            }
        }
        flush(&mut cur, &mut runs);
    }
    let mut pos = vec![0usize; n];
    for (i, v) in plan.order().iter().enumerate() {
        pos[v.index()] = i;
    }
    runs.sort_by_key(|r| pos[r[0].index()]);
    // 2. Runs side by side: a run joins an open group of its key when the merge keeps the plan acyclic
    //    (and, under auto, the run waits for and feeds the same nodes as the group's first run).
    let mut member = vec![usize::MAX; n];
    let mut out: Vec<Group> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for run in runs {
        let k = key(run[0]).unwrap_or_else(|| unreachable!("runs hold fusable nodes"));
        let target = open.iter().rev().take(4).copied().find(|&gi| {
            let g: &Group = &out[gi];
            g.key == k
                && g.lanes.len() < MAX_FUSED_BLOCKS
                && (mode == FusionMode::On || boundary(plan, &g.lanes[0]) == boundary(plan, &run))
                && !related(plan, &member, &out, gi, &run)
        });
        let gi = match target {
            Some(gi) => gi,
            None => {
                out.push(Group { key: k, lanes: Vec::new() });
                open.push(out.len() - 1);
                out.len() - 1
            }
        };
        for &v in &run {
            member[v.index()] = gi;
        }
        out[gi].lanes.push(run);
    }
    out.retain(|g| g.len() >= 2);
    out
}

/// The nodes outside `run` that it waits for and that wait for it.
fn boundary(plan: &Plan, run: &[NodeId]) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let set: BTreeSet<u32> = run.iter().map(|v| v.0).collect();
    let inside = |u: &u32| !set.contains(u);
    let preds = run.iter().flat_map(|v| plan.preds(*v).iter().copied()).filter(inside).collect();
    let succs = run.iter().flat_map(|v| plan.succs(*v).iter().copied()).filter(inside).collect();
    (preds, succs)
}

/// Whether `run` may not join group `gi`: an edge joins it to the group, or a path leaves the two and
/// comes back into them — through plain nodes or through other groups, which run as one node each
/// (a fused plan must stay acyclic, and the lanes of a group run side by side).
fn related(plan: &Plan, member: &[usize], groups: &[Group], gi: usize, run: &[NodeId]) -> bool {
    let in_run: BTreeSet<usize> = run.iter().map(|v| v.index()).collect();
    let inside = |v: usize| member[v] == gi || in_run.contains(&v);
    let mut stack: Vec<usize> = Vec::new();
    let mut seen = vec![false; member.len()];
    let mut expanded = vec![false; groups.len()];
    for s in groups[gi].nodes().map(|v| v.index()).chain(in_run.iter().copied()) {
        for &w in plan.succs(NodeId(s as u32)) {
            let w = w as usize;
            if inside(w) {
                // Within the run or within one lane of the group: ordered by the lane. Else an edge
                // between lanes that would run side by side.
                if in_run.contains(&s) != in_run.contains(&w) {
                    return true;
                }
            } else if !std::mem::replace(&mut seen[w], true) {
                stack.push(w);
            }
        }
    }
    while let Some(u) = stack.pop() {
        let from: Vec<usize> = match member[u] {
            h if h != usize::MAX && h != gi => {
                if std::mem::replace(&mut expanded[h], true) {
                    continue;
                }
                groups[h].nodes().map(|v| v.index()).collect()
            }
            _ => vec![u],
        };
        for x in from {
            for &w in plan.succs(NodeId(x as u32)) {
                let w = w as usize;
                if inside(w) {
                    return true;
                }
                if !std::mem::replace(&mut seen[w], true) {
                    stack.push(w);
                }
            }
        }
    }
    false
}

/// Whether body `j` of a lane run needs a barrier before it: a node since the last barrier is one of
/// its predecessors, or it or one of those nodes touches shared memory (bodies may reuse the same
/// bytes). `run` is the lane's nodes; returns one flag per node (the first is always `false`).
pub fn barriers(plan: &Plan, run: &[NodeId], uses_shared: impl Fn(NodeId) -> bool) -> Vec<bool> {
    let mut out = Vec::with_capacity(run.len());
    let mut since: Vec<NodeId> = Vec::new();
    for &v in run {
        let edge = since.iter().any(|u| plan.preds(v).contains(&u.0));
        let shared = !since.is_empty() && (uses_shared(v) || since.iter().any(|&u| uses_shared(u)));
        let b = edge || shared;
        if b {
            since.clear();
        }
        out.push(b);
        since.push(v);
    }
    out
}

#[cfg(test)]
mod tests;
