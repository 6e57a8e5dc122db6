//! Shared helpers of the GPU tests: skip cleanly without a driver, bind built-in kernels.

#![allow(dead_code)]

use ostinato::{read_roots, write_inits, Backend, BufferId, Exec, Plan};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaKernel, CudaOptions, Device, DeviceSelector, PdlTrigger};

/// The device, or `None` (with a message) where no CUDA driver or device is found.
pub fn device_or_skip(test: &str) -> Option<Device> {
    if !ostinato_cuda::driver_available() {
        ostinato_testkit::skip(&format!("SKIP {test}: no CUDA driver found"));
        return None;
    }
    match Device::open(&DeviceSelector::from_env().expect("OSTINATO_DEVICE parses")) {
        Ok(d) => Some(d),
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            None
        }
    }
}

/// Built-in CUDA kernels for every kernel of the plan (by name).
pub fn builtin_kernels(device: &Device, plan: &Plan, trigger: PdlTrigger) -> Vec<CudaKernel> {
    let m = BuiltinModules::load(device, trigger).expect("built-in modules compile");
    plan.graph().kernels().iter().map(|k| m.kernel(&k.name, k).expect("built-in kernel binds")).collect()
}

pub fn run_cuda(device: &Device, plan: &Plan, options: CudaOptions, inits: &[Option<ostinato::file::BufferInit>], replays: usize) -> Vec<(BufferId, Vec<u8>)> {
    let m = BuiltinModules::load(device, options.trigger).expect("built-in modules compile");
    let backend = CudaBackend::with_builtins(device, &m, options).expect("backend");
    let kernels = plan.graph().kernels().iter().map(|k| m.kernel(&k.name, k).expect("built-in kernel binds")).collect();
    let buffers = ostinato::allocate_all(plan);
    let mut exec = backend.instantiate(plan, kernels, buffers).expect("instantiate");
    write_inits(&mut exec, inits).expect("init");
    for _ in 0..replays {
        exec.replay().expect("replay");
    }
    exec.wait().expect("wait");
    read_roots(&mut exec).expect("read")
}
