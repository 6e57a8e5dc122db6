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
    #[error("NCCL unavailable: {0}")]
    NcclMissing(String),
    #[error("{op} failed: {name} ({code})")]
    Nccl { op: &'static str, code: i32, name: String },
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
    #[error(transparent)]
    Prefetch(#[from] crate::lower::PrefetchRace),
    #[error("{op}: {reason}")]
    Usage { op: &'static str, reason: String },
    /// `wait` gave up on work that did not finish in time (a kernel that never ends, or one far
    /// slower than the deadline allows). The exec is faulted: it refuses every later call.
    #[error("{exec}: the replays did not finish within {ms} ms (CudaOptions::wait_timeout); the exec is faulted and refuses further use")]
    Timeout { exec: String, ms: u128 },
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
    /// True for an error after which the CUDA context of the process is unusable (a kernel trapped,
    /// faulted on memory, or the launch failed): the driver returns it from every later call.
    pub fn is_sticky(&self) -> bool {
        matches!(self, CudaError::Driver { name, .. } if STICKY.contains(&name.as_str()))
    }

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

/// The driver's errors that leave the context unusable ("sticky"), by name.
const STICKY: &[&str] = &[
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
];
