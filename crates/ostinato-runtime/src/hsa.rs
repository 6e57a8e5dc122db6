//! The HSA backend in the runtime: opening it (ROCr, or with `--simulate` the simulated packet
//! processor, a test tool this build may carry behind the `hsa-sim` feature), what `ostinato devices`
//! says of it, and, under simulation, each user code object's host twin from the graph file.

use std::sync::Arc;

use ostinato_hsa::{HsaApi, HsaBackend};

use crate::error::RuntimeError;

/// The simulator of a session, when it simulates.
#[cfg(feature = "hsa-sim")]
pub(crate) type Simulator = Arc<ostinato_aql_sim::Simulator>;
#[cfg(not(feature = "hsa-sim"))]
pub(crate) type Simulator = ();

/// Opens the agent `device` selects, on ROCr or (`simulate: Some(seed)`) on the simulator.
pub(crate) fn open(device: Option<&str>, simulate: Option<u64>) -> Result<(HsaBackend, Option<Simulator>), RuntimeError> {
    match simulate {
        None => {
            let api: Arc<dyn HsaApi> = Arc::new(ostinato_hsa::rocr::Rocr::load()?);
            Ok((HsaBackend::open(api, device)?, None))
        }
        #[cfg(feature = "hsa-sim")]
        Some(seed) => {
            let sim = Arc::new(ostinato_aql_sim::Simulator::new(ostinato_aql_sim::SimOptions::seeded(seed)));
            Ok((HsaBackend::open(sim.clone(), device)?, Some(sim)))
        }
        #[cfg(not(feature = "hsa-sim"))]
        Some(_) => {
            Err(RuntimeError::Backend { name: "hsa".into(), reason: "this build carries no simulated packet processor (cargo feature `hsa-sim`)".into() })
        }
    }
}

/// Under simulation, each kernel the file implements with a code object runs through the file's host
/// implementation of it (its twin); built-ins have theirs.
#[cfg(feature = "hsa-sim")]
pub(crate) fn register_twins(sim: &Simulator, file: &ostinato::file::GraphFile, plan: &ostinato::Plan) -> Result<(), RuntimeError> {
    use ostinato::Backend;
    for (k, sig) in plan.graph().kernels().iter().enumerate() {
        let Some(hsa) = file.impls.get(k).and_then(|m| m.get("hsa")) else { continue };
        if hsa.builtin_name().is_some() {
            continue;
        }
        let host = file.kernel_ref(k, "host")?;
        let twin = ostinato_host::HostBackend::serial().bind_kernel(sig, host)?;
        sim.register_twin(hsa.entry_for(&sig.name), twin);
    }
    Ok(())
}

/// `ostinato devices`' HSA line(s).
pub(crate) fn describe(s: &mut String) {
    use std::fmt::Write as _;
    match ostinato_hsa::rocr::Rocr::load() {
        Err(e) => {
            let _ = writeln!(s, "hsa: {e}");
        }
        Ok(r) => match r.agents() {
            Err(e) => {
                let _ = writeln!(s, "hsa: {} loaded; listing agents failed: {e}", r.describe());
            }
            Ok(agents) if agents.is_empty() => {
                let _ = writeln!(s, "hsa: {} loaded, no GPU agent", r.describe());
            }
            Ok(agents) => {
                for (i, a) in agents.iter().enumerate() {
                    let built = if ostinato_hsa::builtins::code_object_for(&a.name).is_some() { "built-ins shipped" } else { "no built-in code object for it" };
                    let _ = writeln!(s, "hsa:{i} {} {} {} {} CUs ({built}; {})", a.name, a.product, a.pci_bus_id, a.compute_units, r.describe());
                }
            }
        },
    }
}
