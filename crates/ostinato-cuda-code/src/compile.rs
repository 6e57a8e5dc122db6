//! CUDA C compiled with NVRTC, through an on-disk cache. One compile gives the PTX (what the contract
//! analyses read) and, for the device's real architecture, the cubin (the machine code that is loaded
//! and that the SASS checks read). The cache key is the BLAKE3 hash of every input of the compile —
//! the source text, the options (architecture, the PDL trigger, `-lineinfo`), NVRTC's version — and it
//! is the `compile_key` of the kernel's build manifest ([`crate::manifest`]), so a manifest names the
//! cache entry it came from. A CUDA C source that places its `griddepcontrol` through Ostinato's
//! macros is built in several variants ([`PdlTrigger`]).
//!
//! NVRTC reads no header from disk: besides its built-in headers (which come with its version, in the
//! key) a program may include only Ostinato's kernel header (`ostinato.cuh`, given in memory and in the
//! key), so the source and that header are the whole input.

use std::path::PathBuf;

use crate::error::Result;
use crate::nvrtc;

/// Ostinato's kernel header (`#include "ostinato.cuh"` in any CUDA C that Ostinato compiles): the
/// `OST_ENTRY`/`OST_EXIT` macros with which a kernel is built in each trigger variant.
pub const KERNEL_HEADER: &str = include_str!("../../../kernels/ostinato.cuh");

/// Where a PDL-capable kernel lets its dependents launch (the `OST_TRIGGER` macro of our sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PdlTrigger {
    /// Never triggers: dependents launch when it completes.
    Never,
    /// Triggers at entry, before waiting on its own predecessors.
    AtEntry,
    /// Triggers after its last write.
    AfterWrites,
    /// Triggers right after its own wait: dependents launch once it runs, one kernel ahead at most.
    AfterWait,
    /// Compiled without any `griddepcontrol` (not PDL-capable; for measurement).
    Disabled,
}

impl PdlTrigger {
    /// The NVRTC option that selects this build (`-DOST_TRIGGER=n`, `-DOST_NO_PDL=1`).
    pub fn define(self) -> String {
        match self {
            PdlTrigger::Disabled => "-DOST_NO_PDL=1".into(),
            t => format!("-DOST_TRIGGER={}", t as u8),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            PdlTrigger::Never => "never",
            PdlTrigger::AtEntry => "entry",
            PdlTrigger::AfterWrites => "after-writes",
            PdlTrigger::AfterWait => "after-wait",
            PdlTrigger::Disabled => "disabled",
        }
    }
}

impl ostinato::Named for PdlTrigger {
    const ALL: &'static [Self] = &[PdlTrigger::AfterWait, PdlTrigger::AtEntry, PdlTrigger::AfterWrites, PdlTrigger::Never, PdlTrigger::Disabled];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// The on-disk NVRTC cache directory: `OSTINATO_CACHE_DIR`, else `$XDG_CACHE_HOME/ostinato/nvrtc`, else
/// `~/.cache/ostinato/nvrtc`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OSTINATO_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ostinato").join("nvrtc")
}

/// NVRTC's options for a build of `trigger` for `arch` (`sm_90`): PTX and the cubin, with line
/// information (`.loc`: the contract names source lines; it changes no generated instruction).
pub fn options(arch: &str, trigger: PdlTrigger) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "-default-device".into(), "--std=c++17".into(), "-lineinfo".into(), trigger.define()]
}

/// One compile's result and what it was made from.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub ptx: String,
    /// The machine code for `arch`, where NVRTC made one.
    pub cubin: Option<Vec<u8>>,
    /// BLAKE3 of the inputs (hex): the cache entry's name and the manifest's compile key.
    pub key: String,
    /// NVRTC's version.
    pub nvrtc: (i32, i32),
    pub options: Vec<String>,
    /// Whether it came from the cache.
    pub cache_hit: bool,
}

/// The cache key of a compile of `source` with `options` by NVRTC `version`: each part length-prefixed,
/// so no two different inputs hash the same bytes.
pub fn key(source: &str, options: &[String], version: (i32, i32)) -> String {
    let joined = options.join(" ");
    let ver = format!("{}.{}", version.0, version.1);
    let mut hasher = blake3::Hasher::new();
    for part in [b"ostinato-nvrtc-v3".as_slice(), source.as_bytes(), KERNEL_HEADER.as_bytes(), joined.as_bytes(), ver.as_bytes()] {
        hasher.update(&(part.len() as u64).to_le_bytes()).update(part);
    }
    hasher.finalize().to_hex()[..32].to_string()
}

/// Compiles `source` (named `name` in messages and `.file`) for `arch` in the `trigger` build, through
/// the cache.
pub fn compile(name: &str, source: &str, arch: &str, trigger: PdlTrigger) -> Result<Compiled> {
    let options = options(arch, trigger);
    let ((maj, min), _) = nvrtc::version()?;
    let key = key(source, &options, (maj, min));
    let dir = cache_dir();
    let (ptx_path, cubin_path) = (dir.join(format!("{key}.ptx")), dir.join(format!("{key}.cubin")));
    // A virtual architecture (`compute_90`) makes PTX only.
    let wants_cubin = !arch.starts_with("compute_");
    // A cache entry is read as any kernel file is (capped, a regular file); one that cannot be is a miss.
    use ostinato::capped_read::{read_bytes, read_text, KERNEL_FILE};
    if let Ok(ptx) = read_text(&ptx_path, KERNEL_FILE) {
        let cubin = read_bytes(&cubin_path, KERNEL_FILE).ok().filter(|c| !c.is_empty());
        if ptx.contains(".version") && (cubin.is_some() || !wants_cubin) {
            return Ok(Compiled { ptx, cubin, key, nvrtc: (maj, min), options, cache_hit: true });
        }
    }
    let out = nvrtc::compile(source, name, &options)?;
    // Best effort: a cache that cannot be written only costs a recompile next time. The cubin goes
    // first: a PTX entry without its cubin is never read as a hit.
    if std::fs::create_dir_all(&dir).is_ok() {
        if let Some(cubin) = &out.cubin {
            write_atomically(&dir, &cubin_path, cubin);
        }
        write_atomically(&dir, &ptx_path, out.ptx.as_bytes());
    }
    Ok(Compiled { ptx: out.ptx, cubin: out.cubin, key, nvrtc: (maj, min), options, cache_hit: false })
}

fn write_atomically(dir: &std::path::Path, path: &std::path::Path, bytes: &[u8]) {
    let tmp = dir.join(format!("{}.{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"), std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_every_input() {
        let o = options("sm_90", PdlTrigger::AfterWait);
        let k = key("src", &o, (13, 0));
        assert_eq!(k.len(), 32);
        assert_ne!(k, key("src2", &o, (13, 0)));
        assert_ne!(k, key("src", &options("sm_89", PdlTrigger::AfterWait), (13, 0)));
        assert_ne!(k, key("src", &options("sm_90", PdlTrigger::AtEntry), (13, 0)));
        assert_ne!(k, key("src", &o, (13, 1)));
        assert_eq!(k, key("src", &o, (13, 0)));
    }

    #[test]
    fn every_build_is_found_by_its_name_and_has_its_own_define() {
        use ostinato::Named;
        let mut defines: Vec<String> = PdlTrigger::ALL.iter().map(|t| t.define()).collect();
        for &t in PdlTrigger::ALL {
            assert_eq!(PdlTrigger::from_name(t.name()), Some(t));
        }
        defines.sort_unstable();
        defines.dedup();
        assert_eq!(defines.len(), PdlTrigger::ALL.len(), "two builds share a define");
        assert_eq!(PdlTrigger::from_name("no-such-build"), None);
    }
}
