//! Ostinato on Vulkan (any vendor): [`VulkanBackend`] and [`VulkanExec`] record a plan into one command
//! buffer once — a barrier only where a plan edge needs one, on the bytes its producers wrote
//! ([`commands`]) — and replay it with one submit; slots live in a storage buffer the kernels read, so
//! patching one re-records nothing. Kernels are WGSL (the built-ins of `kernels/wgsl/`, or files)
//! compiled to SPIR-V with naga at run time, or SPIR-V files; the Vulkan loader is opened at run time
//! (no SDK needed to build).
//!
//! [`VulkanRun`] is the benchmark's raw baseline, written the way a skilled Vulkan user writes it: one
//! barrier per dependency level, slot values baked into push constants (one command buffer per value).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

pub mod access;
pub mod commands;
mod exec;
mod ffi;
mod kernel;
pub mod lanes;
mod record;
pub mod shaders;

use std::sync::Arc;

use ostinato::{Arg, BufferId, NodeOp, ParamKind, Plan, Scalar, SlotId};

pub use exec::{QueueMode, VulkanBackend, VulkanExec, VulkanMemory};
pub use ffi::{Buffer, Context, Dispatch, Pipeline, Program, MAX_QUEUES};
pub use kernel::VulkanKernel;

#[derive(Debug, thiserror::Error)]
pub enum VkError {
    #[error("no Vulkan loader found: {0}")]
    NoLoader(String),
    #[error("no Vulkan device {0}")]
    NoDevice(String),
    #[error("{op} failed: {name} ({code})")]
    Vk { op: &'static str, code: i32, name: String },
    #[error("kernel `{kernel}`: {message}")]
    Shader { kernel: String, message: String },
    /// A declaration the kernel's code contradicts (the kernel contract, `access`).
    #[error(transparent)]
    Contract(Box<ostinato::contract::ContractError>),
    /// The workload uses something Vulkan (or this device, or the raw arm) has no version of: a kernel
    /// without WGSL, a launch unlike the shader's workgroup, a binding offset the device cannot take.
    #[error("not applicable: {0}")]
    NotApplicable(String),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Bind(#[from] ostinato::BindError),
    #[error(transparent)]
    Slot(#[from] ostinato::SlotError),
}

impl VkError {
    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ostinato::ErrorKind {
        use ostinato::ErrorKind as K;
        match self {
            VkError::NoLoader(_) | VkError::NoDevice(_) => K::BackendMissing,
            VkError::Vk { code, .. } if *code == ash::vk::Result::ERROR_DEVICE_LOST.as_raw() => K::Fault,
            VkError::Vk { code, .. }
                if *code == ash::vk::Result::ERROR_OUT_OF_HOST_MEMORY.as_raw() || *code == ash::vk::Result::ERROR_OUT_OF_DEVICE_MEMORY.as_raw() =>
            {
                K::Io
            }
            VkError::Vk { .. } => K::Runtime,
            VkError::Shader { .. } => K::Bind,
            VkError::Contract(e) => e.kind(),
            VkError::NotApplicable(_) => K::Unsupported,
            VkError::Usage(_) => K::Argument,
            VkError::Bind(e) => e.kind(),
            VkError::Slot(e) => e.kind(),
        }
    }
}

/// A plan recorded into one Vulkan command buffer, with device buffers per root allocation.
pub struct VulkanRun {
    ctx: Arc<Context>,
    buffers: Vec<Option<Buffer>>,
    staging: Buffer,
    _pipelines: Vec<Pipeline>,
    programs: Vec<Program>,
    pub levels: usize,
    pub dispatches: usize,
}

/// Dependency levels (longest-path depth) of the plan's nodes, in recording order within a level.
pub fn levels(plan: &Plan) -> Vec<Vec<usize>> {
    let mut depth = vec![0usize; plan.node_count()];
    for &v in plan.order() {
        depth[v.index()] = plan.preds(v).iter().map(|&p| depth[p as usize] + 1).max().unwrap_or(0);
    }
    let mut out = vec![Vec::new(); depth.iter().copied().max().map_or(0, |d| d + 1)];
    for (i, d) in depth.iter().enumerate() {
        out[*d].push(i);
    }
    out
}

impl VulkanRun {
    /// Records `plan`: one command buffer per entry of `slot_values` (each a set of slot values baked
    /// into the push constants, as a Vulkan user records one command buffer per position), or one with
    /// the slots' initial values when `slot_values` is empty. Every node must be a kernel with a WGSL
    /// built-in, a 1-D grid and 32-bit scalars.
    pub fn new(ctx: &Arc<Context>, plan: &Plan, slot_values: &[Vec<(SlotId, Scalar)>]) -> Result<VulkanRun, VkError> {
        let g = plan.graph();
        let mut pipelines: Vec<Option<Pipeline>> = Vec::new();
        for k in g.kernels() {
            let n_buf = k.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32;
            let n_scalar = k.params.len() as u32 - n_buf;
            if k.params.iter().any(|p| matches!(p.kind, ParamKind::Scalar(t) if t.size() != 4)) {
                return Err(VkError::NotApplicable(format!("kernel `{}` has 64-bit scalars", k.name)));
            }
            let spirv = shaders::spirv(&k.name)?;
            pipelines.push(Some(Pipeline::new(ctx, &spirv, n_buf, 4 * n_scalar)?));
        }
        let mut buffers = Vec::new();
        let mut max = 4u64;
        for (i, b) in g.buffers().iter().enumerate() {
            buffers.push(if b.root.index() == i { Some(Buffer::new(ctx, b.size, false)?) } else { None });
            max = max.max(b.size);
        }
        let staging = Buffer::new(ctx, max, true)?;
        let lv = levels(plan);
        let variants: Vec<Vec<(SlotId, Scalar)>> = if slot_values.is_empty() { vec![Vec::new()] } else { slot_values.to_vec() };
        let mut programs = Vec::new();
        for values in &variants {
            let mut recorded = Vec::new();
            for level in &lv {
                let mut ds = Vec::new();
                for &n in level {
                    let NodeOp::Kernel { kernel, launch, args } = &g.nodes()[n].op else {
                        return Err(VkError::NotApplicable(format!("node {n} is a copy or fill")));
                    };
                    if launch.grid[1] != 1 || launch.grid[2] != 1 {
                        return Err(VkError::NotApplicable(format!("node {n}: the WGSL kernels take 1-D grids")));
                    }
                    let pipeline = pipelines[kernel.index()].as_ref().ok_or_else(|| VkError::Usage("pipeline missing".into()))?;
                    let mut bufs = Vec::new();
                    let mut push = Vec::new();
                    for a in args {
                        match a {
                            Arg::Buffer(s) => {
                                let (root, start, end) = g.root_extent(*s);
                                if start % ctx.min_storage_align != 0 {
                                    return Err(VkError::NotApplicable(format!("node {n}: offset {start} is not {}-aligned", ctx.min_storage_align)));
                                }
                                let buf = buffers[root.index()].as_ref().ok_or_else(|| VkError::Usage("root without memory".into()))?;
                                bufs.push((buf, start, end - start));
                            }
                            Arg::Scalar(v) => push.push(v.bits as u32),
                            Arg::Slot(slot) => {
                                let v = values.iter().find(|(s, _)| s == slot).map_or(g.slots()[slot.index()].initial, |(_, v)| *v);
                                push.push(v.bits as u32);
                            }
                            Arg::Whole(_) => return Err(VkError::Usage("unresolved whole-buffer arg".into())),
                        }
                    }
                    ds.push(Dispatch { pipeline, groups: launch.grid[0], buffers: bufs, push });
                }
                recorded.push(ds);
            }
            programs.push(Program::record(ctx, &recorded)?);
        }
        let pipelines = pipelines.into_iter().flatten().collect();
        Ok(VulkanRun { ctx: ctx.clone(), buffers, staging, _pipelines: pipelines, programs, levels: lv.len(), dispatches: plan.node_count() })
    }

    /// Writes a root buffer's bytes (through the staging buffer).
    pub fn write(&mut self, plan: &Plan, buffer: BufferId, data: &[u8]) -> Result<(), VkError> {
        self.root(plan, buffer, data.len() as u64)?;
        self.staging.bytes().ok_or_else(|| VkError::Usage("staging not mapped".into()))?[..data.len()].copy_from_slice(data);
        let b = self.root(plan, buffer, data.len() as u64)?;
        ffi::copy(&self.ctx, &self.staging, 0, b, 0, data.len() as u64)
    }

    /// Reads a root buffer's bytes.
    pub fn read(&mut self, plan: &Plan, buffer: BufferId, out: &mut [u8]) -> Result<(), VkError> {
        let b = self.root(plan, buffer, out.len() as u64)?;
        ffi::copy(&self.ctx, b, 0, &self.staging, 0, out.len() as u64)?;
        out.copy_from_slice(&self.staging.bytes().ok_or_else(|| VkError::Usage("staging not mapped".into()))?[..out.len()]);
        Ok(())
    }

    fn root(&self, plan: &Plan, buffer: BufferId, len: u64) -> Result<&Buffer, VkError> {
        let d = plan.graph().buffers().get(buffer.index()).ok_or_else(|| VkError::Usage(format!("unknown buffer {buffer}")))?;
        if d.root.index() != buffer.index() || len > d.size {
            return Err(VkError::Usage(format!("buffer `{}`: only whole root buffers are copied", d.name)));
        }
        self.buffers[buffer.index()].as_ref().ok_or_else(|| VkError::Usage("root without memory".into()))
    }

    /// One submission of command buffer `variant` (see [`VulkanRun::new`]): (GPU µs, host submit µs).
    pub fn run(&self, variant: usize) -> Result<(Option<f64>, f64), VkError> {
        self.programs.get(variant).ok_or_else(|| VkError::Usage(format!("no recorded variant {variant}")))?.run()
    }

    pub fn device_name(&self) -> &str {
        &self.ctx.name
    }
}

impl From<ostinato::contract::ContractError> for VkError {
    fn from(e: ostinato::contract::ContractError) -> Self {
        VkError::Contract(Box::new(e))
    }
}
