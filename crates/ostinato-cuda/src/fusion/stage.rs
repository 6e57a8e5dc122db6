//! Tile staging: in a fused kernel whose block `b` runs every member's block `b` (a block-local chain,
//! `ostinato::fusion::groups`), the bytes a block's tile maps give it can live in the block's shared
//! memory for the whole chain: copied in once after the fused kernel's wait, every member reading and
//! writing them there, copied back once before it ends. Without staging each member's stores go
//! through to L2 (an SM's L1 is write-through) and the chain runs at L2's store rate: a 941-deep
//! `add_one` chain of 8,192 blocks took 2.17 µs per body whichever load or store qualifier the probe
//! used, and 0.52 with its values in registers (`lab/probes/fused_l1.cu`, H200).
//!
//! A fused param is staged only where that cannot change a result:
//! - every member reaching it does so through one kernel param whose tile map is *verified* (from the
//!   PTX, or a built-in's stated footprint), the same single range for every member, inside the
//!   member's slice — so block `b` touches no byte of the param outside its tile;
//! - the member's body reaches it only by plain weak loads and stores (`FusedBody::unplain`): those
//!   read and write the same bytes through a generic address whatever memory it names; an atomic, a
//!   `.global` qualifier in inline assembly or a non-coherent read would name global memory;
//! - no member has an access it cannot attribute to a param (`FusedBody::unattributed`: a pointer
//!   loaded from memory could reach a staged tile's global bytes);
//! - no other param of the fused kernel lies on the same allocation (two views of one buffer);
//! - the tiles of different blocks are disjoint where the param is written (the copy back writes the
//!   whole tile), and the tile is 16-byte aligned in address and length (the copies move 16 bytes a
//!   thread; the members' addresses keep their alignment);
//! - at least two members use it (a single member would only pay the copies), and the staged bytes
//!   fit the budget the shared memory leaves.

use ostinato::{Access, BufferId, NodeId, Plan};

/// The most shared memory one fused block stages (besides its members' own shared memory): a bound
/// on what staging may take from occupancy.
pub const STAGE_BUDGET_BYTES: u64 = 32 * 1024;

/// A fused param as the generator collected it: `start..end` bytes of root `root`, with the union
/// of its members' accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerParam {
    pub index: usize,
    pub root: BufferId,
    pub start: u64,
    pub access: Access,
}

/// One member's use of a fused param: node `node` passes it as its kernel param `kernel_param`
/// (`None`: an internal copy or fill, which declares no tile map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamUse {
    pub node: NodeId,
    pub kernel_param: Option<usize>,
    pub fused_param: usize,
}

/// A staged param: fused param `param`'s block `(x, y, z)` tile is `len` bytes at
/// `base + stride·(x, y, z)` from the param's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staged {
    pub param: usize,
    pub base: u64,
    pub stride: [u64; 3],
    pub len: u64,
    /// Some member writes it: the tile is copied back.
    pub write_back: bool,
}

/// What the members' bodies allow: `plain(v, p)` — node `v`'s body reaches its kernel param `p` only
/// by plain loads and stores and its tile map on `p` is verified; `attributed(v)` — every access of
/// `v`'s body is attributed to a param.
pub struct Bodies<'a> {
    pub plain: &'a dyn Fn(NodeId, usize) -> bool,
    pub attributed: &'a dyn Fn(NodeId) -> bool,
}

/// The params of a fused kernel of grid `grid` to stage, within `budget` bytes (see the module doc).
pub fn choose(plan: &Plan, grid: [u32; 3], params: &[PointerParam], uses: &[ParamUse], bodies: &Bodies, budget: u64) -> Vec<Staged> {
    if grid == [1, 1, 1] || uses.iter().any(|u| !(bodies.attributed)(u.node)) {
        return Vec::new();
    }
    let mut staged = Vec::new();
    let mut left = budget;
    for p in params {
        let Some(s) = stageable(plan, grid, p, params, uses, bodies) else { continue };
        if s.len <= left {
            left -= s.len;
            staged.push(s);
        }
    }
    staged
}

/// Param `p` staged, where every rule of the module doc holds.
fn stageable(plan: &Plan, grid: [u32; 3], p: &PointerParam, params: &[PointerParam], uses: &[ParamUse], bodies: &Bodies) -> Option<Staged> {
    if params.iter().any(|q| q.index != p.index && q.root == p.root) {
        return None;
    }
    let mine: Vec<&ParamUse> = uses.iter().filter(|u| u.fused_param == p.index).collect();
    if mine.len() < 2 {
        return None;
    }
    let g = plan.graph();
    let mut range = None;
    for u in &mine {
        let k = u.kernel_param?;
        if !(bodies.plain)(u.node, k) {
            return None;
        }
        let map = g.tile_map(u.node, k)?;
        let [r] = map.ranges() else { return None };
        if r.rows != 1 || range.is_some_and(|first| first != *r) {
            return None;
        }
        range = Some(*r);
    }
    let r = range?;
    let aligned = (p.start + r.base) % 16 == 0 && r.len % 16 == 0 && (0..3).all(|d| grid[d] == 1 || r.stride[d] % 16 == 0);
    let write_back = p.access != Access::Read;
    if !aligned || (write_back && !disjoint(grid, r.stride, r.len)) {
        return None;
    }
    Some(Staged { param: p.index, base: r.base, stride: r.stride, len: r.len, write_back })
}

/// Whether the tiles `[stride·b, stride·b + len)` of the blocks of `grid` are pairwise disjoint: the
/// dimensions with more than one block, by stride, each step at least the extent of the ones below.
fn disjoint(grid: [u32; 3], stride: [u64; 3], len: u64) -> bool {
    let mut dims: Vec<(u64, u64)> = (0..3).filter(|&d| grid[d] > 1).map(|d| (stride[d], u64::from(grid[d]))).collect();
    dims.sort_unstable();
    let mut extent = len;
    for (s, n) in dims {
        if s < extent {
            return false;
        }
        let Some(e) = s.checked_mul(n - 1).and_then(|x| x.checked_add(extent)) else { return false };
        extent = e;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_disjoint_only_when_each_stride_clears_the_extent_below_it() {
        assert!(disjoint([8, 1, 1], [1024, 0, 0], 1024));
        assert!(!disjoint([8, 1, 1], [512, 0, 0], 1024), "overlapping rows");
        assert!(disjoint([1, 1, 1], [0, 0, 0], 1024), "one block");
        // A 2-D grid: x steps 64 bytes, y steps 4 × 64 = 256.
        assert!(disjoint([4, 3, 1], [64, 256, 0], 64));
        assert!(!disjoint([4, 3, 1], [64, 192, 0], 64), "row 1 starts inside row 0's last tile");
        assert!(disjoint([4, 3, 1], [192, 64, 0], 64), "the nesting may go either way");
        assert!(!disjoint([2, 2, 1], [64, 0, 0], 64), "y does not move the tile");
        assert!(!disjoint([3, 1, 1], [u64::MAX / 2, 0, 0], 16), "an extent past u64 is refused, not wrapped");
    }
}
