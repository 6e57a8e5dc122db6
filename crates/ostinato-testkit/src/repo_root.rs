//! Where the repository is, found when a test runs rather than when it is built.
//!
//! Test binaries are sometimes built on one machine and run on another, directly (not through cargo),
//! from a copy of the repository at a different path. The compile-time `env!` of `CARGO_MANIFEST_DIR`
//! bakes the build machine's path into the binary, so a test that finds its fixtures through it
//! breaks there; [`repo_root`] asks the running process instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variable that names the repository (its root, or any directory inside it) outright.
const REPO_VAR: &str = "OSTINATO_REPO";
/// The crate's directory, which cargo sets in the environment of the tests it runs.
const MANIFEST_DIR_VAR: &str = "CARGO_MANIFEST_DIR";

/// The root of the Ostinato repository this test runs in: the directory whose `Cargo.toml` declares
/// the `[workspace]`.
///
/// Why not the compile-time `env!` of `CARGO_MANIFEST_DIR`: test binaries run from a copy of the
/// tree at any path (built on one machine, run on another), and `env!` is the build machine's path.
/// This looks at the running process only, in this order, walking up from the first of these that
/// is set to the first directory holding a `Cargo.toml` with a `[workspace]` table:
///
/// 1. `OSTINATO_REPO`, if set: the repository named outright. It is the whole answer: where no
///    workspace is found at or above it, that is an error, not a reason to look elsewhere (a
///    mistyped override must not quietly test another tree).
/// 2. `CARGO_MANIFEST_DIR` read at run time (`std::env::var`, not `env!`): cargo sets it to the
///    crate's directory when it runs a test.
/// 3. The current working directory (a binary run by hand from the repository's root, or below it).
///
/// A crate's own directory is `repo_root()?.join("crates/<name>")`. The error says what was tried
/// and where, and how to say where the repository is.
pub fn repo_root() -> Result<PathBuf, String> {
    resolve(std::env::var_os(REPO_VAR), std::env::var_os(MANIFEST_DIR_VAR), std::env::current_dir())
}

/// [`repo_root`] with the process's environment and working directory passed in (so tests can give
/// their own).
fn resolve(repo_var: Option<OsString>, manifest_dir_var: Option<OsString>, cwd: std::io::Result<PathBuf>) -> Result<PathBuf, String> {
    if let Some(named) = repo_var.filter(|v| !v.is_empty()) {
        let named = PathBuf::from(named);
        return workspace_at_or_above(&named).map_err(|why| format!("{REPO_VAR}={}: {why}", named.display()));
    }
    let mut tried = vec![format!("{REPO_VAR} is not set")];
    match manifest_dir_var.filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            match workspace_at_or_above(&dir) {
                Ok(root) => return Ok(root),
                Err(why) => tried.push(format!("{MANIFEST_DIR_VAR}={}: {why}", dir.display())),
            }
        }
        None => tried.push(format!("{MANIFEST_DIR_VAR} is not set")),
    }
    match cwd {
        Ok(dir) => match workspace_at_or_above(&dir) {
            Ok(root) => return Ok(root),
            Err(why) => tried.push(format!("the working directory {}: {why}", dir.display())),
        },
        Err(e) => tried.push(format!("the working directory cannot be read ({e})")),
    }
    Err(format!(
        "the Ostinato repository was not found ({}); set {REPO_VAR} to the repository's root, or run the test from inside the repository",
        tried.join("; ")
    ))
}

/// The first directory at or above `start` (made absolute and free of `..` first) whose `Cargo.toml`
/// declares a `[workspace]`; the error says why there is none.
fn workspace_at_or_above(start: &Path) -> Result<PathBuf, String> {
    let start = std::fs::canonicalize(start).map_err(|e| format!("cannot be resolved ({e})"))?;
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if std::fs::read_to_string(&manifest).is_ok_and(|text| declares_workspace(&text)) {
            return Ok(dir.to_path_buf());
        }
    }
    Err("no Cargo.toml with a [workspace] table at or above it".to_string())
}

/// Whether a `Cargo.toml`'s text opens a `[workspace]` table (not `[workspace.package]`, nor a
/// member's `version.workspace = true`).
fn declares_workspace(manifest: &str) -> bool {
    manifest.lines().any(|line| line.trim_start().starts_with("[workspace]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway tree: `<tmp>/root/Cargo.toml` declares the workspace, `<tmp>/root/crates/member`
    /// is a member, and `<tmp>/outside` is in no workspace. Removed on drop.
    struct Tree {
        base: PathBuf,
    }

    impl Tree {
        fn new(name: &str) -> Tree {
            let base = std::env::temp_dir().join(format!("ostinato-testkit-repo-root-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            std::fs::create_dir_all(base.join("root/crates/member/src")).unwrap();
            std::fs::create_dir_all(base.join("outside")).unwrap();
            std::fs::write(base.join("root/Cargo.toml"), "[workspace]\nmembers = [\"crates/member\"]\n\n[workspace.package]\nversion = \"0.1.0\"\n").unwrap();
            std::fs::write(base.join("root/crates/member/Cargo.toml"), "[package]\nname = \"member\"\nversion.workspace = true\n\n[lints]\nworkspace = true\n")
                .unwrap();
            Tree { base: std::fs::canonicalize(&base).unwrap() }
        }

        fn root(&self) -> PathBuf {
            self.base.join("root")
        }

        fn member(&self) -> PathBuf {
            self.base.join("root/crates/member")
        }

        fn outside(&self) -> PathBuf {
            self.base.join("outside")
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    #[test]
    fn this_crate_runs_inside_the_workspace() {
        let root = repo_root().unwrap();
        assert!(root.join("crates/ostinato-testkit/src/repo_root.rs").is_file(), "{}", root.display());
    }

    #[test]
    fn each_source_walks_up_to_the_workspace() {
        let tree = Tree::new("walks");
        // OSTINATO_REPO, naming the root or a directory inside the tree
        assert_eq!(resolve(Some(tree.root().into()), None, Ok(tree.outside())), Ok(tree.root()));
        assert_eq!(resolve(Some(tree.member().join("src").into()), None, Ok(tree.outside())), Ok(tree.root()));
        // the crate's directory cargo gives, past the member's own Cargo.toml
        assert_eq!(resolve(None, Some(tree.member().into()), Ok(tree.outside())), Ok(tree.root()));
        // the working directory
        assert_eq!(resolve(None, None, Ok(tree.member().join("src"))), Ok(tree.root()));
        // an empty variable counts as unset
        assert_eq!(resolve(Some(OsString::new()), Some(OsString::new()), Ok(tree.member())), Ok(tree.root()));
    }

    #[test]
    fn the_first_source_set_wins() {
        let (first, second) = (Tree::new("first"), Tree::new("second"));
        assert_eq!(resolve(Some(first.root().into()), Some(second.member().into()), Ok(second.root())), Ok(first.root()));
        assert_eq!(resolve(None, Some(first.member().into()), Ok(second.root())), Ok(first.root()));
        // a crate directory that leads nowhere (a build machine's path) falls through to the working directory
        assert_eq!(resolve(None, Some(first.base.join("gone").into()), Ok(second.member())), Ok(second.root()));
    }

    #[test]
    fn a_repo_variable_that_leads_nowhere_is_an_error_naming_it() {
        let tree = Tree::new("nowhere");
        let gone = tree.base.join("gone");
        let err = resolve(Some(gone.clone().into()), Some(tree.member().into()), Ok(tree.root())).unwrap_err();
        assert!(err.starts_with(&format!("OSTINATO_REPO={}", gone.display())), "{err}");
    }

    #[test]
    fn finding_nothing_names_everything_tried() {
        let tree = Tree::new("nothing");
        let gone = tree.base.join("gone");
        let err = resolve(None, Some(gone.clone().into()), Ok(tree.outside())).unwrap_err();
        for said in
            ["OSTINATO_REPO is not set", &format!("CARGO_MANIFEST_DIR={}", gone.display()), &format!("the working directory {}", tree.outside().display())]
        {
            assert!(err.contains(said), "`{said}` missing from: {err}");
        }
        let err = resolve(None, None, Err(std::io::Error::other("no cwd"))).unwrap_err();
        assert!(err.contains("CARGO_MANIFEST_DIR is not set") && err.contains("no cwd"), "{err}");
    }

    #[test]
    fn only_a_workspace_table_counts() {
        assert!(declares_workspace("[workspace]\nmembers = []\n"));
        assert!(declares_workspace("[package]\nname = \"x\"\n\n  [workspace]\n"));
        assert!(!declares_workspace("[package]\nversion.workspace = true\n[lints]\nworkspace = true\n"));
        assert!(!declares_workspace("[workspace.package]\nversion = \"1\"\n"));
    }
}
