//! The runtime's errors: each names what is wrong (file:line, kernel, buffer, backend).

/// An error of the runtime or of the backend under it.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    File(#[from] ostinato::file::FileError),
    #[error(transparent)]
    Plan(#[from] ostinato::PlanError),
    #[error(transparent)]
    Slot(#[from] ostinato::SlotError),
    /// A declaration the kernel's code contradicts, or an `infer` the code cannot settle.
    #[error(transparent)]
    Contract(Box<ostinato::contract::ContractError>),
    #[error("host backend: {0}")]
    Host(#[from] ostinato_host::HostError),
    #[cfg(feature = "cuda")]
    #[error("cuda backend: {0}")]
    Cuda(#[from] ostinato_cuda::CudaError),
    #[cfg(feature = "vulkan")]
    #[error("vulkan backend: {0}")]
    Vulkan(#[from] ostinato_vulkan::VkError),
    #[cfg(feature = "hsa")]
    #[error("hsa backend: {0}")]
    Hsa(#[from] ostinato_hsa::HsaError),
    /// A backend this build does not contain, or a name that is no backend.
    #[error("backend `{name}`: {reason}")]
    Backend { name: String, reason: String },
    /// Memory of one backend given to an exec of another.
    #[error("{operation}: memory of the {given} backend given to a {backend} exec")]
    WrongMemory { operation: &'static str, given: &'static str, backend: &'static str },
    /// A kernel with no implementation for the backend it is instantiated on.
    #[error("kernel `{kernel}` has no implementation for the {backend} backend")]
    NoImplementation { kernel: String, backend: &'static str },
    #[error("unknown {what} `{name}`")]
    UnknownName { what: &'static str, name: String },
    /// A built-in launch that would touch past its declared extent, or scalars out of its domain.
    #[error(transparent)]
    Builtin(#[from] ostinato::builtins::BuiltinError),
    /// A buffer or range the plan does not allow.
    #[error("{operation}: {source}")]
    Range { operation: &'static str, source: ostinato::UsageError },
    /// An exec option unknown, or set to a value it does not take.
    #[error("option `{option}`: {reason}")]
    Option { option: String, reason: String },
    /// `--check` found a byte that differs from the host's serial order.
    #[error("check failed: buffer `{buffer}` differs from the host oracle first at byte {byte} (want {want:#04x}, got {got:#04x})")]
    Mismatch { buffer: String, byte: usize, want: u8, got: u8 },
    /// `--check` found a buffer of another length than the host oracle's.
    #[error("check failed: buffer `{buffer}` has {got} bytes, the host oracle's {want}")]
    LengthMismatch { buffer: String, want: usize, got: usize },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// Host memory could not be had.
    #[error("{0}")]
    OutOfMemory(String),
    #[error("{0}")]
    Usage(String),
    /// Binding kernel `kernel` failed with an error that does not name it (a file its backend could
    /// not read): the message is the backend's; the kernel locates it (a graph file's line).
    #[error("{source}")]
    Binding { kernel: String, source: Box<RuntimeError> },
}

impl RuntimeError {
    /// The class of this failure: the C status and the Python exception class derive from it, never
    /// from the message.
    pub fn kind(&self) -> ostinato::ErrorKind {
        use ostinato::ErrorKind as K;
        match self {
            RuntimeError::File(_) => K::File,
            RuntimeError::Plan(e) => e.kind(),
            RuntimeError::Slot(e) => e.kind(),
            RuntimeError::Contract(e) => e.kind(),
            RuntimeError::Host(e) => e.kind(),
            #[cfg(feature = "cuda")]
            RuntimeError::Cuda(e) => e.kind(),
            #[cfg(feature = "vulkan")]
            RuntimeError::Vulkan(e) => e.kind(),
            RuntimeError::Range { source, .. } => source.kind(),
            RuntimeError::Builtin(e) => e.kind(),
            #[cfg(feature = "hsa")]
            RuntimeError::Hsa(e) => e.kind(),
            RuntimeError::Backend { .. } => K::BackendMissing,
            RuntimeError::WrongMemory { .. } | RuntimeError::UnknownName { .. } | RuntimeError::Option { .. } | RuntimeError::Usage(_) => K::Argument,
            RuntimeError::NoImplementation { .. } => K::Bind,
            RuntimeError::Mismatch { .. } | RuntimeError::LengthMismatch { .. } => K::Mismatch,
            RuntimeError::Io { .. } | RuntimeError::OutOfMemory(_) => K::Io,
            RuntimeError::Binding { source, .. } => source.kind(),
        }
    }
}

impl From<ostinato::contract::ContractError> for RuntimeError {
    fn from(e: ostinato::contract::ContractError) -> Self {
        RuntimeError::Contract(Box::new(e))
    }
}
