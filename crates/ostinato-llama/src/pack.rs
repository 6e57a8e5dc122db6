//! The Llama kernels as a kernel pack: each kernel's implementation per backend, bound the way a
//! user's kernels are. CUDA: a [`KernelRef`] that carries `kernels/llama_common.cu` (defines,
//! helpers, the streaming pipeline) and `kernels/llama.cu` (the kernels) as one source, compiled by
//! the CUDA backend with NVRTC in its trigger variants, its PDL capability certified from the PTX;
//! host: the twins of [`crate::host`]. No backend names this crate.

use std::sync::{Arc, OnceLock};

use ostinato::KernelRef;
use ostinato_host::kernel::HostKernel;

/// The CUDA C of the pack's kernels.
pub const CUDA_SOURCE: &str = concat!(include_str!("../kernels/llama_common.cu"), include_str!("../kernels/llama.cu"));

/// The name the CUDA source goes by (in messages, caches and manifests).
pub const CUDA_SOURCE_NAME: &str = "llama.cu";

/// The backends the pack has kernels for.
pub const BACKENDS: [&str; 2] = ["host", "cuda"];

/// The pack's kernel names, in the order the step records them.
pub fn kernel_names() -> Vec<String> {
    crate::host::all().into_iter().map(|k| k.sig.name).collect()
}

/// Kernel `kernel`'s CUDA implementation: the pack's source with `kernel` as its entry (`None` for a
/// name that is not one of the pack's kernels).
pub fn cuda_ref(kernel: &str) -> Option<KernelRef> {
    static CODE: OnceLock<Arc<str>> = OnceLock::new();
    let code = CODE.get_or_init(|| Arc::from(CUDA_SOURCE));
    kernel_names().iter().any(|k| k == kernel).then(|| KernelRef::code(CUDA_SOURCE_NAME, code.clone()).with_entry(kernel))
}

/// Kernel `kernel`'s host twin (`None` for a name that is not one of the pack's kernels).
pub fn host_kernel(kernel: &str) -> Option<HostKernel> {
    crate::host::all().into_iter().find(|k| k.sig.name == kernel)
}

/// The host twins of every kernel of `graph` (a step's graph), each checked against the graph's
/// signature: what a host backend binds for the step.
pub fn host_kernels(graph: &ostinato::Graph) -> Result<Vec<HostKernel>, crate::LlamaError> {
    graph
        .kernels()
        .iter()
        .map(|sig| {
            let k = host_kernel(&sig.name)
                .ok_or_else(|| crate::LlamaError::Kernel { kernel: sig.name.clone(), reason: "not a kernel of the Llama pack".into() })?;
            k.check_signature(sig).map_err(|reason| crate::LlamaError::Kernel { kernel: sig.name.clone(), reason })?;
            Ok(k)
        })
        .collect()
}

/// The implementation of the pack's kernel `kernel` on `backend` as a reference (`None` where the pack
/// has none as a reference: the host twins are functions, [`host_kernel`]).
pub fn kernel_ref(kernel: &str, backend: &str) -> Option<KernelRef> {
    match backend {
        "cuda" => cuda_ref(kernel),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_has_a_cuda_entry_and_a_host_twin() {
        for name in kernel_names() {
            let entry = [format!("void {name}("), format!(") {name}("), format!("_ENTRY({name}, ")];
            assert!(entry.iter().any(|e| CUDA_SOURCE.contains(e.as_str())), "{name} in llama.cu");
            assert_eq!(cuda_ref(&name).and_then(|r| r.entry), Some(name.clone()));
            assert!(host_kernel(&name).is_some());
        }
        assert!(cuda_ref("mix").is_none() && host_kernel("mix").is_none());
    }
}
