//! Probe (GPU): does anything in an Ostinato process (its modules, its exec) cost the 941-node 1-block
//! PDL chain time per dispatch, next to a plain C++ driver-API program (scripts/probes/driver_api_chain.cpp)?
//! The chain's time depends on where its buffer lies (docs/fences.md §8), so one buffer address is used
//! throughout: a stream-captured PDL chain of the built-in `add_one` (trigger at entry) timed (a) with
//! only its own module loaded, (b) again after the three built-in modules are loaded, (c) captured from
//! a fifth load of the same build, (d) Ostinato's exec of the same chain bound to the same buffer; then
//! the exec on (e) a buffer allocated after the modules, (f) its own 1 KiB allocation, (g) the same
//! after a host write; (h) the exec on (e)'s and (f)'s buffers with 1 to 50 replays per sample, and single
//! replays timed while the GPU is still busy with untimed ones; (i) the exec and the captured chain on
//! 16 fresh 2 MiB allocations (three offsets each) and 8 fresh 1 KiB ones; (j) the benchmark's sample
//! loop (host write, read back, untimed calls around one timed replay) on (e)'s exec; (k) that exec and
//! a new one before and after a burst of eager plain launches like the benchmark's eager baseline. GPU µs per dispatch: events around 10
//! replays (unless (h) says otherwise), median of 7 samples after 3 warm-ups.
//! Run: `cargo run --release -p ostinato-cuda --example chain_floor_probe` (the GPU machine runs the
//! copy in `.devbin/`).

#[path = "common/chain.rs"]
mod chain;

use chain::{capture_chain, NODES};
use ostinato::{Backend, BufferBinding, BufferId, Exec, KernelSig, Plan};
use ostinato_cuda::raw::{Args, Buffer, Event, Stream};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaExec, CudaOptions, Device, DeviceMemory, DeviceSelector, LoadedModule, ModuleSource, PdlTrigger};

fn e(x: ostinato_cuda::CudaError) -> String {
    x.to_string()
}

/// Median µs per dispatch of `replay` (one replay of the chain), timed on `s`.
fn time(s: &Stream, mut replay: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    let (a, b) = (Event::new(true).map_err(e)?, Event::new(true).map_err(e)?);
    for _ in 0..3 {
        replay()?;
    }
    s.synchronize().map_err(e)?;
    let mut us = Vec::new();
    for _ in 0..7 {
        s.record(&a).map_err(e)?;
        for _ in 0..10 {
            replay()?;
        }
        s.record(&b).map_err(e)?;
        b.synchronize().map_err(e)?;
        us.push(b.elapsed_ms_since(&a).map_err(e)? * 1e3 / (10 * NODES) as f64);
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// Median µs per dispatch of an Ostinato exec: 10 samples of 10 timed replays, the first 3 warm-ups.
fn exec_time(exec: &mut CudaExec) -> Result<f64, String> {
    exec_time_with(exec, 10, 0)
}

/// Median µs per dispatch of an Ostinato exec over 10 samples (the first 3 warm-ups), each `per_sample`
/// replays between two events, each after waiting for the stream and then enqueueing `busy_before`
/// untimed replays (so the GPU is already running when the first event is recorded).
fn exec_time_with(exec: &mut CudaExec, per_sample: usize, busy_before: usize) -> Result<f64, String> {
    let mut us = Vec::new();
    for i in 0..10 {
        exec.wait().map_err(e)?;
        for _ in 0..busy_before {
            exec.replay().map_err(e)?;
        }
        let ms = exec.replay_timed(per_sample).map_err(e)?;
        if i >= 3 {
            us.push(ms * 1e3 / (per_sample * NODES) as f64);
        }
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// (j) The benchmark's sample loop on one exec: one timed replay per sample, with (`write`) the buffer
/// written from the host before it, (`read`) read back after it, (`calls`) a burst of 20 untimed
/// replay calls and 11 single calls each followed by a wait. Median µs per dispatch, 7 samples after 3.
fn bench_like(exec: &mut CudaExec, xb: BufferId, (write, read, calls): (bool, bool, bool)) -> Result<f64, String> {
    let mut us = Vec::new();
    let mut back = [0u8; 1024];
    for i in 0..10 {
        if write {
            exec.write_buffer(xb, 0, &[0u8; 1024]).map_err(e)?;
        }
        exec.timer_start().map_err(e)?;
        exec.replay().map_err(e)?;
        let ms = exec.timer_stop_ms().map_err(e)?;
        if read {
            exec.read_buffer(xb, 0, &mut back).map_err(e)?;
        }
        if calls {
            for _ in 0..20 {
                exec.replay().map_err(e)?;
            }
            exec.wait().map_err(e)?;
            for _ in 0..11 {
                exec.replay().map_err(e)?;
                exec.wait().map_err(e)?;
            }
        }
        if i >= 3 {
            us.push(ms * 1e3 / NODES as f64);
        }
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

/// (k) Does what the benchmark's eager baseline does (941 plain launches per replay on a stream of its
/// own, 200 replays, then the stream dropped) change a chain that runs after it? The same exec before
/// and after, then a new exec of the same plan on the same buffer, instantiated after it.
fn after_eager(
    device: &Device,
    backend: &CudaBackend,
    modules: &BuiltinModules,
    sig: &KernelSig,
    plan: &Plan,
    exec: &mut CudaExec,
    x: u64,
) -> Result<(), String> {
    let before = exec_time(exec)?;
    exec.wait().map_err(e)?;
    {
        let plain = modules.plain_kernel("add_one", sig).map_err(e)?;
        let stream = Stream::new(device).map_err(e)?;
        let mut args = Args::new(&[x, 256]);
        for _ in 0..200 {
            (0..NODES).try_for_each(|_| stream.launch(&plain, chain::DIMS, &mut args, false)).map_err(e)?;
        }
        stream.synchronize().map_err(e)?;
    }
    let after = exec_time(exec)?;
    exec.wait().map_err(e)?;
    let binding = vec![BufferBinding::External(DeviceMemory { ptr: x, len: 1024 })];
    let mut fresh = backend.instantiate(plan, vec![modules.kernel("add_one", sig).map_err(e)?], binding).map_err(e)?;
    println!(
        "(k) exec on {x:#x}: {before:.3} before 200 eager replays of plain launches, {after:.3} after; a new exec instantiated after them: {:.3}",
        exec_time(&mut fresh)?
    );
    fresh.wait().map_err(e)?;
    Ok(())
}

/// (h) How the time per dispatch depends on the replays in one sample (the benchmark times one replay
/// per sample), and whether a single replay timed while the GPU is already busy matches a long sample.
fn replays_per_sample(label: &str, exec: &mut CudaExec) -> Result<(), String> {
    let mut line = format!("(h) {label}: replays per sample");
    for k in [1, 2, 5, 10, 50] {
        line += &format!(" {k}: {:.3};", exec_time_with(exec, k, 0)?);
    }
    line += &format!(" 1 after 5 untimed: {:.3}; 1 after 20 untimed: {:.3}", exec_time_with(exec, 1, 5)?, exec_time_with(exec, 1, 20)?);
    println!("{line}");
    Ok(())
}

fn main() -> Result<(), String> {
    let device = Device::open(&DeviceSelector::from_env().map_err(e)?).map_err(e)?;
    let sig = chain::add_one_sig();
    let buffer = Buffer::new(&device, 1 << 16).map_err(e)?;
    let x = buffer.ptr();
    let s = Stream::new(&device).map_err(e)?;
    println!("device {} {}; buffer at {x:#x}; GPU µs per dispatch of the 941-node 1 × 256 PDL chain", device.info().name, device.info().uuid);
    let own = LoadedModule::load(&device, &ModuleSource::builtin(), PdlTrigger::AtEntry).map_err(e)?;
    let k_own = own.kernel("add_one", &sig, None).map_err(e)?;
    let g_own = capture_chain(&k_own, x, &s, true)?;
    println!("(a) captured chain, one module loaded: {:.3}", time(&s, || g_own.launch(&s).map_err(e))?);
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).map_err(e)?;
    println!("(b) the same graph after the three built-in modules loaded: {:.3}", time(&s, || g_own.launch(&s).map_err(e))?);
    let again = LoadedModule::load(&device, &ModuleSource::builtin(), PdlTrigger::AtEntry).map_err(e)?;
    let g_again = capture_chain(&again.kernel("add_one", &sig, None).map_err(e)?, x, &s, true)?;
    println!("(c) a chain captured from a fifth load of the same build: {:.3}", time(&s, || g_again.launch(&s).map_err(e))?);
    let (plan, xb) = chain::chain_plan()?;
    let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions::default()).map_err(e)?;
    let kernels = vec![modules.kernel("add_one", &sig).map_err(e)?];
    let mut exec = backend.instantiate(&plan, kernels, vec![BufferBinding::External(DeviceMemory { ptr: x, len: 1024 })]).map_err(e)?;
    println!("(d) Ostinato's exec on the same buffer: {:.3}", exec_time(&mut exec)?);
    println!("(a') the first graph again: {:.3}", time(&s, || g_own.launch(&s).map_err(e))?);
    exec.wait().map_err(e)?;
    // The same exec on buffers allocated after every module: (e) a fresh 64 KiB buffer, (f) Ostinato's
    // own 1 KiB allocation, (g) that one again after zeroing it from the host.
    let late = Buffer::new(&device, 1 << 16).map_err(e)?;
    let kernels = vec![modules.kernel("add_one", &sig).map_err(e)?];
    let mut exec_late = backend.instantiate(&plan, kernels, vec![BufferBinding::External(DeviceMemory { ptr: late.ptr(), len: 1024 })]).map_err(e)?;
    println!("(e) Ostinato's exec on a 64 KiB buffer allocated after the modules ({:#x}): {:.3}", late.ptr(), exec_time(&mut exec_late)?);
    let kernels = vec![modules.kernel("add_one", &sig).map_err(e)?];
    let mut exec_own = backend.instantiate(&plan, kernels, vec![BufferBinding::Allocate]).map_err(e)?;
    let own_ptr = exec_own.device_ptr(xb).unwrap_or(0);
    println!("(f) Ostinato's exec on its own 1 KiB allocation ({own_ptr:#x}): {:.3}", exec_time(&mut exec_own)?);
    exec_own.write_buffer(xb, 0, &[0u8; 1024]).map_err(e)?;
    println!("(g) the same after zeroing it from the host: {:.3}", exec_time(&mut exec_own)?);
    replays_per_sample(&format!("exec on the 64 KiB buffer ({:#x})", late.ptr()), &mut exec_late)?;
    replays_per_sample(&format!("exec on its own allocation ({own_ptr:#x})"), &mut exec_own)?;
    let mut line = format!("(j) exec on the 64 KiB buffer ({:#x}), one timed replay per sample; around it", late.ptr());
    for (what, steps) in [
        ("nothing", (false, false, false)),
        ("a host write", (true, false, false)),
        ("a read back", (false, true, false)),
        ("31 untimed calls", (false, false, true)),
        ("all three", (true, true, true)),
    ] {
        line += &format!(" {what}: {:.3};", bench_like(&mut exec_late, xb, steps)?);
    }
    println!("{line}");
    after_eager(&device, &backend, &modules, &sig, &plan, &mut exec_late, late.ptr())?;
    exec_own.wait().map_err(e)?;
    chunks(&device, &backend, &modules, &sig, &plan, &s)?;
    Ok(())
}

/// (i) Is the first allocation's page special? 16 fresh 2 MiB allocations, all kept alive (each its own
/// 2 MiB of device memory), then 8 of 1 KiB (sub-allocated): the exec bound at offsets 0, 0x1000 and
/// 0x10000 of each 2 MiB one and at each 1 KiB one, next to the captured chain on the same place.
fn chunks(device: &Device, backend: &CudaBackend, modules: &BuiltinModules, sig: &KernelSig, plan: &Plan, s: &Stream) -> Result<(), String> {
    let k = modules.kernel("add_one", sig).map_err(e)?;
    let on = |ptr: u64| -> Result<(f64, f64), String> {
        let binding = vec![BufferBinding::External(DeviceMemory { ptr, len: 1024 })];
        let mut exec = backend.instantiate(plan, vec![modules.kernel("add_one", sig).map_err(e)?], binding).map_err(e)?;
        let ours = exec_time(&mut exec)?;
        exec.wait().map_err(e)?;
        let g = capture_chain(&k, ptr, s, true)?;
        Ok((ours, time(s, || g.launch(s).map_err(e))?))
    };
    let mut kept = Vec::new();
    for i in 0..16 {
        let b = Buffer::new(device, 2 << 20).map_err(e)?;
        let mut line = format!("(i) 2 MiB allocation {i:2} at {:#x}: exec / captured", b.ptr());
        for off in [0u64, 0x1000, 0x10000] {
            let (ours, theirs) = on(b.ptr() + off)?;
            line += &format!("  +{off:#x} {ours:.3} / {theirs:.3}");
        }
        println!("{line}");
        kept.push(b);
    }
    for i in 0..8 {
        let b = Buffer::new(device, 1024).map_err(e)?;
        let (ours, theirs) = on(b.ptr())?;
        println!("(i) 1 KiB allocation {i} at {:#x}: exec / captured {ours:.3} / {theirs:.3}", b.ptr());
        kept.push(b);
    }
    Ok(())
}
