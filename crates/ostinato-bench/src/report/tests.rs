//! The report's tables and sections, from hand-made results.

use super::*;
use crate::Regime;
use ostinato_cuda::StreamPriority;

/// The report of one run of `args`.
fn report_of(backend: BenchBackend, p: &Provenance, args: &BenchConfig, rows: &[RowResult]) -> String {
    markdown(backend, std::slice::from_ref(p), &RunProtocol::of(backend, args, p.regime_chain_us), rows)
}

fn cfg(f: impl FnOnce(&mut BenchConfig)) -> BenchConfig {
    let mut c = BenchConfig::default();
    f(&mut c);
    c
}

fn row(id: &str, addresses: &[&str]) -> RowResult {
    RowResult {
        id: id.into(),
        family: "dispatch-grid serial".into(),
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
        all.ends_with(&format!(
            "docs/fences.md decision 7); {shared}; the Vulkan arms in a last pass after all rows, on one set of buffers per row, {VULKAN_TIMING}"
        )),
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
            "rotated per row, shifted by 2 (--rotate); {shared}; the Vulkan arms in a last pass after all rows, on one set of buffers per row, {VULKAN_TIMING}; only the arms vulkan,ostinato (--arms)"
        )
    );
    let host = arm_order_text(BenchBackend::Host, &cfg(|c| c.arms = Some(vec!["ostinato-host".into(), "vulkan".into()])));
    assert_eq!(
        host,
        format!("rotated per row; the Vulkan arms in a last pass after all rows, on one set of buffers per row, {VULKAN_TIMING}; only the arms ostinato-host,vulkan (--arms)")
    );
    assert!(VULKAN_TIMING.contains("leaves out every submission's start"), "{VULKAN_TIMING}");
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
    let md = report_of(BenchBackend::Cuda, &p, &args, &placed);
    assert!(md.contains("## Where each row's buffers lay"), "{md}");
    assert!(md.contains("- grid/serial/n941/b1: x=0x7f0000e20400\n"), "{md}");
    assert!(!md.contains("- grid/serial/n1/b1:"), "a row without addresses gets no line: {md}");
    let host_only = report_of(BenchBackend::Host, &p, &args, &placed[1..]);
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
    let all = |ours: &str, versus: &str| summary.iter().find(|c| c.family == "all" && c.ours == ours && c.versus == versus).map(|c| (c.wins, c.ties, c.losses));
    assert_eq!(all("ostinato", "vulkan"), Some((2, 0, 0)));
    assert_eq!(all("ostinato-vulkan", "vulkan"), Some((1, 1, 0)), "3.9 against 4.0 is a tie, 0.5 against 2.1 a win");
    assert_eq!(all("ostinato-vulkan-unfused", "vulkan"), Some((1, 0, 1)));
    assert_eq!(all("ostinato-vulkan", "ostinato-vulkan-unfused"), None, "Vulkan arms are ranked against raw Vulkan only");
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    let md = report_of(BenchBackend::Cuda, &p, &args, &rows);
    assert!(md.contains("## Ostinato on Vulkan against raw Vulkan"), "{md}");
    assert!(md.contains("| all | ostinato-vulkan | vulkan | 2 | 2.61× | 1 | 1 | 0 | 0 |"), "{md}");
    assert!(md.contains("- grid/serial/n1/b1: vulkan is 1.15× faster than ostinato-vulkan-unfused (4.000 vs 4.600 µs)"), "{md}");
    let headline = headline(BenchBackend::Cuda, &rows);
    assert!(headline.contains("ostinato-vulkan vs vulkan: median speedup 2.61x over 2 rows (1 wins, 1 ties, 0 losses, 0 inconclusive)"), "{headline}");
    // Without a raw Vulkan arm there is nothing to rank the Vulkan arms against.
    let no_raw = [timed("grid/serial/n1/b1", &[(Ostinato, 3.0), (OstinatoVulkan, 3.9)])];
    assert!(summarize(BenchBackend::Cuda, &no_raw).iter().all(|c| c.ours == "ostinato"));
    assert!(!report_of(BenchBackend::Cuda, &p, &args, &no_raw).contains("against raw Vulkan"));
}

#[test]
fn a_policy_study_is_ranked_against_the_baselines_apart_from_the_default_and_from_vulkan() {
    use ArmKind::{Captured, CapturedPdl, Ostinato, OstinatoEdgesMedian, OstinatoUntuned, OstinatoVulkan, Vulkan};
    let rows = [
        timed("geom/serial/b512/g2048", &[(Captured, 4.0), (CapturedPdl, 3.8), (Ostinato, 4.0), (OstinatoEdgesMedian, 3.81), (OstinatoUntuned, 4.0)]),
        timed("grid/serial/n941/b1", &[(Captured, 1.0), (CapturedPdl, 0.7), (Ostinato, 0.05), (OstinatoEdgesMedian, 0.05), (OstinatoUntuned, 0.05)]),
    ];
    let summary = summarize(BenchBackend::Cuda, &rows);
    let all = |ours: &str, versus: &str| summary.iter().find(|c| c.family == "all" && c.ours == ours && c.versus == versus).map(|c| (c.wins, c.ties, c.losses));
    assert_eq!(all("ostinato", "captured-pdl"), Some((1, 0, 1)), "4.0 against 3.8 loses");
    assert_eq!(all("ostinato-edges-median", "captured-pdl"), Some((1, 1, 0)), "3.81 against 3.8 ties");
    assert_eq!(all("ostinato-edges-median", "captured"), Some((2, 0, 0)));
    assert_eq!(all("ostinato", "ostinato-edges-median"), Some((0, 1, 1)), "the default arm still faces every other arm");
    assert_eq!(all("ostinato-edges-median", "ostinato-untuned"), None, "a study faces the baselines only");
    assert_eq!(all("ostinato-untuned", "captured"), None, "an ablation is not a study");
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    let md = report_of(BenchBackend::Cuda, &p, &args, &rows);
    assert!(md.contains("## Policy studies against the baselines"), "{md}");
    assert!(md.contains("| all | ostinato-edges-median | captured-pdl | 2 |"), "{md}");
    assert!(!md.contains("against raw Vulkan"), "no Vulkan arm ran: {md}");
    assert!(md.contains("- geom/serial/b512/g2048: captured-pdl is 1.05× faster than ostinato (3.800 vs 4.000 µs)"), "{md}");
    // Beside Vulkan arms, each comparison lands in its own table.
    let both = [timed("grid/serial/n1/b1", &[(CapturedPdl, 3.0), (Ostinato, 3.0), (OstinatoEdgesMedian, 3.0), (Vulkan, 4.0), (OstinatoVulkan, 3.9)])];
    let md = report_of(BenchBackend::Cuda, &p, &args, &both);
    let (studies, vulkan) = (md.find("## Policy studies").expect("studies"), md.find("## Ostinato on Vulkan against raw Vulkan").expect("vulkan"));
    assert!(!md[studies..vulkan].contains("| ostinato-vulkan |") && !md[vulkan..].contains("| ostinato-edges-median | captured-pdl"), "{md}");
}

#[test]
fn the_report_ranks_each_family_and_names_what_the_policy_turned_down() {
    use ArmKind::{Captured, CapturedPdl, Ostinato, Vulkan};
    let mut a = timed("reduce/tree-f32/serial/n1M", &[(Ostinato, 1.0), (Captured, 1.5), (CapturedPdl, 1.2), (Vulkan, 3.0)]);
    a.family = "reduction serial".into();
    a.arms[0].decisions = Some(crate::arms::Decisions {
        edges: 9,
        programmatic_edges: 0,
        full_edges: vec![("the smaller grid has 1024 blocks, more than auto's 512".into(), 9)],
        nodes: 10,
        fused_nodes: 0,
        fused_barriers: None,
        unfused: vec![("kernel `reduce_tree_f32` is not declared fusable".into(), 10)],
        candidates: 2,
        measured: Some(vec![("auto".into(), 10.0), ("pdl on".into(), 10.1)]),
        confirmation: None,
        setup_ms: Vec::new(),
    });
    // The same exec's timed replays, beside its tuning: 1.05 µs a dispatch, ten a replay.
    a.dispatches_per_replay = 10;
    a.arms[0].instances = vec![crate::matrix::InstanceResult { median: Some(1.05), timed_samples: 9, decisions: None }];
    let mut b = timed("geom/serial/b256/g1", &[(Ostinato, 0.1), (Captured, 0.3), (CapturedPdl, 0.2), (Vulkan, 0.5)]);
    b.family = "geometry serial".into();
    b.arms[0].decisions = Some(crate::arms::Decisions {
        edges: 0,
        programmatic_edges: 0,
        full_edges: vec![],
        nodes: 10,
        fused_nodes: 10,
        fused_barriers: None,
        unfused: vec![],
        candidates: 1,
        measured: None,
        confirmation: None,
        setup_ms: Vec::new(),
    });
    // A row whose exec measured PDL off faster than auto's programmatic edges: named, with both times.
    let mut c = timed("reduce/atomic-u32/serial/n8M", &[(Ostinato, 23.0), (Captured, 23.1), (CapturedPdl, 34.5), (Vulkan, 40.0)]);
    c.family = "reduction independent".into();
    c.arms[0].decisions = Some(crate::arms::Decisions {
        edges: 9,
        programmatic_edges: 0,
        full_edges: vec![("PDL off".into(), 9)],
        nodes: 10,
        fused_nodes: 10,
        fused_barriers: None,
        unfused: vec![],
        candidates: 2,
        measured: Some(vec![("pdl off".into(), 230.0), ("auto".into(), 344.5)]),
        confirmation: Some(("pdl off".into(), 231.0, 340.0)),
        setup_ms: Vec::new(),
    });
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    let md = report_of(BenchBackend::Cuda, &p, &args, &[a, b, c]);
    assert!(md.contains("## Per family: ostinato against captured, captured-pdl, vulkan"), "{md}");
    assert!(md.contains("| reduction serial | 1 | 0 | 1.50× (1/0/0) | 1.20× (1/0/0) | 3.00× (1/0/0) | 1 | 1 |"), "{md}");
    assert!(md.contains("| geometry serial | 1 | 0 | 3.00× (1/0/0) | 2.00× (1/0/0) | 5.00× (1/0/0) | 0 | 0 |"), "{md}");
    assert!(
        md.contains("- reduce/tree-f32/serial/n1M: measured 2 submissions, kept auto's own (10.000 µs per replay, then 10.500 in its timed replays; the fastest other, `pdl on`, 10.100); PDL on 0 of 9 edges (9: the smaller grid has 1024 blocks, more than auto's 512); 0 of 10 nodes fused (10: kernel `reduce_tree_f32` is not declared fusable)"),
        "{md}"
    );
    assert!(!md.contains("- geom/serial/b256/g1:"), "a row where nothing was turned down gets no line: {md}");
    assert!(
        md.contains("- reduce/atomic-u32/serial/n8M: measured 2 submissions, chose `pdl off` (230.000 µs per replay; auto's own 344.500); `pdl off` measured again beside auto's own alone: 231.000 against 340.000 µs per replay; PDL on 0 of 9 edges (9: PDL off)"),
        "{md}"
    );
}

/// What Ostinato on Vulkan fused, row by row, with the tile maps it did not keep; rows where it fused
/// nothing and kept every map get no line.
#[test]
fn the_report_says_what_ostinato_on_vulkan_fused_and_which_maps_it_did_not_keep() {
    use ArmKind::{Ostinato, OstinatoVulkan, Vulkan};
    let vk = |fused: usize, unfused: Vec<(String, usize)>| crate::arms::Decisions {
        edges: 0,
        programmatic_edges: 0,
        full_edges: vec![],
        nodes: 12,
        fused_nodes: fused,
        fused_barriers: Some(if fused == 0 { 0 } else { fused - 1 }),
        unfused,
        candidates: 1,
        measured: None,
        confirmation: None,
        setup_ms: Vec::new(),
    };
    let mut rows = [
        timed("tiles/rms/r64x256/l4", &[(Ostinato, 1.0), (Vulkan, 2.0), (OstinatoVulkan, 1.5)]),
        timed("tiles/user/r64", &[(Ostinato, 1.0), (Vulkan, 2.0), (OstinatoVulkan, 1.9)]),
        timed("geom/serial/b256/g1", &[(Ostinato, 1.0), (Vulkan, 2.0), (OstinatoVulkan, 1.9)]),
    ];
    rows[0].arms[2].decisions = Some(vk(12, vec![]));
    rows[1].arms[2].decisions = Some(vk(0, vec![("its tile map on `x` is not kept: kernel `k`, the access at line 9: …".into(), 12)]));
    rows[2].arms[2].decisions = Some(vk(0, vec![]));
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    let md = report_of(BenchBackend::Cuda, &p, &args, &rows);
    assert!(md.contains("## What Ostinato on Vulkan fused"), "{md}");
    assert!(md.contains("- tiles/rms/r64x256/l4: 12 of 12 nodes fused, 11 barriers between bodies\n"), "{md}");
    assert!(md.contains("- tiles/user/r64: 0 of 12 nodes fused (12: its tile map on `x` is not kept: kernel `k`, the access at line 9: …)"), "{md}");
    assert!(!md.contains("- geom/serial/b256/g1:"), "{md}");
}

/// The host matrix's report as a reader needs it: `host-serial` explained, the host named in place
/// of an empty device line, no host-submission table repeating the wall times, and a row whose
/// intervals overlap counted as inconclusive with its ratio never printed as a speedup.
#[test]
fn the_host_report_explains_its_arms_names_its_host_and_never_ranks_an_inconclusive_row() {
    use ArmKind::{HostSerial, OstinatoHost};
    let mut wide = timed("decode/h256-l2", &[(HostSerial, 227.7), (OstinatoHost, 90.0)]);
    wide.family = "decode-shaped".into();
    for a in &mut wide.arms {
        a.host_us_per_dispatch = a.gpu_us_per_dispatch.take();
    }
    wide.arms[0].host_us_per_dispatch = Some(Stat { median: 227.7, ci_lo: 81.073, ci_hi: 1925.589 });
    let mut tight = timed("grid/serial/n941/b1", &[(HostSerial, 7.8), (OstinatoHost, 3.96)]);
    for a in &mut tight.arms {
        a.host_us_per_dispatch = a.gpu_us_per_dispatch.take();
    }
    let rows = [tight, wide];
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let mut p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    p.host_name = "bench-box".into();
    let md = report_of(BenchBackend::Host, &p, &args, &rows);
    assert!(!md.contains("Device —") && !md.contains("CUDA driver —"), "no empty device line: {md}");
    assert!(md.contains(&format!("Host bench-box: {} ({} threads); no GPU", p.host_cpu, p.host_threads)), "{md}");
    assert!(md.contains("- `host-serial`: the host backend replaying the same plan one node at a time in program order"), "{md}");
    assert!(!md.contains("Host submission"), "the host's wall time is the metric: no second table of it: {md}");
    assert!(md.contains("| decode-shaped | ostinato-host | host-serial | 1 | — (no row decided) | 0 | 0 | 0 | 1 |"), "{md}");
    assert!(md.contains("| all | ostinato-host | host-serial | 2 | 1.97× (1 of 2 rows) | 1 | 0 | 0 | 1 |"), "{md}");
    assert!(md.contains("- decode/h256-l2: ostinato-host 90.000 [89.910, 90.090] against host-serial 227.700 [81.073, 1925.589]: medians 2.53× apart, the intervals overlap\n"), "{md}");
    assert!(md.contains("a row whose intervals overlap is inconclusive"), "{md}");
    let h = headline(BenchBackend::Host, &rows);
    assert!(h.contains("ostinato-host vs host-serial: median speedup 1.97x over 1 rows (1 wins, 0 ties, 0 losses, 1 inconclusive)"), "{h}");
    assert!(h.contains("(host-serial: the host backend replaying the same plan one node at a time"), "{h}");
}

/// Where arms were made several times, an inconclusive row and a loss each show every instance's
/// median of both arms, so a reader sees why a row was not ranked or that a loss holds throughout.
#[test]
fn inconclusive_rows_and_losses_show_each_instance_of_both_arms() {
    use ArmKind::{CapturedPdl, Ostinato};
    let instances = |m: &[f64]| m.iter().map(|&m| crate::matrix::InstanceResult { median: Some(m), timed_samples: 3, decisions: None }).collect::<Vec<_>>();
    let mut unsure = timed("geom/indep/b256/g512", &[(CapturedPdl, 1.443), (Ostinato, 1.386)]);
    unsure.arms[0].gpu_us_per_dispatch = Some(Stat { median: 1.443, ci_lo: 1.30, ci_hi: 1.60 });
    unsure.arms[1].gpu_us_per_dispatch = Some(Stat { median: 1.386, ci_lo: 1.35, ci_hi: 1.77 });
    unsure.arms[0].instances = instances(&[1.30, 1.443, 1.60]);
    unsure.arms[1].instances = instances(&[1.386, 1.773, 1.430]);
    let mut lost = timed("geom/serial/b512/g2048", &[(CapturedPdl, 3.824), (Ostinato, 4.019)]);
    lost.arms[0].instances = instances(&[3.824, 3.933, 3.818]);
    lost.arms[1].instances = instances(&[4.013, 4.029, 3.955]);
    let rows = [unsure, lost];
    assert_eq!(
        inconclusive(&rows, "ostinato", &["captured-pdl"]),
        ["- geom/indep/b256/g512: ostinato 1.386 [1.350, 1.770] against captured-pdl 1.443 [1.300, 1.600]: medians 1.04× apart, the intervals overlap; instances: ostinato 1.386 / 1.773 / 1.430, captured-pdl 1.300 / 1.443 / 1.600"]
    );
    assert_eq!(
        losses(&rows, "ostinato", &["captured-pdl"]),
        ["- geom/serial/b512/g2048: captured-pdl is 1.05× faster than ostinato (3.824 vs 4.019 µs); instances: ostinato 4.013 / 4.029 / 3.955, captured-pdl 3.824 / 3.933 / 3.818"]
    );
}

#[test]
fn the_progress_line_gives_each_arms_median_and_names_a_failed_or_skipped_arm() {
    use ArmKind::{Captured, CapturedPdl, Ostinato, OstinatoEdgesMedian};
    let mut arms = timed("geom/serial/b512/g2048", &[(Ostinato, 4.0191), (CapturedPdl, 3.8243), (Captured, 1.0), (OstinatoEdgesMedian, 1.0)]).arms;
    (arms[0].ok, arms[1].ok, arms[2].ok) = (true, true, false);
    arms[3].skipped = Some("no CUDA device".into());
    assert_eq!(
        progress_line("graph arms", 57, 66, "geom/serial/b512/g2048", 12.345, &arms),
        "graph arms: row 58/66 geom/serial/b512/g2048 in 12.35 s; median µs per dispatch: ostinato 4.019, captured-pdl 3.824, captured FAILED, ostinato-edges-median skipped"
    );
    arms[0].gpu_us_per_dispatch = None;
    assert!(progress_line("vulkan arms", 0, 1, "r", 0.0, &arms[..1]).ends_with("median µs per dispatch: ostinato -"));
}

/// The setup section: each arm's rows, Ostinato's split by whether its exec measured the unfused
/// plan, the largest row named; absent where no arm recorded its setup (older results).
#[test]
fn the_setup_section_names_each_arms_cost_and_the_unfused_plans_share() {
    use ArmKind::{Captured, Ostinato};
    let before = [timed("grid/serial/n10/b1", &[(Ostinato, 1.0), (Captured, 1.5)])];
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    assert!(!report_of(BenchBackend::Cuda, &p, &args, &before).contains("## Setup"));
    let with = |id: &str, ours: &[f64], captured: &[f64], unfused: bool| {
        let mut r = timed(id, &[(Ostinato, 1.0), (Captured, 1.5)]);
        r.dispatches_per_replay = 10;
        r.arms[0].setup_ms = ours.to_vec();
        r.arms[1].setup_ms = captured.to_vec();
        let label = if unfused { "unfused, auto" } else { "pdl on" };
        r.arms[0].decisions = Some(crate::arms::Decisions { measured: Some(vec![("auto".into(), 1.0), (label.into(), 1.2)]), ..Default::default() });
        r
    };
    let rows = [with("a", &[9.0, 2.0, 3.0], &[1.0], true), with("b", &[1.0, 1.0, 1.0], &[0.5], false), with("c", &[2.0], &[0.8], false)];
    let md = report_of(BenchBackend::Cuda, &p, &args, &rows);
    let setup = &md[md.find("## Setup").expect("setup section")..];
    assert!(setup.contains("| ostinato | 3 | 2.00 | 3.00 | 3.00 (`a`) | 200.0 |"), "{setup}");
    assert!(setup.contains("| ostinato, rows that measured the unfused plan | 1 | 3.00 | 3.00 | 3.00 (`a`) | 300.0 |"), "{setup}");
    assert!(setup.contains("| ostinato, the other rows | 2 | 1.50 | 2.00 | 2.00 (`c`) | 150.0 |"), "{setup}");
    assert!(setup.contains("| captured | 3 | 0.80 | 1.00 | 1.00 (`a`) | 80.0 |"), "{setup}");
}

/// The setup section's stages: Ostinato's slowest rows by their median instance's setup, each with
/// that instance's stages (not the first's), the candidate submissions summed with the largest named.
#[test]
fn the_slowest_rows_list_the_median_instances_stages() {
    use crate::arms::Decisions;
    use crate::results::InstanceResult;
    use ArmKind::{Captured, Ostinato};
    let args = cfg(|c| c.backend = Some(BenchBackend::Host));
    let p = crate::provenance::collect(BenchBackend::Host, None, None, None, &args);
    let laps = |fusion: f64| -> Vec<(String, f64)> {
        [("plan", 1.0), ("checks", 2.0), ("fusion", fusion), ("submission `auto`", 30.0), ("submission `pdl on`", 40.0), ("the rest", 0.5)]
            .iter()
            .map(|(s, ms)| (s.to_string(), *ms))
            .collect()
    };
    let with = |id: &str, setups: &[f64]| {
        let mut r = timed(id, &[(Ostinato, 1.0), (Captured, 1.5)]);
        r.arms[0].setup_ms = setups.to_vec();
        // Each instance's fusion lap is its setup, so the line says which instance it came from.
        r.arms[0].instances = setups
            .iter()
            .map(|&ms| InstanceResult { median: Some(1.0), timed_samples: 1, decisions: Some(Decisions { setup_ms: laps(ms), ..Default::default() }) })
            .collect();
        r
    };
    let rows = [with("slow", &[900.0, 400.0, 450.0]), with("quick", &[3.0, 2.0, 1.0]), with("middle", &[50.0, 60.0, 70.0]), with("least", &[0.5, 0.4, 0.6])];
    let md = report_of(BenchBackend::Cuda, &p, &args, &rows);
    let setup = &md[md.find("## Setup").expect("setup section")..];
    assert!(setup.contains("on its 3 slowest rows"), "{setup}");
    let want = "- `slow` (450.00): plan 1.00, checks 2.00, fusion 450.00, 2 submissions 70.00 (the largest `pdl on` 40.00), the rest 0.50";
    assert!(setup.contains(want), "{setup}");
    let (slow, middle, quick) = (setup.find("- `slow`"), setup.find("- `middle` (60.00)"), setup.find("- `quick` (2.00)"));
    assert!(slow < middle && middle < quick && quick.is_some(), "{setup}");
    assert!(!setup.contains("- `least`"), "{setup}");
}
