//! Every file a graph names is read with a cap: a kernel source or binary (`.wgsl`, `.cu`, `.ptx`,
//! `.cubin`, `.spv`, `.hsaco`) or a graph file that is `/dev/zero`, a FIFO or larger than its limit is
//! refused naming the path and why before a byte of it is read — by `plan --explain`, `kernels` and
//! `run` on every backend that reads that kind — and such a failed read never exits 0, also under an
//! address-space limit.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A folder holding `g.toml`: one kernel `k` whose `backend` implementation is `file` (a path the
/// caller makes: a link to /dev/zero, a large sparse file), with a host built-in beside it.
fn case(name: &str, backend: &str, file: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ostinato-inputs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "[[buffer]]\nname = \"x\"\nsize = 1024\n\n[[kernel]]\nname = \"k\"\nparams = [{{ name = \"x\", access = \"read_write\" }}, {{ name = \"n\", scalar = \"u32\" }}]\nhost = \"builtin:add_one\"\n{backend} = \"{file}\"\n\n[[node]]\nkernel = \"k\"\ngrid = [1]\nblock = [256]\nargs = {{ x = \"x\", n = 256 }}\n"
    );
    std::fs::write(dir.join("g.toml"), text).unwrap();
    dir
}

fn ostinato_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(dir).output().expect("binary runs");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `ostinato ARGS…` in `dir` under `ulimit -v kib`.
fn under_limit(dir: &Path, kib: u64, args: &[&str]) -> (Option<i32>, String) {
    let script = format!("ulimit -v {kib} && exec \"$0\" \"$@\"");
    let o = Command::new("sh").arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(dir).output().expect("sh runs");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_kernel_file_that_is_a_device_is_refused_by_every_command_that_reads_it() {
    for (backend, ext) in [("vulkan", "wgsl"), ("vulkan", "spv"), ("cuda", "cu"), ("cuda", "ptx"), ("cuda", "cubin"), ("hsa", "hsaco")] {
        let file = format!("zero.{ext}");
        let dir = case(&format!("{backend}-{ext}"), backend, &file);
        std::os::unix::fs::symlink("/dev/zero", dir.join(&file)).unwrap();
        let want = format!("zero.{ext}: not a regular file (a character device); a kernel file is read from a regular file only");
        let mut commands: Vec<Vec<&str>> = vec![vec!["plan", "g.toml", "--explain"], vec!["kernels", "g.toml", "--backend", backend]];
        // Binding reads it too, where this machine can bind: the HSA backend on its simulator, Vulkan
        // and CUDA where a device is found.
        if backend == "hsa" {
            commands.push(vec!["run", "g.toml", "--backend", "hsa", "--simulate"]);
        }
        if backend == "vulkan" && ostinato_runtime::ostinato_vulkan::Context::open_matching(None).is_ok() {
            commands.push(vec!["run", "g.toml", "--backend", "vulkan"]);
        }
        if backend == "cuda" && ostinato_runtime::ostinato_cuda::driver_available() {
            commands.push(vec!["run", "g.toml", "--backend", "cuda"]);
        }
        for args in &commands {
            let (code, err) = ostinato_in(&dir, args);
            assert_eq!(code, Some(1), "{args:?} on {file}: a failed read must fail the command: {err}");
            assert!(err.contains(&want) && err.contains("g.toml:5:"), "{args:?}: the message names the file, why, and the kernel's line: {err}");
            // And quickly, not after reading gigabytes: under a 3 GB address space it fails the same way
            // (where no GPU driver is opened: a driver may reserve more address space than that).
            let opens_driver =
                (args[0] == "run" && backend != "hsa") || (args[0] == "kernels" && backend == "cuda" && ostinato_runtime::ostinato_cuda::driver_available());
            if !opens_driver {
                let (code, err) = under_limit(&dir, 3_000_000, args);
                assert!(code == Some(1) && err.contains(&want), "{args:?} under ulimit -v: {err}");
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_kernel_file_past_the_limit_is_refused_naming_its_size_and_the_limit() {
    let dir = case("big", "cuda", "big.ptx");
    // Sparse: 64 MiB and one byte, no disk used.
    std::fs::File::create(dir.join("big.ptx")).unwrap().set_len((64 << 20) + 1).unwrap();
    let (code, err) = ostinato_in(&dir, &["plan", "g.toml", "--explain"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("big.ptx: 67108865 bytes is more than the 67108864 bytes a kernel file may have"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_graph_file_that_is_a_device_a_fifo_or_too_large_is_refused() {
    let dir = case("graph", "vulkan", "k.wgsl");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.toml")).unwrap();
    assert!(Command::new("mkfifo").arg(dir.join("fifo.toml")).status().unwrap().success());
    std::fs::File::create(dir.join("big.toml")).unwrap().set_len((64 << 20) + 1).unwrap();
    for (file, want) in [
        ("zero.toml", "zero.toml: not a regular file (a character device); a graph file is read from a regular file only"),
        ("fifo.toml", "fifo.toml: not a regular file (a FIFO); a graph file is read from a regular file only"),
        ("big.toml", "big.toml: 67108865 bytes is more than the 67108864 bytes a graph file may have"),
    ] {
        for args in [vec!["plan", file, "--explain"], vec!["run", file, "--check"], vec!["kernels", file]] {
            let (code, err) = under_limit(&dir, 3_000_000, &args);
            assert!(code == Some(1) && err.contains(want), "{args:?}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
