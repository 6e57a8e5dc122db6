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

/// A user kernel that lets its dependents launch at entry (`griddepcontrol.launch_dependents`)
/// feeding a kernel that never waits: that edge stays full, so the second kernel starts only after the
/// first completed and reads what it wrote, in every graph build and in eager mode. `trig` runs one block
/// for milliseconds and `tail` reads the last elements it writes. A waiting kernel `head` before `trig`
/// makes the graph's FIRST edge programmatic (`head → trig`), the shape in which the driver gave every
/// edge of one mixed `cuGraphAddDependencies_v2` call the first edge's type: there `trig → tail` became
/// programmatic and `tail` read stale data (20 of 20 runs of the full-edge probe, docs/fences.md decision 4). So this test
/// fails if the bulk build stops adding full and programmatic edges in separate calls.
#[test]
fn a_triggering_user_kernel_before_a_non_waiting_one_runs_after_it_completes() {
    let Some(device) = common::device_or_skip("a_triggering_user_kernel_before_a_non_waiting_one_runs_after_it_completes") else { return };
    const N: u32 = 1 << 18;
    const TAIL: u32 = 64;
    let src = ModuleSource::CudaC {
        name: "trig.cu".into(),
        source: "extern \"C\" __global__ void head(float* x, unsigned n) { asm volatile(\"griddepcontrol.wait;\" ::: \"memory\"); for (unsigned i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.0f; }\n\
                 extern \"C\" __global__ void trig(float* x, unsigned n) { asm volatile(\"griddepcontrol.launch_dependents;\"); asm volatile(\"griddepcontrol.wait;\" ::: \"memory\"); for (unsigned i = threadIdx.x; i < n; i += blockDim.x) x[i] += 1.0f; }\n\
                 extern \"C\" __global__ void tail(float* y, const float* x, unsigned n) { if (threadIdx.x < n) y[threadIdx.x] = x[threadIdx.x] * 2.0f; }"
            .into(),
    };
    let m = LoadedModule::load(&device, &src, PdlTrigger::AfterWait).unwrap();
    let mut g = ostinato::Graph::new();
    let x = g.add_buffer("x", 4 * N as u64).unwrap();
    let y = g.add_buffer("y", 4 * TAIL as u64).unwrap();
    let head_sig = KernelSig::new("head").buffer("x", Access::Write).scalar("n", ScalarType::U32);
    let trig_sig = KernelSig::new("trig").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let tail_sig = KernelSig::new("tail").buffer("y", Access::Write).buffer("x", Access::Read).scalar("n", ScalarType::U32);
    let kh = g.add_kernel(head_sig.clone()).unwrap();
    let kt = g.add_kernel(trig_sig.clone()).unwrap();
    let kp = g.add_kernel(tail_sig.clone()).unwrap();
    let u32s = |v: u32| ostinato::Arg::Scalar(ostinato::Scalar::u32(v));
    g.add_launch(kh, ostinato::Launch::linear(1, 256), &[ostinato::Arg::Whole(x), u32s(N)], &[]).unwrap();
    g.add_launch(kt, ostinato::Launch::linear(1, 32), &[ostinato::Arg::Whole(x), u32s(N)], &[]).unwrap();
    let last = ostinato::Slice { buffer: x, offset: 4 * (N - TAIL) as u64, len: 4 * TAIL as u64 };
    g.add_launch(kp, ostinato::Launch::linear(1, 64), &[ostinato::Arg::Whole(y), ostinato::Arg::Buffer(last), u32s(TAIL)], &[]).unwrap();
    let plan = ostinato::Plan::compile(&g).unwrap();
    let kernels = || vec![m.kernel("head", &head_sig, None).unwrap(), m.kernel("trig", &trig_sig, None).unwrap(), m.kernel("tail", &tail_sig, None).unwrap()];
    let pdl: Vec<bool> = kernels().iter().map(|k| k.pdl_capable).collect();
    assert_eq!(pdl, [true, true, false], "`head` and `trig` wait before touching memory, `tail` never waits");
    use ostinato::{Backend, Exec};
    use ostinato_cuda::{CudaOptions, ExecMode, GraphBuild};
    let configs = [
        (ExecMode::Graph, GraphBuild::Bulk),
        (ExecMode::Graph, GraphBuild::InOrder),
        (ExecMode::Graph, GraphBuild::Capture),
        (ExecMode::Eager, GraphBuild::Bulk),
    ];
    for (mode, build) in configs {
        let backend = ostinato_cuda::CudaBackend::new(&device, CudaOptions { mode, build, ..Default::default() }).unwrap();
        for run in 0..10 {
            let mut exec = backend.instantiate(&plan, kernels(), ostinato::allocate_all(&plan)).unwrap();
            if mode == ExecMode::Graph {
                let edges: Vec<(usize, usize, bool)> = exec.lowering().edges.iter().map(|e| (e.from.index(), e.to.index(), e.programmatic)).collect();
                assert_eq!(edges, [(0, 1, true), (1, 2, false)], "{build:?}: the first edge must be the programmatic one");
                assert_eq!(exec.submitted_edges().unwrap(), edges, "{build:?}: the driver holds other edges than the lowering's");
            }
            exec.write_buffer(x, 0, &vec![0xFFu8; 4 * N as usize]).unwrap();
            exec.replay().unwrap();
            exec.wait().unwrap();
            let mut out = vec![0u8; 4 * TAIL as usize];
            exec.read_buffer(y, 0, &mut out).unwrap();
            let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert!(got.iter().all(|v| *v == 2.0), "{mode:?} {build:?} run {run}: `tail` read data `trig` had not written yet: {:?}", &got[..4]);
        }
    }
}

/// A buffer larger than the device's memory is the driver's out-of-memory, named with the buffer;
/// nothing is left allocated (the next instantiation of a small plan succeeds).
#[test]
fn a_buffer_past_the_devices_memory_is_an_error_naming_it() {
    let Some(device) = common::device_or_skip("a_buffer_past_the_devices_memory_is_an_error_naming_it") else { return };
    use ostinato::{Arg, Backend, Graph, Launch, Plan, Scalar};
    let plan_with = |bytes: u64| {
        let mut g = Graph::new();
        let small = g.add_buffer("small", 1024).unwrap();
        let huge = g.add_buffer("huge", bytes).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(small), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(huge), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        Plan::compile(&g).unwrap()
    };
    let backend = ostinato_cuda::CudaBackend::new(&device, ostinato_cuda::CudaOptions::default()).unwrap();
    let too_big = device.info().total_mem as u64 * 2;
    let plan = plan_with(too_big);
    let kernels = ostinato::bind_builtins(&backend, &plan).unwrap();
    let err = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).err().expect("refused").to_string();
    assert!(err.contains("CUDA_ERROR_OUT_OF_MEMORY") && err.contains("buffer `huge`"), "{err}");
    let plan = plan_with(4096);
    let kernels = ostinato::bind_builtins(&backend, &plan).unwrap();
    assert!(backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).is_ok(), "the failed instantiation left the device usable");
}

/// A buffer on a device the exec does not drive (here: the second rank of a collective): refused at
/// instantiate, naming the buffer and its device, before anything is allocated.
#[test]
fn a_buffer_on_a_second_device_is_refused_naming_it() {
    use ostinato::collective::CollectiveOp;
    use ostinato::{Backend, Graph, Plan, ScalarType};
    let Some(device) = common::device_or_skip("a_buffer_on_a_second_device_is_refused_naming_it") else { return };
    let backend = ostinato_cuda::CudaBackend::new(&device, ostinato_cuda::CudaOptions::default()).unwrap();
    let mut g = Graph::new();
    let (x0, x1) = (g.add_buffer_on("x0", 64, 0).unwrap(), g.add_buffer_on("x1", 64, 1).unwrap());
    let (w0, w1) = (g.whole(x0), g.whole(x1));
    g.add_collective(CollectiveOp::AllReduceSum, ScalarType::F32, &[w0, w1], &[w0, w1], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let e = backend.instantiate(&plan, vec![], ostinato::allocate_all(&plan)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("buffer `x1` is on device 1: a cuda exec drives one device"), "{e}");
}
