//! The kernel contract from the command line, no GPU needed (the kernels' code is PTX, read as it is):
//! a declaration the code contradicts is refused by `ostinato plan --cuda` naming the file, the
//! kernel's line, the param and the PTX instruction with its source line; `infer` takes the code's
//! modes; an access the analysis cannot attribute fails closed unless vouched; `ostinato kernels`
//! prints each kernel's manifest.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The access-class fixture of the NVIDIA code analysis (NVRTC's PTX of ostinato-cuda-code's tests/fixtures/access.cu).
const ACCESS_PTX: &str = include_str!("../../ostinato-cuda-code/tests/fixtures/access.ptx");

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

fn run_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(dir).output().expect("binary runs");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A folder holding access.ptx and `graph.toml` (`toml`).
fn case(name: &str, toml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ostinato-contract-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("access.ptx"), ACCESS_PTX).unwrap();
    std::fs::write(dir.join("graph.toml"), toml).unwrap();
    dir
}

/// `kernel` of access.ptx with `params`, run once on `a` (1 KiB) and `b`.
fn graph(kernel: &str, params: &str, args: &str) -> String {
    format!(
        r#"[[buffer]]
name = "a"
size = 1024

[[buffer]]
name = "b"
size = 1024

[[kernel]]
name = "{kernel}"
params = {params}
cuda = "access.ptx"

[[node]]
kernel = "{kernel}"
grid = [1]
block = [256]
args = {args}
"#
    )
}

#[test]
fn a_planted_wrong_declaration_is_refused_with_file_line_and_the_ptx_instruction() {
    // `out` is written by the kernel but declared read.
    let toml = graph(
        "plain_load_store",
        r#"[{ name = "out", access = "read" }, { name = "in", access = "read" }, { name = "n", scalar = "u32" }]"#,
        r#"{ out = "a", in = "b", n = 256 }"#,
    );
    let dir = case("wrong", &toml);
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--cuda"]);
    assert!(!ok, "refused: {out}");
    assert!(err.contains("graph.toml:9:"), "the kernel's line: {err}");
    assert!(err.contains("kernel `plain_load_store` declares param `out` read"), "{err}");
    assert!(err.contains("writes it: `st.global.f32"), "the PTX instruction: {err}");
    assert!(err.contains("access.cu:8"), "its source line (.loc): {err}");
    assert!(err.contains(", access.ptx:"), "its PTX line: {err}");
    // The same declaration with the modes the code has plans; a broader one is shown by --explain.
    let right = toml.replace(r#"{ name = "out", access = "read" }"#, r#"{ name = "out", access = "write" }"#);
    std::fs::write(dir.join("graph.toml"), &right).unwrap();
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--cuda"]);
    assert!(ok, "{err}");
    assert!(out.contains("kernel n0 plain_load_store"), "{out}");
    let broad = toml.replace(r#"{ name = "out", access = "read" }"#, r#"{ name = "out", access = "read_write" }"#);
    std::fs::write(dir.join("graph.toml"), &broad).unwrap();
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--explain"]);
    assert!(ok, "{err}");
    assert!(out.contains("param `out`: declared read_write") && out.contains("shows write") && out.contains("broader than the code"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_declared_write_the_code_reads_is_refused_too() {
    // read_modify_write does x[i] += 1: a declared `write` is contradicted by the load.
    let toml = graph("read_modify_write", r#"[{ name = "x", access = "write" }, { name = "n", scalar = "u32" }]"#, r#"{ x = "a", n = 256 }"#);
    let dir = case("write", &toml);
    let (ok, _, err) = run_in(&dir, &["plan", "graph.toml", "--cuda"]);
    assert!(!ok && err.contains("declares param `x` write") && err.contains("reads it: `ld.global.f32"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn infer_takes_the_codes_modes_and_refuses_what_it_cannot_attribute() {
    let toml = graph(
        "atomics",
        r#"[{ name = "counter", access = "infer" }, { name = "sum", access = "infer" }, { name = "x", access = "infer" }, { name = "n", scalar = "u32" }]"#,
        r#"{ counter = { buffer = "a", len = 4 }, sum = { buffer = "a", offset = 4, len = 4 }, x = "b", n = 256 }"#,
    );
    let dir = case("infer", &toml);
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--explain"]);
    assert!(ok, "{err}");
    for want in ["param `counter`: inferred read_write", "param `sum`: inferred read_write", "param `x`: inferred read"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    // A pointer chased from memory: the analysis cannot tell which buffer it reads.
    let chase = graph(
        "pointer_chase",
        r#"[{ name = "out", access = "infer" }, { name = "table", access = "read" }, { name = "n", scalar = "u32" }]"#,
        r#"{ out = "a", table = "b", n = 256 }"#,
    );
    std::fs::write(dir.join("graph.toml"), &chase).unwrap();
    let (ok, _, err) = run_in(&dir, &["plan", "graph.toml"]);
    assert!(!ok && err.contains("graph.toml:9:") && err.contains("declared `infer`") && err.contains("cannot attribute"), "{err}");
    // Declared `write` it fails closed (the chased load may read `out`)...
    let declared = chase.replace(r#"{ name = "out", access = "infer" }"#, r#"{ name = "out", access = "write" }"#);
    std::fs::write(dir.join("graph.toml"), &declared).unwrap();
    let (ok, _, err) = run_in(&dir, &["plan", "graph.toml", "--cuda"]);
    assert!(!ok && err.contains("param `out`") && err.contains("vouched"), "{err}");
    // ...unless the author vouches for it.
    let vouched = chase.replace(r#"{ name = "out", access = "infer" }"#, r#"{ name = "out", access = "write", vouched = true }"#);
    std::fs::write(dir.join("graph.toml"), &vouched).unwrap();
    let (ok, _, err) = run_in(&dir, &["plan", "graph.toml", "--cuda"]);
    assert!(ok, "{err}");
    // `vouched` vouches for a declared mode only.
    let bad = chase.replace(r#"{ name = "out", access = "infer" }"#, r#"{ name = "out", access = "infer", vouched = true }"#);
    std::fs::write(dir.join("graph.toml"), &bad).unwrap();
    let (ok, _, err) = run_in(&dir, &["plan", "graph.toml"]);
    assert!(!ok && err.contains("graph.toml:9:") && err.contains("`vouched`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn own_kernel_with_inferred_modes_plans_as_declared() {
    let (ok, inferred, err) = run_in(&repo(), &["plan", "examples/own_kernel.toml", "--json"]);
    assert!(ok, "{err}");
    let declared = std::fs::read_to_string(repo().join("examples/own_kernel.toml"))
        .unwrap()
        .replace(r#"{ name = "x", access = "infer" }"#, r#"{ name = "x", access = "read_write" }"#)
        .replace(r#"{ name = "out", access = "infer" }"#, r#"{ name = "out", access = "read_write" }"#)
        .replace(r#"{ name = "inp", access = "infer" }"#, r#"{ name = "inp", access = "read" }"#);
    assert!(!declared.contains("\"infer\""), "every infer replaced");
    let dir = std::env::temp_dir().join(format!("ostinato-contract-own-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join("own.toml"), declared).unwrap();
    std::fs::copy(repo().join("examples/kernels/user_mix.cu"), dir.join("kernels/user_mix.cu")).unwrap();
    let (ok, explicit, err) = run_in(&dir, &["plan", "own.toml", "--json"]);
    assert!(ok, "{err}");
    let (a, b): (serde_json::Value, serde_json::Value) = (serde_json::from_str(&inferred).unwrap(), serde_json::from_str(&explicit).unwrap());
    assert_eq!(a["edges"], b["edges"]);
    assert_eq!(a["fingerprint"], b["fingerprint"], "the same plan, bit for bit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kernels_prints_each_manifest() {
    let toml = graph(
        "plain_load_store",
        r#"[{ name = "out", access = "write" }, { name = "in", access = "read" }, { name = "n", scalar = "u32" }]"#,
        r#"{ out = "a", in = "b", n = 256 }"#,
    );
    let dir = case("kernels", &toml);
    let (ok, out, err) = run_in(&dir, &["kernels", "graph.toml", "--backend", "cuda", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON array");
    let m = &v[0];
    assert_eq!(m["kernel"], "plain_load_store");
    assert_eq!(m["hash"].as_str().map(str::len), Some(64), "a BLAKE3 hash: {m}");
    assert_eq!(m["access"][0]["observed"], "write");
    assert_eq!(m["access"][1]["observed"], "read");
    assert!(m["artifacts"][0]["name"] == "ptx" && m["source"][0]["blake3"].as_str().is_some(), "{m}");
    // The same file, the same hash.
    let (_, again, _) = run_in(&dir, &["kernels", "graph.toml", "--backend", "cuda", "--json"]);
    let w: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(w[0]["hash"], m["hash"]);
    let (ok, out, err) = run_in(&dir, &["kernels", "graph.toml", "--backend", "cuda"]);
    assert!(ok && out.contains("kernel `plain_load_store` (cuda") && out.contains("param out: declared write (checked), code write"), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WGSL kernel that writes through a storage binding outside the signature's layout (`@group(1)`):
/// binding refuses it, and `plan --explain` refuses it with the same words — it does not call the
/// declared write "broader than the code" because the analysis did not see the binding.
#[test]
fn a_wgsl_binding_outside_the_layout_is_refused_by_explain_as_by_binding() {
    let dir = std::env::temp_dir().join(format!("ostinato-contract-group1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k.wgsl"),
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@group(1) @binding(0) var<storage, read_write> y: array<u32>;\n\
         @compute @workgroup_size(64)\nfn one(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = x[i.x]; }\n",
    )
    .unwrap();
    let toml = "[[buffer]]\nname = \"x\"\nsize = 256\n\n[[buffer]]\nname = \"y\"\nsize = 256\n\n[[kernel]]\nname = \"one\"\n\
                params = [{ name = \"x\", access = \"read\" }, { name = \"y\", access = \"write\" }]\nvulkan = \"k.wgsl\"\n\n\
                [[node]]\nkernel = \"one\"\ngrid = [1]\nblock = [64]\nargs = { x = \"x\", y = \"y\" }\n";
    std::fs::write(dir.join("graph.toml"), toml).unwrap();
    let want = "kernel `one`: the shader binds storage buffers [Some((0, 0)), Some((1, 0))] (group, binding) but the signature has 2 buffer params: bindings 0..2 of group 0 expected";
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--explain"]);
    assert!(!ok, "explain must refuse what binding refuses: {out}");
    assert!(err.contains("graph.toml:9: vulkan implementation: ") && err.contains(want), "{err}");
    assert!(!out.contains("broader than the code"), "{out}");
    let (ok, _, err) = run_in(&dir, &["kernels", "graph.toml", "--backend", "vulkan"]);
    assert!(!ok && err.contains(want), "{err}");
    match ostinato_runtime::ostinato_vulkan::Context::open_matching(None) {
        Ok(_) => {
            let (ok, _, err) = run_in(&dir, &["run", "graph.toml", "--backend", "vulkan"]);
            assert!(!ok && err.contains("graph.toml:9: vulkan backend: ") && err.contains(want), "binding: {err}");
        }
        Err(e) => eprintln!("SKIP the binding half of a_wgsl_binding_outside_the_layout_is_refused_by_explain_as_by_binding: {e}"),
    }
    // Within the layout, the same kernel plans and explains.
    std::fs::write(dir.join("k.wgsl"), std::fs::read_to_string(dir.join("k.wgsl")).unwrap().replace("@group(1) @binding(0)", "@group(0) @binding(1)")).unwrap();
    let (ok, out, err) = run_in(&dir, &["plan", "graph.toml", "--explain"]);
    assert!(ok && !out.contains("broader"), "{out}{err}");
    let _ = std::fs::remove_dir_all(dir);
}
