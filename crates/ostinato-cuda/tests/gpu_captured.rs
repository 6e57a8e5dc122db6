//! On the GPU: captured work — a CUDA graph the program made itself (here: one memset node, built with
//! the driver's graph API) — bound as a kernel and run as a node, ordered by its declared access against
//! the exec's own copy and fill nodes: in both graph builds that take it and in eager mode, with the
//! stream-capture build, a rebinding of its buffer, a scalar param and an `infer` declaration refused.
//! (`python/tests/test_triton.py` runs PyTorch's captured work the same way.) Skips with a message where
//! no CUDA driver is found.

mod common;

use std::sync::Arc;

use cudarc::driver::sys;
use ostinato::{Access, Arg, Backend, BufferBinding, Exec, Graph, KernelSig, Launch, Plan, ScalarType};
use ostinato_cuda::{CapturedWork, CudaBackend, CudaError, CudaOptions, DeviceBuffer, ExecMode, GraphBuild};

const WORDS: usize = 1024;
const SET: usize = 512;

/// A graph of one memset node writing `value` to `words` u32 words at `dst`, destroyed when dropped.
struct MemsetGraph(sys::CUgraph);

// SAFETY: the graph is only read (cloned) by the backend, from one thread at a time; the test owns it.
unsafe impl Send for MemsetGraph {}
// SAFETY: as above: nothing mutates the graph after it is built.
unsafe impl Sync for MemsetGraph {}

impl MemsetGraph {
    fn new(dst: u64, words: usize, value: u32) -> MemsetGraph {
        let mut ctx = std::ptr::null_mut();
        let mut g = std::ptr::null_mut();
        let mut node = std::ptr::null_mut();
        let p = sys::CUDA_MEMSET_NODE_PARAMS { dst, pitch: 0, value, elementSize: 4, width: words, height: 1 };
        // SAFETY: the device's primary context is current (Device::open binds it); the graph and node
        // are written by the driver; the params outlive the call.
        unsafe {
            assert_eq!(sys::cuCtxGetCurrent(&mut ctx), sys::CUresult::CUDA_SUCCESS);
            assert_eq!(sys::cuGraphCreate(&mut g, 0), sys::CUresult::CUDA_SUCCESS);
            assert_eq!(sys::cuGraphAddMemsetNode(&mut node, g, std::ptr::null(), 0, &p, ctx), sys::CUresult::CUDA_SUCCESS);
        }
        MemsetGraph(g)
    }
}

impl Drop for MemsetGraph {
    fn drop(&mut self) {
        // SAFETY: our own graph, destroyed once.
        unsafe { sys::cuGraphDestroy(self.0) };
    }
}

/// x = fill(1); x[0..SET) = captured memset(5); y = copy(x): y holds 5 then 1 only in that order.
fn plan(sig: &KernelSig) -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", (WORDS * 4) as u64).unwrap();
    let y = g.add_buffer("y", (WORDS * 4) as u64).unwrap();
    let k = g.add_kernel(sig.clone()).unwrap();
    g.add_fill(g.whole(x), 1, &[]).unwrap();
    let head = ostinato::Slice { buffer: x, offset: 0, len: (SET * 4) as u64 };
    g.add_launch(k, Launch::linear(1, 1), &[Arg::Buffer(head)], &[]).unwrap();
    g.add_copy(g.whole(x), g.whole(y), &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    assert_eq!(plan.edges().iter().map(|e| (e.from.0, e.to.0)).collect::<Vec<_>>(), vec![(0, 1), (1, 2)]);
    plan
}

#[test]
fn captured_work_runs_as_a_node_in_order_with_the_exec_s_own() {
    let Some(device) = common::device_or_skip("captured_work_runs_as_a_node_in_order_with_the_exec_s_own") else { return };
    let sig = KernelSig::new("set_head").buffer_vouched("x", Access::Write);
    let plan = plan(&sig);
    let x = DeviceBuffer::new(&device, WORDS * 4).unwrap();
    let graph = Arc::new(MemsetGraph::new(x.ptr(), SET, 5));
    // SAFETY: a live graph captured on this device, kept alive (with nothing else to keep) by `owner`; it
    // writes only `x`, which outlives every exec below.
    let work = unsafe { CapturedWork::from_raw(graph.0 as u64, graph.clone(), "memset") };
    let configs = [(ExecMode::Graph, GraphBuild::Bulk), (ExecMode::Graph, GraphBuild::InOrder), (ExecMode::Eager, GraphBuild::Bulk)];
    for (mode, build) in configs {
        let backend = CudaBackend::new(&device, CudaOptions { mode, build, ..CudaOptions::default() }).unwrap();
        let kernel = backend.captured_kernel(&sig, &work).unwrap();
        assert!(!kernel.pdl_capable && kernel.fusion.is_none());
        let buffers = vec![BufferBinding::External(x.memory()), BufferBinding::Allocate];
        let mut exec = backend.instantiate(&plan, vec![kernel], buffers).unwrap_or_else(|e| panic!("{mode:?} {build:?}: {e}"));
        for _ in 0..3 {
            exec.replay().unwrap();
        }
        exec.wait().unwrap();
        let mut y = vec![0u8; WORDS * 4];
        exec.read_buffer(ostinato::BufferId(1), 0, &mut y).unwrap();
        let words: Vec<u32> = y.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(words[..SET].iter().all(|&w| w == 5) && words[SET..].iter().all(|&w| w == 1), "{mode:?} {build:?}: {:?}", &words[SET - 2..SET + 2]);
        assert!(exec.lowering().edges.iter().all(|e| !e.programmatic), "captured work has full edges");
        // Its addresses are in the captured graph: the buffer it writes cannot be rebound.
        let other = DeviceBuffer::new(&device, WORDS * 4).unwrap();
        let e = exec.rebind(ostinato::BufferId(0), other.memory()).unwrap_err();
        assert!(matches!(&e, CudaError::Unsupported { reason, .. } if reason.contains("used by captured work")), "{e}");
    }
    // The stream-capture build cannot place a child graph: refused, naming the node.
    let backend = CudaBackend::new(&device, CudaOptions { build: GraphBuild::Capture, ..CudaOptions::default() }).unwrap();
    let kernel = backend.captured_kernel(&sig, &work).unwrap();
    let Err(e) = backend.instantiate(&plan, vec![kernel], vec![BufferBinding::External(x.memory()), BufferBinding::Allocate]) else {
        panic!("the stream-capture build took captured work")
    };
    let e = e.to_string();
    assert!(e.contains("captured work") && e.contains("node 1"), "{e}");
}

#[test]
fn captured_work_declares_buffers_only_and_never_infers() {
    let Some(device) = common::device_or_skip("captured_work_declares_buffers_only_and_never_infers") else { return };
    let x = DeviceBuffer::new(&device, WORDS * 4).unwrap();
    let graph = Arc::new(MemsetGraph::new(x.ptr(), SET, 5));
    // SAFETY: as above.
    let work = unsafe { CapturedWork::from_raw(graph.0 as u64, graph.clone(), "memset") };
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let scalar = KernelSig::new("set_head").buffer_vouched("x", Access::Write).scalar("n", ScalarType::U32);
    let e = backend.captured_kernel(&scalar, &work).unwrap_err().to_string();
    assert!(e.contains("param `n` is a scalar"), "{e}");
    let infer = KernelSig::new("set_head").buffer_infer("x");
    let e = backend.captured_kernel(&infer, &work).unwrap_err().to_string();
    assert!(e.contains("declared `infer`, but captured work has no code to read"), "{e}");
    // Declared but not vouched: the contract cannot check it against code, so it fails closed.
    let checked = KernelSig::new("set_head").buffer("x", Access::Write);
    let e = backend.captured_kernel(&checked, &work).unwrap_err().to_string();
    assert!(e.contains("`x`"), "{e}");
}
