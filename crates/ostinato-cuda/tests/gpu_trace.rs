//! On the GPU: traced replays through CUPTI. For random order-sensitive programs in graph mode with
//! PDL off (every edge full), in eager mode (streams and events), on the caller's thread and on a launch
//! thread, fused and not: every node is named by exactly one bar per replay, every full edge's consumer
//! starts after its producer ended, and the traced replays give the host oracle's bytes. With PDL on,
//! the programmatic edges are labelled so. A submission that lost an edge (a deliberately wrong plan)
//! fails the same check. Skips with a message where no CUDA driver is found; fails with the error
//! naming where CUPTI was looked for where the driver is there but CUPTI is not.

mod common;

use ostinato::{read_roots, write_inits, Arg, Backend, EdgeKind, Exec, Graph, Launch, NodeId, Plan, PlanOptions, Scalar, TraceError};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, ExecMode, FusionMode, LaunchOn, PdlMode, PdlPolicy, CUPTI_ORDER_SLACK_NS};
use ostinato_testkit::random_graphs::{mix_sig, random_mix_program, random_one_block_program, serial_result, RandomProgram};

fn traced_run(
    device: &ostinato_cuda::Device,
    options: CudaOptions,
    prog: &RandomProgram,
    plan: &Plan,
    replays: usize,
) -> (ostinato::Trace, Vec<(ostinato::BufferId, Vec<u8>)>) {
    let m = BuiltinModules::load(device, options.trigger).expect("built-in modules compile");
    let backend = CudaBackend::with_builtins(device, &m, options).expect("backend");
    let kernels = plan.graph().kernels().iter().map(|k| m.kernel(&k.name, k).expect("built-in kernel binds")).collect();
    let mut exec = backend.instantiate(plan, kernels, ostinato::allocate_all(plan)).expect("instantiate");
    write_inits(&mut exec, &prog.inits).expect("init");
    // One untraced replay first: the trace follows work already on the stream.
    exec.replay().expect("replay");
    let t = exec.trace(replays - 1).unwrap_or_else(|e| panic!("trace ({:?}): {e}", options.mode));
    (t, read_roots(&mut exec).expect("read"))
}

#[test]
fn traced_replays_order_every_full_edge_and_give_the_oracles_bytes() {
    let Some(device) = common::device_or_skip("traced_replays_order_every_full_edge_and_give_the_oracles_bytes") else { return };
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    let configs = [
        (ExecMode::Graph, LaunchOn::Caller, FusionMode::Off),
        (ExecMode::Graph, thread, FusionMode::Off),
        (ExecMode::Graph, LaunchOn::Caller, FusionMode::Auto),
        (ExecMode::Eager, LaunchOn::Caller, FusionMode::Off),
        (ExecMode::Eager, thread, FusionMode::Off),
    ];
    let (mut checked, mut tightest) = (0, i64::MAX);
    for seed in 0..40u64 {
        let prog =
            if seed % 2 == 0 { random_mix_program(seed, 8 + (seed as usize * 5) % 70) } else { random_one_block_program(seed, 8 + (seed as usize * 3) % 50) };
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let host = serial_result(&plan, &prog, 3).expect("host oracle");
        for (mode, launch, fusion) in configs {
            let options = CudaOptions { mode, launch, fusion, pdl: PdlPolicy::new(PdlMode::Off), ..CudaOptions::default() };
            let (t, got) = traced_run(&device, options, &prog, &plan, 3);
            assert_eq!(got, host, "seed {seed} {mode:?} {launch:?} {fusion:?}: traced replays differ from the host oracle");
            assert_eq!(t.replays.len(), 2);
            t.check(&plan).unwrap_or_else(|e| panic!("seed {seed} {mode:?} {launch:?} {fusion:?}: {e}\n{:?}", t.notes));
            assert!(t.edges.iter().all(|e| e.kind != EdgeKind::Programmatic), "PDL off: no programmatic edge");
            if let Some(gap) = t.tightest_order_gap_ns() {
                if gap < tightest {
                    let note = t.notes.iter().find(|n| n.starts_with("tightest")).cloned().unwrap_or_default();
                    eprintln!("seed {seed} {mode:?} {launch:?} {fusion:?}: {note}");
                    tightest = gap;
                }
            }
            checked += 1;
        }
    }
    eprintln!(
        "checked {checked} traces (40 random programs x {} configurations); tightest full edge {tightest} ns (slack {CUPTI_ORDER_SLACK_NS} ns)",
        configs.len()
    );
}

/// With PDL on, the trace labels the programmatic edges (and still gives the oracle's bytes).
#[test]
fn programmatic_edges_are_labelled_as_such() {
    let Some(device) = common::device_or_skip("programmatic_edges_are_labelled_as_such") else { return };
    let prog = random_mix_program(5, 40);
    let plan = Plan::compile(&prog.graph).unwrap();
    let options = CudaOptions { pdl: PdlPolicy::new(PdlMode::On), fusion: FusionMode::Off, ..CudaOptions::default() };
    let (t, got) = traced_run(&device, options, &prog, &plan, 2);
    assert_eq!(got, serial_result(&plan, &prog, 2).unwrap());
    assert!(t.edges.iter().any(|e| e.kind == EdgeKind::Programmatic));
    t.check(&plan).unwrap();
}

/// The check catches a lost ordering: a chain whose consumer reads what a long producer wrote, its one
/// edge dropped from the submission (a deliberately wrong plan, graph mode: the two nodes run side by
/// side), traced and checked against the true plan, fails with an order error on that edge in every
/// replay, by far more than the clock's slack. The same chain with its edge passes.
#[test]
fn a_submission_that_lost_an_edge_fails_the_trace_check() {
    let Some(device) = common::device_or_skip("a_submission_that_lost_an_edge_fails_the_trace_check") else { return };
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1 << 20).unwrap();
    let y = g.add_buffer("y", 4096).unwrap();
    let mix = g.add_kernel(mix_sig()).unwrap();
    let u32s = |v: u64| Arg::Scalar(Scalar::u32(v as u32));
    // The producer: one warp over 256 Ki words (hundreds of µs); the consumer reads its first 4 KiB.
    g.add_launch(mix, Launch::linear(1, 32), &[Arg::Whole(x), Arg::Whole(y), u32s(1 << 18), u32s(1024), u32s(7)], &[]).unwrap();
    let head = ostinato::Slice { buffer: x, offset: 0, len: 4096 };
    g.add_launch(mix, Launch::linear(1, 256), &[Arg::Whole(y), Arg::Buffer(head), u32s(1024), u32s(1024), u32s(9)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    assert_eq!(plan.edges().len(), 1, "x: RAW from the producer into the consumer");
    let wrong = plan.without_edge_for_testing(NodeId(0), NodeId(1));
    let prog = RandomProgram { graph: g.clone(), inits: vec![None, None], salt_slot: ostinato::SlotId(0) };
    let options = CudaOptions { mode: ExecMode::Graph, fusion: FusionMode::Off, pdl: PdlPolicy::new(PdlMode::Off), ..CudaOptions::default() };
    let (right, _) = traced_run(&device, options, &prog, &plan, 3);
    right.check(&plan).unwrap_or_else(|e| panic!("the chain as planned: {e}\n{:?}", right.notes));
    let (mut t, _) = traced_run(&device, options, &prog, &wrong, 3);
    assert!(t.edges.is_empty(), "the submission had no edge");
    t.edges = ostinato::trace::edges_of(&plan, &[0, 1], |_| EdgeKind::Full);
    for r in 0..t.replays.len() {
        let one = ostinato::Trace { replays: vec![t.replays[r].clone()], ..t.clone() };
        match one.check(&plan) {
            Err(TraceError::Order { from: 0, to: 1, start, end, .. }) => {
                eprintln!("replay {r}: the consumer started {} µs before its producer ended", (end - start) as f64 / 1e3);
                assert!(end - start > 10 * CUPTI_ORDER_SLACK_NS, "replay {r}: the overlap {} ns is within 10x the slack", end - start);
            }
            other => panic!("replay {r}: a lost edge must fail the check, got {other:?}"),
        }
    }
}
