//! Fusion by connected components. Where the blocks of a run of multi-block nodes depend on a few
//! blocks of each other (sparse tile relations: a gather block reading sixteen tiles of a spread, the
//! spread's next round reading the gather's one), the block-level dependencies of the whole run fall
//! apart into connected components. One fused kernel with a block per component runs, in each block,
//! every member's blocks of that component in plan order: whatever depends on what runs in one block,
//! in order, and the components need no ordering among themselves. No block waits for another, so
//! nothing needs co-residency, and the grid drains and launches between the members are gone.
//!
//! What it costs is parallelism: a member of `G` blocks runs as `count` fused blocks of `G / count`
//! of its blocks each, one after the other. So `auto` fuses components only where that serial work is
//! small ([`MAX_SERIAL_BLOCKS`], [`MAX_SERIAL_BYTES`]); `on` wherever the components exist. A backend
//! can run a member's blocks of a component only if it can name them from the fused block's index:
//! every member's blocks of component `c` are `c·step + k·stride`, `k < per` ([`MemberBlocks`]), or the
//! run is not fused.

use super::{Fusable, FuseKey, FusionMode, Group};
use crate::tiles::{block_count, TileRelation, MAX_TILE_BLOCKS};
use crate::{Arg, NodeId, NodeOp, ParamKind, Plan};

/// Under `auto`, the most blocks of one member a fused block runs one after the other.
pub const MAX_SERIAL_BLOCKS: u32 = 16;

/// Under `auto`, the most bytes (by the members' tile maps; a param without one counts its whole
/// slice) one member's blocks of a component touch, run one after the other in one fused block.
/// One grid drain and launch between dependent kernels costs an H200 0.6–0.9 µs (`docs/fences.md`);
/// a block streams about 64 KiB from L2 in that time, and half of it keeps the serial work well
/// inside what the drain cost.
pub const MAX_SERIAL_BYTES: u64 = 32 << 10;

/// The most blocks (of all members together) the analysis of one run unites.
const MAX_RUN_BLOCKS: u64 = 1 << 22;

/// Which blocks of one member a fused block of components runs: fused block `c` runs the member's
/// blocks (linear indices in `grid`) `c·step + k·stride` for `k < per`, in ascending `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberBlocks {
    pub grid: [u32; 3],
    pub per: u32,
    pub step: u64,
    pub stride: u64,
}

impl MemberBlocks {
    /// The linear index of the `k`-th block fused block `c` runs.
    pub fn block(&self, c: u64, k: u32) -> u64 {
        c * self.step + u64::from(k) * self.stride
    }
}

/// A group of components: `count` fused blocks; `members[i]` says which blocks of the group's `i`-th
/// member (in `lanes[0]`) each runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Components {
    pub count: u32,
    pub members: Vec<MemberBlocks>,
}

/// One node of a run being built: its grid and its relations to earlier members.
struct Member {
    node: NodeId,
    grid: [u32; 3],
    /// (index of an earlier member in the run, how this node's blocks depend on its blocks).
    deps: Vec<(usize, TileRelation)>,
}

/// The groups of components `mode` fuses among the multi-block nodes not `taken` by other groups:
/// runs along a lane of one block shape and source (any grids) of nodes that need no block alone
/// ([`Fusable::alone`]), each node's every hazard with an
/// earlier member (on the access frontier) a block-local or sparse tile relation, cut as
/// [`super::groups`] cuts runs; each run split where the components stop being nameable or, under
/// `auto`, where a fused block's serial work would pass [`MAX_SERIAL_BLOCKS`] or [`MAX_SERIAL_BYTES`].
/// A run (or a part of one) of one grid related block by block throughout is left to
/// [`super::groups`]. [`super::all_groups`] is the order a backend takes them in.
pub fn component_groups(plan: &Plan, fusable: &[Option<Fusable>], taken: &[bool], mode: FusionMode) -> Vec<Group> {
    component_groups_by(plan, fusable, taken, mode, &|u, v| plan.tile_relation(u, v))
}

/// [`component_groups`] with the tile relation given: a mutation test hands a wrong one to show that
/// a lost tile dependency changes some program's bytes.
#[doc(hidden)]
pub fn component_groups_by(
    plan: &Plan,
    fusable: &[Option<Fusable>],
    taken: &[bool],
    mode: FusionMode,
    relation: &dyn Fn(NodeId, NodeId) -> TileRelation,
) -> Vec<Group> {
    if mode == FusionMode::Off {
        return Vec::new();
    }
    let lanes = plan.lanes();
    let g = plan.graph();
    let candidate = |v: NodeId| -> Option<(FuseKey, [u32; 3])> {
        let f = fusable.get(v.index()).copied().flatten()?;
        let NodeOp::Kernel { launch, .. } = &g.node(v).op else { return None };
        let blocks = block_count(launch.grid);
        // A fused block runs several members' blocks: no member may need its block alone.
        (!f.alone && blocks > 1 && blocks <= MAX_TILE_BLOCKS && !taken.get(v.index()).copied().unwrap_or(true)).then_some((f.key, launch.grid))
    };
    let same = |a: FuseKey, b: FuseKey| a.block == b.block && a.source == b.source;
    let mut out = Vec::new();
    // The member index of each node of the run being built (usize::MAX: none).
    let mut index = vec![usize::MAX; plan.node_count()];
    for lane in lanes.all() {
        let mut run: Vec<Member> = Vec::new();
        let mut key: Option<FuseKey> = None;
        for &v in lane {
            let joined = match (candidate(v), key) {
                (Some((k, grid)), Some(run_key)) if same(k, run_key) => {
                    let deps = join(plan, &run, &index, v, mode, relation);
                    let blocks: u64 = run.iter().map(|m| block_count(m.grid)).sum::<u64>() + block_count(grid);
                    match deps {
                        Some(deps) if blocks <= MAX_RUN_BLOCKS => {
                            index[v.index()] = run.len();
                            run.push(Member { node: v, grid, deps });
                            true
                        }
                        _ => false,
                    }
                }
                _ => false,
            };
            if !joined {
                finish(plan, &mut run, &mut index, key, mode, &mut out);
                key = None;
                if let Some((k, grid)) = candidate(v) {
                    index[v.index()] = 0;
                    run.push(Member { node: v, grid, deps: Vec::new() });
                    key = Some(k);
                }
            }
            if plan.succs(v).iter().any(|&w| lanes.lane_of(NodeId(w)) != lanes.lane_of(v)) {
                finish(plan, &mut run, &mut index, key, mode, &mut out);
                key = None;
            }
        }
        finish(plan, &mut run, &mut index, key, mode, &mut out);
    }
    out
}

/// How node `v` relates to the members of `run` if it may join it: every plan predecessor in the run,
/// (under `auto`) the last member among them, no explicit edge from a member, and every hazard with a
/// member a block-local or sparse relation.
fn join(
    plan: &Plan,
    run: &[Member],
    index: &[usize],
    v: NodeId,
    mode: FusionMode,
    relation: &dyn Fn(NodeId, NodeId) -> TileRelation,
) -> Option<Vec<(usize, TileRelation)>> {
    let last = run.last()?.node;
    let in_run = |u: u32| index[u as usize] != usize::MAX;
    let preds = plan.preds(v);
    if !preds.iter().all(|&u| in_run(u)) || (mode != FusionMode::On && !preds.contains(&last.0)) {
        return None;
    }
    if plan.graph().node(v).after.iter().any(|u| in_run(u.0)) {
        return None;
    }
    let mut deps = Vec::new();
    for &u in plan.hazard_preds(v).iter().filter(|&&u| in_run(u)) {
        match relation(NodeId(u), v) {
            TileRelation::Dense(_) => return None,
            r => deps.push((index[u as usize], r)),
        }
    }
    Some(deps)
}

/// Ends the run: splits it into groups that pass [`analyze`] (the longest first, from its head on)
/// and clears it.
fn finish(plan: &Plan, run: &mut Vec<Member>, index: &mut [usize], key: Option<FuseKey>, mode: FusionMode, out: &mut Vec<Group>) {
    let members = std::mem::take(run);
    for m in &members {
        index[m.node.index()] = usize::MAX;
    }
    let Some(key) = key else { return };
    // A run of one grid related block by block throughout is the block-local fusion's (one kernel of
    // its grid, its tiles staged): no components analysed.
    if block_local_only(&members, 0) {
        return;
    }
    let mut at = 0;
    while members.len() - at >= 2 {
        // The longest run from `at` that passes; the serial work only grows with the run, so a
        // binary search over its length finds it (what it returns is checked again).
        let (mut lo, mut hi) = (2, members.len() - at);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if analyze(plan, &members[at..at + mid], at, mode).is_some() {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        match analyze(plan, &members[at..at + lo], at, mode) {
            Some(c) => {
                if !block_local_only(&members[at..at + lo], at) {
                    let lane = members[at..at + lo].iter().map(|m| m.node).collect();
                    out.push(Group { key: FuseKey { grid: [c.count, 1, 1], ..key }, lanes: vec![lane], components: Some(c) });
                }
                at += lo;
            }
            None => at += 1,
        }
    }
}

/// Whether `members` (the run's from `base` on) share one grid and every relation among them is
/// block-local.
fn block_local_only(members: &[Member], base: usize) -> bool {
    members.iter().all(|m| m.grid == members[0].grid && m.deps.iter().filter(|(u, _)| *u >= base).all(|(_, r)| r.is_block_local()))
}

/// The components of `members` (the run's members from `base` on; relations to earlier ones are
/// whole-node edges between fused kernels, not unions): numbered in the order the members' blocks
/// first reach them; `None` where a member's blocks of a component are not `c·step + k·stride` or,
/// under `auto`, a fused block's serial work is too large.
fn analyze(plan: &Plan, members: &[Member], base: usize, mode: FusionMode) -> Option<Components> {
    let mut offset = Vec::with_capacity(members.len() + 1);
    offset.push(0u64);
    for m in members {
        offset.push(offset.last()? + block_count(m.grid));
    }
    let total = usize::try_from(*offset.last()?).ok()?;
    let mut sets = Disjoint::new(total);
    for (i, m) in members.iter().enumerate() {
        let mine = offset[i] as usize;
        let blocks = block_count(m.grid) as usize;
        for (u, rel) in m.deps.iter().filter(|(u, _)| *u >= base) {
            let (theirs, producers) = (offset[u - base] as usize, block_count(members[u - base].grid) as usize);
            match rel {
                TileRelation::BlockLocal if producers == blocks => (0..blocks).for_each(|b| sets.union(theirs + b, mine + b)),
                TileRelation::Sparse(d) if d.consumers() <= blocks && (0..d.consumers()).all(|b| d.of(b).iter().all(|&p| (p as usize) < producers)) => {
                    (0..d.consumers()).for_each(|b| d.of(b).iter().for_each(|&p| sets.union(theirs + p as usize, mine + b)))
                }
                // A relation that does not fit the two grids (never from `tiles::relation`): unfused.
                _ => return None,
            }
        }
    }
    let mut number = vec![u32::MAX; total];
    let mut count = 0u32;
    let mut comp = vec![0u32; total];
    for (e, c) in comp.iter_mut().enumerate() {
        let r = sets.find(e);
        if number[r] == u32::MAX {
            number[r] = count;
            count += 1;
        }
        *c = number[r];
    }
    let mut out = Vec::with_capacity(members.len());
    for (i, m) in members.iter().enumerate() {
        let blocks = &comp[offset[i] as usize..offset[i + 1] as usize];
        let chunks = chunks(blocks, count, m.grid)?;
        if mode != FusionMode::On && (chunks.per > MAX_SERIAL_BLOCKS || u64::from(chunks.per).saturating_mul(block_bytes(plan, m.node)) > MAX_SERIAL_BYTES) {
            return None;
        }
        out.push(chunks);
    }
    Some(Components { count, members: out })
}

/// A member's blocks as `c·step + k·stride` given each block's component (`comp[b]`), if they are.
fn chunks(comp: &[u32], count: u32, grid: [u32; 3]) -> Option<MemberBlocks> {
    let n = comp.len() as u64;
    if n % u64::from(count) != 0 {
        return None;
    }
    let per = u32::try_from(n / u64::from(count)).ok()?;
    // The first two blocks of component 0 and the first of component 1.
    let first = |c: u32| comp.iter().position(|&x| x == c).map(|b| b as u64);
    let second0 = comp.iter().enumerate().filter(|(_, &x)| x == 0).nth(1).map(|(b, _)| b as u64);
    let f0 = first(0)?;
    let step = if count > 1 { first(1)?.checked_sub(f0)? } else { 0 };
    let stride = if per > 1 { second0?.checked_sub(f0)? } else { 0 };
    if f0 != 0 {
        return None;
    }
    let mut seen = vec![0u32; count as usize];
    for (b, &c) in comp.iter().enumerate() {
        let k = seen[c as usize];
        if k >= per || b as u64 != u64::from(c) * step + u64::from(k) * stride {
            return None;
        }
        seen[c as usize] = k + 1;
    }
    Some(MemberBlocks { grid, per, step, stride })
}

/// The bytes one block of node `v` touches by its tile maps; a buffer param without a map counts
/// its whole slice.
fn block_bytes(plan: &Plan, v: NodeId) -> u64 {
    let g = plan.graph();
    let NodeOp::Kernel { kernel, args, .. } = &g.node(v).op else { return u64::MAX };
    let sig = g.kernel(*kernel);
    let mut bytes = 0u64;
    for (p, (param, arg)) in sig.params.iter().zip(args).enumerate() {
        if let (ParamKind::Buffer(_), Arg::Buffer(s)) = (&param.kind, arg) {
            let touched = match g.tile_map(v, p) {
                Some(map) => map.ranges().iter().map(|r| r.len.saturating_mul(r.rows)).fold(0u64, u64::saturating_add),
                None => s.len,
            };
            bytes = bytes.saturating_add(touched);
        }
    }
    bytes
}

/// Disjoint sets over `0..n` (union by size, path halving).
struct Disjoint {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl Disjoint {
    fn new(n: usize) -> Self {
        Disjoint { parent: (0..n as u32).collect(), size: vec![1; n] }
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] as usize != x {
            let up = self.parent[self.parent[x] as usize];
            self.parent[x] = up;
            x = up as usize;
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a as u32;
        self.size[a] += self.size[b];
    }
}

#[cfg(test)]
mod tests;
