//! The `ostinato` binary as a user meets it: plan/run on the example graphs, bad input exits non-zero
//! with a message naming the file and line, and `devices` never fails.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ostinato"))
}

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

fn run(args: &[&str]) -> (bool, String, String) {
    let o = bin().args(args).current_dir(repo()).output().expect("binary runs");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn plan_json_has_nodes_edges_hazards_and_lanes() {
    let (ok, out, err) = run(&["plan", "examples/mix.toml", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(v["nodes"], 5);
    assert_eq!(v["edges"], serde_json::json!([[0, 2], [1, 2], [2, 3], [2, 4]]));
    assert_eq!(v["hazards"][3], serde_json::json!(["WAR"]));
    assert!(v["lanes"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn plan_cuda_shows_the_submission_without_a_gpu() {
    let (ok, out, err) = run(&["plan", "examples/add_one_serial_941.toml", "--cuda"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("programmatic").count(), 940, "a 1-block chain: every edge programmatic under auto");
    assert!(out.contains("kernel n0 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&x+0, 256) [pdl-early]"), "{out}");
    let (ok, out, _) = run(&["plan", "examples/add_one_serial_941.toml", "--cuda", "--pdl", "off"]);
    assert!(ok && !out.contains("programmatic") && !out.contains("[pdl"));
    assert!(out.starts_with("examples/add_one_serial_941.toml: 941 nodes") && out.contains("\nshape plan\n"), "{out}");
}

#[test]
fn a_users_own_kernel_gets_full_edges_in() {
    let (ok, out, err) = run(&["plan", "examples/own_kernel.toml", "--cuda"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("[pdl-early]").count(), 5, "every built-in runs the submission's one build, also those feeding user_mix: {out}");
    assert!(out.contains("kernel n3 add_one<<<[1, 1, 1],[256, 1, 1],0>>>(&a+0, 256) [pdl-early]\n"), "{out}");
    assert!(out.contains("(&b+0, &a+0, 256, 256, 5)\n"), "user_mix runs its one build, no label: {out}");
    assert!(out.contains("edge n3 -> n4\n") && out.contains("edge n5 -> n6\n"), "edges into user_mix are full: {out}");
    assert!(out.contains("edge n4 -> n5 programmatic\n"), "out of it they may be programmatic: {out}");
    let (ok, out, err) = run(&["run", "examples/own_kernel.toml", "--backend", "host", "--replays", "3", "--check"]);
    assert!(ok && out.contains("check passed"), "{out}{err}");
    // The fusion example's kernel reference carries `fusable` to the CUDA backend; the host runs it as is.
    let (ok, out, err) = run(&["run", "examples/fused_chain.toml", "--backend", "host", "--replays", "2", "--check"]);
    assert!(ok && out.contains("64 nodes, 63 edges") && out.contains("check passed"), "{out}{err}");
    // Ten independent launches (one kernel side by side on CUDA); the host runs them as they are.
    let (ok, out, err) = run(&["run", "examples/side_by_side.toml", "--backend", "host", "--replays", "3", "--check"]);
    assert!(ok && out.contains("10 nodes, 0 edges") && out.contains("check passed"), "{out}{err}");
    // Sixteen independent launches of a kernel with block barriers (two kernels side by side on CUDA).
    let (ok, out, err) = run(&["run", "examples/side_by_side_barrier.toml", "--backend", "host", "--replays", "3", "--check"]);
    assert!(ok && out.contains("16 nodes, 0 edges") && out.contains("check passed"), "{out}{err}");
    // Two devices and an all-reduce: the host runs it (the oracle), x0 = 3 and x1 = 4 after it.
    let (ok, out, err) = run(&["run", "examples/two_devices.toml", "--backend", "host", "--check"]);
    assert!(ok && out.contains("5 nodes, 4 edges") && out.contains("check passed"), "{out}{err}");
    let (ok, out, err) = run(&["plan", "examples/two_devices.toml", "--explain"]);
    assert!(ok && out.contains("node 0 (add_one) -> node 3 (all_reduce over 2 ranks): RAW+WAR+WAW"), "{out}{err}");
    let (ok, out, err) = run(&["plan", "examples/two_devices.toml", "--cuda"]);
    assert!(ok && out.contains("collective n3 all_reduce f32 over 2 ranks (NCCL)\n") && out.contains("edge n2 -> n3\n"), "full edges into it: {out}{err}");
    let (ok, _, err) = run(&["run", "examples/fused_chain.toml", "--backend", "cuda", "--fusion", "sometimes"]);
    assert!(!ok && err.contains("invalid value 'sometimes' for '--fusion <FUSION>'") && err.contains("auto, on, off"), "{err}");
}

#[test]
fn bench_refuses_bad_lists_and_names_the_option() {
    for (args, want) in [
        (["--fans", "4,0"], "fans: positive consumer counts"),
        (["--blocks", "1,x"], "invalid value 'x' for '--blocks <BLOCKS>'"),
        (["--graph-shape", "tree"], "invalid value 'tree' for '--graph-shape <GRAPH_SHAPE>'\n  [possible values: auto, plan, lanes]"),
        (["--pdl-mixed-builds", "some"], "invalid value 'some' for '--pdl-mixed-builds [<PDL_MIXED_BUILDS>]'\n  [possible values: off, plain, early, all]"),
        (["--graph-build", "tree"], "[possible values: bulk, in-order, capture]"),
        (["--priority", "urgent"], "invalid value 'urgent' for '--priority <PRIORITY>'\n  [possible values: default, high]"),
        (["--regime", "mixed"], "invalid value 'mixed' for '--regime <REGIME>'\n  [possible values: fresh, multi-stream]"),
        (["--trigger", "late"], "[possible values: after-wait, entry, after-writes, never, disabled]"),
        (["--regime", "multi-stream"], "regime: multi-stream is a state of the CUDA driver; the host backend has none"),
        (["--offsets", "0,100"], "offsets: 100: a multiple of 256 of at most 1 GiB"),
        (["--offsets", "18446744073709551360"], "offsets: 18446744073709551360: a multiple of 256 of at most 1 GiB"),
        (["--offsets", "4096"], "offsets: places CUDA device buffers"),
        (["--arms", "ostinato-host,eager"], "arms: `eager` is not an arm of this backend (host-serial, ostinato-host, vulkan, ostinato-vulkan,"),
        (["--arms", "host-serial"], "arms: `ostinato-host` must be among them"),
        (["--replays", "0"], "replays: 0: between 1 and 1000"),
        (["--tune-edge-types", "median"], "tune-edge-types: a rule of the CUDA exec's measurement of its submissions; the host backend measures none"),
        (["--tune-edge-types", "mean"], "invalid value 'mean' for '--tune-edge-types <TUNE_EDGE_TYPES>'\n  [possible values: quartiles, median]"),
        (["--instances", "0"], "instances: 0: between 1 and 16 instances of each arm"),
        (["--instances", "17"], "instances: 17: between 1 and 16 instances of each arm"),
        (["--filter", "nomatch"], "filter: nomatch matches no row"),
        (["--rest-of", "no-such-run"], "no-such-run: No such file"),
    ] {
        let (ok, _, err) = run(&["bench", "--backend", "host", "--quick", args[0], args[1]]);
        assert!(!ok && err.contains(want) && !err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn run_check_and_dump_on_the_host() {
    let dir = std::env::temp_dir().join(format!("ostinato-cli-dump-{}", std::process::id()));
    let (ok, out, err) = run(&["run", "examples/mix.toml", "--backend", "host", "--replays", "4", "--check", "--dump", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("check passed"), "{out}");
    assert_eq!(std::fs::read(dir.join("a.bin")).unwrap().len(), 4096);
    assert_eq!(std::fs::read(dir.join("b.bin")).unwrap().len(), 1024);
    let _ = std::fs::remove_dir_all(dir);
    let (ok, out, err) = run(&["run", "examples/add_one_serial_941.toml", "--replays", "2", "--check", "--threads", "2"]);
    assert!(ok && out.contains("941 nodes, 940 edges"), "{out}{err}");
}

#[test]
fn bad_input_exits_non_zero_with_file_and_line() {
    let bad = std::env::temp_dir().join(format!("ostinato-bad-{}.toml", std::process::id()));
    std::fs::write(&bad, "[[buffer]]\nname = \"a\"\nsize = 16\n\n[[kernel]]\nname = \"k\"\nparams = [{ name = \"x\" }]\n").unwrap();
    let (ok, _, err) = run(&["plan", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(&format!("{}:5: kernel `k` param `x`: declare `access`", bad.display())), "{err}");
    assert!(!err.contains("panicked"));
    let (ok, _, err) = run(&["run", "/nonexistent/graph.toml"]);
    assert!(!ok && err.contains("cannot read"), "{err}");
    let (ok, _, err) = run(&["run", "examples/mix.toml", "--backend", "host", "--dot", "/tmp/never-written.dot"]);
    assert!(!ok && err.contains("--dot writes a CUDA graph: it needs --backend cuda in graph mode"), "{err}");
    let _ = std::fs::remove_file(bad);
}

#[test]
fn devices_reports_each_backend_and_succeeds() {
    let (ok, out, err) = run(&["devices"]);
    assert!(ok, "{err}");
    assert!(out.contains("host:"), "{out}");
    assert!(out.contains("cuda"), "{out}");
    if !ostinato_runtime::ostinato_cuda::driver_available() {
        assert!(out.contains("cuda: no CUDA driver found"), "{out}");
        let (ok, _, err) = run(&["run", "examples/mix.toml", "--backend", "cuda"]);
        assert!(!ok && err.contains("no CUDA driver found"), "{err}");
    }
}

/// `ostinato plan ... | head`: a reader that stops early closes the pipe; the command ends quietly and
/// successfully instead of panicking on the write.
#[test]
fn a_reader_that_closes_the_pipe_early_is_not_an_error() {
    use std::io::Read;
    let mut child = bin()
        .args(["plan", "examples/add_one_serial_941.toml", "--cuda", "--explain"])
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut first = [0u8; 64];
    child.stdout.take().expect("piped").read_exact(&mut first).expect("some output"); // then the pipe closes
    let out = child.wait_with_output().expect("exits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(first.starts_with(b"examples/add_one_serial_941.toml"), "{}", String::from_utf8_lossy(&first));
    assert!(out.status.success() && !err.contains("panicked"), "{:?}: {err}", out.status);
}

/// `run --trace --trace-svg --check`: the traced replays pass the check and both files are written;
/// on a backend that cannot time nodes (the HSA backend, here on its simulator) a clear error, no
/// panic, nothing written.
#[test]
fn run_with_a_trace_writes_json_and_svg_and_passes_its_check() {
    let dir = std::env::temp_dir().join(format!("ostinato-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, svg) = (dir.join("mix.json"), dir.join("mix.svg"));
    let (ok, out, err) =
        run(&["run", "examples/mix.toml", "--replays", "3", "--check", "--trace", json.to_str().unwrap(), "--trace-svg", svg.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("check passed") && out.contains("trace: replay 2:"), "{out}");
    let parsed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(parsed["traceEvents"].as_array().is_some_and(|e| e.iter().filter(|e| e["cat"] == "node").count() == 15));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let refused = dir.join("hsa.json");
    let (ok, _, err) = run(&["run", "examples/mix.toml", "--backend", "hsa", "--simulate", "--trace", refused.to_str().unwrap()]);
    assert!(!ok && err.contains("cannot time dispatches") && !err.contains("panicked"), "{err}");
    assert!(!refused.exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// `plan --explain` names each mapped param of a kernel once, however many nodes map it: a WGSL kernel
/// with two mapped params launched three times.
#[test]
fn plan_explain_lists_each_mapped_param_once() {
    let dir = std::env::temp_dir().join(format!("ostinato-cli-pair-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(
        dir.join("kernels/pair.wgsl"),
        "struct Params { n: u32 }\n@group(0) @binding(0) var<storage, read> x: array<f32>;\n@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
         var<immediate> p: Params;\n@compute @workgroup_size(256)\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {\n    let i = wid.x * 256u + l.x;\n\
         \x20   if (i < p.n) { y[i] = y[i] + x[i]; }\n}\n",
    )
    .unwrap();
    let map = "tile = { stride = [1024], len = 1024 }";
    std::fs::write(
        dir.join("pair.toml"),
        format!(
            "[[buffer]]\nname = \"x\"\nsize = 131072\ninit = \"zero\"\n\n[[buffer]]\nname = \"y\"\nsize = 131072\ninit = \"zero\"\n\n\
             [[kernel]]\nname = \"pair\"\nparams = [{{ name = \"x\", access = \"read\", {map} }}, {{ name = \"y\", access = \"read_write\", {map} }}, {{ name = \"n\", scalar = \"u32\" }}]\n\
             vulkan = {{ source = \"kernels/pair.wgsl\", entry = \"main\" }}\n\n\
             [[node]]\nkernel = \"pair\"\ngrid = [128]\nblock = [256]\nargs = {{ x = \"x\", y = \"y\", n = 32768 }}\nrepeat = 3\n"
        ),
    )
    .unwrap();
    let o = bin().args(["plan", "pair.toml", "--explain"]).current_dir(&dir).output().expect("binary runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for p in ["x", "y"] {
        let line = format!("kernel `pair` param `{p}` (vulkan): 3 tile maps kept (3 verified from the code)");
        assert_eq!(out.matches(&line).count(), 1, "{line}\n{out}");
    }
}

/// A user's WGSL kernel with a declared tile map: on Vulkan the map is verified from the shader, so the
/// 64-launch chain is one dispatch, equal to the host oracle; a copy of the kernel that also touches
/// the next workgroup's words keeps the result right (64 dispatches) and the run says why the map was
/// not kept, naming the kernel and the line. `plan --explain` says the same without a device; the
/// runs skip without one.
#[test]
fn a_user_wgsl_chain_fuses_on_maps_verified_from_its_code_and_says_why_not_otherwise() {
    // Without a device: the plan's explanation says how the Vulkan backend takes the maps.
    let (ok, out, err) = run(&["plan", "examples/tiled_user_chain.toml", "--explain"]);
    assert!(ok, "{err}");
    assert!(out.contains("kernel `add_one` param `x` (vulkan): 64 tile maps kept (64 verified from the code)"), "{out}");
    let dir = std::env::temp_dir().join(format!("ostinato-cli-tiles-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    let kernel = std::fs::read_to_string(repo().join("examples/kernels/user_add_one.wgsl")).unwrap();
    let reaching = kernel.replace("x[i] = x[i] + 1.0;", "x[i] = x[i] + 1.0;\n        if (i + 256u < p.n) { x[i + 256u] = x[i + 256u]; }");
    assert_ne!(kernel, reaching);
    std::fs::write(dir.join("kernels/user_add_one.wgsl"), reaching).unwrap();
    std::fs::copy(repo().join("examples/tiled_user_chain.toml"), dir.join("chain.toml")).unwrap();
    let o = bin().args(["plan", "chain.toml", "--explain"]).current_dir(&dir).output().expect("binary runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "kernel `add_one` param `x` (vulkan): 64 tile maps not kept, those nodes order as wholes there (node 0: kernel `add_one`, the access at line 13"
        ),
        "{out}"
    );
    if ostinato_runtime::ostinato_vulkan::Context::open_matching(None).is_err() {
        eprintln!("SKIP the Vulkan runs of a_user_wgsl_chain_fuses_on_maps_verified_from_its_code_and_says_why_not_otherwise: no Vulkan device");
        return;
    }
    let (ok, out, err) = run(&["run", "examples/tiled_user_chain.toml", "--backend", "vulkan", "--check"]);
    assert!(ok, "{err}");
    assert!(out.contains("64 of 64 nodes fused: 1 dispatches per replay") && out.contains("check passed"), "{out}");
    let o = bin().args(["run", "chain.toml", "--backend", "vulkan", "--check"]).current_dir(&dir).output().expect("binary runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.contains("nodes fused") && out.contains("check passed"), "{out}");
    assert!(out.contains("node 0 `x`: tile map not kept") && out.contains("kernel `add_one`, the access at line 13") && out.contains("61 more"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
