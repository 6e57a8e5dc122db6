//! `results.json` as the benchmark writes it, validated against its schema (`docs/results.schema.json`)
//! with the `jsonschema` crate, and the protocol settings as they land in the file.

mod common;

use std::path::{Path, PathBuf};

use ostinato_bench::BenchBackend;
use ostinato_bench::BenchConfig;
use serde_json::Value;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

fn schema() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(repo().join("docs/results.schema.json")).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn check(results: &Path) -> Value {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    let errors: Vec<String> = schema().iter_errors(&v).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{} violates the schema:\n{}", results.display(), errors.join("\n"));
    v
}

/// A short host matrix writing to `out`, with `f` applied.
fn host_config(out: &Path, f: impl FnOnce(&mut BenchConfig)) -> BenchConfig {
    let mut c = BenchConfig { backend: Some(BenchBackend::Host), quick: true, out: out.to_path_buf(), ..BenchConfig::default() };
    f(&mut c);
    c
}

fn brief(c: &mut BenchConfig, filter: &str) {
    c.filter = filter.split(',').map(str::to_string).collect();
    c.samples = 1;
    c.warmups = 1;
    c.warmup_ms = 0;
}

#[test]
fn host_quick_bench_writes_the_three_files_and_valid_results() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-test-{}", std::process::id()));
    let args = host_config(&out, |c| c.warmup_ms = 30);
    let rows = ostinato_bench::run(&args).expect("host bench runs");
    assert!(rows.iter().all(|r| r.ok), "every host row passes its oracle");
    for f in ["results.json", "REPORT.md", "chart.svg"] {
        assert!(out.join(f).metadata().map(|m| m.len() > 100).unwrap_or(false), "{f} written");
    }
    let v = check(&out.join("results.json"));
    assert_eq!(v["provenance"]["backend"], "host");
    let families: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["family"].as_str().unwrap()).collect();
    for fam in [
        "dispatch-grid serial",
        "dispatch-grid independent",
        "chain fusion",
        "fan-out/fan-in",
        "decode-shaped",
        "llama decode",
        "geometry serial",
        "geometry independent",
        "reduction serial",
        "reduction independent",
        "two-stage reduction serial",
        "two-stage reduction independent",
        "memory latency serial",
        "memory latency independent",
        "packed dot serial",
        "packed dot independent",
        "quantized gemv serial",
        "quantized gemv independent",
    ] {
        assert!(families.contains(&fam), "{fam} missing from the host's quick matrix");
    }
    // every sample carries an oracle verdict; every arm is made 3 times; the listed samples are the 3
    // counted warm-ups of each instance and the timed ones: at least 9 (3 an instance), at most 63,
    // the instances in equal shares; warm-up went on for 30 ms and the timed samples for 10 (tiny host
    // rows take far more than 9 and 9 samples for that)
    assert_eq!(v["protocol"]["instances"], 3);
    for r in v["rows"].as_array().unwrap() {
        for a in r["arms"].as_array().unwrap() {
            let samples = a["samples"].as_array().unwrap();
            let timed: Vec<u64> = samples.iter().filter(|s| s["warmup"] == false).map(|s| s["instance"].as_u64().unwrap()).collect();
            assert!((9..=63).contains(&timed.len()), "{} {}: {} timed samples", r["id"], a["arm"], timed.len());
            let share = |i: u64| timed.iter().filter(|&&t| t == i).count();
            assert!(share(0) == share(1) && share(1) == share(2), "{} {}: instances {timed:?}", r["id"], a["arm"]);
            assert_eq!(samples.iter().filter(|s| s["warmup"] == true).count(), 9, "{} {}", r["id"], a["arm"]);
            assert!(a["warmup_samples"].as_u64().unwrap() >= 9, "{} {}", r["id"], a["arm"]);
            assert_eq!(a["instances"].as_array().map(Vec::len), Some(3), "{} {}", r["id"], a["arm"]);
        }
    }
    let first = &v["rows"][0]["arms"][0];
    assert!(first["warmup_samples"].as_u64().unwrap() > 9, "a 1-dispatch host row warms up for 30 ms, not 9 samples: {first}");
    let first_timed = first["samples"].as_array().unwrap().iter().filter(|s| s["warmup"] == false).count();
    assert!(first_timed > 9, "a 1-dispatch host row takes timed samples for 10 ms, not 9: {first_timed}");
    assert_eq!(v["protocol"]["warmup_ms"], 30);
    assert_eq!(v["protocol"]["timed_ms"], 10);
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(report.contains("HOST BACKEND (no GPU)"), "the host matrix is labelled as such");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_schema_rejects_a_broken_file() {
    let broken = serde_json::json!({"schema_version": 1, "rows": [{"id": 3}]});
    let errors: Vec<String> = schema().iter_errors(&broken).map(|e| format!("{} {e}", e.instance_path())).collect();
    assert!(errors.iter().any(|e| e.contains("\"provenance\" is a required property")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("/schema_version")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("/rows/0/id")), "{errors:?}");
}

#[test]
fn rotate_shifts_every_rows_arm_order_past_the_row_index() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-rotate-{}", std::process::id()));
    let args = host_config(&out, |c| {
        brief(c, "grid/serial");
        c.study.rotate = 1;
    });
    let rows = ostinato_bench::run(&args).expect("host bench runs");
    assert!(rows.len() >= 2, "the filter keeps several rows");
    for (ri, r) in rows.iter().enumerate() {
        // `arms` is reported in the fixed order; the run order is that order shifted by index + 1.
        let mut want: Vec<&str> = r.arms.iter().map(|a| a.arm).collect();
        let n = want.len();
        want.rotate_left((ri + 1) % n);
        assert_eq!(r.arm_order, want, "row {ri} ({})", r.id);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["protocol"]["arm_order"], "rotated per row, shifted by 1 (--rotate)");
    assert!(std::fs::read_to_string(out.join("REPORT.md")).unwrap().contains("arm order rotated per row, shifted by 1 (--rotate);"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn replays_sets_every_rows_replays_per_sample_and_the_protocol_says_so() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-replays-{}", std::process::id()));
    let args = host_config(&out, |c| {
        brief(c, "grid/serial/n50,decode");
        c.replays = Some(3);
    });
    let rows = ostinato_bench::run(&args).expect("host bench runs");
    assert_eq!(rows.len(), 2, "{:?}", rows.iter().map(|r| &r.id).collect::<Vec<_>>());
    for r in &rows {
        assert_eq!(r.replays_per_sample, 3, "{}", r.id);
        assert!(r.ok, "{}: every sample of 3 replays matches the oracle", r.id);
    }
    let v = check(&out.join("results.json"));
    assert_eq!(v["protocol"]["replays_per_sample"], "3 back-to-back replays between two events (--replays 3)");
    assert!(std::fs::read_to_string(out.join("REPORT.md")).unwrap().contains("each sample 3 back-to-back replays between two events"));
    let _ = std::fs::remove_dir_all(&out);
    let zero = host_config(&out, |c| c.replays = Some(0));
    let err = ostinato_bench::run(&zero).err().map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("replays: 0: between 1 and 1000 replays per sample"));
    assert!(!out.exists(), "a refused configuration writes nothing");
}

#[test]
fn arms_runs_only_the_named_arms_in_their_fixed_order() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-arms-{}", std::process::id()));
    let args = host_config(&out, |c| {
        brief(c, "grid/serial/n50");
        c.arms = Some(vec!["ostinato-host".into()]);
    });
    let rows = ostinato_bench::run(&args).expect("host bench runs");
    assert_eq!(rows.len(), 1);
    let names: Vec<&str> = rows[0].arms.iter().map(|a| a.arm).collect();
    assert_eq!(names, ["ostinato-host"], "only the named arm ran");
    let v = check(&out.join("results.json"));
    assert_eq!(v["protocol"]["arm_order"], "rotated per row; only the arms ostinato-host (--arms)");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_filter_that_matches_no_row_is_an_error_not_an_empty_report() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-nomatch-{}", std::process::id()));
    let c = host_config(&out, |c| c.filter = vec!["nomatch".into()]);
    let Err(err) = ostinato_bench::run(&c) else { panic!("a filter matching no row must be refused") };
    let err = err.to_string();
    assert!(err.starts_with("filter: nomatch matches no row"), "{err}");
    assert!(!out.exists(), "nothing is written");
}

/// The host matrix's report names the Vulkan device `ostinato devices` lists (it opens it whatever the
/// matrix), and `--arms` runs the Vulkan arms in the host matrix on it, every sample checked.
#[test]
fn the_host_report_names_the_vulkan_device_and_runs_its_arms_when_asked() {
    let Ok(ctx) = ostinato_vulkan::Context::open() else {
        ostinato_testkit::skip("SKIP the_host_report_names_the_vulkan_device_and_runs_its_arms_when_asked: no Vulkan device");
        return;
    };
    let out = std::env::temp_dir().join(format!("ostinato-bench-vk-{}", std::process::id()));
    let args = host_config(&out, |c| brief(c, "grid/serial/n1/"));
    ostinato_bench::run(&args).expect("host bench runs");
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(!report.contains("Vulkan arm device: none found") && report.contains(&format!("Vulkan arm device: {}", ctx.name)), "{report}");
    let mut args = host_config(&out, |c| brief(c, "grid/serial/n1/"));
    args.arms = Some(
        ["ostinato-host", "vulkan", "ostinato-vulkan", "ostinato-vulkan-barrier", "ostinato-vulkan-timeline", "ostinato-vulkan-events"]
            .map(String::from)
            .to_vec(),
    );
    let rows = ostinato_bench::run(&args).expect("host bench with the Vulkan arms runs");
    let arms: Vec<&str> = rows[0].arms.iter().filter(|a| a.ok && a.skipped.is_none() && !a.samples.is_empty()).map(|a| a.arm).collect();
    assert_eq!(
        arms,
        ["ostinato-host", "vulkan", "ostinato-vulkan", "ostinato-vulkan-barrier", "ostinato-vulkan-timeline", "ostinato-vulkan-events"],
        "{rows:?}"
    );
    check(&out.join("results.json"));
}

#[test]
fn a_run_past_its_time_limit_reports_the_rows_it_did_not_begin_and_writes_its_report() {
    let out = std::env::temp_dir().join(format!("ostinato-bench-limit-{}", std::process::id()));
    // At 0 s no row begins: every row is in the report, every arm skipped with the limit named.
    let args = host_config(&out, |c| {
        brief(c, "grid/serial/n1/,fan/");
        c.time_limit_s = Some(0.0);
    });
    let rows = ostinato_bench::run(&args).expect("a run stopped by its time limit still succeeds");
    assert!(rows.len() > 1 && rows.iter().all(|r| r.ok && r.arms.iter().all(|a| a.samples.is_empty())));
    let why = "not run: the time limit (0 s) was reached before the row began";
    assert!(rows.iter().all(|r| r.arms.iter().all(|a| a.skipped.as_deref() == Some(why))), "{:?}", rows[0].arms[0].skipped);
    check(&out.join("results.json"));
    assert!(ostinato_bench::report::headline(BenchBackend::Host, &rows)
        .starts_with(&format!("{n} rows, 0 failed (an arm's error or an oracle mismatch); {n} not run (the time limit)", n = rows.len())));
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(report.contains(&format!("- grid/serial/n1/b1 / ostinato-host: {why}")), "{report}");
    // A limit the run stays inside changes nothing.
    let args = host_config(&out, |c| {
        brief(c, "grid/serial/n1/");
        c.time_limit_s = Some(3600.0);
    });
    assert!(ostinato_bench::run(&args).unwrap().iter().all(|r| r.arms.iter().all(|a| a.skipped.is_none() && !a.samples.is_empty())));
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let args = host_config(&out, |c| c.time_limit_s = Some(bad));
        assert!(matches!(ostinato_bench::run(&args), Err(ostinato_bench::BenchError::Config { setting: "time-limit", .. })), "{bad}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A matrix run in parts is reported as one: every part's rows ranked together, a row a part's time
/// limit left taken from the part that ran it, and the parts that are not one matrix refused, naming
/// the file and what differs.
#[test]
fn runs_in_parts_merge_into_one_report_and_runs_that_are_not_one_matrix_are_refused() {
    use ostinato_bench::merge::merge;
    use ostinato_bench::BenchError;
    let base = std::env::temp_dir().join(format!("ostinato-bench-merge-{}", std::process::id()));
    let part = |name: &str, f: &dyn Fn(&mut BenchConfig)| {
        let out = base.join(name);
        let args = host_config(&out, |c| f(c));
        ostinato_bench::run(&args).expect("host bench runs");
        out
    };
    let grid = part("grid", &|c| brief(c, "grid/serial/n1/"));
    let fan = part("fan", &|c| brief(c, "fan/"));
    // A run under a limit of 0 s begins no row: all of them are reported not run.
    let limited = part("limited", &|c| {
        brief(c, "grid/serial/n1/,fan/");
        c.time_limit_s = Some(0.0);
    });
    let whole = base.join("whole");
    let rows = merge(&[limited.clone(), grid.clone(), fan.join("results.json")], &whole).expect("the parts merge");
    let ran = |r: &ostinato_bench::RowResult| r.arms.iter().all(|a| a.skipped.is_none() && !a.samples.is_empty());
    assert!(rows.len() > 1 && rows.iter().all(ran), "each row the limited run left is taken from the part that ran it: {rows:?}");
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert!(ids.contains(&"grid/serial/n1/b1") && ids.iter().any(|i| i.starts_with("fan/")), "{ids:?}");
    let v = check(&whole.join("results.json"));
    assert_eq!(v["parts"].as_array().map(Vec::len), Some(3), "the merged file lists each part's provenance");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(rows.len()));
    let report = std::fs::read_to_string(whole.join("REPORT.md")).unwrap();
    assert!(report.contains("Merged from 3 runs of one build"), "{report}");
    assert!((1..=3).all(|i| report.contains(&format!("- run {i}: made by `"))), "each run's command, build and machine: {report}");
    let all = v["summary"].as_array().unwrap().iter().find(|c| c["family"] == "all" && c["versus"] == "host-serial").expect("an overall row");
    assert_eq!(all["rows"].as_u64(), Some(rows.len() as u64), "the headline ranks every row of every part");

    // A traced step's files lie beside its run's report: the merged report's links hold. A name
    // that is not a plain file name is not followed.
    let traced = common::edited_results(&base, &fan, "traced.json", &|v| {
        let step = serde_json::json!({"json": "t.trace.json", "svg": "sub/t.trace.svg", "bars": 1, "programmatic_edges": 0, "step_us": [1.0],
            "sum_us": [1.0], "busy_us": [1.0], "idle_us": [0.0], "gaps": [0], "longest_gap_us": 0.0, "critical_bars": 1, "untraced_step_us": 1.0,
            "handovers": []});
        v["rows"][0]["timeline"] = serde_json::json!({ "Ok": step });
    });
    std::fs::write(base.join("t.trace.json"), "{}").unwrap();
    std::fs::create_dir_all(base.join("sub")).unwrap();
    std::fs::write(base.join("sub/t.trace.svg"), "<svg/>").unwrap();
    merge(&[grid.clone(), traced], &base.join("traced")).expect("the parts merge");
    assert!(base.join("traced/t.trace.json").is_file() && !base.join("traced/sub").exists());

    let refused = |parts: &[std::path::PathBuf]| match merge(parts, &base.join("refused")) {
        Err(BenchError::Merge { path, reason }) => format!("{path}: {reason}"),
        other => panic!("{parts:?} must be refused, got {other:?}"),
    };
    // A row measured in two parts: which to rank is not clear.
    let twice = refused(&[grid.clone(), grid.clone()]);
    assert!(twice.contains("row `grid/serial/n1/b1` is measured here and in"), "{twice}");
    // Another protocol, another build, another schema, not a results file at all.
    let once = part("once", &|c| {
        brief(c, "decode");
        c.instances = 1;
    });
    assert!(refused(&[grid.clone(), once]).contains("protocol"));
    let edited = |name: &str, edit: &dyn Fn(&mut Value)| common::edited_results(&base, &fan, name, edit);
    let other_build = edited("other-build.json", &|v| v["provenance"]["build_commit"] = "0000000".into());
    let msg = refused(&[grid.clone(), other_build.clone()]);
    assert!(msg.starts_with(&other_build.display().to_string()) && msg.contains("build (commit, dirty)"), "{msg}");
    assert!(refused(&[edited("v1.json", &|v| v["schema_version"] = 1.into())]).contains("schema version 1, where this build reads 2"));
    assert!(refused(&[edited("unknown-arm.json", &|v| v["rows"][0]["arms"][0]["arm"] = "warp-drive".into())]).contains("`warp-drive` is not an arm"));
    std::fs::write(base.join("not.json"), "rows: none").unwrap();
    assert!(refused(&[base.join("not.json")]).contains("not a results.json of `ostinato bench`"));
    assert!(matches!(merge(&[base.join("missing")], &base.join("refused")), Err(BenchError::Io { .. })));
    assert!(matches!(merge(&[], &base.join("refused")), Err(BenchError::Config { setting: "merge", .. })));
    assert!(!base.join("refused").exists(), "a refused merge writes nothing");
    let _ = std::fs::remove_dir_all(&base);
}
