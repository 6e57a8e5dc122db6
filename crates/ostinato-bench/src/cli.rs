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
    /// Only rows whose id contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    #[arg(long, default_value_t = 7)]
    pub samples: usize,
    #[arg(long, default_value_t = 3)]
    pub warmups: usize,
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

pub fn bench(args: BenchArgs) -> Result<(), String> {
    crate::bench::run(&args).map(|_| ())
}
