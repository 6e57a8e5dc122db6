//! Errors of the CUDA backend: each carries the operation, the node or kernel where one is involved, and
//! the raw driver/NVRTC code with its name. Reading kernel code fails with
//! [`ostinato_cuda_code::CodeError`], which converts into the variant of the same message and kind.

use cudarc::driver::sys::CUresult;
use ostinato::{BindError, ErrorKind, SlotError, UsageError};

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver found (libcuda.so could not be loaded); the CUDA backend is unavailable")]
    NoDriver,
    /// A driver call failed; `result` is the driver's own code.
    #[error("{op} failed: {name} ({}){}", *.result as u32, context_suffix(.context))]
    Driver { op: &'static str, result: CUresult, name: String, context: String },
    /// The driver library loaded but `cuInit` failed (no device, a driver/kernel-module mismatch).
    #[error("cuInit failed: {0}")]
    Init(String),
    #[error("{op} needs a CUDA driver of version {needed} or newer; this driver is {found}")]
    DriverTooOld { op: &'static str, needed: i32, found: i32 },
    #[error("no CUDA device matches `{0}`")]
    NoDevice(String),
    #[error("NVRTC unavailable: {0}")]
    NvrtcMissing(String),
    #[error("NCCL unavailable: {0}")]
    NcclMissing(String),
    /// CUPTI (the profiling library a trace needs) is not there: where it was looked for.
    #[error("CUPTI unavailable, so replays cannot be traced: {0}")]
    CuptiMissing(String),
    /// A CUPTI call failed (`code`, named).
    #[error("{op} failed: {name} ({code})")]
    Cupti { op: &'static str, code: i32, name: String },
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
    /// A declaration the kernel's code contradicts, or cannot be checked against (the kernel contract).
    #[error(transparent)]
    Contract(Box<ostinato::contract::ContractError>),
    /// A launch's tile map its kernel's code contradicts, or that it cannot verify on a param not
    /// declared `vouched` (docs/contract.md, "Tile maps").
    #[error(transparent)]
    TileMap(Box<ostinato_cuda_code::tilemaps::TileError>),
    /// An argument out of its domain (an option, a name, a stream of another context).
    #[error("{op}: {reason}")]
    Usage { op: &'static str, reason: String },
    /// A buffer, range or device placement the plan does not allow.
    #[error("{op}: {source}")]
    Range { op: &'static str, source: UsageError },
    /// A call not allowed now: a replay in flight, a faulted exec, an exec being dropped.
    #[error("{op}: {reason}")]
    State { op: &'static str, reason: String },
    /// The device or this exec's mode cannot do what was asked (a launch past the device's limits,
    /// a fused kernel past the shared memory a block has, a graph asked of an eager exec).
    #[error("{op}: {reason}")]
    Unsupported { op: &'static str, reason: String },
    /// An invariant of Ostinato's own broke (a bug: please report it).
    #[error("{op}: internal error: {reason}")]
    Internal { op: &'static str, reason: String },
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
        matches!(self, CudaError::Driver { result, .. } if STICKY.contains(result))
    }

    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CudaError::NoDriver
            | CudaError::Init(_)
            | CudaError::NoDevice(_)
            | CudaError::NvrtcMissing(_)
            | CudaError::NcclMissing(_)
            | CudaError::CuptiMissing(_) => ErrorKind::BackendMissing,
            CudaError::DriverTooOld { .. } | CudaError::Unsupported { .. } => ErrorKind::Unsupported,
            // Not supported here: insufficient privileges for profiling (27 not supported, 33 a
            // virtualised device, 35 privileges, 39 another profiler subscribed).
            CudaError::Cupti { code: 27 | 33 | 35 | 39, .. } => ErrorKind::Unsupported,
            CudaError::Cupti { .. } => ErrorKind::Runtime,
            CudaError::Driver { result, .. } if *result == CUresult::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::Io,
            CudaError::Driver { .. } if self.is_sticky() => ErrorKind::Fault,
            CudaError::Driver { .. } | CudaError::Nccl { .. } | CudaError::Nvrtc { .. } | CudaError::Internal { .. } => ErrorKind::Runtime,
            CudaError::Compile { .. } | CudaError::Kernel { .. } | CudaError::Prefetch(_) => ErrorKind::Bind,
            CudaError::Contract(e) => e.kind(),
            CudaError::TileMap(e) => e.kind(),
            CudaError::Bind(e) => e.kind(),
            CudaError::Slot(e) => e.kind(),
            CudaError::Usage { .. } => ErrorKind::Argument,
            CudaError::Range { source, .. } => source.kind(),
            CudaError::State { .. } => ErrorKind::State,
            CudaError::Timeout { .. } => ErrorKind::Fault,
            CudaError::Io { .. } => ErrorKind::Io,
        }
    }

    /// Adds context (a node, a kernel, a buffer) to a driver error.
    pub fn at(self, context: impl Into<String>) -> Self {
        match self {
            CudaError::Driver { op, result, name, context: old } => {
                let c = context.into();
                CudaError::Driver { op, result, name, context: if old.is_empty() { c } else { format!("{c}; {old}") } }
            }
            other => other,
        }
    }
}

pub type Result<T> = std::result::Result<T, CudaError>;

/// The driver's errors that leave the context unusable ("sticky"): it returns them from every later call.
const STICKY: &[CUresult] = &[
    CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
    CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
    CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
    CUresult::CUDA_ERROR_INVALID_PC,
    CUresult::CUDA_ERROR_LAUNCH_FAILED,
    CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
    CUresult::CUDA_ERROR_ASSERT,
    CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
];

/// Reading kernel code failed: the same failure, with the same message and kind, as the backend's own.
impl From<ostinato_cuda_code::CodeError> for CudaError {
    fn from(e: ostinato_cuda_code::CodeError) -> Self {
        use ostinato_cuda_code::CodeError;
        match e {
            CodeError::NvrtcMissing(why) => CudaError::NvrtcMissing(why),
            CodeError::Nvrtc { op, code, name } => CudaError::Nvrtc { op, code, name },
            CodeError::Compile { source_name, log } => CudaError::Compile { source_name, log },
            CodeError::Kernel { kernel, reason } => CudaError::Kernel { kernel, reason },
            CodeError::Usage { op, reason } => CudaError::Usage { op, reason },
            CodeError::Contract(e) => CudaError::Contract(e),
        }
    }
}

impl From<ostinato_cuda_code::tilemaps::TileError> for CudaError {
    fn from(e: ostinato_cuda_code::tilemaps::TileError) -> Self {
        CudaError::TileMap(Box::new(e))
    }
}

impl From<ostinato::contract::ContractError> for CudaError {
    fn from(e: ostinato::contract::ContractError) -> Self {
        CudaError::Contract(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::contract::{ContractError, Evidence};
    use ostinato_cuda_code::CodeError;

    /// Every failure of reading kernel code reaches the shells as the backend's own: the same message,
    /// the same kind (shells map kinds), the variant callers match.
    #[test]
    fn code_errors_keep_their_message_and_kind_in_the_backend() {
        let evidence = Box::new(Evidence { instruction: "st.global.u32".into(), at: "k.cu:3".into() });
        let contradicted = || ContractError::Contradicted {
            kernel: "k".into(),
            param: "x".into(),
            declared: "read",
            code: "k.cu (PTX)".into(),
            verb: "writes",
            evidence: evidence.clone(),
        };
        let cases = [
            CodeError::NvrtcMissing("libnvrtc not found".into()),
            CodeError::Nvrtc { op: "nvrtcVersion", code: 7, name: "NVRTC_ERROR_INTERNAL_ERROR".into() },
            CodeError::Compile { source_name: "k.cu".into(), log: "error: undefined".into() },
            CodeError::Kernel { kernel: "k".into(), reason: "no `.entry k`".into() },
            CodeError::Usage { op: "nvrtcCreateProgram", reason: "source has a NUL byte".into() },
            CodeError::from(contradicted()),
        ];
        for e in cases {
            let (message, kind) = (e.to_string(), e.kind());
            let c = CudaError::from(e);
            assert_eq!((c.to_string(), c.kind()), (message.clone(), kind), "{message}");
        }
        let c = CudaError::from(CodeError::from(contradicted()));
        assert!(matches!(&c, CudaError::Contract(e) if **e == contradicted()), "{c}");
        let c = CudaError::from(CodeError::Kernel { kernel: "k".into(), reason: "r".into() });
        assert!(matches!(&c, CudaError::Kernel { kernel, .. } if kernel == "k"), "{c}");
        assert_eq!(CudaError::from(CodeError::NvrtcMissing(String::new())).kind(), ErrorKind::BackendMissing);
        assert_eq!(CudaError::from(CodeError::Compile { source_name: String::new(), log: String::new() }).kind(), ErrorKind::Bind);
    }
}
