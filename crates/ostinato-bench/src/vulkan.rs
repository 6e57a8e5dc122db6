//! The Vulkan arms: the raw baseline a skilled Vulkan user writes (one barrier per dependency level,
//! slot values baked into one command buffer per value), and Ostinato's Vulkan backend on the same
//! kernels (barriers only where edges need them, slots in a buffer the kernels read).

use std::sync::Arc;

use ostinato::{Backend, BufferBinding, BufferId, Exec, Plan, Scalar};
use ostinato_vulkan::{Buffer, Context, VkError, VulkanBackend, VulkanExec, VulkanMemory, VulkanOptions};

use super::arms::{err, load_all, read_checked, reset, slot_value, Arm, RawSample};
use super::workload::Workload;

/// The Vulkan arms' device buffers of a row, one per root: the raw arm records on them and
/// Ostinato's execs bind them as user memory, so the arms differ in what they record and submit, not
/// in where their buffers landed (separately allocated buffers moved a row by up to 7% on the H200).
pub struct VulkanRowMemory {
    roots: Vec<Option<Arc<Buffer>>>,
}

impl VulkanRowMemory {
    pub fn new(ctx: &Arc<Context>, graph: &ostinato::Graph) -> Result<Self, VkError> {
        let roots = graph.buffers().iter().enumerate().map(|(i, b)| (b.root.index() == i).then(|| Buffer::new(ctx, b.size, false).map(Arc::new)).transpose());
        Ok(VulkanRowMemory { roots: roots.collect::<Result<_, _>>()? })
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
    pub fn new(ctx: &Arc<Context>, w: &Workload) -> VulkanRow {
        if let Some(k) = w.graph.kernels().iter().find(|k| ostinato_vulkan::shaders::wgsl(&k.name).is_none()) {
            return VulkanRow::NotApplicable(format!("no WGSL version of kernel `{}`", k.name));
        }
        match VulkanRowMemory::new(ctx, &w.graph) {
            Ok(m) => VulkanRow::Memory(m),
            Err(e) => VulkanRow::Failed(format!("the row's Vulkan buffers: {e}")),
        }
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
        let mut run = super::vulkan_raw::VulkanRun::new(ctx, &plan, memory.roots(), &variants)?;
        for (i, b) in init.iter().enumerate() {
            if let Some(b) = b {
                run.write(&plan, BufferId(i as u32), b)?;
            }
        }
        Ok(VulkanArm { written: plan.graph().written_roots(), plan, run })
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
        let kernels = ostinato::bind_builtins(&backend, &plan)?;
        let mut exec = backend.instantiate(&plan, kernels, memory.bindings())?;
        load_all(&mut exec, init)?;
        Ok(OstinatoVulkan { written: plan.graph().written_roots(), exec })
    }
}

impl Arm for OstinatoVulkan {
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
