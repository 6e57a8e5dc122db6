//! Submitting an exec's recorded command buffer on one queue, once per replay, ordered after the
//! previous replay as [`ReplayOrdering`] says, and knowing when replays completed (an FFI module).
//!
//! Completion is a timeline semaphore where the device has them (replay `k` signals value `k`: no
//! per-replay object, no reset), else one fence per replay in flight. Why each ordering is correct
//! (Vulkan 1.3, "Synchronization and Cache Control"): a pipeline barrier's first scope is every
//! command earlier in submission order, the previous replays included; a semaphore signal makes the
//! writes of every command before it available and a wait makes them visible to the waiting batch; an
//! event set after a replay's commands and waited on with a memory barrier does the same inside the
//! queue; and where the host has seen a replay's completion (a timeline value or a fence it read
//! signalled), that replay's writes are available and the next submission, which the host makes
//! afterwards, makes all available writes visible to its commands (a queue submission's memory
//! dependency from earlier host operations), so no device-side ordering is needed.

#![allow(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::error::vkr;
use crate::ffi::{timeout_ns, Context};
use crate::options::ReplayOrdering;
use crate::record::Finished;
use crate::VkError;

/// The most replays of one exec in flight at once. Every submission the device has not finished
/// holds driver memory (about 1 KB each on NVIDIA's driver: 400 MB/s with nothing bounding them,
/// out of host memory after 79 s): a replay submitted while this many are in flight first waits
/// (within the exec's deadline) until at most half of them are, so memory stays the same whatever
/// the replay count, and the device still has half the bound queued while the host waits.
pub const MAX_REPLAYS_IN_FLIGHT: u64 = 64;

/// The replay a replay numbered `replay` waits for before it is submitted (0: none), so that at
/// most [`MAX_REPLAYS_IN_FLIGHT`] are in flight: where `completed` is the newest replay known done
/// and the bound is reached, the replay that leaves half of it in flight.
pub(crate) fn replay_to_wait_for(replay: u64, completed: u64) -> u64 {
    if replay - 1 - completed.min(replay - 1) < MAX_REPLAYS_IN_FLIGHT {
        0
    } else {
        replay - 1 - MAX_REPLAYS_IN_FLIGHT / 2
    }
}

/// How the exec learns that replays completed.
enum Completion {
    /// Replay `k` (from 1) signals value `k`.
    Timeline(vk::Semaphore),
    /// One fence per replay in flight (oldest first), and reset fences to reuse.
    Fences { in_flight: Vec<vk::Fence>, free: Vec<vk::Fence> },
}

/// A recorded command buffer on one queue: one recording, or two for [`ReplayOrdering::Events`].
pub(crate) struct QueueRun {
    ctx: Arc<Context>,
    ordering: ReplayOrdering,
    recordings: Vec<Finished>,
    /// [`ReplayOrdering::Skip`]: the one-barrier command buffer submitted before a replay that may
    /// overlap the previous one.
    barrier: Option<Finished>,
    /// [`ReplayOrdering::Events`]: the event recording `p` sets at its end (recording `p` waits on the
    /// other one at its start; the one the first replay waits on was set by a one-off command buffer
    /// when the exec was built).
    events: Vec<vk::Event>,
    completion: Completion,
    /// Replays submitted, and the highest one known complete.
    submitted: u64,
    completed: u64,
    /// How often a replay was submitted behind the previous one's barrier (Skip) or waited for it on
    /// the host (Events): replays the exec could not prove complete.
    ordered: u64,
}

impl QueueRun {
    /// `recordings`: one, or two (recording `p` waits on `events[1 - p]`, sets `events[p]`) for
    /// events; `barrier`: the one-barrier buffer for skip.
    pub(crate) fn new(
        ctx: &Arc<Context>,
        ordering: ReplayOrdering,
        recordings: Vec<Finished>,
        barrier: Option<Finished>,
        events: Vec<vk::Event>,
    ) -> Result<QueueRun, VkError> {
        let completion = if ctx.timeline {
            let mut ti = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
            let ci = vk::SemaphoreCreateInfo::default().push_next(&mut ti);
            // SAFETY: valid create info; the device was created with timeline semaphores.
            Completion::Timeline(unsafe { ctx.device.create_semaphore(&ci, None) }.map_err(vkr("vkCreateSemaphore"))?)
        } else {
            Completion::Fences { in_flight: Vec::new(), free: Vec::new() }
        };
        Ok(QueueRun { ctx: ctx.clone(), ordering, recordings, barrier, events, completion, submitted: 0, completed: 0, ordered: 0 })
    }

    /// Whether every submitted replay is known complete; polls the device (one status read) where
    /// the exec does not know yet.
    pub(crate) fn idle(&mut self) -> Result<bool, VkError> {
        if self.completed == self.submitted {
            return Ok(true);
        }
        let done = match &mut self.completion {
            // SAFETY: our own timeline semaphore.
            Completion::Timeline(sem) => unsafe { self.ctx.device.get_semaphore_counter_value(*sem) }.map_err(vkr("vkGetSemaphoreCounterValue"))?,
            Completion::Fences { in_flight, free } => {
                let Some(&last) = in_flight.last() else { return Ok(true) };
                // SAFETY: our own fence. A fence signalled by vkQueueSubmit covers every command
                // submitted to the queue before it, so the last one signalled means all are.
                if !unsafe { self.ctx.device.get_fence_status(last) }.map_err(vkr("vkGetFenceStatus"))? {
                    return Ok(false);
                }
                // SAFETY: our own signalled fences.
                unsafe { self.ctx.device.reset_fences(in_flight) }.map_err(vkr("vkResetFences"))?;
                free.append(in_flight);
                self.submitted
            }
        };
        self.completed = self.completed.max(done);
        Ok(self.completed == self.submitted)
    }

    /// Submits one replay, first waiting for old ones where [`MAX_REPLAYS_IN_FLIGHT`] are in
    /// flight. Allocates nothing once the exec has run (a test holds it to that): at most two
    /// command buffers and one wait, on the stack.
    pub(crate) fn submit(&mut self, timeout: Option<Duration>) -> Result<(), VkError> {
        let replay = self.submitted + 1;
        let oldest = replay_to_wait_for(replay, self.completed);
        if oldest > 0 {
            self.wait_for(oldest, timeout)?;
        }
        let mut cmds = [vk::CommandBuffer::null(); 2];
        let mut n = 0;
        let mut wait = None;
        match self.ordering {
            ReplayOrdering::Barrier => {}
            ReplayOrdering::Skip => {
                if !self.idle()? {
                    if let Some(b) = &self.barrier {
                        cmds[n] = b.cmd;
                        n += 1;
                    }
                    self.ordered += 1;
                }
            }
            ReplayOrdering::Timeline => {
                if let Completion::Timeline(sem) = self.completion {
                    wait = Some((sem, replay - 1));
                }
            }
            ReplayOrdering::Events => {
                // The event this replay sets was last waited on by the previous replay: reset it once
                // that replay completed (an event must not be reset while a wait on it may run).
                if replay > 1 {
                    if !self.idle()? {
                        self.ordered += 1;
                    }
                    self.wait_for(replay - 1, timeout)?;
                    let p = (replay - 1) as usize % 2;
                    // SAFETY: our own event; the replay that waited on it completed.
                    unsafe { self.ctx.device.reset_event(self.events[p]) }.map_err(vkr("vkResetEvent"))?;
                }
            }
        }
        cmds[n] = self.recordings[(replay - 1) as usize % self.recordings.len()].cmd;
        self.submit_cmds(&cmds[..=n], wait)
    }

    /// One `vkQueueSubmit` of `cmds`, waiting on `wait` (timeline semaphore, value) at all stages,
    /// signalling this replay's completion.
    fn submit_cmds(&mut self, cmds: &[vk::CommandBuffer], wait: Option<(vk::Semaphore, u64)>) -> Result<(), VkError> {
        let replay = self.submitted + 1;
        let (wait_sem, wait_value, stage) = match wait {
            Some((s, v)) => ([s], [v], [vk::PipelineStageFlags::ALL_COMMANDS]),
            None => ([vk::Semaphore::null()], [0], [vk::PipelineStageFlags::ALL_COMMANDS]),
        };
        let w = usize::from(wait.is_some());
        let (signal, fence) = match &mut self.completion {
            Completion::Timeline(sem) => ([*sem], vk::Fence::null()),
            Completion::Fences { free, .. } => (
                [vk::Semaphore::null()],
                match free.pop() {
                    Some(f) => f,
                    None => self.ctx.fence()?,
                },
            ),
        };
        let timeline = matches!(self.completion, Completion::Timeline(_));
        let signals = &signal[..usize::from(timeline)];
        let signal_values = [replay];
        let mut values =
            vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&wait_value[..w]).signal_semaphore_values(&signal_values[..signals.len()]);
        let mut info =
            vk::SubmitInfo::default().command_buffers(cmds).wait_semaphores(&wait_sem[..w]).wait_dst_stage_mask(&stage[..w]).signal_semaphores(signals);
        if timeline {
            info = info.push_next(&mut values);
        }
        // SAFETY: every command buffer is fully recorded for simultaneous use; the semaphore is this
        // device's timeline semaphore, signalled with a value above every earlier one; the fence (if
        // any) is unsignalled.
        let r = unsafe { self.ctx.queue_submit(0, &[info], fence) };
        if let Completion::Fences { in_flight, free } = &mut self.completion {
            match r {
                Ok(()) => in_flight.push(fence),
                Err(_) => free.push(fence),
            }
        }
        r?;
        self.submitted = replay;
        Ok(())
    }

    /// Waits until replay `replay` completed, at most `timeout`.
    fn wait_for(&mut self, replay: u64, timeout: Option<Duration>) -> Result<(), VkError> {
        if self.completed >= replay {
            return Ok(());
        }
        match &mut self.completion {
            Completion::Timeline(sem) => {
                let (sems, values) = ([*sem], [replay]);
                let wi = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
                // SAFETY: our own semaphore; the value was submitted to be signalled.
                match unsafe { self.ctx.device.wait_semaphores(&wi, timeout_ns(timeout)) } {
                    Ok(()) => {}
                    Err(vk::Result::TIMEOUT) => return Err(timed_out(&self.ctx, timeout)),
                    Err(e) => return Err(vkr("vkWaitSemaphores")(e)),
                }
                self.completed = replay;
            }
            Completion::Fences { in_flight, free } => {
                // Fences complete in submission order: wait for all up to `replay`'s.
                let upto = in_flight.len() - (self.submitted - replay) as usize;
                self.ctx.wait_fences(&in_flight[..upto], timeout).map_err(|e| {
                    if matches!(e, VkError::Timeout { .. }) {
                        timed_out(&self.ctx, timeout)
                    } else {
                        e
                    }
                })?;
                // SAFETY: our own signalled fences.
                unsafe { self.ctx.device.reset_fences(&in_flight[..upto]) }.map_err(vkr("vkResetFences"))?;
                free.extend(in_flight.drain(..upto));
                self.completed = replay;
            }
        }
        Ok(())
    }

    /// Waits for every submitted replay, at most `timeout`.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), VkError> {
        self.wait_for(self.submitted, timeout)
    }

    /// How many submitted replays are not known complete (polls the device once).
    pub(crate) fn in_flight(&mut self) -> Result<u64, VkError> {
        self.idle()?;
        Ok(self.submitted - self.completed)
    }

    /// Replays the exec could not prove complete when the next was submitted (they were ordered by a
    /// barrier, or waited for on the host).
    pub(crate) fn ordered_replays(&self) -> u64 {
        self.ordered
    }

    /// GPU µs of the last replay (between its two timestamps), once it completed.
    pub(crate) fn last_gpu_us(&mut self) -> Result<Option<f64>, VkError> {
        if !self.ctx.timestamps || self.submitted == 0 || !self.idle()? {
            return Ok(None);
        }
        let r = &self.recordings[(self.submitted - 1) as usize % self.recordings.len()];
        let (a, b) = (r.timestamp(0)?, r.timestamp(1)?);
        Ok(Some(b.wrapping_sub(a) as f64 * self.ctx.timestamp_period_ns / 1e3))
    }
}

/// The timeout error of an exec's wait.
fn timed_out(ctx: &Context, timeout: Option<Duration>) -> VkError {
    VkError::Timeout { exec: format!("an exec on {}", ctx.name), ms: timeout.map_or(0, |t| t.as_millis()) }
}

impl Drop for QueueRun {
    fn drop(&mut self) {
        // The exec drops its submission only once every replay completed (or leaks it whole when it
        // could not know): check once more, and leak rather than free objects a replay may still use.
        if !self.idle().unwrap_or(false) {
            std::mem::forget(std::mem::take(&mut self.recordings));
            std::mem::forget(self.barrier.take());
            return;
        }
        // SAFETY: every submission completed; our own objects.
        unsafe {
            let d = &self.ctx.device;
            match &mut self.completion {
                Completion::Timeline(sem) => d.destroy_semaphore(*sem, None),
                Completion::Fences { in_flight, free } => {
                    for f in free.drain(..).chain(in_flight.drain(..)) {
                        d.destroy_fence(f, None);
                    }
                }
            }
            for e in self.events.drain(..) {
                d.destroy_event(e, None);
            }
        }
    }
}
