//! Differential tests of the host backend: random order-sensitive programs replayed in parallel (race
//! checker on, several thread counts, many runs) equal the serial program-order result bit for bit; a
//! plan with one required edge deleted is caught.

use ostinato::{read_roots, write_inits, Backend, BufferId, Exec, Plan, Scalar};
use ostinato_host::{HostBackend, HostError, HostExec};
use ostinato_testkit::random_graphs::{random_mix_program, random_two_kernel_program, RandomProgram};

fn instantiate(backend: HostBackend, plan: &Plan, prog: &RandomProgram) -> HostExec {
    let kernels = ostinato_testkit::random_graphs::host_kernels(plan).unwrap();
    let buffers = ostinato::allocate_all(plan);
    let mut exec = backend.instantiate(plan, kernels, buffers).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    exec
}

fn run(backend: HostBackend, plan: &Plan, prog: &RandomProgram, replays: usize) -> Result<Vec<(BufferId, Vec<u8>)>, HostError> {
    let mut exec = instantiate(backend, plan, prog);
    for r in 0..replays {
        exec.set_slot(prog.salt_slot, Scalar::u32(r as u32 * 7919))?;
        exec.replay()?;
        exec.wait()?;
    }
    read_roots(&mut exec)
}

#[test]
fn parallel_replays_equal_serial_program_order() {
    let mut checked = 0;
    for seed in 0..150u64 {
        let prog = random_mix_program(seed, 8 + (seed as usize % 40));
        let plan = Plan::compile(&prog.graph).unwrap();
        let expect = run(HostBackend::serial(), &plan, &prog, 3).unwrap();
        for threads in [1, 2, 4, 8] {
            let got = run(HostBackend::new(threads).with_race_checker(true), &plan, &prog, 3).unwrap();
            assert_eq!(got, expect, "seed {seed}, {threads} threads");
            checked += 1;
        }
    }
    assert_eq!(checked, 600);
}

#[test]
fn two_kernel_programs_replay_in_parallel_equal_to_serial() {
    let (mut alt_launches, mut grids) = (0, std::collections::BTreeSet::new());
    for seed in 0..40u64 {
        let prog = random_two_kernel_program(seed, 20 + (seed as usize % 60));
        let g = &prog.graph;
        assert_eq!(g.kernels().iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["mix", "mix_alt"]);
        for n in g.nodes() {
            if let ostinato::NodeOp::Kernel { kernel, launch, .. } = &n.op {
                alt_launches += usize::from(g.kernel(*kernel).name == "mix_alt");
                grids.insert(launch.grid[0]);
            }
        }
        let plan = Plan::compile(g).unwrap();
        let expect = run(HostBackend::serial(), &plan, &prog, 2).unwrap();
        let got = run(HostBackend::new(4).with_race_checker(true), &plan, &prog, 2).unwrap();
        assert_eq!(got, expect, "seed {seed}");
    }
    assert!(alt_launches > 200, "both kernels are launched ({alt_launches} mix_alt launches)");
    assert_eq!(grids.into_iter().collect::<Vec<_>>(), [1, 2, 3, 8, 16], "grids of 1 to 16 blocks");
}

#[test]
fn many_runs_of_one_wide_program_stay_bitwise_equal() {
    let prog = random_mix_program(0xfeed, 200);
    let plan = Plan::compile(&prog.graph).unwrap();
    let expect = run(HostBackend::serial(), &plan, &prog, 2).unwrap();
    for _ in 0..50 {
        assert_eq!(run(HostBackend::new(4).with_race_checker(true), &plan, &prog, 2).unwrap(), expect);
    }
}

/// Deleting any one edge of a plan whose edges carry hazards must be caught by the race checker, on
/// every run, whatever the timing.
#[test]
fn deleting_a_required_edge_is_caught() {
    let mut caught = 0;
    for seed in 0..60u64 {
        let prog = random_mix_program(seed, 24);
        let plan = Plan::compile(&prog.graph).unwrap();
        for e in plan.edges().iter().filter(|e| !e.hazards.is_empty()).take(3) {
            let broken = plan.without_edge_for_testing(e.from, e.to);
            for threads in [1, 4] {
                let err = run(HostBackend::new(threads).with_race_checker(true), &broken, &prog, 1).unwrap_err();
                let HostError::Race { first, second, .. } = &err else { panic!("expected a race, got {err}") };
                assert!(!first.is_empty() && !second.is_empty());
                caught += 1;
            }
        }
    }
    assert!(caught > 100, "only {caught} deletions exercised");
}

/// The workload is order-sensitive: swapping two dependent `mix` nodes changes the bits, so a missing
/// edge that lets them run in the other order cannot go unnoticed by the comparison.
#[test]
fn the_workload_is_order_sensitive() {
    use ostinato::{Arg, Graph, Launch, Slice};
    let build = |swap: bool| {
        let mut g = Graph::new();
        let a = g.add_buffer("a", 64).unwrap();
        let b = g.add_buffer("b", 64).unwrap();
        let k = g.add_kernel(ostinato_testkit::random_graphs::mix_sig()).unwrap();
        let s = |buf| Arg::Buffer(Slice { buffer: buf, offset: 0, len: 64 });
        let n = Arg::Scalar(Scalar::u32(16));
        let first = [s(a), s(b), n, n, Arg::Scalar(Scalar::u32(1))];
        let second = [s(b), s(a), n, n, Arg::Scalar(Scalar::u32(2))];
        for args in if swap { [second, first] } else { [first, second] } {
            g.add_launch(k, Launch::linear(1, 32), &args, &[]).unwrap();
        }
        let inits = vec![Some(ostinato::file::BufferInit::Random(1)), Some(ostinato::file::BufferInit::Random(2))];
        RandomProgram { graph: g, inits, salt_slot: ostinato::SlotId(0) }
    };
    let (p1, p2) = (build(false), build(true));
    let run1 = |p: &RandomProgram| {
        let plan = Plan::compile(&p.graph).unwrap();
        let mut exec = instantiate(HostBackend::serial(), &plan, p);
        exec.replay().unwrap();
        read_roots(&mut exec).unwrap()
    };
    assert_ne!(run1(&p1), run1(&p2));
}

#[test]
fn the_serial_oracle_helper_equals_a_parallel_replay() {
    use ostinato_testkit::random_graphs::serial_result;
    for seed in 0..10u64 {
        let prog = random_two_kernel_program(seed, 40);
        let plan = Plan::compile(&prog.graph).unwrap();
        let mut exec = instantiate(HostBackend::new(4).with_race_checker(true), &plan, &prog);
        for _ in 0..2 {
            exec.replay().unwrap();
            exec.wait().unwrap();
        }
        let before = read_roots(&mut instantiate(HostBackend::serial(), &plan, &prog)).unwrap();
        let oracle = serial_result(&plan, &prog, 2).unwrap();
        assert_eq!(oracle, read_roots(&mut exec).unwrap(), "seed {seed}");
        assert_ne!(oracle, before, "seed {seed}: the program changes memory");
    }
}
