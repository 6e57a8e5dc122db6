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
use ostinato_cuda_code::tilemaps::{KernelCode, TileChecks};
use ostinato_cuda_code::PdlTrigger;
use ostinato_llama::{pack, record, LlamaConfig, StepOptions};

/// The pack's signatures, as the step declares them: the same for every shape (one source serves
/// head dims 64 and 128, any group and hidden size the config accepts).
fn declared() -> BTreeMap<String, KernelSig> {
    let sigs = |c: &LlamaConfig| -> Vec<KernelSig> { record(c, StepOptions::default()).expect("the Llama step records").graph.kernels().to_vec() };
    let base = sigs(&LlamaConfig::shrunk(64));
    for c in [LlamaConfig::shrunk_wide(64), LlamaConfig::llama_3_2_1b(64), LlamaConfig::llama_3_2_3b(64)] {
        assert_eq!(sigs(&c), base, "{c:?} declares the pack's kernels otherwise");
    }
    base.into_iter().map(|s| (s.name.clone(), s)).collect()
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

/// The tile maps the step declares on QKV, attention and O are what their PTX does: the check the
/// CUDA backend runs at instantiate verifies every one of them from the code (none vouched), for every
/// shape the tests and the bench run. Needs NVRTC, not a GPU.
#[test]
fn every_tile_map_of_the_step_is_verified_from_the_ptx() {
    if let Err(e) = ostinato_cuda_code::nvrtc::version() {
        eprintln!("SKIP every_tile_map_of_the_step_is_verified_from_the_ptx: {e}");
        return;
    }
    let c = compile::compile(pack::CUDA_SOURCE_NAME, pack::CUDA_SOURCE, "sm_90", PdlTrigger::AfterWait).expect("the pack's source compiles");
    let module = ModuleInfo::read(&c.ptx);
    for config in [LlamaConfig::shrunk(96), LlamaConfig::shrunk_wide(96), LlamaConfig::llama_3_2_1b(1024), LlamaConfig::llama_3_2_3b(1024)] {
        let step = record(&config, StepOptions::default()).expect("the Llama step records");
        let code: Vec<KernelCode> = step
            .graph
            .kernels()
            .iter()
            .map(|k| KernelCode::Ptx { module: &module, ptx: &c.ptx, entry: &k.name, name: pack::CUDA_SOURCE_NAME })
            .collect();
        let mut checks = TileChecks::check_graph(&step.graph, &code).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        assert!(!checks.accepted.is_empty(), "{config:?}: the step declares tile maps");
        let vouched: Vec<_> = checks.accepted.iter().filter(|a| a.vouched.is_some()).collect();
        assert!(vouched.is_empty(), "{config:?}: maps accepted only as vouched: {vouched:?}");
        // The position is a slot: every patch the decode makes is checked again (attention's rows
        // and its append depend on it).
        let m = config.max_seq;
        for pos in [1, 7, 8, 9, 40, 63, m / 2, m - 9, m - 8, m - 2, m - 1] {
            checks.check_patch(&step.graph, step.pos, ostinato::Scalar::u32(pos)).unwrap_or_else(|e| panic!("{config:?} at position {pos}: {e}"));
        }
    }
}
