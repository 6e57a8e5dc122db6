//! `ostinato bench` arguments (parsed by the CLI shell, run here).

use std::path::PathBuf;

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
    #[arg(long, default_value_t = 7)]
    pub samples: usize,
    #[arg(long, default_value_t = 3)]
    pub warmups: usize,
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// The main PDL build's trigger (the expert's capture uses it; Ostinato uses it above the early
    /// limit): after-wait, entry, after-writes, never, disabled.
    #[arg(long, default_value = "after-wait")]
    pub trigger: String,
    /// Override the auto PDL policy's block limit.
    #[arg(long)]
    pub pdl_max_blocks: Option<u64>,
    /// Override the auto PDL policy's fan limit.
    #[arg(long)]
    pub pdl_max_fanout: Option<usize>,
    /// Block counts of the 941-dispatch grid rows, comma-separated (replaces the default 128,1024,8192).
    #[arg(long)]
    pub blocks: Option<String>,
    /// Write the driver's verbose DOT description of every CUDA graph an arm replays into this folder
    /// (`<row>--<arm>.dot`).
    #[arg(long)]
    pub dot: Option<PathBuf>,
    /// Investigation only: choose kernel builds per node (known to give wrong results on decode).
    #[arg(long)]
    pub pdl_mixed_builds: bool,
}

impl BenchArgs {
    pub fn trigger(&self) -> Result<ostinato_cuda::PdlTrigger, String> {
        ostinato_cuda::PdlTrigger::parse(&self.trigger)
            .ok_or_else(|| format!("unknown trigger `{}` (after-wait, entry, after-writes, never, disabled)", self.trigger))
    }
    /// `--blocks`, parsed (None: the backend's default set).
    pub fn grid_blocks(&self) -> Result<Option<Vec<u32>>, String> {
        let Some(list) = &self.blocks else { return Ok(None) };
        list.split(',')
            .map(|t| match t.trim().parse::<u32>() {
                Ok(b) if b > 0 => Ok(b),
                _ => Err(format!("--blocks: `{t}` is not a positive block count")),
            })
            .collect::<Result<Vec<u32>, String>>()
            .map(Some)
    }
    /// The auto policy with any overrides.
    pub fn auto_policy(&self) -> ostinato_cuda::PdlPolicy {
        let mut p = ostinato_cuda::PdlPolicy::default();
        if let Some(b) = self.pdl_max_blocks {
            p.auto_max_blocks = b;
        }
        if let Some(f) = self.pdl_max_fanout {
            p.auto_max_fanout = f;
        }
        p.mixed_builds = self.pdl_mixed_builds;
        p
    }
}

pub fn bench(args: BenchArgs) -> Result<(), String> {
    crate::bench::run(&args).map(|_| ())
}
