//! How an exec is built and replayed: graph or eager mode, the driver calls that build the graph, the
//! streams' priority, which thread makes the replay calls; and what the user owns and lends an exec
//! (device memory, a stream).

use std::time::Duration;

use crate::fusion::FusionMode;
use crate::lower::PdlPolicy;
use ostinato_cuda_code::PdlTrigger;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// One explicit CUDA graph built node by node from the plan's edges.
    Graph,
    /// Node-by-node launches, one stream per lane, events for cross-lane edges.
    Eager,
}

impl ExecMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecMode::Graph => "graph",
            ExecMode::Eager => "eager",
        }
    }
}

/// How graph mode hands the lowering's nodes and edges to the driver. Every way submits the same nodes
/// and exactly the lowering's edges (a GPU test reads them back); they differ only in the driver calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GraphBuild {
    /// Every node first, then the edges in one `cuGraphAddDependencies_v2` call per edge type (full,
    /// then programmatic). One call with both types mixed gives every edge the first edge's type on
    /// driver 580 (docs/fences.md decision 4), so the types are never mixed in a call.
    #[default]
    Bulk,
    /// Node by node in plan order, each added with its in-edges (`cuGraphAddNode_v2`).
    InOrder,
    /// Stream capture on the exec's stream, node by node in plan order, the capture's dependency set
    /// replaced by the node's in-edges before each launch (`cuStreamUpdateCaptureDependencies_v2`):
    /// the driver's capture path with the plan's edges, not the ones a stream order would imply.
    Capture,
}

impl GraphBuild {
    pub fn as_str(self) -> &'static str {
        match self {
            GraphBuild::Bulk => "bulk",
            GraphBuild::InOrder => "in-order",
            GraphBuild::Capture => "capture",
        }
    }
}

/// Priority of the streams an exec replays on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamPriority {
    /// The context's default priority, as `cuStreamCreate` gives.
    #[default]
    Default,
    /// The context's greatest priority: the GPU starts this exec's blocks before waiting blocks of
    /// lower-priority streams (a latency-critical graph beside background work).
    High,
}

/// Which thread makes an exec's driver calls for `replay` and `set_slot`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LaunchOn {
    /// The caller's: `replay` returns once the driver has taken the launch (`cuGraphLaunch`).
    #[default]
    Caller,
    /// A launch thread the exec owns: `replay` and `set_slot` post a command and return; the thread
    /// makes the driver calls in the same order, and every other call on the exec's stream (`wait`,
    /// timing events). It spins for `spin` after each command (a core busy while replays come faster
    /// than that) and then parks until the next one, which pays its wake-up. `wait` and buffer reads
    /// and writes return once the thread has run everything posted before them.
    Thread { spin: Duration },
}

impl LaunchOn {
    /// How long `thread` (the parsed name) keeps its launch thread awake after a command.
    pub const DEFAULT_SPIN: Duration = Duration::from_millis(5);
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchOn::Caller => "caller",
            LaunchOn::Thread { .. } => "thread",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    pub mode: ExecMode,
    pub pdl: PdlPolicy,
    /// Trigger placement of the main PDL build of the internal copy/fill kernels (nodes above
    /// `lower::EARLY_TRIGGER_MAX_BLOCKS` blocks); small nodes use the early build, nodes without
    /// programmatic edges the plain build.
    pub trigger: PdlTrigger,
    /// Graph mode: which driver calls build the graph.
    pub build: GraphBuild,
    /// Priority of the exec's streams (graph mode's one, eager mode's one per lane).
    pub priority: StreamPriority,
    /// Which thread calls the driver on replay and patch.
    pub launch: LaunchOn,
    /// Chain fusion: runs of dependent 1-block nodes replayed as one resident block (`crate::fusion`).
    pub fusion: FusionMode,
    /// Tile hand-offs: consumers that wait for exactly the producer blocks they need (`crate::handoff`).
    pub handoff: crate::handoff::HandoffMode,
    /// Tile staging: block-local fused chains keep their verified tiles in shared memory
    /// (`crate::fusion::stage`).
    pub tile_staging: TileStaging,
    /// Graph mode under the `auto` PDL policy and shape: whether the exec measures the other
    /// submissions `auto` could have made over its first replays and keeps the fastest
    /// ([`crate::Tune`]).
    pub tune: crate::Tune,
    /// A study setting of that measurement: how its first pass judges a candidate that changes only
    /// its edges' types ([`crate::EdgeTypesRule`]); not among the options the shells take.
    pub tune_edge_types: crate::EdgeTypesRule,
    /// How long `wait` (and every call that waits: reads, writes, timers) waits for submitted
    /// replays before it gives up with [`crate::CudaError::Timeout`]; `None` waits for ever.
    pub wait_timeout: Option<std::time::Duration>,
}

/// The default [`CudaOptions::wait_timeout`]: far longer than any replay of a retained graph takes,
/// short enough that a kernel that never ends becomes an error.
pub const DEFAULT_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether block-local fused chains stage their tiles in shared memory (`crate::fusion::stage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TileStaging {
    /// Wherever the rules of `crate::fusion::stage` allow (verified maps, plain accesses, a budget).
    #[default]
    Auto,
    /// Never: every member reads and writes device memory.
    Off,
}

impl ostinato::Named for TileStaging {
    const ALL: &'static [Self] = &[TileStaging::Auto, TileStaging::Off];
    fn name(self) -> &'static str {
        match self {
            TileStaging::Auto => "auto",
            TileStaging::Off => "off",
        }
    }
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            mode: ExecMode::Graph,
            pdl: PdlPolicy::default(),
            trigger: PdlTrigger::AfterWait,
            build: GraphBuild::default(),
            priority: StreamPriority::Default,
            launch: LaunchOn::Caller,
            fusion: FusionMode::default(),
            handoff: crate::handoff::HandoffMode::default(),
            tile_staging: TileStaging::default(),
            tune: crate::Tune::default(),
            tune_edge_types: crate::EdgeTypesRule::default(),
            wait_timeout: Some(DEFAULT_WAIT_TIMEOUT),
        }
    }
}

/// A CUDA stream the user owns (a `CUstream` handle of the device's primary context, e.g. a framework's
/// current stream) for an exec to replay on instead of a stream of its own: work the user enqueues on
/// it before a replay runs before the replay, and after it, after (with a launch thread: after
/// [`crate::CudaExec::flush`]). It must outlive the exec; the exec never destroys it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalStream {
    handle: u64,
}

impl ExternalStream {
    /// The stream whose driver handle (`CUstream`) is `handle`.
    ///
    /// # Safety
    /// `handle` must be a live stream of the device's primary context (the exec checks the context
    /// with the driver, but cannot tell a dangling handle from a live one), and it must outlive every
    /// exec instantiated on it.
    // `unsafe` states the caller's promise; the function itself performs no unsafe operation.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw(handle: u64) -> ExternalStream {
        ExternalStream { handle }
    }
    /// A stream this crate made or already vouched for (no new promise is made).
    pub(crate) fn vouched(handle: u64) -> ExternalStream {
        ExternalStream { handle }
    }
    /// The driver handle.
    pub fn handle(&self) -> u64 {
        self.handle
    }
}

/// Device memory the user owns, bound to a buffer in place of an allocation of the exec's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    ptr: u64,
    len: u64,
}

impl DeviceMemory {
    /// `len` bytes of device memory at device address `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory of the exec's device (or memory mapped into its context)
    /// that stays allocated, and that nothing else writes while a replay may run, for as long as any
    /// exec is bound to it. The exec checks the length against the buffer's declared size; it cannot
    /// check the address.
    // `unsafe` states the caller's promise; the function itself performs no unsafe operation.
    #[allow(unsafe_code)]
    pub unsafe fn new(ptr: u64, len: u64) -> DeviceMemory {
        DeviceMemory { ptr, len }
    }
    /// An allocation of this crate's own ([`crate::DeviceBuffer`]).
    pub(crate) fn vouched(ptr: u64, len: u64) -> DeviceMemory {
        DeviceMemory { ptr, len }
    }
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// True for zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Where the bytes lie in the process's device address space: two roots on overlapping memory are
    /// refused ([`ostinato::check_disjoint_roots`]).
    pub fn extent(&self) -> ostinato::MemoryExtent {
        ostinato::MemoryExtent { space: 0, start: self.ptr, len: self.len }
    }
}
