//! How a graph names a kernel's implementation for one backend: a [`KernelRef`]. The core only
//! carries it; each backend's [`crate::Backend::bind_kernel`] reads it (its source, entry point and
//! the backend's own options, which the core passes through unread).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A backend-specific option of a kernel reference (`pdl = true` for CUDA, say). The core never
/// interprets it; the backend that binds the reference refuses options it does not know.
#[derive(Clone, Debug, PartialEq)]
pub enum RefOption {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl std::fmt::Display for RefOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefOption::Bool(b) => write!(f, "{b}"),
            RefOption::Int(i) => write!(f, "{i}"),
            RefOption::Float(x) => write!(f, "{x}"),
            RefOption::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// One kernel implementation reference for one backend.
///
/// `source` is `builtin:NAME` (a kernel the backend ships) or a file path (relative paths resolve
/// against `base_dir`, the graph file's folder); `entry` is the symbol in that file (default: the
/// kernel's name, or NAME for a built-in). A reference made in memory carries its code in `code`
/// ([`KernelRef::code`]: a kernel pack's source, compiled into the program); `source` then names it,
/// its extension saying what it is (`.cu`, `.ptx`, `.wgsl`), and no file is read. Code made by a
/// compiler the program drives (Triton) may come with the machine code that compiler assembled from
/// it, in `binary` ([`KernelRef::with_binary`]): the backend loads that machine code, so that what
/// runs is what the compiler built, and reads the code beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRef {
    pub source: String,
    pub entry: Option<String>,
    pub base_dir: PathBuf,
    pub options: BTreeMap<String, RefOption>,
    pub code: Option<Arc<str>>,
    /// Machine code assembled from `code` (a cubin beside its PTX), where the compiler made both.
    pub binary: Option<Arc<[u8]>>,
}

impl KernelRef {
    /// A kernel the backend ships (`builtin:NAME`).
    pub fn builtin(name: &str) -> KernelRef {
        KernelRef { source: format!("builtin:{name}"), entry: None, base_dir: PathBuf::from("."), options: BTreeMap::new(), code: None, binary: None }
    }
    /// A kernel in a file (CUDA C, PTX, cubin, WGSL, SPIR-V: the backend decides what it takes).
    pub fn file(path: impl AsRef<Path>) -> KernelRef {
        KernelRef { source: path.as_ref().display().to_string(), entry: None, base_dir: PathBuf::from("."), options: BTreeMap::new(), code: None, binary: None }
    }
    /// A kernel whose code is given here rather than read from a file: `name` says what it is by its
    /// extension (`llama.cu`, `k.ptx`, `k.wgsl`) and names it in messages and caches.
    pub fn code(name: &str, code: impl Into<Arc<str>>) -> KernelRef {
        KernelRef { source: name.to_string(), entry: None, base_dir: PathBuf::from("."), options: BTreeMap::new(), code: Some(code.into()), binary: None }
    }
    /// The machine code the compiler assembled from this reference's `code` (a cubin from its PTX):
    /// the backend loads it and reads `code`, which must be the code it was assembled from.
    pub fn with_binary(mut self, binary: impl Into<Arc<[u8]>>) -> KernelRef {
        self.binary = Some(binary.into());
        self
    }
    /// The entry symbol in the file.
    pub fn with_entry(mut self, entry: &str) -> KernelRef {
        self.entry = Some(entry.to_string());
        self
    }
    /// A backend option, passed through to the backend.
    pub fn with_option(mut self, key: &str, value: RefOption) -> KernelRef {
        self.options.insert(key.to_string(), value);
        self
    }
    /// The built-in's name for `builtin:NAME` (`builtin` alone names the kernel's own name: `Some("")`).
    pub fn builtin_name(&self) -> Option<&str> {
        if self.source == "builtin" {
            return Some("");
        }
        self.source.strip_prefix("builtin:")
    }
    /// The entry symbol for a kernel named `kernel`: `entry`, else a built-in's name, else `kernel`.
    pub fn entry_for<'a>(&'a self, kernel: &'a str) -> &'a str {
        match (&self.entry, self.builtin_name()) {
            (Some(e), _) => e,
            (None, Some(b)) if !b.is_empty() => b,
            _ => kernel,
        }
    }
    /// The file a non-built-in reference names, resolved against `base_dir`.
    pub fn path(&self) -> PathBuf {
        let p = Path::new(&self.source);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
    /// Refuses any option not in `known` (a typo must not be ignored), naming it and the backend.
    pub fn check_options(&self, backend: &str, known: &[&str]) -> Result<(), String> {
        match self.options.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) if known.is_empty() => Err(format!("`{k}` is not an option of a {backend} kernel reference ({backend} takes none)")),
            Some(k) => Err(format!("`{k}` is not an option of a {backend} kernel reference (known: {})", known.join(", "))),
        }
    }
    /// A boolean option, `None` when absent; an error when present with another type.
    pub fn bool_option(&self, key: &str) -> Result<Option<bool>, String> {
        match self.options.get(key) {
            None => Ok(None),
            Some(RefOption::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("option `{key}` must be true or false, not {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_defaults_to_the_builtins_name_then_the_kernels() {
        assert_eq!(KernelRef::builtin("mix").entry_for("k"), "mix");
        assert_eq!(KernelRef::file("a.cu").entry_for("k"), "k");
        assert_eq!(KernelRef::file("a.cu").with_entry("e").entry_for("k"), "e");
        assert_eq!(KernelRef::file("a.cu").builtin_name(), None);
    }

    #[test]
    fn unknown_and_mistyped_options_are_refused_by_name() {
        let r = KernelRef::builtin("mix").with_option("pld", RefOption::Bool(true));
        assert!(r.check_options("cuda", &["pdl"]).unwrap_err().contains("`pld`"));
        assert!(r.check_options("host", &[]).unwrap_err().contains("takes none"));
        let r = KernelRef::builtin("mix").with_option("pdl", RefOption::Int(1));
        assert!(r.bool_option("pdl").unwrap_err().contains("true or false"));
        assert_eq!(KernelRef::builtin("mix").bool_option("pdl"), Ok(None));
    }
}
