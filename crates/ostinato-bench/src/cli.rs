//! `ostinato bench` arguments (parsed by the CLI shell, run here).

use std::path::PathBuf;

use crate::bench::arms::ArmKind;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// cuda (default where a CUDA device is found) or host.
    #[arg(long)]
    pub backend: Option<String>,
    /// A shorter matrix (fewer rows and samples).
    #[arg(long)]
    pub quick: bool,
    /// Only rows whose id contains one of these comma-separated texts.
    #[arg(long)]
    pub filter: Option<String>,
    /// Timed samples per arm, at least.
    #[arg(long, default_value_t = 7)]
    pub samples: usize,
    /// Keep taking timed samples (beyond `--samples`, up to 63) until this many milliseconds of them
    /// have passed: a row whose sample takes microseconds gets enough samples that a burst of noise in
    /// a few of them cannot move its median.
    #[arg(long, default_value_t = 10)]
    pub timed_ms: u64,
    #[arg(long, default_value_t = 3)]
    pub warmups: usize,
    /// Keep warming each arm up (beyond `--warmups` samples) until this many milliseconds have passed.
    #[arg(long, default_value_t = 50)]
    pub warmup_ms: u64,
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// The main PDL build's trigger (the expert's capture uses it; Ostinato uses it above the early
    /// limit): after-wait, entry, after-writes, never, disabled.
    #[arg(long, default_value = "after-wait")]
    pub trigger: String,
    /// Override the auto PDL policy's block limit (the smaller grid of an edge).
    #[arg(long)]
    pub pdl_max_blocks: Option<u64>,
    /// Override the auto PDL policy's limit on the smaller grid times the side-by-side lanes.
    #[arg(long)]
    pub pdl_max_side_by_side_blocks: Option<u64>,
    /// Override the auto PDL policy's fan limit.
    #[arg(long)]
    pub pdl_max_fanout: Option<usize>,
    /// Graph shape of the Ostinato graph arms: auto, plan (one dependency per plan edge) or lanes.
    #[arg(long, default_value = "auto")]
    pub graph_shape: String,
    /// How the Ostinato graph arms hand their graph to the driver: bulk (every node, then the edges in
    /// one call per edge type), in-order (each node with its in-edges), capture (stream capture with the
    /// plan's edges) or, for investigation only, bulk-one-call (all edges in one mixed call).
    #[arg(long, default_value = "bulk")]
    pub graph_build: String,
    /// Priority of the Ostinato arms' replay streams: default or high (the context's greatest).
    #[arg(long, default_value = "default")]
    pub priority: String,
    /// Block counts of the 941-dispatch grid rows, comma-separated (replaces the default 128,1024,8192).
    #[arg(long)]
    pub blocks: Option<String>,
    /// Consumer counts of the fan-out/fan-in rows, comma-separated (replaces the default 4,16,64).
    #[arg(long)]
    pub fans: Option<String>,
    /// Write the driver's verbose DOT description of every CUDA graph an arm replays into this folder
    /// (`<row>--<arm>.dot`).
    #[arg(long)]
    pub dot: Option<PathBuf>,
    /// Shift every row's arm order by this many places (it is otherwise rotated by the row's index), to
    /// tell an arm's position in the run from the arm itself.
    #[arg(long, default_value_t = 0)]
    pub rotate: usize,
    /// Investigation only: choose kernel builds per node (correct since edges reach the driver one type
    /// per call; measured no faster on decode):
    /// off, plain (plain build on nodes without programmatic edges), early (early-trigger build on
    /// small programmatic nodes) or all (both). Bare `--pdl-mixed-builds` means all.
    #[arg(long, default_value = "off", num_args = 0..=1, default_missing_value = "all")]
    pub pdl_mixed_builds: String,
    /// Placement study: run every selected row once per listed byte offset (comma-separated, each a
    /// multiple of 256), its buffers starting that far into their allocations (row id `<row>@<offset>`).
    /// Every CUDA arm of a row still shares the same addresses. A 1-block chain's time per dispatch
    /// depends on where its buffer lies (docs/fences.md §8).
    #[arg(long)]
    pub offsets: Option<String>,
    /// Replays between the two timing events of every sample, for every row (default: 1, the decode
    /// stack 4, one position each). More replays narrow the short rows' intervals; the 941-dispatch
    /// rows measured the same with 1 and 10 (docs/fences.md §8).
    #[arg(long)]
    pub replays: Option<usize>,
    /// CUDA: the driver state every row runs in. fresh: no graph arm runs after plain launches on a
    /// second stream (the eager baseline and Ostinato's eager mode run after every row's graph arms);
    /// multi-stream: before the first row, the eager baseline on two streams (between replays of a
    /// 941 × 1 chain, timed before and after) puts the process in the state plain launches on a second
    /// stream leave every later graph in, about 0.06 µs slower per dependent 1-block dispatch
    /// (docs/fences.md §8), the state of any program that launches kernels on several streams.
    #[arg(long, default_value = "fresh")]
    pub regime: String,
    /// Only these arms, comma-separated by name (default: every arm of the backend; the main Ostinato
    /// arm must be among them, since every ratio is taken against it).
    #[arg(long)]
    pub arms: Option<String>,
}

impl BenchArgs {
    pub fn trigger(&self) -> Result<ostinato_cuda::PdlTrigger, String> {
        ostinato_cuda::PdlTrigger::parse(&self.trigger)
            .ok_or_else(|| format!("unknown trigger `{}` (after-wait, entry, after-writes, never, disabled)", self.trigger))
    }
    pub fn regime(&self) -> Result<crate::bench::Regime, String> {
        crate::bench::Regime::parse(&self.regime).ok_or_else(|| format!("unknown --regime `{}` (fresh, multi-stream)", self.regime))
    }
    pub fn priority(&self) -> Result<ostinato_cuda::StreamPriority, String> {
        ostinato_cuda::StreamPriority::parse(&self.priority).ok_or_else(|| format!("unknown --priority `{}` (default, high)", self.priority))
    }
    pub fn graph_build(&self) -> Result<ostinato_cuda::GraphBuild, String> {
        ostinato_cuda::GraphBuild::parse(&self.graph_build)
            .ok_or_else(|| format!("unknown --graph-build `{}` (bulk, in-order, capture, bulk-one-call)", self.graph_build))
    }
    /// `--blocks`, parsed (None: the backend's default set).
    pub fn grid_blocks(&self) -> Result<Option<Vec<u32>>, String> {
        positive_list("--blocks", self.blocks.as_deref())
    }
    /// `--fans`, parsed (None: the default set).
    pub fn fan_widths(&self) -> Result<Option<Vec<usize>>, String> {
        positive_list("--fans", self.fans.as_deref())
    }
    /// `--replays`, checked (None: each row's default).
    pub fn replays_per_sample(&self) -> Result<Option<usize>, String> {
        match self.replays {
            Some(n) if !(1..=MAX_REPLAYS).contains(&n) => Err(format!("--replays {n}: between 1 and {MAX_REPLAYS} replays per sample")),
            r => Ok(r),
        }
    }
    /// `--arms`, checked against the backend's arms (`all`, in their fixed order): the selected ones
    /// in that order.
    pub fn selected_arms(&self, all: &[ArmKind], main: ArmKind) -> Result<Vec<ArmKind>, String> {
        let Some(list) = self.arms.as_deref() else { return Ok(all.to_vec()) };
        let names: Vec<&str> = all.iter().map(|a| a.name()).collect();
        let wanted: Vec<String> = parse_list(list, |t, _: Option<String>| {
            let t = t.trim();
            names.contains(&t).then(|| t.to_string()).ok_or_else(|| format!("--arms: `{t}` is not an arm of this backend ({})", names.join(", ")))
        })?;
        let chosen = |a: &ArmKind| wanted.iter().any(|w| w == a.name());
        if !chosen(&main) {
            return Err(format!("--arms: `{}` must be among them (every ratio is taken against it)", main.name()));
        }
        Ok(all.iter().copied().filter(chosen).collect())
    }
    /// `--offsets`, parsed: `[0]` (one placement, ids unchanged) when absent.
    pub fn placements(&self) -> Result<Vec<u64>, String> {
        let Some(list) = self.offsets.as_deref() else { return Ok(vec![0]) };
        parse_list(list, |t, v: Option<u64>| match v {
            Some(v) if v % 256 == 0 && v <= MAX_OFFSET => Ok(v),
            Some(v) if v > MAX_OFFSET => Err(format!("--offsets: `{t}` is beyond the 1 GiB a placement study may pad a buffer with")),
            _ => Err(format!("--offsets: `{t}` is not a byte offset that is a multiple of 256")),
        })
    }
    /// The auto policy with any overrides.
    pub fn auto_policy(&self) -> Result<ostinato_cuda::PdlPolicy, String> {
        let shape = ostinato_cuda::lower::ShapeMode::parse(&self.graph_shape)
            .ok_or_else(|| format!("unknown graph shape `{}` (auto, plan, lanes)", self.graph_shape))?;
        let mut p = ostinato_cuda::PdlPolicy { shape, ..Default::default() };
        if let Some(b) = self.pdl_max_blocks {
            p.auto_max_blocks = b;
        }
        if let Some(b) = self.pdl_max_side_by_side_blocks {
            p.auto_max_side_by_side_blocks = b;
        }
        if let Some(f) = self.pdl_max_fanout {
            p.auto_max_fanout = f;
        }
        p.mixed_builds = ostinato_cuda::lower::MixedBuilds::parse(&self.pdl_mixed_builds)
            .ok_or_else(|| format!("unknown --pdl-mixed-builds `{}` (off, plain, early, all)", self.pdl_mixed_builds))?;
        Ok(p)
    }
}

/// The most replays per sample `--replays` takes (the captured decode baseline keeps one graph per
/// replay of a sample).
pub const MAX_REPLAYS: usize = 1000;

/// The largest `--offsets` value: each row's buffers are padded by it.
const MAX_OFFSET: u64 = 1 << 30;

/// A comma-separated list: `item` gets each entry's text and its parsed value (None where it does not
/// parse) and accepts it or says why not.
fn parse_list<T: std::str::FromStr>(list: &str, item: impl Fn(&str, Option<T>) -> Result<T, String>) -> Result<Vec<T>, String> {
    list.split(',').map(|t| item(t, t.trim().parse().ok())).collect()
}

/// A comma-separated list of positive integers, or None when the option is absent.
fn positive_list<T: std::str::FromStr + PartialOrd + Default>(option: &str, list: Option<&str>) -> Result<Option<Vec<T>>, String> {
    let Some(list) = list else { return Ok(None) };
    parse_list(list, |t, v: Option<T>| v.filter(|v| *v > T::default()).ok_or_else(|| format!("{option}: `{t}` is not a positive count"))).map(Some)
}

/// Runs the benchmark; a failed row (an arm's error or an oracle mismatch) makes it an error, after the
/// reports are written.
pub fn bench(args: BenchArgs) -> Result<(), String> {
    let rows = crate::bench::run(&args)?;
    crate::bench::report::failed_rows(&rows, &args.out)
}
