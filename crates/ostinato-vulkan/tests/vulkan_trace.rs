//! The Vulkan backend's trace (timestamp queries around every dispatch, copy and fill) on whatever
//! device is found — lavapipe in CI: for random one-workgroup programs, fused (`auto`, `on`) and not,
//! every node is named by exactly one bar per replay, every edge's consumer starts after its producer
//! ended, and the traced replays give the host oracle's bytes, as untraced ones do. Skips with a
//! message where no Vulkan loader or device is found.

mod common;

use ostinato::{read_roots, write_inits, Backend, Exec, Plan};
use ostinato_testkit::random_graphs::{random_one_block_program, serial_result};
use ostinato_vulkan::{FusionMode, VulkanOptions};
use proptest::prelude::*;

use common::backend_or_skip;

fn fusion(i: u8) -> FusionMode {
    [FusionMode::Off, FusionMode::Auto, FusionMode::On][i as usize % 3]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_traced_replay_orders_every_edge_and_gives_the_oracles_bytes(seed in 0u64..1 << 40, nodes in 1usize..40, mode in 0u8..3) {
        let Some(vk) = backend_or_skip("a_traced_replay_orders_every_edge_and_gives_the_oracles_bytes") else { return Ok(()) };
        let vk = vk.with_options(VulkanOptions { fusion: fusion(mode), ..VulkanOptions::default() });
        let prog = random_one_block_program(seed, nodes);
        let plan = Plan::compile(&prog.graph).unwrap();
        let kernels = ostinato::bind_builtins(&vk, &plan).unwrap();
        let mut exec = vk.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        write_inits(&mut exec, &prog.inits).unwrap();
        let t = exec.trace(2).unwrap();
        t.check(&plan).unwrap();
        prop_assert_eq!(t.replays.len(), 2);
        prop_assert_eq!(t.units.len(), exec.run_plan().node_count());
        prop_assert!(t.edges.iter().all(|e| matches!(e.kind, ostinato::EdgeKind::Barrier | ostinato::EdgeKind::Fused)));
        // One more replay untraced: three in all, as the oracle runs.
        exec.replay().unwrap();
        prop_assert_eq!(read_roots(&mut exec).unwrap(), serial_result(&plan, &prog, 3).unwrap());
    }
}

/// A fused chain is one bar naming every member; a second trace reuses the traced recording.
#[test]
fn a_fused_chain_is_one_bar_naming_its_members() {
    let Some(vk) = backend_or_skip("a_fused_chain_is_one_bar_naming_its_members") else { return };
    let vk = vk.with_options(VulkanOptions { fusion: FusionMode::On, ..VulkanOptions::default() });
    let mut g = ostinato::Graph::new();
    let x = g.add_buffer("x", 1024).unwrap();
    let y = g.add_buffer("y", 1024).unwrap();
    let k = g.add_kernel(ostinato_testkit::random_graphs::mix_sig()).unwrap();
    let u = |v: u32| ostinato::Arg::Scalar(ostinato::Scalar::u32(v));
    for i in 0..5 {
        g.add_launch(k, ostinato::Launch::linear(1, 256), &[ostinato::Arg::Whole(x), ostinato::Arg::Whole(y), u(256), u(256), u(i)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let kernels = ostinato::bind_builtins(&vk, &plan).unwrap();
    let mut exec = vk.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    let t = exec.trace(1).unwrap();
    t.check(&plan).unwrap();
    assert_eq!(t.units, vec![(0..5).map(ostinato::NodeId).collect::<Vec<_>>()]);
    assert!(t.edges.iter().all(|e| e.kind == ostinato::EdgeKind::Fused));
    assert!(t.summary(0).unwrap().step_ns > 0, "a dispatch takes time on any device: {t:?}");
    let again = exec.trace(3).unwrap();
    again.check(&plan).unwrap();
    assert!(again.summary(0).unwrap().start_ns >= t.summary(0).unwrap().end_ns);
}
