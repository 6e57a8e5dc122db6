//! On the GPU: random order-sensitive programs on CUDA (graph mode in both shapes and eager mode, PDL on
//! and off) equal the host oracle's serial result bit for bit. Skips with a message where no CUDA driver is found.

mod common;

use ostinato::{read_roots, write_inits, Backend, Exec, Plan, PlanOptions};
use ostinato_cuda::lower::ShapeMode;
use ostinato_cuda::{CudaOptions, ExecMode, PdlMode, PdlPolicy, PdlTrigger};
use ostinato_host::random_graphs::random_mix_program;
use ostinato_host::{builtins, HostBackend};

const GRAPHS: u64 = 200;

#[test]
fn random_graphs_match_the_host_oracle_bitwise() {
    let Some(device) = common::device_or_skip("random_graphs_match_the_host_oracle_bitwise") else { return };
    use ShapeMode::{Auto as AutoShape, Lanes, Plan as PlanShape};
    let configs = [
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, PlanShape),
        (ExecMode::Graph, PdlMode::Off, PdlTrigger::AtEntry, PlanShape),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWrites, AutoShape),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AfterWait, PlanShape),
        (ExecMode::Graph, PdlMode::Auto, PdlTrigger::AfterWait, AutoShape),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AtEntry, Lanes),
        (ExecMode::Graph, PdlMode::On, PdlTrigger::AfterWait, Lanes),
        (ExecMode::Eager, PdlMode::On, PdlTrigger::AfterWait, AutoShape),
        (ExecMode::Eager, PdlMode::Off, PdlTrigger::AtEntry, AutoShape),
    ];
    let mut compared = 0;
    for seed in 0..GRAPHS {
        let prog = random_mix_program(seed, 10 + (seed as usize * 7) % 120);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 1 + (seed as usize % 3);
        let host = {
            let kernels = ostinato_host::bind_kernels(&plan, |i| Some(plan.graph().kernels()[i].name.clone()), builtins::lookup).unwrap();
            let mut exec = HostBackend::serial().instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            write_inits(&mut exec, &prog.inits).unwrap();
            for _ in 0..replays {
                exec.replay().unwrap();
            }
            read_roots(&mut exec).unwrap()
        };
        for (mode, pdl, trigger, shape) in configs {
            let options = CudaOptions { mode, pdl: PdlPolicy { shape, ..PdlPolicy::new(pdl) }, trigger };
            let got = common::run_cuda(&device, &plan, options, &prog.inits, replays);
            assert_eq!(got, host, "seed {seed}: {mode:?} pdl={pdl:?} trigger={trigger:?} shape={shape:?} differs from the host oracle");
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
    let backend = ostinato_cuda::CudaBackend::new(&device, CudaOptions { pdl: PdlPolicy::new(PdlMode::On), ..CudaOptions::default() }).unwrap();
    let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AtEntry);
    assert!(kernels.iter().all(|k| k.pdl_capable && k.pdl_evidence == "ptx"), "built-ins certify from PTX: {kernels:?}");
    let exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    assert_eq!(exec.programmatic_edges(), plan.edges().len());
    assert!(!plan.edges().is_empty());
}
