//! The kernel contract across backends (docs/contract.md): each implementation's code read by its
//! backend's analysis — CUDA's PTX (NVRTC for CUDA C and the built-ins, where it is found), Vulkan's
//! naga module, the host's built-ins (their own specification) — and the core's rule applied to it:
//! `infer` declarations resolved before planning ([`resolve_inferred`]), declared ones checked
//! ([`check`]) for `ostinato plan` without a device. Binding a kernel on a backend checks it again,
//! against the code that actually runs.

use std::collections::BTreeMap;

use ostinato::contract::{Broader, CodeAccess, ContractError};
use ostinato::{Graph, KernelId, KernelRef, KernelSig};

use crate::kind::BackendKind;

/// The architecture CUDA code is compiled for where no device is open: the plan does not depend on it
/// (the access a kernel's code shows is the same PTX for every target).
pub const OFFLINE_CUDA_ARCH: &str = "sm_90";

/// The access `reference` (an implementation for `backend`) shows for `sig`, or why it cannot be read
/// here (no NVRTC, a backend this build lacks, a host function).
pub fn read_code(sig: &KernelSig, backend: BackendKind, reference: &KernelRef) -> Result<CodeAccess, String> {
    match backend {
        BackendKind::Host => {
            let name = reference.builtin_name().ok_or("the host backend's kernels are its built-ins")?;
            let name = reference.entry_for(if name.is_empty() { &sig.name } else { name });
            let k = ostinato_host::builtins::lookup(name).ok_or_else(|| format!("no host built-in `{name}`"))?;
            if k.sig.params.len() != sig.params.len() {
                return Err(format!("the host built-in `{name}` takes {} params, the signature {}", k.sig.params.len(), sig.params.len()));
            }
            Ok(ostinato::contract::specified(&k.sig, &format!("host builtin:{name}")))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => ostinato_cuda::contract::read_reference(sig, reference, OFFLINE_CUDA_ARCH).map(|k| k.report.access).map_err(|e| e.to_string()),
        #[cfg(feature = "vulkan")]
        BackendKind::Vulkan => ostinato_vulkan::access::read_reference(sig, reference).and_then(|code| ostinato_vulkan::access::code_access(sig, &code)),
        #[allow(unreachable_patterns)]
        other => Err(format!("this build has no {other} backend")),
    }
}

/// An `infer` param settled from the code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    pub kernel: String,
    pub param: String,
    pub access: ostinato::Access,
    /// The implementations it was read from.
    pub from: Vec<String>,
}

/// Settles every param declared `infer` in `graph` from the code of its kernel's implementations
/// (`impls[k]`: backend name → reference): the join of what every implementation readable here does
/// (an implementation that cannot be read here is checked against the result when it binds). An
/// unknown access, or no readable implementation, is an error naming the kernel (the graph is left
/// unresolved).
pub fn resolve_inferred(graph: &mut Graph, impls: &[BTreeMap<String, KernelRef>]) -> Result<Vec<Inferred>, (usize, ContractError)> {
    let mut done = Vec::new();
    let pending: Vec<usize> = graph.kernels().iter().enumerate().filter(|(_, k)| k.pending().is_some()).map(|(i, _)| i).collect();
    for k in pending {
        let sig = graph.kernels()[k].clone();
        let mut codes = Vec::new();
        let mut unread = Vec::new();
        for (backend, reference) in impls.get(k).into_iter().flatten() {
            let Ok(kind) = backend.parse::<BackendKind>() else { continue };
            match read_code(&sig, kind, reference) {
                Ok(c) => codes.push(c),
                Err(why) => unread.push(format!("{backend}: {why}")),
            }
        }
        let unread = if unread.is_empty() { "it names no implementation".to_string() } else { unread.join("; ") };
        let modes = ostinato::contract::infer(&sig, &codes, &unread).map_err(|e| (k, e))?;
        for (p, access) in modes {
            graph
                .resolve_access(KernelId(k as u32), p, access)
                .map_err(|e| (k, ContractError::NoCode { kernel: sig.name.clone(), param: sig.params[p].name.clone(), why: e.to_string() }))?;
            done.push(Inferred { kernel: sig.name.clone(), param: sig.params[p].name.clone(), access, from: codes.iter().map(|c| c.code.clone()).collect() });
        }
    }
    Ok(done)
}

/// What the check of one kernel's implementation found.
#[derive(Clone, Debug, PartialEq)]
pub enum Checked {
    /// The declarations hold; these are broader than the code.
    Holds { code: String, broader: Vec<Broader> },
    /// The code could not be read here.
    Unread { why: String },
}

/// Checks every kernel of `graph` that has an implementation for `backend` against that code, without
/// a device. `Err((kernel, error))` for the first declaration the code contradicts.
pub fn check(graph: &Graph, impls: &[BTreeMap<String, KernelRef>], backend: BackendKind) -> Result<Vec<(usize, Checked)>, (usize, ContractError)> {
    let mut out = Vec::new();
    for (k, sig) in graph.kernels().iter().enumerate() {
        let Some(reference) = impls.get(k).and_then(|m| m.get(backend.as_str())) else { continue };
        match read_code(sig, backend, reference) {
            Ok(code) => {
                let broader = ostinato::contract::verify(sig, &code).map_err(|e| (k, e))?;
                out.push((k, Checked::Holds { code: code.code, broader }));
            }
            Err(why) => out.push((k, Checked::Unread { why })),
        }
    }
    Ok(out)
}

/// Lines for `plan --explain`: each inferred mode, and each declaration broader than the code.
pub fn explain(graph: &Graph, inferred: &[Inferred], checked: &[(BackendKind, Vec<(usize, Checked)>)]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for i in inferred {
        let _ = writeln!(s, "kernel `{}` param `{}`: inferred {} from {}", i.kernel, i.param, i.access.as_str(), i.from.join(", "));
    }
    for (backend, results) in checked {
        for (k, c) in results {
            let name = &graph.kernels()[*k].name;
            match c {
                Checked::Holds { code, broader } => {
                    for b in broader {
                        let _ = writeln!(
                            s,
                            "kernel `{name}` param `{}`: declared {}, the {backend} code ({code}) shows {} — broader than the code (it orders more than the code needs)",
                            b.param,
                            b.declared,
                            b.observed.as_str()
                        );
                    }
                }
                Checked::Unread { why } => _ = writeln!(s, "kernel `{name}`: the {backend} code was not read here ({why}); it is checked when it binds"),
            }
        }
    }
    s
}
