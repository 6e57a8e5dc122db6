//! Ostinato's benchmark (`ostinato bench`): the matrix's families of rows ([`families`], one list), the
//! kernel pack its kernel families run ([`pack`]: CUDA C, WGSL and host twins bound through kernel
//! references), independent baseline arms, the measurement protocol with every sample checked against
//! the host oracle, and reports (per family, with what Ostinato's policy turned down and why). It takes
//! a plain [`BenchConfig`]; the shells map their flags onto it.

pub mod arms;
pub mod baseline;
mod chart;
pub mod config;
mod cuda_raw;
pub mod families;
pub mod manifests;
pub mod matrix;
pub mod merge;
pub mod pack;
pub mod profile;
pub mod provenance;
pub mod report;
mod rest;
pub mod results;
pub mod rounds;
pub mod stats;
pub mod timeline;
pub mod vulkan;
pub mod vulkan_raw;
pub mod workload;

pub use config::{BenchBackend, BenchConfig, BenchError, Regime, StudyConfig, MAX_TIMED_SAMPLES};
pub use matrix::{run, ArmResult, RowResult, SampleResult, Stat};

/// The values of the fence-policy studies' knobs ([`StudyConfig`]): the CUDA backend's own.
pub mod study {
    pub use ostinato_cuda::lower::{MixedBuilds, ShapeMode};
    pub use ostinato_cuda::{EdgeTypesRule, GraphBuild, PdlTrigger, StreamPriority};
}

/// Runs the benchmark; a failed row (an arm's error or an oracle mismatch) makes it an error, after the
/// reports are written.
pub fn bench(config: &BenchConfig) -> Result<Vec<RowResult>, BenchError> {
    let rows = run(config)?;
    report::failed_rows(&rows, &config.out)?;
    Ok(rows)
}
