//! On the GPU: a kernel that never finishes and a kernel that traps become errors from `wait`, naming
//! the exec; the exec then refuses every call; the process stays alive and ends cleanly. One test,
//! in its own binary: after the trap the process's CUDA context is unusable (the driver's rule for
//! sticky errors), so nothing may run after it here.

mod common;

use std::time::{Duration, Instant};

use ostinato::{Access, Arg, Backend, BufferBinding, Exec, Graph, KernelSig, Launch, Plan};
use ostinato_cuda::DeviceBuffer as Buffer;
use ostinato_cuda::{CudaBackend, CudaOptions, LaunchOn, LoadedModule, ModuleSource, PdlTrigger};

const SOURCE: &str = r#"
extern "C" __global__ void spin(volatile unsigned* flag) { while (*flag == 0) { } }
extern "C" __global__ void boom(unsigned* x) { if (x[0] == 0) { __trap(); } x[0] = 1; }
"#;

fn one_node(name: &str) -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4).unwrap();
    let k = g.add_kernel(KernelSig::new(name).buffer("x", Access::ReadWrite)).unwrap();
    g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(x)], &[]).unwrap();
    Plan::compile(&g).unwrap()
}

#[test]
fn a_hung_kernel_times_out_and_a_trap_faults_the_exec_and_the_process_lives_on() {
    let Some(device) = common::device_or_skip("a_hung_kernel_times_out_and_a_trap_faults_the_exec_and_the_process_lives_on") else { return };
    let module = LoadedModule::load(&device, &ModuleSource::CudaC { name: "faults.cu".into(), source: SOURCE.into() }, PdlTrigger::AfterWait).unwrap();

    // A kernel that spins until the host sets a flag: wait gives up after the exec's deadline.
    for launch in [LaunchOn::Caller, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }] {
        let plan = one_node("spin");
        let kernel = module.kernel("spin", &plan.graph().kernels()[0], Some(false)).unwrap();
        let backend = CudaBackend::new(&device, CudaOptions { launch, wait_timeout: Some(Duration::from_millis(300)), ..CudaOptions::default() }).unwrap();
        let flag = Buffer::new(&device, 4).unwrap();
        flag.write(0, &0u32.to_le_bytes()).unwrap();
        let mut exec = backend.instantiate(&plan, vec![kernel], vec![BufferBinding::External(flag.memory())]).unwrap();
        exec.replay().unwrap();
        let t = Instant::now();
        let err = exec.wait().unwrap_err().to_string();
        let took = t.elapsed();
        eprintln!("{launch:?}: hung kernel: {err} (after {took:?})");
        assert!(err.contains("did not finish within 300 ms") && err.contains("exec of plan"), "{launch:?}: {err}");
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "{launch:?}: waited {took:?}");
        let refused = exec.replay().unwrap_err().to_string();
        assert!(refused.contains("refuses"), "{launch:?}: a faulted exec refuses: {refused}");
        assert!(exec.fault().is_some(), "{launch:?}: the exec says why it refuses");
        // Release the kernel (a copy on the legacy stream does not wait for the exec's non-blocking
        // one), let the device finish, and drop the exec: nothing hangs.
        flag.write(0, &1u32.to_le_bytes()).unwrap();
        device.synchronize().unwrap();
        drop(exec);
    }

    // A kernel that traps: the driver's sticky error, from wait, naming the exec's driver call.
    let plan = one_node("boom");
    let kernel = module.kernel("boom", &plan.graph().kernels()[0], Some(false)).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let mut exec = backend.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
    exec.replay().unwrap();
    let err = exec.wait().unwrap_err();
    eprintln!("trap: {err}");
    assert!(err.is_sticky(), "a trap is one of the driver's sticky errors: {err}");
    let refused = exec.replay().unwrap_err().to_string();
    assert!(refused.contains("refuses: it is faulted") && refused.contains(&err.to_string()), "{refused}");
    let mut out = [0u8; 4];
    assert!(exec.read_buffer(ostinato::BufferId(0), 0, &mut out).is_err(), "reads are refused too");
    drop(exec);
    // The context cannot be recovered in this process: what comes next is an error, not a crash.
    let after = CudaBackend::new(&device, CudaOptions::default()).map(|_| ()).and_then(|()| Buffer::new(&device, 4).map(|_| ()));
    eprintln!("after the trap: {after:?}");
    assert!(after.is_err(), "the driver reports the sticky error to every later call");
}
