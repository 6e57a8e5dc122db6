//! How a row's arms take their samples: in rounds. Every arm of a pass is made first (in the row's
//! rotated order); then each round takes one sample of every arm in that order, warm-ups first and
//! timed samples after, so that the arms of a row are measured over the same stretch of time. In a
//! timed round each arm first takes an untimed sample (a warm-up, checked like every sample) and then
//! its timed one, so that a timed replay follows a replay of its own arm, as one arm's replays follow
//! each other in a loop, and never depends on which arm ran before it.
//!
//! Why rounds: the GPU time of a tiny graph moves with the moment by more than the arms differ. On an
//! H200 the same submissions measured one arm after the other (each arm's samples in a window of its
//! own, 5–50 ms long) landed 5–20% apart from one run to the next: the expert's four PDL chains of ten
//! 64 K-element warp reductions 1.088 µs a dispatch in one matrix and 0.910 in the next, Ostinato's
//! equivalent submission 1.315 and 1.131; an Ostinato exec's own replays measured 6% slower in its
//! timed window than over its warm-up (docs/fences.md, "How far apart identical measurements land";
//! `exec_spread_probe`: the spread between identical graphs is mostly the moment's). Sampled in rounds,
//! a slow stretch slows every arm of the row alike. The lead-in sample: in rounds of single samples
//! each arm always followed the same other arm, and on the same H200 the serial 8 M-element
//! reductions, where Ostinato submits exactly the captured graph, measured 2–6% slower for the arm
//! that followed the expert's PDL capture (`aa2e754`, GPU-ba016419), and tied one after the other.
//!
//! Instances: each arm is made several times over the row's buffers ([`Budget::instances`]), because
//! an arm's time also depends on the instance: two execs of one graph, or two recordings of one
//! command buffer, each steady for as long as it lives, land up to 10–25% apart on rows of a few small
//! launches (docs/fences.md, "How far apart identical measurements land"). With one instance an arm,
//! a row's verdict was a draw of one instance per arm: in one 210-row matrix seven rows lost 4–16% and
//! none of them lost when run again. Warm-up rounds warm up (and let settle) every instance; timed
//! round `r` samples instance `r mod k` of every arm, so each instance takes an equal share of the
//! timed samples over the same stretch of time; the median pools them, and the interval resamples
//! instances, then samples ([`crate::stats::bootstrap_ci_grouped`]): a win or a loss must hold over
//! the arm's instances, not one of them.

use std::time::{Duration, Instant};

use crate::arms::{Arm, RawSample};
use crate::config::MAX_TIMED_SAMPLES;
use crate::matrix::{compare, stat_grouped, ArmResult, InstanceResult, SampleResult};
use crate::stats;
use crate::workload::Workload;

/// Cap on warm-up rounds, whatever the warm-up time says.
pub const MAX_WARMUP_ROUNDS: usize = 100_000;

/// How many samples a row's arms take, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Warm-up samples every instance of an arm takes at least (the first this many per instance are
    /// listed in its results).
    pub warmups: usize,
    /// Wall time the warm-up rounds last at least.
    pub warmup: Duration,
    /// Timed samples every arm takes at least.
    pub samples: usize,
    /// Wall time of timed samples each arm gets at least: the timed rounds last this times the
    /// number of arms, so an arm takes about as many samples as it would alone.
    pub timed: Duration,
    /// Instances made of every arm (at least 1); each takes at least [`MIN_TIMED_PER_INSTANCE`] timed
    /// samples.
    pub instances: usize,
}

/// Timed samples every instance of an arm takes at least.
pub const MIN_TIMED_PER_INSTANCE: usize = 3;

/// Timed samples every arm takes at least: `samples`, and enough for each of its `instances`' minimum.
pub fn min_timed(samples: usize, instances: usize) -> usize {
    samples.max(MIN_TIMED_PER_INSTANCE * instances.max(1))
}

impl Budget {
    /// Timed samples every arm takes at least ([`min_timed`]).
    pub fn min_timed(&self) -> usize {
        min_timed(self.samples, self.instances)
    }
}

/// An arm made for the row (its instances, at least one), with its result so far.
pub struct Made {
    pub instances: Vec<Box<dyn Arm>>,
    pub out: ArmResult,
}

/// One arm's part of the rounds.
struct Sampler {
    made: Made,
    /// Samples taken (warm-ups, lead-ins and timed ones), all instances together.
    taken: usize,
    /// Warm-up samples (lead-ins included) each instance has taken.
    warm: Vec<usize>,
}

impl Sampler {
    /// Whether the arm left the rounds: a sample of it failed (its error is in its result).
    fn failed(&self) -> bool {
        self.made.out.error.is_some()
    }
    /// Warm-up samples the arm takes at least (and lists): `warmups` for each instance.
    fn warmups(&self, budget: Budget) -> usize {
        budget.warmups * self.made.instances.len()
    }
    /// Whether instance `i` still warms up: it has fewer than `warmups` warm-up samples, its exec
    /// still measures its candidates, or the warm-up time has not passed (`warm_time`).
    fn warming(&self, i: usize, budget: Budget, warm_time: bool) -> bool {
        !self.failed() && (warm_time || self.warm[i] < budget.warmups || !self.made.instances[i].settled())
    }
    /// Takes one sample of `instance` and records it (warm-ups only where they are among the first
    /// `warmups` or fail their check); an error ends the arm, naming the instance where there are several.
    fn take(&mut self, instance: usize, w: &Workload, init: &[Option<Vec<u8>>], want: &[Vec<u8>], warmup: bool, warmups: usize) {
        let out = &mut self.made.out;
        let several = self.made.instances.len() > 1;
        let arm = &mut self.made.instances[instance];
        arm.probe_calls(!warmup);
        let s: RawSample = match arm.sample(w, init) {
            Ok(s) => s,
            Err(e) => {
                out.error = Some(if several { format!("instance {instance}: {e}") } else { e });
                return;
            }
        };
        self.taken += 1;
        let verdict = compare(&w.check, init, want, &s.outputs);
        if warmup {
            self.warm[instance] += 1;
            out.warmup_samples += 1;
            if out.warmup_samples > warmups && verdict.is_ok() {
                return;
            }
        }
        let per = (w.dispatches * w.replays) as f64;
        out.samples.push(SampleResult {
            warmup,
            instance,
            gpu_us_per_dispatch: s.gpu_us.map(|g| g / per),
            host_us_per_dispatch: s.host_us / per,
            replay_call_us: s.replay_call_us,
            replay_single_us: s.replay_single_us,
            oracle_ok: verdict.is_ok(),
            oracle_detail: verdict.err(),
        });
    }
    fn timed(&self) -> usize {
        self.taken - self.made.out.warmup_samples
    }
}

/// Samples `arms` in rounds (the module doc) and returns each one's result, in the order given.
/// Warm-up rounds go on until every instance has `warmups` samples, `budget.warmup` has passed and
/// every instance has settled (an Ostinato exec has chosen among the submissions it measures); each
/// takes a sample of every instance that has not (until `budget.warmup` has passed, of every
/// instance: an exec measuring a hundred replays leaves the others idle, not sampled and checked a
/// hundred times over); timed rounds (round `r`: instance `r mod k` of every arm) until
/// every arm has [`Budget::min_timed`] and `budget.timed` times the arms have passed, or
/// `MAX_TIMED_SAMPLES` rounds (the minimum, if larger), each arm's timed sample after a lead-in
/// sample of the same instance. An arm whose sample fails leaves the rounds with its error.
pub fn sample_in_rounds(arms: Vec<Made>, w: &Workload, init: &[Option<Vec<u8>>], want: &[Vec<u8>], budget: Budget) -> Vec<ArmResult> {
    let mut all: Vec<Sampler> = arms.into_iter().map(|made| Sampler { warm: vec![0; made.instances.len()], made, taken: 0 }).collect();
    let live = |all: &[Sampler]| all.iter().filter(|s| !s.failed()).count();
    let started = Instant::now();
    let mut rounds = 0;
    loop {
        let warm_time = started.elapsed() < budget.warmup;
        let warming = all.iter().any(|s| (0..s.made.instances.len()).any(|i| s.warming(i, budget, warm_time)));
        if rounds >= MAX_WARMUP_ROUNDS || !warming {
            break;
        }
        for s in all.iter_mut() {
            for i in 0..s.made.instances.len() {
                if s.warming(i, budget, warm_time) {
                    s.take(i, w, init, want, true, s.warmups(budget));
                }
            }
        }
        rounds += 1;
        if live(&all) == 0 {
            break;
        }
    }
    let timed_for = budget.timed * live(&all).max(1) as u32;
    let (since, cap) = (Instant::now(), MAX_TIMED_SAMPLES.max(budget.min_timed()));
    let mut round = 0;
    loop {
        let short = all.iter().filter(|s| !s.failed()).any(|s| s.timed() < budget.min_timed());
        let capped = all.iter().filter(|s| !s.failed()).all(|s| s.timed() >= cap);
        // Time alone ends the rounds only where every instance has had as many rounds as the others.
        let whole = round % budget.instances.max(1) == 0;
        if live(&all) == 0 || capped || (whole && !(short || since.elapsed() < timed_for)) {
            break;
        }
        for s in all.iter_mut().filter(|s| !s.failed()) {
            let i = round % s.made.instances.len();
            let listed = s.warmups(budget);
            s.take(i, w, init, want, true, listed);
            if !s.failed() {
                s.take(i, w, init, want, false, listed);
            }
        }
        round += 1;
    }
    all.into_iter().map(|s| finish(s.made)).collect()
}

/// The arm's result with its statistics over its timed samples (grouped by instance) and its
/// instances' decisions.
fn finish(Made { instances, mut out }: Made) -> ArmResult {
    // After the samples: an exec that measures its submissions has chosen by now.
    out.decisions = instances.first().and_then(|a| a.decisions());
    if out.error.is_some() {
        return out;
    }
    let timed: Vec<&SampleResult> = out.samples.iter().filter(|s| !s.warmup).collect();
    let k = instances.len();
    let by_instance = |f: &dyn Fn(&SampleResult) -> Option<f64>| -> Vec<Vec<f64>> {
        (0..k).map(|i| timed.iter().filter(|s| s.instance == i).filter_map(|s| f(s)).collect()).collect()
    };
    let gpu = by_instance(&|s| s.gpu_us_per_dispatch);
    let host = by_instance(&|s| Some(s.host_us_per_dispatch));
    out.ok = out.samples.iter().all(|s| s.oracle_ok);
    out.gpu_us_per_dispatch = stat_grouped(&gpu);
    out.host_us_per_dispatch = stat_grouped(&host);
    out.replay_call_us = stat_grouped(&by_instance(&|s| s.replay_call_us));
    out.replay_single_us = stat_grouped(&by_instance(&|s| s.replay_single_us));
    // The ranked metric, as `ArmResult::metric` picks it.
    let metric = if out.gpu_us_per_dispatch.is_some() { &gpu } else { &host };
    out.instances = if k > 1 {
        instances.iter().zip(metric).map(|(arm, v)| InstanceResult { median: stats::median(v), timed_samples: v.len(), decisions: arm.decisions() }).collect()
    } else {
        Vec::new()
    };
    out
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::arms::ArmKind;

    /// An arm that notes each sample in a shared log: `settles_after` samples until it has settled,
    /// an error at sample `fails_at`, outputs `out` (the oracle's are `[1]`).
    struct Fake {
        name: char,
        log: Rc<RefCell<Vec<(char, bool)>>>,
        taken: usize,
        probing: bool,
        settles_after: usize,
        fails_at: Option<usize>,
        out: u8,
    }

    impl Arm for Fake {
        fn sample(&mut self, _w: &Workload, _init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
            self.taken += 1;
            if self.fails_at == Some(self.taken) {
                return Err(format!("{} failed", self.name));
            }
            self.log.borrow_mut().push((self.name, self.probing));
            Ok(RawSample { gpu_us: Some(10.0 + self.taken as f64), host_us: 1.0, outputs: vec![vec![self.out]], replay_call_us: None, replay_single_us: None })
        }
        fn probe_calls(&mut self, on: bool) {
            self.probing = on;
        }
        fn settled(&self) -> bool {
            self.taken >= self.settles_after
        }
    }

    fn run(arms: &[(char, usize, Option<usize>, u8)], budget: Budget) -> (Vec<ArmResult>, Vec<(char, bool)>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let made = arms
            .iter()
            .map(|&(name, settles_after, fails_at, out)| Made {
                instances: (0..budget.instances)
                    .map(|i| {
                        // Instance i of arm `a` logs as `a`, `A`, then the next letters up.
                        let name = if i == 0 { name } else { char::from_u32(name.to_ascii_uppercase() as u32 + i as u32 - 1).unwrap_or('?') };
                        Box::new(Fake { name, log: log.clone(), taken: 0, probing: false, settles_after, fails_at, out }) as Box<dyn Arm>
                    })
                    .collect(),
                out: ArmResult::new(ArmKind::Captured),
            })
            .collect();
        let mut w = Workload::new("t".into(), "test", ostinato::Graph::new(), 1);
        w.dispatches = 1;
        let results = sample_in_rounds(made, &w, &[], &[vec![1]], budget);
        let log = log.borrow().clone();
        (results, log)
    }

    const NO_TIME: Budget = Budget { warmups: 2, warmup: Duration::ZERO, samples: 3, timed: Duration::ZERO, instances: 1 };

    #[test]
    fn every_round_samples_every_arm_in_order_warm_ups_first() {
        let (results, log) = run(&[('a', 0, None, 1), ('b', 0, None, 1), ('c', 0, None, 1)], NO_TIME);
        let names: String = log.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, "abcabcaabbccaabbccaabbcc", "two warm-up rounds, three timed ones, each timed sample after a lead-in");
        let probing: String = log.iter().map(|(_, p)| if *p { 't' } else { '-' }).collect();
        assert_eq!(probing, "-------t-t-t-t-t-t-t-t-t", "probes on timed samples only");
        for r in &results {
            assert!(r.ok && r.error.is_none());
            assert_eq!((r.warmup_samples, r.samples.iter().filter(|s| !s.warmup).count()), (5, 3));
            // Timed samples 4, 6 and 8 of 10 + k µs.
            assert_eq!(r.gpu_us_per_dispatch.map(|s| s.median), Some(16.0));
        }
    }

    #[test]
    fn timed_rounds_rotate_among_instances_each_lead_in_on_the_instance_it_leads_into() {
        // Two arms of three instances each (`a`, `A`, `B` and `b`, `B`... named apart: `x`, `X`, `Y`).
        let budget = Budget { instances: 3, samples: 1, ..NO_TIME };
        let (results, log) = run(&[('a', 0, None, 1), ('x', 0, None, 1)], budget);
        let names: String = log.iter().map(|(n, _)| *n).collect();
        let warm = "aABxXY".repeat(2);
        let timed = "aaxxAAXXBBYY".repeat(3);
        assert_eq!(names, warm + &timed, "two warm-up rounds of every instance, then 9 timed rounds (3 per instance), instance r mod 3");
        for r in &results {
            assert!(r.ok);
            let timed: Vec<usize> = r.samples.iter().filter(|s| !s.warmup).map(|s| s.instance).collect();
            assert_eq!(timed, [0, 1, 2].repeat(3));
            assert_eq!(r.instances.len(), 3);
            assert!(r.instances.iter().all(|i| i.timed_samples == 3));
            // Each Fake times 10 + its own sample count: instance 0's timed samples are its 4th, 6th
            // and 8th (after two warm-ups and a lead-in each), the same for every instance.
            assert!(r.instances.iter().all(|i| i.median == Some(16.0)));
        }
    }

    #[test]
    fn a_failing_instance_ends_its_arm_and_is_named() {
        // Every instance fails at its third sample: the first warm-up round passes, the second fails
        // on instance 0, so the arm leaves the rounds at once.
        let (results, _) = run(&[('a', 0, Some(2), 1), ('b', 0, None, 1)], Budget { instances: 2, ..NO_TIME });
        assert_eq!(results[0].error.as_deref(), Some("instance 0: a failed"));
        assert!(results[1].ok && results[1].error.is_none());
    }

    #[test]
    fn warm_up_rounds_go_on_until_every_arm_has_settled_sampling_only_the_arms_still_warming() {
        let (results, log) = run(&[('a', 0, None, 1), ('o', 7, None, 1)], NO_TIME);
        let names: String = log.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            "aoao".to_string() + &"o".repeat(5) + &"aaoo".repeat(3),
            "seven warm-up rounds (the exec settles after its 7th sample; `a` has its two after two), three timed"
        );
        assert_eq!((results[0].warmup_samples, results[1].warmup_samples), (5, 10), "warm-ups and lead-ins");
        // Only the first two warm-ups are listed.
        assert!(results.iter().all(|r| r.samples.iter().filter(|s| s.warmup).count() == 2));
    }

    #[test]
    fn an_arm_that_fails_leaves_the_rounds_with_its_error_and_a_wrong_output_is_recorded() {
        let (results, log) = run(&[('a', 0, Some(4), 1), ('b', 0, None, 2), ('c', 0, None, 1)], NO_TIME);
        let names: String = log.iter().map(|(n, _)| *n).collect();
        // `a`'s fourth sample (the first timed round's lead-in) fails.
        assert_eq!(names, "abcabcabbccbbccbbcc");
        assert_eq!(results[0].error.as_deref(), Some("a failed"));
        assert!(!results[0].ok && results[0].gpu_us_per_dispatch.is_none());
        // Every sample of `b` differs from the oracle: each is listed, warm-ups too, and the arm fails.
        assert!(!results[1].ok && results[1].samples.len() == 8 && results[1].samples.iter().all(|s| !s.oracle_ok));
        assert!(results[2].ok);
    }

    #[test]
    fn timed_rounds_stop_at_the_cap_and_warm_up_rounds_last_their_time() {
        // Samples take microseconds: a second of timed rounds ends at the cap, every arm alike.
        let budget = Budget { warmup: Duration::from_millis(3), timed: Duration::from_secs(1), ..NO_TIME };
        let started = Instant::now();
        let (results, _) = run(&[('a', 0, None, 1), ('b', 0, None, 1)], budget);
        assert!(started.elapsed() >= Duration::from_millis(3) && started.elapsed() < Duration::from_secs(1));
        for r in &results {
            assert_eq!(r.samples.iter().filter(|s| !s.warmup).count(), MAX_TIMED_SAMPLES);
            assert!(r.warmup_samples > 2, "warm-up rounds go on for 3 ms: {}", r.warmup_samples);
        }
    }
}
