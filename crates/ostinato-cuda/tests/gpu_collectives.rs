//! On the GPU: collectives as graph nodes through NCCL (loaded at run time), one rank on the exec's
//! device — an all-reduce in place, an all-gather and a reduce-scatter between kernels — bitwise equal
//! to the host oracle in every graph build and in eager mode; rebinding a collective's buffer is
//! refused. (Several ranks need a device each: a second GPU.)

mod common;

use ostinato::collective::CollectiveOp;
use ostinato::{read_roots, write_inits, Access, Arg, Backend, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaError, CudaOptions, DeviceMemory, ExecMode, GraphBuild, PdlTrigger};

fn program() -> (Graph, Vec<Option<ostinato::file::BufferInit>>) {
    let mut g = Graph::new();
    let n = 256u32;
    let x = g.add_buffer("x", 4 * n as u64).unwrap();
    let gathered = g.add_buffer("g", 4 * n as u64).unwrap();
    let scattered = g.add_buffer("s", 4 * n as u64).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let add = |g: &mut Graph, b| g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(n))], &[]).unwrap();
    add(&mut g, x);
    add(&mut g, x);
    let wx = g.whole(x);
    g.add_collective(CollectiveOp::AllReduceSum, ScalarType::F32, &[wx], &[wx], &[]).unwrap();
    add(&mut g, x);
    let (wg, ws) = (g.whole(gathered), g.whole(scattered));
    g.add_collective(CollectiveOp::AllGather, ScalarType::F32, &[wx], &[wg], &[]).unwrap();
    g.add_collective(CollectiveOp::ReduceScatterSum, ScalarType::F32, &[wg], &[ws], &[]).unwrap();
    add(&mut g, scattered);
    use ostinato::file::BufferInit;
    (g, vec![Some(BufferInit::ConstF32(1.5)), Some(BufferInit::Zero), Some(BufferInit::Zero)])
}

#[test]
fn one_rank_collectives_run_in_the_graph_and_match_the_host_oracle() {
    let Some(device) = common::device_or_skip("one_rank_collectives_run_in_the_graph_and_match_the_host_oracle") else { return };
    match ostinato_cuda::nccl::version() {
        Ok(v) => eprintln!("NCCL {v}"),
        Err(e) => {
            assert!(e.to_string().contains("libnccl.so.2"), "{e}");
            ostinato_testkit::skip(&format!("SKIP one_rank_collectives_run_in_the_graph_and_match_the_host_oracle: {e}"));
            return;
        }
    }
    let (g, inits) = program();
    let plan = Plan::compile(&g).unwrap();
    let host = ostinato_testkit::random_graphs::serial_result(
        &plan,
        &ostinato_testkit::random_graphs::RandomProgram { graph: g.clone(), inits: inits.clone(), salt_slot: ostinato::SlotId(0) },
        2,
    )
    .unwrap();
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let configs = [
        (ExecMode::Graph, GraphBuild::Bulk),
        (ExecMode::Graph, GraphBuild::InOrder),
        (ExecMode::Graph, GraphBuild::Capture),
        (ExecMode::Eager, GraphBuild::Bulk),
    ];
    for (mode, build) in configs {
        let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions { mode, build, ..CudaOptions::default() }).unwrap();
        let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name, k).unwrap()).collect();
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        write_inits(&mut exec, &inits).unwrap();
        exec.replay().unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        assert_eq!(read_roots(&mut exec).unwrap(), host, "{mode:?} {build:?} differs from the host oracle");
        if mode == ExecMode::Graph {
            let edges = exec.submitted_edges().unwrap();
            assert!(
                edges.iter().all(|e| !e.2 || exec.lowering().launches[e.1].callee != ostinato_cuda::lower::Callee::Collective),
                "no programmatic edge into a collective"
            );
        }
        // The collective's buffers are in its NCCL call: rebinding one is refused, naming it.
        let mem = ostinato_cuda::DeviceBuffer::new(&device, 1024).unwrap();
        // SAFETY: an allocation of 1,024 bytes of this device that outlives the call (nothing is bound).
        let m = unsafe { DeviceMemory::new(mem.ptr(), 1024) };
        let e = exec.rebind(ostinato::BufferId(0), m).unwrap_err();
        assert!(matches!(&e, CudaError::Unsupported { reason, .. } if reason.contains("buffer `x` is used by a collective")), "{e}");
    }
    eprintln!("compared {} one-rank collective runs bitwise with the host oracle", configs.len());
}
