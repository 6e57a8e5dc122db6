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
}
