//! Chain fusion on Vulkan: a group of dependent one-workgroup dispatches of one workgroup shape (the
//! core's `ostinato::fusion::groups`, the rules CUDA uses) becomes one dispatch whose workgroup `b`
//! runs lane `b`'s bodies in plan order, with `workgroupBarrier` and `storageBarrier` (one control
//! barrier with workgroup and storage memory semantics, at workgroup scope: `crate::barrier_scope`)
//! before a body that depends on a body since the last barrier (or where bodies share workgroup
//! memory), unless every byte the two touch is one invocation's in both: the built-ins' stated
//! per-invocation footprint (`ostinato::builtins::thread_footprint`, which their WGSL twins' loops
//! follow), as on CUDA (`ostinato::fusion::barriers_with`). The plan is recorded again with each group
//! as one node (`ostinato::fusion::rewrite`), so its barriers come from the same hazards.
//!
//! The bodies are merged at the naga IR level (`build_module`): each kernel's module (its bindings
//! already taking element offsets, `crate::offsets`) is imported into one module through `naga_oil`'s
//! importer, its entry point made a function; its buffer bindings renumbered to the fused dispatch's
//! (each bound to its whole root buffer, so a member's slice is reached by its element offset from
//! byte 0), its params struct made a private variable that the fused entry stores before each call
//! from a storage array of the members' params blocks (so slots stay patchable in place). Consecutive
//! calls of one function become a loop, so a long chain is a few instructions, not one copy per node.
//! Each body sees the built-ins of a one-workgroup launch: workgroup id 0, one workgroup, its global
//! invocation id its local one — what it saw when dispatched alone.
//!
//! What may fuse (`Body`, decided at bind time): a module whose entry point takes only the compute
//! built-ins above, whose barriers, if it has any, lie in uniform control flow (`crate::uniform`: a
//! barrier some invocations of a workgroup skip, or reach after others returned, would count
//! differently once the body is one call among many), and whose every binding takes element offsets;
//! a node launched as one workgroup whose slices start at whole elements of their root buffers.
//!
//! A node of many workgroups fuses too where its tile maps are kept — a built-in's (its maps checked
//! against the core's stated footprint, its workgroup the launch's block), maps verified from its code
//! (`crate::tilemaps`) or maps its author vouches for — and the core's policy finds every relation inside
//! the run block-local (`ostinato::tiles`, `docs/tiles.md`): the fused dispatch has the nodes' grid, and
//! each body sees the dispatch's own workgroup id, global invocation id and workgroup count.

use std::collections::BTreeMap;
use std::sync::Arc;

use naga::{AddressSpace, BuiltIn, GlobalVariable, Handle, Module, ResourceBinding, Span, Type, TypeInner};
use ostinato::fusion::{groups, lane_barriers, Fusable, FuseKey, FusedLaunch, FusionMode, Group};
use ostinato::{Access, Arg, BufferId, KernelSig, Launch, NodeId, NodeOp, ParamKind, Plan, Slice};

use crate::build::{NodeLayout, Params};
use crate::ffi::Context;
use crate::fused_entry::{BodyFn, Call};
use crate::kernel::VulkanKernel;
use crate::offsets::{Offsets, ParamsVar};
use crate::tilemaps::{MapKept, MapUse, ParamsAt, TileCode};
use crate::VkError;

/// A kernel's body as a fused dispatch runs it: its module with offsets, and what the fusion needs.
pub(crate) struct Body {
    module: Module,
    /// The entry point's index in `module`.
    entry: usize,
    /// The built-in each of the entry point's arguments is.
    args: Vec<BuiltIn>,
    /// The params variable (a struct: scalars, then element offsets), if the module has one.
    params: Option<Handle<GlobalVariable>>,
    /// The buffer bindings' variables, in binding order.
    buffers: Vec<Handle<GlobalVariable>>,
    /// The module has workgroup memory (bodies may reuse it: a barrier between them).
    uses_shared: bool,
    /// Bytes per element of each buffer binding.
    element_sizes: Vec<u32>,
}

/// Whether `module` (its bindings rewritten for offsets as `offsets` says) may run as a fused body;
/// why not, where it may not.
pub(crate) fn body(module: &Module, entry: &str, offsets: &Offsets, n_buf: u32, params: ParamsVar, source: Option<&str>) -> Result<Arc<Body>, String> {
    if let Some((i, b)) = offsets.bindings.iter().enumerate().find_map(|(i, b)| b.offsets.as_ref().err().map(|e| (i, e))) {
        return Err(format!("binding {i} cannot take an element offset ({b})"));
    }
    let e = module.entry_points.iter().position(|e| e.name == entry).ok_or_else(|| format!("no entry point `{entry}`"))?;
    let ep = &module.entry_points[e];
    if ep.workgroup_size_overrides.is_some() {
        return Err("its workgroup size is overridable".into());
    }
    let mut args = Vec::with_capacity(ep.function.arguments.len());
    for a in &ep.function.arguments {
        match a.binding {
            Some(naga::Binding::BuiltIn(
                b @ (BuiltIn::GlobalInvocationId | BuiltIn::LocalInvocationId | BuiltIn::LocalInvocationIndex | BuiltIn::WorkGroupId | BuiltIn::NumWorkGroups),
            )) => args.push(b),
            _ => return Err(format!("its argument `{}` is not a compute built-in a fused dispatch provides", a.name.as_deref().unwrap_or("?"))),
        }
    }
    let binding = |b: u32| module.global_variables.iter().find(|(_, v)| v.binding == Some(ResourceBinding { group: 0, binding: b })).map(|(h, _)| h);
    let buffers = (0..n_buf).map(|b| binding(b).ok_or_else(|| format!("no binding {b}"))).collect::<Result<Vec<_>, _>>()?;
    let params = match params {
        ParamsVar::Immediate => module.global_variables.iter().find(|(_, v)| v.space == AddressSpace::Immediate).map(|(h, _)| h),
        ParamsVar::Storage(b) => binding(b),
    };
    if let Some(p) = params {
        if !matches!(module.types[module.global_variables[p].ty].inner, TypeInner::Struct { .. }) {
            return Err("its params variable is not a struct".into());
        }
    }
    // Its own barriers, where it has them, must be in uniform control flow: every invocation of a
    // workgroup that calls the body reaches each of them, and a fused dispatch calls every body from
    // every invocation.
    crate::uniform::barriers_uniform(module, e, params, source)?;
    if module.global_variables.iter().any(|(_, v)| v.space == AddressSpace::Private) {
        // One thread runs its lane's bodies in turn: their module-scope variables would be initialised
        // once and shared between the calls.
        return Err("it has module-scope private variables".into());
    }
    let uses_shared = module.global_variables.iter().any(|(_, v)| v.space == AddressSpace::WorkGroup);
    let element_sizes = offsets.bindings.iter().map(|b| b.element_size).collect();
    Ok(Arc::new(Body { module: module.clone(), entry: e, args, params, buffers, uses_shared, element_sizes }))
}

impl Body {
    /// The type of the body's params struct, if it has one.
    pub(crate) fn params_type(&self) -> Option<Handle<Type>> {
        self.params.map(|p| self.module.global_variables[p].ty)
    }
}

/// A fused dispatch's layout (its node in the rewritten plan).
pub(crate) struct FusedDispatch {
    pub(crate) layout: NodeLayout,
}

/// The plan with its fused groups as single nodes, the kernels to run it with (the user's, then one
/// per group), and each node's fused layout.
pub(crate) struct FusedPlan {
    pub(crate) plan: Plan,
    pub(crate) kernels: Vec<VulkanKernel>,
    pub(crate) dispatches: Vec<Option<FusedDispatch>>,
    pub(crate) fused_nodes: usize,
    /// Barriers between bodies inside the fused dispatches (a body ordered after another only through
    /// bytes one invocation touches in both needs none).
    pub(crate) fused_barriers: usize,
    /// The user's nodes each node of `plan` runs (a trace's units).
    pub(crate) units: Vec<Vec<NodeId>>,
}

/// The body node `v` runs when fused, where it may fuse: a kernel with a body, launched as one
/// workgroup, whose slices start at whole elements and fit one binding.
fn fusable(ctx: &Context, plan: &Plan, v: usize, kernels: &[VulkanKernel]) -> Option<Fusable> {
    let g = plan.graph();
    let NodeOp::Kernel { kernel, launch, args } = &g.nodes()[v].op else { return None };
    let k = &kernels[kernel.index()];
    let body = k.body.as_ref().ok()?;
    // A launch of many workgroups fuses block by block where its tile maps are the shader's own
    // per-workgroup footprint: a built-in's (checked against the core's stated footprint, with the
    // workgroup the launch's block, as the bind requires), or a user's that the code is shown to keep
    // (`crate::tilemaps`) or its author vouches for.
    if launch.grid != [1, 1, 1] {
        let node = &g.nodes()[v];
        if node.tiles.is_empty() || k.workgroup != Some(launch.block) || !node.tiles.iter().all(|t| map_kept(g, node, k, t).is_ok()) {
            return None;
        }
        if launch.grid.iter().zip(ctx.limits.workgroup_count).any(|(&d, max)| d > max) {
            return None;
        }
    }
    let slices = args.iter().filter_map(|a| if let Arg::Buffer(s) = a { Some(*s) } else { None });
    for (s, &size) in slices.zip(&body.element_sizes) {
        let (root, start, _) = g.root_extent(s);
        let whole = start % size.max(1) as u64 == 0 && start / (size.max(1) as u64) <= u32::MAX as u64;
        if !whole || g.buffer(root).size > ctx.limits.storage_range as u64 {
            return None;
        }
    }
    // A body's barriers are certified where no invocation may have returned before them
    // (`crate::kernel`), so any body may share its workgroup with others.
    Some(Fusable { key: FuseKey { block: launch.block, grid: launch.grid, source: 0 }, uses_shared: body.uses_shared, alone: false })
}

/// How node `node`'s map `t` holds for its kernel `k`: stated (a built-in's footprint, checked by the
/// core), declared `vouched`, or verified from the code with the node's scalars (a scalar from a slot,
/// patchable later, is not taken as known); why not.
pub(crate) fn map_kept(g: &ostinato::Graph, node: &ostinato::Node, k: &VulkanKernel, t: &ostinato::ParamTile) -> Result<MapKept, String> {
    map_kept_by(g, node, k.builtin.is_some(), &k.tiles, t)
}

/// [`map_kept`] for a kernel that is a built-in or not, whose code the check reads as `tiles`.
pub(crate) fn map_kept_by(
    g: &ostinato::Graph,
    node: &ostinato::Node,
    builtin: bool,
    tiles: &Result<Arc<TileCode>, String>,
    t: &ostinato::ParamTile,
) -> Result<MapKept, String> {
    let NodeOp::Kernel { kernel, launch, args } = &node.op else { return Err("not a kernel launch".into()) };
    let sig = g.kernel(*kernel);
    if builtin {
        return Ok(MapKept::Stated);
    }
    if sig.params[t.param].decl == ostinato::AccessDecl::Vouched {
        return Ok(MapKept::Vouched);
    }
    let code = tiles.as_ref().map_err(|why| format!("the check cannot read the kernel's code: {why}"))?;
    let buffer = sig.params[..t.param].iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count();
    let scalars: Vec<Option<ostinato::Scalar>> = sig
        .params
        .iter()
        .zip(args)
        .filter(|(p, _)| matches!(p.kind, ParamKind::Scalar(_)))
        .map(|(_, a)| if let Arg::Scalar(s) = a { Some(*s) } else { None })
        .collect();
    code.check(buffer, &t.map, launch, &scalars).map(|()| MapKept::Verified)
}

/// How each declared tile map of `plan` is taken ([`MapUse`]).
pub(crate) fn map_uses(plan: &Plan, kernels: &[VulkanKernel]) -> Vec<MapUse> {
    let g = plan.graph();
    uses_where(g, |_| true, |node, kernel, t| map_kept(g, node, &kernels[kernel.index()], t))
}

/// A [`MapUse`] for every tile map of the kernel nodes of `g` whose kernel `of` picks, each taken as
/// `kept` says.
fn uses_where(
    g: &ostinato::Graph,
    of: impl Fn(ostinato::KernelId) -> bool,
    kept: impl Fn(&ostinato::Node, ostinato::KernelId, &ostinato::ParamTile) -> Result<MapKept, String>,
) -> Vec<MapUse> {
    let mut out = Vec::new();
    for (v, node) in g.nodes().iter().enumerate() {
        let NodeOp::Kernel { kernel, .. } = &node.op else { continue };
        if !of(*kernel) {
            continue;
        }
        for t in &node.tiles {
            let param = g.kernel(*kernel).params[t.param].name.clone();
            out.push(MapUse { node: NodeId(v as u32), param, kept: kept(node, *kernel, t) });
        }
    }
    out
}

/// How the Vulkan backend would take the tile maps of kernel `kernel`'s nodes in `graph`, its code read
/// from `reference` without a device (`plan --explain`; an exec reports the same in
/// [`crate::VulkanExec::tile_maps`]); `Err` where the code cannot be read.
pub fn tile_maps_of(graph: &ostinato::Graph, kernel: ostinato::KernelId, reference: &ostinato::KernelRef) -> Result<Vec<MapUse>, String> {
    let sig = graph.kernel(kernel);
    let builtin = reference.builtin_name().is_some();
    let tiles: Result<Arc<TileCode>, String> = if builtin {
        Err("a built-in".into())
    } else {
        let code = crate::access::read_reference(sig, reference)?;
        let caps = naga::valid::Capabilities::IMMEDIATES | crate::kernel::FLOAT_ATOMICS;
        let info =
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&code.module).map_err(|e| format!("{:?}", e.into_inner()))?;
        let n_buf = crate::kernel::n_buffers(sig);
        let at = if code.source.is_some() { ParamsAt::Immediate } else { ParamsAt::Binding(n_buf) };
        crate::kernel::tile_code(sig, &code.module, &info, &code.entry, at, code.source.as_deref())
    };
    // The checks recurse over the code's expressions: on a stack of their own.
    crate::wgsl::with_stack(|| uses_where(graph, |k| k == kernel, |node, _, t| map_kept_by(graph, node, builtin, &tiles, t)))
}

/// Fuses `plan` under `mode`; `None` where nothing fuses (or `off`).
pub(crate) fn fuse(ctx: &Arc<Context>, plan: &Plan, kernels: &[VulkanKernel], mode: FusionMode) -> Result<Option<FusedPlan>, VkError> {
    if mode == FusionMode::Off {
        return Ok(None);
    }
    let fusable: Vec<Option<Fusable>> = (0..plan.node_count()).map(|v| fusable(ctx, plan, v, kernels)).collect();
    let (mut picked, mut made, mut fused_barriers) = (Vec::new(), Vec::new(), 0);
    for gr in groups(plan, &fusable, mode) {
        let uses_shared = |v: NodeId| fusable[v.index()].is_some_and(|f| f.uses_shared);
        // A built-in's WGSL twin loops over the dispatch's linear invocation index (`ost_group` × 256 + the
        // local index, the stride `ost_groups` × 256), as its CUDA C does over the thread index.
        let bars = lane_barriers(plan, &gr, uses_shared, |k| kernels[k.index()].builtin.as_deref());
        // A group past the device's binding limit stays unfused (its nodes run as they are).
        if let Some(f) = Fused::new(ctx, plan, kernels, &gr, &bars, &format!("ostinato_fused_{}", made.len()))? {
            fused_barriers += bars.iter().flatten().filter(|&&b| b).count();
            made.push(f);
            picked.push(gr);
        }
    }
    if picked.is_empty() {
        return Ok(None);
    }
    let launches: Vec<FusedLaunch<'_>> = made.iter().map(|f| FusedLaunch { sig: &f.sig, launch: f.launch, args: &f.args }).collect();
    let rewritten = ostinato::fusion::rewrite(plan, &picked, &launches).map_err(|reason| VkError::Internal { op: "fusion", reason })?;
    let fused_plan = Plan::compile_with(&rewritten.graph, plan.options())
        .map_err(|e| VkError::Internal { op: "fusion", reason: format!("planning the fused plan: {e}") })?;
    let mut all = kernels.to_vec();
    let mut dispatches: Vec<Option<FusedDispatch>> = (0..fused_plan.node_count()).map(|_| None).collect();
    for (f, gr) in made.into_iter().zip(&picked) {
        let node = rewritten.node_of[gr.lanes[0][0].index()];
        dispatches[node.index()] = Some(FusedDispatch { layout: f.layout });
        all.push(f.kernel);
    }
    let fused_nodes = picked.iter().map(Group::len).sum();
    let units = ostinato::trace::units_from(&rewritten.node_of, fused_plan.node_count());
    Ok(Some(FusedPlan { plan: fused_plan, kernels: all, dispatches, fused_nodes, fused_barriers, units }))
}

/// One distinct body function of a fused dispatch: a kernel on its roots, and the fused dispatch's
/// binding of each of its buffer params (one binding per root buffer: variables of several bodies
/// share it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Function {
    kernel: usize,
    roots: Vec<BufferId>,
    bindings: Vec<u32>,
}

/// A group's fused kernel and its dispatch layout, before it joins the plan.
struct Fused {
    sig: KernelSig,
    args: Vec<Arg>,
    launch: Launch,
    kernel: VulkanKernel,
    layout: NodeLayout,
}

impl Fused {
    /// The fused kernel of `gr`; `None` where it would bind more storage buffers than the device has
    /// (one per root buffer, and the params).
    fn new(ctx: &Arc<Context>, plan: &Plan, kernels: &[VulkanKernel], gr: &Group, bars: &[Vec<bool>], name: &str) -> Result<Option<Fused>, VkError> {
        let g = plan.graph();
        let mut functions: Vec<Function> = Vec::new();
        let mut binding_roots: Vec<BufferId> = Vec::new();
        let mut members: Vec<Vec<NodeId>> = Vec::new(); // per function: its calls' nodes, in params order
        let mut lanes: Vec<Vec<Call>> = Vec::with_capacity(gr.lanes.len());
        for (lane, bar) in gr.lanes.iter().zip(bars) {
            let mut calls = Vec::with_capacity(lane.len());
            for (&v, &barrier) in lane.iter().zip(bar) {
                let NodeOp::Kernel { kernel, args, .. } = &g.node(v).op else { unreachable!("groups hold fusable kernel nodes") };
                let roots: Vec<BufferId> = args.iter().filter_map(|a| if let Arg::Buffer(s) = a { Some(g.root_extent(*s).0) } else { None }).collect();
                // One function per kernel and roots: the calls of a chain share it (and a loop).
                let function = match functions.iter().position(|f| f.kernel == kernel.index() && f.roots == roots) {
                    Some(f) => f,
                    None => {
                        let mut binding = |r: BufferId| match binding_roots.iter().position(|&x| x == r) {
                            Some(b) => b as u32,
                            None => {
                                binding_roots.push(r);
                                binding_roots.len() as u32 - 1
                            }
                        };
                        let bindings = roots.iter().map(|&r| binding(r)).collect();
                        functions.push(Function { kernel: kernel.index(), roots, bindings });
                        members.push(Vec::new());
                        functions.len() - 1
                    }
                };
                members[function].push(v);
                calls.push(Call { function, index: members[function].len() as u32 - 1, barrier });
            }
            lanes.push(calls);
        }
        let n_bindings = binding_roots.len() as u32;
        let total = n_bindings + 1;
        if total > ctx.limits.storage_buffers {
            return Ok(None);
        }
        let (layout, bases) = fused_layout(plan, kernels, &functions, &members, &binding_roots)?;
        // A multi-block group is one lane on the nodes' grid: its bodies see the real workgroups.
        let multi_block = gr.key.grid != [1, 1, 1];
        // (On the stack `build` gives the fusion: naga_oil's importer recurses over each body.)
        let module = build_module(kernels, &functions, &bases, &lanes, gr.key.block, n_bindings, multi_block)
            .map_err(|reason| VkError::Internal { op: "fusion", reason })?;
        let kernel = crate::kernel::fused_kernel(ctx, name, module, total, gr.key.block)?;
        let (sig, args) = declared_accesses(plan, gr, name);
        let grid = if multi_block { gr.key.grid } else { [gr.lanes.len() as u32, 1, 1] };
        let launch = Launch::new(grid, gr.key.block);
        Ok(Some(Fused { sig, args, launch, kernel, layout }))
    }
}

/// The fused node's signature and args as the rewritten plan records them: one buffer param per
/// distinct slice start of the members (extended to their furthest end, their accesses joined), the
/// slots they take (so the plan's hazards are the members').
fn declared_accesses(plan: &Plan, gr: &Group, name: &str) -> (KernelSig, Vec<Arg>) {
    let g = plan.graph();
    let mut slices: BTreeMap<(BufferId, u64), (u64, Access)> = BTreeMap::new();
    let mut slots = Vec::new();
    for v in gr.nodes() {
        let NodeOp::Kernel { kernel, args, .. } = &g.node(v).op else { continue };
        for (p, a) in g.kernel(*kernel).params.iter().zip(args) {
            match (&p.kind, a) {
                (ParamKind::Buffer(m), Arg::Buffer(s)) => {
                    let (root, start, end) = g.root_extent(*s);
                    let e = slices.entry((root, start)).or_insert((end, *m));
                    e.0 = e.0.max(end);
                    if e.1 != *m {
                        e.1 = Access::ReadWrite;
                    }
                }
                (ParamKind::Scalar(t), Arg::Slot(s)) if !slots.iter().any(|(x, _)| x == s) => slots.push((*s, *t)),
                _ => {}
            }
        }
    }
    let mut sig = KernelSig::new(name);
    let mut args = Vec::new();
    for (i, ((root, start), (end, access))) in slices.into_iter().enumerate() {
        sig = sig.buffer(format!("p{i}"), access);
        args.push(Arg::Buffer(Slice { buffer: root, offset: start, len: end - start }));
    }
    for (i, (slot, ty)) in slots.into_iter().enumerate() {
        sig = sig.scalar(format!("s{i}"), ty);
        args.push(Arg::Slot(slot));
    }
    (sig, args)
}

/// The fused dispatch's bindings (each whole root buffer from byte 0, then the params) and its params
/// block: per function, an array of its calls' params blocks (scalars, then element offsets from byte
/// 0 of each root) starting at a whole number of its stride, that number returned (every function's
/// array is a view of the one params binding).
fn fused_layout(
    plan: &Plan,
    kernels: &[VulkanKernel],
    functions: &[Function],
    members: &[Vec<NodeId>],
    roots: &[BufferId],
) -> Result<(NodeLayout, Vec<u32>), VkError> {
    let g = plan.graph();
    let bindings: Vec<(BufferId, u64, u64)> = roots.iter().map(|&r| (r, 0, g.buffer(r).size.max(4))).collect();
    let (mut block, mut slot_uses, mut bases) = (Vec::new(), Vec::new(), Vec::with_capacity(functions.len()));
    for (f, calls) in functions.iter().zip(members) {
        let k = &kernels[f.kernel];
        let stride = (k.body_stride as usize).max(4);
        let at = block.len().div_ceil(stride) * stride;
        bases.push(u32::try_from(at / stride).map_err(|_| VkError::Internal { op: "fusion", reason: "a params array past 2^32 elements".into() })?);
        block.resize(at + stride * calls.len(), 0);
        for (i, &v) in calls.iter().enumerate() {
            let NodeOp::Kernel { args, .. } = &g.node(v).op else { unreachable!("fused nodes are kernels") };
            let (scalars, uses) = crate::build::scalars_block(g, args, k, v)?;
            let base = at + i * stride;
            block[base..base + scalars.len()].copy_from_slice(&scalars);
            slot_uses.extend(uses.into_iter().map(|(s, o, n)| (s, base + o, n)));
            if let Some(offsets_at) = k.offsets_at {
                let slices = args.iter().filter_map(|a| if let Arg::Buffer(s) = a { Some(*s) } else { None });
                for (b, (s, info)) in slices.zip(&k.bindings).enumerate() {
                    let off = (g.root_extent(s).1 / info.element_size.max(1) as u64) as u32;
                    let o = base + offsets_at as usize + 4 * b;
                    block[o..o + 4].copy_from_slice(&off.to_le_bytes());
                }
            }
        }
    }
    let params_bindings = vec![(0, (block.len() as u64).max(4))];
    Ok((NodeLayout { bindings, params: Params::Buffer(0), block, slot_uses, params_bindings, as_written: None }, bases))
}

/// The fused module: every function's body imported, and an entry point `main` whose workgroup `b`
/// calls lane `b`'s bodies.
fn build_module(
    kernels: &[VulkanKernel],
    functions: &[Function],
    bases: &[u32],
    lanes: &[Vec<Call>],
    block: [u32; 3],
    n_bindings: u32,
    multi_block: bool,
) -> Result<Module, String> {
    let sources: Vec<Module> = functions.iter().enumerate().map(|(i, f)| body_as_function(kernels, f, i)).collect::<Result<_, _>>()?;
    let mut derived = naga_oil::derive::DerivedModule::default();
    let mut fns: Vec<BodyFn> = Vec::with_capacity(functions.len());
    for (i, (m, f)) in sources.iter().zip(functions).enumerate() {
        let body = kernels[f.kernel].body.as_ref().map_err(|e| e.clone())?;
        derived.set_shader_source(m, 0);
        let (h, func) = m.functions.iter().last().ok_or("a body module without its function")?;
        let function = derived.import_function(func, m.functions.get_span(h));
        let private =
            m.global_variables.iter().find(|(_, v)| v.space == AddressSpace::Private && v.name.as_deref() == Some(private_name(i).as_str())).map(|(h, _)| h);
        let params = private.map(|p| derived.import_global(&p));
        fns.push(BodyFn { function, params, args: body.args.clone(), stride: kernels[f.kernel].body_stride, base: bases[i] });
    }
    derived.clear_shader_source();
    let mut module: Module = derived.into();
    let entry = crate::fused_entry::entry(&mut module, &fns, lanes, block, n_bindings, multi_block);
    module.entry_points.push(entry);
    Ok(module)
}

/// The name of function `i`'s private params variable.
fn private_name(i: usize) -> String {
    format!("ostinato_params_{i}")
}

/// Kernel `f.kernel`'s body module with its entry point as function number `i`: its buffer bindings
/// renumbered, its params a private variable, every function renamed apart from other bodies'.
fn body_as_function(kernels: &[VulkanKernel], f: &Function, i: usize) -> Result<Module, String> {
    let body = kernels[f.kernel].body.as_ref().map_err(|e| e.clone())?;
    let mut m = body.module.clone();
    for (&h, &b) in body.buffers.iter().zip(&f.bindings) {
        m.global_variables[h].binding = Some(ResourceBinding { group: 0, binding: b });
    }
    if let Some(p) = body.params {
        let v = &mut m.global_variables[p];
        v.space = AddressSpace::Private;
        v.binding = None;
        v.name = Some(private_name(i));
    }
    for (_, func) in m.functions.iter_mut() {
        func.name = Some(format!("f{i}_{}", func.name.as_deref().unwrap_or("helper")));
    }
    let mut ep = m.entry_points.remove(body.entry);
    m.entry_points.clear();
    ep.function.name = Some(format!("f{i}_body"));
    for a in &mut ep.function.arguments {
        a.binding = None;
    }
    ep.function.result = None;
    m.functions.append(ep.function, Span::UNDEFINED);
    Ok(m)
}
