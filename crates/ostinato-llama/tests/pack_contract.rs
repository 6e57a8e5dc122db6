//! The Llama pack's CUDA kernels pass the kernel contract against the signatures the step declares:
//! each `.entry` of `kernels/llama.cu` (whatever kernels it defines today) is compiled with NVRTC in
//! the main and early-trigger builds, its access per param checked against its code, and its pre-wait
//! certificate issued (every pack kernel is PDL-capable). Needs NVRTC, not a GPU; skips with a message
//! where NVRTC is not found. On a GPU, `manifests_of_the_pack_on_this_device` prints each kernel's
//! build manifest (registers, spills, shared memory, loads before `ACQBULK`):
//! `cargo test -p ostinato-llama --test pack_contract -- --nocapture`.

use std::collections::BTreeMap;

use ostinato::{Backend, KernelSig};
use ostinato_cuda_code::compile;
use ostinato_cuda_code::contract::{read_ptx, verify};
use ostinato_cuda_code::ptx::ModuleInfo;
use ostinato_cuda_code::PdlTrigger;
use ostinato_llama::{pack, record, LlamaConfig, OutputProjection, StepOptions};

/// The pack's signatures, as the steps declare them (the shrunk model's and Llama-3.2-3B's, each with
/// both forms of the output projection: between them every entry, by width and head dim).
fn declared() -> BTreeMap<String, KernelSig> {
    let forms = [OutputProjection::MergeInRegisters, OutputProjection::MergeThenStream];
    [LlamaConfig::shrunk(64), LlamaConfig::llama_3_2_3b(64)]
        .iter()
        .flat_map(|c| forms.map(|o_proj| (c, StepOptions { o_proj, ..StepOptions::default() })))
        .flat_map(|(c, o)| record(c, o).expect("the Llama step records").graph.kernels().to_vec())
        .map(|s| (s.name.clone(), s))
        .collect()
}

#[test]
fn every_pack_kernel_passes_its_declared_signature() {
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        eprintln!("SKIP every_pack_kernel_passes_its_declared_signature: {e}");
        return;
    }
    let sigs = declared();
    let (mut checked, mut failures) = (0, Vec::new());
    for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry] {
        let c = compile::compile(pack::CUDA_SOURCE_NAME, pack::CUDA_SOURCE, "sm_90", trigger).expect("the pack's source compiles");
        let module = ModuleInfo::read(&c.ptx);
        for entry in &module.entries {
            let Some(sig) = sigs.get(entry) else {
                failures.push(format!("kernel `{entry}` of the pack has no signature in the step"));
                continue;
            };
            let mut report = match read_ptx(&c.ptx, pack::CUDA_SOURCE_NAME, &[], entry, sig) {
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
                Ok(p) => eprintln!("{entry} ({}): reads before the wait {:?}, early trigger {}", trigger.as_str(), p.reads, p.early_trigger),
                Err(why) => failures.push(format!("{entry} ({}): not PDL-capable: {why}", trigger.as_str())),
            }
            checked += 1;
        }
    }
    assert!(checked >= 2 * sigs.len(), "every kernel the step declares is in the source ({checked} builds checked)");
    assert!(failures.is_empty(), "{} of the pack's kernels fail the contract:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn manifests_of_the_pack_on_this_device() {
    if !ostinato_cuda::driver_available() {
        eprintln!("SKIP manifests_of_the_pack_on_this_device: no CUDA driver found");
        return;
    }
    let device = match ostinato_cuda::DeviceSelector::from_env().and_then(|s| ostinato_cuda::Device::open(&s)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIP manifests_of_the_pack_on_this_device: {e}");
            return;
        }
    };
    let backend = ostinato_cuda::CudaBackend::new(&device, ostinato_cuda::CudaOptions::default()).unwrap();
    for sig in declared().values() {
        let k = backend.bind_kernel(sig, &pack::cuda_ref(&sig.name).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", sig.name));
        assert!(k.pdl_capable, "{}", sig.name);
        let m = ostinato_cuda::manifest::of_kernel(&k, true, true);
        assert!(m.resources.contains_key("registers"), "{}", sig.name);
        eprintln!("{}", m.describe());
    }
}
