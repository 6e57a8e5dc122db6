//! What the runtime needs of each backend beyond the core's [`Backend`] trait: its name, what it does
//! with a host function or captured CUDA work as a kernel, how it instantiates (CUDA: on a user's stream where one was
//! given), and what it tells a user about the exec it made. One impl per backend; the instantiate path
//! itself is generic (`session.rs`).

use ostinato::{Backend, BufferBinding, KernelSig, Plan};
use ostinato_host::{HostBackend, HostKernel};

use crate::error::RuntimeError;
use crate::exec::BackendMemory;
use crate::kind::BackendKind;

/// A backend the runtime drives.
pub(crate) trait RuntimeBackend: Backend<Memory: BackendMemory, Exec: Send + 'static> {
    const KIND: BackendKind;
    /// A host function the caller made as the implementation of `sig`: only the host backend runs one.
    fn host_kernel(&self, sig: &KernelSig, _h: HostKernel) -> Result<Self::Kernel, RuntimeError> {
        Err(RuntimeError::Backend {
            name: Self::KIND.as_str().into(),
            reason: format!("kernel `{}` is a host function; the {} backend needs an implementation of its own kind", sig.name, Self::KIND),
        })
    }
    /// Captured CUDA work as the implementation of `sig`: only the CUDA backend runs it.
    #[cfg(feature = "cuda")]
    fn captured_kernel(&self, sig: &KernelSig, work: &ostinato_cuda::CapturedWork) -> Result<Self::Kernel, RuntimeError> {
        Err(RuntimeError::Backend {
            name: Self::KIND.as_str().into(),
            reason: format!(
                "kernel `{}` is captured CUDA work (`{}`); the {} backend needs an implementation of its own kind",
                sig.name,
                work.label(),
                Self::KIND
            ),
        })
    }
    /// Instantiates (by default [`Backend::instantiate`]).
    fn instantiate_exec(&self, plan: &Plan, kernels: Vec<Self::Kernel>, buffers: Vec<BufferBinding<Self::Memory>>) -> Result<Self::Exec, Self::Error> {
        self.instantiate(plan, kernels, buffers)
    }
    /// What the backend chose that a user may want to know.
    fn notes(&self, exec: &Self::Exec, plan: &Plan) -> Vec<String>;
}

impl RuntimeBackend for HostBackend {
    const KIND: BackendKind = BackendKind::Host;
    fn host_kernel(&self, sig: &KernelSig, h: HostKernel) -> Result<HostKernel, RuntimeError> {
        h.check_signature(sig).map_err(|reason| ostinato_host::HostError::Bind(ostinato::BindError::Signature { kernel: sig.name.clone(), reason }))?;
        Ok(h)
    }
    fn notes(&self, exec: &ostinato_host::HostExec, _: &Plan) -> Vec<String> {
        exec.inline_reason().map(|why| format!("host: replays run on the calling thread ({why})")).into_iter().collect()
    }
}

/// The CUDA backend, with the user's stream the execs replay on where one was given.
#[cfg(feature = "cuda")]
pub(crate) struct CudaOnStream {
    pub backend: ostinato_cuda::CudaBackend,
    pub stream: Option<ostinato_cuda::ExternalStream>,
}

#[cfg(feature = "cuda")]
impl Backend for CudaOnStream {
    type Kernel = ostinato_cuda::CudaKernel;
    type Memory = ostinato_cuda::DeviceMemory;
    type Exec = ostinato_cuda::CudaExec;
    type Error = ostinato_cuda::CudaError;
    fn name(&self) -> &'static str {
        self.backend.name()
    }
    fn bind_kernel(&self, sig: &KernelSig, reference: &ostinato::KernelRef) -> Result<Self::Kernel, Self::Error> {
        self.backend.bind_kernel(sig, reference)
    }
    fn instantiate(&self, plan: &Plan, kernels: Vec<Self::Kernel>, buffers: Vec<BufferBinding<Self::Memory>>) -> Result<Self::Exec, Self::Error> {
        match self.stream {
            Some(s) => self.backend.instantiate_on(plan, kernels, buffers, s),
            None => self.backend.instantiate(plan, kernels, buffers),
        }
    }
}

#[cfg(feature = "cuda")]
impl RuntimeBackend for CudaOnStream {
    const KIND: BackendKind = BackendKind::Cuda;
    fn captured_kernel(&self, sig: &KernelSig, work: &ostinato_cuda::CapturedWork) -> Result<Self::Kernel, RuntimeError> {
        Ok(self.backend.captured_kernel(sig, work)?)
    }
    fn notes(&self, exec: &ostinato_cuda::CudaExec, plan: &Plan) -> Vec<String> {
        let mut notes = vec![format!("{} programmatic edges", exec.programmatic_edges())];
        let candidates = exec.decisions().candidates;
        if candidates > 1 {
            notes.push(format!(
                "{candidates} submissions measured over at most the first {} replays, the fastest kept (--tune off: auto's alone)",
                ostinato_cuda::tuning_replays(candidates)
            ));
        }
        if exec.fused_nodes() > 0 {
            let launches = exec.run_plan().node_count();
            notes.push(format!("{} of {} nodes fused: {launches} launches per replay", exec.fused_nodes(), plan.node_count()));
        }
        let laps: Vec<(String, f64)> = exec.decisions().setup.into_iter().map(|(stage, t)| (stage, t.as_secs_f64() * 1e3)).collect();
        let total: f64 = laps.iter().map(|(_, ms)| ms).sum();
        notes.push(format!("instantiated in {total:.2} ms: {}", ostinato_cuda::setup_stage_list(&laps)));
        notes
    }
}

#[cfg(feature = "vulkan")]
impl RuntimeBackend for ostinato_vulkan::VulkanBackend {
    const KIND: BackendKind = BackendKind::Vulkan;
    fn notes(&self, exec: &ostinato_vulkan::VulkanExec, plan: &Plan) -> Vec<String> {
        let barriers = exec.commands().iter().filter(|c| matches!(c, ostinato_vulkan::commands::Cmd::Barrier { .. })).count();
        let mut notes = vec![format!("{barriers} barriers for {} edges, on {}", plan.edges().len(), exec.device_name())];
        let dispatches = exec.run_plan().graph().nodes().iter().filter(|n| matches!(n.op, ostinato::NodeOp::Kernel { .. })).count();
        if dispatches > 0 {
            notes.push(format!(
                "{} of {dispatches} kernel dispatches run their kernel as written (every slice at a binding boundary; fused dispatches and slices off a boundary add an element offset to each index)",
                exec.as_written_dispatches()
            ));
        }
        if exec.fused_nodes() > 0 {
            notes.push(format!(
                "{} of {} nodes fused: {} dispatches per replay, {} barriers between fused bodies",
                exec.fused_nodes(),
                plan.node_count(),
                exec.run_plan().node_count(),
                exec.fused_barriers()
            ));
        }
        // Tile maps the backend could not keep (those nodes are ordered as wholes): the first few, why.
        let dropped: Vec<&ostinato_vulkan::MapUse> = exec.tile_maps().iter().filter(|m| m.kept.is_err()).collect();
        for m in dropped.iter().take(3) {
            let why = m.kept.as_ref().err().map_or("", String::as_str);
            notes.push(format!("node {} `{}`: tile map not kept, the node ordered as a whole ({why})", m.node.0, m.param));
        }
        if dropped.len() > 3 {
            notes.push(format!("{} more tile maps not kept", dropped.len() - 3));
        }
        if let Some(c) = exec.lane_counts() {
            notes.push(format!(
                "lanes on separate queues: {} vkQueueSubmit calls, {} batches and {} semaphore waits ({} across queues) per replay",
                c.queue_submits, c.batches, c.waits, c.cross_queue_waits
            ));
        }
        notes.extend(exec.lanes_fallback().map(str::to_string));
        notes
    }
}

#[cfg(feature = "hsa")]
impl RuntimeBackend for ostinato_hsa::HsaBackend {
    const KIND: BackendKind = BackendKind::Hsa;
    fn notes(&self, exec: &ostinato_hsa::HsaExec, plan: &Plan) -> Vec<String> {
        let (d, b, bits, acq, rel) = exec.program().counts();
        let simulated = if self.api().is_simulated() { " (simulated)" } else { "" };
        vec![format!(
            "{} AQL queues: {d} dispatch and {b} barrier-AND packets, {bits} barrier bits, {acq} acquire and {rel} release fences for {} edges{simulated}",
            exec.program().queues.len(),
            plan.edges().len()
        )]
    }
}
