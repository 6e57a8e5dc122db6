//! Ostinato's benchmark (`ostinato bench`): workloads, independent baseline arms, the measurement
//! protocol with every sample checked against the host oracle, and reports. It takes a plain
//! [`BenchConfig`]; the shells map their flags onto it.

pub mod bench;
pub mod config;

pub use config::{bench, BenchConfig, BenchError, StudyConfig};
