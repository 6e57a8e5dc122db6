//! On the GPU: one graph replayed 10,000 times with a slot changed every replay is right every time,
//! with no re-instantiation, on the caller's thread and through a launch thread; and replay allocates
//! nothing on the host, on either thread.

mod common;

use ostinato::{Arg, Backend, BufferBinding, Exec, Graph, Launch, Plan, Scalar, Slice};
use ostinato_cuda::{CudaBackend, CudaOptions, GraphBuild, LaunchOn, PdlTrigger};
use ostinato_testkit::random_graphs::mix_sig;

use ostinato_testkit::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const N: u32 = 256;

/// fill(out, 1) → mix(out, c, salt = slot) → mix(out, c, salt = slot): out = ((1*3 + c + s)*3 + c + s).
fn program() -> (Graph, ostinato::SlotId, ostinato::BufferId, ostinato::BufferId) {
    let mut g = Graph::new();
    let out = g.add_buffer("out", 4 * N as u64).unwrap();
    let c = g.add_buffer("c", 4 * N as u64).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let s = g.add_slot("salt", Scalar::u32(0)).unwrap();
    g.add_fill(g.whole(out), 1, &[]).unwrap();
    for _ in 0..2 {
        let args = [Arg::Whole(out), Arg::Whole(c), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(N)), Arg::Slot(s)];
        g.add_launch(k, Launch::linear(2, 128), &args, &[]).unwrap();
    }
    let _ = Slice { buffer: out, offset: 0, len: 4 };
    (g, s, out, c)
}

#[test]
fn ten_thousand_patched_replays_are_each_right() {
    let Some(device) = common::device_or_skip("ten_thousand_patched_replays_are_each_right") else { return };
    let (g, slot, out, c) = program();
    let plan = Plan::compile(&g).unwrap();
    // Every graph build: the patched node handles come from a different driver path in each. The launch
    // thread patches and launches on its own thread while the caller reads back after every replay.
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    for (build, launch) in
        [(GraphBuild::Bulk, LaunchOn::Caller), (GraphBuild::InOrder, LaunchOn::Caller), (GraphBuild::Capture, LaunchOn::Caller), (GraphBuild::Bulk, thread)]
    {
        let backend = CudaBackend::new(&device, CudaOptions { build, launch, ..CudaOptions::default() }).unwrap();
        let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AtEntry);
        let mut exec = backend.instantiate(&plan, kernels, vec![BufferBinding::Allocate, BufferBinding::Allocate]).unwrap();
        let cv: Vec<u32> = (0..N).map(|i| i.wrapping_mul(2654435761)).collect();
        exec.write_buffer(c, 0, &cv.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let mut bytes = vec![0u8; 4 * N as usize];
        for r in 0..10_000u32 {
            let salt = r.wrapping_mul(0x9E37_79B9);
            exec.set_slot(slot, Scalar::u32(salt)).unwrap();
            exec.replay().unwrap();
            exec.read_buffer(out, 0, &mut bytes).unwrap();
            for i in 0..N as usize {
                let once = 3u32.wrapping_add(cv[i]).wrapping_add(salt);
                let want = once.wrapping_mul(3).wrapping_add(cv[i]).wrapping_add(salt);
                let got = u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]);
                assert_eq!(got, want, "{build:?} {launch:?}: replay {r}, element {i}");
            }
        }
    }
}

#[test]
fn replay_of_a_941_node_graph_allocates_nothing() {
    let Some(device) = common::device_or_skip("replay_of_a_941_node_graph_allocates_nothing") else { return };
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024).unwrap();
    let k = g.add_kernel(ostinato::KernelSig::new("add_one").buffer("x", ostinato::Access::ReadWrite).scalar("n", ostinato::ScalarType::U32)).unwrap();
    let s = g.add_slot("n", Scalar::u32(256)).unwrap();
    for _ in 0..941 {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Slot(s)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    use ostinato_cuda::ExecMode::{Eager, Graph as GraphMode};
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    let configs = [
        (GraphMode, GraphBuild::Bulk, LaunchOn::Caller),
        (GraphMode, GraphBuild::InOrder, LaunchOn::Caller),
        (GraphMode, GraphBuild::Capture, LaunchOn::Caller),
        (Eager, GraphBuild::Bulk, LaunchOn::Caller),
        (GraphMode, GraphBuild::Bulk, thread),
        (Eager, GraphBuild::Bulk, thread),
    ];
    // Fusion off (941 launches) and auto (one fused launch with the slot among its params).
    for ((mode, build, launch), fusion) in configs.into_iter().flat_map(|c| [(c, ostinato_cuda::FusionMode::Off), (c, ostinato_cuda::FusionMode::Auto)]) {
        let backend = CudaBackend::new(&device, CudaOptions { mode, build, launch, fusion, ..CudaOptions::default() }).unwrap();
        let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AtEntry);
        let mut exec = backend.instantiate(&plan, kernels, vec![BufferBinding::Allocate]).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let before = counting_alloc::allocations();
        for i in 0..100u32 {
            exec.set_slot(s, Scalar::u32(255 + i % 2)).unwrap();
            exec.replay().unwrap();
        }
        exec.wait().unwrap();
        // The allocator counts every thread's allocations: the launch thread's too.
        assert_eq!(counting_alloc::allocations() - before, 0, "{mode:?} {build:?} {launch:?} fusion {fusion:?}: replay or patch allocated");
    }
}

/// Soak: 1,000,000 replays with the slot patched before every one (`OSTINATO_SOAK_REPLAYS` overrides):
/// the last replay's bytes are right, and neither the process's resident memory nor the device's
/// free memory moves.
#[test]
fn a_million_patched_replays_keep_host_and_device_memory_flat() {
    let Some(device) = common::device_or_skip("a_million_patched_replays_keep_host_and_device_memory_flat") else { return };
    let replays: u32 = std::env::var("OSTINATO_SOAK_REPLAYS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let (g, slot, out, c) = program();
    let plan = Plan::compile(&g).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AtEntry);
    let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    let cv: Vec<u32> = (0..N).map(|i| i ^ 0x5bd1_e995).collect();
    exec.write_buffer(c, 0, &cv.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    for r in 0..1000u32 {
        exec.set_slot(slot, Scalar::u32(r)).unwrap();
        exec.replay().unwrap();
    }
    exec.wait().unwrap();
    let (host_before, device_before) = (ostinato_testkit::resident_bytes(), device.memory_info().unwrap().0);
    let mut last = 0;
    for r in 0..replays {
        last = r.wrapping_mul(0x9E37_79B9);
        exec.set_slot(slot, Scalar::u32(last)).unwrap();
        exec.replay().unwrap();
    }
    exec.wait().unwrap();
    let (host_after, device_after) = (ostinato_testkit::resident_bytes(), device.memory_info().unwrap().0);
    let mut bytes = vec![0u8; 4 * N as usize];
    exec.read_buffer(out, 0, &mut bytes).unwrap();
    for i in 0..N as usize {
        let once = 3u32.wrapping_add(cv[i]).wrapping_add(last);
        let want = once.wrapping_mul(3).wrapping_add(cv[i]).wrapping_add(last);
        assert_eq!(u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]), want, "element {i}");
    }
    eprintln!("soak: {replays} patched replays; resident {host_before:?} -> {host_after:?} bytes; device free {device_before} -> {device_after} bytes");
    assert!(
        device_before.saturating_sub(device_after) <= 2 << 20,
        "device memory fell by {} bytes over {replays} replays",
        device_before.saturating_sub(device_after)
    );
    if let (Some(b), Some(a)) = (host_before, host_after) {
        assert!(a <= b + (1 << 20), "resident memory grew by {} bytes over {replays} replays", a.saturating_sub(b));
    }
}
