//! Build manifests of CUDA kernels ([`ostinato::manifest::KernelManifest`]): the source and NVRTC's
//! inputs, the PTX and cubin hashes, the resources the driver reports of the loaded function, and what
//! the contract read from the code — access per param, the pre-wait certificate, the fused-body verdict
//! and, where `nvdisasm` is found, which loads of the machine code really precede the wait.

use ostinato::manifest::{Compiler, Hashed, KernelManifest};
use ostinato::KernelSig;
use serde_json::{json, Value};

use crate::contract::{KernelReport, OfflineKernel};
use crate::module::CudaKernel;

/// The params of `sig` named by index.
fn names(sig: &KernelSig, params: &[usize]) -> Vec<String> {
    params.iter().map(|&p| sig.params.get(p).map_or_else(|| format!("#{p}"), |q| q.name.clone())).collect()
}

/// The pre-wait certificate as the manifest shows it.
fn pre_wait(sig: &KernelSig, report: &KernelReport, capable: bool, evidence: &str) -> Value {
    match &report.pre_wait {
        Ok(p) => json!({
            "pdl_capable": capable,
            "evidence": evidence,
            "reads": names(sig, &p.reads),
            "atomics": names(sig, &p.atomics),
            "early_trigger": p.early_trigger,
            "exits_before_wait": p.exits_before_wait,
        }),
        Err(why) => json!({ "pdl_capable": capable, "evidence": evidence, "not_certified": why }),
    }
}

/// The machine-code view of `entry` (loads before the wait), where the cubin can be disassembled.
fn sass(cubin: Option<&[u8]>, sass: Option<std::result::Result<std::sync::Arc<crate::sass::Sass>, String>>, entry: &str) -> Value {
    let disassembled = match (sass, cubin) {
        (Some(s), _) => s,
        (None, Some(c)) => crate::sass::disassemble(c).map(std::sync::Arc::new),
        (None, None) => return json!({ "not_read": "no cubin" }),
    };
    match disassembled.and_then(|s| crate::sass::loads(&s, entry)) {
        Ok(l) => serde_json::to_value(l).unwrap_or(Value::Null),
        Err(why) => json!({ "not_read": why }),
    }
}

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
    m.analysis.insert("pre_wait".into(), pre_wait(&k.sig, &k.report, k.pdl_capable, k.pdl_evidence));
    let fused = match (&k.fusion, &k.fusion_refusal) {
        (Some(f), _) => {
            json!({ "verdict": "fusable", "uses_shared": f.body.uses_shared, "noncoherent_reads": names(&k.sig, &f.body.noncoherent.iter().map(|(p, _)| *p).collect::<Vec<_>>()) })
        }
        (None, Some(why)) => json!({ "verdict": "not fusable", "reason": why }),
        (None, None) => json!({ "verdict": "not fusable", "reason": "not declared fusable" }),
    };
    m.analysis.insert("fused_body".into(), fused);
    if machine_code && b.cubin.is_some() {
        m.analysis.insert("machine_code".into(), sass(None, Some(b.sass()), &k.entry));
    }
    m
}

/// The manifest of a kernel read without a device (`ostinato kernels` where no GPU is found).
pub fn of_offline(sig: &KernelSig, entry: &str, k: &OfflineKernel, machine_code: bool) -> KernelManifest {
    let mut m = KernelManifest::new(sig, "cuda", entry);
    m.source.push(Hashed::of(&k.source.0, &k.source.1));
    if let Some(c) = &k.compiled {
        m.compiler = Some(Compiler {
            name: "nvrtc".into(),
            version: format!("{}.{}", c.nvrtc.0, c.nvrtc.1),
            options: c.options.clone(),
            arch: c.options.iter().find_map(|o| o.strip_prefix("--gpu-architecture=")).map(str::to_string),
            cache_key: Some(c.key.clone()),
        });
    }
    if let Some(p) = &k.ptx {
        m.artifacts.push(Hashed::of("ptx", p.as_bytes()));
    }
    if let Some(c) = &k.cubin {
        m.artifacts.push(Hashed::of("cubin", c));
    }
    m.notes.push("not loaded on a device: no resources".into());
    m.set_access(sig, &k.report.access, &k.report.broader);
    let capable = k.report.pre_wait.is_ok();
    m.analysis.insert("pre_wait".into(), pre_wait(sig, &k.report, capable, if k.ptx.is_some() { "ptx" } else { "none" }));
    if machine_code && k.cubin.is_some() {
        m.analysis.insert("machine_code".into(), sass(k.cubin.as_deref(), None, entry));
    }
    m
}
