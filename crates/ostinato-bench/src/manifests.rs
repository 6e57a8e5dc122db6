//! Each CUDA arm's build manifest: the BLAKE3 hash over the manifests (`ostinato kernels`) of the kernel
//! builds the arm launches — source, NVRTC options, PTX and cubin, registers and spills — so a result
//! names exactly the code it timed.

use ostinato_cuda::{BuiltinModules, CudaBackend};

use super::arms::{baseline_kernels, bind_cuda, ArmKind};
use super::workload::Workload;

/// The arm's manifest hash, or `None` for an arm that launches no CUDA kernel of ours.
pub fn arm_manifest(kind: ArmKind, w: &Workload, modules: &BuiltinModules, backend: &CudaBackend) -> Option<String> {
    let kernels = match kind {
        ArmKind::Eager | ArmKind::Captured | ArmKind::CapturedPdl => baseline_kernels(modules, backend, w, kind).ok()?,
        ArmKind::Ostinato
        | ArmKind::OstinatoUnfused
        | ArmKind::OstinatoFusionOn
        | ArmKind::OstinatoUnstaged
        | ArmKind::OstinatoUntuned
        | ArmKind::OstinatoEdgesMedian
        | ArmKind::OstinatoPdlOff
        | ArmKind::OstinatoPdlOn
        | ArmKind::OstinatoEager
        | ArmKind::OstinatoThread => bind_cuda(backend, w, &ostinato::Plan::compile(&w.graph).ok()?).ok()?,
        _ => return None,
    };
    let mut hasher = blake3::Hasher::new();
    for k in &kernels {
        hasher.update(ostinato_cuda::manifest::of_kernel(k, true, false).hash().as_bytes());
    }
    Some(hasher.finalize().to_hex().to_string())
}
