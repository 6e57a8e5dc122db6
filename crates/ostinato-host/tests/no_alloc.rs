//! Replay allocates nothing: a counting global allocator sees zero allocations across many replays of a
//! wide parallel plan once the exec is instantiated and warmed.

use ostinato::{write_inits, Backend, Exec, Plan, Scalar};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::random_mix_program;

use ostinato_testkit::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn replay_and_patch_allocate_nothing() {
    let prog = random_mix_program(11, 300);
    let plan = Plan::compile(&prog.graph).unwrap();
    let backend = HostBackend::new(4);
    let kernels = ostinato::bind_builtins(&backend, &plan).unwrap();
    let buffers = ostinato::allocate_all(&plan);
    let mut exec = backend.instantiate(&plan, kernels, buffers).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let before = counting_alloc::allocations();
    for r in 0..200u32 {
        exec.set_slot(prog.salt_slot, Scalar::u32(r)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
    }
    let after = counting_alloc::allocations();
    assert_eq!(after - before, 0, "replays allocated {} times", after - before);
}
