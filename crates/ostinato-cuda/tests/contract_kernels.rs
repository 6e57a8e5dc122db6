//! Every built-in kernel the CUDA backend ships passes the kernel contract against its declared
//! signature: each `.entry` of the built-in compile unit (whatever kernels the sources define today) is
//! compiled with NVRTC, its declared signature found (the host twins', the internal copy and fill), its
//! access per param checked against the code, and its pre-wait certificate issued (every built-in is
//! PDL-capable). A kernel pack checks its own kernels the same way (`ostinato-llama`'s
//! `pack_contract`). Needs NVRTC, not a GPU; skips with a message where NVRTC is not found.
//!
//! On a machine with the CUDA toolkit: `cargo test -p ostinato-cuda --test contract_kernels -- --nocapture`
//! (prints each kernel's observed access and pre-wait reads).

use std::collections::BTreeMap;

use ostinato::KernelSig;
use ostinato_cuda::module::{copy_sig, fill_sig, BUILTIN_PARTS, BUILTIN_SOURCE};
use ostinato_cuda_code::compile;
use ostinato_cuda_code::contract::{read_ptx, verify};
use ostinato_cuda_code::ptx::ModuleInfo;
use ostinato_cuda_code::PdlTrigger;

/// The files a compile unit was joined from: (file name, text), in order.
type Parts = &'static [(&'static str, &'static str)];

/// The compile units whose kernels the backend ships: (name, CUDA C, the files it was joined from).
fn units() -> Vec<(&'static str, &'static str, Parts)> {
    vec![("builtin", BUILTIN_SOURCE, BUILTIN_PARTS)]
}

/// Every declared signature, by kernel name: the host built-ins' (their CUDA twins share them), the
/// internal copy and fill.
fn declared() -> BTreeMap<String, KernelSig> {
    let mut out = BTreeMap::new();
    for k in ostinato_host::builtins::all() {
        out.insert(k.sig.name.clone(), k.sig);
    }
    for sig in [copy_sig(), fill_sig()] {
        out.insert(sig.name.clone(), sig);
    }
    out
}

#[test]
fn every_shipped_kernel_passes_its_declared_signature() {
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP every_shipped_kernel_passes_its_declared_signature: {e}"));
        return;
    }
    let sigs = declared();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, source, parts) in units() {
        for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry] {
            let c = compile::compile(name, source, "sm_90", trigger).expect("the built-in source compiles");
            let module = ModuleInfo::read(&c.ptx);
            assert!(!module.entries.is_empty(), "{name}: no kernel");
            for entry in &module.entries {
                let Some(sig) = sigs.get(entry) else {
                    failures.push(format!("{name}: kernel `{entry}` has no declared signature (declare it in its pack or as a built-in)"));
                    continue;
                };
                let mut report = match read_ptx(&c.ptx, name, parts, entry, sig) {
                    Ok(r) => r,
                    Err(e) => {
                        failures.push(format!("{entry}: {e}"));
                        continue;
                    }
                };
                if let Err(e) = verify(sig, &mut report) {
                    failures.push(format!("{entry}: {e}"));
                    continue;
                }
                match &report.pre_wait {
                    Ok(p) => {
                        let observed: Vec<String> = report
                            .access
                            .params
                            .iter()
                            .zip(&sig.params)
                            .filter_map(|(u, p)| u.as_ref().map(|u| format!("{} {}", p.name, u.observed().as_str())))
                            .collect();
                        eprintln!(
                            "{entry} ({}): {}; reads before the wait {:?}, early trigger {}",
                            trigger.as_str(),
                            observed.join(", "),
                            p.reads,
                            p.early_trigger
                        );
                    }
                    Err(why) => failures.push(format!("{entry} ({}): not PDL-capable: {why}", trigger.as_str())),
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{} of the shipped kernels fail the contract:\n{}", failures.len(), failures.join("\n"));
    eprintln!("{checked} kernel builds pass their declared signatures");
}
