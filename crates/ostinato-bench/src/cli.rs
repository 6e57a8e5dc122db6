//! `ostinato bench` arguments (parsed by the CLI shell, run here).

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};

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
    #[arg(long, default_value = "after-wait", value_parser = named(TRIGGERS, ostinato_cuda::PdlTrigger::parse))]
    pub trigger: ostinato_cuda::PdlTrigger,
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
    #[arg(long, default_value = "auto", value_parser = named(SHAPES, ostinato_cuda::lower::ShapeMode::parse))]
    pub graph_shape: ostinato_cuda::lower::ShapeMode,
    /// How the Ostinato graph arms hand their graph to the driver: bulk (every node, then the edges in
    /// one call per edge type), in-order (each node with its in-edges), capture (stream capture with the
    /// plan's edges) or, for investigation only, bulk-one-call (all edges in one mixed call).
    #[arg(long, default_value = "bulk", value_parser = named(GRAPH_BUILDS, ostinato_cuda::GraphBuild::parse))]
    pub graph_build: ostinato_cuda::GraphBuild,
    /// Priority of the Ostinato arms' replay streams: default or high (the context's greatest).
    #[arg(long, default_value = "default", value_parser = named(PRIORITIES, ostinato_cuda::StreamPriority::parse))]
    pub priority: ostinato_cuda::StreamPriority,
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
    #[arg(long, default_value = "off", num_args = 0..=1, default_missing_value = "all", value_parser = named(MIXED_BUILDS, ostinato_cuda::lower::MixedBuilds::parse))]
    pub pdl_mixed_builds: ostinato_cuda::lower::MixedBuilds,
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
    #[arg(long, default_value = "fresh", value_parser = named(REGIMES, crate::bench::Regime::parse))]
    pub regime: crate::bench::Regime,
    /// Only these arms, comma-separated by name (default: every arm of the backend; the main Ostinato
    /// arm must be among them, since every ratio is taken against it).
    #[arg(long)]
    pub arms: Option<String>,
}

impl BenchArgs {
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
    /// The most timed samples an arm takes: [`crate::bench::MAX_TIMED_SAMPLES`], or `--samples` if larger.
    pub fn max_timed_samples(&self) -> usize {
        self.samples.max(crate::bench::MAX_TIMED_SAMPLES)
    }
    /// The auto policy with any overrides.
    pub fn auto_policy(&self) -> ostinato_cuda::PdlPolicy {
        let mut p = ostinato_cuda::PdlPolicy { shape: self.graph_shape, mixed_builds: self.pdl_mixed_builds, ..Default::default() };
        if let Some(b) = self.pdl_max_blocks {
            p.auto_max_blocks = b;
        }
        if let Some(b) = self.pdl_max_side_by_side_blocks {
            p.auto_max_side_by_side_blocks = b;
        }
        if let Some(f) = self.pdl_max_fanout {
            p.auto_max_fanout = f;
        }
        p
    }
}

/// The most replays per sample `--replays` takes (the captured decode baseline keeps one graph per
/// replay of a sample).
pub const MAX_REPLAYS: usize = 1000;

/// The largest `--offsets` value: each row's buffers are padded by it.
const MAX_OFFSET: u64 = 1 << 30;

// Names of the library options the benchmark (and `ostinato plan`/`run`) take; each library enum's own
// `parse` turns them into values (a unit test checks that every listed name parses), so the names live
// in one place.
pub const MODES: &[&str] = &["graph", "eager"];
pub const PDL_MODES: &[&str] = &["auto", "on", "off"];
pub const SHAPES: &[&str] = &["auto", "plan", "lanes"];
pub const TRIGGERS: &[&str] = &["after-wait", "entry", "after-writes", "never", "disabled"];
pub const GRAPH_BUILDS: &[&str] = &["bulk", "in-order", "capture", "bulk-one-call"];
pub const PRIORITIES: &[&str] = &["default", "high"];
pub const LAUNCH_ON: &[&str] = &["caller", "thread"];
pub const MIXED_BUILDS: &[&str] = &["off", "plain", "early", "all"];
pub const REGIMES: &[&str] = &["fresh", "multi-stream"];

/// A value parser that accepts exactly `names` (listed in `--help` and in the error for anything else)
/// and turns each into the library's value with the library's `parse`.
pub fn named<T: Clone + Send + Sync + 'static>(names: &'static [&'static str], parse: fn(&str) -> Option<T>) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(names).try_map(move |s: String| parse(&s).ok_or_else(|| format!("`{s}` is listed but does not parse")))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_option_name_parses_into_the_librarys_value() {
        use ostinato_cuda::lower::{MixedBuilds, PdlMode, ShapeMode};
        use ostinato_cuda::{ExecMode, GraphBuild, LaunchOn, PdlTrigger, StreamPriority};
        let ok = |names: &[&str], parses: fn(&str) -> bool| names.iter().all(|n| parses(n));
        assert!(ok(MODES, |n| ExecMode::parse(n).is_some()));
        assert!(ok(PDL_MODES, |n| PdlMode::parse(n).is_some()));
        assert!(ok(SHAPES, |n| ShapeMode::parse(n).is_some()));
        assert!(ok(TRIGGERS, |n| PdlTrigger::parse(n).is_some()));
        assert!(ok(GRAPH_BUILDS, |n| GraphBuild::parse(n).is_some()));
        assert!(ok(PRIORITIES, |n| StreamPriority::parse(n).is_some()));
        assert!(ok(LAUNCH_ON, |n| LaunchOn::parse(n).is_some()));
        assert!(ok(MIXED_BUILDS, |n| MixedBuilds::parse(n).is_some()));
        assert!(ok(REGIMES, |n| crate::bench::Regime::parse(n).is_some()));
    }
}
