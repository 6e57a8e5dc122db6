//! Ostinato's CUDA backend. It only translates a [`ostinato::Plan`]: one explicit CUDA graph built node
//! by node from the plan's edges (programmatic PDL edges where the measured policy says they pay), or
//! eager per-lane streams. The driver is loaded at run time through cudarc's `sys` layer; with no
//! driver every entry point returns [`CudaError::NoDriver`].

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

mod builtins;
pub mod captured;
pub mod compile;
pub mod contract;
pub mod cupti;
pub mod device;
mod dims;
mod error;
mod exec;
mod ffi;
pub mod fusion;
mod graph_build;
mod launch_thread;
pub mod limits;
mod loaded;
pub mod lower;
pub mod manifest;
pub mod module;
mod named;
pub mod nccl;
pub mod nvrtc;
pub mod nvtx;
mod options;
pub mod ptx;
pub mod sass;
pub mod user;
mod wheels;

pub use captured::CapturedWork;
pub use device::{Device, DeviceInfo, DeviceSelector};
pub use error::{CudaError, Result};
pub use exec::{CudaBackend, CudaExec, Decisions};
pub use fusion::FusionMode;
pub use limits::LaunchLimits;
pub use lower::{Dims, FullEdge, PdlMode, PdlPolicy, Variant};
pub use module::{BuiltinModules, CudaKernel, LoadedModule, ModuleSource, PdlTrigger};
pub use options::{CudaOptions, DeviceMemory, ExecMode, ExternalStream, GraphBuild, LaunchOn, StreamPriority, DEFAULT_WAIT_TIMEOUT};
pub use ostinato::Named;
pub use user::{DeviceBuffer, UserStream};

/// True when a CUDA driver library can be loaded and initialised.
pub fn driver_available() -> bool {
    device::driver_version().is_ok()
}
