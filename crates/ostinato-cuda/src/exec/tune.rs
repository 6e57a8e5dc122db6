//! Graph mode's fences chosen by measurement. `auto`'s PDL policy and graph shape come from thresholds
//! measured on rows like the kernel families (docs/fences.md), and on rows unlike them a threshold can
//! be on the wrong side: a serial chain of 1,024-block reductions that PDL would speed up, an atomic
//! chain it slows down. So where `auto` could have submitted the plan otherwise — PDL on every
//! capable edge, PDL nowhere, the plan's lanes as chains or every edge its own — the exec builds each
//! distinct submission as a graph exec of its own, launches them in turn over its first replays (the
//! user's own replays: every candidate is a correct submission of the same plan, so each replay gives
//! the plan's results, and nothing runs that the user did not ask for), times each with a pair of
//! events, and from then on launches the fastest, keeping `auto`'s own choice unless another is
//! faster by more than [`TUNE_MARGIN`] ([`PDL_MARGIN`] where only the edges' types differ) — and
//! stays faster in a second measurement of the two alone ([`CONFIRM_REPLAYS`]). The events are read
//! without waiting, at later replays; the losing graph execs are destroyed once every launch of theirs
//! has completed.
//!
//! Where the fused plan runs launches side by side (several independent kernels' blocks as one
//! launch), the candidates also include the unfused plan's submissions (`exec/instantiate.rs`), each
//! to beat `auto`'s by [`TUNE_MARGIN`]: kernels that run slower the more they overlap (64 loads in
//! flight per thread into a 128 MB table: side by side 50.12 µs a dispatch against stream capture's
//! four chains' 45.08 on an H100, `ac63517`) are then submitted apart.

use std::sync::OnceLock;

use ostinato::Plan;

use crate::error::Result;
use crate::ffi::{Event, GraphExec, Stream};
use crate::lower::{lower_with, KernelPdl, Lowering, PdlMode, PdlPolicy, ShapeMode};

/// Timed replays per candidate that count. Each follows an untimed replay of the same candidate (a
/// lead-in), so each is measured as a user's loop runs an exec, after itself: its first run pays the
/// graph's first upload of parameters, and a replay right after another submission's starts from that
/// one's state of the caches and the GPU's front end, which the replays that follow the choice never do.
pub const TUNE_SAMPLES: usize = 8;

/// At most how many replays measure `candidates` submissions: 2 × [`TUNE_SAMPLES`] of each, every
/// timed one after its lead-in, and where that picks another than `auto`'s own, [`CONFIRM_REPLAYS`]
/// more (0 where there is only one); each choice is made at a replay after its replays have all
/// completed.
pub fn tuning_replays(candidates: usize) -> usize {
    match candidates {
        0 | 1 => 0,
        n => 2 * n * TUNE_SAMPLES + CONFIRM_REPLAYS,
    }
}

/// The replays of the second measurement: `auto`'s own and the candidate the first picked, alone
/// (the other execs destroyed), [`TUNE_SAMPLES`] rounds of a lead-in and a timed replay each. The
/// switch stands only if the candidate passes the same rule again. On an H200's kernel families
/// (GPU-7813d7e1, GPU-04fb2cab, `1c6eea5`) the rows of twenty independent 64 K-element reductions
/// measured their plan-shaped PDL candidate 5–10% faster than `auto`'s while every candidate was
/// alive, five runs out of five, and that exec then ran 7–13% slower in the timed replays than in its
/// tuning, after the others were gone: the first measurement's conditions are not those the chosen
/// exec runs in. With this second measurement (`2a89da1`, GPU-e5361f9f) the whole matrix kept 24
/// switches and turned 3 down (`docs/fences.md`, decision 14).
pub const CONFIRM_REPLAYS: usize = 2 * 2 * TUNE_SAMPLES;

/// Another candidate replaces `auto`'s own submission only when its median replay is faster by more
/// than this fraction (and its slower quarter of replays is faster than `auto`'s faster quarter):
/// inside the run-to-run spread of a replay, `auto`'s choice stays. At 2% without the quartile test,
/// 8 of 30 switches on an H200's kernel families measured faster while tuning and lost 3–19% in the
/// timed replays that followed (rows of ten independent launch-bound kernels, where which exec
/// instance runs moves a replay by more than the candidates differ).
pub const TUNE_MARGIN: f64 = 0.05;

/// The margin for a candidate that submits `auto`'s own dependencies, only with other edges
/// programmatic (PDL turned on or off, the graph's shape the same). Those measure as the timed
/// replays that follow: on an H200's kernel families (`ecc2738`, GPU-a51401e6) every serial row whose
/// PDL candidate measured 1.8–4.9% faster while tuning ran 2.4–6.4% slower than the expert's PDL
/// capture of the same chain in the timed replays, five of them outside the report's 3% tie band,
/// because the 5% margin kept `auto`'s own; at 2% (`2952970`, GPU-ce638efc) 14 rows switched to PDL
/// on, and four of those five tie the expert (the fifth measured its PDL candidate 3.5% faster, its
/// quartiles overlapping `auto`'s). What moved by more than the candidates differ was a change of
/// shape on launch-bound independent rows ([`TUNE_MARGIN`]).
pub const PDL_MARGIN: f64 = 0.02;

/// How the first measurement judges a candidate that submits `auto`'s own dependencies with other
/// edge types (PDL turned on or off, nothing else changed): a study setting
/// ([`crate::CudaOptions::tune_edge_types`], the bench's `--tune-edge-types`), outside the exec
/// options every shell takes. The second measurement ([`CONFIRM_REPLAYS`]) always applies the whole
/// rule. Why it exists: on an H200 (`c853ad1`, GPU-89a95cde) the serial chain of ten 2,048-block
/// geometry kernels measured its PDL candidate 4.2–4.9% faster than `auto`'s own in all three of the
/// bench's execs, and two of them kept `auto`'s own on the quartile test alone, 5% behind the expert's
/// PDL graph; whether passing such a candidate on to the second measurement on its median loses
/// elsewhere is what the setting measures (docs/fences.md, decision 14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EdgeTypesRule {
    /// Its median faster by more than [`PDL_MARGIN`] and its slower quarter of replays faster than
    /// `auto`'s faster quarter, as every candidate.
    #[default]
    Quartiles,
    /// Its median faster by more than [`PDL_MARGIN`] alone; the second measurement then applies the
    /// quartiles too.
    Median,
}

impl ostinato::Named for EdgeTypesRule {
    const ALL: &'static [Self] = &[EdgeTypesRule::Quartiles, EdgeTypesRule::Median];
    fn name(self) -> &'static str {
        match self {
            EdgeTypesRule::Quartiles => "quartiles",
            EdgeTypesRule::Median => "median",
        }
    }
}

/// Whether the exec measures its candidate submissions (graph mode with the `auto` PDL policy and
/// shape only: a policy the user fixed is kept as given).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tune {
    /// Over the first replays, wherever `auto` could have submitted the plan otherwise.
    #[default]
    Auto,
    /// Never: `auto`'s thresholds decide alone.
    Off,
}

impl ostinato::Named for Tune {
    const ALL: &'static [Self] = &[Tune::Auto, Tune::Off];
    fn name(self) -> &'static str {
        match self {
            Tune::Auto => "auto",
            Tune::Off => "off",
        }
    }
}

/// What the measurement chose ([`crate::Decisions::tuned`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    /// Each candidate submission (the first is `auto`'s own) with its median GPU µs per replay in the
    /// first measurement.
    pub candidates: Vec<(String, f64)>,
    /// Where the first measurement picked another than `auto`'s own: that candidate and the medians
    /// (µs per replay) of `auto`'s and its in the second measurement of the two alone
    /// ([`CONFIRM_REPLAYS`]).
    pub confirmation: Option<(usize, [f64; 2])>,
    /// The one the exec launches from now on.
    pub chosen: usize,
}

/// What a replay's reading of the measurement's events found ([`Tuning::poll`]).
#[derive(Debug)]
pub(super) enum Polled {
    /// Replays still to launch or to complete.
    Pending,
    /// The first measurement picked candidate `challenger`: it and `auto`'s own are measured again,
    /// alone; every other exec may go once its launches have completed (they have).
    Narrowed { challenger: usize },
    /// The choice, final.
    Chosen(Tuned),
}

/// The policies a submission may be measured under besides `base` (`auto`): PDL on and off, each in
/// the auto shape and, where the plan has several lanes, in both explicit shapes.
fn policies(base: PdlPolicy, lanes: usize) -> Vec<(String, PdlPolicy)> {
    let shapes: &[ShapeMode] = if lanes > 1 { &[ShapeMode::Auto, ShapeMode::Lanes, ShapeMode::Plan] } else { &[ShapeMode::Auto] };
    let mut out = vec![("auto".to_string(), base)];
    for mode in [PdlMode::On, PdlMode::Off] {
        for &shape in shapes {
            let label = match shape {
                ShapeMode::Auto => format!("pdl {}", mode.as_str()),
                _ => format!("pdl {}, {} shape", mode.as_str(), shape.as_str()),
            };
            out.push((label, PdlPolicy { mode, shape, ..base }));
        }
    }
    for shape in shapes.iter().filter(|s| **s != ShapeMode::Auto) {
        out.push((format!("auto, {} shape", shape.as_str()), PdlPolicy { shape: *shape, ..base }));
    }
    out
}

/// Whether two lowerings submit the same graph: the same edges of the same types and the same build
/// of every node (the reasons an edge is full may differ).
fn same_submission(a: &Lowering, b: &Lowering) -> bool {
    let edges = |l: &Lowering| l.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect::<Vec<_>>();
    edges(a) == edges(b) && a.launches.iter().map(|l| l.variant).eq(b.launches.iter().map(|l| l.variant))
}

/// Plans of several lanes and at most this many launches measure each distinct submission in two
/// graph execs of its own. Identical graphs of side-by-side branches instantiate into executables
/// that run apart, each at its own speed for as long as it lives: on an H200 (2026-12-04,
/// GPU-9cf33b08, three processes), the expert's four PDL chains of ten 64 K-element two-stage
/// reductions ran 0.58, 0.71 and 0.73 µs a dispatch, Ostinato's same submission 0.59 to 0.73, while
/// each exec's timed replays stayed within 1% of its own earlier ones. Where launches are few the
/// second exec costs little to build, and the measurement keeps whichever runs faster: over the whole
/// matrix (`1b00ac0`, GPU-a6b9570a) a second exec was kept on 7 of 213 rows, e.g. the 16-consumer
/// fan's, 9.10 µs a replay against its first exec's 9.81, timed 8.83 beside the expert's 8.80.
pub const SECOND_INSTANCE_MAX_LAUNCHES: usize = 64;

/// The distinct submissions of `plan` worth measuring: `auto`'s own (`base`, lowered already as
/// `auto_lowering`) first, then each other policy's lowering that submits another graph. A policy whose
/// lowering is refused (a declared pre-wait read that PDL on would race) is no candidate. A plan of
/// several lanes and at most [`SECOND_INSTANCE_MAX_LAUNCHES`] launches then lists each of them once
/// more (a second graph exec of the same submission).
pub(crate) fn candidates(plan: &Plan, kernels: &[KernelPdl], helpers_pdl: bool, base: PdlPolicy, auto_lowering: Lowering) -> Vec<(String, Lowering)> {
    let lanes = plan.lanes().count();
    let mut out: Vec<(String, Lowering)> = vec![("auto".to_string(), auto_lowering)];
    for (label, policy) in policies(base, lanes).into_iter().skip(1) {
        let Ok(lowering) = lower_with(plan, kernels, helpers_pdl, policy) else { continue };
        if !out.iter().any(|(_, l)| same_submission(l, &lowering)) {
            out.push((label, lowering));
        }
    }
    if lanes > 1 && out[0].1.launches.len() <= SECOND_INSTANCE_MAX_LAUNCHES {
        let seconds: Vec<(String, Lowering)> = out.iter().map(|(label, l)| (format!("{label}, second exec"), l.clone())).collect();
        out.extend(seconds);
    }
    out
}

/// Whether two lowerings submit the same dependencies: the same edges, whatever their types.
fn same_dependencies(a: &Lowering, b: &Lowering) -> bool {
    a.edges.iter().map(|e| (e.from, e.to)).eq(b.edges.iter().map(|e| (e.from, e.to)))
}

/// The margin by which each of `candidates` (`auto`'s first, whose own is 0) must beat `auto`'s:
/// [`PDL_MARGIN`] where it submits `auto`'s dependencies (with other edge types, or the same
/// submission in a second exec), else [`TUNE_MARGIN`]. The candidates from `other_plan` on lower
/// another plan (the unfused one, `exec/instantiate.rs`): their node ids are not `auto`'s, and each
/// gets [`TUNE_MARGIN`].
pub(crate) fn margins(candidates: &[(String, Lowering)], other_plan: usize) -> Vec<f64> {
    let Some((_, auto)) = candidates.first() else { return Vec::new() };
    candidates
        .iter()
        .enumerate()
        .map(|(i, (_, l))| {
            if i == 0 {
                0.0
            } else if i < other_plan && same_dependencies(l, auto) {
                PDL_MARGIN
            } else {
                TUNE_MARGIN
            }
        })
        .collect()
}

/// Whether the first measurement applies the quartile test to each of `candidates` (`auto`'s first):
/// everywhere under [`EdgeTypesRule::Quartiles`]; under [`EdgeTypesRule::Median`] not to a candidate
/// that submits `auto`'s dependencies with other edge types (a second exec of the same submission
/// keeps the test: what differs there is the instance, not the graph). A candidate from `other_plan`
/// on (another plan's, [`margins`]) always keeps it.
pub(crate) fn first_quartiles(candidates: &[(String, Lowering)], rule: EdgeTypesRule, other_plan: usize) -> Vec<bool> {
    let Some((_, auto)) = candidates.first() else { return Vec::new() };
    candidates
        .iter()
        .enumerate()
        .map(|(i, (_, l))| !(rule == EdgeTypesRule::Median && i > 0 && i < other_plan && same_dependencies(l, auto) && !same_submission(l, auto)))
        .collect()
}

/// Which candidate each tuning replay launches: `rounds` rounds in which every candidate runs twice in
/// a row (a lead-in, then the replay timed: [`is_timed`]), each round starting one candidate later than
/// the one before (so no candidate always follows the same other).
pub(crate) fn schedule(candidates: usize, rounds: usize) -> Vec<usize> {
    (0..rounds).flat_map(|r| (0..candidates).flat_map(move |j| [(r + j) % candidates; 2])).collect()
}

/// Whether tuning replay `i` of a [`schedule`] counts: the second of its pair (the first leads in).
pub(crate) fn is_timed(i: usize) -> bool {
    i % 2 == 1
}

/// Writes the median of each candidate's timed replays (µs; [`is_timed`]), by `schedule`, into `medians`
/// (one per candidate) and returns the candidate kept: the one with the lowest median among those
/// clearly faster than candidate 0 — a median lower by more than its `margins` entry, and, where its
/// `quartile_test` entry says, a third quartile below candidate 0's first — else candidate 0. `scratch`
/// is working space (the replay that chooses allocates nothing once it holds `times.len()`).
pub(crate) fn choose(schedule: &[usize], times: &[f64], margins: &[f64], quartile_test: &[bool], medians: &mut [f64], scratch: &mut Vec<f64>) -> usize {
    // (median, first quartile, third quartile) of candidate `c`.
    let mut quartiles = |c: usize| {
        scratch.clear();
        scratch.extend(schedule.iter().zip(times).enumerate().filter(|(i, (s, _))| is_timed(*i) && **s == c).map(|(_, (_, t))| *t));
        scratch.sort_by(f64::total_cmp);
        let at = |q: f64| match scratch.len() {
            0 => f64::INFINITY,
            n => {
                // Linear interpolation between the closest ranks.
                let x = q * (n - 1) as f64;
                let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
                scratch[lo] + (scratch[hi] - scratch[lo]) * (x - lo as f64)
            }
        };
        (at(0.5), at(0.25), at(0.75))
    };
    // Candidate 0 comes first, so its median and first quartile are known when the others are judged.
    let (mut auto, mut auto_q1, mut chosen) = (f64::INFINITY, f64::INFINITY, 0);
    for c in 0..medians.len() {
        let (median, q1, q3) = quartiles(c);
        medians[c] = median;
        if c == 0 {
            (auto, auto_q1) = (median, q1);
        } else if median < auto * (1.0 - margins[c]) && (!quartile_test[c] || q3 < auto_q1) && median < medians[chosen] {
            chosen = c;
        }
    }
    chosen
}

/// The measurement in progress: which candidate each tuning replay launches, the events around each,
/// and the times read so far.
pub(super) struct Tuning {
    /// Each candidate's label and, once chosen, its median (made at instantiation: the replay that
    /// chooses allocates nothing).
    result: Vec<(String, f64)>,
    /// Each candidate's margin ([`margins`]).
    margins: Vec<f64>,
    /// Whether the first measurement applies the quartile test to each candidate ([`first_quartiles`]).
    quartiles: Vec<bool>,
    medians: Vec<f64>,
    scratch: Vec<f64>,
    /// The candidate (by index into `result`) each tuning replay of the present measurement launches.
    schedule: Vec<usize>,
    /// In the second measurement, the candidate the first picked (`schedule` then names `0` and it).
    challenger: Option<usize>,
    /// The second measurement's schedule of a pair (`0` `auto`'s own, `1` the pick), made with the rest
    /// (the replay that narrows allocates nothing).
    pair: Vec<usize>,
    events: Vec<(Event, Event)>,
    /// µs of each tuning replay whose events have been read, in launch order.
    times: Vec<f64>,
    /// Tuning replays launched.
    launched: usize,
}

impl Tuning {
    /// A measurement of the candidates called `labels` (`auto`'s first), each to beat `auto`'s by its
    /// `margins` entry (in the first measurement with the quartile test where `quartiles` says),
    /// over [`TUNE_SAMPLES`] rounds.
    pub(super) fn new(labels: Vec<String>, margins: Vec<f64>, quartiles: Vec<bool>) -> Result<Tuning> {
        let events = (0..schedule(labels.len(), TUNE_SAMPLES).len()).map(|_| Ok((Event::new(true)?, Event::new(true)?))).collect::<Result<Vec<_>>>()?;
        Ok(Tuning::with_events(labels, margins, quartiles, events))
    }

    /// The measurement on `events` (one pair per replay of the first measurement's schedule; none
    /// where a test feeds the times itself).
    fn with_events(labels: Vec<String>, margins: Vec<f64>, quartiles: Vec<bool>, events: Vec<(Event, Event)>) -> Tuning {
        let schedule = schedule(labels.len(), TUNE_SAMPLES);
        debug_assert_eq!(schedule.len() + CONFIRM_REPLAYS, tuning_replays(labels.len()));
        Tuning {
            medians: vec![0.0; labels.len()],
            margins,
            quartiles,
            result: labels.into_iter().map(|l| (l, 0.0)).collect(),
            scratch: Vec::with_capacity(schedule.len()),
            times: Vec::with_capacity(schedule.len()),
            schedule,
            challenger: None,
            pair: self::schedule(2, TUNE_SAMPLES),
            events,
            launched: 0,
        }
    }

    /// The candidate the next replay measures (`None`: every tuning replay is launched).
    pub(super) fn next(&self) -> Option<usize> {
        self.schedule.get(self.launched).copied()
    }

    /// Launches `exec` (the candidate [`Tuning::next`] named) on `stream` between its pair of events.
    pub(super) fn launch(&mut self, exec: &GraphExec, stream: &Stream) -> Result<()> {
        let (start, stop) = &self.events[self.launched];
        start.record(stream)?;
        exec.launch(stream)?;
        stop.record(stream)?;
        self.launched += 1;
        Ok(())
    }

    /// Reads the times of the tuning replays that have completed, without waiting; once every one
    /// of the first measurement has, the candidate it picked (measured again with `auto`'s own alone,
    /// where it is another), and once the second's have, what was chosen (once: the result moves out).
    pub(super) fn poll(&mut self) -> Result<Polled> {
        while self.times.len() < self.launched {
            let (start, stop) = &self.events[self.times.len()];
            if !stop.is_done()? {
                return Ok(Polled::Pending);
            }
            self.times.push(f64::from(stop.elapsed_ms_since(start)?) * 1e3);
        }
        Ok(self.decide())
    }

    /// What the times read so far decide: nothing until every replay of the present measurement is
    /// timed; then, after the first, the pick to measure again (or `auto`'s own, chosen), after the
    /// second, the choice.
    fn decide(&mut self) -> Polled {
        if self.times.len() < self.schedule.len() {
            return Polled::Pending;
        }
        let Some(challenger) = self.challenger else {
            let picked = choose(&self.schedule, &self.times, &self.margins, &self.quartiles, &mut self.medians, &mut self.scratch);
            for ((_, m), median) in self.result.iter_mut().zip(&self.medians) {
                *m = *median;
            }
            if picked == 0 {
                return Polled::Chosen(Tuned { candidates: std::mem::take(&mut self.result), confirmation: None, chosen: 0 });
            }
            // The second measurement: `auto`'s own and the pick, on the first's events (every one
            // of them has completed), in a schedule of the same length or shorter.
            self.schedule.clear();
            self.schedule.extend(self.pair.iter().map(|&c| if c == 0 { 0 } else { picked }));
            self.times.clear();
            self.launched = 0;
            self.challenger = Some(picked);
            return Polled::Narrowed { challenger: picked };
        };
        // The pair's medians, `auto`'s first, judged by the same margin and the whole rule (the
        // quartile test whatever the first measurement applied).
        let mut medians = [0.0; 2];
        let kept = choose(&self.pair, &self.times, &[0.0, self.margins[challenger]], &[true, true], &mut medians, &mut self.scratch);
        let chosen = if kept == 1 { challenger } else { 0 };
        Polled::Chosen(Tuned { candidates: std::mem::take(&mut self.result), confirmation: Some((challenger, medians)), chosen })
    }
}

/// Where the exec and its replayer share what the measurement chose (set once, by the replayer).
pub(super) type Chosen = std::sync::Arc<OnceLock<Tuned>>;

/// Which submission a replay launches: `auto`'s (0) until the measurement has chosen.
pub(super) fn active(chosen: &Chosen) -> usize {
    chosen.get().map_or(0, |t| t.chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_candidate_twice_in_a_row_starting_one_later() {
        assert_eq!(schedule(3, 2), vec![0, 0, 1, 1, 2, 2, 1, 1, 2, 2, 0, 0]);
        assert_eq!(schedule(1, 2), vec![0, 0, 0, 0]);
        let s = schedule(4, TUNE_SAMPLES);
        assert_eq!(s.len() + CONFIRM_REPLAYS, tuning_replays(4));
        assert_eq!(schedule(2, TUNE_SAMPLES).len(), CONFIRM_REPLAYS, "the second measurement is a pair's schedule");
        assert_eq!(tuning_replays(1), 0, "one submission: nothing to measure");
        for c in 0..4 {
            let timed: Vec<usize> = (0..s.len()).filter(|&i| s[i] == c && is_timed(i)).collect();
            assert_eq!(timed.len(), TUNE_SAMPLES);
            assert!(timed.iter().all(|&i| s[i - 1] == c), "every timed replay follows a replay of its own candidate");
        }
    }

    /// The times of `schedule`'s replays where each candidate's k-th timed launch takes `lists[c][k]`
    /// µs (its lead-ins 99).
    fn times_of(schedule: &[usize], lists: &[&[f64]]) -> Vec<f64> {
        let mut seen = vec![0; lists.len()];
        (0..schedule.len())
            .map(|i| {
                let c = schedule[i];
                if is_timed(i) {
                    seen[c] += 1;
                    lists[c][seen[c] - 1]
                } else {
                    99.0
                }
            })
            .collect()
    }

    fn choose(n: usize, schedule: &[usize], times: &[f64], margin: f64) -> (usize, Vec<f64>) {
        let mut medians = vec![0.0; n];
        let margins: Vec<f64> = (0..n).map(|c| if c == 0 { 0.0 } else { margin }).collect();
        let chosen = super::choose(schedule, times, &margins, &vec![true; n], &mut medians, &mut Vec::new());
        (chosen, medians)
    }

    #[test]
    fn the_fastest_median_wins_only_past_the_margin_and_lead_ins_do_not_count() {
        let s = schedule(2, TUNE_SAMPLES);
        // Candidate 1 is 10% faster; its lead-ins (slow: after the other candidate) are not counted.
        let times: Vec<f64> = s
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                if c == 0 {
                    10.0
                } else if !is_timed(i) {
                    100.0
                } else {
                    9.0
                }
            })
            .collect();
        assert_eq!(choose(2, &s, &times, TUNE_MARGIN), (1, vec![10.0, 9.0]));
        // 3% faster: inside the margin, auto's own stays.
        let close: Vec<f64> = s.iter().map(|&c| if c == 0 { 10.0 } else { 9.7 }).collect();
        assert_eq!(choose(2, &s, &close, TUNE_MARGIN).0, 0);
        // Slower: auto's own stays.
        let slower: Vec<f64> = s.iter().map(|&c| if c == 0 { 10.0 } else { 12.0 }).collect();
        assert_eq!(choose(2, &s, &slower, TUNE_MARGIN).0, 0);
        // One outlier does not move a median (auto's second timed replay).
        let outlier = (0..s.len()).filter(|&i| s[i] == 0 && is_timed(i)).nth(1).unwrap();
        let noisy: Vec<f64> = s
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                if c == 0 {
                    if i == outlier {
                        1.0
                    } else {
                        10.0
                    }
                } else {
                    9.0
                }
            })
            .collect();
        assert_eq!(choose(2, &s, &noisy, TUNE_MARGIN), (1, vec![10.0, 9.0]));
        // A median 10% lower whose samples overlap auto's (a bimodal spread): auto's own stays.
        let spread = times_of(&s, &[&[8.0, 8.0, 8.0, 8.0, 10.0, 10.0, 10.0, 10.0], &[7.0, 7.0, 7.5, 7.5, 8.5, 8.5, 9.5, 9.5]]);
        let (chosen, medians) = choose(2, &s, &spread, TUNE_MARGIN);
        assert!(medians[1] < medians[0] * (1.0 - TUNE_MARGIN) && chosen == 0, "{medians:?}");
        // Of two clearly faster candidates, the faster.
        let s3 = schedule(3, TUNE_SAMPLES);
        let three: Vec<f64> = s3.iter().map(|&c| [10.0, 8.0, 7.0][c]).collect();
        assert_eq!(choose(3, &s3, &three, TUNE_MARGIN).0, 2);
    }

    /// Runs the present measurement of `t` to its end, each replay of candidate `c` timed `us(c)` µs
    /// (no GPU: the times a replay's events would give): what they decide, and the candidate each
    /// replay launched.
    fn measure(t: &mut Tuning, us: impl Fn(usize) -> f64) -> (Polled, Vec<usize>) {
        let mut launched = Vec::new();
        while let Some(c) = t.next() {
            launched.push(c);
            t.launched += 1;
            t.times.push(us(c));
        }
        assert!(launched.len() <= tuning_replays(t.result.len()));
        (t.decide(), launched)
    }

    fn three() -> Tuning {
        let labels = vec!["auto".to_string(), "pdl on".to_string(), "pdl off".to_string()];
        Tuning::with_events(labels, vec![0.0, TUNE_MARGIN, TUNE_MARGIN], vec![true; 3], Vec::new())
    }

    #[test]
    fn a_pick_is_measured_again_with_autos_own_alone_and_kept_only_if_it_still_wins() {
        // Candidate 2 is 20% faster in both measurements: kept, both medians reported.
        let mut t = three();
        assert!(matches!(measure(&mut t, |c| [10.0, 9.8, 8.0][c]).0, Polled::Narrowed { challenger: 2 }));
        let (Polled::Chosen(tuned), second) = measure(&mut t, |c| [10.0, 9.8, 8.0][c]) else { panic!("the second measurement decides") };
        assert_eq!(second.len(), CONFIRM_REPLAYS);
        assert!(second.iter().all(|&c| c == 0 || c == 2), "only auto's own and the pick: {second:?}");
        assert_eq!((tuned.chosen, tuned.confirmation), (2, Some((2, [10.0, 8.0]))));
        assert_eq!(tuned.candidates.iter().map(|(_, us)| *us).collect::<Vec<_>>(), [10.0, 9.8, 8.0]);

        // Faster only in the first (measured beside the others): auto's own stays.
        let mut t = three();
        assert!(matches!(measure(&mut t, |c| [10.0, 9.8, 8.0][c]).0, Polled::Narrowed { challenger: 2 }));
        let (Polled::Chosen(tuned), _) = measure(&mut t, |c| [10.0, 9.8, 10.1][c]) else { panic!("chosen") };
        assert_eq!((tuned.chosen, tuned.confirmation), (0, Some((2, [10.0, 10.1]))));

        // auto's own fastest: chosen at once, no second measurement.
        let mut t = three();
        let (Polled::Chosen(tuned), _) = measure(&mut t, |c| [10.0, 10.2, 11.0][c]) else { panic!("chosen at once") };
        assert_eq!((tuned.chosen, tuned.confirmation), (0, None));

        // Replays not yet timed decide nothing.
        let mut t = three();
        t.launched = 1;
        t.times.push(10.0);
        assert!(matches!(t.decide(), Polled::Pending));
    }

    /// `n` nodes of `blocks` blocks, each on its own 1 KiB slice (`independent`) or all on one
    /// (a serial chain).
    fn nodes(n: u64, blocks: u32, independent: bool) -> Plan {
        use ostinato::{Access, Arg, Graph, KernelSig, Launch, Slice};
        let mut g = Graph::new();
        let c = g.add_buffer("c", 1024 * n).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite)).unwrap();
        for i in 0..n {
            let x = Slice { buffer: c, offset: if independent { 1024 * i } else { 0 }, len: 1024 };
            g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Buffer(x)], &[]).unwrap();
        }
        Plan::compile(&g).unwrap()
    }

    fn labels(plan: &Plan) -> Vec<String> {
        let kernels = [KernelPdl::plain(true)];
        let auto = lower_with(plan, &kernels, true, PdlPolicy::default()).unwrap();
        let found = candidates(plan, &kernels, true, PdlPolicy::default(), auto);
        // Small plans of several lanes list every submission twice (a second exec), the rest once.
        let (firsts, seconds) = found.split_at(if found.iter().any(|(l, _)| l.ends_with("second exec")) { found.len() / 2 } else { found.len() });
        for (i, (_, a)) in firsts.iter().enumerate() {
            for (_, b) in &firsts[..i] {
                assert!(!same_submission(a, b), "two candidates submit the same graph");
            }
        }
        for ((la, a), (lb, b)) in firsts.iter().zip(seconds) {
            assert!(same_submission(a, b) && *lb == format!("{la}, second exec"), "{la} / {lb}");
        }
        firsts.iter().map(|(label, _)| label.clone()).collect()
    }

    #[test]
    fn small_plans_of_several_lanes_are_measured_in_two_execs_each() {
        let count = |plan: &Plan| {
            let kernels = [KernelPdl::plain(true)];
            let auto = lower_with(plan, &kernels, true, PdlPolicy::default()).unwrap();
            let found = candidates(plan, &kernels, true, PdlPolicy::default(), auto);
            (found.len(), found.iter().filter(|(l, _)| l.ends_with("second exec")).count())
        };
        let (all, seconds) = count(&nodes(10, 256, true));
        assert!(seconds > 0 && all == 2 * seconds, "{all} {seconds}");
        assert_eq!(count(&nodes(10, 1024, false)).1, 0, "one lane: one exec each");
        assert_eq!(count(&nodes(SECOND_INSTANCE_MAX_LAUNCHES as u64 + 4, 256, true)).1, 0, "many launches: one exec each");
    }

    #[test]
    fn the_candidates_are_the_distinct_submissions_auto_could_have_made() {
        // A chain of 1,024-block nodes: auto makes every edge full, as PDL off would; PDL on differs.
        assert_eq!(labels(&nodes(10, 1024, false)), ["auto", "pdl on"]);
        // A chain of 64-block nodes: auto makes every edge programmatic, as PDL on would.
        assert_eq!(labels(&nodes(10, 64, false)), ["auto", "pdl off"]);
        // One node: nothing to choose.
        assert_eq!(labels(&nodes(1, 64, false)), ["auto"]);
        // Ten independent 256-block nodes on four lanes: the lane shape with full links (auto), and
        // with programmatic ones, and ten branches.
        let indep = labels(&nodes(10, 256, true));
        assert_eq!(indep[0], "auto");
        assert!(indep.len() >= 3 && indep.iter().any(|l| l.contains("plan shape") || l == "pdl off"), "{indep:?}");
    }

    #[test]
    fn a_single_lane_plan_is_measured_under_pdl_on_and_off_only() {
        let labels: Vec<String> = policies(PdlPolicy::default(), 1).into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["auto", "pdl on", "pdl off"]);
        assert_eq!(policies(PdlPolicy::default(), 4).len(), 9);
    }

    #[test]
    fn a_pdl_toggle_of_autos_own_dependencies_needs_the_smaller_margin() {
        let kernels = [KernelPdl::plain(true)];
        // A serial chain measured under PDL on and off: the same dependencies.
        let chain = nodes(10, 1024, false);
        let auto = lower_with(&chain, &kernels, true, PdlPolicy::default()).unwrap();
        let found = candidates(&chain, &kernels, true, PdlPolicy::default(), auto);
        assert_eq!(margins(&found, found.len()), [0.0, PDL_MARGIN]);
        // Independent nodes: a change of shape needs the larger one.
        let plan = nodes(10, 32, true);
        let auto = lower_with(&plan, &kernels, true, PdlPolicy::default()).unwrap();
        let found = candidates(&plan, &kernels, true, PdlPolicy::default(), auto);
        let m = margins(&found, found.len());
        assert!(m.contains(&TUNE_MARGIN), "{m:?}");
        for ((label, l), m) in found.iter().zip(&m).skip(1) {
            assert_eq!(*m, if same_dependencies(l, &found[0].1) { PDL_MARGIN } else { TUNE_MARGIN }, "{label}");
        }
    }

    #[test]
    fn the_median_rule_drops_the_quartile_test_only_for_a_change_of_edge_types_in_the_first_pass() {
        let kernels = [KernelPdl::plain(true)];
        // A serial chain: PDL on changes only the edges' types.
        let chain = nodes(10, 1024, false);
        let auto = lower_with(&chain, &kernels, true, PdlPolicy::default()).unwrap();
        let found = candidates(&chain, &kernels, true, PdlPolicy::default(), auto);
        assert_eq!(first_quartiles(&found, EdgeTypesRule::Quartiles, found.len()), [true, true]);
        assert_eq!(first_quartiles(&found, EdgeTypesRule::Median, found.len()), [true, false]);
        // Side by side: a change of shape, and a second exec of the same submission, keep the test.
        let plan = nodes(10, 256, true);
        let auto = lower_with(&plan, &kernels, true, PdlPolicy::default()).unwrap();
        let found = candidates(&plan, &kernels, true, PdlPolicy::default(), auto);
        let q = first_quartiles(&found, EdgeTypesRule::Median, found.len());
        for ((label, l), q) in found.iter().zip(&q) {
            let types_only = same_dependencies(l, &found[0].1) && !same_submission(l, &found[0].1);
            assert_eq!(*q, !types_only, "{label}");
            if label.ends_with("second exec") && same_submission(l, &found[0].1) {
                assert!(*q, "a second exec of auto's own keeps the test");
            }
        }
    }

    #[test]
    fn another_plans_candidates_need_the_larger_margin_and_the_quartiles_whatever_their_edges() {
        let kernels = [KernelPdl::plain(true)];
        // A chain measured under PDL on and off, listed twice: the second copy stands for another
        // plan's candidates, whose node ids may well coincide with `auto`'s.
        let chain = nodes(10, 1024, false);
        let auto = lower_with(&chain, &kernels, true, PdlPolicy::default()).unwrap();
        let mut found = candidates(&chain, &kernels, true, PdlPolicy::default(), auto);
        let own = found.len();
        found.extend(found.clone());
        let m = margins(&found, own);
        assert_eq!(m[..own], [0.0, PDL_MARGIN]);
        assert!(m[own..].iter().all(|&m| m == TUNE_MARGIN), "{m:?}");
        let q = first_quartiles(&found, EdgeTypesRule::Median, own);
        assert_eq!(q[..own], [true, false]);
        assert!(q[own..].iter().all(|&q| q), "{q:?}");
    }

    #[test]
    fn a_median_passed_pick_must_still_pass_the_quartiles_in_the_second_measurement() {
        // `pdl on` 5% faster by its median but with a slow quarter overlapping auto's fast one.
        let s = schedule(2, TUNE_SAMPLES);
        let overlapping: [&[f64]; 2] = [&[40.0, 40.0, 40.5, 40.5, 40.5, 41.0, 41.0, 41.0], &[37.0, 37.5, 38.0, 38.0, 38.5, 40.6, 40.8, 41.0]];
        let times = times_of(&s, &overlapping);
        let margins = [0.0, PDL_MARGIN];
        let mut medians = [0.0; 2];
        assert_eq!(super::choose(&s, &times, &margins, &[true, true], &mut medians, &mut Vec::new()), 0, "the whole rule: {medians:?}");
        assert_eq!(super::choose(&s, &times, &margins, &[true, false], &mut medians, &mut Vec::new()), 1, "the median alone");
        // In an exec: the first pass narrows to it, the second applies the quartiles and keeps auto's.
        let labels = vec!["auto".to_string(), "pdl on".to_string()];
        let mut t = Tuning::with_events(labels, margins.to_vec(), vec![true, false], Vec::new());
        let feed = |t: &mut Tuning| {
            let mut seen = [0usize; 2];
            while let Some(c) = t.next() {
                let i = t.launched;
                t.launched += 1;
                t.times.push(if is_timed(i) { (overlapping[c][seen[c] % 8], seen[c] += 1).0 } else { 99.0 });
            }
            t.decide()
        };
        assert!(matches!(feed(&mut t), Polled::Narrowed { challenger: 1 }));
        let Polled::Chosen(tuned) = feed(&mut t) else { panic!("the second measurement decides") };
        assert_eq!(tuned.chosen, 0, "{tuned:?}");
        // Clearly faster in both: kept.
        let labels = vec!["auto".to_string(), "pdl on".to_string()];
        let mut t = Tuning::with_events(labels, margins.to_vec(), vec![true, false], Vec::new());
        let (first, _) = measure(&mut t, |c| [40.0, 38.0][c]);
        assert!(matches!(first, Polled::Narrowed { challenger: 1 }));
        let (Polled::Chosen(tuned), _) = measure(&mut t, |c| [40.0, 38.0][c]) else { panic!("decided") };
        assert_eq!(tuned.chosen, 1);
    }
}
