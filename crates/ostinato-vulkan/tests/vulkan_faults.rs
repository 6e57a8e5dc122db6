//! What an exec does when the device is slow, lost or asked too much: dropping an exec with replays in
//! flight waits for them before freeing anything; a wait past the exec's deadline faults it (a Fault
//! error, then every call refused with a State error, and its drop leaks rather than frees under
//! running work); grids and workgroups past the device's limits are refused at instantiate, naming the
//! node. Skips without a Vulkan device.

mod common;

use std::time::{Duration, Instant};

use ostinato::{Access, Arg, Backend, ErrorKind, Exec, Graph, KernelRef, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_testkit::random_graphs::mix_sig;
use ostinato_vulkan::VulkanOptions;

use common::backend_or_skip;

fn wgsl_file(name: &str, source: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ostinato-vk-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, source).unwrap();
    path
}

/// 50 dependent `mix` nodes over 256 Ki words each.
fn mix_chain() -> Plan {
    let mut g = Graph::new();
    let (a, b) = (g.add_buffer("a", 1 << 20).unwrap(), g.add_buffer("b", 1 << 20).unwrap());
    let k = g.add_kernel(mix_sig()).unwrap();
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    for i in 0..50 {
        let (out, inp) = if i % 2 == 0 { (a, b) } else { (b, a) };
        g.add_launch(k, Launch::linear(64, 256), &[Arg::Whole(out), Arg::Whole(inp), u(1 << 18), u(1 << 18), u(i)], &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

#[test]
fn dropping_an_exec_with_replays_in_flight_waits_for_them() {
    let Some(vk) = backend_or_skip("dropping_an_exec_with_replays_in_flight_waits_for_them") else { return };
    let plan = mix_chain();
    for round in 0..8 {
        let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        for _ in 0..3 {
            exec.replay().unwrap();
        }
        // No wait: the drop must wait before it destroys the buffers and pipelines the replays use.
        drop(exec);
        // Another exec on the same device reuses the freed memory at once.
        let mut next = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        next.write_buffer(ostinato::BufferId(0), 0, &vec![round as u8; 1 << 20]).unwrap();
        next.replay().unwrap();
        next.wait().unwrap();
    }
}

/// Each workgroup spinning `p.m` × `p.n` dependent steps (each loads from an address the previous step
/// computed, so no compiler folds or shortens the loop). llvmpipe ends any one loop after 65,535
/// iterations and runs a lone workgroup fast, so the time comes from many workgroups: 8,192 × 60,000
/// steps, about 2.5 s on two CPU cores; a GPU runs those in a few milliseconds (2.4 ms on an H200), so
/// there the outer loop repeats them 200 times. Either way far past the 30 ms deadline below.
const SPIN: &str = r#"
struct Params { n: u32, m: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
var<immediate> p: Params;
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
    var acc = wg.x + 1u;
    for (var j = 0u; j < p.m; j = j + 1u) {
        for (var i = 0u; i < p.n; i = i + 1u) { acc = acc * 1664525u + x[acc & 15u] + 1013904223u; }
    }
    if (acc == 0xdeadbeefu) { x[16] = acc; }
}
"#;

#[test]
fn a_wait_past_the_deadline_faults_the_exec() {
    let Some(vk) = backend_or_skip("a_wait_past_the_deadline_faults_the_exec") else { return };
    let vk = vk.with_options(VulkanOptions { wait_timeout: Some(Duration::from_millis(30)), ..VulkanOptions::default() });
    let sig = KernelSig::new("spin").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32).scalar("m", ScalarType::U32);
    let repeats = if vk.context().name.contains("llvmpipe") { 1 } else { 200 };
    let kernel = vk.bind_kernel(&sig, &KernelRef::file(wgsl_file("spin.wgsl", SPIN)).with_entry("main")).unwrap();
    let mut g = Graph::new();
    let x = g.add_buffer("x", 128).unwrap();
    let k = g.add_kernel(sig).unwrap();
    g.add_launch(k, Launch::new([8192, 1, 1], [1, 1, 1]), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(60_000)), Arg::Scalar(Scalar::u32(repeats))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let mut exec = vk.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
    exec.replay().unwrap();
    let started = Instant::now();
    let e = exec.wait().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fault, "{e}");
    assert!(e.to_string().contains("30 ms") && e.to_string().contains("faulted"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2), "the wait gave up at its deadline ({:?})", started.elapsed());
    assert!(exec.fault().is_some());
    for e in [exec.replay().unwrap_err(), exec.wait().unwrap_err(), exec.write_buffer(x, 0, &[0u8; 4]).unwrap_err()] {
        assert_eq!(e.kind(), ErrorKind::State, "{e}");
    }
    let mut out = [0u8; 4];
    let e = exec.read_buffer(x, 0, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State, "{e}");
    assert!(e.to_string().contains("faulted"), "{e}");
    // The drop does not wait for the running replay: it leaks what the device may still use.
    let dropped = Instant::now();
    drop(exec);
    assert!(dropped.elapsed() < Duration::from_secs(1), "a faulted exec's drop returns at once ({:?})", dropped.elapsed());
}

#[test]
fn grids_and_workgroups_past_the_device_limits_are_refused() {
    let Some(vk) = backend_or_skip("grids_and_workgroups_past_the_device_limits_are_refused") else { return };
    let limits = vk.context().limits;
    let add_one = KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let refused = |sig: &KernelSig, kernel: ostinato_vulkan::VulkanKernel, launch: Launch| {
        let mut g = Graph::new();
        let x = g.add_buffer("x", 1024).unwrap();
        let k = g.add_kernel(sig.clone()).unwrap();
        g.add_launch(k, launch, &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        vk.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).err()
    };
    let builtin = vk.bind_kernel(&add_one, &KernelRef::builtin("add_one")).unwrap();
    for grid in [[u32::MAX, 1, 1], [1, limits.workgroup_count[1].saturating_add(1), 1], [1, 1, limits.workgroup_count[2].saturating_add(1)]] {
        let e = refused(&add_one, builtin.clone(), Launch::new(grid, [256, 1, 1])).expect("refused");
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("node 0 (add_one)") && e.to_string().contains("maxComputeWorkGroupCount"), "{e}");
    }
    assert!(refused(&add_one, builtin, Launch::new(limits.workgroup_count, [256, 1, 1])).is_none() || limits.workgroup_count[0] == 0, "at the limits it runs");
    let wide = limits.workgroup_size[0].saturating_add(1);
    let src = format!("struct P {{ n: u32 }}\n@group(0) @binding(0) var<storage, read_write> x: array<f32>;\nvar<immediate> p: P;\n@compute @workgroup_size({wide})\nfn main(@builtin(local_invocation_index) i: u32) {{ if (i < p.n) {{ x[i] = x[i] + 1.0; }} }}\n");
    // A shader whose workgroup is past the limits is refused when bound: no pipeline is made for it.
    let e = vk.bind_kernel(&add_one, &KernelRef::file(wgsl_file("wide.wgsl", &src)).with_entry("main")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("`add_one`") && e.to_string().contains("maxComputeWorkGroupSize"), "{e}");
    let side = (limits.workgroup_invocations as f64).sqrt() as u32 + 1;
    if side <= limits.workgroup_size[0] && side <= limits.workgroup_size[1] {
        let src = src.replace(&format!("@workgroup_size({wide})"), &format!("@workgroup_size({side}, {side})"));
        let e = vk.bind_kernel(&add_one, &KernelRef::file(wgsl_file("square.wgsl", &src)).with_entry("main")).unwrap_err();
        assert!(e.to_string().contains(&format!("{} invocations", side * side)) && e.to_string().contains("maxComputeWorkGroupInvocations"), "{e}");
    }
}
