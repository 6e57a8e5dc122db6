//! Mutation tests: clearing any one barrier bit, downgrading any one fence scope, or dropping any one
//! dependency signal of a lowered program makes the simulator's result differ from the host oracle
//! (every one is caught, on some seed), so every synchronization the lowering emits is necessary and
//! the simulator sees its loss.

mod common;

use common::{difference, oracle, simulated};
use ostinato::{Plan, PlanOptions};
use ostinato_aql_sim::SimOptions;
use ostinato_hsa::program::{AqlProgram, PacketOp, Scope};
use ostinato_testkit::random_graphs::random_exact_program as random_mix_program;

#[derive(Clone, Copy, Debug)]
enum Mutation {
    ClearBarrier(usize, usize),
    WeakerAcquire(usize, usize),
    WeakerRelease(usize, usize),
    DropDependency(usize, usize, usize),
}

fn sites(p: &AqlProgram) -> Vec<Mutation> {
    let mut out = Vec::new();
    for (q, i, packet) in p.packets() {
        if packet.barrier {
            out.push(Mutation::ClearBarrier(q, i));
        }
        if packet.acquire != Scope::None {
            out.push(Mutation::WeakerAcquire(q, i));
        }
        if packet.release != Scope::None {
            out.push(Mutation::WeakerRelease(q, i));
        }
        if let PacketOp::BarrierAnd { deps } = &packet.op {
            out.extend((0..deps.len()).map(|d| Mutation::DropDependency(q, i, d)));
        }
    }
    out
}

fn apply(m: Mutation, p: &mut AqlProgram) {
    match m {
        Mutation::ClearBarrier(q, i) => p.queues[q][i].barrier = false,
        Mutation::WeakerAcquire(q, i) => p.queues[q][i].acquire = p.queues[q][i].acquire.weaker(),
        Mutation::WeakerRelease(q, i) => p.queues[q][i].release = p.queues[q][i].release.weaker(),
        Mutation::DropDependency(q, i, d) => {
            if let PacketOp::BarrierAnd { deps } = &mut p.queues[q][i].op {
                deps.remove(d);
            }
        }
    }
}

#[test]
fn every_barrier_fence_and_dependency_is_necessary_and_its_loss_is_caught() {
    let (mut caught, mut kinds, mut by_bytes) = (0, [0usize; 4], 0);
    let mut escaped = Vec::new();
    for case in 0..24u64 {
        let prog = random_mix_program(case * 104_729 + 11, 5 + (case as usize * 3) % 14);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + case as usize % 4 }).unwrap();
        let replays = 2;
        let want = oracle(&plan, &prog, replays);
        let program = ostinato_hsa::lower::lower(&plan).unwrap();
        for m in sites(&program) {
            // Caught when some node writes other bytes than in the serial program (or the final buffers
            // differ), or, for an ordering no byte can show (an explicit edge without a hazard, a write
            // overwritten unread), when the schedule broke an ordering the plan promises.
            let mut bytes = false;
            let hit = (0..96u64).find(|&seed| {
                let mutate = move |p: &mut AqlProgram| apply(m, p);
                match simulated(&plan, &prog, replays, SimOptions::seeded(seed * 31 + case), Some(&mutate)) {
                    Ok(got) => {
                        bytes = difference(&want, &got).is_some();
                        bytes || !got.broken.is_empty()
                    }
                    Err(_) => true,
                }
            });
            by_bytes += bytes as usize;
            if hit.is_none() {
                escaped.push(format!("case {case}: {m:?} is never caught\n{}", program.describe(&plan)));
                continue;
            }
            caught += 1;
            kinds[match m {
                Mutation::ClearBarrier(..) => 0,
                Mutation::WeakerAcquire(..) => 1,
                Mutation::WeakerRelease(..) => 2,
                Mutation::DropDependency(..) => 3,
            }] += 1;
        }
    }
    assert!(escaped.is_empty(), "{} mutations escaped:\n{}", escaped.len(), escaped.join("\n"));
    ostinato_testkit::skip(&format!("mutations: {caught} caught, {by_bytes} of them by the bytes (barrier bits, acquires, releases, dependencies: {kinds:?})"));
    assert!(kinds.iter().all(|&k| k > 0), "every kind of mutation was tried: {kinds:?}");
}
