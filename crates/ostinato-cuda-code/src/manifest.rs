//! Build manifests of CUDA kernels ([`ostinato::manifest::KernelManifest`]) as far as they come from
//! the code: the source and NVRTC's inputs, the PTX and cubin hashes, and what the contract read —
//! access per param, the pre-wait certificate and, where `nvdisasm` is found, which loads of the
//! machine code really precede the wait. [`of_offline`] is the whole manifest of a kernel read
//! without a device; the CUDA backend adds what the driver reports of a loaded function (its
//! resources) and the fused-body verdict, with the parts here.

use ostinato::manifest::{Compiler, Hashed, KernelManifest};
use ostinato::KernelSig;
use serde_json::{json, Value};

use crate::contract::{KernelReport, OfflineKernel};

/// The params of `sig` named by index (`#i` for an index past its params).
pub fn names(sig: &KernelSig, params: &[usize]) -> Vec<String> {
    params.iter().map(|&p| sig.params.get(p).map_or_else(|| format!("#{p}"), |q| q.name.clone())).collect()
}

/// The pre-wait certificate as the manifest shows it. `capable`: the kernel is PDL-capable;
/// `evidence`: how that was established (`ptx`, `sass`, `declared`, `none`).
pub fn pre_wait(sig: &KernelSig, report: &KernelReport, capable: bool, evidence: &str) -> Value {
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

/// The machine-code view of `entry` (loads before the wait), where the cubin can be disassembled: from
/// `sass` where it was disassembled already, else from `cubin` (runs `nvdisasm`).
pub fn sass_loads(cubin: Option<&[u8]>, sass: Option<std::result::Result<std::sync::Arc<crate::sass::Sass>, String>>, entry: &str) -> Value {
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
        m.analysis.insert("machine_code".into(), sass_loads(k.cubin.as_deref(), None, entry));
    }
    m
}
