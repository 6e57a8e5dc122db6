//! The Vulkan arms: the raw baseline a skilled Vulkan user writes (one barrier per dependency level,
//! slot values baked into one command buffer per value), and Ostinato's Vulkan backend on the same
//! kernels (barriers only where edges need them, slots in a buffer the kernels read).

use std::sync::Arc;

use ostinato::{Backend, BufferBinding, BufferId, Exec, Plan, Scalar};
use ostinato_vulkan::{Buffer, Context, VkError, VulkanBackend, VulkanExec, VulkanMemory, VulkanOptions};

use super::arms::{err, read_checked, reset, slot_value, Arm, Decisions, RawSample};
use super::pack::ShaderFeatures;
use super::workload::{Kernels, Workload};

/// The Vulkan arms' device buffers of a row, one per root: the raw arm records on them and
/// Ostinato's execs bind them as user memory, so the arms differ in what they record and submit, not
/// in where their buffers landed (separately allocated buffers moved a row by up to 7% on the H200).
pub struct VulkanRowMemory {
    roots: Vec<Option<Arc<Buffer>>>,
}

impl VulkanRowMemory {
    /// One buffer per root of `graph`, empty.
    pub fn new(ctx: &Arc<Context>, graph: &ostinato::Graph) -> Result<Self, VkError> {
        let roots = graph.buffers().iter().enumerate().map(|(i, b)| (b.root.index() == i).then(|| Buffer::new(ctx, b.size, false).map(Arc::new)).transpose());
        Ok(VulkanRowMemory { roots: roots.collect::<Result<_, _>>()? })
    }
    /// One buffer per root of `graph`, the roots no node writes holding their initial bytes `init`
    /// (written once for every arm; the arms write the others before every sample).
    pub fn with_inputs(ctx: &Arc<Context>, graph: &ostinato::Graph, init: &[Option<Vec<u8>>]) -> Result<Self, VkError> {
        let memory = Self::new(ctx, graph)?;
        let written = graph.written_roots();
        let inputs: Vec<(usize, &Vec<u8>)> = init.iter().enumerate().filter(|(i, _)| !written[*i]).filter_map(|(i, b)| b.as_ref().map(|b| (i, b))).collect();
        let Some(largest) = inputs.iter().map(|(_, b)| b.len() as u64).max() else { return Ok(memory) };
        let mut staging = Buffer::new(ctx, largest.max(4), true)?;
        for (i, bytes) in inputs {
            let dst = memory.roots[i].as_deref().ok_or_else(|| VkError::Argument(format!("buffer #{i} is a view")))?;
            staging.bytes().ok_or_else(|| VkError::Argument("staging not mapped".into()))?[..bytes.len()].copy_from_slice(bytes);
            ostinato_vulkan::copy(ctx, &staging, 0, dst, 0, bytes.len() as u64, None)?;
        }
        Ok(memory)
    }
    /// Each buffer's memory: its root's buffer for a root, `None` for a view.
    pub fn roots(&self) -> &[Option<Arc<Buffer>>] {
        &self.roots
    }
    /// Bindings for an exec of the row's plan: every root on the row's buffer.
    fn bindings(&self) -> Vec<BufferBinding<VulkanMemory>> {
        self.roots.iter().map(|r| r.as_ref().map_or(BufferBinding::Allocate, |b| BufferBinding::External(VulkanMemory(b.clone())))).collect()
    }
}

/// What a row's Vulkan pass binds: the row's buffers, allocated only where every kernel of the row
/// has a WGSL version (else every Vulkan arm of it is skipped, and nothing is allocated for them: the
/// Llama rows' gigabytes of weights), or why not.
pub enum VulkanRow {
    Memory(VulkanRowMemory),
    NotApplicable(String),
    Failed(String),
}

impl VulkanRow {
    pub fn new(ctx: &Arc<Context>, w: &Workload, init: &[Option<Vec<u8>>]) -> VulkanRow {
        match &w.kernels {
            Kernels::Builtins => {
                if let Some(k) = w.graph.kernels().iter().find(|k| ostinato_vulkan::shaders::wgsl(&k.name).is_none()) {
                    return VulkanRow::NotApplicable(format!("no WGSL version of kernel `{}`", k.name));
                }
            }
            Kernels::Llama => return VulkanRow::NotApplicable("the Llama pack has no WGSL kernels".into()),
            Kernels::Pack(_) => {}
        }
        match VulkanRowMemory::with_inputs(ctx, &w.graph, init) {
            Ok(m) => VulkanRow::Memory(m),
            Err(e) => VulkanRow::Failed(format!("the row's Vulkan buffers: {e}")),
        }
    }
}

/// Every kernel of `plan` bound on `backend`: the built-ins, or the bench pack's WGSL (the version for
/// the device: with `dot4I8Packed` where it has the packed integer dot product, f32 atomic adds where
/// it has them).
pub fn bind_vulkan(backend: &VulkanBackend, w: &Workload, plan: &Plan) -> Result<Vec<ostinato_vulkan::VulkanKernel>, VkError> {
    match &w.kernels {
        Kernels::Pack(pack) => {
            let features = ShaderFeatures::of(backend.context());
            plan.graph().kernels().iter().zip(pack.iter()).map(|(sig, k)| backend.bind_kernel(sig, &k.vulkan_ref(features))).collect()
        }
        _ => ostinato::bind_builtins(backend, plan),
    }
}

/// The SPIR-V of every kernel of `plan` as written (push constants), what the raw baseline records:
/// the built-ins' WGSL or the bench pack's, compiled by the same front end as the backend's.
pub fn raw_shaders(ctx: &Context, w: &Workload, plan: &Plan) -> Result<Vec<Vec<u32>>, VkError> {
    match &w.kernels {
        Kernels::Pack(pack) => {
            let features = ShaderFeatures::of(ctx);
            pack.iter().map(|k| ostinato_vulkan::shaders::spirv_of_wgsl(&k.sig.name, k.wgsl_for(features), "main")).collect()
        }
        _ => super::vulkan_raw::builtin_shaders(plan),
    }
}

pub struct VulkanArm {
    plan: Plan,
    run: super::vulkan_raw::VulkanRun,
    written: Vec<bool>,
}

impl VulkanArm {
    /// `Err(NotApplicable)` (reported as skipped) where the workload has no Vulkan version.
    pub fn new(ctx: &Arc<Context>, w: &Workload, memory: &VulkanRowMemory, init: &[Option<Vec<u8>>]) -> Result<Self, VkError> {
        let plan = Plan::compile(&w.graph).map_err(|e| VkError::Argument(e.to_string()))?;
        // A slot patched every replay: one command buffer per value, recorded up front (as the
        // captured CUDA baselines capture one graph per value).
        let variants: Vec<Vec<(ostinato::SlotId, Scalar)>> = match &w.slot_schedule {
            Some((slot, values)) => values.iter().map(|v| vec![(*slot, *v)]).collect(),
            None => Vec::new(),
        };
        let shaders = raw_shaders(ctx, w, &plan)?;
        let mut run = super::vulkan_raw::VulkanRun::new(ctx, &plan, memory.roots(), &variants, &shaders)?;
        // The row's memory holds the roots no node writes; the written ones start each sample anew.
        let written = plan.graph().written_roots();
        for (i, b) in init.iter().enumerate() {
            if let (Some(b), true) = (b, written[i]) {
                run.write(&plan, BufferId(i as u32), b)?;
            }
        }
        Ok(VulkanArm { written, plan, run })
    }
}

impl Arm for VulkanArm {
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
        for (i, b) in init.iter().enumerate() {
            if let (Some(b), true) = (b, self.written[i]) {
                self.run.write(&self.plan, BufferId(i as u32), b).map_err(err("reset"))?;
            }
        }
        let (mut gpu, mut host) = (Some(0.0), 0.0);
        for r in 0..w.replays {
            let variant = if w.slot_schedule.is_some() { r } else { 0 };
            let (g, h) = self.run.run(variant).map_err(err("submit"))?;
            gpu = gpu.zip(g).map(|(a, b)| a + b);
            host += h;
        }
        let mut outputs = Vec::new();
        for &b in &w.checked {
            let decl = w.graph.buffer(b);
            let mut v = vec![0u8; self.plan.graph().buffer(decl.root).size as usize];
            self.run.read(&self.plan, decl.root, &mut v).map_err(err("read"))?;
            outputs.push(v[decl.root_offset as usize..(decl.root_offset + decl.size) as usize].to_vec());
        }
        Ok(RawSample { gpu_us: gpu, host_us: host, outputs, replay_call_us: None, replay_single_us: None })
    }
}

/// Ostinato's Vulkan backend as an arm: the row's buffers bound as user memory, one replay per
/// submit, with the arm's options (queues, replay ordering, fusion).
pub struct OstinatoVulkan {
    exec: VulkanExec,
    written: Vec<bool>,
}

impl OstinatoVulkan {
    /// `Err(NotApplicable)` (reported as skipped) where the workload has no Vulkan version.
    pub fn new(ctx: &Arc<Context>, w: &Workload, memory: &VulkanRowMemory, init: &[Option<Vec<u8>>], options: VulkanOptions) -> Result<Self, VkError> {
        let plan = Plan::compile(&w.graph).map_err(|e| VkError::Argument(e.to_string()))?;
        let backend = VulkanBackend::with_context(ctx.clone()).with_options(options);
        let kernels = bind_vulkan(&backend, w, &plan)?;
        let mut exec = backend.instantiate(&plan, kernels, memory.bindings())?;
        let written = plan.graph().written_roots();
        reset(&mut exec, init, &written)?;
        Ok(OstinatoVulkan { written, exec })
    }
}

impl Arm for OstinatoVulkan {
    /// What fused: the nodes inside fused dispatches, and for the others whose tile maps were not
    /// kept, why (`VulkanExec::tile_maps`). A Vulkan exec measures no submissions and has no PDL edges.
    fn decisions(&self) -> Option<Decisions> {
        let plan = self.exec.plan();
        let dropped = self.exec.tile_maps().iter().filter_map(|m| m.kept.as_ref().err().map(|why| format!("its tile map on `{}` is not kept: {why}", m.param)));
        let unfused = Decisions::count(dropped);
        Some(Decisions {
            edges: 0,
            programmatic_edges: 0,
            full_edges: Vec::new(),
            nodes: plan.node_count(),
            fused_nodes: self.exec.fused_nodes(),
            fused_barriers: Some(self.exec.fused_barriers()),
            unfused,
            candidates: 1,
            measured: None,
            confirmation: None,
            setup_ms: Vec::new(),
        })
    }
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
        reset(&mut self.exec, init, &self.written).map_err(err("reset"))?;
        let (mut gpu, mut host) = (Some(0.0), 0.0);
        for r in 0..w.replays {
            if let Some((s, v)) = slot_value(w, r) {
                self.exec.set_slot(s, v).map_err(err("set_slot"))?;
            }
            let t = std::time::Instant::now();
            self.exec.replay().map_err(err("replay"))?;
            host += t.elapsed().as_secs_f64() * 1e6;
            gpu = gpu.zip(self.exec.last_gpu_us().map_err(err("timestamps"))?).map(|(a, b)| a + b);
        }
        Ok(RawSample {
            gpu_us: gpu,
            host_us: host,
            outputs: read_checked(&mut self.exec, w).map_err(err("read"))?,
            replay_call_us: None,
            replay_single_us: None,
        })
    }
}
