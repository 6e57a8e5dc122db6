//! Shared by the simulator's tests: run a program on the HSA backend over the simulator, and on the
//! host oracle, with the same slot patched before every replay.

#![allow(dead_code)]

use std::sync::Arc;

use ostinato::{allocate_all, bind_builtins, read_roots, write_inits, Backend, BufferId, Exec, Plan, Scalar};
use ostinato_aql_sim::{SimOptions, Simulator};
use ostinato_hsa::{AqlProgram, HsaBackend, HsaError};
use ostinato_testkit::random_graphs::RandomProgram;

pub type Buffers = Vec<(BufferId, Vec<u8>)>;

/// The salt for replay `r` (patched before every replay).
pub fn salt(r: usize) -> Scalar {
    Scalar::u32(0x9E37_79B9u32.wrapping_mul(r as u32 + 1))
}

/// The host's serial result of `replays` replays, the slot patched before each.
pub fn oracle(plan: &Plan, prog: &RandomProgram, replays: usize) -> Buffers {
    let host = ostinato_host::HostBackend::serial();
    let mut exec = host.instantiate(plan, bind_builtins(&host, plan).unwrap(), allocate_all(plan)).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    for r in 0..replays {
        exec.set_slot(prog.salt_slot, salt(r)).unwrap();
        exec.replay().unwrap();
    }
    read_roots(&mut exec).unwrap()
}

/// The simulator's result: `replays` replays submitted back to back (two in flight), the slot
/// patched before each; `mutate` may change the lowered program before the exec encodes it.
pub fn simulated(plan: &Plan, prog: &RandomProgram, replays: usize, options: SimOptions, mutate: Option<&dyn Fn(&mut AqlProgram)>) -> Result<Buffers, HsaError> {
    let sim = Arc::new(Simulator::new(options));
    let backend = HsaBackend::open(sim.clone(), None)?;
    let kernels = bind_builtins(&backend, plan)?;
    let mut exec = match mutate {
        None => backend.instantiate(plan, kernels, allocate_all(plan))?,
        Some(m) => ostinato_hsa::HsaExec::with_program(&backend, plan, kernels, allocate_all(plan), m)?,
    };
    write_inits(&mut exec, &prog.inits)?;
    for r in 0..replays {
        exec.set_slot(prog.salt_slot, salt(r))?;
        exec.replay()?;
    }
    exec.wait()?;
    read_roots(&mut exec)
}
