//! The HSA backend's errors: each names what failed (the HSA call and its status, the kernel and its
//! code object, the node, the packet) and has a kind the shells map.

use ostinato::{BindError, ErrorKind, SlotError, UsageError};

#[derive(Debug, thiserror::Error)]
pub enum HsaError {
    /// No HSA runtime library could be opened.
    #[error("no HSA runtime found: {looked_for}")]
    NoRuntime { looked_for: String },
    /// The runtime has no GPU agent, or none matches the selector.
    #[error("no HSA GPU agent {selector}: {found}")]
    NoDevice { selector: String, found: String },
    /// An HSA call returned an error status.
    #[error("{call} failed: {name} ({status:#x})")]
    Status { call: &'static str, status: u32, name: String },
    #[error(transparent)]
    Bind(#[from] BindError),
    /// A code object, or a kernel in it, that does not fit its signature or this agent.
    #[error("kernel `{kernel}`: {reason}")]
    Kernel { kernel: String, reason: String },
    /// A code object that cannot be read.
    #[error("code object {what}: {reason}")]
    CodeObject { what: String, reason: String },
    #[error(transparent)]
    Slot(#[from] SlotError),
    #[error("{operation}: {source}")]
    Range { operation: &'static str, source: UsageError },
    /// The plan asks for something this backend or agent cannot do (a collective, a geometry past
    /// AQL's fields, a second device).
    #[error("{what}: {reason}")]
    Unsupported { what: String, reason: String },
    /// Not allowed now (a replay in flight, a faulted exec).
    #[error("{operation}: {reason}")]
    State { operation: &'static str, reason: String },
    /// A queue error, a packet the packet processor refused, or replays that missed their deadline:
    /// the exec is faulted.
    #[error("{0}")]
    Fault(String),
    /// Memory (host or device) could not be had.
    #[error("{operation}: {reason}")]
    OutOfMemory { operation: &'static str, reason: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl HsaError {
    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ErrorKind {
        match self {
            HsaError::NoRuntime { .. } | HsaError::NoDevice { .. } => ErrorKind::BackendMissing,
            HsaError::Status { .. } => ErrorKind::Runtime,
            HsaError::Bind(e) => e.kind(),
            HsaError::Kernel { .. } | HsaError::CodeObject { .. } => ErrorKind::Bind,
            HsaError::Slot(e) => e.kind(),
            HsaError::Range { source, .. } => source.kind(),
            HsaError::Unsupported { .. } => ErrorKind::Unsupported,
            HsaError::State { .. } => ErrorKind::State,
            HsaError::Fault(_) => ErrorKind::Fault,
            HsaError::OutOfMemory { .. } | HsaError::Io { .. } => ErrorKind::Io,
        }
    }
}
