//! On the GPU: the kernel contract where kernels really bind. A declaration the code contradicts is
//! refused at bind time naming the param and the instruction; machine code declared PDL-capable is
//! certified from its SASS (where the toolkit's nvdisasm is found); PTX for another architecture is
//! refused before the driver sees it; the bulk-copy projection certifies with its weights and ticket
//! counter before the wait, and its machine code shows the bulk copy ahead of `ACQBULK`; every bound
//! kernel has a manifest with the driver's resources. Skips with a message where no driver is found.

mod common;

use ostinato::{Access, KernelSig, ScalarType};
use ostinato_cuda::{CudaError, LoadedModule, ModuleSource, PdlTrigger};

// The fixtures (ostinato-cuda-code's golden code) travel inside the test binary: the tests run from any
// directory, on any machine.
const SASS_WAIT_CUBIN: &[u8] = include_bytes!("../../ostinato-cuda-code/tests/fixtures/sass_wait.cubin");
const ACCESS_PTX: &str = include_str!("../../ostinato-cuda-code/tests/fixtures/access.ptx");
const BULK_CU: &str = include_str!("../../ostinato-cuda-code/tests/fixtures/bulk.cu");

#[test]
fn a_contradicted_declaration_is_refused_when_the_kernel_binds() {
    let Some(device) = common::device_or_skip("a_contradicted_declaration_is_refused_when_the_kernel_binds") else { return };
    let m = LoadedModule::load(&device, &ModuleSource::builtin(), PdlTrigger::AfterWait).unwrap();
    let mix = |inp: Access| {
        KernelSig::new("mix")
            .buffer("out", Access::ReadWrite)
            .buffer("inp", inp)
            .scalar("n_out", ScalarType::U32)
            .scalar("n_in", ScalarType::U32)
            .scalar("salt", ScalarType::U32)
    };
    assert!(m.kernel("mix", &mix(Access::Read), None).is_ok());
    let e = m.kernel("mix", &mix(Access::Write), None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CudaError::Contract(_)), "{msg}");
    assert!(msg.contains("param `inp` write") && msg.contains("reads it: `ld.global") && msg.contains("kernels/ostinato.cu:"), "{msg}");
    // Broader than the code: bound, and the manifest says so, with the driver's resources.
    let k = m.kernel("mix", &mix(Access::ReadWrite), None).unwrap();
    let manifest = ostinato_cuda::manifest::of_kernel(&k, true, false);
    assert!(manifest.access.iter().any(|p| p.param == "inp" && p.broader), "{manifest:?}");
    assert!(manifest.resources.get("registers").is_some_and(|&r| r > 0), "{:?}", manifest.resources);
    assert!(manifest.notes.iter().any(|n| n.contains("loaded the cubin")), "{:?}", manifest.notes);
}

#[test]
fn machine_code_declared_pdl_capable_is_certified_from_its_sass() {
    let Some(device) = common::device_or_skip("machine_code_declared_pdl_capable_is_certified_from_its_sass") else { return };
    let cubin = ModuleSource::Cubin { name: "sass_wait.cubin".into(), bytes: SASS_WAIT_CUBIN.to_vec() };
    let m = LoadedModule::load(&device, &cubin, PdlTrigger::AfterWait).unwrap();
    let sig = |name: &str, vouched: bool| {
        let s = KernelSig::new(name);
        let s = if vouched { s.buffer_vouched("out", Access::Write) } else { s.buffer("out", Access::Write) };
        s.buffer_vouched("w", Access::Read).buffer_vouched("x", Access::Read).scalar("n", ScalarType::U32)
    };
    // Machine code's access is not read: a declaration must be vouched for.
    let e = m.kernel("plain_prefetch", &sig("plain_prefetch", false), None).unwrap_err().to_string();
    assert!(e.contains("param `out`") && e.contains("vouched"), "{e}");
    match ostinato_cuda_code::sass::nvdisasm() {
        Ok(_) => {
            let k = m.kernel("plain_prefetch", &sig("plain_prefetch", true), Some(true)).unwrap();
            assert!(k.pdl_capable && k.pdl_evidence == "sass", "{k:?}");
            assert_eq!(k.pre_wait_reads, [1], "the plain load of w precedes ACQBULK");
            let e = m.kernel("early_store", &sig("early_store", true), Some(true)).unwrap_err().to_string();
            assert!(e.contains("machine code says otherwise") && e.contains("STG"), "{e}");
        }
        Err(why) => {
            let e = m.kernel("plain_prefetch", &sig("plain_prefetch", true), Some(true)).unwrap_err().to_string();
            assert!(e.contains("nvdisasm") && e.contains("install"), "{e} ({why})");
            ostinato_testkit::skip(&format!("SKIP the SASS certificate itself: {why}"));
        }
    }
}

#[test]
fn ptx_for_another_architecture_is_refused_before_loading() {
    let Some(device) = common::device_or_skip("ptx_for_another_architecture_is_refused_before_loading") else { return };
    let text = ACCESS_PTX.replace(".target sm_90", ".target sm_120a");
    let e = LoadedModule::load(&device, &ModuleSource::Ptx { name: "future.ptx".into(), text }, PdlTrigger::AfterWait).unwrap_err().to_string();
    assert!(e.contains("sm_120a") && e.contains("does not run on this device"), "{e}");
}

#[test]
fn the_bulk_copy_projection_requests_its_weights_before_the_wait() {
    let Some(device) = common::device_or_skip("the_bulk_copy_projection_requests_its_weights_before_the_wait") else { return };
    let src = ModuleSource::CudaC { name: "bulk.cu".into(), source: BULK_CU.into() };
    let m = LoadedModule::load(&device, &src, PdlTrigger::AfterWait).unwrap();
    let sig = |name: &str| {
        KernelSig::new(name)
            .buffer("y", Access::Write)
            .buffer("w", Access::Read)
            .buffer("x", Access::Read)
            .buffer("ctr", Access::ReadWrite)
            .scalar("m", ScalarType::U32)
    };
    let k = m.kernel("gemv_bulk", &sig("gemv_bulk"), Some(true)).unwrap();
    assert_eq!((k.pre_wait_reads.clone(), k.pre_wait_atomics.clone(), k.early_trigger), (vec![1], vec![3], true));
    let act = m.kernel("gemv_bulk_prefetch_x", &sig("gemv_bulk_prefetch_x"), None).unwrap();
    assert_eq!(act.pre_wait_reads, [1, 2], "the activation read before the wait is reported");
    let manifest = ostinato_cuda::manifest::of_kernel(&k, true, true);
    eprintln!("{}", manifest.describe());
    match manifest.analysis.get("machine_code") {
        Some(v) if v.get("loads_before_wait").is_some() => {
            let loads = v["loads_before_wait"].as_array().unwrap();
            assert!(loads.iter().any(|l| l.as_str().is_some_and(|s| s.starts_with("UBLKCP.S.G"))), "the bulk copy precedes ACQBULK: {v}");
        }
        other => ostinato_testkit::skip(&format!("SKIP the machine-code view: {other:?}")),
    }
}

/// The manifest of every built-in kernel as bound on this device (the Llama pack prints its own:
/// `ostinato-llama`'s `pack_contract`) (registers, local/spill bytes, static
/// shared memory, most threads per block; access and pre-wait reads; loads before `ACQBULK`):
/// `cargo test -p ostinato-cuda --test gpu_contract manifests -- --nocapture`.
#[test]
fn manifests_of_every_shipped_kernel_on_this_device() {
    let Some(device) = common::device_or_skip("manifests_of_every_shipped_kernel_on_this_device") else { return };
    let modules = ostinato_cuda::BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let mut sigs: Vec<KernelSig> = ostinato_host::builtins::all().into_iter().map(|k| k.sig).collect();
    sigs.extend([ostinato_cuda::module::copy_sig(), ostinato_cuda::module::fill_sig()]);
    for sig in &sigs {
        let k = modules.kernel(&sig.name, sig).unwrap_or_else(|e| panic!("{}: {e}", sig.name));
        let m = ostinato_cuda::manifest::of_kernel(&k, true, true);
        assert!(m.resources.contains_key("registers"), "{}", sig.name);
        eprintln!("{}", m.describe());
    }
}
