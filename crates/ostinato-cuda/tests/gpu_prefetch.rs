//! On the GPU: the certified pre-wait prefetch. Kernels that read their weights before
//! `griddepcontrol.wait` keep their programmatic edges and compute the right result; a planted kernel
//! that reads its producer's output before the wait gets a full edge instead (and is still right), and
//! is refused, naming kernel, param and edge, when its author declares it PDL-safe.

mod common;

use ostinato::{Access, Arg, Backend, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_cuda::module::{LoadedModule, ModuleSource, BUILTIN_SOURCE};
use ostinato_cuda::{CudaBackend, CudaError, CudaOptions, PdlTrigger};

const N: u32 = 64 * 1024;

fn sig(name: &str) -> KernelSig {
    KernelSig::new(name).buffer("out", Access::ReadWrite).buffer("weights", Access::Read).buffer("inp", Access::Read).scalar("n", ScalarType::U32)
}

/// A chain of four: node i computes out_i += w * out_{i-1} (out_0's input is `seed`).
fn chain(kernel: &str) -> (Graph, Vec<ostinato::BufferId>) {
    let mut g = Graph::new();
    let w = g.add_buffer("w", 4 * N as u64).unwrap();
    let seed = g.add_buffer("seed", 4 * N as u64).unwrap();
    let outs: Vec<_> = (0..4).map(|i| g.add_buffer(format!("out{i}"), 4 * N as u64).unwrap()).collect();
    let k = g.add_kernel(sig(kernel)).unwrap();
    let mut inp = seed;
    for &o in &outs {
        g.add_launch(k, Launch::linear(N / 256, 256), &[Arg::Whole(o), Arg::Whole(w), Arg::Whole(inp), Arg::Scalar(Scalar::u32(N))], &[]).unwrap();
        inp = o;
    }
    let mut bufs = vec![w, seed];
    bufs.extend(outs);
    (g, bufs)
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn prefetching_kernels_keep_safe_edges_and_lose_racing_ones() {
    let Some(device) = common::device_or_skip("prefetching_kernels_keep_safe_edges_and_lose_racing_ones") else { return };
    let source = ModuleSource::CudaC {
        name: "prefetch.cu".into(),
        source: format!("{BUILTIN_SOURCE}\n{}", include_str!("../../ostinato-cuda-code/tests/fixtures/prefetch.cu")),
    };
    let module = LoadedModule::load(&device, &source, PdlTrigger::AfterWait).unwrap();
    let w: Vec<f32> = (0..N).map(|i| 1.0 + (i % 7) as f32 / 8.0).collect();
    let seed: Vec<f32> = (0..N).map(|i| (i % 13) as f32).collect();
    for (kernel, reads, programmatic) in [("weight_prefetch", vec![1], true), ("racy_prefetch", vec![1, 2], false)] {
        let (g, bufs) = chain(kernel);
        let plan = Plan::compile(&g).unwrap();
        let k = module.kernel(kernel, &g.kernels()[0], None).unwrap();
        assert!(k.pdl_capable && k.pdl_evidence == "ptx", "{kernel}: {k:?}");
        assert_eq!(k.pre_wait_reads, reads, "{kernel}: the params its PTX reads before the wait");
        let backend =
            CudaBackend::new(&device, CudaOptions { pdl: ostinato_cuda::lower::PdlPolicy::new(ostinato_cuda::PdlMode::On), ..Default::default() }).unwrap();
        let mut exec = backend.instantiate(&plan, vec![k], ostinato::allocate_all(&plan)).unwrap();
        let low = exec.lowering().edges.clone();
        assert_eq!(low.len(), 3);
        assert!(low.iter().all(|e| e.programmatic == programmatic), "{kernel}: {low:?}");
        assert_eq!(exec.submitted_edges().unwrap().iter().filter(|e| e.2).count(), if programmatic { 3 } else { 0 }, "{kernel}: what the driver holds");
        exec.write_buffer(bufs[0], 0, &f32s(&w)).unwrap();
        exec.write_buffer(bufs[1], 0, &f32s(&seed)).unwrap();
        for replay in 0..50 {
            for &o in &bufs[2..] {
                exec.write_buffer(o, 0, &vec![0u8; 4 * N as usize]).unwrap();
            }
            exec.replay().unwrap();
            let mut want = seed.clone();
            for (i, &o) in bufs[2..].iter().enumerate() {
                want = want.iter().zip(&w).map(|(x, w)| w * x).collect();
                let mut got = vec![0u8; 4 * N as usize];
                exec.read_buffer(o, 0, &mut got).unwrap();
                assert_eq!(got, f32s(&want), "{kernel}: replay {replay}, out{i}");
            }
        }
        // Declared PDL-safe: the racing kernel is refused, naming what races.
        let declared = module.kernel(kernel, &g.kernels()[0], Some(true)).unwrap();
        match backend.instantiate(&plan, vec![declared], ostinato::allocate_all(&plan)) {
            Ok(_) => assert!(programmatic, "{kernel}: a declared racing kernel was accepted"),
            Err(CudaError::Prefetch(race)) => {
                assert!(!programmatic, "{kernel}: refused though safe: {race}");
                let msg = race.to_string();
                assert!(msg.contains("`racy_prefetch`") && msg.contains("param `inp`") && msg.contains("n0 -> n1"), "{msg}");
            }
            Err(e) => panic!("{kernel}: {e}"),
        }
    }
}

#[test]
fn kernels_that_touch_memory_unsafely_before_the_wait_are_not_pdl_capable() {
    let Some(device) = common::device_or_skip("kernels_that_touch_memory_unsafely_before_the_wait_are_not_pdl_capable") else { return };
    let source = ModuleSource::CudaC {
        name: "prefetch.cu".into(),
        source: format!("{BUILTIN_SOURCE}\n{}", include_str!("../../ostinato-cuda-code/tests/fixtures/prefetch.cu")),
    };
    let module = LoadedModule::load(&device, &source, PdlTrigger::AfterWait).unwrap();
    let one = |name: &str| KernelSig::new(name).buffer("out", Access::ReadWrite).scalar("n", ScalarType::U32);
    for name in ["early_store", "early_return"] {
        let k = module.kernel(name, &one(name), None).unwrap();
        assert!(!k.pdl_capable, "{name}");
        let e = module.kernel(name, &one(name), Some(true)).unwrap_err().to_string();
        assert!(e.contains("declared PDL-capable but its PTX says otherwise"), "{name}: {e}");
    }
    let chase = KernelSig::new("pointer_chase").buffer("out", Access::ReadWrite).buffer("table", Access::Read).scalar("n", ScalarType::U32);
    assert!(!module.kernel("pointer_chase", &chase, None).unwrap().pdl_capable);
}
