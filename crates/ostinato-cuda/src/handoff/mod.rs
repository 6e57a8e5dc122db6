//! Per-tile hand-offs: a consumer block waits for exactly the producer blocks whose bytes it reads or
//! overwrites, instead of the whole producer grid.
//!
//! Where every node a consumer `v` has a hazard with on the access frontier (`Plan::hazard_preds`)
//! relates to it tile by tile (`ostinato::tiles`: block-local or sparse), `v` runs as a generated
//! wrapper of its body ([`source`]): block `j` first waits (acquire, GPU scope) for the flags of the
//! producer blocks `j` depends on, then runs the body, then publishes its own flag (release). Every such
//! producer is wrapped too, to publish its blocks' flags. A flag counts how many times its block has
//! completed: in a replay's `r`-th run a waiting block asks for `r`, read as its own flag plus one (the
//! flags are zeroed at instantiate, and every node runs once per replay), so nothing is reset between
//! replays and no host call is made.
//!
//! Why it is correct (`docs/tiles.md`, "Tile hand-offs"): each byte's accesses are ordered along the
//! access frontier, and a consumer waits on every frontier predecessor's blocks touching its bytes;
//! each of those ran its body only after its own waits, so the ordering is transitive byte by byte,
//! whatever the graph's edges are (a full edge just finds the flags already set). A wrapper executes
//! `griddepcontrol.wait` at its end, so its completion still implies its programmatic predecessors'
//! (the invariant every full edge relies on). Deadlock freedom: a block only waits on blocks of grids
//! that are fully launched — a dependent grid is launched only once every block of its programmatic
//! predecessor has started (`griddepcontrol.launch_dependents` or exit), and full edges wait for
//! completion.

pub mod build;
pub mod source;

use ostinato::tiles::{block_count, TileRelation};
use ostinato::{NodeId, NodeOp, Plan};

/// An exec's hand-off policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HandoffMode {
    /// The measured policy: nowhere today. On an H200 a consumer launched early spins on its flags in
    /// SMs its producer needs; of the rows measured, a 941-node chain of 128 blocks ran 2.4× slower,
    /// the spread/gather chain 4.2× and the per-row softmax chain 1.7× slower than waiting for the
    /// whole producer with PDL, the RMS-norm chain 1.14× faster (a chain fusion runs 1.63× faster
    /// still), and the Llama step's per-head relations lost (`docs/fences.md`, decision 13).
    #[default]
    Auto,
    /// Hand off wherever every relation into a consumer is tile by tile.
    On,
    /// Never: every dependency waits for the whole producer.
    Off,
}

impl HandoffMode {
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffMode::Auto => "auto",
            HandoffMode::On => "on",
            HandoffMode::Off => "off",
        }
    }
}

impl ostinato::Named for HandoffMode {
    const ALL: &'static [Self] = &[HandoffMode::Auto, HandoffMode::On, HandoffMode::Off];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// The most distinct producers one consumer waits on (the wrapper takes their flags as params).
pub const MAX_PRODUCERS: usize = 8;

/// The most blocks a wrapped launch may have (a wait entry holds the block in 24 bits).
pub const MAX_BLOCKS: u64 = 1 << 24;

/// What a node does in the hand-off protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// It launches as itself.
    None,
    /// It waits for its whole grid dependencies (`griddepcontrol.wait`) and publishes its blocks'
    /// flags.
    Publish,
    /// It waits for the producer blocks of `waits` and publishes its own.
    Consume(WaitTable),
}

/// A consumer's waits: per block (linear index), the producer blocks it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitTable {
    /// The producers, by the index an entry names.
    pub producers: Vec<NodeId>,
    /// `offsets[j]..offsets[j + 1]` are block `j`'s entries.
    pub offsets: Vec<u32>,
    /// `(producer index << 24) | producer block`.
    pub entries: Vec<u32>,
}

impl WaitTable {
    /// The table as the wrapper reads it: the offsets, then the entries (u32, little-endian).
    pub fn bytes(&self) -> Vec<u8> {
        self.offsets.iter().chain(&self.entries).flat_map(|w| w.to_le_bytes()).collect()
    }
    /// The (producer node, producer block) pairs block `j` waits for.
    pub fn of(&self, j: usize) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        let (a, b) = (self.offsets[j] as usize, self.offsets[j + 1] as usize);
        self.entries[a..b].iter().map(|e| (self.producers[(e >> 24) as usize], e & 0xFF_FFFF))
    }
}

/// The hand-offs a plan gets, per node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoffs {
    pub roles: Vec<Role>,
}

impl Handoffs {
    pub fn consumers(&self) -> usize {
        self.roles.iter().filter(|r| matches!(r, Role::Consume(_))).count()
    }
    pub fn is_empty(&self) -> bool {
        self.roles.iter().all(|r| *r == Role::None)
    }
}

/// The blocks of node `v`'s launch, if it is a kernel launch.
fn blocks(plan: &Plan, v: NodeId) -> Option<u64> {
    match &plan.graph().node(v).op {
        NodeOp::Kernel { launch, .. } => Some(block_count(launch.grid)),
        _ => None,
    }
}

/// Which nodes hand off under `mode`. `wrappable[v]`: node `v`'s kernel can run as a wrapper's body
/// (a certified hand-off body of CUDA C source); `consumable[v]`: and it may wait for its producers'
/// tiles (it reads nothing they write through the non-coherent path). A consumer needs: no explicit
/// ordering into it (an ordering of whole nodes), a consumable kernel, and every frontier predecessor
/// a wrappable kernel launch relating to it tile by tile, at most [`MAX_PRODUCERS`] of them. `auto`
/// hands off nowhere (see [`HandoffMode::Auto`]); `on` wherever those hold.
pub fn choose(plan: &Plan, wrappable: &[bool], consumable: &[bool], mode: HandoffMode) -> Handoffs {
    let n = plan.node_count();
    let mut roles = vec![Role::None; n];
    if mode != HandoffMode::On {
        return Handoffs { roles };
    }
    let g = plan.graph();
    let ok = |v: NodeId| wrappable.get(v.index()).copied().unwrap_or(false) && blocks(plan, v).is_some_and(|b| b < MAX_BLOCKS);
    for v in (0..n).map(|i| NodeId(i as u32)) {
        let preds = plan.hazard_preds(v);
        let Some(vb) = blocks(plan, v) else { continue };
        let consumer = consumable.get(v.index()).copied().unwrap_or(false);
        if !ok(v) || !consumer || preds.is_empty() || preds.len() > MAX_PRODUCERS || !g.node(v).after.is_empty() {
            continue;
        }
        if !preds.iter().all(|&u| ok(NodeId(u))) {
            continue;
        }
        let relations: Vec<(NodeId, TileRelation)> = preds.iter().map(|&u| (NodeId(u), plan.tile_relation(NodeId(u), v))).collect();
        if relations.iter().any(|(_, r)| matches!(r, TileRelation::Dense(_))) {
            continue;
        }
        roles[v.index()] = Role::Consume(wait_table(vb, &relations));
    }
    for v in 0..n {
        if matches!(roles[v], Role::Consume(_)) {
            for &u in plan.hazard_preds(NodeId(v as u32)) {
                if roles[u as usize] == Role::None {
                    roles[u as usize] = Role::Publish;
                }
            }
        }
    }
    Handoffs { roles }
}

/// The wait table of a consumer of `blocks` blocks over its relations (none dense): a block-local
/// producer's block `j` for block `j`, a sparse one's blocks as its relation lists them.
fn wait_table(blocks: u64, relations: &[(NodeId, TileRelation)]) -> WaitTable {
    let mut t = WaitTable { producers: relations.iter().map(|(u, _)| *u).collect(), offsets: Vec::with_capacity(blocks as usize + 1), entries: Vec::new() };
    t.offsets.push(0);
    for j in 0..blocks as usize {
        for (p, (_, r)) in relations.iter().enumerate() {
            let tag = (p as u32) << 24;
            match r {
                TileRelation::BlockLocal => t.entries.push(tag | j as u32),
                TileRelation::Sparse(d) => t.entries.extend(d.of(j).iter().map(|&i| tag | i)),
                TileRelation::Dense(_) => unreachable!("dense relations never hand off"),
            }
        }
        t.offsets.push(t.entries.len() as u32);
    }
    t
}

#[cfg(test)]
mod tests;
