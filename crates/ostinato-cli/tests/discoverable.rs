//! What a newcomer on a machine without a GPU meets: the README's commands work or say which option
//! does (`kernels` picks a backend whose code can be read here, `--backend hsa` without ROCr names
//! `--simulate`), `--help` shows the options and values the errors would otherwise be the only place
//! to learn (`--simulate`, the bench's arm names), and the HSA backend this build has is read, not
//! called missing.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

fn run(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(repo()).output().expect("binary runs");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Whether CUDA code can be compiled here (NVRTC or a driver found): then `kernels` reads CUDA's.
fn cuda_code_readable() -> bool {
    ostinato_runtime::ostinato_cuda_code::nvrtc::version().is_ok() || ostinato_runtime::ostinato_cuda::driver_available()
}

#[test]
fn kernels_as_the_readme_shows_it_reads_a_backend_this_machine_has() {
    let (ok, out, err) = run(&["kernels", "examples/mix.toml"]);
    assert!(ok, "`ostinato kernels examples/mix.toml` must work on any machine: {err}");
    assert!(out.starts_with("kernel `mix` ("), "{out}");
    if cuda_code_readable() {
        assert!(out.contains("(cuda, entry `mix`)"), "CUDA where its code can be read: {out}");
    } else {
        assert!(out.contains("(vulkan, entry `main`)"), "{out}");
        assert!(err.contains("note: no --backend given, so the vulkan manifests; the CUDA ones need NVRTC or a CUDA driver"), "{err}");
    }
    // `--json` keeps stdout one JSON array whatever the note says.
    let (ok, out, err) = run(&["kernels", "examples/mix.toml", "--json"]);
    assert!(ok, "{err}");
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok_and(|v| v.as_array().is_some_and(|a| a.len() == 1)), "{out}");
}

#[test]
fn the_hsa_backend_of_this_build_is_read_by_kernels_and_plan_explain() {
    let (ok, out, err) = run(&["kernels", "examples/mix.toml", "--backend", "hsa"]);
    assert!(ok, "{err}");
    assert!(out.contains("kernel `mix` (hsa, entry `mix`)") && out.contains("gfx1100 code object"), "{out}");
    assert!(out.contains("param inp: declared read (checked), code read"), "the metadata's `.actual_access read_only`: {out}");
    assert!(out.contains("note: param out: declared read_write; the metadata proves no narrower access"), "{out}");
    let (ok, out, err) = run(&["kernels", "examples/own_kernel.toml", "--backend", "hsa"]);
    assert!(ok && out.contains("source examples/kernels/user_mix.hsaco"), "{out}{err}");
    for f in ["examples/mix.toml", "examples/own_kernel.toml"] {
        let (ok, out, err) = run(&["plan", f, "--explain"]);
        assert!(ok, "{f}: {err}");
        assert!(!out.contains("this build has no hsa backend") && !out.contains("the hsa code was not read"), "{f}: {out}");
    }
}

#[test]
fn a_code_object_that_does_not_fit_its_signature_is_refused_by_plan_explain_as_by_binding() {
    // The user's `user_mix` code object only reads `inp` (`.actual_access read_only`): declared
    // `write`, binding refuses it (`codeobject::check_signature`), and `plan --explain` says so too.
    let dir = std::env::temp_dir().join(format!("ostinato-hsa-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = std::fs::read_to_string(repo().join("examples/own_kernel.toml")).unwrap();
    let text = own
        .replace(
            "{ name = \"out\", access = \"infer\" }, { name = \"inp\", access = \"infer\" }",
            "{ name = \"out\", access = \"read_write\" }, { name = \"inp\", access = \"write\" }",
        )
        .replace("host = \"builtin:mix\"", "")
        .replace("cuda = \"", "# cuda = \"")
        .replace("kernels/user_mix", &format!("{}/examples/kernels/user_mix", repo().display()));
    assert!(text.contains("access = \"write\""), "the example's declaration is where this test expects it");
    let g = dir.join("g.toml");
    std::fs::write(&g, text).unwrap();
    let want = "declared `write`, but the compiler found the kernel only reads it";
    let (ok, _, err) = run(&["plan", g.to_str().unwrap(), "--explain"]);
    assert!(!ok && err.contains("hsa implementation") && err.contains("param `inp`") && err.contains(want), "{err}");
    // Binding it (on the simulated packet processor, which needs no twin to bind).
    use ostinato_runtime::{BackendSpec, Session};
    let (f, _) = ostinato_runtime::kernels::load_file(&g).unwrap();
    let plan = ostinato::Plan::compile(&f.graph).unwrap();
    let session = Session::open(&BackendSpec::Hsa { device: None, simulate: Some(1), wait_timeout: None }).unwrap();
    let refs = |k: usize| Ok(f.kernel_ref(k, "hsa")?.clone());
    let err = session.instantiate(&plan, &refs).err().expect("binding refuses it").to_string();
    assert!(err.contains(want), "binding says the same: {err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn help_shows_simulate_and_every_bench_arm() {
    let (ok, out, _) = run(&["run", "--help"]);
    assert!(ok && out.contains("--simulate [<SEED>]") && out.contains("simulated AQL packet processor"), "{out}");
    let (ok, out, _) = run(&["bench", "--help"]);
    assert!(ok, "{out}");
    use ostinato_bench::arms::ArmKind;
    for arm in ArmKind::CUDA.iter().chain(&ArmKind::HOST_SELECTABLE) {
        assert!(out.contains(arm.name()), "`bench --help` must name the arm `{}`: {out}", arm.name());
    }
    assert!(out.contains("(main: ostinato)") && out.contains("(main: ostinato-host"), "{out}");
}

#[test]
fn hsa_without_rocr_names_simulate() {
    if ostinato_runtime::ostinato_hsa::rocr::Rocr::load().is_ok() {
        eprintln!("SKIP hsa_without_rocr_names_simulate: ROCr is installed here");
        return;
    }
    let (ok, _, err) = run(&["run", "examples/mix.toml", "--backend", "hsa"]);
    assert!(!ok && err.contains("no HSA runtime found") && err.contains("`--simulate` runs the same AQL lowering"), "{err}");
    let (ok, out, err) = run(&["run", "examples/mix.toml", "--backend", "hsa", "--simulate", "--check"]);
    assert!(ok && out.contains("check passed"), "the option it names works: {out}{err}");
}
