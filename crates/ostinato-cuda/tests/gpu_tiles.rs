//! On the GPU: tile-level ordering. Random programs whose launches declare per-block tile maps (1-D
//! and 2-D grids and blocks, views at any offset) run bitwise equal to the host oracle in every fusion,
//! submission and PDL mode; a block-local chain of many blocks runs as one kernel of its grid.

mod common;

use ostinato::{read_roots, write_inits, Access, Arg, Backend, Exec, Graph, KernelSig, Launch, Plan, PlanOptions, Scalar, ScalarType, TileMap};
use ostinato_cuda::lower::PdlPolicy;
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, ExecMode, FusionMode, PdlMode, PdlTrigger};
use ostinato_testkit::random_graphs::host_kernels;
use ostinato_testkit::tiled_graphs::random_tiled_program;

#[test]
fn random_tiled_programs_match_the_host_oracle() {
    let Some(device) = common::device_or_skip("random_tiled_programs_match_the_host_oracle") else { return };
    let configs = [
        (FusionMode::Auto, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::On, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::Off, ExecMode::Graph, PdlMode::On),
        (FusionMode::Auto, ExecMode::Graph, PdlMode::Off),
        (FusionMode::Auto, ExecMode::Eager, PdlMode::Auto),
    ];
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let (mut compared, mut fused, mut nodes) = (0, 0, 0);
    for seed in 0..60u64 {
        let prog = random_tiled_program(seed, 6 + (seed as usize * 11) % 40);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 3;
        let mut host = ostinato_host::HostBackend::serial().instantiate(&plan, host_kernels(&plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        write_inits(&mut host, &prog.inits).unwrap();
        for r in 0..replays {
            host.set_slot(prog.salt_slot, Scalar::u32(5 * r as u32 + seed as u32)).unwrap();
            host.replay().unwrap();
        }
        let want = read_roots(&mut host).unwrap();
        for (fusion, mode, pdl) in configs {
            let backend =
                CudaBackend::with_builtins(&device, &modules, CudaOptions { fusion, mode, pdl: PdlPolicy::new(pdl), ..CudaOptions::default() }).unwrap();
            let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name, k).unwrap()).collect();
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            write_inits(&mut exec, &prog.inits).unwrap();
            for r in 0..replays {
                exec.set_slot(prog.salt_slot, Scalar::u32(5 * r as u32 + seed as u32)).unwrap();
                exec.replay().unwrap();
            }
            exec.wait().unwrap();
            assert_eq!(read_roots(&mut exec).unwrap(), want, "seed {seed}: fusion {fusion:?} {mode:?} pdl {pdl:?} differs from the host oracle");
            fused += exec.fused_nodes();
            nodes += plan.node_count();
            compared += 1;
        }
    }
    assert!(fused > nodes / 10, "only {fused} of {nodes} nodes ran fused");
    eprintln!("compared {compared} tiled CUDA runs bitwise with the host oracle ({fused} of {nodes} nodes fused block by block)");
}

#[test]
fn a_block_local_chain_of_8192_blocks_runs_as_one_kernel_of_its_grid() {
    let Some(device) = common::device_or_skip("a_block_local_chain_of_8192_blocks_runs_as_one_kernel_of_its_grid") else { return };
    for blocks in [128u32, 1024, 8192] {
        let mut g = Graph::new();
        let x = g.add_buffer("x", u64::from(blocks) * 1024).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let row = TileMap::linear(1024, 1024).unwrap();
        for _ in 0..941 {
            g.add_launch_tiled(k, Launch::linear(blocks, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(blocks * 256))], &[("x", row.clone())], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
        let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (941, 1), "{blocks} blocks: one fused launch");
        assert_eq!(exec.lowering().launches[0].dims.grid, [blocks, 1, 1]);
        for _ in 0..2 {
            exec.replay().unwrap();
        }
        exec.wait().unwrap();
        let mut out = vec![0u8; blocks as usize * 1024];
        exec.read_buffer(x, 0, &mut out).unwrap();
        assert!(out.chunks(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 2.0 * 941.0), "{blocks} blocks: every element 941 times per replay");
    }
}
