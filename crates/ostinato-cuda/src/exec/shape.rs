//! What runs: the plan an exec lowers (the user's, or with its fused groups as single nodes) with what
//! fusion and hand-offs made of it, and the accessors that report the submission a replay launches.
//! Graph mode may measure submissions of two such plans (the fused one and, where launches run side
//! by side, the unfused one: `exec/instantiate.rs`); what the accessors report is the chosen one's
//! once the exec has measured, `auto`'s before.

use std::sync::Arc;

use ostinato::{NodeId, Plan};

use super::{tune, CudaExec, Decisions};
use crate::ffi::{Graph, GraphNode};
use crate::lower::Lowering;

/// A plan the exec lowers, with what fusion and hand-offs made of it.
pub(super) struct RunShape {
    /// The user's plan, or with its fused groups as single nodes (same buffers and slots; hand-offs
    /// add buffers of the exec's own after the user's).
    pub(super) run_plan: Arc<Plan>,
    /// How many of the user's nodes run inside fused kernels.
    pub(super) fused_nodes: usize,
    /// The tiles staged in shared memory by the fused kernels: (params, bytes a block) in all.
    pub(super) staged_tiles: (usize, u64),
    /// How many nodes wait for their producers tile by tile (`crate::handoff`).
    pub(super) handoffs: usize,
    /// The user's nodes that run by themselves, with why (fusion's decision).
    pub(super) unfused: Vec<(NodeId, String)>,
    /// Each (producer, consumer) pair of `run_plan` whose consumer waits tile by tile (a trace's
    /// hand-off edges).
    pub(super) handoff_pairs: Vec<(NodeId, NodeId)>,
    /// The user's nodes each node of `run_plan` runs (a trace's units).
    pub(super) units: Vec<Vec<NodeId>>,
}

impl CudaExec {
    /// The shape of the submission a replay launches.
    pub(super) fn shape(&self) -> &RunShape {
        let s = self.shape_of.get(self.active()).copied().unwrap_or(0);
        &self.shapes[s]
    }

    /// The plan that runs: the user's plan, or with its fused groups as single nodes (the
    /// [`lowering`](Self::lowering) is this plan's; its node ids are this plan's).
    pub fn run_plan(&self) -> &Plan {
        &self.shape().run_plan
    }

    /// How many of the user's nodes run inside fused kernels (0: fusion off or nothing fused).
    pub fn fused_nodes(&self) -> usize {
        self.shape().fused_nodes
    }

    /// The tiles the fused kernels stage in shared memory (`crate::fusion::stage`): how many params,
    /// and how many bytes a block in all ((0, 0): none).
    pub fn staged_tiles(&self) -> (usize, u64) {
        self.shape().staged_tiles
    }

    /// How many nodes wait for exactly the producer blocks they need instead of whole producers
    /// (0: hand-offs off or none chosen).
    pub fn handoffs(&self) -> usize {
        self.shape().handoffs
    }

    /// Every tile map of the plan's launches, as it was accepted: verified from the PTX, or vouched
    /// (with why it could not be verified). Built-ins are checked by their stated footprints instead.
    pub fn tile_maps(&self) -> &[ostinato_cuda_code::tilemaps::Accepted] {
        &self.tile_checks.accepted
    }

    /// The lowering a replay submits: `auto`'s, or in graph mode, once the exec has measured its
    /// submissions ([`Decisions::tuned`]), the chosen one.
    pub fn lowering(&self) -> &Lowering {
        &self.lowerings[self.active()]
    }
    /// Which of `lowerings` (and `graphs`) a replay submits.
    pub(super) fn active(&self) -> usize {
        tune::active(&self.tuned)
    }
    /// Graph mode: the submitted graph and the node of each launch.
    pub(super) fn graph(&self) -> Option<&(Graph, Vec<GraphNode>)> {
        self.graphs.get(self.active())
    }
    /// What the exec's policies turned down, and why: each full edge of the graph-mode submission (its
    /// nodes the [`run_plan`](Self::run_plan)'s), each of the user's nodes that runs unfused, and what
    /// measuring the candidate submissions chose.
    pub fn decisions(&self) -> Decisions {
        let lowering = self.lowering();
        Decisions {
            full_edges: lowering.edges.iter().filter_map(|e| e.full.map(|why| (e.from, e.to, why))).collect(),
            programmatic_edges: lowering.edges.iter().filter(|e| e.programmatic).count(),
            fused_nodes: self.shape().fused_nodes,
            unfused: self.shape().unfused.clone(),
            candidates: self.graphs.len(),
            tuned: self.tuned.get().cloned(),
            setup: self.setup.clone(),
        }
    }
    /// Whether replays still measure the candidate submissions (graph mode, `exec/tune.rs`): true
    /// until the exec has chosen; false where there was nothing to measure.
    pub fn measuring(&self) -> bool {
        self.graphs.len() > 1 && self.tuned.get().is_none()
    }
}
