//! Errors of the CUDA backend: each carries the operation, the node or kernel where one is involved, and
//! the raw driver/NVRTC code with its name.

use ostinato::{BindError, SlotError};

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver found (libcuda.so could not be loaded); the CUDA backend is unavailable")]
    NoDriver,
    #[error("{op} failed: {name} ({code}){}", context_suffix(.context))]
    Driver { op: &'static str, code: u32, name: String, context: String },
    #[error("{op} needs a CUDA driver of version {needed} or newer; this driver is {found}")]
    DriverTooOld { op: &'static str, needed: i32, found: i32 },
    #[error("no CUDA device matches `{0}`")]
    NoDevice(String),
    #[error("NVRTC unavailable: {0}")]
    NvrtcMissing(String),
    #[error("{op} failed: {name} ({code})")]
    Nvrtc { op: &'static str, code: i32, name: String },
    #[error("compiling `{source_name}` with NVRTC failed:\n{log}")]
    Compile { source_name: String, log: String },
    #[error("kernel `{kernel}`: {reason}")]
    Kernel { kernel: String, reason: String },
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Slot(#[from] SlotError),
    #[error("{op}: {reason}")]
    Usage { op: &'static str, reason: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

fn context_suffix(c: &str) -> String {
    if c.is_empty() {
        String::new()
    } else {
        format!(" [{c}]")
    }
}

impl CudaError {
    /// Adds context (a node, a kernel, a buffer) to a driver error.
    pub fn at(self, context: impl Into<String>) -> Self {
        match self {
            CudaError::Driver { op, code, name, context: old } => {
                let c = context.into();
                CudaError::Driver { op, code, name, context: if old.is_empty() { c } else { format!("{c}; {old}") } }
            }
            other => other,
        }
    }
}

pub type Result<T> = std::result::Result<T, CudaError>;
