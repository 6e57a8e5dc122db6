//! Pure translation of a [`Plan`] into what the CUDA backend submits: one kernel launch per node (copies
//! and fills become the internal `ostinato_copy` / `ostinato_fill` kernels), the graph's dependencies
//! (one per plan edge, or the plan's lanes as chains — [`GraphShape`]), and the PDL decision per edge.
//! No driver calls: golden tests pin the output.

use std::fmt::Write as _;

use ostinato::{Arg, BufferId, KernelId, NodeId, NodeOp, Plan, SlotId};

pub mod prefetch;

use prefetch::demote_racing;
pub use prefetch::{KernelPdl, PrefetchRace};

pub use crate::dims::Dims;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PdlMode {
    /// Programmatic edges where the measured policy says they pay.
    Auto,
    /// Programmatic edges into every PDL-capable kernel.
    On,
    /// Full-completion edges only.
    Off,
}

impl PdlMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PdlMode::Auto => "auto",
            PdlMode::On => "on",
            PdlMode::Off => "off",
        }
    }
}

/// `auto`'s thresholds, measured on the H200 (docs/fences.md decision 3): an edge is programmatic only when the
/// SMALLER of its two kernels' grids has at most `AUTO_MAX_BLOCKS` blocks and, times the plan's lane
/// count, at most `AUTO_MAX_SIDE_BY_SIDE_BLOCKS`. Both were measured in the two driver states a process
/// can be in (decision 7): serial chains gained up to 512 blocks in both; at 1,024 blocks PDL lost 7-9% to the
/// plain graph in a process that never launched plainly on a second stream and gained 4% in one that
/// had, so 1,024 stays plain (never slower than the captured graph in either). Four side-by-side chains
/// gained at 128 blocks each, tied or gained 9% at 256 (by state) and lost at 512 (0.73 vs 0.48 µs).
/// An edge between a small and a large grid (decode's 1-block rmsnorm into its 2,048-block gate/up
/// gemv, and that gemv into a 32-block silu) gained: the decode stack ran 0.7-0.9% faster with those
/// edges programmatic.
pub const AUTO_MAX_BLOCKS: u64 = 512;

/// `auto`'s limit on the smaller grid times the side-by-side lanes (see [`AUTO_MAX_BLOCKS`]).
pub const AUTO_MAX_SIDE_BY_SIDE_BLOCKS: u64 = 1024;

/// A submission whose nodes all have at most this many blocks uses the early-trigger build (trigger at
/// entry); otherwise kernels trigger after their own wait, so early launches cannot cascade down the
/// chain (docs/fences.md: at 1 block the entry trigger gained 13%, at 8 to 128 blocks it lost 7-12%).
pub const EARLY_TRIGGER_MAX_BLOCKS: u64 = 4;

/// Which build of a kernel a node launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// No `griddepcontrol` (the node has no programmatic edge).
    Plain,
    /// Triggers dependents at entry.
    Early,
    /// The main PDL build (after-wait trigger by default).
    Late,
}

/// `auto`'s fan limit (docs/fences.md).
pub const AUTO_MAX_FANOUT: usize = 4;

/// Under `auto`, a plan whose widest fan is above [`AUTO_MAX_FANOUT`] and at most this is submitted in
/// the lane shape (docs/fences.md: fans of 8, 16 and 32 gained 10-15% as 4 PDL chains; at 64 the lane
/// shape gained 4% on one H200 and the expert's equivalent capture lost 6% on another).
pub const AUTO_LANES_MAX_FANOUT: usize = 32;

/// How graph mode turns the plan's orderings into graph dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphShape {
    /// One dependency per plan edge: every independent node is its own branch.
    Plan,
    /// The plan's lanes as chains (consecutive nodes of a lane ordered, as on a stream) plus the
    /// cross-lane waits the lanes kept: a wide fan becomes at most `max_lanes` chains whose links can
    /// be programmatic — the shape a skilled user captures from streams. Every plan edge is implied.
    Lanes,
}

impl GraphShape {
    pub fn as_str(self) -> &'static str {
        match self {
            GraphShape::Plan => "plan",
            GraphShape::Lanes => "lanes",
        }
    }
}

/// Which shape graph mode uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeMode {
    /// [`GraphShape::Lanes`] when PDL is allowed, the plan has more than one lane, and its widest fan
    /// is above `auto_max_fanout` and at most `auto_lanes_max_fanout`; else [`GraphShape::Plan`].
    Auto,
    Plan,
    Lanes,
}

impl ShapeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ShapeMode::Auto => "auto",
            ShapeMode::Plan => "plan",
            ShapeMode::Lanes => "lanes",
        }
    }
}

/// Investigation only: which per-node build choices replace the one build per submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixedBuilds {
    /// One build for the whole submission (the shipped policy).
    Off,
    /// Nodes without programmatic edges run the plain build (no `griddepcontrol`); the rest the one build.
    Plain,
    /// Small nodes with programmatic edges run the early-trigger build; the rest the one build.
    Early,
    /// Both: plain, early-trigger or after-wait per node.
    All,
}

/// The per-edge PDL policy. The data behind `auto` is in `docs/fences.md`; override it here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdlPolicy {
    pub mode: PdlMode,
    /// Under `auto`, an edge is programmatic only when one of its kernels (the smaller grid) launches at
    /// most this many blocks...
    pub auto_max_blocks: u64,
    /// ...and at most this many times the plan's side-by-side lane count.
    pub auto_max_side_by_side_blocks: u64,
    /// Under `auto`, an edge is programmatic only when its producer has at most this many successors
    /// and its consumer at most this many predecessors (wide fans of early-launched waiters measured
    /// to lose).
    pub auto_max_fanout: usize,
    /// The graph shape (graph mode).
    pub shape: ShapeMode,
    /// Under `auto` shape: the widest fan still submitted in the lane shape.
    pub auto_lanes_max_fanout: usize,
    /// Investigation only: pick builds per node instead of one build per submission. Measured no
    /// faster on decode (docs/fences.md), so it is off by default. (Its wrong decode results in earlier
    /// runs came from full edges the driver had made programmatic when both types went in one call.)
    pub mixed_builds: MixedBuilds,
}

impl Default for PdlPolicy {
    fn default() -> Self {
        PdlPolicy {
            mode: PdlMode::Auto,
            auto_max_blocks: AUTO_MAX_BLOCKS,
            auto_max_side_by_side_blocks: AUTO_MAX_SIDE_BY_SIDE_BLOCKS,
            auto_max_fanout: AUTO_MAX_FANOUT,
            shape: ShapeMode::Auto,
            auto_lanes_max_fanout: AUTO_LANES_MAX_FANOUT,
            mixed_builds: MixedBuilds::Off,
        }
    }
}

impl PdlPolicy {
    pub fn new(mode: PdlMode) -> Self {
        PdlPolicy { mode, ..Self::default() }
    }
    /// Whether an ordering producer → consumer may be programmatic. `fan` is the larger of the
    /// producer's successor count and the consumer's predecessor count; `width` is how many lanes of
    /// the plan run side by side (early-launched waiters of every lane compete for the same SMs).
    pub fn programmatic(&self, producer: &Dims, consumer: &Dims, consumer_capable: bool, fan: usize, width: usize) -> bool {
        self.full_because(producer, consumer, consumer_capable, fan, width).is_none()
    }
    /// Why the policy makes the ordering producer → consumer a full dependency (`None`: it may be
    /// programmatic); the arguments are [`PdlPolicy::programmatic`]'s.
    pub fn full_because(&self, producer: &Dims, consumer: &Dims, consumer_capable: bool, fan: usize, width: usize) -> Option<FullEdge> {
        let w = width.max(1) as u64;
        if !consumer_capable {
            return Some(FullEdge::NotCapable);
        }
        match self.mode {
            PdlMode::Off => Some(FullEdge::PdlOff),
            PdlMode::On => None,
            PdlMode::Auto => {
                let smaller = producer.blocks().min(consumer.blocks());
                if smaller > self.auto_max_blocks {
                    Some(FullEdge::Blocks { blocks: smaller, limit: self.auto_max_blocks })
                } else if smaller * w > self.auto_max_side_by_side_blocks {
                    Some(FullEdge::SideBySide { blocks: smaller, lanes: w, limit: self.auto_max_side_by_side_blocks })
                } else if fan > self.auto_max_fanout {
                    Some(FullEdge::Fanout { fan, limit: self.auto_max_fanout })
                } else {
                    None
                }
            }
        }
    }
}

/// Why an edge of a submission is a full dependency (its consumer starts after its producer
/// completes) rather than programmatic: what the policy and the kernels' code decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullEdge {
    /// The consumer's code is not certified to wait (`griddepcontrol.wait`) before it touches memory.
    NotCapable,
    /// PDL is off.
    PdlOff,
    /// An end is a child graph (a collective, captured work): it neither waits nor triggers.
    ChildGraph,
    /// `auto`: the smaller of the two grids has more blocks than the limit.
    Blocks { blocks: u64, limit: u64 },
    /// `auto`: the smaller grid times the lanes that run side by side passes the limit.
    SideBySide { blocks: u64, lanes: u64, limit: u64 },
    /// `auto`: the producer has more successors, or the consumer more predecessors, than the limit.
    Fanout { fan: usize, limit: usize },
    /// The consumer reads before its wait what a node that may still run writes (`prefetch`).
    PrefetchRace,
}

impl std::fmt::Display for FullEdge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FullEdge::NotCapable => write!(f, "the consumer's code does not wait for its dependencies (not PDL-capable)"),
            FullEdge::PdlOff => write!(f, "PDL off"),
            FullEdge::ChildGraph => write!(f, "an end is a child graph (it neither waits nor triggers)"),
            FullEdge::Blocks { blocks, limit } => write!(f, "the smaller grid has {blocks} blocks, more than auto's {limit}"),
            FullEdge::SideBySide { blocks, lanes, limit } => {
                write!(f, "{blocks} blocks on each of {lanes} side-by-side lanes, more than auto's {limit} in all")
            }
            FullEdge::Fanout { fan, limit } => write!(f, "a fan of {fan}, wider than auto's {limit}"),
            FullEdge::PrefetchRace => write!(f, "the consumer reads before its wait what a node that may still run writes"),
        }
    }
}

/// What a node calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callee {
    Kernel(KernelId),
    Copy,
    Fill,
    /// A collective: not a kernel of ours; its edges are full. The exec refuses it (no NCCL lowering).
    Collective,
}

/// One kernel argument value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgValue {
    /// Device address of `offset` bytes into root allocation `root`.
    Pointer { root: BufferId, offset: u64 },
    /// Raw little-endian bits of a scalar.
    Bits(u64),
    /// The current value of a slot.
    Slot(SlotId),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLaunch {
    pub node: NodeId,
    pub callee: Callee,
    pub dims: Dims,
    pub args: Vec<ArgValue>,
    /// Graph mode: the build this node launches.
    pub variant: Variant,
    /// Eager mode: the build this node launches.
    pub eager_variant: Variant,
    /// The node's code executes `griddepcontrol.wait` before touching memory (in its PDL builds).
    pub pdl_capable: bool,
    /// The node runs as a child graph (a collective's captured call, captured work): it neither waits
    /// nor triggers, so its edges are full.
    pub child_graph: bool,
}

impl NodeLaunch {
    /// Graph mode: the node's launched build waits for its programmatic predecessors, so a predecessor
    /// that triggers early cannot release it too soon.
    pub fn waits(&self) -> bool {
        self.pdl_capable && self.variant != Variant::Plain
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphEdge {
    pub from: NodeId,
    pub to: NodeId,
    pub programmatic: bool,
    /// Why the edge is full (`None` exactly when it is programmatic).
    pub full: Option<FullEdge>,
}

/// The full translation of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lowering {
    pub launches: Vec<NodeLaunch>,
    /// The shape of `edges` (graph mode).
    pub shape: GraphShape,
    pub edges: Vec<GraphEdge>,
    /// Eager mode: launch node `i` with programmatic stream serialization (relaxing its wait on the
    /// previous node of its lane).
    pub eager_pdl: Vec<bool>,
}

const COPY_BLOCK: u32 = 256;

/// The launch of the internal copy/fill kernel over `words` 4-byte words.
pub fn helper_dims(words: u64) -> Dims {
    let blocks = words.div_ceil(COPY_BLOCK as u64).clamp(1, 1024) as u32;
    Dims { grid: [blocks, 1, 1], block: [COPY_BLOCK, 1, 1], shared: 0 }
}

/// Translates `plan` for kernels that read nothing before their wait. `kernel_pdl[k]` says whether
/// kernel `k`'s implementation is PDL-capable; `helpers_pdl` the same for the internal copy/fill kernels.
pub fn lower(plan: &Plan, kernel_pdl: &[bool], helpers_pdl: bool, policy: PdlPolicy) -> Lowering {
    let kernels: Vec<KernelPdl> = kernel_pdl.iter().map(|&c| KernelPdl::plain(c)).collect();
    lower_with(plan, &kernels, helpers_pdl, policy).unwrap_or_else(|race| unreachable!("kernels that read nothing before their wait cannot race: {race}"))
}

/// Translates `plan`, with what each kernel reads before its wait: a programmatic edge on which such a
/// prefetch could race with a running writer becomes a full edge, or, into a kernel the user declared
/// PDL-safe, is refused ([`prefetch`]).
pub fn lower_with(plan: &Plan, kernels: &[KernelPdl], helpers_pdl: bool, policy: PdlPolicy) -> Result<Lowering, PrefetchRace> {
    let mut launches = node_launches(plan, kernels, helpers_pdl);
    let shape = graph_shape(plan, policy);
    // One build for the whole submission, from the configurations measured correct and fast
    // (docs/fences.md): no programmatic edge at all → the plain build (griddepcontrol costs large grids
    // microseconds); every node small → the early-trigger build; otherwise the main (after-wait) build.
    // Kernels that are not PDL-capable keep their one build, and every edge into them is full: a full
    // edge waits for its producer's completion whatever the producer triggers (docs/fences.md decision 4).
    // Per-node builds for our kernels stay an investigation option (`mixed_builds`): no faster on decode.
    let all_small = launches.iter().all(|l| l.dims.blocks() <= EARLY_TRIGGER_MAX_BLOCKS);
    let build = |any_prog: bool| match (any_prog, all_small) {
        (false, _) => Variant::Plain,
        (true, true) => Variant::Early,
        (true, false) => Variant::Late,
    };
    // Pre-wait reads: demote the programmatic edges on which a prefetch could race (`prefetch`), under
    // the build each edge set would launch. Demotion only shrinks what may run early, so a build chosen
    // after it stays safe.
    let kernel_of: Vec<Option<usize>> = launches.iter().map(|l| if let Callee::Kernel(k) = l.callee { Some(k.index()) } else { None }).collect();
    let variants = |es: &[GraphEdge]| {
        let b = build(es.iter().any(|e| e.programmatic));
        launches.iter().map(|l| if l.pdl_capable { b } else { Variant::Plain }).collect::<Vec<_>>()
    };
    let mut lane_links = decide_edges(plan, &launches, policy, &lane_shape_edges(plan));
    demote_racing(plan, kernels, &kernel_of, &variants(&lane_links), &mut lane_links)?;
    let eager_pdl = eager_programmatic(plan, &lane_links);
    let edges = match shape {
        GraphShape::Plan => {
            let mut edges = decide_edges(plan, &launches, policy, &plan.edges().iter().map(|e| (e.from, e.to)).collect::<Vec<_>>());
            demote_racing(plan, kernels, &kernel_of, &variants(&edges), &mut edges)?;
            edges
        }
        GraphShape::Lanes => lane_links,
    };
    let graph_build = build(edges.iter().any(|e| e.programmatic));
    let eager_build = build(eager_pdl.iter().any(|p| *p));
    for l in launches.iter_mut() {
        // A kernel that is not PDL-capable has one build; its label says so.
        l.variant = if l.pdl_capable { graph_build } else { Variant::Plain };
        l.eager_variant = if l.pdl_capable { eager_build } else { Variant::Plain };
    }
    if policy.mixed_builds != MixedBuilds::Off && graph_build != Variant::Plain {
        mix_builds(policy.mixed_builds, &mut launches, &edges);
    }
    Ok(Lowering { launches, shape, edges, eager_pdl })
}

/// Each node as a launch: its callee, geometry, argument values, and whether it may wait on a
/// programmatic edge (builds are chosen later).
fn node_launches(plan: &Plan, kernels: &[KernelPdl], helpers_pdl: bool) -> Vec<NodeLaunch> {
    let g = plan.graph();
    let ptr = |s: &ostinato::Slice| {
        let (root, start, _) = g.root_extent(*s);
        ArgValue::Pointer { root, offset: start }
    };
    let mut launches = Vec::with_capacity(plan.node_count());
    for (i, node) in g.nodes().iter().enumerate() {
        let (callee, dims, args, pdl, child_graph) = match &node.op {
            NodeOp::Kernel { kernel, launch, args } => {
                let args = args
                    .iter()
                    .map(|a| match a {
                        Arg::Buffer(s) => ptr(s),
                        Arg::Scalar(v) => ArgValue::Bits(v.bits),
                        Arg::Slot(s) => ArgValue::Slot(*s),
                        Arg::Whole(_) => unreachable!("the graph resolves whole-buffer args when recording"),
                    })
                    .collect();
                let dims = Dims { grid: launch.grid, block: launch.block, shared: launch.shared_bytes };
                let k = kernels.get(kernel.index());
                (Callee::Kernel(*kernel), dims, args, k.is_some_and(|k| k.capable && !k.child_graph), k.is_some_and(|k| k.child_graph))
            }
            NodeOp::Copy { src, dst } => {
                (Callee::Copy, helper_dims(src.len.div_ceil(4)), vec![ptr(dst), ptr(src), ArgValue::Bits(src.len)], helpers_pdl, false)
            }
            NodeOp::Fill { dst, value } => {
                (Callee::Fill, helper_dims(dst.len / 4), vec![ptr(dst), ArgValue::Bits(*value as u64), ArgValue::Bits(dst.len / 4)], helpers_pdl, false)
            }
            NodeOp::Collective { .. } => (Callee::Collective, Dims { grid: [1, 1, 1], block: [1, 1, 1], shared: 0 }, Vec::new(), false, true),
        };
        let (variant, eager_variant) = (Variant::Plain, Variant::Plain);
        launches.push(NodeLaunch { node: NodeId(i as u32), callee, dims, args, variant, eager_variant, pdl_capable: pdl, child_graph });
    }
    launches
}

/// The graph's shape under `policy`: `auto` submits the lane shape for plans with several lanes whose
/// widest fan lies in the band where it measured faster (and only where PDL may be used).
fn graph_shape(plan: &Plan, policy: PdlPolicy) -> GraphShape {
    match policy.shape {
        ShapeMode::Plan => GraphShape::Plan,
        ShapeMode::Lanes => GraphShape::Lanes,
        ShapeMode::Auto => {
            let widest_fan = widest_fan(plan);
            let pdl_allowed = policy.mode != PdlMode::Off;
            let fan_in_band = widest_fan > policy.auto_max_fanout && widest_fan <= policy.auto_lanes_max_fanout;
            if pdl_allowed && fan_in_band && plan.lanes().count() > 1 {
                GraphShape::Lanes
            } else {
                GraphShape::Plan
            }
        }
    }
}

/// The widest fan of `plan`: the most successors or predecessors of one node, where the submission's
/// start fans out to the roots and its end fans in from the sinks. Ten independent nodes are a fan of
/// ten: as ten graph branches each root pays the driver's per-branch launch cost (docs/fences.md
/// decision 6), as lanes at most four chains do.
fn widest_fan(plan: &Plan) -> usize {
    let nodes = (0..plan.node_count()).map(|i| NodeId(i as u32));
    let roots = nodes.clone().filter(|&n| plan.preds(n).is_empty()).count();
    let sinks = nodes.clone().filter(|&n| plan.succs(n).is_empty()).count();
    nodes.map(|n| plan.succs(n).len().max(plan.preds(n).len())).chain([roots, sinks]).max().unwrap_or(0)
}

/// The submitted edges `pairs`, each programmatic where `policy` says it pays (its fan counted within
/// `pairs`).
fn decide_edges(plan: &Plan, launches: &[NodeLaunch], policy: PdlPolicy, pairs: &[(NodeId, NodeId)]) -> Vec<GraphEdge> {
    let (mut outs, mut ins) = (vec![0usize; plan.node_count()], vec![0usize; plan.node_count()]);
    for (u, v) in pairs {
        outs[u.index()] += 1;
        ins[v.index()] += 1;
    }
    let lanes = plan.lanes().count();
    pairs
        .iter()
        .map(|&(from, to)| {
            let (u, v) = (from.index(), to.index());
            let fan = outs[u].max(ins[v]);
            // A child graph (a collective, captured work) neither waits nor triggers: its edges are full.
            let full = if launches[u].child_graph || launches[v].child_graph {
                Some(FullEdge::ChildGraph)
            } else {
                policy.full_because(&launches[u].dims, &launches[v].dims, launches[v].pdl_capable, fan, lanes)
            };
            GraphEdge { from, to, programmatic: full.is_none(), full }
        })
        .collect()
}

/// Eager mode submits the lane shape itself: a node launches with programmatic serialization when the
/// link from its lane predecessor is programmatic there and it has no cross-lane wait.
fn eager_programmatic(plan: &Plan, lane_links: &[GraphEdge]) -> Vec<bool> {
    let lanes = plan.lanes();
    let mut eager_pdl = vec![false; plan.node_count()];
    for e in lane_links {
        if e.programmatic && lanes.lane_of(e.from) == lanes.lane_of(e.to) && lanes.waits(e.to).is_empty() {
            eager_pdl[e.to.index()] = true;
        }
    }
    eager_pdl
}

/// Investigation only: per-node builds (plain where a node has no programmatic edge, early-trigger
/// where it is small and has one).
fn mix_builds(mixed: MixedBuilds, launches: &mut [NodeLaunch], edges: &[GraphEdge]) {
    let mut prog = vec![false; launches.len()];
    for e in edges.iter().filter(|e| e.programmatic) {
        prog[e.from.index()] = true;
        prog[e.to.index()] = true;
    }
    let (plain, early) = match mixed {
        MixedBuilds::Plain => (true, false),
        MixedBuilds::Early => (false, true),
        _ => (true, true),
    };
    for (i, l) in launches.iter_mut().enumerate().filter(|(_, l)| l.pdl_capable) {
        if !prog[i] && plain {
            l.variant = Variant::Plain;
        } else if prog[i] && early && l.dims.blocks() <= EARLY_TRIGGER_MAX_BLOCKS {
            l.variant = Variant::Early;
        }
    }
}

/// The lane shape's dependencies: consecutive nodes of each lane, then each node's cross-lane waits.
pub fn lane_shape_edges(plan: &Plan) -> Vec<(NodeId, NodeId)> {
    let lanes = plan.lanes();
    let mut out = Vec::new();
    for lane in lanes.all() {
        out.extend(lane.windows(2).map(|w| (w[0], w[1])));
    }
    for &v in plan.order() {
        out.extend(lanes.waits(v).iter().map(|&w| (w, v)));
    }
    out
}

impl Lowering {
    /// A stable text form, for golden tests and `ostinato plan --explain --backend cuda`.
    pub fn describe(&self, plan: &Plan) -> String {
        let g = plan.graph();
        let mut s = String::new();
        let _ = writeln!(s, "shape {}", self.shape.as_str());
        for l in &self.launches {
            let name = match l.callee {
                Callee::Kernel(k) => g.kernel(k).name.as_str(),
                Callee::Copy => "ostinato_copy",
                Callee::Fill => "ostinato_fill",
                Callee::Collective => "collective",
            };
            let args: Vec<String> = l
                .args
                .iter()
                .map(|a| match a {
                    ArgValue::Pointer { root, offset } => format!("&{}+{offset}", g.buffer(*root).name),
                    ArgValue::Bits(b) => format!("{b}"),
                    ArgValue::Slot(s) => format!("${}", g.slots()[s.index()].name),
                })
                .collect();
            let v = match l.variant {
                Variant::Plain => "",
                Variant::Early => " [pdl-early]",
                Variant::Late => " [pdl]",
            };
            if let NodeOp::Collective { op, dtype, send, .. } = &g.node(l.node).op {
                let _ = writeln!(s, "collective n{} {} {} over {} ranks (NCCL)", l.node, op.as_str(), dtype.as_str(), send.len());
                continue;
            }
            let _ = writeln!(s, "kernel n{} {name}<<<{:?},{:?},{}>>>({}){v}", l.node, l.dims.grid, l.dims.block, l.dims.shared, args.join(", "));
        }
        for e in &self.edges {
            let _ = writeln!(s, "edge n{} -> n{}{}", e.from, e.to, if e.programmatic { " programmatic" } else { "" });
        }
        s
    }
}

#[cfg(test)]
mod tests;
