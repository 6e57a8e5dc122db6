//! The raw Vulkan baseline, written the way a skilled Vulkan user writes it: the plan's kernels (the
//! WGSL built-ins or the bench pack's WGSL, compiled as written) recorded into one command buffer, grouped into dependency
//! levels (longest-path depth) with one global memory barrier between consecutive levels, slot values
//! baked into push constants (one command buffer per value, recorded up front), each submission
//! waited for on the host. It records through ash on the Vulkan backend's device (`Context`), so both
//! arms run on the same device and the same compiled kernels. An FFI module.

#![allow(unsafe_code)]

use std::sync::Arc;

use ash::vk;
use ostinato::{Arg, BufferId, NodeOp, ParamKind, Plan, Scalar, SlotId};
use ostinato_vulkan::{Buffer, Context, Pipeline, VkError};

fn vkr(op: &'static str) -> impl Fn(vk::Result) -> VkError {
    move |code| VkError::Vk { op, code: code.as_raw(), name: format!("{code:?}") }
}

/// A plan recorded into one Vulkan command buffer on the row's device buffers (one per root).
pub struct VulkanRun {
    ctx: Arc<Context>,
    buffers: Vec<Option<Arc<Buffer>>>,
    staging: Buffer,
    _pipelines: Vec<Pipeline>,
    programs: Vec<Program>,
    pub levels: usize,
    pub dispatches: usize,
}

/// The SPIR-V of each kernel of `plan`'s built-in WGSL twin, as written.
pub fn builtin_shaders(plan: &Plan) -> Result<Vec<Vec<u32>>, VkError> {
    plan.graph().kernels().iter().map(|k| ostinato_vulkan::shaders::spirv(&k.name)).collect()
}

/// The plan's nodes by dependency level ([`Plan::levels`]), in recording order within a level.
pub fn levels(plan: &Plan) -> Vec<Vec<usize>> {
    let depth = plan.levels();
    let mut out = vec![Vec::new(); depth.iter().copied().max().map_or(0, |d| d as usize + 1)];
    for (i, &d) in depth.iter().enumerate() {
        out[d as usize].push(i);
    }
    out
}

impl VulkanRun {
    /// Records `plan`: one command buffer per entry of `slot_values` (each a set of slot values baked
    /// into the push constants, as a Vulkan user records one command buffer per position), or one with
    /// the slots' initial values when `slot_values` is empty. `shaders` holds each kernel's SPIR-V (entry
    /// `main`, scalars as push constants: [`builtin_shaders`] for the built-ins). Every node must be a
    /// kernel with 32-bit scalars.
    pub fn new(
        ctx: &Arc<Context>,
        plan: &Plan,
        roots: &[Option<Arc<Buffer>>],
        slot_values: &[Vec<(SlotId, Scalar)>],
        shaders: &[Vec<u32>],
    ) -> Result<VulkanRun, VkError> {
        let g = plan.graph();
        if shaders.len() != g.kernels().len() {
            return Err(VkError::Argument(format!("{} shaders for {} kernels", shaders.len(), g.kernels().len())));
        }
        let mut pipelines: Vec<Option<Pipeline>> = Vec::new();
        for (k, spirv) in g.kernels().iter().zip(shaders) {
            let n_buf = k.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32;
            let n_scalar = k.params.len() as u32 - n_buf;
            if k.params.iter().any(|p| matches!(p.kind, ParamKind::Scalar(t) if t.size() != 4)) {
                return Err(VkError::NotApplicable(format!("kernel `{}` has 64-bit scalars", k.name)));
            }
            pipelines.push(Some(Pipeline::new(ctx, spirv, n_buf, 4 * n_scalar)?));
        }
        let buffers = roots.to_vec();
        let max = g.buffers().iter().map(|b| b.size).max().unwrap_or(0).max(4);
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
                    let pipeline = pipelines[kernel.index()].as_ref().ok_or_else(|| VkError::Argument("pipeline missing".into()))?;
                    let mut bufs = Vec::new();
                    let mut push = Vec::new();
                    for a in args {
                        match a {
                            Arg::Buffer(s) => {
                                let (root, start, end) = g.root_extent(*s);
                                if start % ctx.storage_alignment() != 0 {
                                    return Err(VkError::NotApplicable(format!("node {n}: offset {start} is not {}-aligned", ctx.storage_alignment())));
                                }
                                let buf: &Buffer = buffers[root.index()].as_deref().ok_or_else(|| VkError::Argument("root without memory".into()))?;
                                bufs.push((buf, start, end - start));
                            }
                            Arg::Scalar(v) => push.push(v.bits as u32),
                            Arg::Slot(slot) => {
                                let v = values.iter().find(|(s, _)| s == slot).map_or(g.slots()[slot.index()].initial, |(_, v)| *v);
                                push.push(v.bits as u32);
                            }
                            Arg::Whole(_) => return Err(VkError::Argument("unresolved whole-buffer arg".into())),
                        }
                    }
                    ds.push(Dispatch { pipeline, groups: launch.grid, buffers: bufs, push });
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
        self.staging.bytes().ok_or_else(|| VkError::Argument("staging not mapped".into()))?[..data.len()].copy_from_slice(data);
        let b = self.root(plan, buffer, data.len() as u64)?;
        ostinato_vulkan::copy(&self.ctx, &self.staging, 0, b, 0, data.len() as u64, None)
    }

    /// Reads a root buffer's bytes.
    pub fn read(&mut self, plan: &Plan, buffer: BufferId, out: &mut [u8]) -> Result<(), VkError> {
        let b = self.root(plan, buffer, out.len() as u64)?;
        ostinato_vulkan::copy(&self.ctx, b, 0, &self.staging, 0, out.len() as u64, None)?;
        out.copy_from_slice(&self.staging.bytes().ok_or_else(|| VkError::Argument("staging not mapped".into()))?[..out.len()]);
        Ok(())
    }

    fn root(&self, plan: &Plan, buffer: BufferId, len: u64) -> Result<&Buffer, VkError> {
        let d = plan.graph().buffers().get(buffer.index()).ok_or_else(|| VkError::Argument(format!("unknown buffer {buffer}")))?;
        if d.root.index() != buffer.index() || len > d.size {
            return Err(VkError::Argument(format!("buffer `{}`: only whole root buffers are copied", d.name)));
        }
        self.buffers[buffer.index()].as_deref().ok_or_else(|| VkError::Argument("root without memory".into()))
    }

    /// One submission of command buffer `variant` (see [`VulkanRun::new`]): (GPU µs, host submit µs).
    pub fn run(&self, variant: usize) -> Result<(Option<f64>, f64), VkError> {
        self.programs.get(variant).ok_or_else(|| VkError::Argument(format!("no recorded variant {variant}")))?.run()
    }

    pub fn device_name(&self) -> &str {
        &self.ctx.name
    }
}

/// One dispatch of a recorded program.
struct Dispatch<'a> {
    pub pipeline: &'a Pipeline,
    /// Workgroups in x, y, z (the launch's grid).
    pub groups: [u32; 3],
    /// (buffer, offset, range) per binding.
    pub buffers: Vec<(&'a Buffer, u64, u64)>,
    pub push: Vec<u32>,
}

/// A command buffer recorded once (levels of dispatches separated by one memory barrier each),
/// bracketed by timestamps, submitted per sample.
struct Program {
    ctx: Arc<Context>,
    cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    query: vk::QueryPool,
    fence: vk::Fence,
}

impl Program {
    fn record(ctx: &Arc<Context>, levels: &[Vec<Dispatch>]) -> Result<Program, VkError> {
        let d = ctx.device();
        let n: u32 = levels.iter().map(|l| l.len() as u32).sum::<u32>().max(1);
        let nb: u32 = levels.iter().flatten().map(|x| x.buffers.len() as u32).sum::<u32>().max(1);
        let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(nb)];
        // SAFETY: valid create info.
        let pool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes), None) }
            .map_err(vkr("vkCreateDescriptorPool"))?;
        let qi = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2);
        // SAFETY: valid create info.
        let query = unsafe { d.create_query_pool(&qi, None) }.map_err(vkr("vkCreateQueryPool"))?;
        let prog = Program { ctx: ctx.clone(), cmd: ctx.command_buffer()?, pool, query, fence: ctx.fence()? };
        let cmd = prog.cmd;
        // SAFETY: recording into our own fresh command buffer; every handle used belongs to this device
        // and outlives the program (the caller keeps pipelines and buffers alive while it replays).
        unsafe {
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()).map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_reset_query_pool(cmd, query, 0, 2);
            d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, query, 0);
            for (li, level) in levels.iter().enumerate() {
                if li > 0 {
                    let mb = [vk::MemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &mb,
                        &[],
                        &[],
                    );
                }
                for x in level {
                    let (pipeline, layout, set_layout) = x.pipeline.handles();
                    let layouts = [set_layout];
                    let ai = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
                    let set = d.allocate_descriptor_sets(&ai).map_err(vkr("vkAllocateDescriptorSets"))?[0];
                    let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
                        x.buffers.iter().map(|(b, off, range)| [vk::DescriptorBufferInfo::default().buffer(b.handle()).offset(*off).range(*range)]).collect();
                    let writes: Vec<vk::WriteDescriptorSet> = infos
                        .iter()
                        .enumerate()
                        .map(|(i, info)| {
                            vk::WriteDescriptorSet::default()
                                .dst_set(set)
                                .dst_binding(i as u32)
                                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                                .buffer_info(info)
                        })
                        .collect();
                    d.update_descriptor_sets(&writes, &[]);
                    d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
                    d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
                    let push: Vec<u8> = x.push.iter().flat_map(|v| v.to_le_bytes()).collect();
                    if !push.is_empty() {
                        d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                    }
                    d.cmd_dispatch(cmd, x.groups[0], x.groups[1], x.groups[2]);
                }
            }
            d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, query, 1);
            d.end_command_buffer(cmd).map_err(vkr("vkEndCommandBuffer"))?;
        }
        Ok(prog)
    }

    /// Submits once and waits. Returns (GPU µs between the timestamps if supported, host µs of submit).
    fn run(&self) -> Result<(Option<f64>, f64), VkError> {
        let host_us = self.ctx.submit_wait(self.cmd, self.fence, None)?;
        let (period_ns, timestamps) = self.ctx.timestamp_period();
        if !timestamps {
            return Ok((None, host_us));
        }
        let mut ts = [0u64; 2];
        // SAFETY: two 64-bit results of our own query pool, written by the completed submit.
        unsafe { self.ctx.device().get_query_pool_results(self.query, 0, &mut ts, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
            .map_err(vkr("vkGetQueryPoolResults"))?;
        Ok((Some(ts[1].wrapping_sub(ts[0]) as f64 * period_ns / 1e3), host_us))
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: our own objects; the last submit was waited for.
        unsafe {
            let d = self.ctx.device();
            d.free_command_buffers(self.ctx.command_pool(), &[self.cmd]);
            d.destroy_fence(self.fence, None);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}
