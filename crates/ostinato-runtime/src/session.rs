//! Opening a backend by name, and instantiating a plan on it with every kernel bound from its
//! reference.

use ostinato::file::GraphFile;
use ostinato::{BufferBinding, KernelRef, Plan};
use ostinato_host::HostBackend;

use crate::backends::RuntimeBackend;
use crate::error::RuntimeError;
use crate::exec::{BackendMemory, ExecHandle, Memory, Wrapped};
use crate::kind::BackendKind;

/// Where a kernel's implementation comes from.
#[derive(Clone, Debug)]
pub enum KernelSource {
    /// A reference the backend binds (`builtin:NAME`, a file).
    Ref(KernelRef),
    /// A host function the caller made (host backend only).
    Host(ostinato_host::HostKernel),
    /// Work the caller captured into a CUDA graph (CUDA only): a child-graph node with the access its
    /// signature declares (`ostinato_cuda::captured`).
    #[cfg(feature = "cuda")]
    Captured(ostinato_cuda::CapturedWork),
}

/// What to open: a backend and its settings.
#[derive(Clone, Debug)]
pub enum BackendSpec {
    /// `threads: None`: one worker per core where the plan can use them; `Some(0)`: serial on the
    /// calling thread. `check_races`: the happens-before race checker fails a replay that races.
    Host { threads: Option<usize>, check_races: bool },
    /// `device`: an ordinal, `GPU-<uuid>` or PCI bus id (default: `OSTINATO_DEVICE`, else 0);
    /// `stream`: replay on a stream the user owns instead of the exec's own.
    #[cfg(feature = "cuda")]
    Cuda { device: Option<String>, options: ostinato_cuda::CudaOptions, stream: Option<ostinato_cuda::ExternalStream> },
    /// `device`: an index, a UUID or part of a name (default: `OSTINATO_VK_DEVICE`, else the best
    /// device with a compute queue, a discrete GPU first); `options`: queues, fusion, replay ordering,
    /// wait deadline.
    #[cfg(feature = "vulkan")]
    Vulkan { device: Option<String>, options: ostinato_vulkan::VulkanOptions },
    /// `device`: an index among the GPU agents, a UUID, a PCI bus id or an ISA name (default:
    /// `OSTINATO_HSA_DEVICE`, else the first); `simulate: Some(seed)` runs on the simulated AQL packet
    /// processor instead of ROCr (feature `hsa-sim`): every result is then a simulated one;
    /// `wait_timeout`: how long a wait may take before the exec is faulted (`None`: forever).
    #[cfg(feature = "hsa")]
    Hsa { device: Option<String>, simulate: Option<u64>, wait_timeout: Option<std::time::Duration> },
}

impl BackendSpec {
    /// The host backend with its defaults.
    pub fn host() -> BackendSpec {
        BackendSpec::Host { threads: None, check_races: false }
    }
    /// `kind` with its defaults; an error for a backend this build does not contain.
    pub fn default_for(kind: BackendKind) -> Result<BackendSpec, RuntimeError> {
        match kind {
            BackendKind::Host => Ok(Self::host()),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => Ok(BackendSpec::Cuda { device: None, options: Default::default(), stream: None }),
            #[cfg(not(feature = "cuda"))]
            BackendKind::Cuda => Err(not_built(kind)),
            #[cfg(feature = "vulkan")]
            BackendKind::Vulkan => Ok(BackendSpec::Vulkan { device: None, options: Default::default() }),
            #[cfg(not(feature = "vulkan"))]
            BackendKind::Vulkan => Err(not_built(kind)),
            #[cfg(feature = "hsa")]
            BackendKind::Hsa => Ok(BackendSpec::Hsa { device: None, simulate: None, wait_timeout: Some(ostinato_hsa::DEFAULT_WAIT_TIMEOUT) }),
            #[cfg(not(feature = "hsa"))]
            BackendKind::Hsa => Err(not_built(kind)),
        }
    }
    pub fn kind(&self) -> BackendKind {
        match self {
            BackendSpec::Host { .. } => BackendKind::Host,
            #[cfg(feature = "cuda")]
            BackendSpec::Cuda { .. } => BackendKind::Cuda,
            #[cfg(feature = "vulkan")]
            BackendSpec::Vulkan { .. } => BackendKind::Vulkan,
            #[cfg(feature = "hsa")]
            BackendSpec::Hsa { .. } => BackendKind::Hsa,
        }
    }
}

#[cfg(any(not(feature = "cuda"), not(feature = "vulkan"), not(feature = "hsa")))]
fn not_built(kind: BackendKind) -> RuntimeError {
    RuntimeError::Backend { name: kind.as_str().into(), reason: format!("this build of Ostinato does not contain it (cargo feature `{kind}`)") }
}

enum Opened {
    Host(HostBackend),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::backends::CudaOnStream>),
    #[cfg(feature = "vulkan")]
    Vulkan(ostinato_vulkan::VulkanBackend),
    /// The backend, and the simulator it runs on under `--simulate` (whose host twins a file registers).
    #[cfg(feature = "hsa")]
    #[cfg_attr(not(feature = "hsa-sim"), allow(dead_code))]
    Hsa(Box<ostinato_hsa::HsaBackend>, Option<crate::hsa::Simulator>),
}

/// An open backend: instantiates plans on it.
pub struct Session {
    opened: Opened,
    description: String,
}

impl Session {
    /// Opens the backend `spec` names (CUDA: loads the driver, selects the device, compiles or loads
    /// the built-in kernels through the cache).
    pub fn open(spec: &BackendSpec) -> Result<Session, RuntimeError> {
        match spec {
            BackendSpec::Host { threads, check_races } => {
                let backend = threads.map_or_else(|| HostBackend::auto(HostBackend::default_threads()), HostBackend::new).with_race_checker(*check_races);
                let description = format!("host: {} worker threads{}", backend.threads, if *check_races { ", race checker on" } else { "" });
                Ok(Session { opened: Opened::Host(backend), description })
            }
            #[cfg(feature = "cuda")]
            BackendSpec::Cuda { device, options, stream } => {
                use ostinato_cuda::{BuiltinModules, CudaBackend, Device, DeviceSelector, LaunchOn};
                let sel = match device {
                    Some(d) => DeviceSelector::parse(d)?,
                    None => DeviceSelector::from_env()?,
                };
                let dev = Device::open(&sel)?;
                let builtins = BuiltinModules::load(&dev, options.trigger)?;
                let backend = CudaBackend::with_builtins(&dev, &builtins, *options)?;
                let description = format!(
                    "device {} ({}), mode {}, pdl {}, fusion {}, launch from the {}{}",
                    dev.info().name,
                    dev.info().uuid,
                    options.mode.as_str(),
                    options.pdl.mode.as_str(),
                    options.fusion.as_str(),
                    match options.launch {
                        LaunchOn::Caller => "caller's thread".to_string(),
                        LaunchOn::Thread { spin } => format!("exec's launch thread (spins {} µs, then parks)", spin.as_micros()),
                    },
                    if stream.is_some() { ", on the user's stream" } else { "" }
                );
                Ok(Session { opened: Opened::Cuda(Box::new(crate::backends::CudaOnStream { backend, stream: *stream })), description })
            }
            #[cfg(feature = "vulkan")]
            BackendSpec::Vulkan { device, options } => {
                let selector = device.clone().or_else(|| std::env::var("OSTINATO_VK_DEVICE").ok());
                let ctx = ostinato_vulkan::Context::open_matching(selector.as_deref())?;
                let description = format!("vulkan device {}, fusion {}, replay ordering {}", ctx.name, options.fusion.as_str(), options.ordering.as_str());
                Ok(Session { opened: Opened::Vulkan(ostinato_vulkan::VulkanBackend::with_context(ctx).with_options(*options)), description })
            }
            #[cfg(feature = "hsa")]
            BackendSpec::Hsa { device, simulate, wait_timeout } => {
                let selector = device.clone().or_else(|| std::env::var("OSTINATO_HSA_DEVICE").ok());
                let (mut backend, sim) = crate::hsa::open(selector.as_deref(), *simulate)?;
                backend.wait_timeout = *wait_timeout;
                let description = format!("{}hsa agent {}", if simulate.is_some() { "simulated: " } else { "" }, backend.describe());
                Ok(Session { opened: Opened::Hsa(Box::new(backend), sim), description })
            }
        }
    }

    pub fn kind(&self) -> BackendKind {
        match &self.opened {
            Opened::Host(_) => BackendKind::Host,
            #[cfg(feature = "cuda")]
            Opened::Cuda(_) => BackendKind::Cuda,
            #[cfg(feature = "vulkan")]
            Opened::Vulkan(_) => BackendKind::Vulkan,
            #[cfg(feature = "hsa")]
            Opened::Hsa(..) => BackendKind::Hsa,
        }
    }

    /// One line on what was opened (device, mode, threads).
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// Instantiates `plan` with the exec's own memory for every buffer; `kernel_ref(k)` names kernel
    /// `k`'s implementation for this backend.
    pub fn instantiate(&self, plan: &Plan, kernel_ref: &dyn Fn(usize) -> Result<KernelRef, RuntimeError>) -> Result<Box<dyn ExecHandle>, RuntimeError> {
        self.instantiate_with(plan, kernel_ref, ostinato::allocate_all(plan))
    }

    /// Instantiates `plan` with `buffers[b]` binding buffer `b` (the exec's own memory, or the user's).
    /// Every kernel is bound before anything is allocated; on any error nothing is left alive.
    pub fn instantiate_with(
        &self,
        plan: &Plan,
        kernel_ref: &dyn Fn(usize) -> Result<KernelRef, RuntimeError>,
        buffers: Vec<BufferBinding<Memory>>,
    ) -> Result<Box<dyn ExecHandle>, RuntimeError> {
        self.instantiate_sources(plan, &|k| kernel_ref(k).map(KernelSource::Ref), buffers)
    }

    /// Like [`Session::instantiate_with`], with each kernel from a reference or from an implementation
    /// the caller made (a host function: `ostinato_host::HostKernel`, checked against the signature).
    pub fn instantiate_sources(
        &self,
        plan: &Plan,
        source: &dyn Fn(usize) -> Result<KernelSource, RuntimeError>,
        buffers: Vec<BufferBinding<Memory>>,
    ) -> Result<Box<dyn ExecHandle>, RuntimeError> {
        match &self.opened {
            Opened::Host(backend) => instantiate_on(backend, plan, source, buffers),
            #[cfg(feature = "cuda")]
            Opened::Cuda(backend) => instantiate_on(&**backend, plan, source, buffers),
            #[cfg(feature = "vulkan")]
            Opened::Vulkan(backend) => instantiate_on(backend, plan, source, buffers),
            #[cfg(feature = "hsa")]
            Opened::Hsa(backend, _) => instantiate_on(&**backend, plan, source, buffers),
        }
    }

    /// Instantiates a graph file's plan, each kernel bound from the file's reference for this backend
    /// (an error names the kernel and its line).
    pub fn instantiate_file(&self, file: &GraphFile, plan: &Plan) -> Result<Box<dyn ExecHandle>, RuntimeError> {
        let backend = self.kind().as_str();
        #[cfg(feature = "hsa-sim")]
        if let Opened::Hsa(_, Some(sim)) = &self.opened {
            crate::hsa::register_twins(sim, file, plan)?;
        }
        let kernel_ref = |k: usize| Ok(file.kernel_ref(k, backend)?.clone());
        self.instantiate(plan, &kernel_ref).map_err(|e| match e {
            RuntimeError::File(_) => e,
            other => match kernel_of(&other) {
                Some(k) => match plan.graph().kernels().iter().position(|s| s.name == k) {
                    Some(i) => RuntimeError::File(file.kernel_error(i, other.to_string())),
                    None => other,
                },
                None => other,
            },
        })
    }
}

/// Binds every kernel of `plan` on `backend` from its source, converts the bindings to the backend's
/// memory and instantiates: the one path every backend's exec is made by.
fn instantiate_on<B: RuntimeBackend>(
    backend: &B,
    plan: &Plan,
    source: &dyn Fn(usize) -> Result<KernelSource, RuntimeError>,
    buffers: Vec<BufferBinding<Memory>>,
) -> Result<Box<dyn ExecHandle>, RuntimeError>
where
    RuntimeError: From<B::Error>,
{
    let sigs = plan.graph().kernels();
    let mut builtin_of = Vec::with_capacity(sigs.len());
    let mut kernels = Vec::with_capacity(sigs.len());
    for (k, sig) in sigs.iter().enumerate() {
        let source = source(k)?;
        let builtin = match &source {
            KernelSource::Ref(r) => r.builtin_name().map(|_| r.entry_for(&sig.name).to_string()),
            _ => None,
        };
        // An aliasing declaration is a promise about the code, checked here for every backend: a
        // built-in orders none of its params' accesses.
        ostinato::builtins::check_aliasing(sig, builtin.as_deref())?;
        builtin_of.push(builtin);
        let bound = match source {
            KernelSource::Ref(r) => backend.bind_kernel(sig, &r).map_err(RuntimeError::from),
            KernelSource::Host(h) => backend.host_kernel(sig, h),
            #[cfg(feature = "cuda")]
            KernelSource::Captured(w) => backend.captured_kernel(sig, &w),
        };
        kernels.push(bound.map_err(|e| match kernel_of(&e) {
            Some(_) => e,
            None => RuntimeError::Binding { kernel: sig.name.clone(), source: Box::new(e) },
        })?);
    }
    let extents = crate::extents::BuiltinExtents::check_plan(plan, builtin_of)?;
    let buffers = buffers
        .into_iter()
        .map(|b| match b {
            BufferBinding::Allocate => Ok(BufferBinding::Allocate),
            BufferBinding::External(m) => <B::Memory as BackendMemory>::from_memory(m, "instantiate").map(BufferBinding::External),
        })
        .collect::<Result<Vec<_>, RuntimeError>>()?;
    let exec = backend.instantiate_exec(plan, kernels, buffers)?;
    let notes = backend.notes(&exec, plan);
    let slots = plan.graph().slots().iter().map(|s| s.initial).collect();
    Ok(Box::new(Wrapped { exec, kind: B::KIND, notes, extents, slots }))
}

/// The kernel an error of binding names, to point at its line in a graph file.
fn kernel_of(e: &RuntimeError) -> Option<&str> {
    match e {
        RuntimeError::Host(ostinato_host::HostError::Bind(ostinato::BindError::Signature { kernel, .. })) => Some(kernel),
        RuntimeError::Contract(e) => Some(e.kernel()),
        RuntimeError::Builtin(ostinato::builtins::BuiltinError::Alias { kernel, .. }) => Some(kernel),
        RuntimeError::Binding { kernel, .. } => Some(kernel),
        #[cfg(feature = "cuda")]
        RuntimeError::Cuda(ostinato_cuda::CudaError::Contract(e)) => Some(e.kernel()),
        #[cfg(feature = "vulkan")]
        RuntimeError::Vulkan(ostinato_vulkan::VkError::Contract(e)) => Some(e.kernel()),
        #[cfg(feature = "cuda")]
        RuntimeError::Cuda(ostinato_cuda::CudaError::Kernel { kernel, .. }) => Some(kernel),
        #[cfg(feature = "vulkan")]
        RuntimeError::Vulkan(ostinato_vulkan::VkError::Shader { kernel, .. }) => Some(kernel),
        #[cfg(feature = "hsa")]
        RuntimeError::Hsa(ostinato_hsa::HsaError::Kernel { kernel, .. }) => Some(kernel),
        _ => None,
    }
}
