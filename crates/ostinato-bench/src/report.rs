//! The three outputs: `results.json` (every sample, per-arm medians and intervals, oracle verdicts,
//! provenance), `REPORT.md` (headline, per-family tables, wins/ties/losses with the tie band, failures)
//! and `chart.svg` (time per dispatch by row and arm, log scale).

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use super::arms::ArmKind;
use super::provenance::Provenance;
use super::stats::{self, Verdict};
use crate::config::{BenchConfig, BenchError};
use crate::{ArmResult, BenchBackend, Regime, RowResult, Stat};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Comparison {
    family: String,
    /// The arm ranked (the speedup is `versus`'s time over this arm's).
    ours: &'static str,
    versus: &'static str,
    rows: usize,
    median_speedup: f64,
    wins: usize,
    ties: usize,
    losses: usize,
}

#[derive(Serialize)]
struct Results<'a> {
    schema_version: u32,
    provenance: &'a Provenance,
    protocol: serde_json::Value,
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

fn metric(row: &RowResult, arm: &str) -> Option<(f64, (f64, f64))> {
    let a = row.arms.iter().find(|a| a.arm == arm)?;
    a.metric().map(|s| (s.median, (s.ci_lo, s.ci_hi)))
}

/// Which arm is ranked against which: the backend's own Ostinato arm against every other arm, then
/// each Ostinato-on-Vulkan arm against raw Vulkan where it ran (the comparison a Vulkan user makes;
/// the CUDA arms are another API).
fn rankings(backend: BenchBackend, rows: &[RowResult]) -> Vec<(&'static str, Vec<&'static str>)> {
    let us = ours(backend);
    let arms: Vec<&'static str> = rows.first().map(|r| r.arms.iter().map(|a| a.arm).collect()).unwrap_or_default();
    let mut out = vec![(us, arms.iter().copied().filter(|a| *a != us).collect())];
    let raw_vulkan = ArmKind::Vulkan.name();
    if arms.contains(&raw_vulkan) {
        let vulkan = arms.iter().copied().filter(|a| ArmKind::VULKAN.iter().any(|k| k.name() == *a) && *a != raw_vulkan);
        out.extend(vulkan.map(|a| (a, vec![raw_vulkan])));
    }
    out
}

/// Every ranking of [`rankings`], per family and over all rows.
fn summarize(backend: BenchBackend, rows: &[RowResult]) -> Vec<Comparison> {
    rankings(backend, rows).into_iter().flat_map(|(us, baselines)| compare(rows, us, &baselines)).collect()
}

/// `us` against each of `baselines`, per family and over all rows where both ran (rows that failed
/// are never ranked).
fn compare(rows: &[RowResult], us: &'static str, baselines: &[&'static str]) -> Vec<Comparison> {
    let mut families: Vec<&str> = rows.iter().map(|r| r.family).collect();
    families.dedup();
    families.push("all");
    let mut out = Vec::new();
    for fam in families {
        for &b in baselines {
            let mut ratios = Vec::new();
            let (mut wins, mut ties, mut losses) = (0, 0, 0);
            for r in rows.iter().filter(|r| r.ok && (fam == "all" || r.family == fam)) {
                if let (Some(o), Some(t)) = (metric(r, us), metric(r, b)) {
                    ratios.push(t.0 / o.0);
                    match stats::verdict(o, t) {
                        Verdict::Win => wins += 1,
                        Verdict::Tie => ties += 1,
                        Verdict::Loss => losses += 1,
                    }
                }
            }
            if let Some(m) = stats::median(&ratios) {
                out.push(Comparison { family: fam.to_string(), ours: us, versus: b, rows: ratios.len(), median_speedup: m, wins, ties, losses });
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
                    out.push(format!("- {}: {a} is {:.2}× faster than {us} ({:.3} vs {:.3} µs)", r.id, o.0 / t.0, t.0, o.0));
                }
            }
        }
    }
    out
}

fn comparison_table<'a>(s: &mut String, comparisons: impl Iterator<Item = &'a Comparison>) {
    let _ = writeln!(s, "| family | arm | versus | rows | median speedup | wins | ties | losses |\n|---|---|---|---|---|---|---|---|");
    for c in comparisons {
        let _ = writeln!(s, "| {} | {} | {} | {} | {:.2}× | {} | {} | {} |", c.family, c.ours, c.versus, c.rows, c.median_speedup, c.wins, c.ties, c.losses);
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

/// A one-paragraph headline for the terminal and the README.
pub fn headline(backend: BenchBackend, rows: &[RowResult]) -> String {
    let mut s = String::new();
    let failed = rows.iter().filter(|r| !r.ok).count();
    let _ = writeln!(s, "{} rows, {} failed (an arm's error or an oracle mismatch)", rows.len(), failed);
    for c in summarize(backend, rows).iter().filter(|c| c.family == "all") {
        let _ = writeln!(
            s,
            "{} vs {}: median speedup {:.2}x over {} rows ({} wins, {} ties, {} losses)",
            c.ours, c.versus, c.median_speedup, c.rows, c.wins, c.ties, c.losses
        );
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

fn markdown(backend: BenchBackend, p: &Provenance, args: &BenchConfig, rows: &[RowResult]) -> String {
    let us = ours(backend);
    let mut s = String::new();
    let unit = if backend == BenchBackend::Cuda { "GPU µs per dispatch (CUDA events)" } else { "wall µs per dispatch (host backend)" };
    let _ = writeln!(s, "# Ostinato dispatch benchmark — {}\n", label(backend, p));
    let _ = writeln!(
        s,
        "Made by `{}` on {} from commit `{}` (dirty: {}). Device {} {} ({}), CUDA driver {}, NVIDIA driver {}, NVRTC {}; SM clock {} MHz before, {} MHz after (max {}). Host: {} ({} threads). Vulkan arm device: {}.\n",
        p.command_line.join(" "),
        p.date_utc,
        p.build_commit,
        p.build_dirty,
        p.device_name.as_deref().unwrap_or("—"),
        p.device_uuid.as_deref().unwrap_or(""),
        p.compute_capability.as_deref().unwrap_or("—"),
        p.cuda_driver_version.as_deref().unwrap_or("—"),
        p.nvidia_driver.as_deref().unwrap_or("—"),
        p.nvrtc_version.as_deref().unwrap_or("—"),
        p.sm_clock_mhz_before.map_or("—".into(), |c| c.to_string()),
        p.sm_clock_mhz_after.map_or("—".into(), |c| c.to_string()),
        p.sm_clock_mhz_max.map_or("—".into(), |c| c.to_string()),
        p.host_cpu,
        p.host_threads,
        vulkan_device(p, rows)
    );
    let _ = writeln!(
        s,
        "Protocol: at least {} warm-up samples and {} ms of warm-up, then at least {} timed samples and {} ms of them per arm (at most {}), each {}; every sample (warm-ups too) is checked against the host backend's serial execution; arm order {}{}; medians with 95% bootstrap intervals; a tie is a ratio within ±{:.0}% or overlapping intervals. Metric: {unit}; host submission time is a separate column in `results.json`.\n",
        args.warmups,
        args.warmup_ms,
        args.samples,
        args.timed_ms,
        args.max_timed_samples(),
        replays_text(args),
        arm_order_text(backend, args),
        regime_text(backend, args, p.regime_chain_us).map_or(String::new(), |r| format!("; CUDA driver state {r}")),
        stats::TIE_BAND * 100.0
    );
    if let Some(r) = rows.iter().find_map(|r| r.protocol) {
        let _ = writeln!(
            s,
            "The kernel-family rows (ten ops each) take at least {} ms of warm-up and {} ms of timed samples per arm where that is shorter (the sample counts stay).\n",
            r.warmup_ms.min(args.warmup_ms),
            r.timed_ms.min(args.timed_ms)
        );
    }
    let summary = summarize(backend, rows);
    let _ = writeln!(s, "## Headline: {us} against each arm (median speedup = arm time / {us} time)\n");
    comparison_table(&mut s, summary.iter().filter(|c| c.ours == us));
    if summary.iter().any(|c| c.ours != us) {
        let _ = writeln!(s, "\n## Ostinato on Vulkan against raw Vulkan (median speedup = raw Vulkan time / the arm's time)\n");
        comparison_table(&mut s, summary.iter().filter(|c| c.ours != us));
    }
    s.push_str(&family_section(backend, rows, &summary));
    s.push_str(&decisions_section(backend, rows));
    let arms: Vec<&str> = rows.first().map(|r| r.arms.iter().map(|a| a.arm).collect()).unwrap_or_default();
    let mut families: Vec<&str> = rows.iter().map(|r| r.family).collect();
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
    let burst = format!("Host µs per replay call of a retained graph (median of bursts of {} calls)", super::arms::CALL_BURST);
    replay_table(&mut s, &burst, rows, &arms, |a| a.replay_call_us);
    let single = format!("Host µs of one replay call on an idle GPU (median of {} calls per sample, median over samples)", super::arms::SINGLE_CALLS);
    replay_table(&mut s, &single, rows, &arms, |a| a.replay_single_us);
    let _ = writeln!(s, "\n## Losses (outside the tie band)\n");
    let lost: Vec<String> = rankings(backend, rows).iter().flat_map(|(us, baselines)| losses(rows, us, baselines)).collect();
    let _ = writeln!(s, "{}", if lost.is_empty() { "none".to_string() } else { lost.join("\n") });
    let skipped: Vec<String> =
        rows.iter().flat_map(|r| r.arms.iter().filter_map(move |a| a.skipped.as_ref().map(|w| format!("- {} / {}: {w}", r.id, a.arm)))).collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "\n## Not applicable (neither failed nor ranked)\n\n{}", skipped.join("\n"));
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
    let ran: Vec<&'static str> = rows.first().map(|r| r.arms.iter().map(|a| a.arm).collect()).unwrap_or_default();
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
    let mut families: Vec<&str> = rows.iter().map(|r| r.family).collect();
    families.dedup();
    families.push("all");
    for fam in families {
        let of: Vec<&RowResult> = rows.iter().filter(|r| fam == "all" || r.family == fam).collect();
        let cells: Vec<String> = versus
            .iter()
            .map(|v| match summary.iter().find(|c| c.family == fam && c.ours == us && c.versus == *v) {
                Some(c) => format!("{:.2}× ({}/{}/{})", c.median_speedup, c.wins, c.ties, c.losses),
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
        if d.full_edges.is_empty() && d.unfused.is_empty() {
            continue;
        }
        let why = |v: &[(String, usize)]| v.iter().map(|(w, n)| format!("{n}: {w}")).collect::<Vec<_>>().join("; ");
        let mut parts = Vec::new();
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

fn chart(path: &Path, backend: BenchBackend, p: &Provenance, rows: &[RowResult]) -> Result<(), String> {
    let arms: Vec<&str> = rows.first().map(|r| r.arms.iter().map(|a| a.arm).collect()).unwrap_or_default();
    let vals: Vec<f64> = rows.iter().flat_map(|r| arms.iter().filter_map(move |a| metric(r, a).map(|m| m.0))).filter(|v| *v > 0.0).collect();
    let (lo, hi) = vals.iter().fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
    let (lo, hi) = if vals.is_empty() { (0.01, 10.0) } else { (lo / 1.5, hi * 1.5) };
    let width = 160 + 70 * rows.len() as u32;
    let root = SVGBackend::new(path, (width.max(900), 620)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let unit = if backend == BenchBackend::Cuda { "GPU µs per dispatch (log)" } else { "wall µs per dispatch (log)" };
    let mut c = ChartBuilder::on(&root)
        .caption(format!("Ostinato dispatch matrix — {}", label(backend, p)), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(150)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(rows.len() as f64 - 0.5), (lo..hi).log_scale())
        .map_err(e)?;
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    c.configure_mesh()
        .x_labels(rows.len().max(1))
        .x_label_formatter(&|x| ids.get(x.round() as usize).filter(|_| (x - x.round()).abs() < 1e-6).cloned().unwrap_or_default())
        .x_label_style(("sans-serif", 11).into_font().transform(FontTransform::Rotate90))
        .y_desc(unit)
        .draw()
        .map_err(e)?;
    for (ai, a) in arms.iter().enumerate() {
        let color = Palette99::pick(ai).to_rgba();
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| metric(r, a).filter(|_| r.ok).map(|m| (i as f64 + (ai as f64 - arms.len() as f64 / 2.0) * 0.06, m.0)))
            .collect();
        c.draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 4, color.filled())))
            .map_err(e)?
            .label(a.to_string())
            .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
    }
    c.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.9)).draw().map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
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

/// How the arms were ordered, and which ran, for the protocol line and `results.json`.
fn arm_order_text(backend: BenchBackend, args: &BenchConfig) -> String {
    let mut t = "rotated per row".to_string();
    if args.study.rotate != 0 {
        t += &format!(", shifted by {} (--rotate)", args.study.rotate);
    }
    let chosen: Option<Vec<&str>> = args.arms.as_ref().map(|list| list.iter().map(|a| a.trim()).collect());
    let ran = |a: ArmKind| chosen.as_ref().is_none_or(|c| c.contains(&a.name()));
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
    // The host matrix runs Vulkan arms only where `--arms` names them.
    let vulkan_ran =
        ArmKind::VULKAN.iter().any(|&a| if backend == BenchBackend::Cuda { ran(a) } else { chosen.as_ref().is_some_and(|c| c.contains(&a.name())) });
    if vulkan_ran {
        t += "; the Vulkan arms in a last pass after all rows, on one set of buffers per row";
    }
    if let Some(c) = chosen {
        t += &format!("; only the arms {} (--arms)", c.join(","));
    }
    t
}

/// The CUDA driver state the rows ran in (`--regime`), for the protocol line and `results.json`; None
/// on the host backend. `chain_us`: what entering the multi-stream state measured (before, after).
fn regime_text(backend: BenchBackend, args: &BenchConfig, chain_us: Option<[f64; 2]>) -> Option<String> {
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

/// What one timed sample is, for the protocol line and `results.json`.
fn replays_text(args: &BenchConfig) -> String {
    match args.replays {
        Some(1) => "one replay between two events (--replays 1)".into(),
        Some(n) => format!("{n} back-to-back replays between two events (--replays {n})"),
        None => "one replay between two events (the decode stack: 4, one position each)".into(),
    }
}

pub fn write_all(dir: &Path, backend: BenchBackend, p: &Provenance, args: &BenchConfig, rows: &[RowResult]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let results = Results {
        schema_version: SCHEMA_VERSION,
        provenance: p,
        protocol: serde_json::json!({
            "warmups": args.warmups,
            "warmup_ms": args.warmup_ms,
            "samples": args.samples,
            "timed_ms": args.timed_ms,
            "max_timed_samples": args.max_timed_samples(),
            "replays_per_sample": replays_text(args),
            "statistic": "median",
            "interval": "95% percentile bootstrap of the median, 2000 resamples",
            "tie_band": stats::TIE_BAND,
            "oracle": "every sample, warm-ups included, against the host backend's serial execution",
            "arm_order": arm_order_text(backend, args),
            "regime": regime_text(backend, args, p.regime_chain_us),
            "metric": if backend == BenchBackend::Cuda { "gpu_us_per_dispatch" } else { "host_us_per_dispatch" },
        }),
        rows,
        summary: summarize(backend, rows),
        failed_rows: rows.iter().filter(|r| !r.ok).map(|r| r.id.as_str()).collect(),
    };
    // Compact: the file carries every sample; REPORT.md is the view for reading.
    let json = serde_json::to_string(&results).map_err(|e| e.to_string())?;
    let w = |name: &str, data: &str| std::fs::write(dir.join(name), data).map_err(|e| format!("{}: {e}", dir.join(name).display()));
    w("results.json", &json)?;
    w("REPORT.md", &markdown(backend, p, args, rows))?;
    chart(&dir.join("chart.svg"), backend, p, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Regime;
    use ostinato_cuda::StreamPriority;

    fn cfg(f: impl FnOnce(&mut BenchConfig)) -> BenchConfig {
        let mut c = BenchConfig::default();
        f(&mut c);
        c
    }

    fn row(id: &str, addresses: &[&str]) -> RowResult {
        RowResult {
            id: id.into(),
            family: "dispatch-grid serial",
            dispatches_per_replay: 941,
            replays_per_sample: 1,
            check: "exact".into(),
            ok: true,
            arm_order: vec![],
            buffer_addresses: addresses.iter().map(|a| a.to_string()).collect(),
            protocol: None,
            arms: vec![],
            decode: None,
            timeline: None,
        }
    }

    #[test]
    fn the_arm_order_text_says_which_arms_ran_and_in_which_pass() {
        let text = |c: BenchConfig| arm_order_text(BenchBackend::Cuda, &c);
        let direct = "the arms that launch kernels directly (eager, ostinato-eager) in a second pass after every row's graph arms";
        let all = text(BenchConfig::default());
        assert!(all.starts_with(&format!("rotated per row; {direct} (plain launches on a second stream")), "{all}");
        let shared = "every CUDA arm of a row replays on one stream the row makes (Ostinato's execs bound to it)";
        assert!(
            all.ends_with(&format!("docs/fences.md decision 7); {shared}; the Vulkan arms in a last pass after all rows, on one set of buffers per row")),
            "{all}"
        );
        let high = text(cfg(|c| c.study.priority = StreamPriority::High));
        assert!(high.contains("except Ostinato's (streams of its own at high priority, --priority high)") && !high.contains(shared), "{high}");
        let two = text(cfg(|c| c.arms = Some(vec!["ostinato".into(), "eager".into()])));
        assert!(two.contains("directly (eager) in a second pass") && two.ends_with("; only the arms ostinato,eager (--arms)"), "{two}");
        assert!(!two.contains("Vulkan arms in"), "{two}");
        assert_eq!(
            text(cfg(|c| {
                c.arms = Some(vec!["vulkan".into(), "ostinato".into()]);
                c.study.rotate = 2;
            })),
            format!(
                "rotated per row, shifted by 2 (--rotate); {shared}; the Vulkan arms in a last pass after all rows, on one set of buffers per row; only the arms vulkan,ostinato (--arms)"
            )
        );
        let host = arm_order_text(BenchBackend::Host, &cfg(|c| c.arms = Some(vec!["ostinato-host".into(), "vulkan".into()])));
        assert_eq!(
            host,
            "rotated per row; the Vulkan arms in a last pass after all rows, on one set of buffers per row; only the arms ostinato-host,vulkan (--arms)"
        );
        assert_eq!(arm_order_text(BenchBackend::Host, &BenchConfig::default()), "rotated per row");
        let fresh = BenchConfig::default();
        assert!(regime_text(BenchBackend::Cuda, &fresh, None).unwrap_or_default().starts_with("fresh"));
        assert!(regime_text(BenchBackend::Host, &fresh, None).is_none());
        let multi = regime_text(BenchBackend::Cuda, &cfg(|c| c.study.regime = Regime::MultiStream), Some([0.5071, 0.6284])).unwrap_or_default();
        assert!(multi.starts_with("multi-stream") && multi.contains("took 0.507 µs per dispatch before and 0.628 after"), "{multi}");
    }

    #[test]
    fn a_run_with_a_failed_row_is_an_error_naming_it() {
        let mut bad = row("grid/indep/n1/b1", &[]);
        bad.ok = false;
        let good = row("grid/serial/n941/b1", &[]);
        assert!(failed_rows(std::slice::from_ref(&good), Path::new("out")).is_ok());
        let err = failed_rows(&[good, bad], Path::new("out")).unwrap_err().to_string();
        assert!(err.starts_with("1 of 2 rows failed: grid/indep/n1/b1 (why: out/REPORT.md"), "{err}");
    }

    #[test]
    fn the_report_says_where_each_rows_buffers_lay_and_json_omits_it_when_unknown() {
        let args = cfg(|c| c.backend = Some(BenchBackend::Host));
        let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
        let placed = [row("grid/serial/n941/b1", &["x=0x7f0000e20400"]), row("grid/serial/n1/b1", &[])];
        let md = markdown(BenchBackend::Cuda, &p, &args, &placed);
        assert!(md.contains("## Where each row's buffers lay"), "{md}");
        assert!(md.contains("- grid/serial/n941/b1: x=0x7f0000e20400\n"), "{md}");
        assert!(!md.contains("- grid/serial/n1/b1:"), "a row without addresses gets no line: {md}");
        let host_only = markdown(BenchBackend::Host, &p, &args, &placed[1..]);
        assert!(!host_only.contains("buffers lay"), "no section without addresses: {host_only}");
        let json = serde_json::to_value(&placed[..]).unwrap();
        assert_eq!(json[0]["buffer_addresses"][0], "x=0x7f0000e20400");
        assert!(json[1].get("buffer_addresses").is_none(), "empty addresses are left out: {}", json[1]);
    }

    /// A row whose arms measured `times` (arm, GPU µs per dispatch, a tight interval around it).
    fn timed(id: &str, times: &[(ArmKind, f64)]) -> RowResult {
        let mut r = row(id, &[]);
        r.arms = times
            .iter()
            .map(|&(k, us)| {
                let mut a = crate::matrix::ArmResult::new_for_test(k);
                a.gpu_us_per_dispatch = Some(Stat { median: us, ci_lo: us * 0.999, ci_hi: us * 1.001 });
                a
            })
            .collect();
        r
    }

    #[test]
    fn ostinato_on_vulkan_is_ranked_against_raw_vulkan_with_its_losses_named() {
        use ArmKind::{Ostinato, OstinatoVulkan, OstinatoVulkanUnfused, Vulkan};
        let rows = [
            timed("grid/serial/n1/b1", &[(Ostinato, 3.0), (Vulkan, 4.0), (OstinatoVulkan, 3.9), (OstinatoVulkanUnfused, 4.6)]),
            timed("grid/serial/n941/b1", &[(Ostinato, 0.07), (Vulkan, 2.1), (OstinatoVulkan, 0.5), (OstinatoVulkanUnfused, 2.0)]),
        ];
        let summary = summarize(BenchBackend::Cuda, &rows);
        let all =
            |ours: &str, versus: &str| summary.iter().find(|c| c.family == "all" && c.ours == ours && c.versus == versus).map(|c| (c.wins, c.ties, c.losses));
        assert_eq!(all("ostinato", "vulkan"), Some((2, 0, 0)));
        assert_eq!(all("ostinato-vulkan", "vulkan"), Some((1, 1, 0)), "3.9 against 4.0 is a tie, 0.5 against 2.1 a win");
        assert_eq!(all("ostinato-vulkan-unfused", "vulkan"), Some((1, 0, 1)));
        assert_eq!(all("ostinato-vulkan", "ostinato-vulkan-unfused"), None, "Vulkan arms are ranked against raw Vulkan only");
        let args = cfg(|c| c.backend = Some(BenchBackend::Host));
        let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
        let md = markdown(BenchBackend::Cuda, &p, &args, &rows);
        assert!(md.contains("## Ostinato on Vulkan against raw Vulkan"), "{md}");
        assert!(md.contains("| all | ostinato-vulkan | vulkan | 2 | 2.61× | 1 | 1 | 0 |"), "{md}");
        assert!(md.contains("- grid/serial/n1/b1: vulkan is 1.15× faster than ostinato-vulkan-unfused (4.000 vs 4.600 µs)"), "{md}");
        let headline = headline(BenchBackend::Cuda, &rows);
        assert!(headline.contains("ostinato-vulkan vs vulkan: median speedup 2.61x over 2 rows (1 wins, 1 ties, 0 losses)"), "{headline}");
        // Without a raw Vulkan arm there is nothing to rank the Vulkan arms against.
        let no_raw = [timed("grid/serial/n1/b1", &[(Ostinato, 3.0), (OstinatoVulkan, 3.9)])];
        assert!(summarize(BenchBackend::Cuda, &no_raw).iter().all(|c| c.ours == "ostinato"));
        assert!(!markdown(BenchBackend::Cuda, &p, &args, &no_raw).contains("against raw Vulkan"));
    }

    #[test]
    fn the_report_ranks_each_family_and_names_what_the_policy_turned_down() {
        use ArmKind::{Captured, CapturedPdl, Ostinato, Vulkan};
        let mut a = timed("reduce/tree-f32/serial/n1M", &[(Ostinato, 1.0), (Captured, 1.5), (CapturedPdl, 1.2), (Vulkan, 3.0)]);
        a.family = "reduction serial";
        a.arms[0].decisions = Some(crate::arms::Decisions {
            edges: 9,
            programmatic_edges: 0,
            full_edges: vec![("the smaller grid has 1024 blocks, more than auto's 512".into(), 9)],
            nodes: 10,
            fused_nodes: 0,
            unfused: vec![("kernel `reduce_tree_f32` is not declared fusable".into(), 10)],
        });
        let mut b = timed("geom/serial/b256/g1", &[(Ostinato, 0.1), (Captured, 0.3), (CapturedPdl, 0.2), (Vulkan, 0.5)]);
        b.family = "geometry serial";
        b.arms[0].decisions = Some(crate::arms::Decisions { edges: 0, programmatic_edges: 0, full_edges: vec![], nodes: 10, fused_nodes: 10, unfused: vec![] });
        let args = cfg(|c| c.backend = Some(BenchBackend::Host));
        let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
        let md = markdown(BenchBackend::Cuda, &p, &args, &[a, b]);
        assert!(md.contains("## Per family: ostinato against captured, captured-pdl, vulkan"), "{md}");
        assert!(md.contains("| reduction serial | 1 | 0 | 1.50× (1/0/0) | 1.20× (1/0/0) | 3.00× (1/0/0) | 1 | 1 |"), "{md}");
        assert!(md.contains("| geometry serial | 1 | 0 | 3.00× (1/0/0) | 2.00× (1/0/0) | 5.00× (1/0/0) | 0 | 0 |"), "{md}");
        assert!(
            md.contains("- reduce/tree-f32/serial/n1M: PDL on 0 of 9 edges (9: the smaller grid has 1024 blocks, more than auto's 512); 0 of 10 nodes fused (10: kernel `reduce_tree_f32` is not declared fusable)"),
            "{md}"
        );
        assert!(!md.contains("- geom/serial/b256/g1:"), "a row where nothing was turned down gets no line: {md}");
    }
}
