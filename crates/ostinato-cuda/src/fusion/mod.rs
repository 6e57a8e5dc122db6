//! Chain fusion: runs of dependent 1-block nodes along the plan's lanes become one kernel whose block
//! `b` runs lane `b`'s run in plan order, with a `__syncthreads()` only where the plan orders two
//! bodies through bytes that different threads touch (or shared memory could be reused): an ordering
//! whose bytes each thread touches alone in both bodies (the built-ins' grid-stride loop,
//! `ostinato::builtins::thread_footprint`) is kept by the thread's own program order. The fused segment is one node of
//! the submitted graph: it pays one launch floor instead of one per node.
//!
//! Three parts, all pure: [`groups`] picks what fuses (the policy, [`FusionMode`]), [`source`]
//! generates the fused kernel's CUDA C and its signature, [`rewrite`] records the plan again with each
//! group as one node (its declared accesses the union of its members', so the planner derives its
//! edges from the same hazards). The grouping, the barrier rule and the rewrite are the core's
//! (`ostinato::fusion`, shared with the Vulkan backend); this module adds the CUDA C. The backend
//! compiles the source with NVRTC and lowers the rewritten plan as any other.
//!
//! Multi-block nodes fuse block by block where their tile relations are block-local (one kernel of
//! their grid) and by connected components where they are sparse ([`components`]: one block per
//! component, each running its members' blocks of that component in plan order).
//!
//! What may fuse is decided per node by the backend ([`Fusable`]): a kernel with CUDA C source whose
//! body is certified from its PTX as fused (`ptx::fused_body`), launched as one block; copies and fills
//! small enough for one block of the internal kernels.

pub mod build;
pub mod coherence;
pub mod components;
pub mod rewrite;
pub mod source;
pub mod stage;

pub use ostinato::fusion::{
    all_groups, barriers, barriers_with, component_groups, groups, lane_barriers, Fusable, FuseKey, FusionMode, Group, MAX_FUSED_BLOCKS,
};

#[cfg(test)]
mod tests;
