//! The AQL backend on the simulated packet processor (a test tool): two roots bound to overlapping
//! memory are refused at instantiate and at rebind, naming both buffers, and the exec keeps running
//! on its own memory afterwards.

use std::sync::Arc;

use ostinato::{allocate_all, bind_builtins, Arg, Backend, BufferBinding, ErrorKind, Exec, Graph, Launch, Plan, Scalar};
use ostinato_aql_sim::{SimOptions, Simulator};
use ostinato_hsa::{DevicePtr, HsaBackend, HsaMemory};
use ostinato_testkit::random_graphs::mix_sig;

#[test]
fn two_roots_on_overlapping_memory_are_refused() {
    let backend = HsaBackend::open(Arc::new(Simulator::new(SimOptions::seeded(1))), None).unwrap();
    let mut g = Graph::new();
    let (a, b) = (g.add_buffer("a", 64).unwrap(), g.add_buffer("b", 64).unwrap());
    let k = g.add_kernel(mix_sig()).unwrap();
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(b), u(16), u(16), u(1)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    // Never dereferenced: the refusal comes before anything uses the memory.
    let fake = |at: u64| HsaMemory { ptr: DevicePtr(at), len: 64 };
    let err = backend
        .instantiate(&plan, bind_builtins(&backend, &plan).unwrap(), vec![BufferBinding::External(fake(0x10_000)), BufferBinding::External(fake(0x10_020))])
        .err()
        .expect("overlapping memory");
    assert_eq!(err.kind(), ErrorKind::Argument);
    assert!(err.to_string().contains("`a` and `b` are bound to overlapping memory"), "{err}");
    let mut exec = backend.instantiate(&plan, bind_builtins(&backend, &plan).unwrap(), allocate_all(&plan)).unwrap();
    let err = exec.rebind(b, fake(exec.root_address(a) + 8)).unwrap_err();
    assert!(err.to_string().contains("overlapping memory"), "{err}");
    exec.write_buffer(a, 0, &[0; 64]).unwrap();
    exec.write_buffer(b, 0, &[0; 64]).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
}
