//! The bench pack's kernels pass the kernel contract against the signatures the rows declare, without
//! a GPU: every `.entry` of every CUDA file (`kernels/*.cu`) has a declared signature, and each
//! kernel's code as it is bound (its file, that kernel alone or the group bound from one code) is compiled with NVRTC in the main and
//! early-trigger builds, its access per param checked against its PTX, its pre-wait certificate
//! issued (every pack kernel is PDL-capable); each kernel declared `fusable` is certified as a fused
//! body (and each of the others is refused as one, so the declaration is not missing where it could
//! be made); no declaration is broader than the code; every kernel's WGSL (both versions where it has a packed-dot one) is validated by naga and
//! its declared access checked against it, as the Vulkan backend checks at bind. Skips the CUDA part
//! with a message where NVRTC is not found.
//!
//! With the CUDA toolkit: `OSTINATO_NVRTC=.../libnvrtc.so.13 cargo test -p ostinato-bench --test
//! bench_pack_contract -- --nocapture` prints each kernel's pre-wait reads and the fused builds' compile time.
//! (Named apart from `ostinato-llama`'s `pack_contract`: the GPU machine's test binaries go by target name.)

use std::collections::BTreeMap;

use ostinato::KernelSig;
use ostinato_bench::families::pack_kernels;
use ostinato_bench::pack::{CudaUnit, ShaderFeatures};
use ostinato_cuda_code::compile;
use ostinato_cuda_code::contract::{read_ptx, verify};
use ostinato_cuda_code::ptx::{fused_body, ModuleInfo};
use ostinato_cuda_code::PdlTrigger;

fn declared() -> BTreeMap<String, (KernelSig, bool)> {
    pack_kernels().into_iter().map(|k| (k.sig.name.clone(), (k.sig.clone(), k.cuda.options.contains_key("fusable")))).collect()
}

/// Every kernel's code as it is bound: (name, entry, CUDA C).
fn codes() -> Vec<(String, String, String)> {
    pack_kernels().into_iter().map(|k| (k.cuda.source.clone(), k.sig.name.clone(), k.cuda.code.as_deref().unwrap_or_default().to_string())).collect()
}

#[test]
fn every_cuda_kernel_of_the_pack_passes_its_declared_signature_and_is_pdl_capable() {
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP every_cuda_kernel_of_the_pack_passes_its_declared_signature_and_is_pdl_capable: {e}"));
        return;
    }
    let sigs = declared();
    let mut failures = Vec::new();
    // Every entry of every unit has a signature among the pack's rows.
    for unit in CudaUnit::ALL {
        let c = compile::compile(unit.name(), &format!("#define OST_BENCH_ALL\n{}", unit.source()), "sm_90", PdlTrigger::AfterWait)
            .unwrap_or_else(|e| panic!("{} compiles: {e}", unit.name()));
        for entry in ModuleInfo::read(&c.ptx).entries.iter().filter(|e| !sigs.contains_key(*e)) {
            failures.push(format!("{}: kernel `{entry}` has no signature among the pack's rows", unit.name()));
        }
    }
    // Each kernel's own code, as bound, in the main and early-trigger builds: the kernel alone, or the
    // kernels bound from that same code (a group meant to fuse) and no other.
    let all = codes();
    let mut checked = 0;
    for (name, entry, code) in &all {
        let (sig, _) = &sigs[entry];
        let mut expected: Vec<String> = all.iter().filter(|(_, _, c)| c == code).map(|(_, e, _)| e.clone()).collect();
        expected.sort();
        for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry] {
            let c = compile::compile(name, code, "sm_90", trigger).unwrap_or_else(|e| panic!("{name} compiles: {e}"));
            let mut entries = ModuleInfo::read(&c.ptx).entries;
            entries.sort();
            if entries != expected {
                failures.push(format!("{name}: defines {entries:?}, not {expected:?}: the kernels bound from its code"));
            }
            let mut report = match read_ptx(&c.ptx, name, &[], entry, sig) {
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
                failures.push(format!("{entry}: `{}` is declared `{}` but the code does less: {:?}", b.param, b.declared, b.observed));
            }
            match &report.pre_wait {
                Ok(p) => eprintln!("{entry} ({}): reads before the wait {:?}, early trigger {}", trigger.as_str(), p.reads, p.early_trigger),
                Err(why) => failures.push(format!("{entry} ({}): not PDL-capable: {why}", trigger.as_str())),
            }
            checked += 1;
        }
    }
    assert!(checked >= 2 * sigs.len(), "{checked} builds checked");
    assert!(failures.is_empty(), "{} of the pack's kernels fail the contract:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_kernels_declared_fusable_are_fused_bodies_and_the_others_are_not() {
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP the_kernels_declared_fusable_are_fused_bodies_and_the_others_are_not: {e}"));
        return;
    }
    let sigs = declared();
    let mut failures = Vec::new();
    for (name, entry, code) in codes() {
        let src = ostinato_cuda::fusion::source::check_source(&code);
        let c = compile::compile("fused-bodies", &src, "compute_90", PdlTrigger::Disabled).unwrap_or_else(|e| panic!("{name} compiles as fused: {e}"));
        match (fused_body(&c.ptx, &entry), sigs[&entry].1) {
            (Ok(_), true) | (Err(_), false) => {}
            (Err(e), true) => failures.push(format!("{entry} is declared fusable but is no fused body: {e}")),
            (Ok(_), false) => failures.push(format!("{entry} is a fused body but not declared fusable")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_wgsl_kernel_of_the_pack_validates_and_passes_its_declared_signature() {
    let mut failures = Vec::new();
    for k in pack_kernels() {
        for features in ShaderFeatures::ALL {
            let r = k.vulkan_ref(features);
            if let Err(e) = ostinato_vulkan::shaders::spirv_of_wgsl(&k.sig.name, k.wgsl_for(features), "main") {
                failures.push(format!("{} ({features:?}): {e}", k.sig.name));
                continue;
            }
            match ostinato_vulkan::access::verify(&k.sig, &r) {
                Ok(broader) if broader.is_empty() => {}
                Ok(broader) => failures.push(format!("{} ({features:?}): declared broader than its WGSL: {broader:?}", k.sig.name)),
                Err(e) => failures.push(format!("{} ({features:?}): {e}", k.sig.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every chain the GPU matrix may fuse — its rows of one-block launches of a fusable kernel, serial and
/// independent, grouped as `auto` and `on` group them — generates a fused kernel that NVRTC compiles in
/// the three builds the CUDA backend makes and that passes the kernel contract against the fused
/// signature: what the GPU run compiles at instantiation, checked before it. Prints each compile's time
/// (the GPU run pays them once, through the on-disk cache).
#[test]
fn every_fused_chain_of_the_gpu_matrix_compiles_and_passes_the_contract() {
    use ostinato::fusion::{barriers, groups, Fusable, FuseKey, FusionMode};
    use ostinato::{NodeOp, Plan};
    use ostinato_bench::workload::Kernels;
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        ostinato_testkit::skip(&format!("SKIP every_fused_chain_of_the_gpu_matrix_compiles_and_passes_the_contract: {e}"));
        return;
    }
    let rows = ostinato_bench::matrix::matrix(ostinato_bench::BenchBackend::Cuda, false, None, None, None);
    let (mut sources, mut seconds, mut failures) = (0, 0f64, Vec::new());
    for w in &rows {
        let Kernels::Pack(pack) = &w.kernels else { continue };
        let one_block = w.graph.nodes().iter().all(|n| matches!(&n.op, NodeOp::Kernel { launch, .. } if launch.grid == [1, 1, 1]));
        if !one_block || !pack.iter().all(|k| k.cuda.options.contains_key("fusable")) {
            continue;
        }
        let plan = Plan::compile_with(&w.graph, ostinato::PlanOptions { max_lanes: 4 }).unwrap();
        let code = pack[0].cuda.code.as_deref().unwrap_or_default();
        let checked = compile::compile("fused-bodies", &ostinato_cuda::fusion::source::check_source(code), "compute_90", PdlTrigger::Disabled).unwrap();
        let body = fused_body(&checked.ptx, &pack[0].sig.name).unwrap();
        let fusable: Vec<Option<Fusable>> = w
            .graph
            .nodes()
            .iter()
            .map(|n| match &n.op {
                NodeOp::Kernel { launch, .. } => Some(Fusable {
                    key: FuseKey { block: launch.block, grid: launch.grid, source: 0 },
                    uses_shared: body.uses_shared,
                    alone: body.block_barrier.is_some(),
                }),
                _ => None,
            })
            .collect();
        for mode in [FusionMode::Auto, FusionMode::On] {
            for (gi, gr) in groups(&plan, &fusable, mode).iter().enumerate() {
                let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(&plan, l, |_| body.uses_shared)).collect();
                let fused =
                    ostinato_cuda::fusion::source::generate(&plan, gr, &format!("ostinato_fused_{gi}"), code, &bars, &|k| w.graph.kernel(k).name.clone(), None);
                for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry, PdlTrigger::Disabled] {
                    let start = std::time::Instant::now();
                    let c = match compile::compile(&fused.sig.name, &fused.source, "sm_90", trigger) {
                        Ok(c) => c,
                        Err(e) => {
                            failures.push(format!("{} ({}, {}): {e}", w.id, mode.as_str(), trigger.as_str()));
                            continue;
                        }
                    };
                    if !c.cache_hit {
                        seconds += start.elapsed().as_secs_f64();
                        sources += 1;
                    }
                    let mut report = match read_ptx(&c.ptx, &fused.sig.name, &[], fused.entry, &fused.sig) {
                        Ok(r) => r,
                        Err(e) => {
                            failures.push(format!("{} ({}): {e}", w.id, mode.as_str()));
                            continue;
                        }
                    };
                    if let Err(e) = verify(&fused.sig, &mut report) {
                        failures.push(format!("{} ({}): {e}", w.id, mode.as_str()));
                    }
                }
            }
        }
    }
    eprintln!("{sources} fused builds compiled in {seconds:.1} s");
    assert!(sources == 0 || seconds > 0.0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
