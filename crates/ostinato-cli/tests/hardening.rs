//! Every class of hostile input found by fuzzing the example files ends in a non-zero exit with a
//! message naming what is wrong (file:line, buffer, node, limit) — never a panic (exit 101), an abort
//! (134) or an out-of-memory kill (137).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `ostinato ARGS…` with FILE's text written to a temporary file in place of `{}`.
fn refused(text: &str, args: &[&str], want: &[&str]) {
    let path = std::env::temp_dir().join(format!("ostinato-hard-{}-{:x}.toml", std::process::id(), fnv(text, args)));
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let argv: Vec<&str> = args.iter().map(|a| if *a == "{}" { p } else { a }).collect();
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(&argv).current_dir(repo()).output().expect("binary runs");
    let err = String::from_utf8_lossy(&o.stderr);
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.status.code(), Some(1), "{argv:?} must fail with exit 1 (an error, not a crash): {err}");
    for w in want {
        assert!(err.contains(w), "{argv:?}: the message must contain {w:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

fn fnv(text: &str, args: &[&str]) -> u64 {
    text.bytes().chain(args.iter().flat_map(|a| a.bytes())).fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

const KERNEL: &str = "[[kernel]]\nname = \"add_one\"\nparams = [{ name = \"x\", access = \"read_write\" }, { name = \"n\", scalar = \"u32\" }]\nhost = \"builtin:add_one\"\ncuda = \"builtin:add_one\"\n";

fn one_buffer(size: &str) -> String {
    format!("[[buffer]]\nname = \"x\"\nsize = {size}\n\n{KERNEL}\n[[node]]\nkernel = \"add_one\"\ngrid = [1]\nblock = [256]\nargs = {{ x = \"x\", n = 256 }}\n")
}

fn node(extra: &str) -> String {
    format!("[[buffer]]\nname = \"x\"\nsize = 1024\n\n{KERNEL}\n[[node]]\nkernel = \"add_one\"\n{extra}\nargs = {{ x = \"x\", n = 256 }}\n")
}

#[test]
fn sizes_past_an_integer_or_the_memory_are_refused_naming_buffer_and_line() {
    refused(&one_buffer("9223372036854775808"), &["run", "{}"], &[".toml:3: buffer `x`: 9223372036854775808 bytes is more than the 1099511627776"]);
    refused(&one_buffer("1e15"), &["run", "{}"], &[".toml:3:"]);
    refused(
        &one_buffer("2199023255552"),
        &["run", "{}"],
        &[".toml:3: buffer `x`: 2199023255552 bytes is more than the 1099511627776 a graph file may declare"],
    );
    // Under the file's limit but more than this machine has: refused before anything is allocated.
    refused(&one_buffer("900000000000"), &["run", "{}", "--check"], &["buffers need 900000000000 bytes of host memory", "available"]);
}

#[test]
fn node_counts_past_the_limit_are_refused_at_their_line() {
    for repeat in ["941000", "4294967295"] {
        refused(
            &node(&format!("grid = [1]\nblock = [256]\nrepeat = {repeat}")),
            &["plan", "{}"],
            &[".toml:11:", "past 200000 nodes, the most a graph file may record"],
        );
    }
    refused(&node("grid = [1]\nblock = [256]\nrepeat = 0"), &["plan", "{}"], &["`repeat = 0` records nothing"]);
}

#[test]
fn names_that_are_not_identifiers_are_refused() {
    for bad in ["../escaped", "/abs/path", "new\\nline", ".hidden"] {
        let text = one_buffer("1024").replacen("name = \"x\"", &format!("name = \"{bad}\""), 1).replace("x = \"x\"", &format!("x = \"{bad}\""));
        refused(&text, &["run", "{}", "--dump", "/tmp/ostinato-never"], &[".toml:1:", "is not an identifier"]);
    }
    assert!(!Path::new("/tmp/escaped.bin").exists() && !Path::new("/tmp/ostinato-never").exists());
}

#[test]
fn launches_past_the_sm90_limits_are_refused_by_plan_cuda_naming_node_and_dimension() {
    refused(
        &node("grid = [1]\nblock = [2048]"),
        &["plan", "{}", "--cuda"],
        &["node 0 (add_one): block x = 2048 is more than the device's 1024 (the sm_90 limits)"],
    );
    refused(&node("grid = [1, 65536, 1]\nblock = [32]"), &["plan", "{}", "--cuda"], &["node 0 (add_one): grid y = 65536"]);
    refused(&node("grid = [1, 1, 65536]\nblock = [32]"), &["plan", "{}", "--cuda"], &["grid z = 65536"]);
}

#[test]
fn thread_counts_past_the_host_limit_are_refused() {
    refused(&one_buffer("1024"), &["run", "{}", "--threads", "1000000"], &["1000000 worker threads asked, at most 1024"]);
}

/// A grid of 65,536³ blocks of a built-in the host runs block by block: refused at instantiate, naming
/// the node, instead of 2^48 calls. The plan itself is fine.
#[test]
fn host_grids_past_what_it_runs_block_by_block_are_refused() {
    let huge = node("grid = [65536, 65536, 65536]\nblock = [256]");
    refused(&huge, &["run", "{}", "--backend", "host"], &["node 0", "the grid has 281474976710656 blocks, more than the 67108864 the host runs one by one"]);
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).arg("plan").arg(write_temp(&huge)).output().expect("binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn silent_successes_are_errors() {
    refused("", &["run", "{}", "--check"], &["the file records no node"]);
    refused("# only a comment\n", &["plan", "{}"], &["the file records no node"]);
}

#[test]
fn messages_name_the_key_the_value_and_the_lines() {
    refused("[[buffer]]\nname = \"x\"\nsize = 4\nsize = 8\n", &["plan", "{}"], &[".toml:4: duplicate key `size`"]);
    refused(
        &one_buffer("1024").replace("host = \"builtin:add_one\"", "host = 3"),
        &["plan", "{}"],
        &["`host` implementation: expected \"builtin:NAME\", a file path, or a table with `source`; got `3`"],
    );
    // A param's error points at the line of its value, not the [[node]] header.
    let bad_arg = node("grid = [1]\nblock = [256]").replace("args = { x = \"x\", n = 256 }", "args = { x = \"x\",\n  n = -3 }");
    refused(&bad_arg, &["plan", "{}"], &[".toml:16:", "param `n`: -3 does not fit a u32"]);
    // Node 0 must come after node 1 (explicit), node 1 after node 0 (both write x): a cycle, with lines.
    let second = "\n[[node]]\nkernel = \"add_one\"\ngrid = [1]\nblock = [256]\nargs = { x = \"x\", n = 256 }\n";
    let cycle = format!("{}{second}", node("grid = [1]\nblock = [256]\nafter = [1]"));
    refused(&cycle, &["plan", "{}"], &[".toml:11: explicit edges make a cycle: node 0 (line 11) -> node 1 (line 18)"]);
}

/// The Vulkan backend without a driver, with a device that does not exist, and with a shader that has
/// no such entry point: each a clear error naming it.
#[test]
fn vulkan_without_a_driver_a_device_or_an_entry_point_is_named() {
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ostinato"));
        c.args(args).current_dir(repo());
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().expect("binary runs");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let none = [("VK_DRIVER_FILES", "/nonexistent/icd.json"), ("VK_ICD_FILENAMES", "/nonexistent/icd.json")];
    let (code, err) = run(&none, &["run", "examples/mix.toml", "--backend", "vulkan"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("vulkan backend")
            && (err.contains("no installable client driver") || err.contains("no Vulkan loader") || err.contains("no Vulkan device")),
        "{err}"
    );
    // The rest needs a Vulkan device to select among and to bind on.
    if let Err(e) = ostinato_runtime::ostinato_vulkan::Context::open_matching(None) {
        eprintln!("SKIP vulkan_without_a_driver_a_device_or_an_entry_point_is_named (the device and entry-point cases): {e}");
        return;
    }
    let (code, err) = run(&[], &["run", "examples/mix.toml", "--backend", "vulkan", "--device", "no-such-gpu"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("matches `no-such-gpu`"), "{err}");
    // A WGSL file without the kernel's entry point is named with its line.
    let dir = std::env::temp_dir().join(format!("ostinato-vk-entry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k.wgsl"),
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n@compute @workgroup_size(256)\nfn other() { x[0] = 1.0; }\n",
    )
    .unwrap();
    let text = format!(
        "[[buffer]]\nname = \"x\"\nsize = 1024\n\n[[kernel]]\nname = \"one\"\nparams = [{{ name = \"x\", access = \"read_write\" }}]\nhost = \"builtin:add_one\"\nvulkan = \"{}\"\n\n[[node]]\nkernel = \"one\"\ngrid = [1]\nblock = [256]\nargs = {{ x = \"x\" }}\n",
        dir.join("k.wgsl").display()
    );
    refused(&text, &["run", "{}", "--backend", "vulkan"], &["no entry point `one`", "other"]);
    let _ = std::fs::remove_dir_all(dir);
}

const MIX: &str = "[[kernel]]\nname = \"mix\"\nparams = [{ name = \"out\", access = \"read_write\" }, { name = \"inp\", access = \"read\" }, { name = \"n_out\", scalar = \"u32\" }, { name = \"n_in\", scalar = \"u32\" }, { name = \"salt\", scalar = \"u32\" }]\nhost = \"builtin:mix\"\n";

#[test]
fn a_launch_whose_written_param_overlaps_another_is_refused_at_its_line() {
    let node = "[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [256]\nargs = { out = \"b0\", inp = { buffer = \"b0\", offset = 160, len = 3376 }, n_out = 1024, n_in = 844, salt = 1 }\n";
    let text = format!("[[buffer]]\nname = \"b0\"\nsize = 4096\n\n{MIX}\n{node}");
    refused(&text, &["plan", "{}"], &[".toml:10:", "node 0 (mix): params `out` and `inp` overlap on bytes [160, 3536) of `b0`"]);
    refused(&text, &["run", "{}", "--backend", "vulkan"], &["params `out` and `inp` overlap"]);
    refused(&format!("[[buffer]]\nname = \"b0\"\nsize = 64\n\n{MIX}alias = [[\"out\"]]\n"), &["plan", "{}"], &[".toml:5:", "each `alias` entry is a pair"]);
}

/// An aliasing declaration is a promise about the code: `builtin:mix` does not order its threads'
/// reads of `inp` against other threads' writes of `out` (Vulkan's result then differs from the
/// host's), so declaring that they may alias is refused when the kernel is bound, on every backend,
/// naming kernel, params and line; so is an aliasing of a scalar param, when it is declared.
#[test]
fn an_aliasing_the_kernels_code_does_not_keep_is_refused() {
    let mix = MIX.replace("host = \"builtin:mix\"\n", "host = \"builtin:mix\"\nvulkan = \"builtin:mix\"\nhsa = \"builtin:mix\"\n");
    let node = "[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [256]\nargs = { out = \"b0\", inp = { buffer = \"b0\", offset = 160, len = 3376 }, n_out = 1024, n_in = 844, salt = 1 }\n";
    let declared = format!("[[buffer]]\nname = \"b0\"\nsize = 4096\n\n{mix}alias = [[\"out\", \"inp\"]]\n\n{node}");
    let want = ".toml:5: kernel `mix` declares that params `out` and `inp` may alias, but the built-in `mix` does not order their accesses";
    refused(&declared, &["plan", "{}", "--explain"], &[want]);
    for backend in [vec!["host"], vec!["hsa", "--simulate"], vec!["vulkan"]] {
        let mut args = vec!["run", "{}", "--check", "--backend"];
        args.extend(&backend);
        if backend[0] == "vulkan" && ostinato_runtime::ostinato_vulkan::Context::open_matching(None).is_err() {
            eprintln!("SKIP the Vulkan case of an_aliasing_the_kernels_code_does_not_keep_is_refused: no Vulkan device");
            continue;
        }
        refused(&declared, &args, &[want]);
    }
    // A plan needs no code: the declaration records (a user's code may keep it).
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).arg("plan").arg(write_temp(&declared)).output().expect("binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A scalar has no bytes to overlap: refused where it is declared.
    refused(
        &format!("[[buffer]]\nname = \"b0\"\nsize = 64\n\n{MIX}alias = [[\"out\", \"salt\"]]\n"),
        &["plan", "{}"],
        &[".toml:5:", "kernel `mix`: an aliasing declaration names `salt`, a scalar param (only buffer params have bytes that can overlap)"],
    );
}

/// Writes `text` to a temporary graph file and returns its path.
fn write_temp(text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ostinato-hard-{}-{:x}.toml", std::process::id(), fnv(text, &["plan"])));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `ostinato ARGS…` on FILE's text under an address-space limit of `kib` KiB (`ulimit -v`).
fn under_limit(kib: u64, text: &str, args: &[&str]) -> std::process::Output {
    let path = std::env::temp_dir().join(format!("ostinato-limit-{}-{:x}.toml", std::process::id(), fnv(text, args)));
    std::fs::write(&path, text).unwrap();
    let argv: Vec<String> = args.iter().map(|a| if *a == "{}" { path.display().to_string() } else { a.to_string() }).collect();
    let script = format!("ulimit -v {kib} && exec \"$0\" \"$@\"");
    let o = Command::new("sh").arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_ostinato")).args(&argv).current_dir(repo()).output().expect("sh runs");
    let _ = std::fs::remove_file(&path);
    o
}

#[test]
fn allocations_sized_by_input_fail_as_errors_under_an_address_space_limit() {
    // 3 GiB of buffers under a 1.5 GiB address space: the system has the memory (the MemAvailable check
    // passes) but this process may not map it. Every allocation sized by the file is fallible, so the
    // run ends in an error naming the buffer, never an abort (134) or a kill.
    let text = one_buffer("3221225472");
    for args in [["run", "{}", "--check"], ["run", "{}", "--threads=0"]] {
        let o = under_limit(1_500_000, &text, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?} under ulimit -v: {err}");
        assert!(err.contains("buffer `x`") && (err.contains("cannot allocate") || err.contains("host memory")), "{err}");
    }
    // The race checker and the planner stay within memory proportional to nodes and edges: 200,000
    // nodes plan, check and run in 1.5 GiB of address space.
    let big = format!(
        "[[buffer]]\nname = \"x\"\nsize = 1024\n\n{KERNEL}\n[[node]]\nkernel = \"add_one\"\ngrid = [1]\nblock = [256]\nargs = {{ x = \"x\", n = 256 }}\nrepeat = 199999\n"
    );
    let o = under_limit(1_500_000, &big, &["run", "{}", "--check"]);
    assert!(o.status.success() || o.status.code() == Some(1), "a crash, not an error: {:?} {}", o.status, String::from_utf8_lossy(&o.stderr));
}

/// A WGSL kernel with one enormous expression: naga lowers it recursively, which would overflow the
/// stack (an abort); the statement is refused with its line wherever the code is read — a plan's
/// explanation notes it, binding refuses it — and nothing aborts.
#[test]
fn a_wgsl_statement_too_long_to_read_safely_is_refused_not_an_abort() {
    let dir = std::env::temp_dir().join(format!("ostinato-hard-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sum = vec!["l.x"; 20_000].join(" + ");
    let wgsl = format!("@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) l: vec3<u32>) {{ x[l.x] = {sum}; }}\n");
    std::fs::write(dir.join("deep.wgsl"), wgsl).unwrap();
    let graph = "[[buffer]]\nname = \"x\"\nsize = 1024\n\n[[kernel]]\nname = \"k\"\nparams = [{ name = \"x\", access = \"read_write\" }]\nvulkan = \"deep.wgsl\"\n\n[[node]]\nkernel = \"k\"\ngrid = [1]\nblock = [64]\nargs = { x = \"x\" }\n";
    std::fs::write(dir.join("g.toml"), graph).unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(&dir).output().expect("binary runs");
    let o = run(&["plan", "g.toml", "--explain"]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.code().is_some(), "ended by a signal: {text}");
    assert!(text.contains("line 3: a statement of more than 1000 operators"), "{text}");
    if ostinato_runtime::ostinato_vulkan::Context::open_matching(None).is_ok() {
        let o = run(&["run", "g.toml", "--backend", "vulkan"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("g.toml:5") && err.contains("kernel `k`: line 3: a statement of more than 1000 operators"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
