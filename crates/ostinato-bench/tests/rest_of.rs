//! `ostinato bench --rest-of RUN` on the host matrix: exactly the rows an earlier run left not run
//! under its time limit are measured, with its arms, and the two merge into the whole; an earlier run
//! that would not merge with this one is refused before anything is measured, naming its file.

mod common;

use std::path::Path;

use ostinato_bench::merge::merge;
use ostinato_bench::{BenchBackend, BenchConfig, BenchError, RowResult};
use serde_json::Value;

/// A short host run writing to `out`: rows of `filter` (none: every row the config picks), one
/// warm-up and one timed sample an arm, with `f` applied.
fn config(out: &Path, filter: &str, f: impl FnOnce(&mut BenchConfig)) -> BenchConfig {
    let mut c = BenchConfig {
        backend: Some(BenchBackend::Host),
        quick: true,
        out: out.to_path_buf(),
        filter: filter.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect(),
        samples: 1,
        warmups: 1,
        warmup_ms: 0,
        ..BenchConfig::default()
    };
    f(&mut c);
    c
}

fn ran(r: &RowResult) -> bool {
    r.arms.iter().all(|a| a.skipped.is_none() && !a.samples.is_empty())
}

/// Marks row `i` of a results file as a time limit leaves it: every arm skipped, no samples.
fn left_not_run(v: &mut Value, i: usize) {
    for arm in v["rows"][i]["arms"].as_array_mut().unwrap() {
        arm["skipped"] = "not run: the time limit (5 s) was reached before the row began".into();
        arm["samples"] = serde_json::json!([]);
    }
}

#[test]
fn the_rest_of_a_run_measures_exactly_the_rows_it_left_with_its_arms_and_the_two_merge() {
    let base = std::env::temp_dir().join(format!("ostinato-bench-rest-{}", std::process::id()));
    let run = |name: &str, filter: &str, f: &dyn Fn(&mut BenchConfig)| {
        let out = base.join(name);
        ostinato_bench::run(&config(&out, filter, f)).map(|rows| (out, rows))
    };
    // At 0 s a run begins no row: its rest is every row, measured with its arms.
    let (limited, left) = run("limited", "grid/serial/n1/,fan/", &|c| {
        c.time_limit_s = Some(0.0);
        c.arms = Some(vec!["ostinato-host".into()]);
    })
    .expect("a run under a limit writes its report");
    assert!(left.len() > 1 && !left.iter().any(ran));
    let (rest, rows) = run("rest", "", &|c| c.rest_of = Some(limited.clone())).expect("the rest runs");
    let ids = |rows: &[RowResult]| rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&rows), ids(&left), "exactly the rows left, in the matrix's order");
    assert!(rows.iter().all(ran));
    let arms: Vec<Vec<&str>> = rows.iter().map(|r| r.arms.iter().map(|a| a.arm).collect()).collect();
    assert!(arms.iter().all(|a| a == &["ostinato-host"]), "the earlier run's arms, not the default two: {arms:?}");
    let whole = merge(&[limited.clone(), rest.clone()], &base.join("whole")).expect("the two merge");
    assert!(whole.len() == left.len() && whole.iter().all(ran));

    // A run that measured some rows and left one: only that row, though another row's id begins
    // with the same text.
    let (partial, measured) = run("partial", "grid/serial/n1/,grid/serial/n50/,grid/indep/n1/", &|_| {}).expect("host bench runs");
    let i = measured.iter().position(|r| r.id == "grid/serial/n1/b1").expect("the row");
    let one = base.join("one");
    std::fs::create_dir_all(&one).unwrap();
    common::edited_results(&one, &partial, "results.json", &|v| left_not_run(v, i));
    let (_, rows) = run("one-rest", "", &|c| c.rest_of = Some(one.clone())).expect("the rest runs");
    assert_eq!(ids(&rows), ["grid/serial/n1/b1"]);
    assert!(ran(&rows[0]) && rows[0].arms.len() == measured[i].arms.len(), "with the earlier run's arms");
    // --arms given: those arms instead.
    let (_, rows) = run("one-arms", "", &|c| {
        c.rest_of = Some(one.clone());
        c.arms = Some(vec!["ostinato-host".into()]);
    })
    .expect("the rest runs");
    assert_eq!(rows[0].arms.iter().map(|a| a.arm).collect::<Vec<_>>(), ["ostinato-host"]);

    // Refused before anything is measured, naming the earlier run's file.
    let refused = |name: &str, earlier: &Path, f: &dyn Fn(&mut BenchConfig)| -> String {
        let out = base.join(name);
        let args = config(&out, "", |c| {
            c.rest_of = Some(earlier.to_path_buf());
            f(c);
        });
        let msg = match ostinato_bench::run(&args) {
            Err(BenchError::Merge { path, reason }) => format!("{path}: {reason}"),
            other => panic!("{name} must be refused, got {:?}", other.map(|r| r.len())),
        };
        assert!(!out.exists(), "{name}: a refused rest run writes nothing");
        msg
    };
    let msg = refused("nothing-left", &partial, &|_| {});
    assert!(msg.starts_with(&partial.join("results.json").display().to_string()) && msg.contains("left no row not run"), "{msg}");
    assert!(refused("protocol", &one, &|c| c.instances = 1).contains("another protocol"));
    assert!(refused("quick", &one, &|c| c.quick = false).contains("--quick true, this one false"));
    let dir = |name: &str, edit: &dyn Fn(&mut Value)| {
        let d = base.join(name);
        std::fs::create_dir_all(&d).unwrap();
        common::edited_results(&d, &one, "results.json", edit);
        d
    };
    let build = dir("other-build", &|v| v["provenance"]["build_commit"] = "0000000".into());
    assert!(refused("build", &build, &|_| {}).contains("a run of build 0000000"));
    let cuda = dir("cuda-run", &|v| v["provenance"]["backend"] = "cuda".into());
    assert!(refused("backend", &cuda, &|_| {}).contains("a run on the Cuda backend; this one would run on Host"));
    let gone = dir("gone-row", &|v| v["rows"][i]["id"] = "grid/serial/n1/b999".into());
    assert!(refused("gone", &gone, &|_| {}).contains("its rows grid/serial/n1/b999 are not rows of the matrix"));
    let args = config(&base.join("filtered"), "grid", |c| c.rest_of = Some(one.clone()));
    assert!(matches!(ostinato_bench::run(&args), Err(BenchError::Config { setting: "rest-of", .. })));
    let args = config(&base.join("missing"), "", |c| c.rest_of = Some(base.join("no-such-run")));
    assert!(matches!(ostinato_bench::run(&args), Err(BenchError::Io { .. })));
    let _ = std::fs::remove_dir_all(&base);
}
