//! Chain fusion's pure parts, shared by the backends that fuse: which nodes fuse together
//! ([`groups`], the policy [`FusionMode`] picks), where a fused body needs a barrier before it
//! ([`barriers`]), and the plan recorded again with each group as one node ([`rewrite`]: its declared
//! accesses the union of its members', so the planner derives its edges from the same hazards).
//!
//! A group is a set of runs of dependent one-block nodes along the plan's lanes; a backend makes each
//! group one launch of one block (workgroup) per run, each block running its run's bodies in plan
//! order. A run of multi-block nodes of one grid related block by block is one kernel of that grid.
//! A run of multi-block nodes whose blocks depend on a few blocks of each other
//! ([`component_groups`]) is one kernel of a block per connected component of those dependencies.
//! For a backend that runs each lane of a group on a range of its blocks ([`all_groups`]), unrelated
//! multi-block runs of one grid sit side by side too (under `auto`, single launches within its
//! limits): one kernel of `lanes × blocks` blocks, each block running its lane's bodies as their
//! block `b`.
//! What may fuse is the backend's to say, per node ([`Fusable`]): its bodies, its block shape.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

mod components;
pub use components::{component_groups, component_groups_by, Components, MemberBlocks, MAX_SERIAL_BLOCKS, MAX_SERIAL_BYTES};

use crate::tiles::TileRelation;
use crate::{Arg, Graph, KernelId, KernelSig, Launch, NodeId, NodeOp, Plan};

/// An exec's fusion policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionMode {
    /// Every node launches by itself.
    Off,
    /// Fuse only where it cannot lose (`docs/fences.md`, chain fusion): runs in which each node depends on
    /// the one before it (in the unfused plan they run one after another anyway), merged across lanes
    /// only when the runs wait for the same nodes and the same nodes wait for them, or are single
    /// launches of one kernel waiting for the same nodes (a group counting as one node); groups of
    /// components ([`component_groups`]) only where a fused block's serial work stays small; for a
    /// backend that runs lanes on ranges of a kernel's blocks ([`all_groups`]: CUDA), single
    /// multi-block launches side by side under the same rules, each of at most
    /// [`AUTO_MAX_SIDE_BY_SIDE_THREADS`] threads ([`AUTO_MAX_ALONE_SIDE_BY_SIDE_THREADS`] where its
    /// body needs its block alone).
    #[default]
    Auto,
    /// Fuse every run of fusable nodes along a lane, independent neighbours included (a block then
    /// runs them one after the other instead of side by side), and merge runs across lanes wherever
    /// the result stays acyclic. For a backend that runs lanes on ranges of a kernel's blocks
    /// ([`all_groups`]: CUDA), independent multi-block neighbours instead stay runs of their own, and
    /// unrelated multi-block runs of one grid share one kernel side by side.
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

impl crate::Named for FusionMode {
    const ALL: &'static [Self] = &[FusionMode::Auto, FusionMode::On, FusionMode::Off];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// One fused launch as the rewritten plan records it: the fused kernel's signature (its accesses: the
/// union of its members'), its launch and its arguments.
#[derive(Clone, Copy, Debug)]
pub struct FusedLaunch<'a> {
    pub sig: &'a KernelSig,
    pub launch: Launch,
    pub args: &'a [Arg],
}

/// What makes two nodes' bodies fit in one fused kernel: the same block shape, the same grid and the
/// same source (one translation unit: bodies of different sources could clash by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuseKey {
    pub block: [u32; 3],
    /// The launch's grid. A one-block node (`[1, 1, 1]`) runs as one block of a fused kernel whose
    /// blocks are lanes; the nodes of a larger grid fuse into one kernel of that grid whose block `b`
    /// runs every body's block `b` in order, where the plan's tile relations show that block `b` of
    /// each depends on block `b` of the others only ([`crate::tiles`]).
    pub grid: [u32; 3],
    /// Identity of the source module (the backend numbers them).
    pub source: usize,
}

/// A node that may fuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fusable {
    pub key: FuseKey,
    /// The body touches shared memory (static or dynamic).
    pub uses_shared: bool,
    /// The body may only be the one body its fused block runs (on CUDA, a body with a block barrier,
    /// which beside another body would count threads that returned from it early): it is a run of its
    /// own, and fuses only as a lane of its own beside others ([`groups`], [`all_groups`]), never into
    /// a group of components.
    pub alone: bool,
}

/// One fused kernel: block `b` runs `lanes[b]` in order (one-block nodes); for nodes of a larger grid
/// of `blocks` blocks, block `l · blocks + b` runs `lanes[l]`'s bodies as their block `b` (one lane, or
/// several side by side: [`all_groups`]); or, for a group of components
/// ([`component_groups`]), one lane whose members each run the blocks `components` assigns to the
/// fused block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub key: FuseKey,
    pub lanes: Vec<Vec<NodeId>>,
    /// For a group of components: which of each member's blocks each fused block runs.
    pub components: Option<Components>,
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
    /// Whether the group's lanes are multi-block runs side by side, each on a range of the fused
    /// kernel's blocks ([`all_groups`]).
    pub fn is_side_by_side(&self) -> bool {
        self.components.is_none() && self.key.grid != [1, 1, 1] && self.lanes.len() > 1
    }
}

/// The most blocks (lanes) one fused kernel gets.
pub const MAX_FUSED_BLOCKS: usize = 1024;

/// The most blocks a kernel of multi-block runs side by side gets (a launch's grid along x).
pub const MAX_SIDE_BY_SIDE_BLOCKS: u64 = (1 << 31) - 1;

/// The most threads (blocks × threads per block) each launch `auto` puts side by side with others
/// may have ([`all_groups`]). On two H100s (GPU-8d8c0ee9 with fusion `on` beside `auto` at `6f0ce7c`,
/// GPU-e9e86114 with this rule at 2<sup>20</sup>, `9aa73b8`; the matrix's 97 independent rows, docs/fences.md
/// decision 15), ten independent launches of up to 2<sup>19</sup> threads each ran 1.07–2.0× faster
/// side by side in one kernel, or tied, on every row where they fused. At 2<sup>20</sup> the sign
/// depends on the block: 8,192 blocks of 128 threads gained 12%, 4,096 of 256 tied, 2,048 of 512
/// lost 2% and, on the second GPU, 7% to the expert's PDL capture; at 2<sup>21</sup> (2,048 blocks of
/// 1,024 threads) side by side lost 6%, as in the probe `lab/probes/side_by_side.cu`.
pub const AUTO_MAX_SIDE_BY_SIDE_THREADS: u64 = 1 << 19;

/// The most threads each launch `auto` puts side by side may have where its body needs its block
/// alone ([`Fusable::alone`]: on CUDA, a block barrier). On an H100 (GPU-57aaf604, `25bae1b`, the
/// independent tree and per-block-partials reductions, docs/fences.md decision 16), ten such launches
/// of 1 and 64 blocks of 256 threads (2<sup>14</sup> threads) ran 1.8–2.2× faster side by side than
/// stream capture, and of 1,024 blocks (2<sup>18</sup>) 4–8% slower with 4 elements a thread (tied
/// with 32); none was measured between, so the limit is the largest that won.
pub const AUTO_MAX_ALONE_SIDE_BY_SIDE_THREADS: u64 = 1 << 14;

/// The groups `mode` fuses in `plan`, given which nodes may fuse. Each group has at least two nodes;
/// no node is in two groups; contracting every group to one node leaves the plan acyclic, and no edge
/// joins two different lanes of a group.
pub fn groups(plan: &Plan, fusable: &[Option<Fusable>], mode: FusionMode) -> Vec<Group> {
    groups_by(plan, fusable, mode, &|u, v| plan.tile_relation(u, v).is_block_local())
}

/// Whether multi-block runs may share a fused kernel side by side, each lane of the group on a
/// range of its blocks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MultiBlockLanes {
    /// A multi-block run is a kernel of its own grid.
    Alone,
    /// Unrelated multi-block runs of one grid share one kernel, lane after lane.
    SideBySide,
    /// As `SideBySide`, for runs of one launch of at most [`AUTO_MAX_SIDE_BY_SIDE_THREADS`] threads
    /// ([`AUTO_MAX_ALONE_SIDE_BY_SIDE_THREADS`] where its body needs its block alone) (`auto`): a run
    /// of several launches (a block-local chain) keeps its kernel of its own grid.
    SingleSideBySide,
}

impl MultiBlockLanes {
    /// Whether multi-block `run` (of `key`; `alone`: its body needs its block alone) may be a lane of
    /// a group side by side.
    fn admits(self, run: &[NodeId], key: FuseKey, alone: bool) -> bool {
        match self {
            MultiBlockLanes::Alone => false,
            MultiBlockLanes::SideBySide => true,
            MultiBlockLanes::SingleSideBySide => {
                let threads: u64 = key.block.iter().map(|&d| u64::from(d)).product();
                let limit = if alone { AUTO_MAX_ALONE_SIDE_BY_SIDE_THREADS } else { AUTO_MAX_SIDE_BY_SIDE_THREADS };
                run.len() == 1 && crate::tiles::block_count(key.grid).saturating_mul(threads) <= limit
            }
        }
    }
}

/// Every group `mode` fuses in `plan`, as a backend that fuses by components and runs a group's lanes
/// on ranges of its blocks takes them (CUDA): the groups of components first ([`component_groups`]:
/// runs whose blocks depend sparsely on each other, which would otherwise be cut where a block-local
/// part of them fuses alone), then [`groups`] among the nodes they leave (one-block lanes, and runs of
/// one grid related block by block), where under [`FusionMode::On`] unrelated multi-block runs of one
/// grid also share a kernel side by side (a group of several lanes of a grid of more than one block:
/// block `l · blocks + b` runs lane `l`'s bodies as their block `b`). Independent launches of a few
/// blocks each then take one launch instead of one each. `auto` puts side by side only launches that
/// are runs of their own of at most [`AUTO_MAX_SIDE_BY_SIDE_THREADS`] threads
/// ([`AUTO_MAX_ALONE_SIDE_BY_SIDE_THREADS`] where the body needs its block alone) and wait for and
/// feed the same nodes (as it groups one-block runs), or are launches of one kernel that wait for the
/// same nodes, a group counting as one node (`one_level`: each level of independent chains of single
/// launches becomes one launch).
pub fn all_groups(plan: &Plan, fusable: &[Option<Fusable>], mode: FusionMode) -> Vec<Group> {
    // Both passes ask for the tile relations of the same pairs (the runs of a block-local chain
    // above all, whose relations cost the analysis of every block): each is computed once.
    let known: RefCell<HashMap<(u32, u32), TileRelation>> = RefCell::default();
    let relation = |u: NodeId, v: NodeId| known.borrow_mut().entry((u.0, v.0)).or_insert_with(|| plan.tile_relation(u, v)).clone();
    let mut out = component_groups_by(plan, fusable, &vec![false; plan.node_count()], mode, &relation);
    let mut rest = fusable.to_vec();
    for v in out.iter().flat_map(Group::nodes) {
        if let Some(f) = rest.get_mut(v.index()) {
            *f = None;
        }
    }
    let lanes = if mode == FusionMode::On { MultiBlockLanes::SideBySide } else { MultiBlockLanes::SingleSideBySide };
    out.extend(groups_with(plan, &rest, mode, &|u, v| relation(u, v).is_block_local(), lanes));
    out
}

/// [`groups`] with the test of whether multi-block node `v` may follow node `u` block by block given
/// (the plan's tile relation in [`groups`]): a mutation test hands a wrong one to show that a lost
/// tile dependency changes some program's bytes.
#[doc(hidden)]
pub fn groups_by(plan: &Plan, fusable: &[Option<Fusable>], mode: FusionMode, block_local: &dyn Fn(NodeId, NodeId) -> bool) -> Vec<Group> {
    groups_with(plan, fusable, mode, block_local, MultiBlockLanes::Alone)
}

fn groups_with(
    plan: &Plan,
    fusable: &[Option<Fusable>],
    mode: FusionMode,
    block_local: &dyn Fn(NodeId, NodeId) -> bool,
    multi_block_lanes: MultiBlockLanes,
) -> Vec<Group> {
    if mode == FusionMode::Off {
        return Vec::new();
    }
    let n = plan.node_count();
    let lanes = plan.lanes();
    let key = |v: NodeId| fusable.get(v.index()).copied().flatten().map(|f| f.key);
    let alone = |v: NodeId| fusable.get(v.index()).copied().flatten().is_some_and(|f| f.alone);
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
            // Independent multi-block neighbours go side by side where they may (each its own range of
            // the kernel's blocks) rather than one after the other in the same blocks.
            let multi_side = k.grid != [1, 1, 1] && multi_block_lanes == MultiBlockLanes::SideBySide;
            let joins = cur.last().is_some_and(|&last| {
                key(last) == Some(k)
                    && !alone(v)
                    && !alone(last)
                    && plan.preds(v).iter().all(|&u| run_of[u as usize] == runs.len())
                    && ((mode == FusionMode::On && !multi_side) || plan.preds(v).contains(&last.0))
                    && (k.grid == [1, 1, 1] || blockwise_in_run(plan, v, |u| run_of[u as usize] == runs.len(), block_local))
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
    //    (and, under auto, the run waits for and feeds the same nodes as the group's first run, or
    //    it and every lane are single launches of one kernel waiting for the same nodes).
    let mut member = vec![usize::MAX; n];
    let mut out: Vec<Group> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for run in runs {
        let k = key(run[0]).expect("runs hold fusable nodes");
        // A multi-block run is a kernel of its own grid, or (side by side) a range of a kernel's
        // blocks after the other lanes' ranges.
        let blocks = crate::tiles::block_count(k.grid);
        let side_by_side = |r: &[NodeId]| blocks == 1 || multi_block_lanes.admits(r, k, r.iter().any(|&v| alone(v)));
        let target = open.iter().rev().take(4).copied().filter(|_| side_by_side(&run)).find(|&gi| {
            let g: &Group = &out[gi];
            g.key == k
                && side_by_side(&g.lanes[0])
                && g.lanes.len() < MAX_FUSED_BLOCKS
                && (g.lanes.len() as u64 + 1).saturating_mul(blocks) <= MAX_SIDE_BY_SIDE_BLOCKS
                && (mode == FusionMode::On || boundary(plan, &g.lanes[0]) == boundary(plan, &run) || one_level(plan, &member, g, &run))
                && !related(plan, &member, &out, gi, &run)
        });
        let gi = match target {
            Some(gi) => gi,
            None => {
                out.push(Group { key: k, lanes: Vec::new(), components: None });
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

/// Whether multi-block node `v` may follow the nodes of its run (`in_run`) block by block: every node of
/// the run it has a hazard with (on the access frontier, so every byte's whole history counts, not
/// only the kept edges) relates to it block-locally, and no explicit edge (an ordering of whole nodes)
/// ties it to one.
fn blockwise_in_run(plan: &Plan, v: NodeId, in_run: impl Fn(u32) -> bool, block_local: &dyn Fn(NodeId, NodeId) -> bool) -> bool {
    let explicit = &plan.graph().node(v).after;
    explicit.iter().all(|u| !in_run(u.0)) && plan.hazard_preds(v).iter().filter(|&&u| in_run(u)).all(|&u| block_local(NodeId(u), v))
}

/// The nodes outside `run` that it waits for and that wait for it.
fn boundary(plan: &Plan, run: &[NodeId]) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let set: BTreeSet<u32> = run.iter().map(|v| v.0).collect();
    let inside = |u: &u32| !set.contains(u);
    let preds = run.iter().flat_map(|v| plan.preds(*v).iter().copied()).filter(inside).collect();
    let succs = run.iter().flat_map(|v| plan.succs(*v).iter().copied()).filter(inside).collect();
    (preds, succs)
}

/// Whether `run` and every lane of `group` are launches of one kernel, each a run of its own, that
/// wait for the same nodes, counting the members of a group as one node (`member`: each grouped node's
/// group): they start together and, one kernel of one grid, end together, so side by side they feed
/// their different nodes no later than apart. The two stages of ten independent two-stage reductions
/// become two launches this way: the first stages wait for nothing, the second stages each for their
/// own first stage, all of them in one group.
fn one_level(plan: &Plan, member: &[usize], group: &Group, run: &[NodeId]) -> bool {
    let g = plan.graph();
    let kernel = |v: NodeId| match &g.node(v).op {
        crate::NodeOp::Kernel { kernel, .. } => Some(*kernel),
        _ => None,
    };
    // A pred in a group stands for the group (`usize::MAX`: in none, itself).
    let waits_for = |v: NodeId| -> BTreeSet<(bool, usize)> {
        plan.preds(v)
            .iter()
            .map(|&u| match member[u as usize] {
                usize::MAX => (false, u as usize),
                gi => (true, gi),
            })
            .collect()
    };
    let ([v], [first, ..]) = (run, group.lanes.as_slice()) else { return false };
    let Some(k) = kernel(*v) else { return false };
    // Every lane of a group waits for what its first waits for (both rules that join a lane say so,
    // and a node's group never changes once given): the first lane's waits stand for all of them.
    group.lanes.iter().all(|l| matches!(l.as_slice(), [u] if kernel(*u) == Some(k))) && first.first().is_some_and(|&u| waits_for(u) == waits_for(*v))
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
    barriers_with(plan, run, uses_shared, |_, _| false)
}

/// [`barriers`], where `thread_local(u, v)` may say that every byte earlier node `u` and node `v`
/// both touch, one of them writing it, is touched by the same thread in both (the same thread of the
/// same block: the members of a fused run share their grid and block). Such an ordering needs no
/// barrier: the thread runs `u`'s body before `v`'s. A barrier is still placed before `v` where a node
/// since the last one orders it by an explicit edge, or has a hazard with it (a plan edge, or an
/// access-frontier predecessor: [`Plan::hazard_preds`]) that `thread_local` does not vouch for. Every
/// hazard of `v` with a node since the last barrier is a frontier one or implied through frontier
/// ones byte by byte, each of them then touched by one thread throughout, so checking the frontier
/// suffices.
pub fn barriers_with(plan: &Plan, run: &[NodeId], uses_shared: impl Fn(NodeId) -> bool, thread_local: impl Fn(NodeId, NodeId) -> bool) -> Vec<bool> {
    let g = plan.graph();
    let mut out = Vec::with_capacity(run.len());
    let mut since: Vec<NodeId> = Vec::new();
    for &v in run {
        let ordered = |u: NodeId| plan.preds(v).contains(&u.0) || plan.hazard_preds(v).contains(&u.0);
        let explicit = |u: NodeId| g.node(v).after.contains(&u);
        let edge = since.iter().any(|&u| ordered(u) && (explicit(u) || !thread_local(u, v)));
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

/// The barriers of every lane of `gr` ([`barriers_with`]), where an ordering between two built-ins is
/// thread-local by their kernels' stated per-thread footprints ([`crate::builtins::thread_footprint`]:
/// each built-in's code, CUDA C or WGSL, runs its grid-stride loop over the launch's linear thread
/// index). `builtin(k)` names the built-in kernel `k` runs, `None` for a user's kernel (whose bodies
/// keep their barriers). One list per lane, one flag per node, as [`barriers_with`] gives.
pub fn lane_barriers<'k>(plan: &Plan, gr: &Group, uses_shared: impl Fn(NodeId) -> bool, builtin: impl Fn(KernelId) -> Option<&'k str>) -> Vec<Vec<bool>> {
    let footprint = |v: NodeId, p: usize| match &plan.graph().node(v).op {
        NodeOp::Kernel { kernel, .. } => builtin(*kernel).and_then(|name| crate::builtins::thread_footprint(name, p)),
        _ => None,
    };
    let thread_local = |u, v| thread_local_pair(plan, u, v, footprint);
    gr.lanes.iter().map(|l| barriers_with(plan, l, &uses_shared, thread_local)).collect()
}

/// Whether two nodes of one fused run touch their common bytes thread by thread (see
/// [`barriers_with`]), from a per-thread footprint of each node's params: `footprint(v, p)` is
/// `Some(e)` where thread `L` (the launch's linear thread index, of `N` threads in all) touches
/// through param `p` only the `e`-byte elements `L + k·N` of the param's slice (the built-ins'
/// grid-stride loop: [`crate::builtins::thread_footprint`]). Every pair of the two nodes' accesses
/// on one root that overlap with one of them writing must both have such a footprint, with the same
/// element size and the same first byte (so each overlapping element is thread `L`'s in both).
pub fn thread_local_pair(plan: &Plan, u: NodeId, v: NodeId, footprint: impl Fn(NodeId, usize) -> Option<u64>) -> bool {
    let g = plan.graph();
    let (a, b) = (g.accesses(u), g.accesses(v));
    a.iter().all(|x| {
        b.iter().all(|y| {
            let conflict = x.root == y.root && x.start < y.end && y.start < x.end && (x.access.writes() || y.access.writes());
            !conflict || matches!((footprint(u, x.param), footprint(v, y.param)), (Some(e), Some(f)) if e == f && e > 0 && x.start == y.start)
        })
    })
}

/// The rewritten graph, and where each original node went.
#[derive(Clone, Debug)]
pub struct Rewritten {
    pub graph: Graph,
    /// The new node that runs each original node (a fused node for every member of a group).
    pub node_of: Vec<NodeId>,
    /// The kernel id of each group's fused kernel in `graph`.
    pub kernels: Vec<KernelId>,
}

/// Records `plan` again with `groups[i]` as one launch of `fused[i]`. Errs only where the fused
/// signatures cannot be added (a user kernel of the same name) or the groups would order a cycle
/// (which [`groups`] never produces).
pub fn rewrite(plan: &Plan, groups: &[Group], fused: &[FusedLaunch<'_>]) -> Result<Rewritten, String> {
    let g = plan.graph();
    let n = plan.node_count();
    // Units: nodes 0..n by themselves, n + i for group i.
    let mut unit: Vec<usize> = (0..n).collect();
    for (i, gr) in groups.iter().enumerate() {
        for v in gr.nodes() {
            unit[v.index()] = n + i;
        }
    }
    let units = n + groups.len();
    let mut pos = vec![usize::MAX; units];
    for (i, v) in plan.order().iter().enumerate() {
        let u = unit[v.index()];
        pos[u] = pos[u].min(i);
    }
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); units];
    let mut indeg = vec![0usize; units];
    for e in plan.edges() {
        let (a, b) = (unit[e.from.index()], unit[e.to.index()]);
        if a != b && !succ[a].contains(&b) {
            succ[a].push(b);
            indeg[b] += 1;
        }
    }
    // Kahn's order, earliest plan position first (a plan without groups records in plan order).
    let live = |u: usize| pos[u] != usize::MAX;
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..units).filter(|&u| live(u) && indeg[u] == 0).map(|u| Reverse((pos[u], u))).collect();
    let mut order = Vec::with_capacity(units);
    while let Some(Reverse((_, u))) = ready.pop() {
        order.push(u);
        for &w in &succ[u] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.push(Reverse((pos[w], w)));
            }
        }
    }
    if order.len() != (0..units).filter(|&u| live(u)).count() {
        return Err("the fused groups would order the plan in a cycle".into());
    }
    let mut out = g.without_nodes();
    let mut kernels = Vec::with_capacity(fused.len());
    for f in fused {
        // A fused kernel orders its bodies' accesses itself (in order, with barriers where a body
        // depends on an earlier one): any two of its buffer params may cover the same bytes.
        let mut sig = f.sig.clone();
        let buffers: Vec<usize> = sig.params.iter().enumerate().filter(|(_, p)| matches!(p.kind, crate::ParamKind::Buffer(_))).map(|(i, _)| i).collect();
        sig.aliasing = buffers.iter().enumerate().flat_map(|(x, &i)| buffers[x + 1..].iter().map(move |&j| (i, j))).collect();
        kernels.push(out.add_kernel(sig).map_err(|e| format!("fused kernel `{}`: {e}", f.sig.name))?);
    }
    let mut new_of_unit = vec![None; units];
    let err = |e: crate::GraphError| format!("recording the fused plan: {e}");
    for u in order {
        let members: Vec<NodeId> = if u < n { vec![NodeId(u as u32)] } else { groups[u - n].nodes().collect() };
        // Explicit orderings to nodes outside the unit, through their new ids.
        let mut after: Vec<NodeId> = Vec::new();
        for v in &members {
            for a in &g.node(*v).after {
                let au = unit[a.index()];
                if au != u {
                    let id = new_of_unit[au].ok_or_else(|| format!("n{v} is ordered after n{a}, which the fused order puts later"))?;
                    if !after.contains(&id) {
                        after.push(id);
                    }
                }
            }
        }
        let id = if u >= n {
            let f = &fused[u - n];
            out.add_launch(kernels[u - n], f.launch, f.args, &after).map_err(err)?
        } else {
            match &g.node(NodeId(u as u32)).op {
                NodeOp::Kernel { kernel, launch, args } => {
                    let v = NodeId(u as u32);
                    let tiles: Vec<(&str, crate::TileMap)> =
                        g.node(v).tiles.iter().map(|t| (g.kernel(*kernel).params[t.param].name.as_str(), t.map.clone())).collect();
                    out.add_launch_tiled(*kernel, *launch, args, &tiles, &after).map_err(err)?
                }
                NodeOp::Copy { src, dst } => out.add_copy(*src, *dst, &after).map_err(err)?,
                NodeOp::Fill { dst, value } => out.add_fill(*dst, *value, &after).map_err(err)?,
                NodeOp::Collective { op, dtype, send, recv } => out.add_collective(*op, *dtype, send, recv, &after).map_err(err)?,
            }
        };
        new_of_unit[u] = Some(id);
    }
    let node_of = (0..n).map(|v| new_of_unit[unit[v]].unwrap_or(NodeId(0))).collect();
    Ok(Rewritten { graph: out, node_of, kernels })
}

#[cfg(test)]
mod tests;
