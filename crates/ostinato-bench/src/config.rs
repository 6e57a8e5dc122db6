//! What a benchmark run is asked to do: a plain struct the shells fill in (the CLI maps its flags onto
//! it), with the checks of its values, and the benchmark's error type.

use std::path::PathBuf;

use ostinato_cuda::lower::{MixedBuilds, ShapeMode};
use ostinato_cuda::{GraphBuild, PdlPolicy, PdlTrigger, StreamPriority};

use serde::Serialize;

/// Which backend the matrix runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchBackend {
    Cuda,
    Host,
}

/// The CUDA driver state the matrix runs in (`--regime`; docs/fences.md decision 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    /// No graph arm runs after plain launches on a second stream.
    Fresh,
    /// Before the first row, the eager baseline on two streams between replays of a chain
    /// (`baseline::enter_multi_stream_regime`): every row runs in the state that leaves.
    MultiStream,
}

impl ostinato::Named for Regime {
    const ALL: &'static [Self] = &[Regime::Fresh, Regime::MultiStream];
    fn name(self) -> &'static str {
        match self {
            Regime::Fresh => "fresh",
            Regime::MultiStream => "multi-stream",
        }
    }
}

impl ostinato::Named for BenchBackend {
    const ALL: &'static [Self] = &[BenchBackend::Cuda, BenchBackend::Host];
    fn name(self) -> &'static str {
        match self {
            BenchBackend::Cuda => "cuda",
            BenchBackend::Host => "host",
        }
    }
}

/// Cap on timed samples per arm, whatever `timed_ms` says (a larger `samples` still wins).
pub const MAX_TIMED_SAMPLES: usize = 63;

/// Instances made of every arm by default: a verdict must hold across three execs (or recordings) of
/// each arm, not one draw of each (`crate::rounds`).
pub const DEFAULT_INSTANCES: usize = 3;

/// The most instances of an arm (each holds its own graph exec or command buffer).
pub const MAX_INSTANCES: usize = 16;

/// The benchmark's configuration. [`BenchConfig::default`] is the full matrix on the GPU where one is
/// found, else on the host backend.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// `None`: CUDA where a device is found, else the host backend.
    pub backend: Option<BenchBackend>,
    /// A shorter matrix (fewer rows).
    pub quick: bool,
    /// Only rows whose id contains one of these texts (a row set that ends up empty is an error).
    pub filter: Vec<String>,
    /// Timed samples per arm, at least.
    pub samples: usize,
    /// Keep taking timed samples (beyond `samples`, up to [`MAX_TIMED_SAMPLES`]) until
    /// this many milliseconds of them have passed.
    pub timed_ms: u64,
    pub warmups: usize,
    /// Keep warming each arm up (beyond `warmups` samples) until this many milliseconds have passed.
    pub warmup_ms: u64,
    /// Instances made of every arm of a row (each exec or recording made anew over the row's
    /// buffers); the timed rounds rotate among them and the intervals resample them
    /// (`crate::rounds`).
    pub instances: usize,
    /// Where results.json, REPORT.md and chart.svg go.
    pub out: PathBuf,
    /// Only these arms (by name), in their fixed order; the main Ostinato arm must be among them.
    pub arms: Option<Vec<String>>,
    /// Replays between the two timing events of every sample (default: 1; the decode stack 4).
    pub replays: Option<usize>,
    /// Seconds after which no further row starts: the rows begun finish every pass, the rest are
    /// reported as not run (every arm skipped, saying why), so a run under a time limit still writes
    /// its report.
    pub time_limit_s: Option<f64>,
    /// Only the rows the run whose results this folder (or `results.json`) holds left not run under its
    /// time limit, with that run's arms unless `arms` names others and its backend unless `backend`
    /// does; refused, naming the file, where the two runs would not merge into one matrix (another
    /// build, backend, quick flag or protocol). The two then merge with `--merge`.
    pub rest_of: Option<PathBuf>,
    /// Study settings (docs/fences.md); the defaults are the measured policy.
    pub study: StudyConfig,
}

/// Settings of the fence-policy studies. Each default is what the policy uses.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    /// The main PDL build's trigger (the expert's capture uses it; Ostinato above the early limit).
    pub trigger: PdlTrigger,
    pub pdl_max_blocks: Option<u64>,
    pub pdl_max_side_by_side_blocks: Option<u64>,
    pub pdl_max_fanout: Option<usize>,
    pub graph_shape: ShapeMode,
    pub graph_build: GraphBuild,
    pub priority: StreamPriority,
    pub mixed_builds: MixedBuilds,
    /// How the exec's first measurement judges a candidate that changes only its edges' types
    /// (`ostinato_cuda::EdgeTypesRule`; CUDA only).
    pub tune_edge_types: ostinato_cuda::EdgeTypesRule,
    /// Block counts of the 941-dispatch grid rows (replaces 128, 1024, 8192).
    pub blocks: Option<Vec<u32>>,
    /// Consumer counts of the fan rows (replaces 4, 16, 64).
    pub fans: Option<Vec<usize>>,
    /// Write every CUDA graph an arm replays as DOT into this folder.
    pub dot: Option<PathBuf>,
    /// Shift every row's arm order by this many places.
    pub rotate: usize,
    /// Run each row once per byte offset (multiples of 256) of its buffers in their allocations.
    pub offsets: Option<Vec<u64>>,
    pub regime: Regime,
}

impl Default for StudyConfig {
    fn default() -> Self {
        StudyConfig {
            trigger: PdlTrigger::AfterWait,
            pdl_max_blocks: None,
            pdl_max_side_by_side_blocks: None,
            pdl_max_fanout: None,
            graph_shape: ShapeMode::Auto,
            graph_build: GraphBuild::Bulk,
            priority: StreamPriority::Default,
            mixed_builds: MixedBuilds::Off,
            tune_edge_types: ostinato_cuda::EdgeTypesRule::Quartiles,
            blocks: None,
            fans: None,
            dot: None,
            rotate: 0,
            offsets: None,
            regime: Regime::Fresh,
        }
    }
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            backend: None,
            quick: false,
            filter: Vec::new(),
            samples: 7,
            timed_ms: 10,
            warmups: 3,
            warmup_ms: 50,
            instances: DEFAULT_INSTANCES,
            out: PathBuf::from("bench-out"),
            arms: None,
            replays: None,
            time_limit_s: None,
            rest_of: None,
            study: StudyConfig::default(),
        }
    }
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A configuration value out of its range, naming the setting.
    #[error("{setting}: {reason}")]
    Config { setting: &'static str, reason: String },
    /// The backend or device could not be opened.
    #[error("{0}")]
    Device(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// A run's results that cannot be merged with the others (`crate::merge`), naming its file.
    #[error("{path}: {reason}")]
    Merge { path: String, reason: String },
    /// Rows whose arms failed or disagreed with the oracle (the reports were written).
    #[error("{failed} of {rows} rows failed: {ids} (why: {report}, section Failures)")]
    FailedRows { failed: usize, rows: usize, ids: String, report: String },
    #[error("{0}")]
    Run(String),
}

impl From<String> for BenchError {
    fn from(message: String) -> Self {
        BenchError::Run(message)
    }
}

/// The most replays per sample (the captured decode baseline keeps one graph per replay of a sample).
pub const MAX_REPLAYS: usize = 1000;

/// The largest placement offset: each row's buffers are padded by it.
const MAX_OFFSET: u64 = 1 << 30;

fn config(setting: &'static str, reason: impl Into<String>) -> BenchError {
    BenchError::Config { setting, reason: reason.into() }
}

impl BenchConfig {
    /// Checks every value's range before anything runs.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.rest_of.is_some() && !self.filter.is_empty() {
            return Err(config("rest-of", "measures exactly the rows the earlier run left not run: give no --filter with it"));
        }
        if self.samples < 1 {
            return Err(config("samples", "at least 1"));
        }
        if !(1..=MAX_INSTANCES).contains(&self.instances) {
            return Err(config("instances", format!("{}: between 1 and {MAX_INSTANCES} instances of each arm", self.instances)));
        }
        if self.time_limit_s.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
            return Err(config("time-limit", "a finite number of seconds, 0 or more"));
        }
        if let Some(n) = self.replays {
            if !(1..=MAX_REPLAYS).contains(&n) {
                return Err(config("replays", format!("{n}: between 1 and {MAX_REPLAYS} replays per sample")));
            }
        }
        if self.study.blocks.as_ref().is_some_and(|b| b.is_empty() || b.contains(&0)) {
            return Err(config("blocks", "positive block counts"));
        }
        if self.study.fans.as_ref().is_some_and(|f| f.is_empty() || f.contains(&0)) {
            return Err(config("fans", "positive consumer counts"));
        }
        for &o in self.study.offsets.iter().flatten() {
            if o % 256 != 0 || o > MAX_OFFSET {
                return Err(config("offsets", format!("{o}: a multiple of 256 of at most 1 GiB")));
            }
        }
        Ok(())
    }
    /// The byte offsets of the placement study: `[0]` (one placement, ids unchanged) when absent.
    pub fn placements(&self) -> Vec<u64> {
        self.study.offsets.clone().unwrap_or_else(|| vec![0])
    }
    /// The configured arms among the backend's arm `names` (all of them when none are configured),
    /// checked: each a known arm, and `main` among them.
    pub fn arms_among<'a>(&self, names: &[&'a str], main: &str) -> Result<Vec<&'a str>, BenchError> {
        let Some(wanted) = &self.arms else { return Ok(names.to_vec()) };
        if let Some(w) = wanted.iter().find(|w| !names.contains(&w.as_str())) {
            return Err(config("arms", format!("`{w}` is not an arm of this backend ({})", names.join(", "))));
        }
        if !wanted.iter().any(|w| w == main) {
            return Err(config("arms", format!("`{main}` must be among them (every ratio is taken against it)")));
        }
        Ok(names.iter().copied().filter(|n| wanted.iter().any(|w| w == n)).collect())
    }
    /// The fewest timed samples an arm takes: `samples`, and three for each instance.
    pub fn min_timed_samples(&self) -> usize {
        crate::rounds::min_timed(self.samples, self.instances)
    }
    /// The most timed samples an arm takes: [`MAX_TIMED_SAMPLES`], or the minimum if larger.
    pub fn max_timed_samples(&self) -> usize {
        self.min_timed_samples().max(MAX_TIMED_SAMPLES)
    }
    /// The auto policy with the study's overrides.
    pub fn auto_policy(&self) -> PdlPolicy {
        let s = &self.study;
        let mut p = PdlPolicy { shape: s.graph_shape, mixed_builds: s.mixed_builds, ..Default::default() };
        if let Some(b) = s.pdl_max_blocks {
            p.auto_max_blocks = b;
        }
        if let Some(b) = s.pdl_max_side_by_side_blocks {
            p.auto_max_side_by_side_blocks = b;
        }
        if let Some(f) = s.pdl_max_fanout {
            p.auto_max_fanout = f;
        }
        p
    }
}
