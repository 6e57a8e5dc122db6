//! Tile maps: the bytes each *block* of a launch touches through a buffer param, declared as an affine
//! form of the block index, and the dependencies they give between the blocks of two nodes.
//!
//! A node's slice says which bytes the whole launch may touch; a [`TileMap`] on that param says which
//! of them block `(x, y, z)` may touch: the union of its [`TileRange`]s, each `rows` rows of `len`
//! bytes, `pitch` bytes apart, starting `base + stride·(x, y, z)` bytes into the slice. No map means
//! the whole slice for every block (today's declaration). A map is a promise about the code, checked
//! like an access mode: a backend verifies it from the code where it can (`docs/contract.md`), the
//! host backend checks every access of its twins at run time.
//!
//! Between two nodes with a hazard, [`relation`] says which consumer blocks depend on which producer
//! blocks, by interval arithmetic on the maps (for each consumer block, the producer blocks whose
//! pieces meet its pieces are solved for, dimension by dimension, never by trying every pair): each
//! consumer block depends on the producer block of its own index only ([`TileRelation::BlockLocal`]),
//! on a few producer blocks ([`TileRelation::Sparse`]), or the nodes stay ordered as wholes
//! ([`TileRelation::Dense`], with why). Only what the maps prove is used: a param without a map, a
//! relation too dense or too large to enumerate, makes the pair dense. Two common shapes skip the
//! pass block by block: the same provably disjoint map on both sides ([`TileMap::blocks_disjoint`]:
//! block-local at once), and a relation that repeats at every block, moved (one grid, one stride
//! vector: its block offsets are solved once, from block 0).

use crate::graph::{Graph, NodeId, NodeOp};
use crate::plan::hazard_between;

mod search;
use search::Search;

/// The most ranges one param's map may have.
pub const MAX_TILE_RANGES: usize = 8;
/// The most blocks a launch may have for its maps to be analysed; a larger launch orders as a whole.
pub const MAX_TILE_BLOCKS: u64 = 1 << 20;
/// The most producer blocks one consumer block may depend on in a [`TileRelation::Sparse`] relation.
pub const MAX_TILE_DEPS: usize = 64;
/// The steps one [`relation`] may take before it gives up (and orders the pair as wholes).
pub const RELATION_BUDGET: u64 = 1 << 26;

/// One strided set of byte rows a block touches, relative to the start of its node's slice: for block
/// `(x, y, z)` and row `k < rows`, bytes `[o, o + len)` with `o = base + stride[0]·x + stride[1]·y +
/// stride[2]·z + k·pitch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileRange {
    pub base: u64,
    pub stride: [u64; 3],
    pub len: u64,
    pub rows: u64,
    pub pitch: u64,
}

impl TileRange {
    /// One row of `len` bytes at `base + stride·block`.
    pub fn span(base: u64, stride: [u64; 3], len: u64) -> Self {
        TileRange { base, stride, len, rows: 1, pitch: 0 }
    }
    /// The same range repeated over `rows` rows, `pitch` bytes apart (a 2-D tile of a row-major array).
    pub fn with_rows(self, rows: u64, pitch: u64) -> Self {
        TileRange { rows, pitch, ..self }
    }
    /// The range's byte extent for the block at `block`: (first byte, one past the last).
    fn extent(&self, block: [u64; 3]) -> (u128, u128) {
        let start = u128::from(self.base) + (0..3).map(|d| u128::from(self.stride[d]) * u128::from(block[d])).sum::<u128>();
        (start, start + u128::from(self.rows - 1) * u128::from(self.pitch) + u128::from(self.len))
    }
}

/// The bytes one block touches through a param: the union of its ranges (1 to [`MAX_TILE_RANGES`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileMap {
    ranges: Vec<TileRange>,
}

impl TileMap {
    /// A map of these ranges. Refused: no range or more than [`MAX_TILE_RANGES`], an empty row, no row,
    /// and rows that overlap (`pitch < len` with more than one row).
    pub fn new(ranges: Vec<TileRange>) -> Result<TileMap, String> {
        if ranges.is_empty() || ranges.len() > MAX_TILE_RANGES {
            return Err(format!("a tile map has 1 to {MAX_TILE_RANGES} ranges, got {}", ranges.len()));
        }
        for (i, r) in ranges.iter().enumerate() {
            if r.len == 0 {
                return Err(format!("tile range {i}: length 0 (a range declares at least one byte)"));
            }
            if r.rows == 0 {
                return Err(format!("tile range {i}: 0 rows"));
            }
            if r.rows > 1 && r.pitch < r.len {
                return Err(format!("tile range {i}: rows of {} bytes {} bytes apart overlap (pitch must be at least the length)", r.len, r.pitch));
            }
        }
        Ok(TileMap { ranges })
    }
    /// The common 1-D map: block `x` touches `len` bytes at `stride·x` (rows of a row-major array, one
    /// per block, when `stride == len`).
    pub fn linear(stride: u64, len: u64) -> Result<TileMap, String> {
        Self::new(vec![TileRange::span(0, [stride, 0, 0], len)])
    }
    pub fn ranges(&self) -> &[TileRange] {
        &self.ranges
    }
    /// Checks that every block of `grid` touches only bytes of a slice of `slice_len` bytes.
    pub fn check_within(&self, grid: [u32; 3], slice_len: u64) -> Result<(), String> {
        let last = [u64::from(grid[0]) - 1, u64::from(grid[1]) - 1, u64::from(grid[2]) - 1];
        for (i, r) in self.ranges.iter().enumerate() {
            // Every term grows with the block index: the last block ends furthest.
            let (_, end) = r.extent(last);
            if end > u128::from(slice_len) {
                return Err(format!(
                    "tile range {i}: block {last:?} of grid {grid:?} ends at byte {end} of the slice, which has {slice_len} bytes (a tile lies inside its node's extent)"
                ));
            }
        }
        Ok(())
    }
    /// Calls `f(start, end)` for every byte row block `block` touches, relative to the slice, range by
    /// range and row by row.
    pub fn for_each_piece(&self, block: [u32; 3], mut f: impl FnMut(u64, u64)) {
        let b = [u64::from(block[0]), u64::from(block[1]), u64::from(block[2])];
        for r in &self.ranges {
            let (start, _) = r.extent(b);
            for k in 0..r.rows {
                let s = start + u128::from(k) * u128::from(r.pitch);
                // Within the slice (checked when recorded), so within u64.
                f(s as u64, (s + u128::from(r.len)) as u64);
            }
        }
    }
    /// Whether block `block` may touch every byte of `[lo, hi)` of the slice (an empty range: true).
    /// Allocation-free: it walks from `lo`, each step to the furthest end of a piece holding the byte
    /// it stands on.
    pub fn covers(&self, block: [u32; 3], lo: u64, hi: u64) -> bool {
        let b = [u64::from(block[0]), u64::from(block[1]), u64::from(block[2])];
        let (mut at, hi) = (u128::from(lo), u128::from(hi));
        while at < hi {
            let mut reach = at;
            for r in &self.ranges {
                let (start, end) = r.extent(b);
                if at < start || at >= end {
                    continue;
                }
                let k = if r.rows == 1 { 0 } else { (at - start) / u128::from(r.pitch) };
                let piece = start + k * u128::from(r.pitch);
                if at < piece + u128::from(r.len) {
                    reach = reach.max(piece + u128::from(r.len));
                }
            }
            if reach == at {
                return false;
            }
            at = reach;
        }
        true
    }
    /// Whether no two blocks of `grid` may touch a common byte, proven in closed form as a mixed-radix
    /// layout: pieces of width `W` at `Σ stride·index` over dimensions of `count` indices never meet
    /// where, from the smallest stride up, each stride is at least `W` plus all that the smaller ones
    /// reach (`stride·(count − 1)` each). Two forms are tried: one range, its rows a dimension of
    /// their own (pitch, rows) beside the grid's, `W` its length (2-D tiles of a row-major array); and
    /// ranges that all move with one stride vector, `W` the span of one block's ranges (a row and its
    /// trailing words). False where neither holds, though the blocks may still be disjoint.
    pub fn blocks_disjoint(&self, grid: [u32; 3]) -> bool {
        let Some(first) = self.ranges.first() else { return true };
        let block_dims = |stride: [u64; 3]| (0..3).filter(|&d| grid[d] > 1).map(move |d| (u128::from(stride[d]), u128::from(grid[d])));
        if let [r] = self.ranges.as_slice() {
            let rows = (r.rows > 1).then_some((u128::from(r.pitch), u128::from(r.rows)));
            if mixed_radix(block_dims(r.stride).chain(rows).collect(), u128::from(r.len)) {
                return true;
            }
        }
        if self.ranges.iter().any(|r| r.stride != first.stride) {
            return false;
        }
        let lo = self.ranges.iter().map(|r| u128::from(r.base)).min().unwrap_or(0);
        let hi = self.ranges.iter().map(|r| r.extent([0; 3]).1).max().unwrap_or(0);
        mixed_radix(block_dims(first.stride).collect(), hi - lo)
    }
    /// Whether block `block` may touch byte `offset` of the slice.
    pub fn touches(&self, block: [u32; 3], offset: u64) -> bool {
        let b = [u64::from(block[0]), u64::from(block[1]), u64::from(block[2])];
        let o = u128::from(offset);
        self.ranges.iter().any(|r| {
            let (start, end) = r.extent(b);
            if o < start || o >= end {
                return false;
            }
            let into = o - start;
            r.rows == 1 || into % u128::from(r.pitch.max(1)) < u128::from(r.len)
        })
    }
}

/// The tile map declared on one param of a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamTile {
    /// The param's index in the kernel's signature.
    pub param: usize,
    pub map: TileMap,
}

/// The blocks of a grid, by linear index `x + gx·(y + gy·z)`.
pub fn block_count(grid: [u32; 3]) -> u64 {
    grid.iter().map(|&d| u64::from(d)).product()
}

/// Block `(x, y, z)` of the linear index `i` in `grid`.
pub fn block_at(grid: [u32; 3], i: u64) -> [u32; 3] {
    let (gx, gy) = (u64::from(grid[0]), u64::from(grid[1]));
    [(i % gx) as u32, ((i / gx) % gy) as u32, (i / (gx * gy)) as u32]
}

/// Why two nodes are ordered as wholes rather than block by block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenseReason {
    /// A conflicting param has no tile map (or the node is no kernel launch).
    NoMap { node: NodeId, param: String },
    /// A launch has more blocks than the analysis enumerates.
    TooManyBlocks { node: NodeId, blocks: u64 },
    /// A consumer block depends on more producer blocks than a hand-off waits for.
    TooDense { block: u64, producers: usize },
    /// The analysis took more steps than its budget.
    Budget,
    /// An explicit ordering with no declared bytes between the two.
    Explicit,
}

impl std::fmt::Display for DenseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DenseReason::NoMap { node, param } => write!(f, "node {node}'s `{param}` has no tile map"),
            DenseReason::TooManyBlocks { node, blocks } => write!(f, "node {node} launches {blocks} blocks (at most {MAX_TILE_BLOCKS} are analysed)"),
            DenseReason::TooDense { block, producers } => {
                write!(f, "consumer block {block} depends on {producers} producer blocks (more than {MAX_TILE_DEPS})")
            }
            DenseReason::Budget => write!(f, "the tile analysis passed its budget of {RELATION_BUDGET} steps"),
            DenseReason::Explicit => write!(f, "an explicit edge without declared bytes"),
        }
    }
}

/// For each consumer block (by linear index), the producer blocks it depends on, ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TileDeps {
    offsets: Vec<u32>,
    producers: Vec<u32>,
}

impl TileDeps {
    /// From each consumer block's producer blocks (each list ascending).
    pub fn from_lists(lists: &[Vec<u32>]) -> TileDeps {
        let mut offsets = Vec::with_capacity(lists.len() + 1);
        let mut producers = Vec::with_capacity(lists.iter().map(Vec::len).sum());
        offsets.push(0);
        for l in lists {
            producers.extend_from_slice(l);
            offsets.push(producers.len() as u32);
        }
        TileDeps { offsets, producers }
    }
    /// The producer blocks consumer block `block` depends on.
    pub fn of(&self, block: usize) -> &[u32] {
        match (self.offsets.get(block), self.offsets.get(block + 1)) {
            (Some(&a), Some(&b)) => &self.producers[a as usize..b as usize],
            _ => &[],
        }
    }
    /// Consumer blocks.
    pub fn consumers(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    /// (consumer block, producer block) pairs.
    pub fn pairs(&self) -> usize {
        self.producers.len()
    }
    /// The most producer blocks one consumer block depends on.
    pub fn max_per_consumer(&self) -> usize {
        (0..self.consumers()).map(|b| self.of(b).len()).max().unwrap_or(0)
    }
    /// The offsets (one per consumer block, then the total) and the producer list, as a backend uploads
    /// them.
    pub fn csr(&self) -> (&[u32], &[u32]) {
        (&self.offsets, &self.producers)
    }
}

/// How the blocks of a consumer depend on the blocks of an earlier node it has a hazard with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TileRelation {
    /// Same grid; consumer block `b` depends on producer block `b` at most.
    BlockLocal,
    /// Consumer block `b` depends on the producer blocks `deps.of(b)` (none for some).
    Sparse(TileDeps),
    /// The two are ordered as whole nodes.
    Dense(DenseReason),
}

impl TileRelation {
    pub fn is_block_local(&self) -> bool {
        matches!(self, TileRelation::BlockLocal)
    }
    /// One line for `plan --explain`.
    pub fn describe(&self) -> String {
        match self {
            TileRelation::BlockLocal => "tiles: block-local (block b waits for block b only)".to_string(),
            TileRelation::Sparse(d) => {
                format!("tiles: sparse ({} block pairs; a consumer block waits for at most {} producer blocks)", d.pairs(), d.max_per_consumer())
            }
            TileRelation::Dense(why) => format!("tiles: whole nodes ({why})"),
        }
    }
}

/// One conflicting pair of params of the two nodes: the bytes both may touch, on one root.
struct Conflict<'a> {
    producer: &'a TileMap,
    /// The producer's slice start on the root.
    producer_start: u64,
    consumer: &'a TileMap,
    consumer_start: u64,
    consumer_end: u64,
    /// The bytes both slices cover, on the root.
    lo: u64,
    hi: u64,
}

/// Which blocks of `to` depend on which blocks of `from` (`from` earlier in recording order, or ordered
/// before it), over every pair of their params with a hazard on overlapping bytes.
pub fn relation(g: &Graph, from: NodeId, to: NodeId) -> TileRelation {
    let (Some(gu), Some(gv)) = (launch_grid(g, from), launch_grid(g, to)) else {
        let node = if launch_grid(g, from).is_none() { from } else { to };
        return TileRelation::Dense(DenseReason::NoMap { node, param: "(not a kernel launch)".into() });
    };
    for (node, grid) in [(from, gu), (to, gv)] {
        let blocks = block_count(grid);
        if blocks > MAX_TILE_BLOCKS {
            return TileRelation::Dense(DenseReason::TooManyBlocks { node, blocks });
        }
    }
    let (ua, va) = (g.accesses(from), g.accesses(to));
    let mut conflicts = Vec::new();
    for a in &ua {
        for b in &va {
            if a.root != b.root || a.start >= b.end || b.start >= a.end || hazard_between(a.access, b.access).is_empty() {
                continue;
            }
            let (Some(pm), Some(cm)) = (g.tile_map(from, a.param), g.tile_map(to, b.param)) else {
                let (node, param) = if g.tile_map(from, a.param).is_none() { (from, a.param) } else { (to, b.param) };
                return TileRelation::Dense(DenseReason::NoMap { node, param: g.param_name(node, param) });
            };
            conflicts.push(Conflict {
                producer: pm,
                producer_start: a.start,
                consumer: cm,
                consumer_start: b.start,
                consumer_end: b.end,
                lo: a.start.max(b.start),
                hi: a.end.min(b.end),
            });
        }
    }
    if conflicts.is_empty() {
        return TileRelation::Dense(DenseReason::Explicit);
    }
    // Every conflict the same map over the same bytes on the same grid, its blocks pairwise disjoint:
    // block b meets block b only, known without a pass over the blocks.
    if gu == gv && conflicts.iter().all(|c| c.producer_start == c.consumer_start && c.producer == c.consumer && c.producer.blocks_disjoint(gu)) {
        return TileRelation::BlockLocal;
    }
    let mut budget = RELATION_BUDGET;
    if let Some(rel) = by_offsets(&conflicts, gu, gv, &mut budget) {
        return rel;
    }
    // The producers' ranges prepared once for the search block by block.
    let searches: Vec<Search> = conflicts.iter().map(|c| Search::of(c.producer, gu, c.producer_start, c.hi)).collect();
    let consumers = block_count(gv);
    let mut deps = Collected::new(consumers, gu == gv);
    let mut set: Vec<u32> = Vec::new();
    for j in 0..consumers {
        set.clear();
        let block = block_at(gv, j);
        for (c, search) in conflicts.iter().zip(&searches) {
            let mut over = false;
            c.consumer.for_each_piece(block, |s, e| {
                let (s, e) = ((c.consumer_start + s).max(c.lo), (c.consumer_start + e).min(c.hi));
                if s < e && !over {
                    over = !search.producer_blocks(gu, s, e, &mut budget, &mut set);
                }
            });
            if over {
                return TileRelation::Dense(DenseReason::Budget);
            }
            set.sort_unstable();
            set.dedup();
            if set.len() > MAX_TILE_DEPS {
                return TileRelation::Dense(DenseReason::TooDense { block: j, producers: set.len() });
            }
        }
        if let Err(dense) = deps.push(j, &set) {
            return dense;
        }
    }
    deps.finish()
}

/// The relation where it is the same at every block, moved: one grid, and in every conflict the
/// producer's and the consumer's ranges all moving with one stride vector over a consumer slice inside
/// the producer's (no piece cut at the overlap's ends). Consumer block `b` then depends on the
/// producer blocks `b + d` inside the grid for the offsets `d` found once, from block 0's pieces
/// against every offset (`search::block_offsets`): a pass over the blocks that only adds offsets, with
/// the same results as the search block by block (`tests/tile_oracle.rs` compares both with brute
/// force). `None` where that does not hold, where the offsets are too many to be worth it, or where
/// the budget ran out; the search block by block then goes on with what is left of `budget`, so the
/// two together take at most [`RELATION_BUDGET`] steps.
fn by_offsets(conflicts: &[Conflict], gu: [u32; 3], gv: [u32; 3], budget: &mut u64) -> Option<TileRelation> {
    let one_stride = |c: &Conflict| {
        let s = c.producer.ranges().first().map(|r| r.stride);
        c.producer.ranges().iter().chain(c.consumer.ranges()).all(|r| Some(r.stride) == s)
    };
    if gu != gv || !conflicts.iter().all(|c| one_stride(c) && c.lo == c.consumer_start && c.hi == c.consumer_end) {
        return None;
    }
    let mut deltas: Vec<[i64; 3]> = Vec::new();
    for c in conflicts {
        let mut pieces = Vec::new();
        c.consumer.for_each_piece([0; 3], |s, e| pieces.push((c.consumer_start + s, c.consumer_start + e)));
        if !search::block_offsets(c.producer, c.producer_start, gu, &pieces, budget, &mut deltas) || deltas.len() > 8 * MAX_TILE_DEPS {
            return None;
        }
    }
    let g = gv.map(i64::from);
    // Ordered by the linear index they add (the same order at every block; two offsets that add the
    // same never both land inside the grid), each once.
    deltas.sort_unstable_by_key(|d| (d[0] + g[0] * (d[1] + g[1] * d[2]), *d));
    deltas.dedup();
    let consumers = block_count(gv);
    let mut deps = Collected::new(consumers, true);
    let mut set: Vec<u32> = Vec::new();
    for j in 0..consumers {
        let b = block_at(gv, j).map(i64::from);
        set.clear();
        for d in &deltas {
            let a = [b[0] + d[0], b[1] + d[1], b[2] + d[2]];
            if (0..3).all(|k| (0..g[k]).contains(&a[k])) {
                set.push((a[0] + g[0] * (a[1] + g[1] * a[2])) as u32);
            }
        }
        if let Err(dense) = deps.push(j, &set) {
            return Some(dense);
        }
    }
    Some(deps.finish())
}

/// A relation collected consumer block by consumer block, each block's producer blocks in turn
/// (sorted, each once): block-local where the grids are one and every block's set is at most its own
/// index, else sparse.
struct Collected {
    offsets: Vec<u32>,
    producers: Vec<u32>,
    local: bool,
}

impl Collected {
    fn new(consumers: u64, same_grid: bool) -> Collected {
        let mut offsets = Vec::with_capacity(consumers as usize + 1);
        offsets.push(0);
        Collected { offsets, producers: Vec::new(), local: same_grid }
    }

    /// Consumer block `j`'s producer blocks; the relation too dense to keep where they are more than
    /// [`MAX_TILE_DEPS`].
    fn push(&mut self, j: u64, set: &[u32]) -> Result<(), TileRelation> {
        if set.len() > MAX_TILE_DEPS {
            return Err(TileRelation::Dense(DenseReason::TooDense { block: j, producers: set.len() }));
        }
        self.local &= set.iter().all(|&p| u64::from(p) == j);
        self.producers.extend_from_slice(set);
        self.offsets.push(self.producers.len() as u32);
        Ok(())
    }

    fn finish(self) -> TileRelation {
        if self.local {
            TileRelation::BlockLocal
        } else {
            TileRelation::Sparse(TileDeps { offsets: self.offsets, producers: self.producers })
        }
    }
}

/// Whether pieces `width` bytes wide at `Σ stride·index` (each index below its dimension's count) are
/// pairwise disjoint by the mixed-radix rule ([`TileMap::blocks_disjoint`]). `dims`: (stride, count).
fn mixed_radix(mut dims: Vec<(u128, u128)>, width: u128) -> bool {
    dims.sort_unstable();
    let mut reach = 0u128;
    for (stride, count) in dims {
        if stride < reach + width {
            return false;
        }
        reach += stride * (count - 1);
    }
    true
}

/// The grid of a kernel launch.
fn launch_grid(g: &Graph, v: NodeId) -> Option<[u32; 3]> {
    match &g.node(v).op {
        NodeOp::Kernel { launch, .. } => Some(launch.grid),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_are_refused_where_they_declare_nothing_or_overlap_their_rows() {
        assert!(TileMap::new(vec![]).is_err());
        assert!(TileMap::new(vec![TileRange::span(0, [4, 0, 0], 0)]).is_err());
        assert!(TileMap::new(vec![TileRange::span(0, [4, 0, 0], 8).with_rows(2, 4)]).unwrap_err().contains("overlap"));
        assert!(TileMap::new(vec![TileRange::span(0, [4, 0, 0], 8).with_rows(0, 8)]).is_err());
        assert!(TileMap::new(vec![TileRange::span(0, [1, 0, 0], 1); MAX_TILE_RANGES + 1]).is_err());
        let m = TileMap::linear(1024, 1024).unwrap();
        assert!(m.check_within([4, 1, 1], 4096).is_ok());
        assert!(m.check_within([5, 1, 1], 4096).unwrap_err().contains("ends at byte 5120"));
    }

    #[test]
    fn touches_follows_rows_and_strides() {
        let m = TileMap::new(vec![TileRange::span(16, [100, 1000, 0], 8).with_rows(3, 20)]).unwrap();
        assert!(m.touches([1, 2, 0], 16 + 100 + 2000));
        assert!(m.touches([1, 2, 0], 16 + 100 + 2000 + 47));
        assert!(!m.touches([1, 2, 0], 16 + 100 + 2000 + 8));
        assert!(!m.touches([1, 2, 0], 16 + 100 + 2000 + 60));
        let mut pieces = Vec::new();
        m.for_each_piece([1, 2, 0], |s, e| pieces.push((s, e)));
        assert_eq!(pieces, vec![(2116, 2124), (2136, 2144), (2156, 2164)]);
    }

    #[test]
    fn covers_is_every_byte_touched() {
        let m = TileMap::new(vec![TileRange::span(16, [100, 1000, 0], 8).with_rows(3, 20), TileRange::span(24, [100, 1000, 0], 12)]).unwrap();
        for blk in [[0, 0, 0], [1, 2, 0], [3, 1, 0]] {
            for lo in 0..3200u64 {
                for len in [0u64, 1, 4, 8, 13, 40] {
                    let want = (lo..lo + len).all(|o| m.touches(blk, o));
                    assert_eq!(m.covers(blk, lo, lo + len), want, "{blk:?} [{lo}, {})", lo + len);
                }
            }
        }
    }
}
