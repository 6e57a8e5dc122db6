//! Ostinato's benchmark (`ostinato bench`): workloads, independent baseline arms, the measurement
//! protocol with every sample checked against the host oracle, and reports. It takes a plain
//! [`BenchConfig`]; the shells map their flags onto it.

pub mod arms;
pub mod baseline;
mod chart;
pub mod config;
mod cuda_raw;
pub mod manifests;
pub mod matrix;
pub mod profile;
pub mod provenance;
pub mod report;
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
    pub use ostinato_cuda::{GraphBuild, PdlTrigger, StreamPriority};
}

/// Runs the benchmark; a failed row (an arm's error or an oracle mismatch) makes it an error, after the
/// reports are written.
pub fn bench(config: &BenchConfig) -> Result<Vec<RowResult>, BenchError> {
    let rows = run(config)?;
    report::failed_rows(&rows, &config.out)?;
    Ok(rows)
}
