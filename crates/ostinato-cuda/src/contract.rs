//! The CUDA side of the kernel contract (docs/contract.md): what a kernel's code does, read at bind
//! time from its PTX (or, for a `.cubin`, from its SASS where it is declared PDL-capable), checked
//! against the graph's declaration by the core's rule ([`ostinato::contract::verify`]).
//!
//! The same reading serves `ostinato plan --cuda` and `ostinato kernels` without a device
//! ([`read_reference`]): `.ptx` files are read as they are, CUDA C and the built-ins are compiled by
//! NVRTC (where it is found) for the architecture asked.

use std::path::Path;

use ostinato::contract::{Broader, CodeAccess, Evidence, ParamUse, Seen};
use ostinato::{KernelRef, KernelSig, ParamKind};

use crate::error::{CudaError, Result};
use crate::module::{ModuleSource, PdlTrigger, BUILTIN_PARTS};
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

/// The module's declarations, with the built-in source's lines mapped back to their files.
pub fn module_info(ptx: &str, builtin: bool) -> ModuleInfo {
    let mut m = ModuleInfo::read(ptx);
    if builtin {
        let mut first = 1u32;
        for (name, text) in BUILTIN_PARTS {
            m.parts.push((name.to_string(), first));
            first += text.lines().count() as u32 + 1;
        }
    }
    m
}

/// Reads `entry` of a module's PTX: its access per param and its pre-wait certificate. `name` names the
/// module in messages (`kernels/mix.cu`, `builtin`); `builtin`: the PTX of the built-in source.
pub fn read_ptx(ptx: &str, name: &str, builtin: bool, entry: &str, sig: &KernelSig) -> Result<KernelReport> {
    read_ptx_with(&module_info(ptx, builtin), ptx, name, entry, sig)
}

/// [`read_ptx`] with the module's declarations already read.
pub fn read_ptx_with(module: &ModuleInfo, ptx: &str, name: &str, entry: &str, sig: &KernelSig) -> Result<KernelReport> {
    let code = format!("{name} (PTX)");
    let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
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

/// What `read_reference` found for one kernel without a device.
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

/// Reads the code `reference` names for `sig` without a device, compiling CUDA C (and the built-ins) for
/// `arch` (`sm_90`) with NVRTC. `Err` where the code cannot be read here (no NVRTC, a missing file).
/// The declarations are not checked yet ([`verify`] does).
pub fn read_reference(sig: &KernelSig, reference: &KernelRef, arch: &str) -> Result<OfflineKernel> {
    let entry = reference.entry_for(&sig.name).to_string();
    let source = match reference.builtin_name() {
        Some(_) => ModuleSource::builtin(),
        None => ModuleSource::from_ref(reference)?,
    };
    match &source {
        ModuleSource::CudaC { name, source } => {
            let compiled = crate::compile::compile(name, source, arch, PdlTrigger::AfterWait)?;
            let builtin = reference.builtin_name().is_some();
            let report = read_ptx(&compiled.ptx, &display(name), builtin, &entry, sig)?;
            Ok(OfflineKernel {
                report,
                ptx: Some(compiled.ptx.clone()),
                cubin: compiled.cubin.clone(),
                source: (name.clone(), source.clone().into_bytes()),
                compiled: Some(compiled),
            })
        }
        ModuleSource::Ptx { name, text } => {
            let report = read_ptx(text, &display(name), false, &entry, sig)?;
            Ok(OfflineKernel { report, ptx: Some(text.clone()), cubin: None, source: (name.clone(), text.clone().into_bytes()), compiled: None })
        }
        ModuleSource::Assembled { name, ptx, cubin } => {
            let report = read_ptx(ptx, &display(name), false, &entry, sig)?;
            Ok(OfflineKernel { report, ptx: Some(ptx.clone()), cubin: Some(cubin.clone()), source: (name.clone(), ptx.clone().into_bytes()), compiled: None })
        }
        ModuleSource::Cubin { name, bytes } => {
            let code = format!("{} (machine code)", display(name));
            let access = unread(sig, &code, "machine code: the access analysis reads PTX");
            let report = KernelReport {
                code,
                access,
                broader: Vec::new(),
                pre_wait: Err("machine code: read only where declared PDL-capable, on a device".into()),
                noncoherent: Vec::new(),
                target: None,
            };
            Ok(OfflineKernel { report, ptx: None, cubin: Some(bytes.clone()), source: (name.clone(), bytes.clone()), compiled: None })
        }
    }
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
}
