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

/// Resamples of every bootstrap interval.
const RESAMPLES: usize = 2000;

/// A 95% percentile-bootstrap interval of the median (2000 resamples, fixed seed: reproducible).
pub fn bootstrap_ci(v: &[f64]) -> Option<(f64, f64)> {
    bootstrap_ci_grouped(&[v])
}

/// A 95% percentile-bootstrap interval of the median of samples taken from several instances of one
/// arm (each a `group`), resampled in two stages: the instances with replacement, then each drawn
/// instance's samples with replacement; the median of each resample pools what was drawn. Where
/// instances differ more than samples of one instance do (identical graphs made twice land apart:
/// `docs/fences.md`, "How far apart identical measurements land"), the interval spans them, so a row
/// ranks two arms only where the difference holds across instances. One group is the ordinary
/// bootstrap of its samples; empty groups are left out; `None` without samples.
pub fn bootstrap_ci_grouped<G: AsRef<[f64]>>(groups: &[G]) -> Option<(f64, f64)> {
    let groups: Vec<&[f64]> = groups.iter().map(|g| g.as_ref()).filter(|g| !g.is_empty()).collect();
    let total: usize = groups.iter().map(|g| g.len()).sum();
    if total == 0 {
        return None;
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ total as u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut drawn = Vec::with_capacity(total);
    let mut meds: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            drawn.clear();
            for _ in 0..groups.len() {
                // With one group every draw is that group, and the stream of draws is the
                // single-sample bootstrap's.
                let g = if groups.len() == 1 { groups[0] } else { groups[next(groups.len())] };
                drawn.extend((0..g.len()).map(|_| g[next(g.len())]));
            }
            median(&drawn).unwrap_or(f64::NAN)
        })
        .collect();
    meds.sort_by(f64::total_cmp);
    Some((meds[RESAMPLES / 40 - 1], meds[RESAMPLES - RESAMPLES / 40 - 1]))
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
    fn the_grouped_interval_of_one_group_is_the_ordinary_one_and_spans_instances_that_differ() {
        let one = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02];
        assert_eq!(bootstrap_ci_grouped(&[&one[..]]), bootstrap_ci(&one));
        assert_eq!(bootstrap_ci_grouped(&[&one[..], &[]]), bootstrap_ci(&one), "an empty instance is left out");
        assert_eq!(bootstrap_ci_grouped::<&[f64]>(&[&[], &[]]), None);
        // Three instances, each steady, 10% apart, 21 samples each: pooled as one, the median's
        // interval stays on the middle instance; resampled by instance, it reaches towards both others.
        let inst: Vec<Vec<f64>> = [1.0, 1.1, 1.2].iter().map(|&m| (0..21).map(|i| m + 0.0005 * i as f64).collect()).collect();
        let pooled: Vec<f64> = inst.concat();
        let (plo, phi) = bootstrap_ci(&pooled).unwrap();
        let (lo, hi) = bootstrap_ci_grouped(&inst).unwrap();
        assert!(plo >= 1.1 && phi <= 1.111, "pooled {plo} {phi}");
        assert!(lo < 1.02 && hi > 1.18, "by instance {lo} {hi}");
        // Instances that agree keep the interval as narrow as pooling them.
        let same: Vec<Vec<f64>> = (0..3).map(|k| (0..7).map(|i| 1.0 + 0.001 * ((i * 3 + k) % 7) as f64).collect()).collect();
        let (lo, hi) = bootstrap_ci_grouped(&same).unwrap();
        assert!(lo >= 1.0 && hi <= 1.006, "{lo} {hi}");
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
