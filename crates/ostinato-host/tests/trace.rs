//! The host backend's trace: for random order-sensitive programs replayed on the worker pool, every
//! node has one bar per replay, every edge's consumer starts after its producer ended (worker clocks),
//! and tracing leaves the same bytes as untraced replays.

use ostinato::{read_roots, write_inits, Backend, Exec, Plan};
use ostinato_host::{HostBackend, HostExec};
use ostinato_testkit::random_graphs::{random_mix_program, RandomProgram};
use proptest::prelude::*;

fn instantiate(backend: HostBackend, plan: &Plan, prog: &RandomProgram) -> HostExec {
    let kernels = ostinato_testkit::random_graphs::host_kernels(plan).unwrap();
    let mut exec = backend.instantiate(plan, kernels, ostinato::allocate_all(plan)).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    exec
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every full edge u -> v: v starts after u ended; every node exactly once per replay; the
    /// traced replays leave the bytes untraced ones do.
    #[test]
    fn a_traced_replay_orders_every_edge_and_changes_no_byte(seed in 0u64..1 << 40, nodes in 1usize..48, threads in 0usize..5) {
        let prog = random_mix_program(seed, nodes);
        let plan = Plan::compile(&prog.graph).unwrap();
        let mut traced = instantiate(HostBackend::new(threads), &plan, &prog);
        let t = traced.trace(3).unwrap();
        prop_assert_eq!(t.replays.len(), 3);
        prop_assert_eq!(t.places.len(), 1 + threads);
        t.check(&plan).unwrap();
        prop_assert!(t.edges.iter().all(|e| e.kind == ostinato::EdgeKind::Full));
        let mut plain = instantiate(HostBackend::new(threads), &plan, &prog);
        for _ in 0..3 {
            plain.replay().unwrap();
        }
        plain.wait().unwrap();
        prop_assert_eq!(read_roots(&mut traced).unwrap(), read_roots(&mut plain).unwrap());
    }
}

/// Replays after a trace are untraced again, and a second trace times its own replays.
#[test]
fn tracing_ends_with_the_trace_and_a_second_trace_is_fresh() {
    let prog = random_mix_program(7, 30);
    let plan = Plan::compile(&prog.graph).unwrap();
    let mut exec = instantiate(HostBackend::new(3), &plan, &prog);
    let first = exec.trace(1).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let second = exec.trace(2).unwrap();
    second.check(&plan).unwrap();
    let (a, b) = (first.summary(0).unwrap(), second.summary(0).unwrap());
    assert!(b.start_ns > a.end_ns, "the second trace's bars are of later replays: {a:?} {b:?}");
    assert!(second.summary(1).unwrap().start_ns >= b.end_ns);
    assert_eq!(exec.trace(0).unwrap().replays.len(), 0);
}
