//! On the GPU: what the driver holds of a graph can be read back whatever its shape. A plan of
//! independent roots has no edges; its exec's edges read back empty and its DOT is written, in every
//! graph build (reading the edges of an edgeless graph failed, and with it `bench --dot` on such rows).
//! Skips with a message where no CUDA driver is found.

mod common;

use ostinato::{Access, Arg, Backend, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, GraphBuild, PdlTrigger};

#[test]
fn an_edgeless_graph_reads_back_no_edges_and_writes_its_dot() {
    let Some(device) = common::device_or_skip("an_edgeless_graph_reads_back_no_edges_and_writes_its_dot") else { return };
    let sig = KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let mut g = Graph::new();
    let k = g.add_kernel(sig.clone()).unwrap();
    for i in 0..4 {
        let x = g.add_buffer(format!("x{i}"), 1024).unwrap();
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    assert!(plan.edges().is_empty(), "four independent roots");
    let m = BuiltinModules::load(&device, PdlTrigger::AfterWait).expect("built-in modules compile");
    let dir = std::env::temp_dir().join(format!("ostinato-readback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for build in [GraphBuild::Bulk, GraphBuild::InOrder, GraphBuild::Capture] {
        let backend =
            CudaBackend::with_builtins(&device, &m, CudaOptions { build, fusion: ostinato_cuda::FusionMode::Off, ..CudaOptions::default() }).expect("backend");
        let kernels = vec![m.kernel("add_one", &sig).expect("binds")];
        let exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).expect("instantiate");
        assert_eq!(exec.submitted_edges().expect("edges read back"), vec![], "{build:?}");
        let path = dir.join(format!("{}.dot", build.as_str()));
        exec.write_dot(&path).unwrap_or_else(|e| panic!("{build:?}: {e}"));
        let dot = std::fs::read_to_string(&path).unwrap();
        assert_eq!(dot.matches("add_one").count(), 4, "{build:?}: four kernel nodes in the DOT");
        assert!(!dot.contains("// edge"), "{build:?}: no edge lines");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
