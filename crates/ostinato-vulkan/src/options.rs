//! What an exec of the Vulkan backend may be told: which queues it uses, whether it fuses chains, how a
//! replay is ordered after the previous one, and how long a wait may take.

use std::time::Duration;

pub use ostinato::fusion::FusionMode;
use ostinato::Named;

/// How long a wait for replays may take by default before the exec is faulted (as on CUDA).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// An exec's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VulkanOptions {
    pub queues: QueueMode,
    /// Chain fusion: lanes of dependent one-workgroup dispatches of one workgroup shape become one
    /// dispatch (`crate::fusion`).
    pub fusion: FusionMode,
    /// How a replay is ordered after the previous one (`docs/fences-vulkan.md`).
    pub ordering: ReplayOrdering,
    /// How long `wait` (and a drop, a `set_slot`, a read or write, which wait first) may wait for
    /// submitted replays; past it the exec is faulted. `None`: for ever.
    pub wait_timeout: Option<Duration>,
    /// Whether a node whose every slice starts on a binding boundary runs its kernel as written
    /// (`true`, the default: the module before the element-offset rewrite, a `.spv` file's words as
    /// given), or, like every other node, the build that adds an element offset to each index
    /// (`false`: an ablation, docs/fences-vulkan.md).
    pub as_written: bool,
}

impl Default for VulkanOptions {
    fn default() -> Self {
        VulkanOptions {
            queues: QueueMode::default(),
            fusion: FusionMode::default(),
            ordering: ReplayOrdering::default(),
            wait_timeout: Some(DEFAULT_WAIT_TIMEOUT),
            as_written: true,
        }
    }
}

/// How a Vulkan exec uses the device's compute queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueMode {
    /// One command buffer on one queue (barriers order everything).
    #[default]
    One,
    /// Each plan lane on a queue of its own (as many as the device has, up to
    /// [`crate::MAX_QUEUES`]), cross-lane edges as timeline-semaphore waits ([`crate::lanes`]);
    /// one queue where the plan has one lane, or the device one queue or no timeline semaphores,
    /// with the reason in `VulkanExec::lanes_fallback`. Replays are ordered by the lanes'
    /// semaphores ([`ReplayOrdering`] does not apply). A study option: measured slower than one
    /// queue on the H200 except for long independent lanes (docs/fences-vulkan.md).
    Lanes,
}

/// How a replay on one queue is ordered after the previous replay of the same exec (submissions on
/// one queue may overlap: without an ordering, a replay's first node could run beside the previous
/// replay's last). Every mode is correct by the Vulkan memory model; they differ in what the device
/// pays per replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReplayOrdering {
    /// A full pipeline barrier recorded at the start of the command buffer: paid on every replay.
    Barrier,
    /// No ordering where the exec knows the previous replay completed (its timeline value or fence is
    /// signalled, which the host saw); else the barrier, as a one-barrier command buffer submitted
    /// before the replay's.
    #[default]
    Skip,
    /// Each replay's submission waits on the timeline semaphore value the previous one signals
    /// (barrier where the device has no timeline semaphores).
    Timeline,
    /// Two recordings of the command buffer: replay `k` waits (`vkCmdWaitEvents`) for the event replay
    /// `k - 1` sets at its end; the host resets an event once the replay that waited on it completed
    /// (so a replay may wait on the host for the one before the previous to finish).
    Events,
}

impl ReplayOrdering {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayOrdering::Barrier => "barrier",
            ReplayOrdering::Skip => "skip",
            ReplayOrdering::Timeline => "timeline",
            ReplayOrdering::Events => "events",
        }
    }
}

impl Named for ReplayOrdering {
    const ALL: &'static [Self] = &[ReplayOrdering::Skip, ReplayOrdering::Barrier, ReplayOrdering::Timeline, ReplayOrdering::Events];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl QueueMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::One => "one",
            QueueMode::Lanes => "lanes",
        }
    }
}

impl Named for QueueMode {
    const ALL: &'static [Self] = &[QueueMode::One, QueueMode::Lanes];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for o in ReplayOrdering::ALL {
            assert_eq!(ReplayOrdering::from_name(o.name()), Some(*o));
        }
        for q in QueueMode::ALL {
            assert_eq!(QueueMode::from_name(q.name()), Some(*q));
        }
        assert_eq!(ReplayOrdering::from_name("fence"), None);
        assert_eq!(VulkanOptions::default().wait_timeout, Some(DEFAULT_WAIT_TIMEOUT));
    }
}
