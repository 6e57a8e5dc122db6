//! The Vulkan backend (`VulkanBackend` / `VulkanExec`) on whatever Vulkan device is found (Mesa's
//! lavapipe in CI, the GPU's driver on the device machine), against the host oracle bit for bit:
//! random dependent `mix` programs with views, overlapping slices, fans, copies, fills, explicit edges
//! and a slot changed every replay; every recorded command list checked against its plan. Skips with a
//! message where no Vulkan loader or device is found.

mod common;

use ostinato::rng::XorShift64 as Rng;
use ostinato::{Arg, Backend, BufferId, Exec, Graph, KernelRef, Launch, NodeId, Plan, Scalar, ScalarType, Slice};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::mix_sig;
use ostinato_vulkan::{commands, VulkanBackend};

use common::backend_or_skip;

/// A random program: 1–3 roots of 8 KiB (one with a view at a random word offset), `mix` nodes on
/// slices starting at any 4-byte offset (bound from the aligned byte below, the rest an element
/// offset) that may overlap other nodes' slices, copies and fills of arbitrary word ranges, some
/// explicit edges; salt from slot `salt` on some nodes.
fn program(seed: u64, nodes: usize) -> Graph {
    let mut r = Rng::seeded(seed);
    let mut g = Graph::new();
    let roots = 1 + r.below(3);
    let mut bufs: Vec<(BufferId, u64)> = (0..roots).map(|b| (g.add_buffer(format!("b{b}"), 8192).unwrap(), 8192)).collect();
    let view = g.add_view("v", bufs[0].0, 4 * (1 + r.below(1000)), 4096).unwrap();
    bufs.push((view, 4096));
    let k = g.add_kernel(mix_sig()).unwrap();
    let salt = g.add_slot("salt", Scalar::u32(0)).unwrap();
    let mut made: Vec<NodeId> = Vec::new();
    while made.len() < nodes {
        let pick = |r: &mut Rng| {
            let (b, size) = bufs[r.below(bufs.len() as u64) as usize];
            let off = 4 * r.below(size / 4 - 1);
            Slice { buffer: b, offset: off, len: 4 * (1 + r.below(((size - off) / 4).min(300) - 1)) }
        };
        let after: Vec<NodeId> = if !made.is_empty() && r.below(6) == 0 { vec![made[r.below(made.len() as u64) as usize]] } else { vec![] };
        let node = match r.below(8) {
            0 => {
                let (src, dst) = (pick(&mut r), pick(&mut r));
                let len = src.len.min(dst.len);
                let (src, dst) = (Slice { len, ..src }, Slice { len, ..dst });
                let (gs, gd) = (g.root_extent(src), g.root_extent(dst));
                if gs.0 == gd.0 && gs.1 < gd.2 && gd.1 < gs.2 {
                    continue;
                }
                g.add_copy(src, dst, &after).unwrap()
            }
            1 => g.add_fill(pick(&mut r), r.below(1 << 31) as u32, &after).unwrap(),
            _ => {
                let (out, inp) = (pick(&mut r), pick(&mut r));
                let (go, gi) = (g.root_extent(out), g.root_extent(inp));
                if go.0 == gi.0 && go.1 < gi.2 && gi.1 < go.2 {
                    continue;
                }
                let s = if r.below(2) == 0 { Arg::Slot(salt) } else { Arg::Scalar(Scalar::u32(r.below(1 << 30) as u32)) };
                let args =
                    [Arg::Buffer(out), Arg::Buffer(inp), Arg::Scalar(Scalar::u32((out.len / 4) as u32)), Arg::Scalar(Scalar::u32((inp.len / 4) as u32)), s];
                g.add_launch(k, Launch::linear(1 + r.below(4) as u32, 256), &args, &after).unwrap()
            }
        };
        made.push(node);
    }
    g
}

/// Replays `plan` `replays` times on `exec` from the same initial bytes, the salt slot patched to
/// r * 0x9E3779B9 before replay r where `patch` (else back to back: no wait, no patch between them);
/// returns every root's bytes.
fn run<E: Exec>(exec: &mut E, plan: &Plan, seed: u64, replays: u32, patch: bool) -> Vec<Vec<u8>>
where
    E::Error: std::fmt::Debug,
{
    let g = plan.graph();
    let roots: Vec<BufferId> = (0..g.buffers().len()).map(|i| BufferId(i as u32)).filter(|b| g.buffer(*b).root == *b).collect();
    for &b in &roots {
        let mut r = Rng::seeded(seed ^ b.0 as u64);
        let bytes: Vec<u8> = (0..g.buffer(b).size).map(|_| r.below(256) as u8).collect();
        exec.write_buffer(b, 0, &bytes).unwrap();
    }
    for i in 0..replays {
        if patch {
            exec.set_slot(ostinato::SlotId(0), Scalar::u32(i.wrapping_mul(0x9E37_79B9))).unwrap();
        }
        exec.replay().unwrap();
    }
    exec.wait().unwrap();
    roots
        .iter()
        .map(|&b| {
            let mut v = vec![0u8; g.buffer(b).size as usize];
            exec.read_buffer(b, 0, &mut v).unwrap();
            v
        })
        .collect()
}

#[test]
fn random_programs_match_the_host_oracle_bit_for_bit() {
    let Some(vk) = backend_or_skip("random_programs_match_the_host_oracle_bit_for_bit") else { return };
    eprintln!("vulkan device: {}", vk.context().name);
    // Every node its own dispatch (fusion off: the fused programs are `vulkan_fusion`'s).
    let vk = vk.with_options(ostinato_vulkan::VulkanOptions { fusion: ostinato_vulkan::FusionMode::Off, ..Default::default() });
    let host = HostBackend::serial();
    let (mut barriers, mut nodes, mut pushed, mut written, mut slotted, mut kernels_in_all) = (0, 0, 0, 0, 0, 0);
    for seed in 0..60u64 {
        let plan = Plan::compile(&program(seed, 4 + seed as usize % 40)).unwrap();
        let kernels = ostinato::bind_builtins(&vk, &plan).unwrap();
        let mut exec = vk.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        commands::check(&plan, exec.commands()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        barriers += exec.commands().iter().filter(|c| matches!(c, commands::Cmd::Barrier { .. })).count();
        nodes += plan.node_count();
        // Every kernel node without a slot takes its scalars as push constants; the rest read the buffer.
        let kernel_nodes = plan.graph().nodes().iter().filter(|n| matches!(n.op, ostinato::NodeOp::Kernel { .. }));
        let with_slot = kernel_nodes
            .clone()
            .filter(|n| matches!(&n.op, ostinato::NodeOp::Kernel { args, .. } if args.iter().any(|a| matches!(a, ostinato::Arg::Slot(_)))))
            .count();
        assert_eq!(exec.pushed_dispatches(), kernel_nodes.clone().count() - with_slot, "seed {seed}");
        // The nodes whose every slice starts on a binding boundary, pushed or with a slot, run the kernel
        // as written; the rest add element offsets.
        let align = vk.context().storage_alignment();
        let g = plan.graph();
        let as_written = kernel_nodes
            .clone()
            .filter(|n| match &n.op {
                ostinato::NodeOp::Kernel { args, .. } => args.iter().all(|a| !matches!(a, ostinato::Arg::Buffer(s) if g.root_extent(*s).1 % align != 0)),
                _ => false,
            })
            .count();
        assert_eq!(exec.as_written_dispatches(), as_written, "seed {seed}");
        pushed += exec.pushed_dispatches();
        written += as_written;
        kernels_in_all += kernel_nodes.count();
        slotted += with_slot;
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        assert_eq!(run(&mut exec, &plan, seed, 3, true), run(&mut oracle, &plan, seed, 3, true), "seed {seed}");
    }
    eprintln!(
        "compared 60 random programs ({nodes} nodes, {barriers} barriers, {pushed} dispatches with push constants, {slotted} with a slot, {written} of {kernels_in_all} dispatches as written) bitwise with the host oracle"
    );
    assert!(written > 0 && written < kernels_in_all, "both forms exercised: {written} of {kernels_in_all} dispatches as written");
    // The plan's lanes on separate queues where the device has several; on a device of one queue,
    // the lanes' segments and semaphores all on it (the same submissions, run one after another).
    let queues = vk.context().queue_count();
    let lanes = vk.clone().with_queues(ostinato_vulkan::QueueMode::Lanes).with_lane_queues(queues);
    let (mut multi, mut waits) = (0, 0);
    for seed in 0..60u64 {
        let plan = Plan::compile(&program(seed, 4 + seed as usize % 40)).unwrap();
        let mut exec = lanes.instantiate(&plan, ostinato::bind_builtins(&lanes, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        if let Some(lp) = exec.lane_plan() {
            ostinato_vulkan::lanes::check(exec.run_plan(), lp).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            waits += exec.lane_counts().unwrap().waits;
            multi += 1;
        } else {
            assert!(exec.lanes_fallback().unwrap().contains("one lane"), "seed {seed}: {:?}", exec.lanes_fallback());
        }
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        assert_eq!(run(&mut exec, &plan, seed, 3, true), run(&mut oracle, &plan, seed, 3, true), "seed {seed}: lanes on {queues} queues");
        // Back to back: each replay ordered after the previous one by the lanes' replay waits alone.
        assert_eq!(run(&mut exec, &plan, seed, 4, false), run(&mut oracle, &plan, seed, 4, false), "seed {seed}: lanes on {queues} queues, in flight");
    }
    assert!(multi > 30, "only {multi} of 60 programs ran their lanes apart");
    eprintln!("compared 60 random programs with their lanes on {queues} queue(s) ({multi} with several lanes; {waits} semaphore waits per replay in all) bitwise with the host oracle");
    assert!(barriers < nodes, "independent nodes share barriers");
    assert!(pushed > 0 && slotted > 0, "both ways of passing scalars are exercised");
}

/// One invocation per workgroup writes 1 + x + 10 y + 100 z at the group's linear index.
const GRID3: &str = r#"
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<immediate> p: Params;
@compute @workgroup_size(64)
fn grid3(@builtin(workgroup_id) w: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let i = w.x + n.x * (w.y + n.y * w.z);
    if (l == 0u && i < p.n) { out[i] = 1u + w.x + 10u * w.y + 100u * w.z; }
}
"#;

#[test]
fn three_d_grids_a_wgsl_file_and_replays_in_flight() {
    let Some(vk) = backend_or_skip("three_d_grids_a_wgsl_file_and_replays_in_flight") else { return };
    let dir = std::env::temp_dir().join(format!("ostinato-vk3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("grid3.wgsl"), GRID3).unwrap();
    let mut g = Graph::new();
    let out = g.add_buffer("out", 4 * 24).unwrap();
    let sig = ostinato::KernelSig::new("grid3").buffer("out", ostinato::Access::Write).scalar("n", ScalarType::U32);
    let k = g.add_kernel(sig.clone()).unwrap();
    g.add_launch(k, Launch::new([4, 3, 2], [64, 1, 1]), &[Arg::Whole(out), Arg::Scalar(Scalar::u32(24))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let kernel = vk.bind_kernel(&sig, &KernelRef::file(dir.join("grid3.wgsl"))).unwrap();
    let mut exec = vk.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
    exec.replay().unwrap();
    let mut bytes = vec![0u8; 4 * 24];
    exec.read_buffer(out, 0, &mut bytes).unwrap();
    let got: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let want: Vec<u32> = (0..24u32).map(|i| 1 + i % 4 + 10 * ((i / 4) % 3) + 100 * (i / 12)).collect();
    assert_eq!(got, want);

    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * 4096).unwrap();
    let k = g.add_kernel(ostinato::KernelSig::new("add_one").buffer("x", ostinato::Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    g.add_launch(k, Launch::linear(4, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(4096))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    exec.write_buffer(x, 0, &vec![0u8; 4 * 4096]).unwrap();
    for _ in 0..10 {
        exec.replay().unwrap(); // several in flight: the leading barrier orders each after the last
    }
    let mut out = vec![0u8; 4 * 4096];
    exec.read_buffer(x, 0, &mut out).unwrap();
    assert!(out.chunks_exact(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 10.0));
}

#[test]
fn bad_input_is_named() {
    let Some(vk) = backend_or_skip("bad_input_is_named") else { return };
    // A buffer on a second device, and a collective: a Vulkan exec drives one device and has no NCCL.
    let mut two = Graph::new();
    let (x0, x1) = (two.add_buffer_on("x0", 64, 0).unwrap(), two.add_buffer_on("x1", 64, 1).unwrap());
    let (w0, w1) = (two.whole(x0), two.whole(x1));
    two.add_collective(ostinato::collective::CollectiveOp::AllReduceSum, ScalarType::F32, &[w0, w1], &[w0, w1], &[]).unwrap();
    let plan = Plan::compile(&two).unwrap();
    let refused = |plan: &Plan| vk.instantiate(plan, vec![], ostinato::allocate_all(plan)).err().map(|e| e.to_string()).unwrap_or_default();
    let e = refused(&plan);
    assert!(e.contains("buffer `x1` is on device 1: a vulkan exec drives one device"), "{e}");
    let mut one = Graph::new();
    let y = one.add_buffer("y", 64).unwrap();
    let wy = one.whole(y);
    one.add_collective(ostinato::collective::CollectiveOp::AllReduceSum, ScalarType::F32, &[wy], &[wy], &[]).unwrap();
    let plan = Plan::compile(&one).unwrap();
    let e = refused(&plan);
    assert!(e.contains("node 0 (all_reduce over 1 ranks): collectives run on CUDA with NCCL"), "{e}");
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    misaligned_slices_are_named(&vk);
    // A launch whose block is not the shader's workgroup.
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let b = g.add_buffer("b", 4096).unwrap();
    g.add_launch(k, Launch::linear(1, 128), &[Arg::Whole(a), Arg::Whole(b), u(16), u(16), u(1)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let e = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).err().unwrap().to_string();
    assert!(e.contains("block [128, 1, 1]") && e.contains("workgroup size is [256, 1, 1]"), "{e}");
    // A WGSL file without the entry point, and an unknown built-in.
    let dir = std::env::temp_dir().join(format!("ostinato-vk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("k.wgsl");
    std::fs::write(&f, ostinato_vulkan::shaders::wgsl("mix").unwrap()).unwrap();
    let e = vk.bind_kernel(&mix_sig(), &KernelRef::file(&f).with_entry("mix_kernel")).unwrap_err().to_string();
    assert!(e.contains("`mix`") && e.contains("no entry point `mix_kernel`"), "{e}");
    assert!(vk.bind_kernel(&mix_sig(), &KernelRef::file(&f).with_entry("main")).is_ok());
    // WGSL carried in the reference (a pack's kernel): bound with no file read, its declared access
    // checked against it; code that is not named `.wgsl` is refused.
    let code = ostinato_vulkan::shaders::wgsl("mix").unwrap();
    assert!(vk.bind_kernel(&mix_sig(), &KernelRef::code("pack-mix.wgsl", code.as_str()).with_entry("main")).is_ok());
    let e = vk.bind_kernel(&mix_sig(), &KernelRef::code("pack-mix.wgsl", code.as_str()).with_entry("mix_kernel")).unwrap_err().to_string();
    assert!(e.contains("no entry point `mix_kernel`"), "{e}");
    let reads_only = ostinato::KernelSig::new("mix")
        .buffer("out", ostinato::Access::Read)
        .buffer("inp", ostinato::Access::Read)
        .scalar("n_out", ostinato::ScalarType::U32)
        .scalar("n_in", ostinato::ScalarType::U32)
        .scalar("salt", ostinato::ScalarType::U32);
    let e = vk.bind_kernel(&reads_only, &KernelRef::code("pack-mix.wgsl", code.as_str()).with_entry("main")).unwrap_err().to_string();
    assert!(e.contains("`out`"), "a declaration the carried code contradicts is refused: {e}");
    let e = vk.bind_kernel(&mix_sig(), &KernelRef::code("pack-mix.cu", code.as_str())).unwrap_err().to_string();
    assert!(e.contains("must be WGSL"), "{e}");
    let e = vk.bind_kernel(&ostinato::KernelSig::new("fft").buffer("x", ostinato::Access::ReadWrite), &KernelRef::builtin("fft")).unwrap_err().to_string();
    assert!(e.contains("no WGSL version of kernel `fft`"), "{e}");
    // Not applicable (what lets a caller skip the backend), also where the code would be verified.
    let sig = ostinato::KernelSig::new("fft").buffer("x", ostinato::Access::Read).buffer("y", ostinato::Access::Write);
    let e = vk.bind_kernel(&sig, &KernelRef::builtin("fft")).unwrap_err();
    assert!(matches!(e, ostinato_vulkan::VkError::NotApplicable(_)), "{e}");
}

/// Scales `v: array<vec2<f32>>` by 2 (8-byte elements).
const VEC2: &str = r#"
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> v: array<vec2<f32>>;
var<immediate> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n && gid.x < arrayLength(&v)) { v[gid.x] = v[gid.x] * 2.0; }
}
"#;

/// A binding whose struct has a header before its array: it cannot take an element offset.
const HEADED: &str = r#"
struct Data { count: u32, items: array<u32> }
@group(0) @binding(0) var<storage, read_write> d: Data;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < d.count) { d.items[gid.x] = d.items[gid.x] + 1u; }
}
"#;

/// A slice at a byte no binding reaches in whole elements is an argument error naming node, param and
/// element type; a slice at an 8-byte multiple of 8-byte elements runs (bound from the aligned byte
/// below); a binding that cannot take an offset is refused at an unaligned slice, naming the binding.
fn misaligned_slices_are_named(vk: &VulkanBackend) {
    let dir = std::env::temp_dir().join(format!("ostinato-vk-off-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vec2.wgsl"), VEC2).unwrap();
    std::fs::write(dir.join("headed.wgsl"), HEADED).unwrap();
    let sig = ostinato::KernelSig::new("scale2").buffer("v", ostinato::Access::ReadWrite).scalar("n", ScalarType::U32);
    let kernel = vk.bind_kernel(&sig, &KernelRef::file(dir.join("vec2.wgsl")).with_entry("main")).unwrap();
    let run_at = |offset: u64| {
        let mut g = Graph::new();
        let a = g.add_buffer("a", 1024).unwrap();
        let k = g.add_kernel(sig.clone()).unwrap();
        g.add_launch(k, Launch::linear(1, 64), &[Arg::Buffer(Slice { buffer: a, offset, len: 64 }), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        vk.instantiate(&plan, vec![kernel.clone()], ostinato::allocate_all(&plan)).map(|e| (e, a))
    };
    let e = run_at(4).err().unwrap();
    assert_eq!(e.kind(), ostinato::ErrorKind::Argument, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("node n0") && msg.contains("param `v`") && msg.contains("vec2<f32>") && msg.contains("byte 4"), "{msg}");
    let (mut exec, a) = run_at(8 + 16 * 3).unwrap();
    let words: Vec<u8> = (0..256u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    exec.write_buffer(a, 0, &words).unwrap();
    exec.replay().unwrap();
    let mut out = vec![0u8; 1024];
    exec.read_buffer(a, 0, &mut out).unwrap();
    let got: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let want: Vec<f32> = (0..256).map(|i| if (14..30).contains(&i) { 2.0 * i as f32 } else { i as f32 }).collect();
    assert_eq!(got, want, "16 floats from byte 56 doubled, and nothing else");
    let hsig = ostinato::KernelSig::new("headed").buffer("d", ostinato::Access::ReadWrite);
    let headed = vk.bind_kernel(&hsig, &KernelRef::file(dir.join("headed.wgsl")).with_entry("main")).unwrap();
    let mut g = Graph::new();
    let a = g.add_buffer("a", 1024).unwrap();
    let k = g.add_kernel(hsig).unwrap();
    g.add_launch(k, Launch::linear(1, 64), &[Arg::Buffer(Slice { buffer: a, offset: 20, len: 64 })], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let e = vk.instantiate(&plan, vec![headed.clone()], ostinato::allocate_all(&plan)).err().unwrap();
    assert_eq!(e.kind(), ostinato::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("param `d`") && e.to_string().contains("binding 0 cannot take an element offset") && e.to_string().contains("Data"), "{e}");
    let mut g = Graph::new();
    let a = g.add_buffer("a", 1024).unwrap();
    let k = g.add_kernel(ostinato::KernelSig::new("headed").buffer("d", ostinato::Access::ReadWrite)).unwrap();
    g.add_launch(k, Launch::linear(1, 64), &[Arg::Buffer(Slice { buffer: a, offset: 32, len: 64 })], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    assert!(vk.instantiate(&plan, vec![headed], ostinato::allocate_all(&plan)).is_ok(), "an aligned slice needs no offset");
}

#[test]
fn every_replay_ordering_matches_the_host_with_replays_waited_or_in_flight() {
    use ostinato::Named;
    use ostinato_vulkan::{ReplayOrdering, VulkanOptions};
    let Some(vk) = backend_or_skip("every_replay_ordering_matches_the_host_with_replays_waited_or_in_flight") else { return };
    let host = HostBackend::serial();
    for &ordering in ReplayOrdering::ALL {
        let backend = vk.clone().with_options(VulkanOptions { ordering, ..VulkanOptions::default() });
        let mut ordered = 0;
        for seed in 100..120u64 {
            let plan = Plan::compile(&program(seed, 4 + seed as usize % 30)).unwrap();
            let mut exec = backend.instantiate(&plan, ostinato::bind_builtins(&backend, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            assert_eq!(run(&mut exec, &plan, seed, 3, true), run(&mut oracle, &plan, seed, 3, true), "seed {seed}, {ordering:?}, replays waited for");
            assert_eq!(run(&mut exec, &plan, seed, 4, false), run(&mut oracle, &plan, seed, 4, false), "seed {seed}, {ordering:?}, in flight");
            ordered += exec.ordered_replays();
        }
        match ordering {
            // Back-to-back replays could not all be proven complete: some were ordered on the device.
            ReplayOrdering::Skip | ReplayOrdering::Events => assert!(ordered > 0, "{ordering:?}"),
            _ => assert_eq!(ordered, 0, "{ordering:?}"),
        }
    }
}

/// The `mix` built-in as a SPIR-V file of the storage-buffer convention (scalars in the storage buffer
/// after the buffers), written by naga from its WGSL.
fn mix_spirv(debug_names: bool) -> Vec<u8> {
    let mut module = naga::front::wgsl::parse_str(&ostinato_vulkan::shaders::wgsl("mix").unwrap()).unwrap();
    for (_, v) in module.global_variables.iter_mut() {
        if v.space == naga::AddressSpace::Immediate {
            v.space = naga::AddressSpace::Storage { access: naga::StorageAccess::LOAD };
            v.binding = Some(naga::ResourceBinding { group: 0, binding: 2 });
        }
    }
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty()).validate(&module).unwrap();
    // naga names things in its debug builds only: both kinds of module, whatever this test's build.
    let flags = if debug_names { naga::back::spv::WriterFlags::DEBUG } else { naga::back::spv::WriterFlags::empty() };
    let options = naga::back::spv::Options { lang_version: (1, 3), flags, ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).unwrap().iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn a_spirv_kernel_takes_slices_at_any_offset_through_nagas_front_end() {
    let Some(vk) = backend_or_skip("a_spirv_kernel_takes_slices_at_any_offset_through_nagas_front_end") else { return };
    let vk = vk.with_options(ostinato_vulkan::VulkanOptions { fusion: ostinato_vulkan::FusionMode::Off, ..Default::default() });
    let host = HostBackend::serial();
    // With debug names and without: unnamed module-scope variables of one type must stay apart when
    // the element-offset rewrite rebuilds the module (two merged once, and nothing was written). A
    // node whose slices all start on binding boundaries runs the words as given.
    let mut as_given = 0;
    for (names, seed) in [true, false].into_iter().flat_map(|n| (200..215u64).map(move |s| (n, s))) {
        let path = std::env::temp_dir().join(format!("ostinato-vk-spv-{}-{names}.spv", std::process::id()));
        std::fs::write(&path, mix_spirv(names)).unwrap();
        let kernel = vk.bind_kernel(&mix_sig(), &KernelRef::file(&path).with_entry("main")).unwrap();
        let g = program(seed, 6 + seed as usize % 20);
        let plan = Plan::compile(&g).unwrap();
        let mut exec = vk.instantiate(&plan, vec![kernel.clone()], ostinato::allocate_all(&plan)).unwrap();
        as_given += exec.as_written_dispatches();
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        let (got, want) = (run(&mut exec, &plan, seed, 2, true), run(&mut oracle, &plan, seed, 2, true));
        for (b, (got, want)) in got.iter().zip(&want).enumerate() {
            let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
            assert!(
                differ.is_empty(),
                "seed {seed} (debug names: {names}): the SPIR-V mix differs from the host in {} bytes of root {b}, first at byte {}",
                differ.len(),
                differ[0]
            );
        }
    }
    assert!(as_given > 0, "no node ran the SPIR-V words as given");
}
