//! Replay allocates nothing: a counting global allocator sees zero allocations across many replays of a
//! wide parallel plan once the exec is instantiated and warmed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ostinato::{write_inits, Backend, Exec, Plan, Scalar};
use ostinato_host::random_graphs::random_mix_program;
use ostinato_host::{builtins, HostBackend};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn replay_and_patch_allocate_nothing() {
    let prog = random_mix_program(11, 300);
    let plan = Plan::compile(&prog.graph).unwrap();
    let kernels = ostinato_host::bind_kernels(&plan, |i| Some(plan.graph().kernels()[i].name.clone()), builtins::lookup).unwrap();
    let buffers = ostinato::allocate_all(&plan);
    let mut exec = HostBackend::new(4).instantiate(&plan, kernels, buffers).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let before = ALLOCS.load(Ordering::SeqCst);
    for r in 0..200u32 {
        exec.set_slot(prog.salt_slot, Scalar::u32(r)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "replays allocated {} times", after - before);
}
