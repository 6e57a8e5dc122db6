//! The NVIDIA side of the kernel contract (docs/contract.md): what a kernel's code does, read from its
//! PTX ([`read_ptx`]; for a `.cubin` declared PDL-capable the backend reads its SASS, [`crate::sass`]),
//! checked against the graph's declaration by the core's rule ([`verify`], [`ostinato::contract::verify`]).
//! No device is involved: the CUDA backend reads what it loads through here at bind time, and
//! `ostinato plan --cuda` and `ostinato kernels` read the same code without a device.

use std::path::Path;

use ostinato::contract::{Broader, CodeAccess, Evidence, ParamUse, Seen};
use ostinato::{KernelSig, ParamKind};

use crate::error::{CodeError, Result};
use crate::ptx::{self, ModuleInfo, PreWait};

/// What Ostinato read from one kernel's code.
#[derive(Clone, Debug)]
pub struct KernelReport {
    /// The code, for messages: `kernels/user_mix.cu (PTX)`.
    pub code: String,
    /// The access per param the code shows.
    pub access: CodeAccess,
    /// Declarations broader than the code (set once verified).
    pub broader: Vec<Broader>,
    /// The pre-wait certificate, or why there is none.
    pub pre_wait: std::result::Result<PreWait, String>,
    /// Params read through the non-coherent path, with the first instruction.
    pub noncoherent: Vec<(usize, String)>,
    /// The PTX `.target`, where there is PTX.
    pub target: Option<String>,
}

/// Whether param `i` of `sig` is a buffer.
pub fn is_buffer(sig: &KernelSig) -> impl Fn(usize) -> bool + '_ {
    |i| sig.params.get(i).is_some_and(|p| matches!(p.kind, ParamKind::Buffer(_)))
}

/// The module's declarations, with the lines of a source joined from several files mapped back to
/// them: `parts` are `(file name, text)` in the order they were joined, one newline between two (the
/// backend's built-in source); empty for a source of one file.
pub fn module_info(ptx: &str, parts: &[(&str, &str)]) -> ModuleInfo {
    let mut m = ModuleInfo::read(ptx);
    let mut first = 1u32;
    for (name, text) in parts {
        m.parts.push((name.to_string(), first));
        first += text.lines().count() as u32 + 1;
    }
    m
}

/// Reads `entry` of a module's PTX: its access per param and its pre-wait certificate. `name` names the
/// module in messages (`kernels/mix.cu`, `builtin`); `parts`: the files its source was joined from
/// ([`module_info`]).
pub fn read_ptx(ptx: &str, name: &str, parts: &[(&str, &str)], entry: &str, sig: &KernelSig) -> Result<KernelReport> {
    read_ptx_with(&module_info(ptx, parts), ptx, name, entry, sig)
}

/// [`read_ptx`] with the module's declarations already read.
pub fn read_ptx_with(module: &ModuleInfo, ptx: &str, name: &str, entry: &str, sig: &KernelSig) -> Result<KernelReport> {
    let code = format!("{name} (PTX)");
    let refuse = |reason: String| CodeError::Kernel { kernel: sig.name.clone(), reason };
    let parsed = ptx::parse::entry(ptx, entry).map_err(refuse)?;
    if parsed.params.len() != sig.params.len() {
        return Err(refuse(format!("`{entry}` takes {} params but the graph's signature has {}", parsed.params.len(), sig.params.len())));
    }
    let buffers = is_buffer(sig);
    let access = ptx::entry_access(module, &parsed, name, &buffers);
    let pre_wait = ptx::prewait::certify(module, &parsed, &buffers);
    let noncoherent = access.noncoherent.iter().map(|(p, e)| (*p, e.instruction.clone())).collect();
    Ok(KernelReport { access: access.code_access(&code, &buffers), code, broader: Vec::new(), pre_wait, noncoherent, target: module.target.clone() })
}

/// The access of code the analysis does not read (machine code): unknown for every buffer param.
pub fn unread(sig: &KernelSig, code: &str, why: &str) -> CodeAccess {
    let ev = Evidence { instruction: why.to_string(), at: code.to_string() };
    let params = sig
        .params
        .iter()
        .map(|p| matches!(p.kind, ParamKind::Buffer(_)).then(|| ParamUse { read: Seen::Unknown(ev.clone()), write: Seen::Unknown(ev.clone()) }))
        .collect();
    CodeAccess { code: code.to_string(), params, undeclarable: Vec::new() }
}

/// Checks `sig`'s declarations against `report` (the core's rule), keeping the broader ones.
pub fn verify(sig: &KernelSig, report: &mut KernelReport) -> Result<()> {
    report.broader = ostinato::contract::verify(sig, &report.access)?;
    Ok(())
}

/// Whether PTX for `target` (`sm_90`, `sm_90a`, `sm_100f`) runs on a device of compute capability `cc`:
/// a plain target on that architecture or a newer one (the driver compiles it), an `a` target on
/// exactly that architecture, an `f` target on that family (same major, same or newer minor).
pub fn check_target(target: &str, cc: (i32, i32)) -> std::result::Result<(), String> {
    let t = target.trim();
    let digits = t.strip_prefix("sm_").ok_or_else(|| format!("PTX `.target {t}` names no sm_ architecture"))?;
    let (num, suffix) = digits.split_at(digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len()));
    let n: i32 = num.parse().map_err(|_| format!("PTX `.target {t}` is not an architecture"))?;
    let (major, minor) = (n / 10, n % 10);
    let device = format!("sm_{}{}", cc.0, cc.1);
    let ok = match suffix {
        "" => cc >= (major, minor),
        "a" => cc == (major, minor),
        "f" => cc.0 == major && cc.1 >= minor,
        _ => return Err(format!("PTX `.target {t}`: unknown architecture suffix `{suffix}`")),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("the PTX is for `{t}`, which does not run on this device ({device}): compile it for {device} or an older architecture"))
    }
}

/// What was read of one kernel's code without a device (the CUDA backend's `read_reference`).
#[derive(Clone, Debug)]
pub struct OfflineKernel {
    pub report: KernelReport,
    /// The PTX read (for the manifest's hashes).
    pub ptx: Option<String>,
    /// The cubin, where there is one (compiled for `arch`, or the file itself).
    pub cubin: Option<Vec<u8>>,
    /// How CUDA C was compiled (NVRTC's version, options, cache key).
    pub compiled: Option<crate::compile::Compiled>,
    /// The source text (CUDA C or PTX) or file bytes, and its name.
    pub source: (String, Vec<u8>),
}

/// A module name as messages show it: a path relative to the working directory where it is under it.
pub fn display(name: &str) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    Path::new(name).strip_prefix(&cwd).map_or_else(|_| name.to_string(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_targets_against_devices() {
        assert!(check_target("sm_90", (9, 0)).is_ok());
        assert!(check_target("sm_80", (9, 0)).is_ok(), "older PTX is compiled for the newer device");
        assert!(check_target("sm_90a", (9, 0)).is_ok());
        let e = check_target("sm_100", (9, 0)).unwrap_err();
        assert!(e.contains("sm_100") && e.contains("sm_90"), "{e}");
        assert!(check_target("sm_90a", (10, 0)).is_err(), "an `a` target runs on its architecture only");
        assert!(check_target("sm_100f", (10, 3)).is_ok());
        assert!(check_target("sm_100f", (12, 0)).is_err());
        assert!(check_target("compute_90", (9, 0)).is_err());
    }

    #[test]
    fn the_lines_of_a_joined_source_map_back_to_its_files() {
        let ptx = ".version 8.0\n.target sm_90\n";
        assert!(module_info(ptx, &[]).parts.is_empty());
        // `a.cu` has 3 lines, then the joining newline: `b.cu` starts at line 5.
        let m = module_info(ptx, &[("a.cu", "1\n2\n3\n"), ("b.cu", "x\n")]);
        assert_eq!(m.parts, vec![("a.cu".to_string(), 1), ("b.cu".to_string(), 5)]);
    }
}
