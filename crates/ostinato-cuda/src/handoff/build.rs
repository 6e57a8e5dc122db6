//! Hand-offs on a device: which nodes hand off (from their kernels' certified bodies and the plan's
//! tile relations), the wrappers compiled with NVRTC, and the plan recorded again with each such node
//! launching its wrapper, its flags and wait table as buffers of the engine's own (so the planner sees
//! every access, and the exec allocates and frees them as it does the user's).

use std::collections::BTreeMap;
use std::sync::Arc;

use ostinato::{Arg, BufferId, Graph, KernelId, NodeId, NodeOp, Plan, TileMap};

use super::source::{generate, wrapper_entry, wrapper_sig, Placement, Wrapper};
use super::{choose, HandoffMode, Role};
use crate::builtins::HandoffSource;
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

/// One body source and the wrappers of its kernels (with each wrapper's kernel id in the rewritten
/// graph and its body's kernel index in the plan).
type SourceWrappers = (Arc<str>, Vec<(KernelId, usize, Wrapper)>);

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

/// What one kernel of the plan can do in a hand-off: its certified body and where it waits.
struct Candidate {
    body: Arc<HandoffSource>,
    placement: Placement,
}

/// The kernel's hand-off body, where its module's source certifies one.
fn candidate(k: &CudaKernel) -> Option<Candidate> {
    if k.captured.is_some() {
        return None;
    }
    let (device, check) = k.source_check.as_ref()?;
    let body = check.handoff(device, &k.entry).ok()?;
    // Certified from its PTX to wait (OST_WAIT) before touching what a producer writes: the body's own
    // OST_ENTRY waits for the tiles, after its certified pre-wait reads.
    let placement = if k.pdl_capable && k.pdl_evidence == "ptx" { Placement::AtEntry } else { Placement::BeforeBody };
    Some(Candidate { body, placement })
}

/// Whether node `v` reads through the non-coherent path bytes one of its frontier predecessors
/// writes: such a read may not wait for a running producer (the path is for memory read-only for the
/// kernel's lifetime).
fn noncoherent_conflict(plan: &Plan, v: NodeId, body: &HandoffSource) -> bool {
    let g = plan.graph();
    let writes: Vec<ostinato::RootAccess> = plan.hazard_preds(v).iter().flat_map(|&u| g.accesses(NodeId(u))).filter(|a| a.access.writes()).collect();
    if body.body.noncoherent_unknown.is_some() && !writes.is_empty() {
        return true;
    }
    g.accesses(v)
        .iter()
        .filter(|a| body.body.noncoherent.iter().any(|(p, _)| *p == a.param))
        .any(|r| writes.iter().any(|w| w.root == r.root && w.start < r.end && r.start < w.end))
}

/// Rewrites `plan` (its kernels bound as `kernels`) for the hand-offs `mode` allows; `None` where no
/// node hands off.
pub fn handoff(device: &Device, trigger: PdlTrigger, plan: &Plan, kernels: &[CudaKernel], mode: HandoffMode) -> Result<Option<HandoffPlan>> {
    let g = plan.graph();
    if mode == HandoffMode::Off || g.nodes().iter().all(|n| n.tiles.is_empty()) {
        return Ok(None);
    }
    let candidates: Vec<Option<Candidate>> = kernels.iter().map(candidate).collect();
    let kernel_of = |v: usize| match &g.nodes()[v].op {
        NodeOp::Kernel { kernel, .. } => Some(kernel.index()),
        _ => None,
    };
    let wrappable: Vec<bool> = (0..g.nodes().len()).map(|v| kernel_of(v).is_some_and(|k| candidates[k].is_some())).collect();
    let consumable: Vec<bool> = (0..g.nodes().len())
        .map(|v| kernel_of(v).and_then(|k| candidates[k].as_ref()).is_some_and(|c| !noncoherent_conflict(plan, NodeId(v as u32), &c.body)))
        .collect();
    let chosen = choose(plan, &wrappable, &consumable, mode);
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
        let c = candidates[kernel.index()].as_ref().ok_or_else(|| internal("a wrapped kernel without a body"))?;
        let sig = wrapper_sig(g.kernel(*kernel), producers, c.placement);
        let id = out.add_kernel(sig).map_err(|e| internal(&format!("wrapper of `{}`: {e}", g.kernel(*kernel).name)))?;
        wrapped.insert((*kernel, producers), id);
        let key = Arc::as_ptr(&c.body.source) as *const u8 as usize;
        let entry = by_source.entry(key).or_insert_with(|| (c.body.source.clone(), Vec::new()));
        let bounds = (c.body.body.max_threads.map(|t| t.iter().product()), c.body.body.min_blocks);
        let w = Wrapper { entry: c.body.entry.clone(), sig: g.kernel(*kernel).clone(), producers, placement: c.placement, bounds };
        entry.1.push((id, kernel.index(), w));
    }
    let mut all = kernels.to_vec();
    let mut loaded: BTreeMap<KernelId, CudaKernel> = BTreeMap::new();
    for (i, (source, ws)) in by_source.values().enumerate() {
        let module_source = generate(source, &ws.iter().map(|(_, _, w)| w.clone()).collect::<Vec<_>>());
        let src = ModuleSource::CudaC { name: format!("ostinato_handoff_{i}"), source: module_source };
        let module = LoadedModule::load(device, &src, trigger)?;
        for (id, body_kernel, w) in ws {
            let k = module.kernel(&wrapper_entry(&w.entry, w.producers, w.placement), &out.kernel(*id).clone(), None)?;
            // By construction it triggers at entry and waits (for its tiles, or for its grid) before its
            // body touches what a producer writes: before the body, or at the body's own certified
            // OST_ENTRY, after the pre-wait reads its certificate lists. A consumer executes
            // `griddepcontrol.wait` before it exits.
            let (reads, atomics) = match w.placement {
                Placement::AtEntry => (kernels[*body_kernel].pre_wait_reads.clone(), kernels[*body_kernel].pre_wait_atomics.clone()),
                Placement::BeforeBody => (Vec::new(), Vec::new()),
            };
            loaded.insert(
                *id,
                CudaKernel { pdl_capable: true, pdl_evidence: "hand-off", pre_wait_reads: reads, pre_wait_atomics: atomics, early_trigger: true, ..k },
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
