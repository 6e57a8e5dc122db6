//! Ostinato's CUDA backend. It only translates a [`ostinato::Plan`]: one explicit CUDA graph built node
//! by node from the plan's edges (programmatic PDL edges where the measured policy says they pay), or
//! eager per-lane streams. The driver is loaded at run time through cudarc's `sys` layer; with no
//! driver every entry point returns [`CudaError::NoDriver`]. What the backend reads of a kernel's code
//! (PTX, SASS, NVRTC and its cache, the contract's analyses) is `ostinato-cuda-code`'s, which needs no
//! driver session; this crate adds what a loaded module and the built-in kernels need.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

mod builtins;
pub mod captured;
pub mod contract;
pub mod cupti;
pub mod device;
mod dims;
mod error;
mod exec;
mod ffi;
pub mod fusion;
mod graph_build;
pub mod handoff;
mod launch_thread;
pub mod limits;
mod loaded;
pub mod lower;
pub mod manifest;
pub mod module;
mod named;
pub mod nccl;
pub mod nvtx;
mod options;
pub mod user;
mod wheels;

pub use captured::CapturedWork;
pub use device::{Device, DeviceInfo, DeviceSelector};
pub use error::{CudaError, Result};
pub use exec::{
    setup_stage_list, tuning_replays, CudaBackend, CudaExec, Decisions, EdgeTypesRule, Tune, Tuned, CONFIRM_REPLAYS, CUPTI_ORDER_SLACK_NS, PDL_MARGIN,
    TUNE_MARGIN, TUNE_SAMPLES,
};
pub use fusion::FusionMode;
pub use handoff::HandoffMode;
pub use limits::LaunchLimits;
pub use lower::{Dims, FullEdge, PdlMode, PdlPolicy, Variant};
pub use module::{BuiltinModules, CudaKernel, LoadedModule, ModuleSource};
// The build variants: the type of `CudaOptions::trigger`.
pub use options::{CudaOptions, DeviceMemory, ExecMode, ExternalStream, GraphBuild, LaunchOn, StreamPriority, TileStaging, DEFAULT_WAIT_TIMEOUT};
pub use ostinato::Named;
pub use ostinato_cuda_code::PdlTrigger;
pub use user::{DeviceBuffer, UserStream};

/// True when a CUDA driver library can be loaded and initialised.
pub fn driver_available() -> bool {
    device::driver_version().is_ok()
}
