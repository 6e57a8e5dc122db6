//! A plan's lanes on separate queues (an FFI module): each lane's segments ([`crate::lanes`]) submitted
//! to its queue per replay, ordered by one timeline semaphore per lane.

#![allow(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::error::vkr;
use crate::ffi::{timeout_ns, Context};
use crate::record::Finished;
use crate::VkError;

/// A lane's recorded segment and the segments (lane, index) it waits for in the same replay.
pub(crate) type LaneSegment = (Finished, Vec<(usize, usize)>);

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
            // SAFETY: every command buffer is fully recorded for simultaneous use; the semaphores are
            // this device's timeline semaphores and every value signalled grows from replay to replay.
            unsafe { self.ctx.queue_submit(l % self.ctx.queues.len(), &infos, vk::Fence::null()) }?;
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

    /// Waits for every submitted replay, at most `timeout`.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), VkError> {
        if self.submitted == 0 {
            return Ok(());
        }
        let values: Vec<u64> = (0..self.lanes.len()).map(|l| self.last_value(l, self.submitted)).collect();
        let wi = vk::SemaphoreWaitInfo::default().semaphores(&self.sems).values(&values);
        // SAFETY: our own semaphores; every value waited for was submitted to be signalled.
        match unsafe { self.ctx.device.wait_semaphores(&wi, timeout_ns(timeout)) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(VkError::Timeout {
                exec: format!("an exec on {} (lanes on {} queues)", self.ctx.name, self.ctx.queues.len()),
                ms: timeout.map_or(0, |t| t.as_millis()),
            }),
            Err(e) => Err(vkr("vkWaitSemaphores")(e)),
        }
    }

    /// GPU µs of the last completed replay: the earliest lane start to the latest lane end.
    pub(crate) fn last_gpu_us(&self) -> Result<Option<f64>, VkError> {
        if !self.ctx.timestamps || self.submitted == 0 || self.busy() {
            return Ok(None);
        }
        let (mut start, mut end) = (u64::MAX, 0u64);
        for lane in &self.lanes {
            // Query 0 of a lane's first segment and query 1 of its last were written by the completed replay.
            start = start.min(lane[0].0.timestamp(0)?);
            end = end.max(lane[lane.len() - 1].0.timestamp(1)?);
        }
        Ok(Some(end.wrapping_sub(start) as f64 * self.ctx.timestamp_period_ns / 1e3))
    }
}

impl Drop for LaneRun {
    fn drop(&mut self) {
        // The exec drops its submission only once every replay completed (or leaks it whole): check
        // once more, and leak rather than free what a replay may still use.
        if self.busy() {
            std::mem::forget(std::mem::take(&mut self.lanes));
            return;
        }
        self.lanes.clear();
        // SAFETY: every submission completed (waited above); our own semaphores.
        unsafe {
            for s in self.sems.drain(..) {
                self.ctx.device.destroy_semaphore(s, None);
            }
        }
    }
}
