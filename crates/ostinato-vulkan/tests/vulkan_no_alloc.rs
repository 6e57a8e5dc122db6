//! Replay, patch and wait allocate nothing on the host once a Vulkan exec has run, in every replay
//! ordering, fused and not, with replays waited for and back to back (so `skip` takes its barrier
//! path and `events` waits on the host): a counting global allocator sees no allocation from Rust
//! code across them (the driver's own allocations go through the C allocator and are not counted).
//! The lanes on separate queues are held to it too (on the device's one queue where it has one).
//! One test in this binary, so no other test's allocations are counted. Skips without a Vulkan
//! device.

mod common;

use ostinato::{write_inits, Backend, Exec, Plan, Scalar};
use ostinato_testkit::counting_alloc;
use ostinato_testkit::random_graphs::random_one_block_program;
use ostinato_vulkan::{FusionMode, QueueMode, ReplayOrdering, VulkanBackend, VulkanOptions};

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn replay_patch_and_wait_allocate_nothing_in_every_ordering() {
    let Some(ctx) = common::context_or_skip("replay_patch_and_wait_allocate_nothing_in_every_ordering") else { return };
    // One-block nodes, so `auto` fuses the chains among them and leaves the rest as dispatches.
    let prog = random_one_block_program(5, 40);
    let plan = Plan::compile(&prog.graph).unwrap();
    let orderings = [ReplayOrdering::Skip, ReplayOrdering::Barrier, ReplayOrdering::Timeline, ReplayOrdering::Events];
    let modes = orderings.iter().map(|&o| (o, QueueMode::One)).chain([(ReplayOrdering::default(), QueueMode::Lanes)]);
    for (ordering, queues) in modes {
        for fusion in [FusionMode::Auto, FusionMode::Off] {
            let options = VulkanOptions { ordering, fusion, queues, ..VulkanOptions::default() };
            let backend = VulkanBackend::with_context(ctx.clone()).with_options(options).with_lane_queues(ctx.queue_count());
            let kernels = ostinato::bind_builtins(&backend, &plan).unwrap();
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            write_inits(&mut exec, &prog.inits).unwrap();
            // Warm up: the first replays may grow what the exec keeps (nothing here should).
            for _ in 0..3 {
                exec.replay().unwrap();
            }
            exec.wait().unwrap();
            let before = counting_alloc::allocations();
            for r in 0..24u32 {
                if r % 8 == 0 {
                    exec.set_slot(prog.salt_slot, Scalar::u32(r)).unwrap();
                }
                exec.replay().unwrap();
                if r % 2 == 0 {
                    exec.wait().unwrap();
                }
            }
            exec.wait().unwrap();
            let allocated = counting_alloc::allocations() - before;
            assert!(queues == QueueMode::One || exec.lane_plan().is_some(), "the lanes run apart");
            assert_eq!(allocated, 0, "{ordering:?}, {queues:?}, fusion {fusion:?}: 24 replays, 3 patches and 13 waits allocated {allocated} times");
        }
    }
}
