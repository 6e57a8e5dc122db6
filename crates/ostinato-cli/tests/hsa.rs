//! `--backend hsa` from the command line: every example graph that has HSA implementations runs on the
//! simulated AQL packet processor, checked against the host oracle, every line of its report saying
//! "simulated"; without ROCr, a clear error naming what was looked for; `devices` says so too.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

fn run(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(repo()).output().expect("binary runs");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The example graph files with an `hsa` implementation for their kernels.
fn hsa_examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.starts_with("hsa ="))))
        .map(|p| format!("examples/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_with_hsa_kernels_passes_the_check_simulated() {
    let examples = hsa_examples();
    assert!(examples.len() >= 4, "{examples:?}");
    let dump = std::env::temp_dir().join(format!("ostinato-hsa-dump-{}", std::process::id()));
    for (i, f) in examples.iter().enumerate() {
        let seed = (1 + i * 7919).to_string();
        let (ok, out, err) = run(&["run", f, "--backend", "hsa", "--simulate", &seed, "--check", "--replays", "2", "--dump", dump.to_str().unwrap()]);
        assert!(ok, "{f}: {err}{out}");
        assert!(out.contains("check passed"), "{f}: {out}");
        for line in out.lines() {
            assert!(line.contains("simulated"), "{f}: a line of the report does not say it is simulated: {line}");
        }
        assert!(!err.contains("panicked"), "{f}: {err}");
    }
    assert!(std::fs::read_dir(&dump).is_ok_and(|d| d.count() > 0), "--dump wrote the buffers");
    let _ = std::fs::remove_dir_all(&dump);
}

#[test]
fn without_rocr_run_and_devices_name_what_was_looked_for() {
    if std::path::Path::new("/opt/rocm/lib/libhsa-runtime64.so.1").exists() {
        eprintln!("hsa cli: skipped: ROCr is installed here");
        return;
    }
    let (ok, out, err) = run(&["run", "examples/mix.toml", "--backend", "hsa"]);
    assert!(!ok, "{out}");
    assert!(err.contains("no HSA runtime found") && err.contains("libhsa-runtime64.so.1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (ok, out, err) = run(&["devices"]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l.starts_with("hsa: no HSA runtime found") && l.contains("libhsa-runtime64.so.1")), "{out}");
}

#[test]
fn simulate_needs_the_hsa_backend_and_a_graph_without_hsa_kernels_is_refused() {
    let (ok, _, err) = run(&["run", "examples/mix.toml", "--backend", "host", "--simulate"]);
    assert!(!ok && err.contains("--backend hsa"), "{err}");
    let (ok, _, err) = run(&["run", "examples/two_devices.toml", "--backend", "hsa", "--simulate"]);
    assert!(!ok && err.contains("no `hsa` implementation"), "{err}");
}
