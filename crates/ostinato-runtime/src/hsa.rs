//! The HSA backend in the runtime: opening it (ROCr, or with `--simulate` the simulated packet
//! processor, a test tool this build may carry behind the `hsa-sim` feature), what `ostinato devices`
//! says of it, under simulation each user code object's host twin from the graph file, and, without
//! an agent, what a kernel's code objects say (`plan --explain`, `ostinato kernels --backend hsa`).

use std::sync::Arc;

use ostinato_hsa::codeobject::KernelInfo;
use ostinato_hsa::{HsaApi, HsaBackend};

use crate::contract::Unread;
use crate::error::RuntimeError;

/// The source the built-in code objects are compiled from (`scripts/build-hsaco.sh`), hashed into
/// their manifests.
const BUILTIN_SOURCE: &str = include_str!("../../../kernels/amdgpu/ostinato.cl");

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

/// The kernels `reference` names for `sig`, read without an agent as binding reads them: a built-in
/// from every shipped target's code object, a `.hsaco` file's; each `(what, code object bytes,
/// kernel)` checked against the signature as binding checks it ([`ostinato_hsa::codeobject::check_signature`]).
fn read_offline(sig: &ostinato::KernelSig, reference: &ostinato::KernelRef) -> Result<Vec<(String, Vec<u8>, KernelInfo)>, Unread> {
    use ostinato::capped_read::{read_bytes, KERNEL_FILE};
    reference.check_options("hsa", &[]).map_err(Unread::Refused)?;
    let objects: Vec<(String, Vec<u8>)> = match reference.builtin_name() {
        Some(b) => {
            let name = reference.entry_for(if b.is_empty() { &sig.name } else { b });
            if !ostinato_hsa::builtins::NAMES.contains(&name) {
                return Err(Unread::Refused(format!("no built-in `{name}` (built-ins: {})", ostinato_hsa::builtins::NAMES.join(", "))));
            }
            ostinato_hsa::builtins::CODE_OBJECTS.iter().map(|(isa, code)| (format!("builtin:{name} ({isa} code object)"), code.to_vec())).collect()
        }
        None => {
            let path = reference.path();
            vec![(format!("{} (code object)", path.display()), read_bytes(&path, KERNEL_FILE)?)]
        }
    };
    let entry = reference.entry_for(&sig.name);
    let mut out = Vec::with_capacity(objects.len());
    for (what, bytes) in objects {
        let refuse = |why: String| Unread::Refused(format!("{what}: {why}"));
        let object = ostinato_hsa::codeobject::parse(&bytes).map_err(refuse)?;
        let info = object.kernel(entry).cloned().ok_or_else(|| {
            refuse(format!("no kernel `{entry}` (it has: {})", object.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")))
        })?;
        ostinato_hsa::codeobject::check_signature(sig, &info).map_err(refuse)?;
        out.push((what, bytes, info));
    }
    Ok(out)
}

/// What an HSA implementation's code shows for each param: what the compiler proved of each pointer
/// (the code object's `.actual_access`: `read_only`, `write_only`), a pointer to constant memory as
/// read only, and nothing (`None`: the declaration stands, as binding lets it) where the metadata
/// says nothing. A built-in's shipped targets agree or the param shows nothing.
pub(crate) fn code_access(sig: &ostinato::KernelSig, reference: &ostinato::KernelRef) -> Result<ostinato::contract::CodeAccess, Unread> {
    let kernels = read_offline(sig, reference)?;
    let params = sig
        .params
        .iter()
        .enumerate()
        .map(|(p, param)| {
            let ostinato::ParamKind::Buffer(_) = param.kind else { return None };
            let mut uses = kernels.iter().map(|(what, _, info)| proven_use(what, info, p));
            let first = uses.next().flatten()?;
            let observed = first.observed();
            uses.all(|u| u.is_some_and(|u| u.observed() == observed)).then_some(first)
        })
        .collect();
    let code = match kernels.as_slice() {
        [(what, _, _)] => format!("hsa: {what}"),
        _ => format!("hsa: builtin:{} ({} code objects)", reference.entry_for(&sig.name), kernels.len()),
    };
    Ok(ostinato::contract::CodeAccess { code, params, undeclarable: Vec::new() })
}

/// The access the metadata of `info` proves for its `p`-th explicit argument, if any.
fn proven_use(what: &str, info: &KernelInfo, p: usize) -> Option<ostinato::contract::ParamUse> {
    use ostinato::contract::{Evidence, ParamUse, Seen};
    let arg = info.args.iter().filter(|a| !a.is_hidden()).nth(p)?;
    let ev =
        |fact: &str| Seen::Yes(Evidence { instruction: format!("argument `{}`: {fact}", arg.name), at: format!("{what}, kernel `{}` metadata", info.name) });
    match (arg.actual_access.as_deref(), arg.address_space.as_deref()) {
        (Some("read_only"), _) => Some(ParamUse { read: ev(".actual_access read_only"), write: Seen::No }),
        (Some("write_only"), _) => Some(ParamUse { read: Seen::No, write: ev(".actual_access write_only") }),
        (Some("read_write"), _) => Some(ParamUse { read: ev(".actual_access read_write"), write: ev(".actual_access read_write") }),
        (None, Some("constant")) => Some(ParamUse { read: ev("a pointer to constant memory"), write: Seen::No }),
        _ => None,
    }
}

/// The build manifest of an HSA implementation, read without an agent: each code object hashed, the
/// kernel's segment sizes from its metadata, and what the metadata proves of each param.
pub(crate) fn manifest(sig: &ostinato::KernelSig, reference: &ostinato::KernelRef) -> Result<ostinato::manifest::KernelManifest, String> {
    use ostinato::manifest::{Hashed, KernelManifest};
    let code = code_access(sig, reference).map_err(|e| e.to_string())?;
    let broader = ostinato::contract::verify(sig, &code).map_err(|e| e.to_string())?;
    let kernels = read_offline(sig, reference).map_err(|e| e.to_string())?;
    let mut m = KernelManifest::new(sig, "hsa", reference.entry_for(&sig.name));
    for (what, bytes, _) in &kernels {
        m.artifacts.push(Hashed::of(what, bytes));
    }
    match reference.builtin_name() {
        Some(_) => {
            m.source.push(Hashed::of("kernels/amdgpu/ostinato.cl", BUILTIN_SOURCE.as_bytes()));
            m.notes.push("a built-in: code objects compiled by clang from kernels/amdgpu/ostinato.cl for every shipped target (scripts/build-hsaco.sh)".into());
        }
        None => m.source.push(Hashed::of(reference.path().display().to_string(), &kernels[0].1)),
    }
    if let Some((_, _, info)) = kernels.first() {
        for (key, value) in [
            ("kernarg_segment_bytes", info.kernarg_segment_size),
            ("group_segment_bytes", info.group_segment_fixed_size),
            ("private_segment_bytes", info.private_segment_fixed_size),
            ("max_flat_workgroup_size", info.max_flat_workgroup_size),
        ] {
            m.resources.insert(key.into(), i64::from(value));
        }
    }
    m.set_access(sig, &code, &broader);
    for (param, u) in sig.params.iter().zip(&code.params) {
        if let (ostinato::ParamKind::Buffer(mode), None) = (&param.kind, u) {
            m.notes.push(format!("param {}: declared {}; the metadata proves no narrower access, so the declaration stands", param.name, mode.as_str()));
        }
    }
    m.notes.push("read from the code object's metadata without an agent; the access analysis is what the compiler proved (`.actual_access`)".into());
    Ok(m)
}
