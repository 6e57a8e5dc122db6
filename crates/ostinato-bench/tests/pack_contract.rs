//! The bench pack's kernels pass the kernel contract against the signatures the rows declare, without
//! a GPU: every `.entry` of every CUDA compile unit (`kernels/*.cu`) is compiled with NVRTC in the main
//! and early-trigger builds, its access per param checked against its PTX, its pre-wait certificate
//! issued (every pack kernel is PDL-capable); each kernel declared `fusable` is certified as a fused
//! body (and each of the others is refused as one, so the declaration is not missing where it could
//! be made); no declaration is broader than the code; every kernel's WGSL (both versions where it has a packed-dot one) is validated by naga and
//! its declared access checked against it, as the Vulkan backend checks at bind. Skips the CUDA part
//! with a message where NVRTC is not found.
//!
//! With the CUDA toolkit: `OSTINATO_NVRTC=.../libnvrtc.so.13 cargo test -p ostinato-bench --test
//! pack_contract -- --nocapture` prints each kernel's observed access and pre-wait reads.

use std::collections::BTreeMap;

use ostinato::KernelSig;
use ostinato_bench::families::pack_kernels;
use ostinato_bench::pack::CudaUnit;
use ostinato_cuda::compile;
use ostinato_cuda::contract::{read_ptx, verify};
use ostinato_cuda::module::PdlTrigger;
use ostinato_cuda::ptx::{fused_body, ModuleInfo};

fn declared() -> BTreeMap<String, (KernelSig, bool)> {
    pack_kernels().into_iter().map(|k| (k.sig.name.clone(), (k.sig.clone(), k.cuda.options.contains_key("fusable")))).collect()
}

#[test]
fn every_cuda_kernel_of_the_pack_passes_its_declared_signature_and_is_pdl_capable() {
    if let Err(e) = ostinato_cuda::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP every_cuda_kernel_of_the_pack_passes_its_declared_signature_and_is_pdl_capable: {e}"));
        return;
    }
    let sigs = declared();
    let (mut checked, mut failures, mut seen) = (0, Vec::new(), Vec::new());
    for unit in CudaUnit::ALL {
        for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry] {
            let c = compile::compile(unit.name(), unit.source(), "sm_90", trigger).unwrap_or_else(|e| panic!("{} compiles: {e}", unit.name()));
            let module = ModuleInfo::read(&c.ptx);
            assert!(!module.entries.is_empty(), "{}: no kernel", unit.name());
            for entry in &module.entries {
                let Some((sig, _)) = sigs.get(entry) else {
                    failures.push(format!("{}: kernel `{entry}` has no signature among the pack's rows", unit.name()));
                    continue;
                };
                seen.push(entry.clone());
                let mut report = match read_ptx(&c.ptx, unit.name(), false, entry, sig) {
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
                // Exact: no declaration broader than what the code does.
                if let Some(b) = report.broader.first() {
                    failures.push(format!("{entry}: `{}` is declared `{}` but the code only {:?}s it", b.param, b.declared, b.observed));
                }
                match &report.pre_wait {
                    Ok(p) => eprintln!("{entry} ({}): reads before the wait {:?}, early trigger {}", trigger.as_str(), p.reads, p.early_trigger),
                    Err(why) => failures.push(format!("{entry} ({}): not PDL-capable: {why}", trigger.as_str())),
                }
                checked += 1;
            }
        }
    }
    let missing: Vec<&String> = sigs.keys().filter(|k| !seen.contains(k)).collect();
    assert!(missing.is_empty(), "kernels of the pack's rows with no CUDA entry: {missing:?}");
    assert!(checked >= 2 * sigs.len(), "{checked} builds checked");
    assert!(failures.is_empty(), "{} of the pack's kernels fail the contract:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_kernels_declared_fusable_are_fused_bodies_and_the_others_are_not() {
    if let Err(e) = ostinato_cuda::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP the_kernels_declared_fusable_are_fused_bodies_and_the_others_are_not: {e}"));
        return;
    }
    let sigs = declared();
    let mut failures = Vec::new();
    for unit in CudaUnit::ALL {
        let src = ostinato_cuda::fusion::source::check_source(unit.source());
        let c = compile::compile("fused-bodies", &src, "compute_90", PdlTrigger::Disabled).unwrap_or_else(|e| panic!("{} compiles as fused: {e}", unit.name()));
        let module = ModuleInfo::read(&c.ptx);
        for entry in &module.entries {
            let Some((_, fusable)) = sigs.get(entry) else { continue };
            match (fused_body(&c.ptx, entry), fusable) {
                (Ok(_), true) | (Err(_), false) => {}
                (Err(e), true) => failures.push(format!("{entry} is declared fusable but is no fused body: {e}")),
                (Ok(_), false) => failures.push(format!("{entry} is a fused body but not declared fusable")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_wgsl_kernel_of_the_pack_validates_and_passes_its_declared_signature() {
    let mut failures = Vec::new();
    for k in pack_kernels() {
        for packed_dot in [false, true] {
            let r = k.vulkan_ref(packed_dot);
            if let Err(e) = ostinato_vulkan::shaders::spirv_of_wgsl(&k.sig.name, k.wgsl_for(packed_dot), "main") {
                failures.push(format!("{} (packed dot {packed_dot}): {e}", k.sig.name));
                continue;
            }
            match ostinato_vulkan::access::verify(&k.sig, &r) {
                Ok(broader) if broader.is_empty() => {}
                Ok(broader) => failures.push(format!("{} (packed dot {packed_dot}): declared broader than its WGSL: {broader:?}", k.sig.name)),
                Err(e) => failures.push(format!("{} (packed dot {packed_dot}): {e}", k.sig.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
