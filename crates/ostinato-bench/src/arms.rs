//! The arms of the matrix, on identical kernels. Ostinato arms instantiate the plan through a backend;
//! CUDA baselines submit the same kernels with the same arguments the way a skilled user writes them by
//! hand (eager streams; stream capture with fork/join; capture with PDL launch attributes).

use std::sync::Arc;
use std::time::Instant;

use crate::cuda_raw::Stream;
use ostinato::{Backend, BufferBinding, BufferId, Exec, Plan, PlanOptions, Scalar};
use ostinato_cuda::lower::{PdlPolicy, Variant};
use ostinato_cuda::DeviceBuffer as Buffer;
use ostinato_cuda::{
    BuiltinModules, CudaBackend, CudaExec, CudaKernel, CudaOptions, Device, DeviceMemory, ExecMode, LaunchOn, PdlMode, StreamPriority, TileStaging,
};
use ostinato_host::{HostBackend, HostExec};

use super::workload::{Check, Kernels, Workload};

/// Which arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArmKind {
    /// Node-by-node launches on one stream (4 streams for independent chains, with events).
    Eager,
    /// A graph captured from those launches (fork/join over 4 streams for independent chains).
    Captured,
    /// The same capture with the PDL launch attribute on every launch (the expert's variant).
    CapturedPdl,
    /// Ostinato, explicit graph, auto PDL policy, auto chain fusion.
    Ostinato,
    /// Ablation: Ostinato's graph without chain fusion (every node its own launch), auto PDL.
    OstinatoUnfused,
    /// Ablation: chain fusion on (independent neighbours on a lane fused too; independent launches of
    /// many blocks side by side in one kernel).
    OstinatoFusionOn,
    /// Ablation: auto, but block-local fused chains read and write device memory rather than staging
    /// their tiles in shared memory (`TileStaging::Off`).
    OstinatoUnstaged,
    /// Ablation: auto, but the exec trusts `auto`'s thresholds alone instead of measuring the other
    /// submissions it could have made (`Tune::Off`).
    OstinatoUntuned,
    /// Study: auto, but the exec's first measurement passes a candidate that only changes edge types
    /// on its median margin alone (`EdgeTypesRule::Median`); ranked against the baselines like the
    /// default arm, so one run shows whether that rule could be the default.
    OstinatoEdgesMedian,
    /// Ablation: Ostinato's unfused graph with PDL off.
    OstinatoPdlOff,
    /// Ablation: Ostinato's unfused graph with PDL on every capable edge.
    OstinatoPdlOn,
    /// Ablation: Ostinato's plan launched eagerly over lanes (unfused).
    OstinatoEager,
    /// Ostinato's `auto` graph replayed through the exec's launch thread (`LaunchOn::Thread`): the same
    /// submission, the driver calls off the caller's thread.
    OstinatoThread,
    /// Host backend, serial program order on one thread.
    HostSerial,
    /// Ostinato on the host backend: the plan on a thread pool.
    OstinatoHost,
    /// Raw Vulkan: one command buffer, one barrier per dependency level (where a Vulkan device is found).
    Vulkan,
    /// Ostinato's Vulkan backend: one command buffer recorded once, barriers only where edges need them,
    /// its default replay ordering and chain fusion (`auto`).
    OstinatoVulkan,
    /// Ostinato's Vulkan backend with each plan lane on a queue of its own (`QueueMode::Lanes`).
    OstinatoVulkanLanes,
    /// Ablation: every replay starts with a full pipeline barrier (`ReplayOrdering::Barrier`).
    OstinatoVulkanBarrier,
    /// Ablation: each replay's submission waits on the previous one's timeline value.
    OstinatoVulkanTimeline,
    /// Ablation: each replay waits on an event the previous one sets (`ReplayOrdering::Events`).
    OstinatoVulkanEvents,
    /// Ablation: Ostinato's Vulkan backend without chain fusion.
    OstinatoVulkanUnfused,
    /// Ablation: every node's kernel with element offsets added to its indices, even where its slices
    /// start on binding boundaries (`VulkanOptions::as_written` off).
    OstinatoVulkanOffsets,
}

impl ArmKind {
    /// The arms that launch kernels directly on streams rather than replaying a graph. Plain launches on
    /// a second stream slow every CUDA graph the process runs afterwards (docs/fences.md decision 7), so the
    /// benchmark runs these after every row's graph arms.
    pub fn launches_directly(self) -> bool {
        matches!(self, ArmKind::Eager | ArmKind::OstinatoEager)
    }
    /// The arms of another API than CUDA (run in a last pass: docs/fences.md decision 7).
    pub fn is_vulkan(self) -> bool {
        ArmKind::VULKAN.contains(&self)
    }
    /// The arm of `name` (one of [`ArmKind::CUDA`] or [`ArmKind::HOST_SELECTABLE`]).
    pub fn by_name(name: &str) -> Option<ArmKind> {
        ArmKind::CUDA.iter().chain(ArmKind::HOST_SELECTABLE.iter()).copied().find(|k| k.name() == name)
    }
    pub fn name(self) -> &'static str {
        match self {
            ArmKind::Eager => "eager",
            ArmKind::Captured => "captured",
            ArmKind::CapturedPdl => "captured-pdl",
            ArmKind::Ostinato => "ostinato",
            ArmKind::OstinatoUnfused => "ostinato-unfused",
            ArmKind::OstinatoFusionOn => "ostinato-fusion-on",
            ArmKind::OstinatoUnstaged => "ostinato-unstaged",
            ArmKind::OstinatoUntuned => "ostinato-untuned",
            ArmKind::OstinatoEdgesMedian => "ostinato-edges-median",
            ArmKind::OstinatoPdlOff => "ostinato-pdl-off",
            ArmKind::OstinatoPdlOn => "ostinato-pdl-on",
            ArmKind::OstinatoEager => "ostinato-eager",
            ArmKind::OstinatoThread => "ostinato-thread",
            ArmKind::HostSerial => "host-serial",
            ArmKind::OstinatoHost => "ostinato-host",
            ArmKind::Vulkan => "vulkan",
            ArmKind::OstinatoVulkan => "ostinato-vulkan",
            ArmKind::OstinatoVulkanLanes => "ostinato-vulkan-lanes",
            ArmKind::OstinatoVulkanBarrier => "ostinato-vulkan-barrier",
            ArmKind::OstinatoVulkanTimeline => "ostinato-vulkan-timeline",
            ArmKind::OstinatoVulkanEvents => "ostinato-vulkan-events",
            ArmKind::OstinatoVulkanUnfused => "ostinato-vulkan-unfused",
            ArmKind::OstinatoVulkanOffsets => "ostinato-vulkan-offsets",
        }
    }
    /// The Vulkan arms: the raw baseline, Ostinato's Vulkan backend and its ablations.
    pub const VULKAN: [ArmKind; 8] = [
        ArmKind::Vulkan,
        ArmKind::OstinatoVulkan,
        ArmKind::OstinatoVulkanLanes,
        ArmKind::OstinatoVulkanBarrier,
        ArmKind::OstinatoVulkanTimeline,
        ArmKind::OstinatoVulkanEvents,
        ArmKind::OstinatoVulkanUnfused,
        ArmKind::OstinatoVulkanOffsets,
    ];
    pub const CUDA: [ArmKind; 21] = [
        ArmKind::Eager,
        ArmKind::Captured,
        ArmKind::CapturedPdl,
        ArmKind::Vulkan,
        ArmKind::OstinatoVulkan,
        ArmKind::OstinatoVulkanLanes,
        ArmKind::OstinatoVulkanBarrier,
        ArmKind::OstinatoVulkanTimeline,
        ArmKind::OstinatoVulkanEvents,
        ArmKind::OstinatoVulkanUnfused,
        ArmKind::OstinatoVulkanOffsets,
        ArmKind::Ostinato,
        ArmKind::OstinatoUnfused,
        ArmKind::OstinatoFusionOn,
        ArmKind::OstinatoUnstaged,
        ArmKind::OstinatoUntuned,
        ArmKind::OstinatoEdgesMedian,
        ArmKind::OstinatoPdlOff,
        ArmKind::OstinatoPdlOn,
        ArmKind::OstinatoThread,
        ArmKind::OstinatoEager,
    ];
    /// The arms that run another policy Ostinato could take as its default (not an ablation): the
    /// report ranks each against the same baselines as the default arm.
    pub const POLICY_STUDIES: [ArmKind; 1] = [ArmKind::OstinatoEdgesMedian];
    /// The CUDA baselines: the kernels submitted the way a skilled user writes them by hand.
    pub const CUDA_BASELINES: [ArmKind; 3] = [ArmKind::Eager, ArmKind::Captured, ArmKind::CapturedPdl];
    pub const HOST: [ArmKind; 2] = [ArmKind::HostSerial, ArmKind::OstinatoHost];
    /// The arms `--arms` may pick in the host matrix: the host's and, on whatever Vulkan device is
    /// found (lavapipe on a machine without a GPU), the Vulkan arms.
    pub const HOST_SELECTABLE: [ArmKind; 10] = [
        ArmKind::HostSerial,
        ArmKind::OstinatoHost,
        ArmKind::Vulkan,
        ArmKind::OstinatoVulkan,
        ArmKind::OstinatoVulkanLanes,
        ArmKind::OstinatoVulkanBarrier,
        ArmKind::OstinatoVulkanTimeline,
        ArmKind::OstinatoVulkanEvents,
        ArmKind::OstinatoVulkanUnfused,
        ArmKind::OstinatoVulkanOffsets,
    ];
    /// The options of an Ostinato Vulkan arm (`None` for the raw baseline and non-Vulkan arms).
    pub fn vulkan_options(self) -> Option<ostinato_vulkan::VulkanOptions> {
        use ostinato_vulkan::{FusionMode, QueueMode, ReplayOrdering, VulkanOptions};
        let base = VulkanOptions::default();
        Some(match self {
            ArmKind::OstinatoVulkan => base,
            ArmKind::OstinatoVulkanLanes => VulkanOptions { queues: QueueMode::Lanes, ..base },
            ArmKind::OstinatoVulkanBarrier => VulkanOptions { ordering: ReplayOrdering::Barrier, ..base },
            ArmKind::OstinatoVulkanTimeline => VulkanOptions { ordering: ReplayOrdering::Timeline, ..base },
            ArmKind::OstinatoVulkanEvents => VulkanOptions { ordering: ReplayOrdering::Events, ..base },
            ArmKind::OstinatoVulkanUnfused => VulkanOptions { fusion: FusionMode::Off, ..base },
            ArmKind::OstinatoVulkanOffsets => VulkanOptions { as_written: false, ..base },
            _ => return None,
        })
    }
}

/// One timed sample: GPU (or wall, on the host) microseconds for the whole sample, host submission
/// microseconds, and the outputs the oracle checks.
pub struct RawSample {
    pub gpu_us: Option<f64>,
    pub host_us: f64,
    pub outputs: Vec<Vec<u8>>,
    /// Host µs of one replay call, averaged over a burst of back-to-back calls after the timed part.
    pub replay_call_us: Option<f64>,
    /// Host µs of one replay call made on an idle GPU (median of [`SINGLE_CALLS`] calls, each followed
    /// by a wait that is not timed).
    pub replay_single_us: Option<f64>,
}

/// Replay calls per burst of the replay-cost probe.
pub const CALL_BURST: usize = 20;

/// Calls of the single-call probe per sample.
pub const SINGLE_CALLS: usize = 11;

/// The single-call probe: `step(true)` makes one replay call (timed), `step(false)` waits for it to
/// finish (not timed). Returns the median call time in µs.
pub(crate) fn single_call_us(mut step: impl FnMut(bool) -> Result<(), String>) -> Result<f64, String> {
    let mut times = [0f64; SINGLE_CALLS];
    for t in times.iter_mut() {
        let start = Instant::now();
        step(true)?;
        *t = start.elapsed().as_secs_f64() * 1e6;
        step(false)?;
    }
    times.sort_by(f64::total_cmp);
    Ok(times[SINGLE_CALLS / 2])
}

/// A prepared arm: call `sample` repeatedly.
pub trait Arm {
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String>;
    /// Whether the next samples take the replay-call probes (where the arm has them; on by default).
    fn probe_calls(&mut self, _on: bool) {}
    /// Whether the arm's replays have reached their steady state: false while an Ostinato exec still
    /// measures its candidate submissions (warm-up goes on until it has chosen).
    fn settled(&self) -> bool {
        true
    }
    /// What the arm's exec decided against, where it knows (Ostinato's CUDA arms).
    fn decisions(&self) -> Option<Decisions> {
        None
    }
    /// Writes the driver's DOT description of the arm's retained CUDA graph, where it has one.
    fn write_dot(&self, _path: &std::path::Path) -> Option<Result<(), String>> {
        None
    }
}

/// What an Ostinato CUDA exec's policies turned down ([`ostinato_cuda::CudaExec::decisions`]), each
/// reason with the number of edges or nodes it applies to.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decisions {
    /// Edges of the submission (after fusion) and how many are programmatic.
    pub edges: usize,
    pub programmatic_edges: usize,
    /// Why the other edges are full.
    pub full_edges: Vec<(String, usize)>,
    /// The user's nodes and how many run inside fused kernels.
    pub nodes: usize,
    pub fused_nodes: usize,
    /// Barriers between bodies inside the fused dispatches, where the exec counts them (Vulkan).
    pub fused_barriers: Option<usize>,
    /// Why the other nodes run by themselves.
    pub unfused: Vec<(String, usize)>,
    /// Graph mode: how many submissions the exec measured over its first replays (1: none to
    /// measure), and what it chose, each candidate with its median GPU µs per replay (the chosen
    /// first), once it had measured them all.
    pub candidates: usize,
    pub measured: Option<Vec<(String, f64)>>,
    /// Where the first measurement picked another than `auto`'s own: that candidate, its median and
    /// `auto`'s (µs per replay) measured again with the two alone (the switch stands only if it still
    /// wins: `ostinato_cuda::CONFIRM_REPLAYS`).
    pub confirmation: Option<(String, f64, f64)>,
    /// Where making the arm went, stage by stage in wall milliseconds: the plan compiled, the exec's
    /// instantiation stages (`ostinato_cuda::Decisions::setup`: checks, fusion, hand-offs, lowering,
    /// memory, each candidate submission built) and the initial bytes written (Ostinato's CUDA arms).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_ms: Vec<(String, f64)>,
}

impl Decisions {
    /// The exec's decisions, each reason counted.
    pub fn of(exec: &CudaExec) -> Decisions {
        let d = exec.decisions();
        let setup_ms = d.setup.iter().map(|(stage, t)| (stage.clone(), t.as_secs_f64() * 1e3)).collect();
        Decisions {
            edges: d.full_edges.len() + d.programmatic_edges,
            programmatic_edges: d.programmatic_edges,
            full_edges: Self::count(d.full_edges.iter().map(|(_, _, why)| why.to_string())),
            nodes: exec.plan().node_count(),
            fused_nodes: d.fused_nodes,
            fused_barriers: None,
            unfused: Self::count(d.unfused.into_iter().map(|(_, why)| why)),
            candidates: d.candidates,
            confirmation: d.tuned.as_ref().and_then(|t| t.confirmation.map(|(c, [auto, pick])| (t.candidates[c].0.clone(), pick, auto))),
            measured: d.tuned.map(|t| {
                let mut c = t.candidates;
                c.swap(0, t.chosen);
                c
            }),
            setup_ms,
        }
    }
}

impl Decisions {
    /// Each distinct reason with how many times it occurs, in first-seen order.
    pub(crate) fn count(reasons: impl IntoIterator<Item = String>) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for r in reasons {
            match out.iter_mut().find(|(x, _)| *x == r) {
                Some((_, n)) => *n += 1,
                None => out.push((r, 1)),
            }
        }
        out
    }
}

pub(super) fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

pub(super) fn slot_value(w: &Workload, r: usize) -> Option<(ostinato::SlotId, Scalar)> {
    w.slot_schedule.as_ref().map(|(s, v)| (*s, v[r % v.len()]))
}

// ---------------------------------------------------------------------------------------------------
// Device memory shared by the CUDA arms of a row

/// The device memory of one row, allocated once and bound by every CUDA arm at the same addresses (the
/// Ostinato arms as external buffers): an arm can neither gain nor lose from where its buffers land.
/// Arms run one after another and each resets the written buffers before every sample.
pub struct RowMemory {
    /// One allocation per root buffer; None for views.
    roots: Vec<Option<RootSpan>>,
    /// The stream every CUDA arm of the row replays on (a captured arm captures on it; an eager arm's
    /// further lanes get streams of their own): which stream a graph runs on moves a one-replay sample's
    /// GPU time by several percent between streams of one process (docs/fences.md decision 10), which is not the
    /// arms' difference.
    pub stream: Arc<Stream>,
}

/// A root buffer: `len` bytes starting `offset` bytes into its own allocation (the placement study's
/// `--offsets`; 0 otherwise).
pub struct RootSpan {
    alloc: Buffer,
    offset: usize,
    len: usize,
}

impl RootSpan {
    pub fn ptr(&self) -> u64 {
        self.alloc.ptr() + self.offset as u64
    }
    fn memory(&self) -> Result<DeviceMemory, String> {
        self.alloc.memory_at(self.offset, self.len).map_err(|e| e.to_string())
    }
    fn fits(&self, at: usize, n: usize) -> Result<(), String> {
        match at.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(format!("{n} bytes at {at} overrun a {}-byte buffer", self.len)),
        }
    }
    pub fn write(&self, at: usize, data: &[u8]) -> Result<(), String> {
        self.fits(at, data.len())?;
        self.alloc.write(self.offset + at, data).map_err(|e| e.to_string())
    }
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<(), String> {
        self.fits(at, out.len())?;
        self.alloc.read(self.offset + at, out).map_err(|e| e.to_string())
    }
}

impl RowMemory {
    /// The row's allocations, each root `offset` bytes into its own; the roots no node writes get
    /// their initial bytes here, once for every arm (the arms write the others before every sample).
    pub fn new(device: &Device, w: &Workload, offset: u64, init: &[Option<Vec<u8>>]) -> Result<Arc<RowMemory>, String> {
        let mut roots = Vec::new();
        for (i, b) in w.graph.buffers().iter().enumerate() {
            roots.push(if b.root.index() == i {
                let (offset, len) = (offset as usize, b.size as usize);
                let total = offset.checked_add(len).ok_or_else(|| format!("buffer `{}`: offset {offset} + {len} bytes overflow", b.name))?;
                Some(RootSpan { alloc: Buffer::new(device, total).map_err(err("alloc"))?, offset, len })
            } else {
                None
            });
        }
        device.bind_to_thread().map_err(err("context"))?;
        let written = w.graph.written_roots();
        for ((root, bytes), written) in roots.iter().zip(init).zip(&written) {
            if let (Some(root), Some(bytes), false) = (root, bytes, written) {
                root.write(0, bytes).map_err(err("init"))?;
            }
        }
        Ok(Arc::new(RowMemory { roots, stream: Arc::new(Stream::new()?) }))
    }
    /// `name=0x…` for each root buffer, in declaration order (the report's record of where they lay).
    pub fn addresses(&self, w: &Workload) -> Vec<String> {
        self.roots.iter().zip(w.graph.buffers()).filter_map(|(r, d)| r.as_ref().map(|b| format!("{}={:#x}", d.name, b.ptr()))).collect()
    }
    pub(crate) fn root(&self, i: usize) -> Result<&RootSpan, String> {
        self.roots.get(i).and_then(Option::as_ref).ok_or_else(|| format!("buffer #{i} is a view, not a root allocation"))
    }
    fn bindings(&self) -> Result<Vec<BufferBinding<DeviceMemory>>, String> {
        self.roots.iter().map(|r| r.as_ref().map_or(Ok(BufferBinding::Allocate), |b| b.memory().map(BufferBinding::External))).collect()
    }
}

// ---------------------------------------------------------------------------------------------------
// Ostinato on CUDA

pub struct OstinatoCuda {
    exec: CudaExec,
    /// Wall milliseconds of compiling the plan and of writing the initial bytes, the setup stages
    /// around the exec's own ([`Decisions::setup_ms`]).
    plan_ms: f64,
    init_ms: f64,
    /// The row's allocations the exec is bound to, held as long as it is.
    _memory: Arc<RowMemory>,
    graph_mode: bool,
    written: Vec<bool>,
    probes: bool,
}

impl OstinatoCuda {
    /// The options an Ostinato arm runs with: `base` (the auto policy with any overrides, the trigger,
    /// graph build and stream priority) for the main arm, fusion off or on for the fusion ablations,
    /// PDL forced on/off (unfused) for the fence ablations, eager mode for the eager ablation. None for
    /// the other arms.
    pub fn options(kind: ArmKind, base: CudaOptions) -> Option<CudaOptions> {
        use ostinato_cuda::FusionMode::{Auto, Off, On};
        let (mode, pdl, launch, fusion) = match kind {
            ArmKind::Ostinato => (ExecMode::Graph, PdlMode::Auto, LaunchOn::Caller, Auto),
            ArmKind::OstinatoUnfused => (ExecMode::Graph, PdlMode::Auto, LaunchOn::Caller, Off),
            ArmKind::OstinatoFusionOn => (ExecMode::Graph, PdlMode::Auto, LaunchOn::Caller, On),
            ArmKind::OstinatoUnstaged => {
                return Some(CudaOptions { mode: ExecMode::Graph, pdl: PdlPolicy { mode: PdlMode::Auto, ..base.pdl }, tile_staging: TileStaging::Off, ..base })
            }
            ArmKind::OstinatoUntuned => return Some(CudaOptions { tune: ostinato_cuda::Tune::Off, ..Self::options(ArmKind::Ostinato, base)? }),
            ArmKind::OstinatoEdgesMedian => {
                return Some(CudaOptions { tune_edge_types: ostinato_cuda::EdgeTypesRule::Median, ..Self::options(ArmKind::Ostinato, base)? })
            }
            ArmKind::OstinatoPdlOff => (ExecMode::Graph, PdlMode::Off, LaunchOn::Caller, Off),
            ArmKind::OstinatoPdlOn => (ExecMode::Graph, PdlMode::On, LaunchOn::Caller, Off),
            ArmKind::OstinatoThread => (ExecMode::Graph, PdlMode::Auto, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }, Auto),
            ArmKind::OstinatoEager => (ExecMode::Eager, PdlMode::Auto, LaunchOn::Caller, Off),
            _ => return None,
        };
        Some(CudaOptions { mode, pdl: PdlPolicy { mode: pdl, ..base.pdl }, launch, fusion, ..base })
    }

    /// The arm's exec (a trace of its step uses it as the arm runs it).
    pub fn exec_mut(&mut self) -> &mut CudaExec {
        &mut self.exec
    }

    pub fn new(backend: &CudaBackend, w: &Workload, kernels: Vec<CudaKernel>, memory: &Arc<RowMemory>, init: &[Option<Vec<u8>>]) -> Result<Self, String> {
        let begun = Instant::now();
        let plan = Plan::compile_with(&w.graph, PlanOptions { max_lanes: 4 }).map_err(err("plan"))?;
        let plan_ms = begun.elapsed().as_secs_f64() * 1e3;
        // On the row's stream, like every CUDA arm of the row; a high-priority study keeps the exec's own
        // high-priority stream (an external stream keeps its owner's priority).
        let mut exec = match backend.options().priority {
            StreamPriority::Default => backend.instantiate_on(&plan, kernels, memory.bindings()?, memory.stream.external()),
            StreamPriority::High => backend.instantiate(&plan, kernels, memory.bindings()?),
        }
        .map_err(err("instantiate"))?;
        // The row's memory holds the roots no node writes; the written ones start each sample anew.
        let written = plan.graph().written_roots();
        let begun = Instant::now();
        reset(&mut exec, init, &written).map_err(err("init"))?;
        let init_ms = begun.elapsed().as_secs_f64() * 1e3;
        let graph_mode = backend.options().mode == ExecMode::Graph;
        Ok(OstinatoCuda { written, exec, plan_ms, init_ms, _memory: memory.clone(), graph_mode, probes: true })
    }
}

pub(super) fn load_all<E: Exec>(exec: &mut E, init: &[Option<Vec<u8>>]) -> Result<(), E::Error> {
    for (i, b) in init.iter().enumerate() {
        if let Some(b) = b {
            exec.write_buffer(BufferId(i as u32), 0, b)?;
        }
    }
    Ok(())
}

pub(super) fn reset<E: Exec>(exec: &mut E, init: &[Option<Vec<u8>>], written: &[bool]) -> Result<(), E::Error> {
    for (i, b) in init.iter().enumerate() {
        if let (Some(b), true) = (b, written[i]) {
            exec.write_buffer(BufferId(i as u32), 0, b)?;
        }
    }
    Ok(())
}

pub(super) fn read_checked<E: Exec>(exec: &mut E, w: &Workload) -> Result<Vec<Vec<u8>>, E::Error> {
    let mut out = Vec::new();
    for &b in &w.checked {
        let mut v = vec![0u8; w.graph.buffer(b).size as usize];
        exec.read_buffer(b, 0, &mut v)?;
        out.push(v);
    }
    Ok(out)
}

impl Arm for OstinatoCuda {
    fn write_dot(&self, path: &std::path::Path) -> Option<Result<(), String>> {
        self.graph_mode.then(|| self.exec.write_dot(path).map_err(|e| e.to_string()))
    }
    fn probe_calls(&mut self, on: bool) {
        self.probes = on;
    }
    fn settled(&self) -> bool {
        !self.exec.measuring()
    }
    fn decisions(&self) -> Option<Decisions> {
        let mut d = Decisions::of(&self.exec);
        d.setup_ms.insert(0, ("plan".to_string(), self.plan_ms));
        d.setup_ms.push(("initial bytes".to_string(), self.init_ms));
        Some(d)
    }
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
        // Every sample from the initial bytes: the row's other arms write the same buffers between
        // this arm's samples (they are taken in rounds).
        reset(&mut self.exec, init, &self.written).map_err(err("reset"))?;
        self.exec.timer_start().map_err(err("timer"))?;
        let t = Instant::now();
        for r in 0..w.replays {
            if let Some((s, v)) = slot_value(w, r) {
                self.exec.set_slot(s, v).map_err(err("set_slot"))?;
            }
            self.exec.replay().map_err(err("replay"))?;
        }
        let host_us = t.elapsed().as_secs_f64() * 1e6;
        let gpu_us = self.exec.timer_stop_ms().map_err(err("timer"))? * 1e3;
        let outputs = read_checked(&mut self.exec, w).map_err(err("read"))?;
        if !self.probes {
            return Ok(RawSample { gpu_us: Some(gpu_us), host_us, outputs, replay_call_us: None, replay_single_us: None });
        }
        let t = Instant::now();
        for _ in 0..CALL_BURST {
            self.exec.replay().map_err(err("replay"))?;
        }
        let replay_call_us = Some(t.elapsed().as_secs_f64() * 1e6 / CALL_BURST as f64);
        self.exec.wait().map_err(err("wait"))?;
        let exec = &mut self.exec;
        let single = single_call_us(|call| if call { exec.replay().map_err(err("replay")) } else { exec.wait().map_err(err("wait")) })?;
        Ok(RawSample { gpu_us: Some(gpu_us), host_us, outputs, replay_call_us, replay_single_us: Some(single) })
    }
}

/// The builds a baseline arm launches, one per kernel of the workload. Every arm runs the same kernel
/// code; each gets the build its technique calls for: baselines that never use PDL the build without
/// griddepcontrol, the expert's PDL capture the main PDL build. (Ostinato's arms bind through the
/// backend, which attaches every build and picks one per node.)
pub fn baseline_kernels(modules: &BuiltinModules, backend: &CudaBackend, w: &Workload, kind: ArmKind) -> Result<Vec<CudaKernel>, String> {
    if !matches!(w.kernels, Kernels::Builtins) {
        // A pack's kernels (the Llama step's, the bench's), bound as Ostinato binds them, in the build
        // a baseline launches.
        let variant = if kind == ArmKind::CapturedPdl { Variant::Late } else { Variant::Plain };
        let plan = Plan::compile(&w.graph).map_err(err("plan"))?;
        return Ok(bind_cuda(backend, w, &plan)?.iter().map(|k| k.only(variant)).collect());
    }
    w.graph
        .kernels()
        .iter()
        .map(|k| match kind {
            ArmKind::CapturedPdl => modules.main_kernel(&k.name, k),
            _ => modules.plain_kernel(&k.name, k),
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// Every kernel of `plan` bound on `backend` as a user binds them, from its reference: the backend's
/// built-in of the kernel's name, the Llama pack's, or the bench pack's the row names.
pub fn bind_cuda(backend: &CudaBackend, w: &Workload, plan: &Plan) -> Result<Vec<CudaKernel>, String> {
    let sigs = plan.graph().kernels();
    match &w.kernels {
        Kernels::Builtins => ostinato::bind_builtins(backend, plan).map_err(err("bind")),
        Kernels::Llama => sigs
            .iter()
            .map(|k| {
                let r = ostinato_llama::pack::cuda_ref(&k.name).ok_or_else(|| format!("bind: `{}` is not a kernel of the Llama pack", k.name))?;
                backend.bind_kernel(k, &r).map_err(err("bind"))
            })
            .collect(),
        Kernels::Pack(pack) => {
            sigs.iter().zip(pack.iter()).map(|(sig, k)| backend.bind_kernel(sig, &k.cuda).map_err(|e| format!("bind `{}`: {e}", sig.name))).collect()
        }
    }
}

/// Every kernel of `plan` bound on the host `backend`: the built-ins, the Llama pack's twins, or the
/// bench pack's (each checked against the graph's signature).
pub fn bind_host(backend: &HostBackend, w: &Workload, plan: &Plan) -> Result<Vec<ostinato_host::HostKernel>, String> {
    match &w.kernels {
        Kernels::Builtins => ostinato::bind_builtins(backend, plan).map_err(err("bind")),
        Kernels::Llama => ostinato_llama::pack::host_kernels(plan.graph()).map_err(err("bind")),
        Kernels::Pack(pack) => plan
            .graph()
            .kernels()
            .iter()
            .zip(pack.iter())
            .map(|(sig, k)| k.host.check_signature(sig).map(|()| k.host.clone()).map_err(|e| format!("bind `{}`: {e}", sig.name)))
            .collect(),
    }
}

/// Median GPU µs per dispatch of `samples` samples of a CUDA arm after 3 warm-ups.
pub fn median_gpu_us(arm: &mut dyn Arm, w: &Workload, init: &[Option<Vec<u8>>], samples: usize) -> Result<f64, String> {
    let mut us = Vec::new();
    for i in 0..3 + samples.max(1) {
        let s = arm.sample(w, init)?;
        if i >= 3 {
            us.push(s.gpu_us.ok_or("a CUDA arm's sample has no GPU time")? / (w.dispatches * w.replays) as f64);
        }
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

// ---------------------------------------------------------------------------------------------------
// Host backend arms

pub struct HostArm {
    exec: HostExec,
    written: Vec<bool>,
}

impl HostArm {
    pub fn new(w: &Workload, kind: ArmKind, init: &[Option<Vec<u8>>]) -> Result<Self, String> {
        let plan = Plan::compile(&w.graph).map_err(err("plan"))?;
        // Ostinato's host arm schedules as a user's default run does: the pool where the plan can use it.
        let backend = if kind == ArmKind::HostSerial { HostBackend::serial() } else { HostBackend::auto(HostBackend::default_threads()) };
        let kernels = bind_host(&backend, w, &plan)?;
        let buffers = ostinato::allocate_all(&plan);
        let mut exec = backend.instantiate(&plan, kernels, buffers).map_err(err("instantiate"))?;
        load_all(&mut exec, init).map_err(err("init"))?;
        Ok(HostArm { written: plan.graph().written_roots(), exec })
    }
}

impl Arm for HostArm {
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
        reset(&mut self.exec, init, &self.written).map_err(err("reset"))?;
        let t = Instant::now();
        for r in 0..w.replays {
            if let Some((s, v)) = slot_value(w, r) {
                self.exec.set_slot(s, v).map_err(err("set_slot"))?;
            }
            self.exec.replay().map_err(err("replay"))?;
            self.exec.wait().map_err(err("wait"))?;
        }
        let host_us = t.elapsed().as_secs_f64() * 1e6;
        Ok(RawSample { gpu_us: None, host_us, outputs: read_checked(&mut self.exec, w).map_err(err("read"))?, replay_call_us: None, replay_single_us: None })
    }
}

/// The oracle: the host backend's serial execution of the same replays from the same initial state.
pub fn oracle(w: &Workload, init: &[Option<Vec<u8>>]) -> Result<Vec<Vec<u8>>, String> {
    if let Check::GreedyRun(_) = w.check {
        // Checked against the reference fed each sample's own tokens; a free-running host run would
        // part from a correct one at the first near-tie.
        return Ok(Vec::new());
    }
    let mut arm = HostArm::new(w, ArmKind::HostSerial, init)?;
    Ok(arm.sample(w, init)?.outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_single_call_probe_alternates_timed_calls_and_waits_and_stops_on_error() {
        let mut seen = Vec::new();
        let us = single_call_us(|call| {
            seen.push(call);
            Ok(())
        })
        .unwrap();
        assert!(us >= 0.0);
        assert_eq!(seen.len(), 2 * SINGLE_CALLS);
        assert!(seen.chunks(2).all(|p| p == [true, false]), "each call is followed by its wait");
        let mut calls = 0;
        let err = single_call_us(|call| {
            calls += call as usize;
            if calls == 3 {
                Err("launch failed".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(err, Err("launch failed".to_string()));
        assert_eq!(calls, 3, "no call after the failing one");
    }
}
