//! Captured work as a kernel's implementation: a CUDA graph the program captured itself (a library's
//! calls, a framework's ops) bound like any kernel and run in the exec as a child-graph node — graph
//! mode adds a copy of it with the node's edges; eager mode launches an instance of it on the node's
//! lane. The node's access is what its signature declares (every param a buffer, declared and
//! vouched: there is no code to read), and its edges are full: captured work never waits on a
//! programmatic edge. Its addresses are baked into the captured graph, so the buffers it touches
//! cannot be rebound.

use std::any::Any;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUgraphNodeType;
use ostinato::{AccessDecl, KernelSig, ParamKind};

use crate::error::{CudaError, Result};
use crate::ffi::{Graph, GraphExec, GraphNode, Stream};
use ostinato_cuda_code::contract::{self, KernelReport};

/// What keeps captured work's memory alive: held for as long as any exec runs the work.
pub type Owner = Arc<dyn Any + Send + Sync>;

/// A CUDA graph the program captured, to bind as a kernel's implementation
/// ([`crate::CudaBackend::captured_kernel`]).
#[derive(Clone)]
pub struct CapturedWork {
    graph: u64,
    owner: Owner,
    label: String,
}

impl std::fmt::Debug for CapturedWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapturedWork({}, {:#x})", self.label, self.graph)
    }
}

impl CapturedWork {
    /// The captured graph `graph` (a `CUgraph`), named `label` in messages; `owner` keeps alive what
    /// its nodes use (the memory its kernels address, the graph itself).
    ///
    /// # Safety
    /// `graph` must be a live `CUgraph` captured on the device the work is bound on (its primary
    /// context), left unmodified and used by no other thread while a backend binds the work, and valid
    /// for as long as `owner` lives; every address its nodes use must stay allocated while `owner`
    /// lives. The backend copies the graph when it binds; it cannot check what the graph touches.
    // `unsafe` states the caller's promise; the function itself performs no unsafe operation.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw(graph: u64, owner: Owner, label: &str) -> CapturedWork {
        CapturedWork { graph, owner, label: label.to_string() }
    }
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Captured work as bound: the backend's own copy of the graph, and what keeps its memory alive.
pub struct CapturedGraph {
    /// Graph objects are not synchronised by the driver: one thread at a time copies from it.
    graph: Mutex<Graph>,
    /// How many nodes it holds.
    pub nodes: usize,
    pub label: String,
    _owner: Owner,
}

impl std::fmt::Debug for CapturedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapturedGraph({}, {} nodes)", self.label, self.nodes)
    }
}

impl CapturedGraph {
    /// A copy of `work`'s graph, refused where a child graph cannot hold it (a node that allocates or
    /// frees memory: the driver allows none in a child graph).
    pub(crate) fn bind(work: &CapturedWork, kernel: &str) -> Result<CapturedGraph> {
        let refuse = |reason: String| CudaError::Kernel { kernel: kernel.to_string(), reason };
        let graph = Graph::clone_of(work.graph).map_err(|e| e.at(format!("captured work `{}` of kernel `{kernel}`", work.label)))?;
        let types = graph.node_types()?;
        let (alloc, free) = (CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_ALLOC as u32, CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_FREE as u32);
        if let Some(&t) = types.iter().find(|&&t| t == alloc || t == free) {
            return Err(refuse(format!(
                "captured work `{}` holds a memory {} node: captured work may not allocate or free memory (a child graph cannot hold it)",
                work.label,
                if t == alloc { "allocation" } else { "free" }
            )));
        }
        Ok(CapturedGraph { graph: Mutex::new(graph), nodes: types.len(), label: work.label.clone(), _owner: work.owner.clone() })
    }
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Adds a copy of the work to `parent` after `deps` (full edges).
    pub(crate) fn add_to(&self, parent: &mut Graph, deps: &[GraphNode]) -> Result<GraphNode> {
        parent.add_child(&self.graph(), deps).map_err(|e| e.at(format!("captured work `{}`", self.label)))
    }
    /// An instance of the work of its own (eager mode launches it on a lane), uploaded on `stream`.
    pub(crate) fn instance(&self, stream: &Stream) -> Result<GraphExec> {
        let exec = self.graph().instantiate().map_err(|e| e.at(format!("captured work `{}`", self.label)))?;
        exec.upload(stream)?;
        Ok(exec)
    }
}

/// What the contract records of captured work: no code to read, so every param's access is unknown
/// and must be declared and vouched for; the declarations are checked against that (a param declared
/// `infer`, or a scalar, is refused naming it).
pub(crate) fn report(sig: &KernelSig, captured: &CapturedGraph) -> Result<KernelReport> {
    let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
    for p in &sig.params {
        match (&p.kind, p.decl) {
            (ParamKind::Scalar(_), _) => {
                return Err(refuse(format!("param `{}` is a scalar: captured work takes no arguments (its values are in the captured graph)", p.name)))
            }
            (ParamKind::Buffer(_), AccessDecl::Infer) => {
                return Err(refuse(format!("param `{}` is declared `infer`, but captured work has no code to read: declare its access", p.name)))
            }
            _ => {}
        }
    }
    let code = format!("captured work `{}` ({} graph nodes)", captured.label, captured.nodes);
    let access = contract::unread(sig, &code, "captured work: its access is what the node declares");
    let mut report =
        KernelReport { code, access, broader: Vec::new(), pre_wait: Err("captured work never waits".into()), noncoherent: Vec::new(), target: None };
    contract::verify(sig, &mut report)?;
    Ok(report)
}
