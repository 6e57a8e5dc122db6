//! Embeds the commit the binary was built from, and whether the tree was dirty, for report provenance.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    println!("cargo:rustc-env=OSTINATO_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=OSTINATO_BUILD_DIRTY={}", dirty.map_or("unknown".to_string(), |d| d.to_string()));
    // Re-run whenever the commit, the index or any source changes, so the dirty flag is never stale
    // (an earlier version watched only HEAD and the index and reported unstaged edits as clean).
    for p in ["../../.git/HEAD", "../../.git/index", "../../crates", "../../kernels", "../../Cargo.toml"] {
        println!("cargo:rerun-if-changed={p}");
    }
    // HEAD names a branch; a new commit (or an amend, which leaves HEAD and the index alone) moves the
    // branch's ref, loose or packed.
    if let Some(branch) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]).filter(|b| b.starts_with("refs/")) {
        for r in [branch.as_str(), "packed-refs"] {
            if let Some(path) = git(&["rev-parse", "--git-path", r]) {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
