//! On the GPU: binding fails closed. A kernel whose params do not match the graph's signature, a
//! CUDA C file that does not compile, and a PDL declaration its PTX contradicts are each refused with
//! an error naming the kernel. Skips with a message where no CUDA driver is found.

mod common;

use ostinato::{Access, KernelSig, ScalarType};
use ostinato_cuda::{CudaError, LoadedModule, ModuleSource, PdlTrigger};

#[test]
fn a_kernel_with_another_signature_is_refused() {
    let Some(device) = common::device_or_skip("a_kernel_with_another_signature_is_refused") else { return };
    let m = LoadedModule::load(&device, &ModuleSource::builtin(), PdlTrigger::AfterWait).unwrap();
    // `mix` takes 5 params; declare it with add_one's 2.
    let sig = KernelSig::new("mix").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let err = m.kernel("mix", &sig, None).expect_err("refused");
    assert!(matches!(&err, CudaError::Kernel { kernel, reason } if kernel == "mix" && reason.contains("takes 5 params")), "{err}");
    // same count, a u64 where the kernel takes a u32
    let sig = KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U64);
    let err = m.kernel("add_one", &sig, None).expect_err("refused");
    assert!(err.to_string().contains("param `n` is 8 bytes in the graph but 4 bytes"), "{err}");
    // an entry point that does not exist
    let err = m.kernel("nope", &sig, None).expect_err("refused");
    assert!(err.to_string().contains("CUDA_ERROR_NOT_FOUND"), "{err}");
}

#[test]
fn a_compile_error_reports_the_nvrtc_log() {
    let Some(device) = common::device_or_skip("a_compile_error_reports_the_nvrtc_log") else { return };
    let src = ModuleSource::CudaC { name: "broken.cu".into(), source: "extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }".into() };
    let err = LoadedModule::load(&device, &src, PdlTrigger::AfterWait).expect_err("refused");
    assert!(matches!(&err, CudaError::Compile { source_name, log } if source_name == "broken.cu" && log.contains("undefined_name")), "{err}");
}

#[test]
fn a_pdl_declaration_the_ptx_contradicts_is_refused() {
    let Some(device) = common::device_or_skip("a_pdl_declaration_the_ptx_contradicts_is_refused") else { return };
    let src = ModuleSource::CudaC {
        name: "nowait.cu".into(),
        source: "extern \"C\" __global__ void k(float* x, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] += 1.0f; }".into(),
    };
    let m = LoadedModule::load(&device, &src, PdlTrigger::AfterWait).unwrap();
    let sig = KernelSig::new("k").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let k = m.kernel("k", &sig, None).unwrap();
    assert!(!k.pdl_capable, "no griddepcontrol.wait: never PDL-capable");
    let err = m.kernel("k", &sig, Some(true)).expect_err("refused");
    assert!(err.to_string().contains("declared PDL-capable but its PTX says otherwise"), "{err}");
}

#[test]
fn a_backend_refuses_builtins_of_another_trigger() {
    let Some(device) = common::device_or_skip("a_backend_refuses_builtins_of_another_trigger") else { return };
    let m = ostinato_cuda::BuiltinModules::load(&device, PdlTrigger::AtEntry).unwrap();
    let options = ostinato_cuda::CudaOptions { trigger: PdlTrigger::AfterWait, ..Default::default() };
    let Err(err) = ostinato_cuda::CudaBackend::with_builtins(&device, &m, options) else { panic!("a backend with mismatched built-ins was made") };
    assert!(matches!(&err, CudaError::Usage { reason, .. } if reason.contains("`entry`") && reason.contains("`after-wait`")), "{err}");
    assert!(ostinato_cuda::CudaBackend::with_builtins(&device, &m, ostinato_cuda::CudaOptions { trigger: PdlTrigger::AtEntry, ..options }).is_ok());
}

/// A user kernel that triggers its dependents early (`griddepcontrol.launch_dependents`, no wait) feeding
/// a kernel that never waits is refused in graph mode, naming both kernels; eager mode accepts it.
#[test]
fn a_triggering_user_kernel_before_a_non_waiting_one_is_refused() {
    let Some(device) = common::device_or_skip("a_triggering_user_kernel_before_a_non_waiting_one_is_refused") else { return };
    let src = ModuleSource::CudaC {
        name: "trig.cu".into(),
        source: "extern \"C\" __global__ void trig(float* x, unsigned n) { asm volatile(\"griddepcontrol.launch_dependents;\"); if (threadIdx.x < n) x[threadIdx.x] += 1.0f; }\n\
                 extern \"C\" __global__ void plain(float* x, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }"
            .into(),
    };
    let m = LoadedModule::load(&device, &src, PdlTrigger::AfterWait).unwrap();
    let mut g = ostinato::Graph::new();
    let x = g.add_buffer("x", 1024).unwrap();
    let sig = |name: &str| KernelSig::new(name).buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let kt = g.add_kernel(sig("trig")).unwrap();
    let kp = g.add_kernel(sig("plain")).unwrap();
    let args = [ostinato::Arg::Whole(x), ostinato::Arg::Scalar(ostinato::Scalar::u32(256))];
    g.add_launch(kt, ostinato::Launch::linear(1, 256), &args, &[]).unwrap();
    g.add_launch(kp, ostinato::Launch::linear(1, 256), &args, &[]).unwrap();
    let plan = ostinato::Plan::compile(&g).unwrap();
    let kernels = || vec![m.kernel("trig", &sig("trig"), None).unwrap(), m.kernel("plain", &sig("plain"), None).unwrap()];
    assert!(kernels()[0].may_trigger && !kernels()[0].pdl_capable, "trig triggers and does not wait");
    let backend = ostinato_cuda::CudaBackend::new(&device, Default::default()).unwrap();
    use ostinato::Backend;
    let Err(err) = backend.instantiate(&plan, kernels(), ostinato::allocate_all(&plan)) else { panic!("an early-releasing pair was accepted") };
    let msg = err.to_string();
    assert!(msg.contains("kernel `trig`") && msg.contains("kernel `plain`") && msg.contains("never waits"), "{msg}");
    // Eager mode launches `plain` in stream order without the programmatic attribute: accepted.
    let eager = ostinato_cuda::CudaBackend::new(&device, ostinato_cuda::CudaOptions { mode: ostinato_cuda::ExecMode::Eager, ..Default::default() }).unwrap();
    assert!(eager.instantiate(&plan, kernels(), ostinato::allocate_all(&plan)).is_ok());
}
