//! The PTX of a Triton kernel, found beside its cubin in Triton's cache.
//!
//! Triton loads each kernel with `cuModuleLoadData` from a cubin (machine code only), so the image the
//! interposer keeps has no PTX to analyse. Triton's cache (`$TRITON_CACHE_DIR`, else
//! `$HOME/.triton/cache`) keeps every compilation in a folder of its own: `<name>.cubin` and the
//! `<name>.ptx` it was assembled from, beside the other stages (`.ttir`, `.ttgir`, `.llir`, `.json`).
//! A cubin of the cache that equals the loaded image byte for byte is that compilation's output, so the
//! `.ptx` beside it is the code that runs, and the access analysis reads it.
//!
//! The walk is bounded (two levels, [`MAX_ENTRIES`] entries, no symbolic link followed) and reads only
//! files whose length equals the image's; each file is read with a bound of [`MAX_FILE`] bytes.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most directory entries visited in one search.
pub const MAX_ENTRIES: usize = 100_000;
/// The most bytes read of one file.
pub const MAX_FILE: u64 = 256 << 20;

/// Triton's cache folder: `TRITON_CACHE_DIR`, else `$HOME/.triton/cache` (`var(name)` reads the
/// environment).
pub fn default_root(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = var("TRITON_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    var("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".triton").join("cache"))
}

/// Reads `path` whole if it is a regular file (not a link) of at most `limit` bytes.
fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > limit {
        return None;
    }
    let mut bytes = Vec::new();
    fs::File::open(path).ok()?.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Whether `text` reads as PTX: a `.target sm_…` directive and an `.entry`.
fn looks_like_ptx(text: &str) -> bool {
    text.lines().any(|l| l.trim_start().starts_with(".target sm_")) && text.contains(".entry ")
}

/// The folders of `root` and their `.cubin` files of `len` bytes (two levels: `root/<hash>/<name>.cubin`).
fn cubins_of_len(root: &Path, len: u64) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut visited = 0usize;
    let Ok(dirs) = fs::read_dir(root) else { return found };
    for dir in dirs.flatten() {
        visited += 1;
        if visited > MAX_ENTRIES {
            break;
        }
        // `DirEntry::file_type` does not follow links: a linked folder is skipped.
        if !dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = fs::read_dir(dir.path()) else { continue };
        for file in files.flatten() {
            visited += 1;
            if visited > MAX_ENTRIES {
                return found;
            }
            let path = file.path();
            let is_cubin = path.extension().is_some_and(|e| e == "cubin");
            if is_cubin && file.file_type().is_ok_and(|t| t.is_file()) && file.metadata().is_ok_and(|m| m.len() == len) {
                found.push(path);
            }
        }
    }
    found
}

/// The PTX Triton compiled `cubin` from, where a cubin of the cache at `root` equals it.
pub fn ptx_for(root: &Path, cubin: &[u8]) -> Option<String> {
    find(root, cubin).and_then(|path| read_ptx(&path))
}

/// The path of the PTX beside a cubin of the cache at `root` equal to `cubin` (what [`ptx_for`] reads).
pub fn find(root: &Path, cubin: &[u8]) -> Option<PathBuf> {
    cubins_of_len(root, cubin.len() as u64)
        .into_iter()
        .filter(|path| read_bounded(path, MAX_FILE).as_deref() == Some(cubin))
        .map(|path| path.with_extension("ptx"))
        .find(|ptx| read_ptx(ptx).is_some())
}

/// The PTX text at `path`: a regular file of at most [`MAX_FILE`] bytes, UTF-8, that reads as PTX.
pub fn read_ptx(path: &Path) -> Option<String> {
    let text = String::from_utf8(read_bounded(path, MAX_FILE)?).ok()?;
    looks_like_ptx(&text).then_some(text)
}

#[cfg(test)]
#[path = "triton_cache_tests.rs"]
mod tests;
