//! On the GPU: random order-sensitive programs on CUDA (graph mode in both shapes and eager mode, PDL on
//! and off, default and high stream priority, replays on the caller's thread and on a launch thread) equal the host oracle's serial result bit for bit. Skips with a message where no CUDA driver is found.

mod common;

use ostinato::{read_roots, write_inits, Backend, BufferId, Exec, Plan, PlanOptions};
use ostinato_cuda::lower::ShapeMode;
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, ExecMode, GraphBuild, LaunchOn, PdlMode, PdlPolicy, PdlTrigger, StreamPriority};
use ostinato_testkit::random_graphs::{random_mix_program, random_two_kernel_program, serial_result};

const GRAPHS: u64 = 200;

#[test]
fn random_graphs_match_the_host_oracle_bitwise() {
    let Some(device) = common::device_or_skip("random_graphs_match_the_host_oracle_bitwise") else { return };
    use GraphBuild::{Bulk, Capture, InOrder};
    use LaunchOn::Caller;
    use ShapeMode::{Auto as AutoShape, Lanes, Plan as PlanShape};
    use StreamPriority::{Default as Normal, High};
    const THREAD: LaunchOn = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    let configs = [
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, PlanShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::Off, PdlTrigger::AtEntry, PlanShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWrites, AutoShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AfterWait, PlanShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWait, AutoShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, Lanes, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AfterWait, Lanes, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, PlanShape, InOrder, Normal, Caller),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWait, AutoShape, Capture, High, Caller),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, Lanes, Capture, Normal, Caller),
        (ExecMode::Eager, PdlMode::On, PdlTrigger::AfterWait, AutoShape, Bulk, High, Caller),
        (ExecMode::Eager, PdlMode::Off, PdlTrigger::AtEntry, AutoShape, Bulk, Normal, Caller),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWait, AutoShape, Bulk, Normal, THREAD),
        (ExecMode::Eager, PdlMode::Auto, PdlTrigger::AfterWait, Lanes, Bulk, Normal, THREAD),
    ];
    let mut compared = 0;
    for seed in 0..GRAPHS {
        let prog = random_mix_program(seed, 10 + (seed as usize * 7) % 120);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 1 + (seed as usize % 3);
        let host = serial_result(&plan, &prog, replays).expect("host oracle");
        for (mode, pdl, trigger, shape, build, priority, launch) in configs {
            let options = CudaOptions { mode, pdl: PdlPolicy { shape, ..PdlPolicy::new(pdl) }, trigger, build, priority, launch, ..CudaOptions::default() };
            let got = common::run_cuda(&device, &plan, options, &prog.inits, replays);
            assert_eq!(
                got, host,
                "seed {seed}: {mode:?} pdl={pdl:?} trigger={trigger:?} shape={shape:?} build={build:?} priority={priority:?} launch={launch:?} differs from the host oracle"
            );
            compared += 1;
        }
    }
    eprintln!("compared {compared} CUDA runs ({GRAPHS} random graphs x {} configurations) bitwise with the host oracle", configs.len());
}

/// The PDL lowering really submits programmatic edges (otherwise "PDL on" would test nothing).
#[test]
fn pdl_on_submits_programmatic_edges() {
    let Some(device) = common::device_or_skip("pdl_on_submits_programmatic_edges") else { return };
    let prog = random_mix_program(5, 40);
    let plan = Plan::compile(&prog.graph).unwrap();
    // Fusion off and the plan's shape: every node its own launch, every plan edge a graph edge. (The
    // default shape sends a submission of five or more roots or sinks as lane chains, whose in-lane
    // order is the stream's, not an edge.)
    let pdl = PdlPolicy { shape: ShapeMode::Plan, ..PdlPolicy::new(PdlMode::On) };
    let options = CudaOptions { pdl, fusion: ostinato_cuda::FusionMode::Off, ..CudaOptions::default() };
    let backend = ostinato_cuda::CudaBackend::new(&device, options).unwrap();
    let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AtEntry);
    assert!(kernels.iter().all(|k| k.pdl_capable && k.pdl_evidence == "ptx"), "built-ins certify from PTX: {kernels:?}");
    let exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.programmatic_edges(), plan.edges().len());
    assert!(!plan.edges().is_empty());
}

/// Every way of building the graph submits exactly the lowering's edges, programmatic ones included:
/// the driver's own edge list, read back from the built graph, equals the lowering's. The two-kernel
/// programs mix full and programmatic edges in one graph (edges into plain kernels stay full), as does
/// `auto` where a fan or grid passes its limits.
#[test]
fn every_graph_build_submits_exactly_the_lowerings_edges() {
    let Some(device) = common::device_or_skip("every_graph_build_submits_exactly_the_lowerings_edges") else { return };
    let m = BuiltinModules::load(&device, PdlTrigger::AfterWait).expect("built-in modules compile");
    let builds = [GraphBuild::Bulk, GraphBuild::InOrder, GraphBuild::Capture];
    let (mut checked, mut mixed) = (0, 0);
    let mut wrong: Vec<Vec<String>> = vec![Vec::new(); builds.len()];
    for seed in 0..60u64 {
        let two = seed % 2 == 1;
        let prog = if two {
            random_two_kernel_program(2000 + seed, 20 + (seed as usize * 13) % 90)
        } else {
            random_mix_program(1000 + seed, 10 + (seed as usize * 13) % 90)
        };
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        for pdl in [PdlMode::On, PdlMode::Auto, PdlMode::Off] {
            for (b, build) in builds.into_iter().enumerate() {
                let backend =
                    CudaBackend::with_builtins(&device, &m, CudaOptions { pdl: PdlPolicy::new(pdl), build, ..CudaOptions::default() }).expect("backend");
                let kernels = plan
                    .graph()
                    .kernels()
                    .iter()
                    .map(|k| if k.name == "mix_alt" { m.plain_kernel("mix", k) } else { m.kernel(&k.name, k) }.expect("built-in kernel binds"))
                    .collect();
                let exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).expect("instantiate");
                let mut want: Vec<(usize, usize, bool)> = exec.lowering().edges.iter().map(|e| (e.from.index(), e.to.index(), e.programmatic)).collect();
                let first = want.first().map(|e| e.2);
                want.sort_unstable();
                let got = exec.submitted_edges().expect("edges");
                if got != want {
                    let flipped = got.iter().zip(&want).filter(|(g, w)| (g.0, g.1) == (w.0, w.1) && g.2 != w.2).count();
                    wrong[b].push(format!(
                        "seed {seed} pdl={pdl:?}: {} edges, {} programmatic, first edge programmatic {first:?}; submitted {} edges, {} programmatic, {flipped} with the other type",
                        want.len(),
                        want.iter().filter(|e| e.2).count(),
                        got.len(),
                        got.iter().filter(|e| e.2).count()
                    ));
                }
                if b == 0 {
                    checked += 1;
                    mixed += usize::from(want.iter().any(|e| e.2) && want.iter().any(|e| !e.2));
                }
            }
        }
    }
    for (build, w) in builds.iter().zip(&wrong) {
        eprintln!("{build:?}: {} of {checked} graphs submitted other edges than the lowering's", w.len());
        for line in w.iter().take(6) {
            eprintln!("  {line}");
        }
    }
    assert!(mixed > 30, "the graphs must mix full and programmatic edges ({mixed} of {checked})");
    for (build, w) in builds.iter().zip(&wrong) {
        assert!(w.is_empty(), "{build:?} submitted other edges than the lowering's in {} graphs: {:?}", w.len(), &w[..w.len().min(3)]);
    }
    eprintln!("compared the submitted edges of {checked} graphs x 3 builds ({mixed} mixing full and programmatic edges) with the lowering");
}

/// A user's graph mixes kernels that are PDL-capable with kernels that are not (no `griddepcontrol`
/// at all): `mix` binds the PDL builds, `mix_alt` the plain build, which certifies as not capable. The
/// plan's edges into plain nodes stay full; edges out of them and between capable nodes may be
/// programmatic; grids of 1 to 16 blocks put the early-trigger, after-wait and plain code side by side.
#[test]
fn graphs_mixing_pdl_capable_and_plain_kernels_match_the_host_oracle() {
    let Some(device) = common::device_or_skip("graphs_mixing_pdl_capable_and_plain_kernels_match_the_host_oracle") else { return };
    let configs = [
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWait, ShapeMode::Auto),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AfterWait, ShapeMode::Plan),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, ShapeMode::Plan),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, ShapeMode::Lanes),
        (ExecMode::Eager, PdlMode::On, PdlTrigger::AtEntry, ShapeMode::Auto),
    ];
    let modules: Vec<(PdlTrigger, BuiltinModules)> =
        [PdlTrigger::AfterWait, PdlTrigger::AtEntry].into_iter().map(|t| (t, BuiltinModules::load(&device, t).expect("built-in modules compile"))).collect();
    let (mut compared, mut programmatic, mut plain_after_programmatic) = (0, 0, 0);
    for seed in 0..100u64 {
        let prog = random_two_kernel_program(seed, 20 + (seed as usize * 11) % 100);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 1 + (seed as usize % 2);
        let host = serial_result(&plan, &prog, replays).expect("host oracle");
        for (mode, pdl, trigger, shape) in configs {
            let m = &modules.iter().find(|(t, _)| *t == trigger).expect("loaded above").1;
            let kernels: Vec<_> = plan
                .graph()
                .kernels()
                .iter()
                .map(|k| if k.name == "mix" { m.kernel("mix", k) } else { m.plain_kernel("mix", k) }.expect("built-in kernel binds"))
                .collect();
            assert!(kernels.iter().all(|k| k.pdl_capable == (k.name == "mix")), "mix_alt must bind as NOT PDL-capable: {kernels:?}");
            // Fusion off: the edges counted are the plan's.
            let fusion = ostinato_cuda::FusionMode::Off;
            let options = CudaOptions { mode, pdl: PdlPolicy { shape, ..PdlPolicy::new(pdl) }, trigger, fusion, ..CudaOptions::default() };
            let backend = CudaBackend::with_builtins(&device, m, options).expect("backend");
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).expect("instantiate");
            if mode == ExecMode::Graph {
                programmatic += exec.programmatic_edges();
                // Full edges into a node that never waits, from a producer launched programmatically:
                // the case where a plain kernel relies on an early-launched predecessor having finished.
                let low = exec.lowering();
                let launched_early = |n: ostinato::NodeId| low.edges.iter().any(|f| f.to == n && f.programmatic);
                plain_after_programmatic +=
                    low.edges.iter().filter(|e| !e.programmatic && !low.launches[e.to.index()].waits() && launched_early(e.from)).count();
            }
            write_inits(&mut exec, &prog.inits).expect("init");
            for _ in 0..replays {
                exec.replay().expect("replay");
            }
            exec.wait().expect("wait");
            let got: Vec<(BufferId, Vec<u8>)> = read_roots(&mut exec).expect("read");
            assert_eq!(got, host, "seed {seed}: {mode:?} pdl={pdl:?} trigger={trigger:?} shape={shape:?} differs from the host oracle");
            compared += 1;
        }
    }
    assert!(programmatic > 1000, "the graphs must really carry programmatic edges ({programmatic})");
    assert!(plain_after_programmatic > 1000, "plain kernels must really follow PDL-launched ones ({plain_after_programmatic})");
    eprintln!(
        "compared {compared} CUDA runs (100 random two-kernel graphs x {} configurations; {programmatic} programmatic edges; {plain_after_programmatic} plain-after-PDL edges) bitwise with the host oracle",
        configs.len()
    );
}
