//! Random programs (views, overlapping slices, fans, copies, fills, explicit edges, a slot patched
//! every replay, several lanes) through the HSA backend on the simulated packet processor, under
//! adversarial seeded scheduling: bitwise equal to the host's serial oracle.

mod common;

use common::{difference, oracle, simulated};
use ostinato::{Plan, PlanOptions};
use ostinato_aql_sim::SimOptions;
use ostinato_testkit::random_graphs::random_mix_program;

/// The run's seed: `OSTINATO_SIM_SEED` when set (to replay a failure), else the clock's, printed.
fn base_seed() -> u64 {
    let seed = std::env::var("OSTINATO_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64));
    ostinato_testkit::skip(&format!("random_programs: base seed {seed} (OSTINATO_SIM_SEED={seed} replays this run)"));
    seed
}

#[test]
fn random_programs_equal_the_host_oracle_under_adversarial_schedules() {
    let base = base_seed();
    let mut programs = 0;
    for case in 0..64u64 {
        let prog = random_mix_program(case * 7919 + 3, 6 + (case as usize * 5) % 30);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + case as usize % 4 }).unwrap();
        let replays = 3;
        let want = oracle(&plan, &prog, replays);
        for k in 0..4u64 {
            let seed = base ^ (case << 8 | k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            // Every other run on tiny rings (4 slots): a replay wraps them and waits for free slots.
            let options = if k % 2 == 1 { SimOptions { queue_min_size: 4, queue_max_size: 4, ..SimOptions::seeded(seed) } } else { SimOptions::seeded(seed) };
            let got = simulated(&plan, &prog, replays, options, None).unwrap_or_else(|e| panic!("case {case}, sim seed {seed}: {e}"));
            assert!(got.broken.is_empty(), "case {case}, sim seed {seed}: {:?}", got.broken);
            if let Some(d) = difference(&want, &got) {
                panic!("case {case}, sim seed {seed}: {d}\n{}", ostinato_hsa::lower::lower(&plan).unwrap().describe(&plan));
            }
        }
        programs += 1;
    }
    assert!(programs >= 60);
}
