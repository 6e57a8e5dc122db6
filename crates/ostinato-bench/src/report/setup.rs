//! What making each arm costs: the wall time from the run's compiled modules to an arm ready to
//! sample (`ArmResult::setup_ms`), per arm over the rows, and for Ostinato's default exec apart where
//! it measured its unfused plan beside a fused one (more graph execs built at `instantiate`).

use std::fmt::Write as _;

use crate::{ArmResult, RowResult};

/// A row's setup time for `arm`: the median over its instances (the first instance of a row may
/// also pay a kernel's first build, which the later ones find cached), and per user node.
fn row_setup(r: &RowResult, arm: &ArmResult) -> Option<(f64, f64)> {
    let ms = crate::stats::median(&arm.setup_ms)?;
    Some((ms, ms * 1e3 / r.dispatches_per_replay.max(1) as f64))
}

/// Whether the arm's exec measured the unfused plan's submissions beside its fused plan.
fn measured_unfused(arm: &ArmResult) -> bool {
    arm.decisions.as_ref().and_then(|d| d.measured.as_ref()).is_some_and(|m| m.iter().any(|(label, _)| label.starts_with("unfused")))
}

/// One line of the table: `what`, how many rows, the median, 90th percentile and largest setup (the
/// row it was on) and the median µs per node.
fn line(s: &mut String, what: &str, setups: &[(&str, f64, f64)]) {
    let mut ms: Vec<f64> = setups.iter().map(|(_, ms, _)| *ms).collect();
    let per_node: Vec<f64> = setups.iter().map(|(_, _, n)| *n).collect();
    let (Some(median), Some(per_node)) = (crate::stats::median(&ms), crate::stats::median(&per_node)) else { return };
    ms.sort_by(f64::total_cmp);
    let p90 = ms[((ms.len() - 1) as f64 * 0.9).round() as usize];
    let (row, largest, _) = setups.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(("", 0.0, 0.0));
    let _ = writeln!(s, "| {what} | {} | {median:.2} | {p90:.2} | {largest:.2} (`{row}`) | {per_node:.1} |", setups.len());
}

/// The report's setup section: per arm, the rows' setup times; empty where no arm recorded one.
pub(super) fn markdown(rows: &[RowResult], arms: &[&str]) -> String {
    let mut s = String::new();
    if !rows.iter().any(|r| r.arms.iter().any(|a| !a.setup_ms.is_empty())) {
        return s;
    }
    let _ = writeln!(s, "\n## Setup: wall ms to make each arm\n");
    let _ = writeln!(
        s,
        "From the run's compiled modules to an arm ready to sample: binding its kernels and what it submits from (Ostinato: the plan compiled and instantiated, its candidate submissions included; stream capture: the launches captured, instantiated and uploaded; raw Vulkan: its command buffer recorded). Each row's figure is the median over its instances.\n"
    );
    let _ = writeln!(s, "| arm | rows | median | 90th percentile | largest (row) | median µs per node |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for &name in arms {
        let of = |keep: &dyn Fn(&ArmResult) -> bool| -> Vec<(&str, f64, f64)> {
            rows.iter()
                .filter_map(|r| {
                    let a = r.arms.iter().find(|a| a.arm == name && a.error.is_none() && a.skipped.is_none() && keep(a))?;
                    row_setup(r, a).map(|(ms, n)| (r.id.as_str(), ms, n))
                })
                .collect()
        };
        line(&mut s, name, &of(&|_| true));
        if name == "ostinato" {
            let unfused = of(&measured_unfused);
            if !unfused.is_empty() {
                line(&mut s, "ostinato, rows that measured the unfused plan", &unfused);
                line(&mut s, "ostinato, the other rows", &of(&|a| !measured_unfused(a)));
            }
        }
    }
    stages(&mut s, rows);
    s
}

/// A row's stages: its id, the median instance's setup (ms) and that instance's stages.
type RowStages<'a> = (&'a str, f64, &'a [(String, f64)]);

/// How many of Ostinato's slowest rows to make the stages of.
const SLOWEST: usize = 3;

/// The stages of making Ostinato's exec on its slowest rows, from the instance whose setup was the
/// median (the first instance may also pay kernels' first builds).
fn stages(s: &mut String, rows: &[RowResult]) {
    let mut slow: Vec<RowStages> = rows
        .iter()
        .filter_map(|r| {
            let a = r.arms.iter().find(|a| a.arm == "ostinato" && a.error.is_none() && a.skipped.is_none())?;
            let mut order: Vec<usize> = (0..a.setup_ms.len()).collect();
            order.sort_by(|&x, &y| a.setup_ms[x].total_cmp(&a.setup_ms[y]));
            let i = *order.get(order.len() / 2)?;
            let d = if a.instances.is_empty() { a.decisions.as_ref() } else { a.instances.get(i)?.decisions.as_ref() };
            let laps = d.map(|d| d.setup_ms.as_slice()).filter(|l| !l.is_empty())?;
            Some((r.id.as_str(), a.setup_ms[i], laps))
        })
        .collect();
    if slow.is_empty() {
        return;
    }
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    let _ = writeln!(s, "\nWhere Ostinato's making went on its {} slowest rows (the median instance; ms):\n", SLOWEST.min(slow.len()));
    for (row, ms, laps) in slow.into_iter().take(SLOWEST) {
        let _ = writeln!(s, "- `{row}` ({ms:.2}): {}", ostinato_cuda::setup_stage_list(laps));
    }
}
