//! The three outputs: `results.json` (every sample, per-arm medians and intervals, oracle verdicts,
//! provenance), `REPORT.md` (headline, per-family tables, wins/ties/losses with the tie band, failures)
//! and `chart.svg` (time per dispatch by row and arm, log scale: the `chart` module).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::arms::ArmKind;
use super::provenance::Provenance;
use super::stats::{self, Verdict};
use crate::config::{BenchConfig, BenchError};
use crate::{ArmResult, BenchBackend, RowResult, Stat};

mod protocol;
mod setup;
pub use protocol::RunProtocol;
#[cfg(test)]
use protocol::{arm_order_text, regime_text, VULKAN_TIMING};

/// 2: inconclusive rows counted apart from ties (`docs/reproduce.md`).
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Serialize)]
struct Comparison {
    family: String,
    /// The arm ranked (the speedup is `versus`'s time over this arm's).
    ours: &'static str,
    versus: &'static str,
    rows: usize,
    /// The median of the decided rows' speedups (win, tie or loss); `None` where every row was
    /// inconclusive.
    median_speedup: Option<f64>,
    wins: usize,
    ties: usize,
    losses: usize,
    /// Rows whose medians differ by more than the tie band while their intervals overlap.
    inconclusive: usize,
}

#[derive(Serialize)]
struct Results<'a> {
    schema_version: u32,
    /// The run's provenance; of runs merged from parts, the first's.
    provenance: &'a Provenance,
    /// Runs merged from parts: each run's provenance, in order.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    parts: &'a [Provenance],
    protocol: &'a RunProtocol,
    rows: &'a [RowResult],
    summary: Vec<Comparison>,
    failed_rows: Vec<&'a str>,
}

/// The arm rows are ranked against.
pub fn ours(backend: BenchBackend) -> &'static str {
    match backend {
        BenchBackend::Cuda => "ostinato",
        BenchBackend::Host => "ostinato-host",
    }
}

/// Every arm some row has, in the order first met (a run's rows all have the same arms in the same
/// order; runs merged from parts may add arms row by row).
pub(crate) fn arms_of(rows: &[RowResult]) -> Vec<&'static str> {
    let mut arms: Vec<&'static str> = Vec::new();
    for a in rows.iter().flat_map(|r| r.arms.iter()) {
        if !arms.contains(&a.arm) {
            arms.push(a.arm);
        }
    }
    arms
}

pub(crate) fn metric(row: &RowResult, arm: &str) -> Option<(f64, (f64, f64))> {
    let a = row.arms.iter().find(|a| a.arm == arm)?;
    a.metric().map(|s| (s.median, (s.ci_lo, s.ci_hi)))
}

/// Which arm is ranked against which: the backend's own Ostinato arm against every other arm, each
/// policy study ([`ArmKind::POLICY_STUDIES`]) against the CUDA baselines the default arm faces, then
/// each Ostinato-on-Vulkan arm against raw Vulkan where it ran (the comparison a Vulkan user makes;
/// the CUDA arms are another API).
fn rankings(backend: BenchBackend, rows: &[RowResult]) -> Vec<(&'static str, Vec<&'static str>)> {
    let us = ours(backend);
    let arms = arms_of(rows);
    let mut out = vec![(us, arms.iter().copied().filter(|a| *a != us).collect())];
    let baselines: Vec<&'static str> = ArmKind::CUDA_BASELINES.iter().map(|k| k.name()).filter(|b| arms.contains(b)).collect();
    let studies = arms.iter().copied().filter(|a| is_study(a));
    out.extend(studies.filter(|_| !baselines.is_empty()).map(|a| (a, baselines.clone())));
    let raw_vulkan = ArmKind::Vulkan.name();
    if arms.contains(&raw_vulkan) {
        let vulkan = arms.iter().copied().filter(|a| ArmKind::VULKAN.iter().any(|k| k.name() == *a) && *a != raw_vulkan);
        out.extend(vulkan.map(|a| (a, vec![raw_vulkan])));
    }
    out
}

/// Whether the arm of this name is a policy study ([`ArmKind::POLICY_STUDIES`]).
fn is_study(name: &str) -> bool {
    ArmKind::POLICY_STUDIES.iter().any(|k| k.name() == name)
}

/// Every ranking of [`rankings`], per family and over all rows.
fn summarize(backend: BenchBackend, rows: &[RowResult]) -> Vec<Comparison> {
    rankings(backend, rows).into_iter().flat_map(|(us, baselines)| compare(rows, us, &baselines)).collect()
}

/// `us` against each of `baselines`, per family and over all rows where both ran (rows that failed
/// are never ranked).
fn compare(rows: &[RowResult], us: &'static str, baselines: &[&'static str]) -> Vec<Comparison> {
    let mut families: Vec<&str> = rows.iter().map(|r| r.family.as_str()).collect();
    families.dedup();
    families.push("all");
    let mut out = Vec::new();
    for fam in families {
        for &b in baselines {
            let mut ratios = Vec::new();
            let (mut rows_both, mut wins, mut ties, mut losses, mut inconclusive) = (0, 0, 0, 0, 0);
            for r in rows.iter().filter(|r| r.ok && (fam == "all" || r.family == fam)) {
                if let (Some(o), Some(t)) = (metric(r, us), metric(r, b)) {
                    rows_both += 1;
                    match stats::verdict(o, t) {
                        Verdict::Win => wins += 1,
                        Verdict::Tie => ties += 1,
                        Verdict::Loss => losses += 1,
                        Verdict::Inconclusive => {
                            inconclusive += 1;
                            continue;
                        }
                    }
                    ratios.push(t.0 / o.0);
                }
            }
            if rows_both > 0 {
                let median_speedup = stats::median(&ratios);
                out.push(Comparison { family: fam.to_string(), ours: us, versus: b, rows: rows_both, median_speedup, wins, ties, losses, inconclusive });
            }
        }
    }
    out
}

/// Each of `arms`' instance medians on the row, as `; instances: a 1.016 / 1.062, b …`, where the
/// arms were made more than once (empty otherwise): what a reader needs to see why a row was not
/// ranked, or that a loss holds on every instance.
fn instance_medians(r: &RowResult, arms: &[&str]) -> String {
    let parts: Vec<String> = arms
        .iter()
        .filter_map(|&name| {
            let a = r.arms.iter().find(|a| a.arm == name).filter(|a| !a.instances.is_empty())?;
            let m: Vec<String> = a.instances.iter().map(|i| i.median.map_or("—".into(), |m| format!("{m:.3}"))).collect();
            Some(format!("{name} {}", m.join(" / ")))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; instances: {}", parts.join(", "))
    }
}

/// A line per row (that ran ok) whose comparison of `us` with a baseline is inconclusive: the ratio
/// of medians, shown with both intervals and never as a speedup.
fn inconclusive(rows: &[RowResult], us: &str, baselines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.ok) {
        for a in baselines {
            if let (Some(o), Some(t)) = (metric(r, us), metric(r, a)) {
                if stats::verdict(o, t) == Verdict::Inconclusive {
                    out.push(format!(
                        "- {}: {us} {} against {a} {}: medians {:.2}× apart, the intervals overlap{}",
                        r.id,
                        fmt(Some(o)),
                        fmt(Some(t)),
                        t.0 / o.0,
                        instance_medians(r, &[us, a])
                    ));
                }
            }
        }
    }
    out
}

/// A line per row (that ran ok) where a baseline beats `us` outside the tie band.
fn losses(rows: &[RowResult], us: &str, baselines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.ok) {
        for a in baselines {
            if let (Some(o), Some(t)) = (metric(r, us), metric(r, a)) {
                if stats::verdict(o, t) == Verdict::Loss {
                    out.push(format!("- {}: {a} is {:.2}× faster than {us} ({:.3} vs {:.3} µs){}", r.id, o.0 / t.0, t.0, o.0, instance_medians(r, &[us, a])));
                }
            }
        }
    }
    out
}

fn comparison_table<'a>(s: &mut String, comparisons: impl Iterator<Item = &'a Comparison>) {
    let _ = writeln!(s, "| family | arm | versus | rows | median speedup | wins | ties | losses | inconclusive |\n|---|---|---|---|---|---|---|---|---|");
    for c in comparisons {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.family,
            c.ours,
            c.versus,
            c.rows,
            speedup_text(c),
            c.wins,
            c.ties,
            c.losses,
            c.inconclusive
        );
    }
}

/// A comparison's median speedup as the table prints it: over its decided rows, or `—` where none was.
fn speedup_text(c: &Comparison) -> String {
    match (c.median_speedup, c.inconclusive) {
        (None, _) => "— (no row decided)".into(),
        (Some(m), 0) => format!("{m:.2}×"),
        (Some(m), n) => format!("{m:.2}× ({} of {} rows)", c.rows - n, c.rows),
    }
}

/// What an arm is, for the report's list of arms (every arm a matrix runs has a line).
fn arm_meaning(kind: ArmKind) -> &'static str {
    match kind {
        ArmKind::Eager => "CUDA: every kernel launched on its stream(s) each replay (fork/join with events over 4 streams for independent chains)",
        ArmKind::Captured => "CUDA: the same launches stream-captured once into a CUDA graph, replayed with one cuGraphLaunch",
        ArmKind::CapturedPdl => "CUDA: a graph built by hand with programmatic (PDL) edges, as an expert would",
        ArmKind::Ostinato => "Ostinato on CUDA: the plan's edges only, its fence policy (auto) and chain fusion, one graph launch",
        ArmKind::OstinatoUnfused => "Ostinato on CUDA without chain fusion",
        ArmKind::OstinatoFusionOn => {
            "Ostinato on CUDA with chain fusion on (independent neighbours on a lane fused too; independent launches of many blocks side by side in one kernel)"
        }
        ArmKind::OstinatoUnstaged => "Ostinato on CUDA, block-local fused chains without tile staging (every member reads and writes device memory)",
        ArmKind::OstinatoUntuned => {
            "Ostinato on CUDA, auto's thresholds alone: the exec does not measure the other submissions it could have made (--tune off)"
        }
        ArmKind::OstinatoEdgesMedian => {
            "Ostinato on CUDA, auto, with the exec's first measurement passing a candidate that only changes edge types on its median margin (--tune-edge-types median); ranked against the baselines as the default arm is"
        }
        ArmKind::OstinatoPdlOff => "Ostinato on CUDA, unfused, every edge a full dependency",
        ArmKind::OstinatoPdlOn => "Ostinato on CUDA, unfused, every capable edge programmatic",
        ArmKind::OstinatoEager => "Ostinato's plan launched eagerly over its lanes (unfused)",
        ArmKind::OstinatoThread => "Ostinato's graph replayed through the exec's launch thread",
        ArmKind::HostSerial => {
            "the host backend replaying the same plan one node at a time in program order on the calling thread (the oracle's executor): the serial baseline"
        }
        ArmKind::OstinatoHost => {
            "Ostinato on the host backend: the plan's edges as dependency counters on a thread pool (serial where the plan has no parallelism to use)"
        }
        ArmKind::Vulkan => "raw Vulkan: one command buffer, a barrier after each dependency level",
        ArmKind::OstinatoVulkan => "Ostinato on Vulkan: one command buffer recorded once, barriers only where edges need them, chain fusion",
        ArmKind::OstinatoVulkanLanes => "Ostinato on Vulkan with each plan lane on a queue of its own",
        ArmKind::OstinatoVulkanBarrier => "Ostinato on Vulkan, each replay starting with a full pipeline barrier",
        ArmKind::OstinatoVulkanTimeline => "Ostinato on Vulkan, each submission waiting on the previous one's timeline value",
        ArmKind::OstinatoVulkanEvents => "Ostinato on Vulkan, each replay waiting on an event the previous one sets",
        ArmKind::OstinatoVulkanUnfused => "Ostinato on Vulkan without chain fusion",
        ArmKind::OstinatoVulkanOffsets => "Ostinato on Vulkan, every kernel with element offsets (none run as written)",
    }
}

/// The arm of a name, among every arm a matrix runs.
/// The report's list of the arms its tables show, each with what it runs.
fn arms_section(s: &mut String, arms: &[&str]) {
    let _ = writeln!(s, "Arms:\n");
    for a in arms {
        let _ = writeln!(s, "- `{a}`: {}", ArmKind::by_name(a).map_or("(not described)", arm_meaning));
    }
    let _ = writeln!(s);
}

/// Where the run happened: the device and its drivers on CUDA; on the host backend the machine
/// itself (there is no device, driver or clock to name).
fn where_text(backend: BenchBackend, p: &Provenance) -> String {
    let host = format!("{}{} ({} threads)", if p.host_name.is_empty() { String::new() } else { format!("{}: ", p.host_name) }, p.host_cpu, p.host_threads);
    match backend {
        BenchBackend::Cuda => format!(
            "Device {} {} ({}), CUDA driver {}, NVIDIA driver {}, NVRTC {}; SM clock {} MHz before, {} MHz after (max {}). Host {host}.",
            p.device_name.as_deref().unwrap_or("—"),
            p.device_uuid.as_deref().unwrap_or(""),
            p.compute_capability.as_deref().unwrap_or("—"),
            p.cuda_driver_version.as_deref().unwrap_or("—"),
            p.nvidia_driver.as_deref().unwrap_or("—"),
            p.nvrtc_version.as_deref().unwrap_or("—"),
            p.sm_clock_mhz_before.map_or("—".into(), |c| c.to_string()),
            p.sm_clock_mhz_after.map_or("—".into(), |c| c.to_string()),
            p.sm_clock_mhz_max.map_or("—".into(), |c| c.to_string()),
        ),
        BenchBackend::Host => format!("Host {host}; no GPU (the host backend)."),
    }
}

/// The chart's value axis.
fn unit_axis(backend: BenchBackend) -> &'static str {
    if backend == BenchBackend::Cuda {
        "GPU µs per dispatch (log scale)"
    } else {
        "wall µs per dispatch (log scale)"
    }
}

fn label(backend: BenchBackend, p: &Provenance) -> String {
    match backend {
        BenchBackend::Cuda => format!("CUDA on {}", p.device_name.as_deref().unwrap_or("?")),
        BenchBackend::Host => format!("HOST BACKEND (no GPU): {} threads of {}", p.host_threads, p.host_cpu),
    }
}

fn fmt(v: Option<(f64, (f64, f64))>) -> String {
    match v {
        Some((m, (lo, hi))) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
        None => "—".into(),
    }
}

/// Whether the run may exit successfully: every row ok, or an error naming the failed rows (the
/// reports, already written, say why under "Failures").
pub fn failed_rows(rows: &[RowResult], out: &Path) -> Result<(), BenchError> {
    let failed: Vec<&str> = rows.iter().filter(|r| !r.ok).map(|r| r.id.as_str()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(BenchError::FailedRows { failed: failed.len(), rows: rows.len(), ids: failed.join(", "), report: out.join("REPORT.md").display().to_string() })
}

/// The log's line after row `row` (from 0) of `rows` in a pass: how long it took and the median of
/// each arm the pass ran, so a run stopped before its report still leaves what it measured.
pub(crate) fn progress_line(pass: &str, row: usize, rows: usize, id: &str, secs: f64, arms: &[ArmResult]) -> String {
    let medians: Vec<String> = arms
        .iter()
        .map(|a| match (&a.skipped, a.ok, a.metric()) {
            (Some(_), _, _) => format!("{} skipped", a.arm),
            (None, false, _) => format!("{} FAILED", a.arm),
            (None, true, Some(s)) => format!("{} {:.3}", a.arm, s.median),
            (None, true, None) => format!("{} -", a.arm),
        })
        .collect();
    format!("{pass}: row {}/{rows} {id} in {secs:.2} s; median µs per dispatch: {}", row + 1, medians.join(", "))
}

/// How the reason of an arm the time limit kept from running begins (`--time-limit`).
pub(crate) const NOT_RUN: &str = "not run: the time limit";

/// Whether the time limit kept every arm of `row` from running (a row without arms never counts).
pub(crate) fn not_run(row: &RowResult) -> bool {
    !row.arms.is_empty() && row.arms.iter().all(|a| a.skipped.as_deref().is_some_and(|w| w.starts_with(NOT_RUN)))
}

/// A one-paragraph headline for the terminal and the README.
pub fn headline(backend: BenchBackend, rows: &[RowResult]) -> String {
    let mut s = String::new();
    let failed = rows.iter().filter(|r| !r.ok).count();
    let not_run = rows.iter().filter(|r| not_run(r)).count();
    let not_run = if not_run > 0 { format!("; {not_run} not run (the time limit)") } else { String::new() };
    let _ = writeln!(s, "{} rows, {} failed (an arm's error or an oracle mismatch){not_run}", rows.len(), failed);
    for c in summarize(backend, rows).iter().filter(|c| c.family == "all") {
        let median = c.median_speedup.map_or("none (no row decided)".into(), |m| format!("{m:.2}x"));
        let _ = writeln!(
            s,
            "{} vs {}: median speedup {median} over {} rows ({} wins, {} ties, {} losses, {} inconclusive)",
            c.ours,
            c.versus,
            c.rows - c.inconclusive,
            c.wins,
            c.ties,
            c.losses,
            c.inconclusive
        );
        if let Some(k) = ArmKind::by_name(c.versus).filter(|k| *k == ArmKind::HostSerial) {
            let _ = writeln!(s, "  ({}: {})", c.versus, arm_meaning(k));
        }
    }
    s
}

/// The Vulkan device the report names: the one found (whether or not a Vulkan arm ran on it).
fn vulkan_device(p: &Provenance, rows: &[RowResult]) -> String {
    let ran = rows.iter().any(|r| r.arms.iter().any(|a| ArmKind::VULKAN.iter().any(|k| k.name() == a.arm) && a.skipped.is_none()));
    match (&p.vulkan_device, ran) {
        (None, _) => "none found".into(),
        (Some(d), true) => d.clone(),
        (Some(d), false) => format!("{d} (no Vulkan arm ran in this matrix: they run in the GPU matrix, or with `--arms`)"),
    }
}

/// Who made the rows: the run's command, date, build and machine; for runs merged from parts, each.
fn made_text(backend: BenchBackend, parts: &[Provenance], rows: &[RowResult]) -> String {
    let made = |p: &Provenance| {
        format!("`{}` on {} from commit `{}` (dirty: {}). {}", p.command_line.join(" "), p.date_utc, p.build_commit, p.build_dirty, where_text(backend, p))
    };
    match parts {
        [p] => format!("Made by {} Vulkan arm device: {}.\n", made(p), vulkan_device(p, rows)),
        _ => {
            let mut s = format!(
                "Merged from {} runs of one build by `ostinato bench --merge`: every row is one run's, its arms measured side by side in that run (a row a run's time limit left is taken from the run that measured it). Vulkan arm device: {}.\n",
                parts.len(),
                parts.first().map_or("—".into(), |p| vulkan_device(p, rows))
            );
            for (i, p) in parts.iter().enumerate() {
                let _ = writeln!(s, "- run {}: made by {}", i + 1, made(p));
            }
            s
        }
    }
}

fn markdown(backend: BenchBackend, parts: &[Provenance], protocol: &RunProtocol, rows: &[RowResult]) -> String {
    let us = ours(backend);
    let mut s = String::new();
    let unit = if backend == BenchBackend::Cuda { "GPU µs per dispatch (CUDA events)" } else { "wall µs per dispatch (host backend)" };
    if let Some(p) = parts.first() {
        let _ = writeln!(s, "# Ostinato dispatch benchmark — {}\n", label(backend, p));
    }
    let _ = writeln!(s, "{}", made_text(backend, parts, rows));
    let _ = writeln!(s, "{}\n", protocol.line(unit, has_device_time(rows)));
    if let Some(r) = rows.iter().find_map(|r| r.protocol) {
        let _ = writeln!(
            s,
            "The kernel-family rows (ten ops each) take at least {} ms of warm-up rounds and {} ms of timed rounds per arm where that is shorter (the sample counts stay).\n",
            r.warmup_ms.min(protocol.warmup_ms),
            r.timed_ms.min(protocol.timed_ms)
        );
    }
    let arms = arms_of(rows);
    arms_section(&mut s, &arms);
    let summary = summarize(backend, rows);
    let _ = writeln!(s, "## Headline: {us} against each arm (median speedup = arm time / {us} time)\n");
    comparison_table(&mut s, summary.iter().filter(|c| c.ours == us));
    let study = |c: &&Comparison| is_study(c.ours);
    if summary.iter().any(|c| study(&c)) {
        let _ = writeln!(s, "\n## Policy studies against the baselines (median speedup = baseline time / the study arm's time)\n");
        comparison_table(&mut s, summary.iter().filter(study));
    }
    if summary.iter().any(|c| c.ours != us && !study(&c)) {
        let _ = writeln!(s, "\n## Ostinato on Vulkan against raw Vulkan (median speedup = raw Vulkan time / the arm's time)\n");
        comparison_table(&mut s, summary.iter().filter(|c| c.ours != us && !study(c)));
    }
    s.push_str(&family_section(backend, rows, &summary));
    s.push_str(&decisions_section(backend, rows));
    s.push_str(&vulkan_fusion_section(rows));
    let mut families: Vec<&str> = rows.iter().map(|r| r.family.as_str()).collect();
    families.dedup();
    for fam in families {
        let _ = writeln!(s, "\n## {fam}: {unit}, median [95% CI]\n");
        let _ = writeln!(s, "| row | {} | ok |", arms.join(" | "));
        let _ = writeln!(s, "|---|{}---|", "---|".repeat(arms.len()));
        for r in rows.iter().filter(|r| r.family == fam) {
            let cells: Vec<String> = arms.iter().map(|a| fmt(metric(r, a))).collect();
            let _ = writeln!(s, "| {} | {} | {} |", r.id, cells.join(" | "), if r.ok { "yes" } else { "**FAILED**" });
        }
    }
    s.push_str(&super::profile::markdown(rows));
    let traced: Vec<(&str, &Result<super::timeline::StepTimeline, String>)> =
        rows.iter().filter_map(|r| r.timeline.as_ref().map(|t| (r.id.as_str(), t))).collect();
    s.push_str(&super::timeline::markdown(&traced));
    host_submission_table(&mut s, rows, &arms);
    let burst = format!("Host µs per replay call of a retained graph (median of bursts of {} calls)", super::arms::CALL_BURST);
    replay_table(&mut s, &burst, rows, &arms, |a| a.replay_call_us);
    let single = format!("Host µs of one replay call on an idle GPU (median of {} calls per sample, median over samples)", super::arms::SINGLE_CALLS);
    replay_table(&mut s, &single, rows, &arms, |a| a.replay_single_us);
    s.push_str(&setup::markdown(rows, &arms));
    let _ = writeln!(s, "\n## Losses (outside the tie band)\n");
    let lost: Vec<String> = rankings(backend, rows).iter().flat_map(|(us, baselines)| losses(rows, us, baselines)).collect();
    let _ = writeln!(s, "{}", if lost.is_empty() { "none".to_string() } else { lost.join("\n") });
    let unsure: Vec<String> = rankings(backend, rows).iter().flat_map(|(us, baselines)| inconclusive(rows, us, baselines)).collect();
    if !unsure.is_empty() {
        let _ = writeln!(s, "\n## Inconclusive (medians apart by more than the tie band, intervals overlapping: not ranked)\n\n{}", unsure.join("\n"));
    }
    let skipped: Vec<String> =
        rows.iter().flat_map(|r| r.arms.iter().filter_map(move |a| a.skipped.as_ref().map(|w| format!("- {} / {}: {w}", r.id, a.arm)))).collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "\n## Not applicable or not run (neither failed nor ranked)\n\n{}", skipped.join("\n"));
    }
    let placed: Vec<String> =
        rows.iter().filter(|r| !r.buffer_addresses.is_empty()).map(|r| format!("- {}: {}", r.id, r.buffer_addresses.join(", "))).collect();
    if !placed.is_empty() {
        let _ = writeln!(
            s,
            "\n## Where each row's buffers lay (shared by its CUDA arms; a 1-block chain's time depends on it, docs/fences.md decision 8)\n\n{}",
            placed.join("\n")
        );
    }
    let _ = writeln!(s, "\n## Failures (never ranked)\n");
    let mut failed = false;
    for r in rows {
        for a in r.arms.iter().filter(|a| !a.ok) {
            failed = true;
            let why = a.error.clone().or_else(|| a.samples.iter().find_map(|s| s.oracle_detail.clone())).unwrap_or_default();
            let _ = writeln!(s, "- {} / {}: {why}", r.id, a.arm);
        }
    }
    if !failed {
        let _ = writeln!(s, "none: every sample of every arm matched the oracle");
    }
    s
}

/// The baselines the per-family section ranks against: stream capture, the expert's PDL capture and
/// raw Vulkan where they ran (the CUDA matrix), else every other arm.
fn family_baselines(backend: BenchBackend, rows: &[RowResult]) -> Vec<&'static str> {
    let ran = arms_of(rows);
    let picked: Vec<&'static str> = [ArmKind::Captured, ArmKind::CapturedPdl, ArmKind::Vulkan].iter().map(|k| k.name()).filter(|a| ran.contains(a)).collect();
    if picked.is_empty() {
        ran.into_iter().filter(|a| *a != ours(backend)).collect()
    } else {
        picked
    }
}

/// The main Ostinato arm's decisions on a row, where it recorded them.
fn row_decisions(backend: BenchBackend, r: &RowResult) -> Option<&super::arms::Decisions> {
    r.arms.iter().find(|a| a.arm == ours(backend)).and_then(|a| a.decisions.as_ref())
}

/// `REPORT.md`'s per-family section: each family's rows, failures, Ostinato's median speedup and
/// wins / ties / losses against each of [`family_baselines`], and on how many rows its policy turned
/// PDL or fusion down somewhere.
fn family_section(backend: BenchBackend, rows: &[RowResult], summary: &[Comparison]) -> String {
    let us = ours(backend);
    let versus = family_baselines(backend, rows);
    let mut s = String::new();
    // The policy columns where the exec recorded its decisions (Ostinato's CUDA arms).
    let decided = rows.iter().any(|r| row_decisions(backend, r).is_some());
    let policy_head = if decided { " rows with PDL turned down | rows with fusion turned down |" } else { "" };
    let _ = writeln!(s, "\n## Per family: {us} against {} (median speedup, wins / ties / losses)\n", versus.join(", "));
    let _ = writeln!(s, "| family | rows | failed | {} |{policy_head}", versus.join(" | "));
    let _ = writeln!(s, "|---|---|---|{}{}", "---|".repeat(versus.len()), if decided { "---|---|" } else { "" });
    let mut families: Vec<&str> = rows.iter().map(|r| r.family.as_str()).collect();
    families.dedup();
    families.push("all");
    for fam in families {
        let of: Vec<&RowResult> = rows.iter().filter(|r| fam == "all" || r.family == fam).collect();
        let cells: Vec<String> = versus
            .iter()
            .map(|v| match summary.iter().find(|c| c.family == fam && c.ours == us && c.versus == *v) {
                Some(c) => {
                    let undecided = if c.inconclusive > 0 { format!(", {} inconclusive", c.inconclusive) } else { String::new() };
                    let ratio = c.median_speedup.map_or("—".to_string(), |m| format!("{m:.2}×"));
                    format!("{ratio} ({}/{}/{}{undecided})", c.wins, c.ties, c.losses)
                }
                None => "—".into(),
            })
            .collect();
        let notes: Vec<&super::arms::Decisions> = of.iter().filter_map(|r| row_decisions(backend, r)).collect();
        let policy = if decided {
            let (pdl, fusion) = (notes.iter().filter(|d| !d.full_edges.is_empty()).count(), notes.iter().filter(|d| !d.unfused.is_empty()).count());
            format!(" {pdl} | {fusion} |")
        } else {
            String::new()
        };
        let _ = writeln!(s, "| {fam} | {} | {} | {} |{policy}", of.len(), of.iter().filter(|r| !r.ok).count(), cells.join(" | "));
    }
    s
}

/// `REPORT.md`'s list of the rows where the main Ostinato arm's policy made edges full or left nodes
/// unfused, with the exec's reasons and how many edges or nodes each covers.
fn decisions_section(backend: BenchBackend, rows: &[RowResult]) -> String {
    let mut lines = Vec::new();
    for r in rows {
        let Some(d) = row_decisions(backend, r) else { continue };
        let switched = d.measured.as_ref().filter(|m| m.first().is_some_and(|(label, _)| label != "auto"));
        if d.full_edges.is_empty() && d.unfused.is_empty() && switched.is_none() && d.confirmation.is_none() {
            continue;
        }
        let why = |v: &[(String, usize)]| v.iter().map(|(w, n)| format!("{n}: {w}")).collect::<Vec<_>>().join("; ");
        // The same exec's timed replays (its instance's median), beside what it measured while tuning:
        // where the two part, the choice was made on conditions the timed replays did not see.
        let timed = r
            .arms
            .iter()
            .find(|a| a.arm == ours(backend))
            .and_then(|a| a.instances.first())
            .and_then(|i| i.median)
            .map_or(String::new(), |m| format!(", then {:.3} in its timed replays", m * r.dispatches_per_replay as f64));
        let mut parts = Vec::new();
        match (switched, &d.measured) {
            (Some(m), _) => {
                let auto = m.iter().find(|(label, _)| label == "auto").map_or(f64::NAN, |(_, t)| *t);
                parts.push(format!("measured {} submissions, chose `{}` ({:.3} µs per replay{timed}; auto's own {auto:.3})", m.len(), m[0].0, m[0].1));
            }
            (None, Some(m)) if m.len() > 1 => {
                let auto = m.iter().find(|(label, _)| label == "auto").map_or(f64::NAN, |(_, t)| *t);
                let (label, best) =
                    m.iter().filter(|(label, _)| label != "auto").min_by(|a, b| a.1.total_cmp(&b.1)).map_or(("", f64::NAN), |(l, t)| (l.as_str(), *t));
                parts.push(format!(
                    "measured {} submissions, kept auto's own ({auto:.3} µs per replay{timed}; the fastest other, `{label}`, {best:.3})",
                    m.len()
                ));
            }
            _ => {}
        }
        if let Some((label, pick, auto)) = &d.confirmation {
            parts.push(format!("`{label}` measured again beside auto's own alone: {pick:.3} against {auto:.3} µs per replay"));
        }
        if !d.full_edges.is_empty() {
            parts.push(format!("PDL on {} of {} edges ({})", d.programmatic_edges, d.edges, why(&d.full_edges)));
        }
        if !d.unfused.is_empty() {
            parts.push(format!("{} of {} nodes fused ({})", d.fused_nodes, d.nodes, why(&d.unfused)));
        }
        lines.push(format!("- {}: {}", r.id, parts.join("; ")));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\n## Where {}'s policy turned PDL or fusion down, and why (the exec's own reasons; edges of the submission after fusion)\n\n{}\n",
        ours(backend),
        lines.join("\n")
    )
}

/// `REPORT.md`'s account of what Ostinato's Vulkan exec fused: per row where it fused something or
/// did not keep a tile map, the nodes inside fused dispatches, the barriers between their bodies and the
/// maps' reasons.
fn vulkan_fusion_section(rows: &[RowResult]) -> String {
    let mut lines = Vec::new();
    for r in rows {
        let Some(d) = r.arms.iter().find(|a| a.arm == "ostinato-vulkan").and_then(|a| a.decisions.as_ref()) else { continue };
        if d.fused_nodes == 0 && d.unfused.is_empty() {
            continue;
        }
        let why: Vec<String> = d.unfused.iter().map(|(w, n)| format!("{n}: {w}")).collect();
        let maps = if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) };
        let barriers = match d.fused_barriers {
            Some(b) if d.fused_nodes > 0 => format!(", {b} barriers between bodies"),
            _ => String::new(),
        };
        lines.push(format!("- {}: {} of {} nodes fused{barriers}{maps}", r.id, d.fused_nodes, d.nodes));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\n## What Ostinato on Vulkan fused (nodes inside fused dispatches, barriers between their bodies; tile maps it did not keep, and why)\n\n{}\n",
        lines.join("\n")
    )
}

/// Whether any arm timed the device (CUDA events, Vulkan timestamps): only then is the host's
/// submission time a measure of its own; on the host backend the metric is the host's wall time.
fn has_device_time(rows: &[RowResult]) -> bool {
    rows.iter().any(|r| r.arms.iter().any(|a| a.gpu_us_per_dispatch.is_some()))
}

/// The host's submission µs per dispatch, where the metric is device time (on the host backend it is
/// the metric itself, shown in the family tables).
fn host_submission_table(s: &mut String, rows: &[RowResult], arms: &[&str]) {
    if !has_device_time(rows) {
        return;
    }
    let _ = writeln!(s, "\n## Host submission µs per dispatch (median)\n");
    let _ = writeln!(s, "| row | {} |", arms.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(arms.len()));
    for r in rows {
        let cells: Vec<String> = arms
            .iter()
            .map(|a| r.arms.iter().find(|x| x.arm == *a).and_then(|x| x.host_us_per_dispatch).map_or("—".into(), |h| format!("{:.3}", h.median)))
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.id, cells.join(" | "));
    }
}

/// One table of a replay-call measure, for the arms that have it.
fn replay_table(s: &mut String, title: &str, rows: &[RowResult], arms: &[&'static str], field: impl Fn(&ArmResult) -> Option<Stat>) {
    let with: Vec<&str> = arms.iter().copied().filter(|a| rows.iter().any(|r| r.arms.iter().any(|x| x.arm == *a && field(x).is_some()))).collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## {title}\n");
    let _ = writeln!(s, "| row | dispatches | {} |", with.join(" | "));
    let _ = writeln!(s, "|---|---|{}", "---|".repeat(with.len()));
    for r in rows {
        let cells: Vec<String> =
            with.iter().map(|a| r.arms.iter().find(|x| x.arm == *a).and_then(&field).map_or("—".into(), |h| format!("{:.2}", h.median))).collect();
        let _ = writeln!(s, "| {} | {} | {} |", r.id, r.dispatches_per_replay, cells.join(" | "));
    }
}

/// Writes `results.json`, `REPORT.md` and `chart.svg` of a run of `args` into `dir`.
pub fn write_all(dir: &Path, backend: BenchBackend, p: &Provenance, args: &BenchConfig, rows: &[RowResult]) -> Result<(), String> {
    write_files(dir, backend, std::slice::from_ref(p), &RunProtocol::of(backend, args, p.regime_chain_us), rows)
}

/// Writes the three files of the rows of one or more runs (`parts`, each run's provenance; more than
/// one where runs made in parts are reported as one) measured by `protocol`.
pub(crate) fn write_files(dir: &Path, backend: BenchBackend, parts: &[Provenance], protocol: &RunProtocol, rows: &[RowResult]) -> Result<(), String> {
    let first = parts.first().ok_or("no run to report")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let results = Results {
        schema_version: SCHEMA_VERSION,
        provenance: first,
        parts: if parts.len() > 1 { parts } else { &[] },
        protocol,
        rows,
        summary: summarize(backend, rows),
        failed_rows: rows.iter().filter(|r| !r.ok).map(|r| r.id.as_str()).collect(),
    };
    // Compact: the file carries every sample; REPORT.md is the view for reading.
    let json = serde_json::to_string(&results).map_err(|e| e.to_string())?;
    let w = |name: &str, data: &str| std::fs::write(dir.join(name), data).map_err(|e| format!("{}: {e}", dir.join(name).display()));
    w("results.json", &json)?;
    w("REPORT.md", &markdown(backend, parts, protocol, rows))?;
    super::chart::write(&dir.join("chart.svg"), &format!("Ostinato dispatch matrix — {}", label(backend, first)), unit_axis(backend), rows)
}

#[cfg(test)]
mod tests;
