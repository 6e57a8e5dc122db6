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

/// Why an implementation's code was not read.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// It cannot be read on this machine or by this build (no NVRTC, machine code the analysis does
    /// not read, a backend this build lacks): it is checked when it binds.
    #[error("{0}")]
    NotHere(String),
    /// The file it names cannot be read (missing, not a regular file, past its size limit): an error
    /// wherever the code is read, never a note.
    #[error(transparent)]
    File(#[from] ostinato::capped_read::ReadError),
    /// The code does not fit the signature the way binding it requires (an HSA code object's
    /// arguments): binding it would refuse it too.
    #[error("{0}")]
    Refused(String),
}

/// The access `reference` (an implementation for `backend`) shows for `sig`, or why it was not read
/// (the file it names is read as binding reads it: a missing or oversized file is [`Unread::File`]).
pub fn read_code(sig: &KernelSig, backend: BackendKind, reference: &KernelRef) -> Result<CodeAccess, Unread> {
    if backend != BackendKind::Host && reference.builtin_name().is_none() && reference.code.is_none() && reference.binary.is_none() {
        ostinato::capped_read::check(&reference.path(), ostinato::capped_read::KERNEL_FILE)?;
    }
    match backend {
        BackendKind::Host => {
            let name = reference.builtin_name().ok_or_else(|| Unread::NotHere("the host backend's kernels are its built-ins".into()))?;
            let name = reference.entry_for(if name.is_empty() { &sig.name } else { name });
            let k = ostinato_host::builtins::lookup(name).ok_or_else(|| Unread::NotHere(format!("no host built-in `{name}`")))?;
            if k.sig.params.len() != sig.params.len() {
                return Err(Unread::NotHere(format!("the host built-in `{name}` takes {} params, the signature {}", k.sig.params.len(), sig.params.len())));
            }
            Ok(ostinato::contract::specified(&k.sig, &format!("host builtin:{name}")))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            ostinato_cuda::contract::read_reference(sig, reference, OFFLINE_CUDA_ARCH).map(|k| k.report.access).map_err(|e| Unread::NotHere(e.to_string()))
        }
        #[cfg(feature = "vulkan")]
        // Code naga read but binding would refuse (storage bindings outside the signature's layout, no
        // such entry point) is refused here too.
        BackendKind::Vulkan => {
            let code = ostinato_vulkan::access::read_reference(sig, reference).map_err(Unread::NotHere)?;
            ostinato_vulkan::access::code_access(sig, &code).map_err(Unread::Refused)
        }
        #[cfg(feature = "hsa")]
        BackendKind::Hsa => crate::hsa::code_access(sig, reference),
        #[allow(unreachable_patterns)]
        other => Err(Unread::NotHere(format!("this build has no {other} backend"))),
    }
}

/// A kernel's code could not be checked against its declarations.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Contract(Box<ContractError>),
    /// An aliasing declaration the built-in it is bound to does not keep.
    #[error(transparent)]
    Alias(Box<ostinato::builtins::BuiltinError>),
    /// The file the implementation names cannot be read, or the code does not fit the signature.
    #[error("{backend} implementation: {unread}")]
    Unreadable { backend: BackendKind, unread: Box<Unread> },
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
                // Code that says nothing of a pending param (an HSA code object without `.actual_access`)
                // cannot settle it.
                Ok(c) => match sig.params.iter().zip(&c.params).find(|(p, u)| p.decl == ostinato::AccessDecl::Infer && u.is_none()) {
                    Some((p, _)) => unread.push(format!("{backend}: {} does not show how `{}` is accessed", c.code, p.name)),
                    None => codes.push(c),
                },
                Err(Unread::File(e)) => {
                    let why = format!("the {backend} implementation cannot be read: {e}");
                    return Err((
                        k,
                        ContractError::NoCode { kernel: sig.name.clone(), param: sig.pending().map_or_else(String::new, |p| p.name.clone()), why },
                    ));
                }
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
/// a device. `Err((kernel, error))` for the first declaration the code contradicts, or the first
/// implementation whose file cannot be read.
pub fn check(graph: &Graph, impls: &[BTreeMap<String, KernelRef>], backend: BackendKind) -> Result<Vec<(usize, Checked)>, (usize, CheckError)> {
    let mut out = Vec::new();
    for (k, sig) in graph.kernels().iter().enumerate() {
        let Some(reference) = impls.get(k).and_then(|m| m.get(backend.as_str())) else { continue };
        // As binding checks it (`Session::instantiate`).
        let builtin = reference.builtin_name().map(|_| reference.entry_for(&sig.name));
        ostinato::builtins::check_aliasing(sig, builtin).map_err(|e| (k, CheckError::Alias(Box::new(e))))?;
        match read_code(sig, backend, reference) {
            Ok(code) => {
                let broader = ostinato::contract::verify(sig, &code).map_err(|e| (k, CheckError::Contract(Box::new(e))))?;
                out.push((k, Checked::Holds { code: code.code, broader }));
            }
            Err(Unread::NotHere(why)) => out.push((k, Checked::Unread { why })),
            Err(unread) => return Err((k, CheckError::Unreadable { backend, unread: Box::new(unread) })),
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

/// Lines for `plan --explain`: how the Vulkan backend would take each declared tile map, per kernel and
/// param, its code read without a device (verified from the code, vouched, a built-in's stated
/// footprint, or not kept: those nodes then order as wholes there).
#[cfg(feature = "vulkan")]
pub fn explain_vulkan_tiles(graph: &Graph, impls: &[BTreeMap<String, KernelRef>]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for (k, sig) in graph.kernels().iter().enumerate() {
        let Some(reference) = impls.get(k).and_then(|m| m.get(BackendKind::Vulkan.as_str())) else { continue };
        let mapped = graph.nodes().iter().any(|n| !n.tiles.is_empty() && matches!(&n.op, ostinato::NodeOp::Kernel { kernel, .. } if kernel.index() == k));
        if !mapped {
            continue;
        }
        let uses = match ostinato_vulkan::tile_maps_of(graph, KernelId(k as u32), reference) {
            Ok(u) => u,
            Err(why) => {
                let _ = writeln!(s, "kernel `{}`: its tile maps were not checked against the vulkan code ({why}); such nodes order as wholes there", sig.name);
                continue;
            }
        };
        // Each param once, in the order the uses first name it (they come node by node).
        let mut params: Vec<&str> = Vec::new();
        for u in &uses {
            if !params.contains(&u.param.as_str()) {
                params.push(&u.param);
            }
        }
        for p in params {
            let of: Vec<&ostinato_vulkan::MapUse> = uses.iter().filter(|u| u.param == p).collect();
            let count = |want: ostinato_vulkan::MapKept| of.iter().filter(|u| u.kept == Ok(want)).count();
            let how = [
                (ostinato_vulkan::MapKept::Verified, "verified from the code"),
                (ostinato_vulkan::MapKept::Vouched, "vouched for"),
                (ostinato_vulkan::MapKept::Stated, "stated by the built-in"),
            ]
            .iter()
            .filter(|(k, _)| count(*k) > 0)
            .map(|(k, what)| format!("{} {what}", count(*k)))
            .collect::<Vec<_>>();
            let kept = of.iter().filter(|u| u.kept.is_ok()).count();
            if kept > 0 {
                let _ = writeln!(s, "kernel `{}` param `{p}` (vulkan): {kept} tile maps kept ({})", sig.name, how.join(", "));
            }
            let dropped: Vec<&&ostinato_vulkan::MapUse> = of.iter().filter(|u| u.kept.is_err()).collect();
            if let Some(first) = dropped.first() {
                let why = first.kept.as_ref().err().map_or("", String::as_str);
                let _ = writeln!(
                    s,
                    "kernel `{}` param `{p}` (vulkan): {} tile maps not kept, those nodes order as wholes there (node {}: {why})",
                    sig.name,
                    dropped.len(),
                    first.node.0
                );
            }
        }
    }
    s
}
