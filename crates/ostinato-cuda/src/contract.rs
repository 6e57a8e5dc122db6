//! The kernel contract on what a [`KernelRef`] names for the CUDA backend, read without a device: its
//! file or the code it carries, or the backend's built-in source (compiled by NVRTC, where it is
//! found, for the architecture asked). The reading itself is `ostinato_cuda_code::contract`'s; this
//! module resolves a reference to the code, as `ostinato plan --cuda` and `ostinato kernels` need.

use ostinato::{KernelRef, KernelSig};
use ostinato_cuda_code::contract::{self, KernelReport, OfflineKernel};
use ostinato_cuda_code::{compile, PdlTrigger};

use crate::error::Result;
use crate::module::{ModuleSource, BUILTIN_PARTS};

/// Reads the code `reference` names for `sig` without a device, compiling CUDA C (and the built-ins) for
/// `arch` (`sm_90`) with NVRTC. `Err` where the code cannot be read here (no NVRTC, a missing file).
/// The declarations are not checked yet ([`contract::verify`] does).
pub fn read_reference(sig: &KernelSig, reference: &KernelRef, arch: &str) -> Result<OfflineKernel> {
    let entry = reference.entry_for(&sig.name).to_string();
    let source = match reference.builtin_name() {
        Some(_) => ModuleSource::builtin(),
        None => ModuleSource::from_ref(reference)?,
    };
    match &source {
        ModuleSource::CudaC { name, source } => {
            let compiled = compile::compile(name, source, arch, PdlTrigger::AfterWait)?;
            let parts = if reference.builtin_name().is_some() { BUILTIN_PARTS } else { &[] };
            let report = contract::read_ptx(&compiled.ptx, &contract::display(name), parts, &entry, sig)?;
            Ok(OfflineKernel {
                report,
                ptx: Some(compiled.ptx.clone()),
                cubin: compiled.cubin.clone(),
                source: (name.clone(), source.clone().into_bytes()),
                compiled: Some(compiled),
            })
        }
        ModuleSource::Ptx { name, text } => {
            let report = contract::read_ptx(text, &contract::display(name), &[], &entry, sig)?;
            Ok(OfflineKernel { report, ptx: Some(text.clone()), cubin: None, source: (name.clone(), text.clone().into_bytes()), compiled: None })
        }
        ModuleSource::Assembled { name, ptx, cubin } => {
            let report = contract::read_ptx(ptx, &contract::display(name), &[], &entry, sig)?;
            Ok(OfflineKernel { report, ptx: Some(ptx.clone()), cubin: Some(cubin.clone()), source: (name.clone(), ptx.clone().into_bytes()), compiled: None })
        }
        ModuleSource::Cubin { name, bytes } => {
            let code = format!("{} (machine code)", contract::display(name));
            let access = contract::unread(sig, &code, "machine code: the access analysis reads PTX");
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
