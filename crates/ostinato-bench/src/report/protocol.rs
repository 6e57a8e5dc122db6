//! The protocol a run measured by, as `results.json` holds it and as the report's protocol line says
//! it: one value ([`RunProtocol`]) made from the run's configuration, written into the file, read back
//! when runs made in parts are reported as one (`crate::merge`), and rendered from there, so the report
//! of a merged run states the same protocol as each part's.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::arms::ArmKind;
use crate::config::BenchConfig;
use crate::{stats, BenchBackend, Regime};

/// What `results.json`'s `protocol` holds (the field names are the file's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunProtocol {
    pub warmups: usize,
    pub warmup_ms: u64,
    /// Timed samples an arm takes at least.
    pub samples: usize,
    pub instances: usize,
    pub timed_ms: u64,
    pub max_timed_samples: usize,
    pub replays_per_sample: String,
    pub statistic: String,
    pub interval: String,
    pub tie_band: f64,
    pub oracle: String,
    /// How the arms were ordered and which ran (runs merged from parts: each distinct text, joined).
    pub arm_order: String,
    pub sampling: String,
    /// The CUDA driver state the rows ran in; none on the host backend.
    pub regime: Option<String>,
    pub metric: String,
}

impl RunProtocol {
    /// The protocol of a run of `args` on `backend` (`chain_us`: what entering `--regime multi-stream`
    /// measured).
    pub fn of(backend: BenchBackend, args: &BenchConfig, chain_us: Option<[f64; 2]>) -> RunProtocol {
        RunProtocol {
            warmups: args.warmups,
            warmup_ms: args.warmup_ms,
            samples: args.min_timed_samples(),
            instances: args.instances,
            timed_ms: args.timed_ms,
            max_timed_samples: args.max_timed_samples(),
            replays_per_sample: replays_text(args),
            statistic: "median".into(),
            interval: format!("95% percentile bootstrap of the median, {}", interval_text(args.instances)),
            tie_band: stats::TIE_BAND,
            oracle: "every sample, warm-ups included, against the host backend's serial execution".into(),
            arm_order: arm_order_text(backend, args),
            sampling: "in rounds: each round one sample of every arm of the pass, in the row's order; warm-up rounds (every instance of every arm; past the warm-up time only those still warming) until every instance has its warm-ups and has settled, then timed rounds, round r on instance r mod instances of every arm, each timed sample right after an untimed lead-in sample of the same instance".into(),
            regime: regime_text(backend, args, chain_us),
            metric: if backend == BenchBackend::Cuda { "gpu_us_per_dispatch" } else { "host_us_per_dispatch" }.into(),
        }
    }

    /// The report's protocol line; `unit` names the metric, `device_time` adds that host submission
    /// time is a column of its own.
    pub(super) fn line(&self, unit: &str, device_time: bool) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "Protocol: every arm of a row is made {} (each exec or recording anew over the row's buffers); the arms sample in rounds (each round one sample of every arm, in the row's order): at least {} warm-up samples of each instance and {} ms of warm-up rounds (longer where an Ostinato exec still measures its candidate submissions: warm-up ends once every instance has chosen, and past the warm-up time only the instances still warming are sampled), then at least {} timed samples each, round r on instance r mod {} (each right after an untimed lead-in sample of the same instance) and {} ms of timed rounds per arm (at most {} rounds), each sample {}; every sample (warm-ups too) is checked against the host backend's serial execution; arm order {}{}; medians over every instance's samples with 95% bootstrap intervals {}; {}. Metric: {unit}{}.",
            instances_text(self.instances),
            self.warmups,
            self.warmup_ms,
            self.samples,
            self.instances,
            self.timed_ms,
            self.max_timed_samples,
            self.replays_per_sample,
            self.arm_order,
            self.regime.as_ref().map_or(String::new(), |r| format!("; CUDA driver state {r}")),
            interval_text(self.instances),
            tie_rule_text(),
            if device_time { "; host submission time is a separate column" } else { "" }
        );
        s
    }
}

/// The one-line tie rule, for the protocol line.
fn tie_rule_text() -> String {
    format!(
        "a tie is a ratio of medians within ±{:.0}%; outside it, a win or a loss needs disjoint 95% intervals, and a row whose intervals overlap is inconclusive (counted apart, never as a win, tie or loss, and left out of the median speedup)",
        stats::TIE_BAND * 100.0
    )
}

/// How the arms were ordered, and which ran, for the protocol line and `results.json`.
pub(super) fn arm_order_text(backend: BenchBackend, args: &BenchConfig) -> String {
    let mut t = "rotated per row".to_string();
    if args.study.rotate != 0 {
        t += &format!(", shifted by {} (--rotate)", args.study.rotate);
    }
    let chosen: Option<Vec<&str>> = args.arms.as_ref().map(|list| list.iter().map(|a| a.trim()).collect());
    // Without `--arms` the CUDA matrix runs every arm and the host matrix no Vulkan arm.
    let ran = |a: ArmKind| chosen.as_ref().map_or(backend == BenchBackend::Cuda, |c| c.contains(&a.name()));
    if backend == BenchBackend::Cuda {
        let direct: Vec<&str> = ArmKind::CUDA.iter().filter(|a| a.launches_directly() && ran(**a)).map(|a| a.name()).collect();
        if !direct.is_empty() {
            t += &format!(
                "; the arms that launch kernels directly ({}) in a second pass after every row's graph arms (plain launches on a second stream slow every later graph: docs/fences.md decision 7)",
                direct.join(", ")
            );
        }
        t += if args.study.priority == ostinato_cuda::StreamPriority::High {
            "; every CUDA arm of a row on one stream the row makes, except Ostinato's (streams of its own at high priority, --priority high)"
        } else {
            "; every CUDA arm of a row replays on one stream the row makes (Ostinato's execs bound to it)"
        };
    }
    if ArmKind::VULKAN.iter().any(|&a| ran(a)) {
        t += "; the Vulkan arms in a last pass after all rows, on one set of buffers per row, ";
        // They time otherwise than the CUDA arms' event pair (docs/fences.md, "Where Ostinato still
        // loses": one replay a sample on CUDA holds a launch's start, a Vulkan arm's time does not).
        t += VULKAN_TIMING;
    }
    if let Some(c) = chosen {
        t += &format!("; only the arms {} (--arms)", c.join(","));
    }
    t
}

/// How a Vulkan arm's sample is timed, for the arm-order text where one ran.
pub(super) const VULKAN_TIMING: &str = "each replay submitted alone and timed by timestamps its command buffer writes (where the device has them), a sample the sum: a Vulkan arm's time leaves out every submission's start, where a CUDA event pair around a launch from an idle stream holds that launch's start";

/// The CUDA driver state the rows ran in (`--regime`), for the protocol line and `results.json`; None
/// on the host backend. `chain_us`: what entering the multi-stream state measured (before, after).
pub(super) fn regime_text(backend: BenchBackend, args: &BenchConfig, chain_us: Option<[f64; 2]>) -> Option<String> {
    match (backend, args.study.regime) {
        (BenchBackend::Host, _) => None,
        (_, Regime::MultiStream) => Some(format!(
            "multi-stream: before the first row, the eager baseline on two streams between replays of a 941 × 1 chain, which took {} µs per dispatch before and {} after (--regime multi-stream; docs/fences.md decision 7)",
            chain_us.map_or("—".into(), |c| format!("{:.3}", c[0])),
            chain_us.map_or("—".into(), |c| format!("{:.3}", c[1]))
        )),
        _ => Some("fresh: no graph arm ran after plain launches on a second stream".into()),
    }
}

/// How many times each arm is made, for the protocol line.
fn instances_text(instances: usize) -> String {
    match instances {
        1 => "once (--instances 1)".into(),
        n => format!("{n} times (--instances {n})"),
    }
}

/// How the intervals resample, for the protocol line and `results.json`.
fn interval_text(instances: usize) -> &'static str {
    if instances > 1 {
        "that resample the instances, then each drawn instance's samples (2,000 resamples): a win or a loss holds across an arm's instances"
    } else {
        "of the samples (2,000 resamples)"
    }
}

/// What one timed sample is, for the protocol line and `results.json`.
fn replays_text(args: &BenchConfig) -> String {
    match args.replays {
        Some(1) => "one replay between two events (--replays 1)".into(),
        Some(n) => format!("{n} back-to-back replays between two events (--replays {n})"),
        None => "one replay between two events (the decode stack: 4, one position each)".into(),
    }
}
