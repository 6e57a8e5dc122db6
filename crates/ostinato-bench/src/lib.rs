//! Ostinato's driver layer: running graph files (`ostinato run`) and the benchmark (`ostinato bench`):
//! workloads, baseline arms, the measurement protocol with per-sample oracle gating, and reports.

pub mod bench;
pub mod cli;
pub mod devices;
pub mod run;
