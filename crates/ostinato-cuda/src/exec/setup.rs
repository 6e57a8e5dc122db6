//! Where making an exec goes: `instantiate`'s stages in order, each with its wall time, so a slow
//! instantiation (a long chain's fused kernels, many candidate graphs) names its stage
//! ([`Decisions::setup`](super::Decisions::setup)).

use std::time::{Duration, Instant};

/// Laps of `instantiate`, each the wall time since the one before.
pub(super) struct Stopwatch {
    last: Instant,
    laps: Vec<(String, Duration)>,
}

impl Stopwatch {
    pub(super) fn start() -> Stopwatch {
        Stopwatch { last: Instant::now(), laps: Vec::new() }
    }

    /// Ends the stage `stage`: the time since the last lap (or the start) is its own.
    pub(super) fn lap(&mut self, stage: impl Into<String>) {
        let now = Instant::now();
        self.laps.push((stage.into(), now - self.last));
        self.last = now;
    }

    /// The stages in order, the time since the last lap as `last`.
    pub(super) fn finish(mut self, last: &str) -> Vec<(String, Duration)> {
        self.lap(last);
        self.laps
    }
}

/// `laps` (a stage and its milliseconds, as [`Decisions::setup`](super::Decisions::setup) gives them in
/// order) as one line, the candidate submissions' builds summed into one item with the largest named:
/// `checks 2.00, fusion 300.00, 6 submissions 140.00 (the largest `auto` 30.00), the rest 0.50`.
pub fn setup_stage_list(laps: &[(String, f64)]) -> String {
    let mut items = Vec::new();
    let subs: Vec<&(String, f64)> = laps.iter().filter(|(stage, _)| stage.starts_with("submission ")).collect();
    let mut subs_said = false;
    for (stage, ms) in laps {
        if !stage.starts_with("submission ") {
            items.push(format!("{stage} {ms:.2}"));
        } else if !subs_said {
            subs_said = true;
            let total: f64 = subs.iter().map(|(_, ms)| ms).sum();
            let (largest, most) = subs.iter().map(|(l, ms)| (l.trim_start_matches("submission "), *ms)).max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(("", 0.0));
            items.push(match subs.len() {
                1 => format!("{stage} {total:.2}"),
                n => format!("{n} submissions {total:.2} (the largest {largest} {most:.2})"),
            });
        }
    }
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_are_the_stages_in_order_and_add_up_to_the_whole() {
        let begun = Instant::now();
        let mut w = Stopwatch::start();
        std::thread::sleep(Duration::from_millis(2));
        w.lap("first");
        w.lap("second");
        let laps = w.finish("rest");
        let whole = begun.elapsed();
        let names: Vec<&str> = laps.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["first", "second", "rest"]);
        assert!(laps[0].1 >= Duration::from_millis(2));
        assert!(laps.iter().map(|(_, d)| *d).sum::<Duration>() <= whole);
    }

    #[test]
    fn the_stage_list_sums_the_submissions_where_the_first_was_built() {
        let laps: Vec<(String, f64)> =
            [("checks", 2.0), ("submission `auto`", 30.0), ("memory", 1.0), ("submission `pdl on`", 40.0)].iter().map(|(s, ms)| (s.to_string(), *ms)).collect();
        assert_eq!(setup_stage_list(&laps), "checks 2.00, 2 submissions 70.00 (the largest `pdl on` 40.00), memory 1.00");
        assert_eq!(setup_stage_list(&laps[..2]), "checks 2.00, submission `auto` 30.00");
    }
}
