//! Chain fusion on Vulkan against the host oracle: random one-workgroup programs (views, slices at
//! any word offset, copies, fills, explicit edges, a slot patched every replay) fused under `on` and
//! `auto` give the host's bits; a long chain becomes one dispatch; independent chains become the
//! workgroups of one; a body with barriers of its own fuses (and matches the host), one launched on
//! several workgroups without tile maps is not fused, and a plan where nothing fuses records what the
//! unfused exec records; built-in bodies ordered only through one invocation's elements fuse without
//! a barrier between them, and keep it through a view one element apart. (User kernels of many workgroups fused on maps verified from their WGSL:
//! `vulkan_tile_maps.rs`.)
//! Skips without a Vulkan device.

mod common;

use ostinato::{read_roots, write_inits, Access, Arg, Backend, BufferId, Exec, Graph, Launch, Plan, PlanOptions, Scalar, ScalarType};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::random_one_block_program;
use ostinato_vulkan::{FusionMode, VulkanBackend, VulkanOptions};

use common::backend_or_skip;

fn with_fusion(vk: &VulkanBackend, fusion: FusionMode) -> VulkanBackend {
    vk.clone().with_options(VulkanOptions { fusion, ..VulkanOptions::default() })
}

/// Writes `inits`, then `replays` replays each after setting `slot` to a new value; every root's bytes.
fn run<E: Exec>(exec: &mut E, inits: &[Option<ostinato::file::BufferInit>], slot: ostinato::SlotId, replays: u32) -> Vec<(BufferId, Vec<u8>)>
where
    E::Error: std::fmt::Debug,
{
    write_inits(exec, inits).unwrap();
    for r in 0..replays {
        exec.set_slot(slot, Scalar::u32(r.wrapping_mul(0x9E37_79B9) ^ 5)).unwrap();
        exec.replay().unwrap();
    }
    read_roots(exec).unwrap()
}

#[test]
fn random_one_workgroup_programs_fused_match_the_host_oracle() {
    let Some(vk) = backend_or_skip("random_one_workgroup_programs_fused_match_the_host_oracle") else { return };
    let host = HostBackend::serial();
    let (mut fused, mut total, mut dispatches) = (0, 0, 0);
    for seed in 0..40u64 {
        let prog = random_one_block_program(seed, 6 + (seed as usize * 7) % 45);
        for max_lanes in [1, 4] {
            let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
            let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            let want = run(&mut oracle, &prog.inits, prog.salt_slot, 3);
            for mode in [FusionMode::Auto, FusionMode::On] {
                let b = with_fusion(&vk, mode);
                let mut exec = b.instantiate(&plan, ostinato::bind_builtins(&b, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
                ostinato_vulkan::commands::check(exec.run_plan(), exec.commands()).unwrap();
                assert_eq!(run(&mut exec, &prog.inits, prog.salt_slot, 3), want, "seed {seed}, {max_lanes} lanes, fusion {mode:?}");
                fused += exec.fused_nodes();
                total += plan.node_count();
                dispatches += exec.run_plan().node_count();
            }
        }
    }
    assert!(fused > total / 3, "{fused} of {total} nodes fused");
    eprintln!("{fused} of {total} nodes ran fused ({dispatches} nodes replayed), bitwise equal to the host oracle on {}", vk.context().name);
}

/// An exec written, replayed once and read back as f32s, whatever its backend.
trait ReplayOnce {
    fn once(&mut self, inputs: &[(BufferId, &[u8])], out: BufferId) -> Vec<f32>;
}

impl<E: Exec> ReplayOnce for E
where
    E::Error: std::fmt::Debug,
{
    fn once(&mut self, inputs: &[(BufferId, &[u8])], out: BufferId) -> Vec<f32> {
        for (b, bytes) in inputs {
            self.write_buffer(*b, 0, bytes).unwrap();
        }
        self.replay().unwrap();
        self.wait().unwrap();
        let mut v = vec![0u8; 4096];
        self.read_buffer(out, 0, &mut v).unwrap();
        v.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
}

fn add_one(g: &mut Graph) -> ostinato::KernelId {
    g.add_kernel(ostinato::KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap()
}

/// `lanes` chains of `len` add_one nodes on their own buffers of 256 words, recorded interleaved.
fn chains(lanes: usize, len: usize, groups: u32) -> (Plan, Vec<BufferId>) {
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 1024).unwrap()).collect();
    let k = add_one(&mut g);
    for _ in 0..len {
        for &b in &bufs {
            g.add_launch(k, Launch::linear(groups, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        }
    }
    (Plan::compile(&g).unwrap(), bufs)
}

fn first_word(exec: &mut impl Exec<Error = ostinato_vulkan::VkError>, b: BufferId) -> f32 {
    let mut w = [0u8; 4];
    exec.read_buffer(b, 0, &mut w).unwrap();
    f32::from_le_bytes(w)
}

#[test]
fn chains_fuse_into_one_dispatch_and_bodies_that_cannot_are_left_alone() {
    let Some(vk) = backend_or_skip("chains_fuse_into_one_dispatch_and_bodies_that_cannot_are_left_alone") else { return };
    let auto = with_fusion(&vk, FusionMode::Auto);
    // A chain of 941 one-workgroup nodes: one dispatch (a loop in the shader).
    let (plan, bufs) = chains(1, 941, 1);
    let mut exec = auto.instantiate(&plan, ostinato::bind_builtins(&auto, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (941, 1));
    exec.write_buffer(bufs[0], 0, &[0u8; 1024]).unwrap();
    exec.replay().unwrap();
    exec.replay().unwrap();
    assert_eq!(first_word(&mut exec, bufs[0]), 1882.0);
    // Four independent chains: the workgroups of one dispatch.
    let (plan, bufs) = chains(4, 100, 1);
    let mut exec = auto.instantiate(&plan, ostinato::bind_builtins(&auto, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.fused_nodes(), 400);
    assert_eq!(exec.run_plan().node_count(), 1, "4 lanes side by side, one workgroup each");
    for &b in &bufs {
        exec.write_buffer(b, 0, &[0u8; 1024]).unwrap();
    }
    exec.replay().unwrap();
    for &b in &bufs {
        assert_eq!(first_word(&mut exec, b), 100.0);
    }
    // Launched on two workgroups: not fused.
    let (plan, _) = chains(1, 20, 2);
    let exec = auto.instantiate(&plan, ostinato::bind_builtins(&auto, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.fused_nodes(), 0);
    // rmsnorm reduces with workgroup barriers of its own: not fused.
    let mut g = Graph::new();
    let (a, b, w) = (g.add_buffer("a", 4096).unwrap(), g.add_buffer("b", 4096).unwrap(), g.add_buffer("w", 4096).unwrap());
    let k = g.add_kernel(ostinato_host::builtins::lookup("rmsnorm").unwrap().sig).unwrap();
    for i in 0..6 {
        let (out, x) = if i % 2 == 0 { (b, a) } else { (a, b) };
        g.add_launch(
            k,
            Launch::linear(1, 256),
            &[Arg::Whole(out), Arg::Whole(x), Arg::Whole(w), Arg::Scalar(Scalar::u32(1024)), Arg::Scalar(Scalar::f32(1e-5))],
            &[],
        )
        .unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let on = with_fusion(&vk, FusionMode::On);
    let mut exec = on.instantiate(&plan, ostinato::bind_builtins(&on, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.fused_nodes(), 6, "a body with barriers of its own (in uniform control flow) fuses");
    let host = HostBackend::serial();
    let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    let input: Vec<u8> = (0..1024u32).flat_map(|i| (1.0 + (i % 17) as f32 / 8.0).to_le_bytes()).collect();
    let weights: Vec<u8> = (0..1024u32).flat_map(|i| (0.5 + (i % 5) as f32 / 4.0).to_le_bytes()).collect();
    let mut outs = Vec::new();
    for e in [&mut exec as &mut dyn ReplayOnce, &mut oracle] {
        outs.push(e.once(&[(a, &input), (w, &weights)], a));
    }
    for (i, (v, h)) in outs[0].iter().zip(&outs[1]).enumerate() {
        assert!((v - h).abs() <= 1e-5 * h.abs().max(1.0), "element {i}: fused {v}, host {h}");
    }
    // Fusion off: every node its own dispatch.
    let off = with_fusion(&vk, FusionMode::Off);
    let (plan, _) = chains(1, 50, 1);
    let exec = off.instantiate(&plan, ostinato::bind_builtins(&off, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (0, 50));
}

/// Where nothing fuses (nodes of several workgroups), fusion `auto` records exactly the commands of
/// fusion `off`: a difference measured between the two execs on such a plan is not the recording.
#[test]
fn a_plan_nothing_fuses_in_records_what_the_unfused_exec_records() {
    let Some(vk) = backend_or_skip("a_plan_nothing_fuses_in_records_what_the_unfused_exec_records") else { return };
    let (auto, off) = (with_fusion(&vk, FusionMode::Auto), with_fusion(&vk, FusionMode::Off));
    for (lanes, groups) in [(1, 2), (1, 128), (4, 1024)] {
        let (plan, _) = chains(lanes, 30, groups);
        let a = auto.instantiate(&plan, ostinato::bind_builtins(&auto, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        let o = off.instantiate(&plan, ostinato::bind_builtins(&off, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        assert_eq!(a.fused_nodes(), 0);
        assert_eq!(a.commands(), o.commands(), "{lanes} chains of {groups} workgroups");
        assert_eq!(a.pushed_dispatches(), o.pushed_dispatches());
    }
    // And where something fuses, the recordings differ (the comparison above can fail).
    let (plan, _) = chains(1, 30, 1);
    let a = auto.instantiate(&plan, ostinato::bind_builtins(&auto, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    let o = off.instantiate(&plan, ostinato::bind_builtins(&off, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_ne!(a.commands(), o.commands());
}

#[test]
fn random_tiled_programs_fused_block_by_block_match_the_host_oracle() {
    let Some(vk) = backend_or_skip("random_tiled_programs_fused_block_by_block_match_the_host_oracle") else { return };
    let host = HostBackend::serial();
    let (mut fused, mut total) = (0, 0);
    let mut ran = 0;
    for seed in 0..120u64 {
        let prog = ostinato_testkit::tiled_graphs::random_tiled_program(seed, 4 + (seed as usize * 5) % 16);
        // The WGSL built-ins run 256-wide workgroups: programs with other blocks are not for Vulkan.
        let wide = prog.graph.nodes().iter().all(|n| matches!(&n.op, ostinato::NodeOp::Kernel { launch, .. } if launch.block == [256, 1, 1]));
        if !wide {
            continue;
        }
        ran += 1;
        let plan = Plan::compile(&prog.graph).unwrap();
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        let want = run(&mut oracle, &prog.inits, prog.salt_slot, 2);
        for mode in [FusionMode::Auto, FusionMode::On] {
            let b = with_fusion(&vk, mode);
            let mut exec = b.instantiate(&plan, ostinato::bind_builtins(&b, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            ostinato_vulkan::commands::check(exec.run_plan(), exec.commands()).unwrap();
            assert_eq!(run(&mut exec, &prog.inits, prog.salt_slot, 2), want, "seed {seed}, fusion {mode:?}");
            fused += exec.fused_nodes();
            total += plan.node_count();
        }
    }
    assert!(ran >= 10 && fused > 0, "{ran} programs, {fused} tiled nodes fused");
    eprintln!("{ran} programs: {fused} of {total} tiled nodes ran fused block by block, bitwise equal to the host oracle on {}", vk.context().name);
}

#[test]
fn a_block_local_chain_of_many_workgroups_is_one_dispatch_of_its_grid() {
    let Some(vk) = backend_or_skip("a_block_local_chain_of_many_workgroups_is_one_dispatch_of_its_grid") else { return };
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64 * 1024).unwrap();
    let k = add_one(&mut g);
    let row = ostinato::TileMap::linear(1024, 1024).unwrap();
    for _ in 0..50 {
        g.add_launch_tiled(k, Launch::linear(64, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(64 * 256))], &[("x", row.clone())], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (50, 1));
    exec.replay().unwrap();
    exec.wait().unwrap();
    let mut out = vec![0u8; 64 * 1024];
    exec.read_buffer(x, 0, &mut out).unwrap();
    assert!(out.chunks(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 50.0));
    // Without the tile maps: no relation between blocks, fifty dispatches.
    let mut g2 = Graph::new();
    let x = g2.add_buffer("x", 64 * 1024).unwrap();
    let k = add_one(&mut g2);
    for _ in 0..50 {
        g2.add_launch(k, Launch::linear(64, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(64 * 256))], &[]).unwrap();
    }
    let plan = Plan::compile(&g2).unwrap();
    let exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.fused_nodes(), 0);
}

/// A built-in body ordered after another only through elements one invocation touches in both needs
/// no barrier; through a view one element apart, or `mix`'s `inp` (read at `i % n_in`), it keeps it.
/// Each case runs and matches the host oracle.
#[test]
fn bodies_ordered_only_through_one_invocations_elements_fuse_without_barriers() {
    let Some(vk) = backend_or_skip("bodies_ordered_only_through_one_invocations_elements_fuse_without_barriers") else { return };
    let host = HostBackend::serial();
    let on = with_fusion(&vk, FusionMode::On);
    // (graph, barriers the fused dispatch must keep)
    let mut cases: Vec<(Graph, usize)> = Vec::new();
    // 64 add_one on one buffer: every element is one invocation's throughout.
    let (plan, _) = chains(1, 64, 1);
    cases.push((plan.graph().clone(), 0));
    // Alternating between x[0..256] and x[1..257]: element i is invocation i's in one body and
    // invocation i - 1's in the next.
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * 257).unwrap();
    let k = add_one(&mut g);
    let views = [g.add_view("x0", x, 0, 1024).unwrap(), g.add_view("x1", x, 4, 1024).unwrap()];
    for i in 0..20 {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(views[i % 2]), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    }
    cases.push((g, 19));
    // add_one on x, then mix reading x as `inp` at i % 7: out[i] reads another invocation's x.
    let mut g = Graph::new();
    let (x, y) = (g.add_buffer("x", 1024).unwrap(), g.add_buffer("y", 1024).unwrap());
    let k = add_one(&mut g);
    let mix = g.add_kernel(ostinato_host::builtins::lookup("mix").unwrap().sig).unwrap();
    let mix_args = |salt: u32| [Arg::Whole(y), Arg::Whole(x), Arg::Scalar(Scalar::u32(256)), Arg::Scalar(Scalar::u32(7)), Arg::Scalar(Scalar::u32(salt))];
    g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    g.add_launch(mix, Launch::linear(1, 256), &mix_args(3), &[]).unwrap();
    // mix again: `out` is y, invocation i's in both; nothing else in common but reads of x.
    g.add_launch(mix, Launch::linear(1, 256), &mix_args(5), &[]).unwrap();
    cases.push((g, 1));
    for (i, (g, kept)) in cases.into_iter().enumerate() {
        let plan = Plan::compile(&g).unwrap();
        let mut exec = on.instantiate(&plan, ostinato::bind_builtins(&on, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        assert_eq!((exec.run_plan().node_count(), exec.fused_barriers()), (1, kept), "case {i}: one dispatch, {kept} barriers");
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        // Iota: small integers (as f32, values add_one moves exactly on every device).
        let inits: Vec<Option<ostinato::file::BufferInit>> = vec![Some(ostinato::file::BufferInit::Iota); g.buffers().len()];
        let outs = [replay_twice(&mut exec, &inits), replay_twice(&mut oracle, &inits)];
        assert_eq!(outs[0], outs[1], "case {i}");
    }
}

fn replay_twice<E: Exec>(exec: &mut E, inits: &[Option<ostinato::file::BufferInit>]) -> Vec<(BufferId, Vec<u8>)>
where
    E::Error: std::fmt::Debug,
{
    write_inits(exec, inits).unwrap();
    exec.replay().unwrap();
    exec.replay().unwrap();
    read_roots(exec).unwrap()
}
