//! Recording and submitting the backend's one command buffer (an FFI module: every Vulkan call of the
//! backend's exec is here). The command list it records is decided by `commands.rs`.

#![allow(unsafe_code)]

use std::sync::Arc;

use ash::vk;

use crate::ffi::{Buffer, Context, Pipeline};
use crate::VkError;

fn vkr(op: &'static str) -> impl Fn(vk::Result) -> VkError {
    move |code| VkError::Vk { op, code: code.as_raw(), name: format!("{code:?}") }
}

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
/// one runs; the leading barrier orders them), its descriptor pool and its timestamp pair.
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
        let d = &ctx.device;
        let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(descriptors.max(1))];
        // SAFETY: valid create info.
        let pool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(sets.max(1)).pool_sizes(&sizes), None) }
            .map_err(vkr("vkCreateDescriptorPool"))?;
        let qi = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2);
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
            d.cmd_reset_query_pool(r.cmd, query, 0, 2);
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

    /// Ends recording.
    pub(crate) fn finish(mut self) -> Result<Recorded, VkError> {
        let d = &self.ctx.device;
        // SAFETY: recording into our command buffer.
        unsafe {
            d.cmd_write_timestamp(self.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.query, 1);
            d.end_command_buffer(self.cmd).map_err(vkr("vkEndCommandBuffer"))?;
        }
        self.handed_over = true;
        Ok(Recorded { ctx: self.ctx.clone(), cmd: self.cmd, pool: self.pool, query: self.query, in_flight: Vec::new(), free: Vec::new() })
    }

    /// Ends a lane's segment, with the end timestamp (query 1) where `end_stamp` (its last segment).
    pub(crate) fn finish_segment(mut self, end_stamp: bool) -> Result<SegmentBuffer, VkError> {
        let d = &self.ctx.device;
        // SAFETY: recording into our command buffer.
        unsafe {
            if end_stamp {
                d.cmd_write_timestamp(self.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.query, 1);
            }
            d.end_command_buffer(self.cmd).map_err(vkr("vkEndCommandBuffer"))?;
        }
        self.handed_over = true;
        Ok(SegmentBuffer { ctx: self.ctx.clone(), cmd: self.cmd, pool: self.pool, query: self.query })
    }
}

/// A finished segment of one lane (see [`crate::lanes`]).
pub(crate) struct SegmentBuffer {
    ctx: Arc<Context>,
    cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    query: vk::QueryPool,
}

impl Drop for SegmentBuffer {
    fn drop(&mut self) {
        // SAFETY: our own objects; the `LaneRun` owning this segment waited for every submission.
        unsafe {
            let d = &self.ctx.device;
            d.free_command_buffers(self.ctx.cmd_pool, &[self.cmd]);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}

/// A lane's recorded segment and the segments (lane, index) it waits for in the same replay.
pub(crate) type LaneSegment = (SegmentBuffer, Vec<(usize, usize)>);

/// A plan's lanes on separate queues: each lane's segments submitted to its queue per replay, ordered
/// by one timeline semaphore per lane. Segment `k` of lane `l` signals `replay * stride + k + 1` on
/// lane `l`'s semaphore; it waits for the segments it depends on in the same replay, and a lane's
/// first segment waits for every lane's last segment of the previous replay (which orders replays).
pub(crate) struct LaneRun {
    ctx: Arc<Context>,
    /// Per lane: its segments and what each waits for (lane, segment) in the same replay.
    lanes: Vec<Vec<LaneSegment>>,
    sems: Vec<vk::Semaphore>,
    stride: u64,
    /// Replays submitted.
    submitted: u64,
}

impl LaneRun {
    pub(crate) fn new(ctx: &Arc<Context>, lanes: Vec<Vec<LaneSegment>>) -> Result<LaneRun, VkError> {
        let stride = lanes.iter().map(Vec::len).max().unwrap_or(1) as u64;
        let mut run = LaneRun { ctx: ctx.clone(), lanes: Vec::new(), sems: Vec::new(), stride, submitted: 0 };
        for _ in 0..lanes.len() {
            let mut ti = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
            let ci = vk::SemaphoreCreateInfo::default().push_next(&mut ti);
            // SAFETY: valid create info; the device was created with timeline semaphores (more than one
            // queue is opened only then).
            run.sems.push(unsafe { ctx.device.create_semaphore(&ci, None) }.map_err(vkr("vkCreateSemaphore"))?);
        }
        run.lanes = lanes;
        Ok(run)
    }

    fn last_value(&self, lane: usize, replay: u64) -> u64 {
        replay * self.stride + self.lanes[lane].len() as u64
    }

    /// Submits one replay: every lane's segments to its queue, one `vkQueueSubmit` per lane.
    pub(crate) fn submit(&mut self) -> Result<(), VkError> {
        let r = self.submitted + 1;
        let n = self.lanes.len();
        for (l, lane) in self.lanes.iter().enumerate() {
            let mut waits: Vec<Vec<vk::Semaphore>> = Vec::with_capacity(lane.len());
            let mut wait_values: Vec<Vec<u64>> = Vec::with_capacity(lane.len());
            let mut stages: Vec<Vec<vk::PipelineStageFlags>> = Vec::with_capacity(lane.len());
            let signal_values: Vec<[u64; 1]> = (0..lane.len()).map(|k| [r * self.stride + k as u64 + 1]).collect();
            for (k, (_, deps)) in lane.iter().enumerate() {
                let mut w: Vec<(vk::Semaphore, u64)> = deps.iter().map(|&(l2, k2)| (self.sems[l2], r * self.stride + k2 as u64 + 1)).collect();
                if k == 0 && r > 1 {
                    w.extend((0..n).map(|l2| (self.sems[l2], self.last_value(l2, r - 1))));
                }
                stages.push(vec![vk::PipelineStageFlags::ALL_COMMANDS; w.len()]);
                waits.push(w.iter().map(|x| x.0).collect());
                wait_values.push(w.iter().map(|x| x.1).collect());
            }
            let signals = [self.sems[l]];
            let cmds: Vec<[vk::CommandBuffer; 1]> = lane.iter().map(|(s, _)| [s.cmd]).collect();
            let mut timeline: Vec<vk::TimelineSemaphoreSubmitInfo> = (0..lane.len())
                .map(|k| vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&wait_values[k]).signal_semaphore_values(&signal_values[k]))
                .collect();
            let infos: Vec<vk::SubmitInfo> = timeline
                .iter_mut()
                .enumerate()
                .map(|(k, t)| {
                    vk::SubmitInfo::default()
                        .wait_semaphores(&waits[k])
                        .wait_dst_stage_mask(&stages[k])
                        .command_buffers(&cmds[k])
                        .signal_semaphores(&signals)
                        .push_next(t)
                })
                .collect();
            let queue = self.ctx.queues[l % self.ctx.queues.len()];
            // SAFETY: every command buffer is fully recorded for simultaneous use; the semaphores are
            // this device's timeline semaphores and every value signalled grows from replay to replay.
            unsafe { self.ctx.device.queue_submit(queue, &infos, vk::Fence::null()) }.map_err(vkr("vkQueueSubmit"))?;
        }
        self.submitted = r;
        Ok(())
    }

    pub(crate) fn busy(&self) -> bool {
        (0..self.lanes.len()).any(|l| {
            // SAFETY: our own timeline semaphore.
            let v = unsafe { self.ctx.device.get_semaphore_counter_value(self.sems[l]) };
            v.map_or(true, |v| v < self.last_value(l, self.submitted))
        })
    }

    /// Waits for every submitted replay.
    pub(crate) fn wait(&mut self) -> Result<(), VkError> {
        if self.submitted == 0 {
            return Ok(());
        }
        let values: Vec<u64> = (0..self.lanes.len()).map(|l| self.last_value(l, self.submitted)).collect();
        let wi = vk::SemaphoreWaitInfo::default().semaphores(&self.sems).values(&values);
        // SAFETY: our own semaphores; every value waited for was submitted to be signalled.
        unsafe { self.ctx.device.wait_semaphores(&wi, u64::MAX) }.map_err(vkr("vkWaitSemaphores"))
    }

    /// GPU µs of the last completed replay: the earliest lane start to the latest lane end.
    pub(crate) fn last_gpu_us(&self) -> Result<Option<f64>, VkError> {
        if !self.ctx.timestamps || self.submitted == 0 || self.busy() {
            return Ok(None);
        }
        let (mut start, mut end) = (u64::MAX, 0u64);
        for lane in &self.lanes {
            let (first, last) = (&lane[0].0, &lane[lane.len() - 1].0);
            let (mut a, mut b) = ([0u64; 1], [0u64; 1]);
            let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT;
            // SAFETY: query 0 of a lane's first segment and query 1 of its last were written by the
            // completed replay.
            unsafe {
                self.ctx.device.get_query_pool_results(first.query, 0, &mut a, flags).map_err(vkr("vkGetQueryPoolResults"))?;
                self.ctx.device.get_query_pool_results(last.query, 1, &mut b, flags).map_err(vkr("vkGetQueryPoolResults"))?;
            }
            start = start.min(a[0]);
            end = end.max(b[0]);
        }
        Ok(Some(end.wrapping_sub(start) as f64 * self.ctx.timestamp_period_ns / 1e3))
    }
}

impl Drop for LaneRun {
    fn drop(&mut self) {
        let _ = self.wait();
        self.lanes.clear();
        // SAFETY: every submission completed (waited above); our own semaphores.
        unsafe {
            for s in self.sems.drain(..) {
                self.ctx.device.destroy_semaphore(s, None);
            }
        }
    }
}

/// What an exec submits per replay: one command buffer on one queue, or its lanes on several.
pub(crate) enum Submission {
    Queue(Recorded),
    Lanes(LaneRun),
}

impl Submission {
    pub(crate) fn submit(&mut self) -> Result<(), VkError> {
        match self {
            Submission::Queue(r) => r.submit(),
            Submission::Lanes(r) => r.submit(),
        }
    }
    pub(crate) fn wait(&mut self) -> Result<(), VkError> {
        match self {
            Submission::Queue(r) => r.wait(),
            Submission::Lanes(r) => r.wait(),
        }
    }
    pub(crate) fn last_gpu_us(&self) -> Result<Option<f64>, VkError> {
        match self {
            Submission::Queue(r) => r.last_gpu_us(),
            Submission::Lanes(r) => r.last_gpu_us(),
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

/// A finished command buffer: submitted once per replay, each submission with its own fence.
pub(crate) struct Recorded {
    ctx: Arc<Context>,
    cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    query: vk::QueryPool,
    in_flight: Vec<vk::Fence>,
    free: Vec<vk::Fence>,
}

impl Recorded {
    pub(crate) fn submit(&mut self) -> Result<(), VkError> {
        let fence = match self.free.pop() {
            Some(f) => f,
            None => self.ctx.fence()?,
        };
        match self.ctx.submit(self.cmd, fence) {
            Ok(()) => {
                self.in_flight.push(fence);
                Ok(())
            }
            Err(e) => {
                self.free.push(fence);
                Err(e)
            }
        }
    }

    pub(crate) fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Waits for every submission.
    pub(crate) fn wait(&mut self) -> Result<(), VkError> {
        let r = self.ctx.wait_reset(&self.in_flight);
        if r.is_ok() {
            self.free.append(&mut self.in_flight);
        }
        r
    }

    /// GPU µs of the last completed submission (between its two timestamps), where the queue has them.
    pub(crate) fn last_gpu_us(&self) -> Result<Option<f64>, VkError> {
        if !self.ctx.timestamps || self.busy() {
            return Ok(None);
        }
        let mut ts = [0u64; 2];
        // SAFETY: two 64-bit results of our own query pool, written by a completed submission.
        unsafe { self.ctx.device.get_query_pool_results(self.query, 0, &mut ts, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
            .map_err(vkr("vkGetQueryPoolResults"))?;
        Ok(Some(ts[1].wrapping_sub(ts[0]) as f64 * self.ctx.timestamp_period_ns / 1e3))
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let _ = self.wait();
        // SAFETY: every submission completed (waited above); our own objects.
        unsafe {
            let d = &self.ctx.device;
            for f in self.free.drain(..).chain(self.in_flight.drain(..)) {
                d.destroy_fence(f, None);
            }
            d.free_command_buffers(self.ctx.cmd_pool, &[self.cmd]);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}
