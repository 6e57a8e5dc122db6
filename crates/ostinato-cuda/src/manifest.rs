//! Build manifests of bound CUDA kernels ([`ostinato::manifest::KernelManifest`]): what
//! `ostinato_cuda_code::manifest` takes from the code (the source and NVRTC's inputs, the PTX and cubin
//! hashes, access per param, the pre-wait certificate, the loads of the machine code before the wait),
//! with what only a loaded kernel has: the resources the driver reports of the function, which image the
//! driver loaded, and the fused-body verdict.

use ostinato::manifest::{Hashed, KernelManifest};
use ostinato_cuda_code::manifest;
use serde_json::json;

use crate::module::CudaKernel;

/// The manifest of a bound kernel. `device`: read its resources from the driver; `machine_code`: also
/// disassemble its cubin (runs `nvdisasm`).
pub fn of_kernel(k: &CudaKernel, device: bool, machine_code: bool) -> KernelManifest {
    let b = &k.build;
    let mut m = KernelManifest::new(&k.sig, "cuda", &k.entry);
    m.source.push(b.source.clone());
    m.compiler = b.compiler.clone();
    if let Some(p) = &b.ptx {
        m.artifacts.push(Hashed::of("ptx", p.as_bytes()));
    }
    if let Some(c) = &b.cubin {
        m.artifacts.push(Hashed::of("cubin", c));
    }
    m.notes.push(format!("the driver loaded the {}", b.loaded));
    if device {
        match k.func.resources() {
            Ok(r) => m.resources.extend(r.into_iter().map(|(n, v)| (n.to_string(), v))),
            Err(e) => m.notes.push(format!("resources not read: {e}")),
        }
    }
    m.set_access(&k.sig, &k.report.access, &k.report.broader);
    m.analysis.insert("pre_wait".into(), manifest::pre_wait(&k.sig, &k.report, k.pdl_capable, k.pdl_evidence));
    let fused = match (&k.fusion, &k.fusion_refusal) {
        (Some(f), _) => {
            json!({
                "verdict": "fusable",
                "uses_shared": f.body.uses_shared,
                // A body with a block barrier fuses only as the one body of its block.
                "block_barrier": f.body.block_barrier,
                "noncoherent_reads": manifest::names(&k.sig, &f.body.noncoherent.iter().map(|(p, _)| *p).collect::<Vec<_>>())
            })
        }
        (None, Some(why)) => json!({ "verdict": "not fusable", "reason": why }),
        (None, None) => json!({ "verdict": "not fusable", "reason": "not declared fusable" }),
    };
    m.analysis.insert("fused_body".into(), fused);
    if machine_code && b.cubin.is_some() {
        m.analysis.insert("machine_code".into(), manifest::sass_loads(None, Some(b.sass()), &k.entry));
    }
    m
}
