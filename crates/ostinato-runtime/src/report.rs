//! What `ostinato plan` prints: a graph file's plan (its edges with their hazards, or JSON), the
//! reason for each edge, and what the CUDA backend would submit for it (no GPU needed).

use std::fmt::Write;
use std::path::Path;

use ostinato::{file, Plan, PlanOptions};

use crate::error::RuntimeError;
use crate::kind::BackendKind;
use crate::options::ExecOptions;

/// What to print of a plan.
#[derive(Clone, Debug, Default)]
pub struct PlanReport {
    /// One JSON object: nodes, edges, hazards, lanes, waits, fingerprint.
    pub json: bool,
    /// Every edge explained: which params conflict on which bytes.
    pub explain: bool,
    /// What the CUDA backend would submit under these options' `pdl` and `shape` (`None`: nothing).
    pub cuda: Option<ExecOptions>,
    pub max_lanes: usize,
}

/// Plans the graph file at `path` (access declared `infer` read from the code first) and describes
/// the plan as `what` asks.
pub fn plan_report(path: &Path, what: &PlanReport) -> Result<String, RuntimeError> {
    let (f, inferred) = crate::kernels::load_file(path)?;
    let plan = Plan::compile_with(&f.graph, PlanOptions { max_lanes: what.max_lanes }).map_err(|e| RuntimeError::File(f.plan_error(&e)))?;
    // The declarations against the code each backend reads here (CUDA: the submission's).
    let backends: Vec<BackendKind> = if what.cuda.is_some() {
        vec![BackendKind::Cuda]
    } else if what.explain {
        BackendKind::ALL.to_vec()
    } else {
        Vec::new()
    };
    let mut checked = Vec::new();
    for b in backends {
        checked.push((b, crate::kernels::check_file(&f, b)?));
    }
    let mut out = String::new();
    if what.json {
        let _ = writeln!(out, "{}", plan.to_json());
    } else {
        let _ = writeln!(
            out,
            "{}: {} nodes, {} edges, {} lanes, fingerprint {:016x}",
            path.display(),
            plan.node_count(),
            plan.edges().len(),
            plan.lanes().count(),
            plan.fingerprint()
        );
        for e in plan.edges() {
            let kinds = if e.hazards.is_empty() { "explicit".to_string() } else { e.hazards.names().join("+") };
            let _ = writeln!(out, "  {} -> {}  {kinds}{}", e.from, e.to, if e.explicit && !e.hazards.is_empty() { " (explicit)" } else { "" });
        }
    }
    if what.explain {
        out.push_str(&plan.explain());
        out.push_str(&crate::contract::explain(&f.graph, &inferred, &checked));
        #[cfg(feature = "vulkan")]
        out.push_str(&crate::contract::explain_vulkan_tiles(&f.graph, &f.impls));
    }
    if let Some(options) = &what.cuda {
        out.push_str(&cuda_submission(path, &f, &plan, options)?);
    }
    Ok(out)
}

/// What the CUDA backend would submit for `plan` (checked against the sm_90 launch limits).
#[cfg(feature = "cuda")]
fn cuda_submission(path: &Path, f: &file::GraphFile, plan: &Plan, options: &ExecOptions) -> Result<String, RuntimeError> {
    use ostinato_cuda::{lower, LaunchLimits};
    LaunchLimits::SM90.check(plan).map_err(|e| RuntimeError::Usage(format!("{}: {e} (the sm_90 limits)", path.display())))?;
    let kernels = crate::kernels::cuda_pdl(f);
    let low = lower::lower_with(plan, &kernels, true, options.cuda()?.pdl).map_err(|e| RuntimeError::Usage(format!("{}: {e}", path.display())))?;
    Ok(low.describe(plan))
}

#[cfg(not(feature = "cuda"))]
fn cuda_submission(_: &Path, _: &file::GraphFile, _: &Plan, _: &ExecOptions) -> Result<String, RuntimeError> {
    Err(RuntimeError::Backend { name: "cuda".into(), reason: "this build of Ostinato does not contain it (cargo feature `cuda`)".into() })
}
