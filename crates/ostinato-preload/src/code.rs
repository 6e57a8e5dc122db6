//! A kernel's code, found in the image its module was loaded from, and what it does to each param
//! (the PTX access analysis of `ostinato-cuda-code`, the same one the CUDA backend binds with).
//!
//! Which code is read: the code that runs. In a fat binary that is the cubin for the device's
//! architecture (same major, the highest minor not above the device's) when there is one, and then
//! only the PTX of that same architecture stands for it (a PTX of another architecture may differ by
//! `__CUDA_ARCH__`); without a cubin, the PTX the driver would compile (the highest architecture not
//! above the device's). A compressed PTX (zstd, nvcc's default, or LZ4) is decompressed and read, and
//! machine code alone is not analysed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use serde::Serialize;

use ostinato::contract::Observed;
use ostinato_cuda_code::ptx;

use crate::fatbin::{self, Kind};
use crate::image::{self, Format};
use crate::store::{Image, ImageId};
use crate::triton_cache;

/// What was read of one kernel's code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CodeStatus {
    /// The PTX was read: the access of each param (`None` for a param that holds no device pointer).
    Analysed {
        /// `image 0123456789abcdef, PTX sm_90`.
        source: String,
        #[serde(skip)]
        access: Vec<Option<Observed>>,
        /// Writes to module-scope variables (state every launch shares), as `instruction (where)`.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        module_writes: Vec<String>,
        /// Whether the kernel may start on a programmatic (PDL) edge: its wait certified from the PTX.
        pdl: PdlCode,
    },
    /// The code is not known or not analysed, and why.
    NotAnalysed { why: String },
}

/// What the PTX says of a kernel's `griddepcontrol.wait` (`ostinato_cuda_code::ptx::prewait`, the
/// certificate behind every programmatic edge the CUDA backend submits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "pdl", rename_all = "snake_case")]
pub enum PdlCode {
    /// Every path waits before it writes memory, and reads before the wait only through `reads`
    /// (param indices); `atomics`: params updated atomically before the wait.
    Certified {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        reads: Vec<usize>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        atomics: Vec<usize>,
        early_trigger: bool,
    },
    /// Not certified, and why (no wait, a store before it, ...).
    NotCertified { why: String },
}

impl PdlCode {
    /// The certificate of `entry`, where `pointer[i]` says param `i` is a buffer.
    fn of(module: &ptx::ModuleInfo, entry: &ptx::Entry, pointer: &[bool]) -> PdlCode {
        match ptx::prewait::certify(module, entry, &|i| pointer.get(i).copied().unwrap_or(false)) {
            Ok(p) => PdlCode::Certified { reads: p.reads, atomics: p.atomics, early_trigger: p.early_trigger },
            Err(why) => PdlCode::NotCertified { why },
        }
    }
}

impl CodeStatus {
    fn not(why: impl Into<String>) -> CodeStatus {
        CodeStatus::NotAnalysed { why: why.into() }
    }
}

/// The code of an entry that runs on the device.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Found<'a> {
    Ptx {
        arch: u32,
        /// Borrowed from the image, or decompressed.
        text: std::borrow::Cow<'a, str>,
    },
    /// Its PTX is compressed with this codec.
    Compressed { arch: u32, codec: &'static str },
    /// Machine code, with no PTX of its architecture.
    MachineOnly { arch: u32, cubin: Option<&'a [u8]> },
}

/// Whether code for `arch` runs on a device of `device` (both `90` for sm_90): machine code of the
/// same major and a minor not above; PTX of any architecture not above.
fn cubin_runs(arch: u32, device: u32) -> bool {
    arch / 10 == device / 10 && arch <= device
}

/// The code in `image` that runs on `device`.
fn find(image: &[u8], device: u32) -> Result<Found<'_>, String> {
    let mut prefix = Vec::new();
    while image::wants_byte(&prefix) && prefix.len() < image.len() {
        prefix.push(image[prefix.len()]);
    }
    match image::format(&prefix) {
        Format::Ptx => {
            let end = image.iter().position(|&b| b == 0).unwrap_or(image.len());
            let text = std::str::from_utf8(&image[..end]).map_err(|e| format!("the PTX text is not UTF-8: {e}"))?;
            Ok(Found::Ptx { arch: 0, text: std::borrow::Cow::Borrowed(text) })
        }
        Format::Elf => Ok(Found::MachineOnly { arch: device, cubin: Some(image) }),
        Format::Wrapper => Err("a fat binary wrapper, not its fat binary".into()),
        Format::Fatbin => find_in_fatbin(image, device),
    }
}

fn find_in_fatbin(image: &[u8], device: u32) -> Result<Found<'_>, String> {
    let entries = fatbin::parse(image).map_err(|e| e.to_string())?;
    let cubin = entries.iter().filter(|e| e.kind == Kind::Elf && cubin_runs(e.arch, device)).max_by_key(|e| e.arch);
    let ptx = |want: &dyn Fn(u32) -> bool| entries.iter().filter(|e| e.kind == Kind::Ptx && want(e.arch)).max_by_key(|e| e.arch);
    let chosen = match cubin {
        Some(c) => match ptx(&|a| a == c.arch) {
            Some(p) => p,
            None => return Ok(Found::MachineOnly { arch: c.arch, cubin: c.elf() }),
        },
        None => ptx(&|a| a <= device).ok_or_else(|| format!("no code in the fat binary runs on sm_{device}"))?,
    };
    match (chosen.ptx_text().map_err(|e| e.to_string())?, chosen.compression()) {
        (Some(text), _) => Ok(Found::Ptx { arch: chosen.arch, text }),
        (None, Some(codec)) => Ok(Found::Compressed { arch: chosen.arch, codec }),
        (None, None) => Err(format!("the PTX of sm_{} is not UTF-8", chosen.arch)),
    }
}

/// The number of params `entry` takes, as its code declares it (the PTX `.entry`, or the cubin's
/// `.nv.info.<entry>`), where the image shows it.
pub fn param_count(image: &Image, entry: &str, device: u32) -> Option<usize> {
    if let Ok(Found::Ptx { text, .. }) = find(&image.bytes, device) {
        if let Ok(params) = ptx::parse::entry_params(&text, entry) {
            return Some(params.len());
        }
    }
    let cubin = running_cubin(&image.bytes, device)?;
    ostinato_cuda_code::cubin::entry_params(cubin, entry).ok().map(|p| p.len())
}

/// The plain cubin in `image` that runs on `device`.
fn running_cubin(image: &[u8], device: u32) -> Option<&[u8]> {
    if image.starts_with(b"\x7fELF") {
        return Some(image);
    }
    let entries = fatbin::parse(image).ok()?;
    entries.iter().filter(|e| e.kind == Kind::Elf && cubin_runs(e.arch, device)).max_by_key(|e| e.arch).and_then(|e| e.elf())
}

/// Reads what `entry` of `image` does to each param on `device`; `pointer[i]`: param `i` holds a
/// device pointer (it is a buffer). A bare cubin (how Triton loads a kernel) is read through the PTX
/// Triton compiled it from, where Triton's cache holds it ([`crate::triton_cache`]); the cache is
/// searched once per image (a kernel is compiled into the cache before it is loaded, so a miss stays
/// one), and what was found — the PTX file's path, not its text — is remembered for at most
/// [`MAX_TRITON_LOOKUPS`] images.
pub fn analyse(image: &Image, entry: &str, device: u32, pointer: &[bool]) -> CodeStatus {
    static FOUND: OnceLock<Mutex<HashMap<ImageId, Option<PathBuf>>>> = OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    let triton = |cubin: &[u8]| {
        let known = found.lock().ok().and_then(|f| f.get(&image.id).cloned());
        let path = known.unwrap_or_else(|| {
            let path = triton_cache::default_root(|k| std::env::var(k).ok()).and_then(|root| triton_cache::find(&root, cubin));
            if let Ok(mut f) = found.lock() {
                if f.len() >= MAX_TRITON_LOOKUPS {
                    f.clear();
                }
                f.insert(image.id, path.clone());
            }
            path
        });
        path.and_then(|p| triton_cache::read_ptx(&p))
    };
    analyse_with(image, entry, device, pointer, &triton)
}

/// The most images whose Triton-cache lookup is remembered (past it, the memory starts over).
pub const MAX_TRITON_LOOKUPS: usize = 1 << 16;

/// [`analyse`], with `beside(cubin)` giving the PTX a bare cubin was compiled from (machine code inside
/// a fat binary is never looked up: Triton loads bare cubins).
pub fn analyse_with(image: &Image, entry: &str, device: u32, pointer: &[bool], beside: &dyn Fn(&[u8]) -> Option<String>) -> CodeStatus {
    let (source, text) = match find(&image.bytes, device) {
        Err(why) => return CodeStatus::not(format!("image {}: {why}", image.id)),
        Ok(Found::Compressed { arch, codec }) => {
            return CodeStatus::not(format!("image {}: the PTX of sm_{arch} is compressed ({codec}), not analysed", image.id))
        }
        // Only where the image is the cubin itself (a bare cubin): machine code inside a fat binary is
        // not Triton's.
        Ok(Found::MachineOnly { arch, cubin }) => match cubin.filter(|c| std::ptr::eq(*c, image.bytes.as_slice())).and_then(beside) {
            Some(ptx) => (format!("image {}, PTX beside its cubin in Triton's cache", image.id), std::borrow::Cow::Owned(ptx)),
            None => return CodeStatus::not(format!("image {}: machine code only (sm_{arch}), no PTX of its architecture to analyse", image.id)),
        },
        Ok(Found::Ptx { arch: 0, text }) => (format!("image {}, PTX", image.id), text),
        Ok(Found::Ptx { arch, text }) => (format!("image {}, PTX sm_{arch}", image.id), text),
    };
    let parsed = match ptx::parse::entry(&text, entry) {
        Ok(p) => p,
        Err(why) => return CodeStatus::not(format!("{source}: {why}")),
    };
    if parsed.params.len() != pointer.len() {
        return CodeStatus::not(format!("{source}: `.entry` takes {} params, the function {}", parsed.params.len(), pointer.len()));
    }
    let module = ptx::ModuleInfo::read(&text);
    if !pointer.iter().any(|&p| p) && touches_memory(&module, &parsed, &source) {
        return CodeStatus::not(format!("{source}: the kernel accesses memory but no param holds a device allocation"));
    }
    let access = ptx::entry_access(&module, &parsed, &source, &|i| pointer.get(i).copied().unwrap_or(false));
    CodeStatus::Analysed {
        source,
        access: access.params.iter().zip(pointer).map(|(u, &p)| p.then(|| u.observed())).collect(),
        module_writes: access.module_writes.iter().map(|e| e.to_string()).collect(),
        pdl: PdlCode::of(&module, &parsed, pointer),
    }
}

/// Whether any param, read as a buffer, is accessed: with no buffer param the analysis attributes an
/// access of unknown origin to none, so this asks with every param a buffer.
fn touches_memory(module: &ptx::ModuleInfo, entry: &ptx::Entry, source: &str) -> bool {
    ptx::entry_access(module, entry, source, &|_| true).params.iter().any(|u| u.observed() != Observed::None)
}

#[cfg(test)]
#[path = "code_tests.rs"]
mod tests;
