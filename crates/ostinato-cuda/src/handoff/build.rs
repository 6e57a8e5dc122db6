//! Hand-offs on a device: which nodes hand off (from their kernels' certified bodies and the plan's
//! tile relations), the wrappers compiled with NVRTC, and the plan recorded again with each such node
//! launching its wrapper, its flags and wait table as buffers of the engine's own (so the planner sees
//! every access, and the exec allocates and frees them as it does the user's).

use std::collections::BTreeMap;
use std::sync::Arc;

use ostinato::{Arg, BufferId, Graph, KernelId, NodeId, NodeOp, Plan, TileMap};

use super::source::{generate, wrapper_entry, wrapper_sig, Wrapper};
use super::{choose, HandoffMode, Role};
use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::module::{CudaKernel, LoadedModule, ModuleSource};
use ostinato_cuda_code::PdlTrigger;

/// A plan whose hand-off nodes launch their wrappers, the kernels to bind it with, and the bytes each
/// internal buffer starts with.
pub struct HandoffPlan {
    pub plan: Plan,
    pub kernels: Vec<CudaKernel>,
    /// Internal buffers and their contents at instantiate (flags zero, wait tables).
    pub inits: Vec<(BufferId, Vec<u8>)>,
    pub consumers: usize,
    pub publishers: usize,
    /// Every (producer, consumer) pair a consumer waits on tile by tile, by node id (the rewritten
    /// plan keeps the user's node ids), for the trace's hand-off edges.
    pub pairs: Vec<(NodeId, NodeId)>,
}

/// One body source and the wrappers (with their kernel ids in the rewritten graph) of its kernels.
type SourceWrappers = (Arc<str>, Vec<(KernelId, Wrapper)>);

/// A buffer name of the engine's own, unused by the graph.
fn internal_name(g: &Graph, base: String) -> String {
    let mut name = base.clone();
    let mut i = 0;
    while g.buffer_by_name(&name).is_some() {
        i += 1;
        name = format!("{base}_{i}");
    }
    name
}

/// Rewrites `plan` (its kernels bound as `kernels`) for the hand-offs `mode` allows; `None` where no
/// node hands off.
pub fn handoff(device: &Device, trigger: PdlTrigger, plan: &Plan, kernels: &[CudaKernel], mode: HandoffMode) -> Result<Option<HandoffPlan>> {
    let g = plan.graph();
    let wrappable: Vec<bool> = g
        .nodes()
        .iter()
        .map(|n| match &n.op {
            NodeOp::Kernel { kernel, .. } => kernels.get(kernel.index()).is_some_and(|k| k.fusion.is_some() && k.captured.is_none()),
            _ => false,
        })
        .collect();
    let chosen = choose(plan, &wrappable, mode);
    if chosen.is_empty() {
        return Ok(None);
    }
    let internal = |what: &str| CudaError::Internal { op: "hand-off", reason: what.to_string() };
    let mut out = g.without_nodes();
    // Flags per wrapped node, a wait table per consumer.
    let mut flags: BTreeMap<NodeId, BufferId> = BTreeMap::new();
    let mut waits: BTreeMap<NodeId, BufferId> = BTreeMap::new();
    let mut inits = Vec::new();
    for (v, role) in chosen.roles.iter().enumerate() {
        let v = NodeId(v as u32);
        let NodeOp::Kernel { launch, .. } = &g.node(v).op else { continue };
        if *role == Role::None {
            continue;
        }
        let blocks = ostinato::tiles::block_count(launch.grid);
        let name = internal_name(g, format!("__ostinato_flags_n{v}"));
        let b = out.add_buffer(name, 4 * blocks).map_err(|e| internal(&e.to_string()))?;
        inits.push((b, vec![0u8; 4 * blocks as usize]));
        flags.insert(v, b);
        if let Role::Consume(t) = role {
            let bytes = t.bytes();
            let name = internal_name(g, format!("__ostinato_waits_n{v}"));
            let b = out.add_buffer(name, bytes.len() as u64).map_err(|e| internal(&e.to_string()))?;
            inits.push((b, bytes));
            waits.insert(v, b);
        }
    }
    // One wrapper per (kernel, producer count); one module per body source.
    let mut wrapped: BTreeMap<(KernelId, usize), KernelId> = BTreeMap::new();
    let mut by_source: BTreeMap<usize, SourceWrappers> = BTreeMap::new();
    for (v, role) in chosen.roles.iter().enumerate() {
        let NodeOp::Kernel { kernel, .. } = &g.nodes()[v].op else { continue };
        let producers = match role {
            Role::None => continue,
            Role::Publish => 0,
            Role::Consume(t) => t.producers.len(),
        };
        if wrapped.contains_key(&(*kernel, producers)) {
            continue;
        }
        let body = kernels[kernel.index()].fusion.as_ref().ok_or_else(|| internal("a wrapped kernel without a body"))?;
        let sig = wrapper_sig(g.kernel(*kernel), producers);
        let id = out.add_kernel(sig.clone()).map_err(|e| internal(&format!("wrapper of `{}`: {e}", g.kernel(*kernel).name)))?;
        wrapped.insert((*kernel, producers), id);
        let key = Arc::as_ptr(&body.source) as *const u8 as usize;
        let entry = by_source.entry(key).or_insert_with(|| (body.source.clone(), Vec::new()));
        entry.1.push((id, Wrapper { entry: body.entry.clone(), sig: g.kernel(*kernel).clone(), producers }));
    }
    let mut all = kernels.to_vec();
    let mut loaded: BTreeMap<KernelId, CudaKernel> = BTreeMap::new();
    for (i, (source, ws)) in by_source.values().enumerate() {
        let module_source = generate(source, &ws.iter().map(|(_, w)| w.clone()).collect::<Vec<_>>());
        let src = ModuleSource::CudaC { name: format!("ostinato_handoff_{i}"), source: module_source };
        let module = LoadedModule::load(device, &src, trigger)?;
        for (id, w) in ws {
            let k = module.kernel(&wrapper_entry(&w.entry, w.producers), &out.kernel(*id).clone(), None)?;
            // By construction: it waits (for its tiles, or for its grid) before its body touches memory,
            // triggers at entry, and a consumer executes `griddepcontrol.wait` before it exits.
            loaded.insert(
                *id,
                CudaKernel { pdl_capable: true, pdl_evidence: "hand-off", pre_wait_reads: Vec::new(), pre_wait_atomics: Vec::new(), early_trigger: true, ..k },
            );
        }
    }
    for id in 0..out.kernels().len() {
        let id = KernelId(id as u32);
        if let Some(k) = loaded.remove(&id) {
            debug_assert_eq!(id.index(), all.len());
            all.push(k);
        }
    }
    for (v, node) in g.nodes().iter().enumerate() {
        let v = NodeId(v as u32);
        let err = |e: ostinato::GraphError| internal(&format!("recording the hand-off plan: {e}"));
        match &node.op {
            NodeOp::Kernel { kernel, launch, args } => {
                let tiles: Vec<(&str, TileMap)> = node.tiles.iter().map(|t| (g.kernel(*kernel).params[t.param].name.as_str(), t.map.clone())).collect();
                match &chosen.roles[v.index()] {
                    Role::None => out.add_launch_tiled(*kernel, *launch, args, &tiles, &node.after).map_err(err)?,
                    role => {
                        let mut a = args.clone();
                        a.push(Arg::Whole(flags[&v]));
                        let producers = if let Role::Consume(t) = role {
                            a.push(Arg::Whole(waits[&v]));
                            a.extend(t.producers.iter().map(|u| Arg::Whole(flags[u])));
                            t.producers.len()
                        } else {
                            0
                        };
                        out.add_launch_tiled(wrapped[&(*kernel, producers)], *launch, &a, &tiles, &node.after).map_err(err)?
                    }
                }
            }
            NodeOp::Copy { src, dst } => out.add_copy(*src, *dst, &node.after).map_err(err)?,
            NodeOp::Fill { dst, value } => out.add_fill(*dst, *value, &node.after).map_err(err)?,
            NodeOp::Collective { op, dtype, send, recv } => out.add_collective(*op, *dtype, send, recv, &node.after).map_err(err)?,
        };
    }
    let plan = Plan::compile_with(&out, plan.options()).map_err(|e| internal(&format!("planning the hand-off plan: {e}")))?;
    let consumers = chosen.consumers();
    let publishers = chosen.roles.iter().filter(|r| **r != Role::None).count();
    let pairs = chosen
        .roles
        .iter()
        .enumerate()
        .filter_map(|(v, r)| if let Role::Consume(t) = r { Some(t.producers.iter().map(move |&u| (u, NodeId(v as u32)))) } else { None })
        .flatten()
        .collect();
    Ok(Some(HandoffPlan { plan, kernels: all, inits, consumers, publishers, pairs }))
}
