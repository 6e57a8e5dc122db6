//! Each CUDA arm's build manifest: the BLAKE3 hash over the manifests (`ostinato kernels`) of the kernel
//! builds the arm launches — source, NVRTC options, PTX and cubin, registers and spills — so a result
//! names exactly the code it timed.

use ostinato_cuda::BuiltinModules;

use super::arms::{baseline_kernels, ArmKind};
use super::workload::Workload;

/// The arm's manifest hash, or `None` for an arm that launches no CUDA kernel of ours.
pub fn arm_manifest(kind: ArmKind, w: &Workload, modules: &BuiltinModules) -> Option<String> {
    let kernels = match kind {
        ArmKind::Eager | ArmKind::Captured | ArmKind::CapturedPdl => baseline_kernels(modules, w, kind).ok()?,
        ArmKind::Ostinato
        | ArmKind::OstinatoUnfused
        | ArmKind::OstinatoFusionOn
        | ArmKind::OstinatoPdlOff
        | ArmKind::OstinatoPdlOn
        | ArmKind::OstinatoEager
        | ArmKind::OstinatoThread => w.graph.kernels().iter().map(|k| modules.kernel(&k.name, k)).collect::<Result<Vec<_>, _>>().ok()?,
        _ => return None,
    };
    let mut hasher = blake3::Hasher::new();
    for k in &kernels {
        hasher.update(ostinato_cuda::manifest::of_kernel(k, true, false).hash().as_bytes());
    }
    Some(hasher.finalize().to_hex().to_string())
}
