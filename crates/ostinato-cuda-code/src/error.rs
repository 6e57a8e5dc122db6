//! Errors of reading kernel code: each carries the operation or the kernel it is about, and NVRTC's
//! own code with its name. The CUDA backend converts them into its `CudaError`, variant for variant
//! (the same messages and kinds).

use ostinato::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    /// No NVRTC library could be loaded: where it was looked for.
    #[error("NVRTC unavailable: {0}")]
    NvrtcMissing(String),
    /// An NVRTC call failed; `code` is NVRTC's own, `name` its name.
    #[error("{op} failed: {name} ({code})")]
    Nvrtc { op: &'static str, code: i32, name: String },
    /// NVRTC refused the source; `log` is its compile log.
    #[error("compiling `{source_name}` with NVRTC failed:\n{log}")]
    Compile { source_name: String, log: String },
    /// The kernel's code cannot be read against its signature (no such entry, another param count).
    #[error("kernel `{kernel}`: {reason}")]
    Kernel { kernel: String, reason: String },
    /// An argument out of its domain (a source with a NUL byte).
    #[error("{op}: {reason}")]
    Usage { op: &'static str, reason: String },
    /// A declaration the kernel's code contradicts, or cannot be checked against (the kernel contract).
    #[error(transparent)]
    Contract(Box<ostinato::contract::ContractError>),
}

impl CodeError {
    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CodeError::NvrtcMissing(_) => ErrorKind::BackendMissing,
            CodeError::Nvrtc { .. } => ErrorKind::Runtime,
            CodeError::Compile { .. } | CodeError::Kernel { .. } => ErrorKind::Bind,
            CodeError::Usage { .. } => ErrorKind::Argument,
            CodeError::Contract(e) => e.kind(),
        }
    }
}

impl From<ostinato::contract::ContractError> for CodeError {
    fn from(e: ostinato::contract::ContractError) -> Self {
        CodeError::Contract(Box::new(e))
    }
}

pub type Result<T> = std::result::Result<T, CodeError>;
