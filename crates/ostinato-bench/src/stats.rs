//! Medians, bootstrap confidence intervals and the tie rule.

/// The median (mean of the two middle values for an even count). `None` for no data.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 { s[m] } else { (s[m - 1] + s[m]) / 2.0 })
}

/// A 95% percentile-bootstrap interval of the median (2000 resamples, fixed seed: reproducible).
pub fn bootstrap_ci(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ v.len() as u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut meds: Vec<f64> = (0..2000)
        .map(|_| {
            let r: Vec<f64> = (0..v.len()).map(|_| v[(next() % v.len() as u64) as usize]).collect();
            median(&r).unwrap_or(f64::NAN)
        })
        .collect();
    meds.sort_by(f64::total_cmp);
    Some((meds[49], meds[1949]))
}

/// Relative band within which two medians count as a tie.
pub const TIE_BAND: f64 = 0.03;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Win,
    /// The medians lie within the tie band of each other.
    Tie,
    Loss,
    /// The medians differ by more than the tie band but the 95% intervals overlap: the samples cannot
    /// rank the two arms (never counted as a win, tie or loss, nor in a median speedup).
    Inconclusive,
}

/// Ostinato's verdict against a baseline, from medians and intervals (lower time is better): a tie
/// within the band; outside it a win or a loss where the intervals are disjoint, else inconclusive.
pub fn verdict(ours: (f64, (f64, f64)), theirs: (f64, (f64, f64))) -> Verdict {
    let ratio = theirs.0 / ours.0;
    let overlap = ours.1 .0 <= theirs.1 .1 && theirs.1 .0 <= ours.1 .1;
    if (ratio - 1.0).abs() <= TIE_BAND {
        Verdict::Tie
    } else if overlap {
        Verdict::Inconclusive
    } else if ratio > 1.0 {
        Verdict::Win
    } else {
        Verdict::Loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_interval() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let (lo, hi) = bootstrap_ci(&[1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02]).unwrap();
        assert!(lo <= 1.0 && hi >= 1.0 && lo >= 0.9 && hi <= 1.1, "{lo} {hi}");
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict((1.0, (0.98, 1.02)), (2.0, (1.9, 2.1))), Verdict::Win);
        assert_eq!(verdict((2.0, (1.9, 2.1)), (1.0, (0.98, 1.02))), Verdict::Loss);
        assert_eq!(verdict((1.0, (1.0, 1.0)), (1.02, (1.02, 1.02))), Verdict::Tie, "within the band");
        assert_eq!(verdict((1.0, (0.9, 1.1)), (1.02, (0.8, 1.3))), Verdict::Tie, "within the band, whatever the intervals");
        // Outside the band with overlapping intervals, the samples cannot rank the arms: a row timed
        // at 81.073 against [81.073, 1925.589] is no 2.53x, and no tie either.
        assert_eq!(verdict((90.0, (88.0, 92.0)), (227.7, (81.073, 1925.589))), Verdict::Inconclusive);
        assert_eq!(verdict((1.0, (0.9, 1.1)), (1.05, (1.0, 1.1))), Verdict::Inconclusive);
    }
}
