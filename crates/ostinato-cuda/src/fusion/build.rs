//! Fusion on a device: which nodes may fuse (from their kernels' certified bodies), the groups the
//! policy picks, each group's kernel generated and compiled with NVRTC in the three PDL builds, and
//! the rewritten plan the exec lowers in place of the user's.

use std::sync::Arc;

use ostinato::{NodeOp, Plan};

use super::components::{generate_components, VIEW_BYTES_PER_THREAD};
use super::source::{generate, Staging, FUSED_ENTRY};
use super::stage::{Bodies, STAGE_BUDGET_BYTES};
use super::{all_groups, barriers, lane_barriers, Fusable, FuseKey, FusionMode, Group};
use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::lower::{helper_dims, Dims};
use crate::module::{CudaKernel, FusionBody, LoadedModule, ModuleSource};
use ostinato_cuda_code::PdlTrigger;

/// A plan with its fused groups as single nodes, and the kernels to bind it with (the user's, then
/// one per group).
pub struct FusedPlan {
    pub plan: Plan,
    pub kernels: Vec<CudaKernel>,
    /// How many groups, and how many of the user's nodes they run.
    pub groups: usize,
    pub fused_nodes: usize,
    /// The tiles staged in shared memory, per group: (fused param, bytes a block).
    pub staged: Vec<Vec<(usize, u64)>>,
    /// The user's nodes each node of `plan` runs (a trace's units).
    pub units: Vec<Vec<ostinato::NodeId>>,
    /// How many of the groups run multi-block launches side by side (one launch of several
    /// independent kernels' blocks).
    pub side_by_side: usize,
}

/// The body node `v` runs when fused, where it may fuse: a kernel certified as a body launched as one
/// block, or a copy or fill that the internal kernels do in one block; else why it may not.
fn body_of<'a>(
    plan: &Plan,
    v: usize,
    kernels: &'a [CudaKernel],
    helpers: (&'a CudaKernel, &'a CudaKernel),
) -> std::result::Result<(&'a Arc<FusionBody>, Fusable), String> {
    let g = plan.graph();
    let certified = |k: &'a CudaKernel| {
        k.fusion.as_ref().ok_or_else(|| match &k.fusion_refusal {
            Some(why) => format!("kernel `{}` is no fused body: {why}", k.name),
            None => format!("kernel `{}` is not declared fusable", k.name),
        })
    };
    let (body, dims) = match &g.nodes()[v].op {
        NodeOp::Kernel { kernel, launch, .. } => {
            (certified(&kernels[kernel.index()])?, Dims { grid: launch.grid, block: launch.block, shared: launch.shared_bytes })
        }
        NodeOp::Copy { src, .. } => (certified(helpers.0)?, helper_dims(src.len.div_ceil(4))),
        NodeOp::Fill { dst, .. } => (certified(helpers.1)?, helper_dims(dst.len / 4)),
        NodeOp::Collective { .. } => return Err("a collective runs as NCCL's call, not as a body".into()),
    };
    // A multi-block node fuses with neighbours of its grid where the plan's tile relations are
    // block-local (`ostinato::fusion::groups`): its body runs as its own block `b` inside fused block
    // `b`, with the real grid. The body's certificate (no exit, no grid dependency wait, no grid or
    // cluster register but through `blockIdx`/`gridDim`) holds for either view; a body with a block
    // barrier fuses only alone in its block (`Fusable::alone`).
    let (block, dynamic) = (dims.block, dims.shared);
    let key = FuseKey { block, grid: dims.grid, source: Arc::as_ptr(&body.source) as *const u8 as usize };
    Ok((body, Fusable { key, uses_shared: body.body.uses_shared || dynamic > 0, alone: body.body.block_barrier.is_some() }))
}

/// What fusion made of a plan: the fused plan (`None`: nothing fused), and why each of the user's
/// nodes that runs by itself does (in node order).
pub struct Fusion {
    pub fused: Option<FusedPlan>,
    pub unfused: Vec<(ostinato::NodeId, String)>,
}

/// Fuses `plan` under `mode` (see [`Fusion`]). A group whose shared memory would pass the block's
/// limit is left unfused under `auto` and refused under `on`. With `verified` (whether node `v`'s tile
/// map on its kernel param `p` is verified, not vouched), block-local groups stage the tiles
/// [`super::stage`] allows in shared memory; `None` stages nothing.
pub fn fuse(
    device: &Device,
    trigger: PdlTrigger,
    plan: &Plan,
    kernels: &[CudaKernel],
    helpers: (&CudaKernel, &CudaKernel),
    mode: FusionMode,
    verified: Option<&dyn Fn(ostinato::NodeId, usize) -> bool>,
) -> Result<Fusion> {
    let n = plan.node_count();
    if mode == FusionMode::Off {
        return Ok(Fusion { fused: None, unfused: (0..n).map(|v| (ostinato::NodeId(v as u32), "fusion off".to_string())).collect() });
    }
    let checked: Vec<std::result::Result<(&Arc<FusionBody>, Fusable), String>> = (0..n).map(|v| body_of(plan, v, kernels, helpers)).collect();
    let mut why: Vec<Option<String>> = checked.iter().map(|b| b.as_ref().err().cloned()).collect();
    let bodies: Vec<Option<(&Arc<FusionBody>, Fusable)>> = checked.into_iter().map(|b| b.ok()).collect();
    let mut fusable: Vec<Option<Fusable>> = bodies.iter().map(|b| b.map(|(_, f)| f)).collect();
    // A fused kernel's static shared memory is at most the default a block gets; with its dynamic
    // shared memory, at most what the opt-in gives (the exec sets the opt-in where it is needed).
    let limits = device.info().limits;
    let (static_limit, limit) = (limits.max_shared_bytes as u64, limits.max_shared_opt_in as u64);
    let g = plan.graph();
    // A body reading through the non-coherent path what an earlier body of its group writes stays
    // unfused (`auto`) or is refused (`on`); each round unfuses one node, so this ends.
    let candidates = loop {
        let gs = all_groups(plan, &fusable, mode);
        match gs.iter().find_map(|gr| super::coherence::conflict(plan, gr, &bodies)) {
            None => break gs,
            Some(c) if mode == FusionMode::On => return Err(CudaError::Unsupported { op: "fusion", reason: c.describe(plan) }),
            Some(c) => {
                why[c.reader.index()] = Some("it reads through the non-coherent path what an earlier body of its group writes".into());
                fusable[c.reader.index()] = None;
            }
        }
    };
    let mut picked: Vec<(Group, u64)> = Vec::new();
    for gr in candidates {
        // Static shared memory: once per distinct body; dynamic: the largest member's.
        let mut entries: Vec<&str> = Vec::new();
        // A group of components keeps each thread's view of the block its body runs as (lanes side
        // by side work theirs out in registers).
        let threads: u64 = gr.key.block.iter().map(|&d| u64::from(d)).product();
        let mut shared = if gr.components.is_some() { VIEW_BYTES_PER_THREAD * threads } else { 0 };
        let mut dynamic = 0u64;
        for v in gr.nodes() {
            let (body, _) = bodies[v.index()].expect("groups hold fusable nodes");
            if !entries.contains(&body.entry.as_str()) {
                entries.push(&body.entry);
                shared += body.body.static_shared_bytes;
            }
            if let NodeOp::Kernel { launch, .. } = &g.node(v).op {
                dynamic = dynamic.max(launch.shared_bytes as u64);
            }
        }
        if shared > static_limit || shared + dynamic > limit {
            if mode == FusionMode::On {
                let first = gr.lanes[0][0];
                return Err(CudaError::Unsupported {
                    op: "fusion",
                    reason: format!(
                        "the fused kernel of {} nodes from n{first} ({}) needs {} bytes of shared memory ({shared} static), more than a block has ({static_limit} static, {limit} in all)",
                        gr.len(),
                        entries.join(", "),
                        shared + dynamic
                    ),
                });
            }
            for v in gr.nodes() {
                why[v.index()] = Some(format!("its group of {} would need {} bytes of shared memory, more than a block has", gr.len(), shared + dynamic));
            }
            continue;
        }
        picked.push((gr, (static_limit - shared).min(limit - shared - dynamic)));
    }
    let mut grouped = vec![false; n];
    for (gr, _) in &picked {
        for v in gr.nodes() {
            grouped[v.index()] = true;
        }
    }
    let unfused: Vec<(ostinato::NodeId, String)> = (0..n)
        .filter(|&v| !grouped[v])
        .map(|v| {
            let alone = || match mode {
                FusionMode::Auto => "no neighbour to fuse with (auto fuses dependent runs on a lane, runs waiting for and feeding the same nodes, and single launches of one kernel waiting for the same nodes)",
                _ => "no fusable neighbour on its lane",
            };
            (ostinato::NodeId(v as u32), why[v].clone().unwrap_or_else(|| alone().to_string()))
        })
        .collect();
    if picked.is_empty() {
        return Ok(Fusion { fused: None, unfused });
    }
    // What the bodies allow staging: plain access to a param with a verified map, every access
    // attributed.
    let body = |v: ostinato::NodeId| bodies[v.index()].map(|(b, _)| &b.body);
    let plain =
        |v: ostinato::NodeId, p: usize| verified.is_some_and(|verified| verified(v, p)) && body(v).is_some_and(|b| !b.unplain.iter().any(|(q, _)| *q == p));
    let attributed = |v: ostinato::NodeId| body(v).is_some_and(|b| b.unattributed.is_none());
    let mut fused = Vec::with_capacity(picked.len());
    for (i, (gr, budget)) in picked.iter().enumerate() {
        let (body, _) = bodies[gr.lanes[0][0].index()].expect("groups hold fusable nodes");
        let uses_shared = |v: ostinato::NodeId| fusable[v.index()].is_some_and(|f| f.uses_shared);
        let entry = |k: ostinato::KernelId| kernels[k.index()].fusion.as_ref().map_or_else(|| g.kernel(k).name.clone(), |b| b.entry.clone());
        if gr.components.is_some() {
            let bars = barriers(plan, &gr.lanes[0], uses_shared);
            fused.push(generate_components(plan, gr, &format!("ostinato_fused_{i}"), &body.source, &bars, &uses_shared, &entry));
            continue;
        }
        // No barrier between thread-local bodies, whatever the grid: with the loop of repeated calls
        // unrolled, an H200 ran 941-deep `add_one` chains of 1,024 and 8,192 blocks 10% and 7% faster
        // without them (with the loop rolled they had run slower there; docs/tiles.md, "Barriers
        // between bodies").
        // A built-in's CUDA C runs the kernel header's grid-stride loop over the linear thread index.
        let builtin = |k: ostinato::KernelId| kernels[k.index()].build.builtin.then_some(kernels[k.index()].entry.as_str());
        let bars = lane_barriers(plan, gr, uses_shared, builtin);
        let staging = Staging { bodies: Bodies { plain: &plain, attributed: &attributed }, budget: (*budget).min(STAGE_BUDGET_BYTES) };
        let staging = verified.is_some().then_some(&staging);
        fused.push(generate(plan, gr, &format!("ostinato_fused_{i}"), &body.source, &bars, &entry, staging));
    }
    let picked: Vec<Group> = picked.into_iter().map(|(gr, _)| gr).collect();
    let rewritten = super::rewrite::rewrite(plan, &picked, &fused).map_err(|reason| CudaError::Internal { op: "fusion", reason })?;
    let fused_plan = Plan::compile_with(&rewritten.graph, plan.options())
        .map_err(|e| CudaError::Internal { op: "fusion", reason: format!("planning the fused plan: {e}") })?;
    let mut all = kernels.to_vec();
    for f in &fused {
        let src = ModuleSource::CudaC { name: f.sig.name.clone(), source: f.source.clone() };
        let load = |t: PdlTrigger| LoadedModule::load(device, &src, t).and_then(|m| m.kernel(FUSED_ENTRY, &f.sig, None));
        let main = load(trigger)?;
        let (early, plain) = (load(PdlTrigger::AtEntry)?, load(PdlTrigger::Disabled)?);
        all.push(main.with_variants(Some(&early), Some(&plain)));
    }
    let fused_nodes = picked.iter().map(Group::len).sum();
    let side_by_side = picked.iter().filter(|gr| gr.is_side_by_side()).count();
    let staged = fused.iter().map(|f| f.staged.iter().map(|t| (t.param, t.len)).collect()).collect();
    let units = ostinato::trace::units_from(&rewritten.node_of, fused_plan.node_count());
    Ok(Fusion { fused: Some(FusedPlan { plan: fused_plan, kernels: all, groups: picked.len(), fused_nodes, staged, units, side_by_side }), unfused })
}
