//! A plan's lanes on separate queues (an FFI module): the segments of a [`LanePlan`] submitted per
//! replay, ordered by one timeline semaphore per lane, each queue's batches in one `vkQueueSubmit`
//! wherever they wait for nothing submitted later ([`LanePlan::submissions`]).
//!
//! Segment `k` of lane `l` signals `replay * stride + k + 1` on lane `l`'s semaphore. Every
//! submission structure is built once, pointing at arrays the run owns; a replay only writes the
//! wait and signal values in place, so it allocates nothing. At most
//! [`crate::MAX_REPLAYS_IN_FLIGHT`] replays are in flight, as on one queue.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::error::vkr;
use crate::ffi::{timeout_ns, Context};
use crate::lanes::LanePlan;
use crate::record::Finished;
use crate::submit::replay_to_wait_for;
use crate::VkError;

/// One batch: a segment's command buffer, its waits and its signal. The arrays are boxed so the
/// submit structures pointing at them stay valid wherever the batch moves.
struct Batch {
    /// What each wait is for: (lane, segment, of the previous replay).
    targets: Vec<(usize, usize, bool)>,
    /// The segment's index in its lane (its signal is `replay * stride + seg + 1`).
    seg: usize,
    wait_sems: Box<[vk::Semaphore]>,
    wait_values: Box<[Cell<u64>]>,
    stages: Box<[vk::PipelineStageFlags]>,
    cmd: Box<[vk::CommandBuffer; 1]>,
    signal: Box<[vk::Semaphore; 1]>,
    signal_value: Box<[Cell<u64>; 1]>,
    timeline: Box<vk::TimelineSemaphoreSubmitInfo<'static>>,
}

/// A plan's lanes on separate queues: their segments submitted per replay.
pub(crate) struct LaneRun {
    ctx: Arc<Context>,
    /// Each lane's recorded segments.
    lanes: Vec<Vec<Finished>>,
    sems: Vec<vk::Semaphore>,
    stride: u64,
    /// Every batch, in submission order, and the `vkSubmitInfo` of each (pointing into the batch).
    batches: Vec<Batch>,
    infos: Vec<vk::SubmitInfo<'static>>,
    /// The `vkQueueSubmit` calls of a replay: (queue index, first batch, batch count).
    calls: Vec<(usize, usize, usize)>,
    /// Each lane's last value in a replay is `replay * stride + last[l]`.
    last: Vec<u64>,
    /// Scratch for waits on every lane's semaphore.
    wait_values: Vec<u64>,
    /// Replays submitted, and the newest known complete.
    submitted: u64,
    completed: u64,
}

// SAFETY: the raw pointers in `infos` and `batches` point only into arrays the run owns (boxed, never
// moved or freed while the run lives) and are read only by `vkQueueSubmit` under `&mut self`; the
// Vulkan handles are plain identifiers that may move between threads.
unsafe impl Send for LaneRun {}

impl LaneRun {
    /// `recorded[l][k]`: segment `k` of lane `l` of `plan`, recorded; lane `l` submits to queue
    /// `l % queues` of `ctx`.
    pub(crate) fn new(ctx: &Arc<Context>, plan: &LanePlan, recorded: Vec<Vec<Finished>>, queues: usize) -> Result<LaneRun, VkError> {
        let n = plan.lanes.len();
        let stride = plan.lanes.iter().map(Vec::len).max().unwrap_or(1) as u64;
        let last = plan.lanes.iter().map(|l| l.len() as u64).collect();
        let mut run = LaneRun {
            ctx: ctx.clone(),
            lanes: Vec::new(),
            sems: Vec::new(),
            stride,
            batches: Vec::new(),
            infos: Vec::new(),
            calls: Vec::new(),
            last,
            wait_values: vec![0; n],
            submitted: 0,
            completed: 0,
        };
        for _ in 0..n {
            let mut ti = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
            let ci = vk::SemaphoreCreateInfo::default().push_next(&mut ti);
            // SAFETY: valid create info; the device was created with timeline semaphores (lanes are
            // recorded only then).
            run.sems.push(unsafe { ctx.device.create_semaphore(&ci, None) }.map_err(vkr("vkCreateSemaphore"))?);
        }
        let queues = queues.clamp(1, ctx.queue_count());
        for (q, call) in plan.submissions(queues) {
            run.calls.push((q, run.batches.len(), call.len()));
            for (l, k) in call {
                let mut targets: Vec<(usize, usize, bool)> = plan.lanes[l][k].waits.iter().map(|&(m, j)| (m, j, false)).collect();
                if k == 0 {
                    targets.extend(plan.replay_waits[l].iter().map(|&m| (m, plan.lanes[m].len() - 1, true)));
                }
                let wait_sems: Box<[vk::Semaphore]> = targets.iter().map(|t| run.sems[t.0]).collect();
                let waits = targets.len();
                run.batches.push(Batch {
                    targets,
                    seg: k,
                    wait_sems,
                    wait_values: (0..waits).map(|_| Cell::new(0)).collect(),
                    stages: vec![vk::PipelineStageFlags::ALL_COMMANDS; waits].into_boxed_slice(),
                    cmd: Box::new([recorded[l][k].cmd]),
                    signal: Box::new([run.sems[l]]),
                    signal_value: Box::new([Cell::new(0)]),
                    timeline: Box::default(),
                });
            }
        }
        for b in &mut run.batches {
            let t = &mut *b.timeline;
            t.wait_semaphore_value_count = b.wait_values.len() as u32;
            t.p_wait_semaphore_values = b.wait_values.as_ptr().cast();
            t.signal_semaphore_value_count = 1;
            t.p_signal_semaphore_values = b.signal_value.as_ptr().cast();
            let info = vk::SubmitInfo {
                p_next: (&*b.timeline as *const vk::TimelineSemaphoreSubmitInfo).cast(),
                wait_semaphore_count: b.wait_sems.len() as u32,
                p_wait_semaphores: b.wait_sems.as_ptr(),
                p_wait_dst_stage_mask: b.stages.as_ptr(),
                command_buffer_count: 1,
                p_command_buffers: b.cmd.as_ptr(),
                signal_semaphore_count: 1,
                p_signal_semaphores: b.signal.as_ptr(),
                ..Default::default()
            };
            run.infos.push(info);
        }
        run.lanes = recorded;
        Ok(run)
    }

    fn last_value(&self, lane: usize, replay: u64) -> u64 {
        replay * self.stride + self.last[lane]
    }

    /// Submits one replay (first waiting for old ones where [`crate::MAX_REPLAYS_IN_FLIGHT`] are in
    /// flight): each queue's batches, the values of this replay written into them.
    pub(crate) fn submit(&mut self, timeout: Option<Duration>) -> Result<(), VkError> {
        let r = self.submitted + 1;
        let oldest = replay_to_wait_for(r, self.completed);
        if oldest > 0 {
            self.wait_for(oldest, timeout)?;
        }
        for b in &self.batches {
            for (v, &(_, j, previous)) in b.wait_values.iter().zip(&b.targets) {
                // Nothing comes before the first replay: value 0 is signalled from the start.
                v.set(match (previous, r) {
                    (true, 1) => 0,
                    (true, _) => (r - 1) * self.stride + j as u64 + 1,
                    (false, _) => r * self.stride + j as u64 + 1,
                });
            }
            b.signal_value[0].set(r * self.stride + b.seg as u64 + 1);
        }
        for &(q, first, count) in &self.calls {
            // SAFETY: every command buffer is fully recorded for simultaneous use; every semaphore is
            // this run's timeline semaphore, each value signalled greater than any before it on its
            // semaphore; each batch waits only for batches submitted before it (or of the previous
            // replay); the structures point into arrays this run owns, written above.
            unsafe { self.ctx.queue_submit(q, &self.infos[first..first + count], vk::Fence::null()) }?;
        }
        self.submitted = r;
        Ok(())
    }

    /// Whether every submitted replay is known complete (polls every lane's semaphore once where the
    /// run does not know yet).
    pub(crate) fn idle(&mut self) -> Result<bool, VkError> {
        if self.completed == self.submitted {
            return Ok(true);
        }
        let mut done = self.submitted;
        for l in 0..self.sems.len() {
            // SAFETY: our own timeline semaphore.
            let v = unsafe { self.ctx.device.get_semaphore_counter_value(self.sems[l]) }.map_err(vkr("vkGetSemaphoreCounterValue"))?;
            done = done.min(v.saturating_sub(self.last[l]) / self.stride);
        }
        self.completed = self.completed.max(done);
        Ok(self.completed == self.submitted)
    }

    /// How many submitted replays are not known complete (polls the device).
    pub(crate) fn in_flight(&mut self) -> Result<u64, VkError> {
        self.idle()?;
        Ok(self.submitted - self.completed)
    }

    /// Waits until replay `replay` completed on every lane, at most `timeout`.
    fn wait_for(&mut self, replay: u64, timeout: Option<Duration>) -> Result<(), VkError> {
        if self.completed >= replay {
            return Ok(());
        }
        for l in 0..self.sems.len() {
            self.wait_values[l] = self.last_value(l, replay);
        }
        let wi = vk::SemaphoreWaitInfo::default().semaphores(&self.sems).values(&self.wait_values);
        // SAFETY: our own semaphores; every value waited for was submitted to be signalled.
        match unsafe { self.ctx.device.wait_semaphores(&wi, timeout_ns(timeout)) } {
            Ok(()) => {
                self.completed = replay;
                Ok(())
            }
            Err(vk::Result::TIMEOUT) => Err(VkError::Timeout {
                exec: format!("an exec on {} (lanes on {} queues)", self.ctx.name, self.ctx.queue_count()),
                ms: timeout.map_or(0, |t| t.as_millis()),
            }),
            Err(e) => Err(vkr("vkWaitSemaphores")(e)),
        }
    }

    /// Waits for every submitted replay, at most `timeout`.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), VkError> {
        self.wait_for(self.submitted, timeout)
    }

    /// GPU µs of the last completed replay: the earliest lane start to the latest lane end.
    pub(crate) fn last_gpu_us(&mut self) -> Result<Option<f64>, VkError> {
        if !self.ctx.timestamps || self.submitted == 0 || !self.idle()? {
            return Ok(None);
        }
        let (mut start, mut end) = (u64::MAX, 0u64);
        for lane in &self.lanes {
            // Query 0 of a lane's first segment and query 1 of its last were written by the completed replay.
            start = start.min(lane[0].timestamp(0)?);
            end = end.max(lane[lane.len() - 1].timestamp(1)?);
        }
        Ok(Some(end.wrapping_sub(start) as f64 * self.ctx.timestamp_period_ns / 1e3))
    }
}

impl Drop for LaneRun {
    fn drop(&mut self) {
        // The exec drops its submission only once every replay completed and its queues drained (or
        // leaks it whole): check once more, and leak rather than free what a replay may still use.
        if !self.idle().unwrap_or(false) {
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
