//! Recording the exec's command buffers (an FFI module): dispatches, copies, fills, barriers, events
//! and timestamps. What is recorded is decided by `commands.rs` and `lanes.rs`; how recorded buffers
//! are submitted per replay is `submit.rs` and `lane_run.rs`.

#![allow(unsafe_code)]

use std::sync::Arc;

use ash::vk;

use crate::error::vkr;
use crate::ffi::{Buffer, Context, Pipeline};
use crate::VkError;

/// The stages an ordering spans in a plan with copies or fills: compute dispatches and transfers.
const STAGES: vk::PipelineStageFlags =
    vk::PipelineStageFlags::from_raw(vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw());
const WRITES: vk::AccessFlags = vk::AccessFlags::from_raw(vk::AccessFlags::SHADER_WRITE.as_raw() | vk::AccessFlags::TRANSFER_WRITE.as_raw());
const ACCESSES: vk::AccessFlags = vk::AccessFlags::from_raw(
    vk::AccessFlags::SHADER_READ.as_raw()
        | vk::AccessFlags::SHADER_WRITE.as_raw()
        | vk::AccessFlags::TRANSFER_READ.as_raw()
        | vk::AccessFlags::TRANSFER_WRITE.as_raw(),
);

/// One command buffer being recorded (simultaneous use: a replay may be submitted while the previous
/// one runs; the exec's replay ordering orders them), its descriptor pool and its timestamp pair.
pub(crate) struct Recording {
    ctx: Arc<Context>,
    cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    query: vk::QueryPool,
    /// The stages every barrier spans, and the writes and accesses it orders: compute only, or compute
    /// and transfer where the plan copies or fills (an access mask may name only its stages' accesses).
    stages: vk::PipelineStageFlags,
    writes: vk::AccessFlags,
    accesses: vk::AccessFlags,
    /// Set by `finish`: the objects now belong to the `Recorded`.
    handed_over: bool,
}

impl Recording {
    /// Begins recording, with room for `sets` descriptor sets of `descriptors` storage buffers in all;
    /// `transfers`: the plan has copies or fills (its barriers then span the transfer stage too).
    pub(crate) fn begin(ctx: &Arc<Context>, sets: u32, descriptors: u32, transfers: bool) -> Result<Recording, VkError> {
        Self::begin_segment(ctx, sets, descriptors, transfers, true)
    }

    /// Like [`Recording::begin`]; the start timestamp (query 0) only where `start_stamp` (a lane's first
    /// segment: the others' stamps are never written, so never read).
    pub(crate) fn begin_segment(ctx: &Arc<Context>, sets: u32, descriptors: u32, transfers: bool, start_stamp: bool) -> Result<Recording, VkError> {
        Self::begin_with(ctx, sets, descriptors, transfers, 2, start_stamp)
    }

    /// Like [`Recording::begin`] with `queries` timestamps (at least 1) for [`Recording::stamp`] and no
    /// start timestamp of its own: a traced recording.
    pub(crate) fn begin_traced(ctx: &Arc<Context>, sets: u32, descriptors: u32, transfers: bool, queries: u32) -> Result<Recording, VkError> {
        Self::begin_with(ctx, sets, descriptors, transfers, queries.max(1), false)
    }

    fn begin_with(ctx: &Arc<Context>, sets: u32, descriptors: u32, transfers: bool, queries: u32, start_stamp: bool) -> Result<Recording, VkError> {
        let d = &ctx.device;
        let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(descriptors.max(1))];
        // SAFETY: valid create info.
        let pool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(sets.max(1)).pool_sizes(&sizes), None) }
            .map_err(vkr("vkCreateDescriptorPool"))?;
        let qi = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(queries);
        // SAFETY: valid create info.
        let query = match unsafe { d.create_query_pool(&qi, None) } {
            Ok(q) => q,
            Err(e) => {
                // SAFETY: our own pool, unused.
                unsafe { d.destroy_descriptor_pool(pool, None) };
                return Err(vkr("vkCreateQueryPool")(e));
            }
        };
        let (stages, writes, accesses) = if transfers {
            (STAGES, WRITES, ACCESSES)
        } else {
            (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)
        };
        let r = Recording { ctx: ctx.clone(), cmd: ctx.command_buffer()?, pool, query, stages, writes, accesses, handed_over: false };
        let bi = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
        // SAFETY: a fresh command buffer of this device.
        unsafe { d.begin_command_buffer(r.cmd, &bi) }.map_err(vkr("vkBeginCommandBuffer"))?;
        // SAFETY: recording; the query pool is ours.
        unsafe {
            d.cmd_reset_query_pool(r.cmd, query, 0, queries);
            if start_stamp {
                d.cmd_write_timestamp(r.cmd, vk::PipelineStageFlags::TOP_OF_PIPE, query, 0);
            }
        }
        Ok(r)
    }

    /// An execution dependency from every earlier command (in submission order: the previous replay
    /// too) to every later one, with the memory dependency for `buffers` (bytes (offset, size) of each)
    /// where writes must become visible; `memory_all` makes it cover all memory instead.
    pub(crate) fn barrier(&self, buffers: &[(&Buffer, u64, u64)], memory_all: bool) {
        let bb: Vec<vk::BufferMemoryBarrier> = buffers
            .iter()
            .map(|(b, off, size)| {
                vk::BufferMemoryBarrier::default()
                    .src_access_mask(self.writes)
                    .dst_access_mask(self.accesses)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .buffer(b.buffer)
                    .offset(*off)
                    .size(*size)
            })
            .collect();
        let mb = [vk::MemoryBarrier::default().src_access_mask(self.writes).dst_access_mask(self.accesses)];
        // SAFETY: recording into our command buffer; the buffers are live buffers of this device.
        unsafe {
            self.ctx.device.cmd_pipeline_barrier(self.cmd, self.stages, self.stages, vk::DependencyFlags::empty(), if memory_all { &mb } else { &[] }, &bb, &[])
        };
    }

    /// Binds `pipeline` with `bindings` (buffer, offset, range) and `push` constants (may be empty), and
    /// dispatches `groups` workgroups.
    pub(crate) fn dispatch(&self, pipeline: &Pipeline, bindings: &[(&Buffer, u64, u64)], push: &[u8], groups: [u32; 3]) -> Result<(), VkError> {
        let d = &self.ctx.device;
        let layouts = [pipeline.set_layout];
        let ai = vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
        // SAFETY: a pool of this device sized for every node's set.
        let set = unsafe { d.allocate_descriptor_sets(&ai) }.map_err(vkr("vkAllocateDescriptorSets"))?[0];
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
            bindings.iter().map(|(b, off, range)| [vk::DescriptorBufferInfo::default().buffer(b.buffer).offset(*off).range(*range)]).collect();
        let writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default().dst_set(set).dst_binding(i as u32).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(info)
            })
            .collect();
        // SAFETY: the set was just allocated; every buffer is live; recording into our command buffer.
        unsafe {
            d.update_descriptor_sets(&writes, &[]);
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline.pipeline);
            d.cmd_bind_descriptor_sets(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline.layout, 0, &[set], &[]);
            if !push.is_empty() {
                d.cmd_push_constants(self.cmd, pipeline.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
            d.cmd_dispatch(self.cmd, groups[0], groups[1], groups[2]);
        }
        Ok(())
    }

    /// Writes timestamp query `index`: at the top of the pipe (once the queue reached this command:
    /// after the barriers recorded before it) for a start, at the bottom (once every earlier command
    /// completed) for an `end`.
    pub(crate) fn stamp(&self, index: u32, end: bool) {
        let stage = if end { vk::PipelineStageFlags::BOTTOM_OF_PIPE } else { vk::PipelineStageFlags::TOP_OF_PIPE };
        // SAFETY: recording into our command buffer; the query pool is ours and was sized (and reset)
        // for every index the caller writes.
        unsafe { self.ctx.device.cmd_write_timestamp(self.cmd, stage, self.query, index) };
    }

    /// `vkCmdCopyBuffer` of `len` bytes.
    pub(crate) fn copy(&self, src: &Buffer, src_off: u64, dst: &Buffer, dst_off: u64, len: u64) {
        // SAFETY: live buffers; the caller checked the regions lie inside them and do not overlap.
        unsafe { self.ctx.device.cmd_copy_buffer(self.cmd, src.buffer, dst.buffer, &[vk::BufferCopy { src_offset: src_off, dst_offset: dst_off, size: len }]) };
    }

    /// `vkCmdFillBuffer`: `size` bytes (a multiple of 4) at `off` (a multiple of 4) with the u32 `value`.
    pub(crate) fn fill(&self, dst: &Buffer, off: u64, size: u64, value: u32) {
        // SAFETY: a live buffer; the caller checked alignment and bounds.
        unsafe { self.ctx.device.cmd_fill_buffer(self.cmd, dst.buffer, off, size, value) };
    }

    /// `vkCmdWaitEvents` on `event` (set by an earlier submission's [`Recording::set_event`], or the
    /// host), with a memory dependency from every write before the set to every access after the wait.
    pub(crate) fn wait_event(&self, event: vk::Event) {
        let mb = [vk::MemoryBarrier::default().src_access_mask(self.writes).dst_access_mask(self.accesses)];
        // SAFETY: recording into our command buffer; the event is this device's.
        unsafe { self.ctx.device.cmd_wait_events(self.cmd, &[event], self.stages, self.stages, &mb, &[], &[]) };
    }

    /// `vkCmdSetEvent` on `event` once every earlier command's work at the barrier stages is done.
    pub(crate) fn set_event(&self, event: vk::Event) {
        // SAFETY: recording into our command buffer; the event is this device's.
        unsafe { self.ctx.device.cmd_set_event(self.cmd, event, self.stages) };
    }

    /// Ends recording (with the end timestamp, query 1).
    pub(crate) fn finish(self) -> Result<Finished, VkError> {
        self.finish_segment(true)
    }

    /// Ends a lane's segment, with the end timestamp (query 1) where `end_stamp` (its last segment).
    pub(crate) fn finish_segment(mut self, end_stamp: bool) -> Result<Finished, VkError> {
        let d = &self.ctx.device;
        // SAFETY: recording into our command buffer.
        unsafe {
            if end_stamp {
                d.cmd_write_timestamp(self.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.query, 1);
            }
            d.end_command_buffer(self.cmd).map_err(vkr("vkEndCommandBuffer"))?;
        }
        self.handed_over = true;
        Ok(Finished { ctx: self.ctx.clone(), cmd: self.cmd, pool: self.pool, query: self.query })
    }
}

/// A finished command buffer (a whole replay's, or a lane's segment), its descriptor pool and its
/// timestamp pair. Its owner drops it only once no submission of it can still run.
pub(crate) struct Finished {
    ctx: Arc<Context>,
    pub(crate) cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    pub(crate) query: vk::QueryPool,
}

impl Finished {
    /// Timestamp `index` (0: start, 1: end) of the last completed submission, in device ticks.
    pub(crate) fn timestamp(&self, index: u32) -> Result<u64, VkError> {
        let mut t = [0u64; 1];
        // SAFETY: one 64-bit result of our own query pool, written by a completed submission.
        unsafe { self.ctx.device.get_query_pool_results(self.query, index, &mut t, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
            .map_err(vkr("vkGetQueryPoolResults"))?;
        Ok(t[0])
    }
}

impl Finished {
    /// Timestamps `0..count` of the last completed submission, in device ticks.
    pub(crate) fn timestamps(&self, count: u32) -> Result<Vec<u64>, VkError> {
        let mut t = vec![0u64; count as usize];
        if count == 0 {
            return Ok(t);
        }
        // SAFETY: `count` 64-bit results of our own query pool (sized for them), all written by the
        // completed submission.
        unsafe { self.ctx.device.get_query_pool_results(self.query, 0, &mut t, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
            .map_err(vkr("vkGetQueryPoolResults"))?;
        Ok(t)
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        // SAFETY: our own objects; the owner drops them only once no submission of them can run.
        unsafe {
            let d = &self.ctx.device;
            d.free_command_buffers(self.ctx.cmd_pool, &[self.cmd]);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.handed_over {
            return;
        }
        // SAFETY: a recording abandoned before it finished was never submitted.
        unsafe {
            let d = &self.ctx.device;
            d.free_command_buffers(self.ctx.cmd_pool, &[self.cmd]);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}
