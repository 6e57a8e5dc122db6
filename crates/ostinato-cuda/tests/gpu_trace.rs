//! On the GPU: traced replays through CUPTI. For random order-sensitive programs in graph mode with
//! PDL off (every edge full), in eager mode (streams and events), on the caller's thread and on a launch
//! thread, fused and not: every node is named by exactly one bar per replay, every full edge's consumer
//! starts after its producer ended, and the traced replays give the host oracle's bytes. With PDL on,
//! the programmatic edges are labelled so. Skips with a message where no CUDA driver is found; fails
//! with the error naming where CUPTI was looked for where the driver is there but CUPTI is not.

mod common;

use ostinato::{read_roots, write_inits, Backend, EdgeKind, Exec, Plan, PlanOptions};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, ExecMode, FusionMode, LaunchOn, PdlMode, PdlPolicy};
use ostinato_testkit::random_graphs::{random_mix_program, random_one_block_program, serial_result, RandomProgram};

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
    let mut checked = 0;
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
            checked += 1;
        }
    }
    eprintln!("checked {checked} traces (40 random programs x {} configurations)", configs.len());
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
