//! Where a run writes, checked before it writes anything: no two outputs (`--trace`, `--trace-svg`,
//! `--dot`, each `--dump` file) on one file, and no output on a file the run reads (the graph file, a
//! kernel's source or machine code), compared by file identity (device and inode) where the file
//! exists and by the path it will have (its folder's links resolved) where it does not yet. And a dump
//! file is created without following a symbolic link: a link planted in the dump folder is refused,
//! naming it, never written through to the file it points to.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use crate::error::RuntimeError;

/// One file a run reads or writes, as named to the user (`--trace`, `the graph file`).
pub(crate) struct Named {
    pub what: String,
    pub path: PathBuf,
}

/// Which file a path names: the same identity is the same file, however it is spelled.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    /// An existing file (symbolic links followed, as opening it for writing would).
    Inode { dev: u64, ino: u64 },
    /// A file not there yet, by the absolute path it would have.
    Path(PathBuf),
}

fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Identity::Inode { dev: m.dev(), ino: m.ino() },
        Err(_) => Identity::Path(resolved(path)),
    }
}

/// `path` made absolute with its longest existing ancestor canonicalized (links and `..` there
/// resolved) and the rest taken lexically.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut base = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = base.canonicalize() {
            let mut out = canonical;
            for c in rest.iter().rev() {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return out;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                base = parent;
            }
            _ => return absolute,
        }
    }
}

/// Refuses two `outputs` on one file and an output on one of `inputs`, naming both; nothing is
/// written here.
pub(crate) fn check(outputs: &[Named], inputs: &[Named]) -> Result<(), RuntimeError> {
    let outs: Vec<(&Named, Identity)> = outputs.iter().map(|o| (o, identity(&o.path))).collect();
    for (i, (a, ia)) in outs.iter().enumerate() {
        if let Some((b, _)) = outs[..i].iter().find(|(_, ib)| ib == ia) {
            let paths = if a.path == b.path { a.path.display().to_string() } else { format!("{} and {}", b.path.display(), a.path.display()) };
            return Err(RuntimeError::Usage(format!("{} and {} name one file ({paths}): each output needs its own path; nothing was written", b.what, a.what)));
        }
        if let Some(input) = inputs.iter().find(|input| identity(&input.path) == *ia) {
            return Err(RuntimeError::Usage(format!(
                "{} {} is {} ({}), which this run reads: it would be overwritten; nothing was written",
                a.what,
                a.path.display(),
                input.what,
                input.path.display()
            )));
        }
    }
    Ok(())
}

/// Why `path` may not be written as a dump file: a message for the error.
fn refusal(path: &Path, why: &str) -> RuntimeError {
    RuntimeError::Io {
        path: path.display().to_string(),
        message: format!("{why}; --dump writes only regular files of its own and never follows a link (remove it, or dump to another folder)"),
    }
}

/// Refuses a dump file's path where something other than a regular file is in the way (a symbolic
/// link, a FIFO, a folder), naming it. Run over every dump file before the first is written, so a
/// refusal leaves nothing half-written.
pub(crate) fn check_dump_target(path: &Path) -> Result<(), RuntimeError> {
    let Ok(m) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if m.file_type().is_symlink() {
        let target = std::fs::read_link(path).map(|t| format!(" to {}", t.display())).unwrap_or_default();
        return Err(refusal(path, &format!("a symbolic link{target} is in the way")));
    }
    if !m.is_file() {
        return Err(refusal(path, "something other than a regular file is in the way"));
    }
    Ok(())
}

/// Creates or truncates the dump file `path` without following a symbolic link there: a link, or
/// anything but a regular file with no other hard link, is refused by name.
pub(crate) fn create_dump_file(path: &Path) -> Result<File, RuntimeError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let io = |e: std::io::Error| RuntimeError::Io { path: path.display().to_string(), message: e.to_string() };
    check_dump_target(path)?;
    // O_NOFOLLOW: a link planted between the look above and this open fails it (ELOOP) instead of
    // being followed; O_NONBLOCK: a FIFO planted there does not block the open. Truncated only once
    // it is known to be a regular file of its own.
    let file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(false).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refusal(path, "a symbolic link is in the way")
            } else {
                io(e)
            }
        })?;
    let m = file.metadata().map_err(io)?;
    if !m.is_file() {
        return Err(refusal(path, "something other than a regular file is in the way"));
    }
    if m.nlink() > 1 {
        return Err(refusal(path, &format!("a file with {} hard links is in the way (writing it would change the others)", m.nlink())));
    }
    file.set_len(0).map_err(io)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_spelled_two_ways_is_one_identity() {
        let dir = std::env::temp_dir().join(format!("ostinato-outputs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let (a, b) = (dir.join("new.json"), dir.join("sub/../new.json"));
        assert_eq!(identity(&a), identity(&b), "not there yet: by the path it will have");
        std::fs::write(&a, "x").unwrap();
        assert_eq!(identity(&a), identity(&b));
        std::os::unix::fs::symlink(&a, dir.join("link.json")).unwrap();
        assert_eq!(identity(&dir.join("link.json")), identity(&a), "a link names the file it points to");
        assert_ne!(identity(&dir.join("other.json")), identity(&a));
        assert_eq!(identity(&dir.join("missing/x/../y")), identity(&dir.join("missing/y")));
        let _ = std::fs::remove_dir_all(dir);
    }
}
