//! Graph files and the kernel contract: loading a file with its `infer` params settled from the code
//! ([`load_file`]), checking its declarations against one backend's code without a device
//! ([`check_file`]), the PDL certificates `ostinato plan --cuda` lowers with ([`cuda_pdl`]), and every
//! kernel's build manifest ([`manifests`], what `ostinato kernels` prints).

use std::path::Path;

use ostinato::file::{self, FileError, GraphFile};
use ostinato::manifest::KernelManifest;

use crate::contract::{self, Checked, Inferred};
use crate::error::RuntimeError;
use crate::kind::BackendKind;

/// Loads a graph file and settles every param declared `infer` from its kernel's code; an error names
/// the kernel's line.
pub fn load_file(path: &Path) -> Result<(GraphFile, Vec<Inferred>), RuntimeError> {
    let mut f = file::load(path, &BackendKind::names())?;
    let inferred = contract::resolve_inferred(&mut f.graph, &f.impls).map_err(|(k, e)| RuntimeError::File(f.kernel_error(k, e.to_string())))?;
    Ok((f, inferred))
}

/// Checks the file's declarations against its `backend` implementations' code, without a device. The
/// first contradiction is an error at the kernel's line.
pub fn check_file(f: &GraphFile, backend: BackendKind) -> Result<Vec<(usize, Checked)>, FileError> {
    contract::check(&f.graph, &f.impls, backend).map_err(|(k, e)| f.kernel_error(k, e.to_string()))
}

/// What `ostinato plan --cuda` knows of each kernel's PDL behaviour without a device: certified from
/// its PTX where the code can be read here (a `.ptx` file; CUDA C and the built-ins where NVRTC is
/// found), else as declared (`pdl = true`; a built-in counts as capable, as its PTX certifies at load).
#[cfg(feature = "cuda")]
pub fn cuda_pdl(f: &GraphFile) -> Vec<ostinato_cuda::lower::KernelPdl> {
    use ostinato_cuda::lower::KernelPdl;
    f.graph
        .kernels()
        .iter()
        .enumerate()
        .map(|(k, sig)| {
            let Some(r) = f.impls.get(k).and_then(|m| m.get("cuda")) else { return KernelPdl::plain(false) };
            let declared = r.bool_option("pdl").ok().flatten();
            match ostinato_cuda::contract::read_reference(sig, r, contract::OFFLINE_CUDA_ARCH).map(|o| o.report.pre_wait) {
                Ok(Ok(p)) => KernelPdl {
                    capable: declared.unwrap_or(true),
                    declared: declared == Some(true),
                    pre_wait_reads: p.reads,
                    pre_wait_atomics: p.atomics,
                    early_trigger: p.early_trigger,
                    ..KernelPdl::default()
                },
                Ok(Err(_)) => KernelPdl::plain(false),
                Err(_) => KernelPdl { capable: declared.unwrap_or(r.builtin_name().is_some()), declared: declared == Some(true), ..KernelPdl::default() },
            }
        })
        .collect()
}

/// The build manifest of every kernel of `f` that has a `backend` implementation. CUDA: bound on the
/// device where a driver and device are found (resources from the driver, machine code from
/// `nvdisasm` where found), else compiled and read without one. Vulkan: from naga's module. Host: the
/// built-in's own specification.
pub fn manifests(f: &GraphFile, backend: BackendKind) -> Result<Vec<KernelManifest>, RuntimeError> {
    let mut out = Vec::new();
    #[cfg(feature = "cuda")]
    let cuda = match backend {
        BackendKind::Cuda if ostinato_cuda::driver_available() => Some(open_cuda()?),
        _ => None,
    };
    for (k, sig) in f.graph.kernels().iter().enumerate() {
        let Some(r) = f.impls.get(k).and_then(|m| m.get(backend.as_str())) else { continue };
        let at = |m: String| RuntimeError::File(f.kernel_error(k, m));
        let m = match backend {
            BackendKind::Host => {
                let code = contract::read_code(sig, backend, r).map_err(|e| at(e.to_string()))?;
                let broader = ostinato::contract::verify(sig, &code).map_err(|e| at(e.to_string()))?;
                let mut m = KernelManifest::new(sig, "host", r.entry_for(&sig.name));
                m.source.push(ostinato::manifest::Hashed::of(&r.source, r.source.as_bytes()));
                m.set_access(sig, &code, &broader);
                m.notes.push("a host built-in: its signature is its specification".into());
                m
            }
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => match &cuda {
                Some(b) => {
                    use ostinato::Backend;
                    let kernel = b.bind_kernel(sig, r).map_err(|e| at(e.to_string()))?;
                    ostinato_cuda::manifest::of_kernel(&kernel, true, true)
                }
                None => {
                    let entry = r.entry_for(&sig.name).to_string();
                    let mut o = ostinato_cuda::contract::read_reference(sig, r, contract::OFFLINE_CUDA_ARCH).map_err(|e| at(e.to_string()))?;
                    ostinato_cuda_code::contract::verify(sig, &mut o.report).map_err(|e| at(e.to_string()))?;
                    ostinato_cuda_code::manifest::of_offline(sig, &entry, &o, true)
                }
            },
            #[cfg(feature = "vulkan")]
            BackendKind::Vulkan => ostinato_vulkan::access::manifest(sig, r).map_err(at)?,
            #[cfg(feature = "hsa")]
            BackendKind::Hsa => crate::hsa::manifest(sig, r).map_err(at)?,
            #[allow(unreachable_patterns)]
            other => return Err(RuntimeError::Backend { name: other.as_str().into(), reason: "this build does not contain it".into() }),
        };
        out.push(m);
    }
    Ok(out)
}

/// The backend whose manifests `ostinato kernels` prints where none is named: CUDA where its code can
/// be compiled and read here (NVRTC or a CUDA driver is found), else the first of Vulkan (naga reads
/// its code in-process), HSA (its code objects' metadata) and the host that the file implements a
/// kernel for. Where that is not CUDA, a note says why, for the user to see which `--backend` works.
pub fn default_backend(f: &GraphFile) -> (BackendKind, Option<String>) {
    let implements = |b: BackendKind| b.available() && f.impls.iter().any(|m| m.contains_key(b.as_str()));
    let cuda_why = cuda_unreadable();
    if implements(BackendKind::Cuda) && cuda_why.is_none() {
        return (BackendKind::Cuda, None);
    }
    let chosen = [BackendKind::Vulkan, BackendKind::Hsa, BackendKind::Host].into_iter().find(|&b| implements(b)).unwrap_or(BackendKind::Host);
    let note = match (implements(BackendKind::Cuda), cuda_why) {
        (true, Some(why)) => Some(format!("the {chosen} manifests; the CUDA ones need NVRTC or a CUDA driver, not found here ({why})")),
        _ => Some(format!("the {chosen} manifests (no kernel of the file has a CUDA implementation)")),
    };
    (chosen, note)
}

/// Why CUDA code cannot be compiled here, if it cannot.
#[cfg(feature = "cuda")]
fn cuda_unreadable() -> Option<String> {
    match ostinato_cuda_code::nvrtc::version() {
        Ok(_) => None,
        Err(_) if ostinato_cuda::driver_available() => None,
        Err(e) => Some(e.to_string()),
    }
}
#[cfg(not(feature = "cuda"))]
fn cuda_unreadable() -> Option<String> {
    Some("this build has no CUDA backend".into())
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<ostinato_cuda::CudaBackend, RuntimeError> {
    let device = ostinato_cuda::Device::open(&ostinato_cuda::DeviceSelector::from_env()?)?;
    Ok(ostinato_cuda::CudaBackend::new(&device, ostinato_cuda::CudaOptions::default())?)
}
