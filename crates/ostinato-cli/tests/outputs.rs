//! Where `ostinato run` writes: never through a symbolic link planted in the `--dump` folder (nor
//! into a FIFO or a file with other hard links there), never two outputs on one file, never over a
//! file the run reads; each refusal exits 1 naming the flags and paths, before anything is written.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

/// A fresh folder holding a copy of examples/mix.toml.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ostinato-outputs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("examples/mix.toml"), dir.join("mix.toml")).unwrap();
    dir
}

fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ostinato")).args(args).current_dir(dir).output().expect("binary runs");
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn dump_never_writes_through_a_link_a_fifo_or_a_hard_link_in_its_folder() {
    let dir = folder("dump");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::write(dir.join("outside.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink("../outside.txt", dir.join("out/a.bin")).unwrap();
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--dump", "out"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("out/a.bin: a symbolic link to ../outside.txt is in the way; --dump writes only regular files"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("outside.txt")).unwrap(), "keep me", "the file the link points to is untouched");
    assert!(!dir.join("out/b.bin").exists(), "a refusal leaves nothing written");
    // A dangling link: refused too (creating through it would make a file outside the folder).
    std::fs::remove_file(dir.join("out/a.bin")).unwrap();
    std::os::unix::fs::symlink("../made-outside.bin", dir.join("out/a.bin")).unwrap();
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--dump", "out"]);
    assert!(code == Some(1) && err.contains("a symbolic link to ../made-outside.bin"), "{err}");
    assert!(!dir.join("made-outside.bin").exists());
    std::fs::remove_file(dir.join("out/a.bin")).unwrap();
    // A hard link to a file outside: writing it would change that file.
    std::fs::hard_link(dir.join("outside.txt"), dir.join("out/a.bin")).unwrap();
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--dump", "out"]);
    assert!(code == Some(1) && err.contains("out/a.bin: a file with 2 hard links is in the way"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("outside.txt")).unwrap(), "keep me");
    std::fs::remove_file(dir.join("out/a.bin")).unwrap();
    // A FIFO: refused, not blocked on.
    assert!(Command::new("mkfifo").arg(dir.join("out/b.bin")).status().unwrap().success());
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--dump", "out"]);
    assert!(code == Some(1) && err.contains("out/b.bin: something other than a regular file is in the way"), "{err}");
    std::fs::remove_file(dir.join("out/b.bin")).unwrap();
    // Regular files of its own are overwritten, as before.
    std::fs::write(dir.join("out/a.bin"), "old").unwrap();
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--dump", "out"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(dir.join("out/a.bin")).unwrap().len(), 4096);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_outputs_on_one_file_or_an_output_on_an_input_are_refused_naming_both() {
    let dir = folder("clobber");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let original = std::fs::read_to_string(dir.join("mix.toml")).unwrap();
    for (args, want) in [
        (vec!["--trace", "t.json", "--trace-svg", "t.json"], "--trace and --trace-svg name one file (t.json): each output needs its own path"),
        (vec!["--trace", "t.json", "--trace-svg", "sub/../t.json"], "--trace and --trace-svg name one file (t.json and sub/../t.json)"),
        (vec!["--trace", "mix.toml"], "--trace mix.toml is the graph file (mix.toml), which this run reads: it would be overwritten"),
        (vec!["--trace-svg", "./sub/../mix.toml"], "--trace-svg ./sub/../mix.toml is the graph file (mix.toml)"),
        (vec!["--dump", "out", "--trace", "out/b.bin"], "--trace and --dump's b.bin name one file (out/b.bin)"),
        (vec!["--dump", ".", "--trace", "x.json"], ""),
    ] {
        let mut argv = vec!["run", "mix.toml", "--check"];
        argv.extend(&args);
        let (code, _, err) = run_in(&dir, &argv);
        if want.is_empty() {
            assert_eq!(code, Some(0), "{args:?}: distinct paths run: {err}");
            continue;
        }
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(want) && err.contains("nothing was written"), "{args:?}: {err}");
        assert!(!dir.join("t.json").exists() && !dir.join("out").exists(), "{args:?}: nothing written");
        assert_eq!(std::fs::read_to_string(dir.join("mix.toml")).unwrap(), original, "{args:?}: the graph file is intact");
    }
    // A link to the graph file is the graph file.
    std::os::unix::fs::symlink("mix.toml", dir.join("link.json")).unwrap();
    let (code, _, err) = run_in(&dir, &["run", "mix.toml", "--trace", "link.json"]);
    assert!(code == Some(1) && err.contains("--trace link.json is the graph file (mix.toml)"), "{err}");
    // A kernel's source is an input too.
    std::fs::write(dir.join("k.wgsl"), "@compute @workgroup_size(1) fn main() {}\n").unwrap();
    let with_kernel = original.replace("vulkan = \"builtin:mix\"", "vulkan = \"k.wgsl\"");
    std::fs::write(dir.join("own.toml"), with_kernel).unwrap();
    let (code, _, err) = run_in(&dir, &["run", "own.toml", "--trace", "k.wgsl"]);
    assert!(code == Some(1) && err.contains("--trace k.wgsl is kernel `mix`'s vulkan implementation (k.wgsl), which this run reads"), "{err}");
    assert!(std::fs::read_to_string(dir.join("k.wgsl")).unwrap().contains("fn main"));
    let _ = std::fs::remove_dir_all(dir);
}
