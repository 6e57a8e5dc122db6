//! What a run measured, row by row (`results.json`'s `rows`): every sample, each arm's medians with
//! their intervals, the oracle's verdicts and what the policies decided. The types read back too, so
//! that runs made in parts are reported as one (`crate::merge`); an arm's name read back must be one
//! of this build's arms.

use serde::{Deserialize, Deserializer, Serialize};

use crate::arms::ArmKind;

/// An arm's name: one of [`ArmKind::name`]'s. (Named by an alias so that serde reads it through
/// the arm names this build knows rather than borrowing it from the file's text.)
pub type ArmName = &'static str;

/// An arm's name as results.json holds it, read back as the arm's own (`&'static`) name.
fn arm_name<'de, D: Deserializer<'de>>(d: D) -> Result<ArmName, D::Error> {
    let name = String::deserialize(d)?;
    known_arm(&name)
}

fn arm_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ArmName>, D::Error> {
    Vec::<String>::deserialize(d)?.iter().map(|n| known_arm(n)).collect()
}

fn known_arm<E: serde::de::Error>(name: &str) -> Result<ArmName, E> {
    ArmKind::by_name(name).map(ArmKind::name).ok_or_else(|| E::custom(format!("`{name}` is not an arm of this build")))
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
pub struct Stat {
    pub median: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
}

/// The median of every sample of an arm's instances (one group each) with the interval that
/// resamples instances, then samples ([`crate::stats::bootstrap_ci_grouped`]).
pub(crate) fn stat_grouped<G: AsRef<[f64]>>(groups: &[G]) -> Option<Stat> {
    let pooled: Vec<f64> = groups.iter().flat_map(|g| g.as_ref().iter().copied()).collect();
    let median = crate::stats::median(&pooled)?;
    let (ci_lo, ci_hi) = crate::stats::bootstrap_ci_grouped(groups)?;
    Some(Stat { median, ci_lo, ci_hi })
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct SampleResult {
    pub warmup: bool,
    /// Which instance of the arm took it (0 where the arm has one).
    pub instance: usize,
    pub gpu_us_per_dispatch: Option<f64>,
    pub host_us_per_dispatch: f64,
    /// Host µs per replay call (a burst of back-to-back calls), where the arm replays a retained graph.
    pub replay_call_us: Option<f64>,
    /// Host µs of one replay call on an idle GPU (median of the sample's single calls).
    pub replay_single_us: Option<f64>,
    pub oracle_ok: bool,
    pub oracle_detail: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ArmResult {
    #[serde(deserialize_with = "arm_name")]
    pub arm: ArmName,
    pub ok: bool,
    pub error: Option<String>,
    /// Why the arm does not apply to this row (it is then neither failed nor ranked).
    pub skipped: Option<String>,
    pub samples: Vec<SampleResult>,
    /// GPU time per dispatch (CUDA: events), timed samples only.
    pub gpu_us_per_dispatch: Option<Stat>,
    /// Host submission time per dispatch (host backend: wall time of the whole replay).
    pub host_us_per_dispatch: Option<Stat>,
    /// Host time of one replay call of the retained graph.
    pub replay_call_us: Option<Stat>,
    /// Host time of one replay call made on an idle GPU.
    pub replay_single_us: Option<Stat>,
    /// Warm-up samples run (each oracle-checked); the first `--warmups` are listed in `samples`, as is
    /// any that failed its check.
    pub warmup_samples: usize,
    /// BLAKE3 over the build manifests of the kernels the arm launches (CUDA arms).
    pub manifest: Option<String>,
    /// What the exec's PDL and fusion policies turned down, and why (Ostinato's CUDA arms; its first
    /// instance's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions: Option<crate::arms::Decisions>,
    /// Each instance's median of the ranked metric, where the arm was made more than once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceResult>,
    /// Wall milliseconds each instance took to make, from the run's compiled modules: binding its
    /// kernels and what the arm submits from (Ostinato: compiling and instantiating the plan, its
    /// candidate submissions included; stream capture: lowering, capturing, instantiating and
    /// uploading each graph; raw Vulkan: recording its command buffer). Empty in results from
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_ms: Vec<f64>,
}

/// One instance of an arm: the median of its timed samples (the ranked metric) and its exec's decisions.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct InstanceResult {
    pub median: Option<f64>,
    pub timed_samples: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions: Option<crate::arms::Decisions>,
}

impl ArmResult {
    /// An arm's result before anything ran: not ok, no error, no samples.
    pub(crate) fn new(kind: ArmKind) -> ArmResult {
        ArmResult {
            arm: kind.name(),
            ok: false,
            error: None,
            skipped: None,
            samples: Vec::new(),
            gpu_us_per_dispatch: None,
            host_us_per_dispatch: None,
            replay_call_us: None,
            replay_single_us: None,
            warmup_samples: 0,
            manifest: None,
            decisions: None,
            instances: Vec::new(),
            setup_ms: Vec::new(),
        }
    }
    /// An arm's result before anything ran, for the report's tests.
    #[cfg(test)]
    pub(crate) fn new_for_test(kind: ArmKind) -> ArmResult {
        ArmResult::new(kind)
    }
    /// The metric rows are ranked by: GPU time on CUDA, wall time on the host backend.
    pub fn metric(&self) -> Option<Stat> {
        self.gpu_us_per_dispatch.or(self.host_us_per_dispatch)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RowResult {
    pub id: String,
    pub family: String,
    pub dispatches_per_replay: usize,
    pub replays_per_sample: usize,
    pub check: String,
    /// Every sample of every arm passed its oracle check.
    pub ok: bool,
    #[serde(deserialize_with = "arm_names")]
    pub arm_order: Vec<ArmName>,
    /// Where the row's root buffers lay (`name=0x…`), shared by every CUDA arm; empty on the host. A
    /// 1-block chain's time depends on it (docs/fences.md, decision 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buffer_addresses: Vec<String>,
    pub arms: Vec<ArmResult>,
    /// The row's own protocol minimums, where it has them (the kernel-family rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<crate::workload::RowProtocol>,
    /// Decode rows on the GPU: bytes per step and the kernel table (or why it could not be made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode: Option<Result<crate::profile::DecodeProfile, String>>,
    /// The Llama row at position 1,024 on the GPU: its step traced node by node (files beside the
    /// report), or why it could not be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Result<crate::timeline::StepTimeline, String>>,
}
