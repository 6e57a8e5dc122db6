//! On the GPU: launches with more shared memory than the default 48 KiB a block gets run with the
//! opt-in the exec sets (in graph and eager mode, the same function at two sizes); past what the
//! opt-in gives, instantiation is refused naming the node. Skips with a message where no CUDA driver
//! is found.

mod common;

use ostinato::{Access, Arg, Backend, Exec, Graph, KernelRef, KernelSig, Launch, Plan, Scalar, ScalarType};
use ostinato_cuda::{CudaBackend, CudaOptions, ExecMode};

/// Reverses `n` words of `x` through dynamic shared memory (`n` words of it), adding 1.
const REVERSE: &str = r#"
extern "C" __global__ void reverse(unsigned* x, unsigned n) {
  extern __shared__ unsigned s[];
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];
  __syncthreads();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) x[i] = s[n - 1 - i] + 1;
}
"#;

fn sig() -> KernelSig {
    KernelSig::new("reverse").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

#[test]
fn launches_past_48_kib_of_shared_memory_run_with_the_opt_in() {
    let Some(device) = common::device_or_skip("launches_past_48_kib_of_shared_memory_run_with_the_opt_in") else { return };
    // 100 KiB and 20 KiB of dynamic shared memory: one function, two sizes, on two buffers.
    let (big, small) = (25_600u32, 5_120u32);
    let mut g = Graph::new();
    let xb = g.add_buffer("big", 4 * u64::from(big)).unwrap();
    let xs = g.add_buffer("small", 4 * u64::from(small)).unwrap();
    let k = g.add_kernel(sig()).unwrap();
    for (x, n) in [(xb, big), (xs, small), (xb, big)] {
        g.add_launch(k, Launch::linear(1, 256).shared(4 * n), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(n))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let reference = KernelRef::code("reverse.cu", REVERSE).with_entry("reverse");
    for mode in [ExecMode::Graph, ExecMode::Eager] {
        let backend = CudaBackend::new(&device, CudaOptions { mode, ..CudaOptions::default() }).unwrap();
        let kernels = vec![backend.bind_kernel(&sig(), &reference).unwrap()];
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        let iota = |n: u32| (0..n).flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>();
        exec.write_buffer(xb, 0, &iota(big)).unwrap();
        exec.write_buffer(xs, 0, &iota(small)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let words = |bytes: Vec<u8>| bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<u32>>();
        let (mut b, mut s) = (vec![0u8; 4 * big as usize], vec![0u8; 4 * small as usize]);
        exec.read_buffer(xb, 0, &mut b).unwrap();
        exec.read_buffer(xs, 0, &mut s).unwrap();
        // Reversed twice (+2) for the big buffer, once (+1, reversed) for the small one.
        assert_eq!(words(b), (0..big).map(|i| i + 2).collect::<Vec<u32>>(), "{mode:?}: the 100 KiB launches");
        assert_eq!(words(s), (0..small).map(|i| small - 1 - i + 1).collect::<Vec<u32>>(), "{mode:?}: the 20 KiB launch");
    }
    // Past the opt-in's 227 KiB: refused before anything reaches the driver, naming the node.
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4).unwrap();
    let k = g.add_kernel(sig()).unwrap();
    g.add_launch(k, Launch::linear(1, 32).shared(228 * 1024), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(1))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let kernels = vec![backend.bind_kernel(&sig(), &reference).unwrap()];
    let e = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).err().expect("refused");
    assert!(e.to_string().contains("node 0 (reverse)") && e.to_string().contains("dynamic shared memory"), "{e}");
    assert_eq!(e.kind(), ostinato::ErrorKind::Unsupported);
}
