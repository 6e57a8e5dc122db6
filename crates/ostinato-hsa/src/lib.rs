//! Ostinato's AMD backend over the public ROCr/HSA queue ABI.
//!
//! A [`Plan`](ostinato::Plan) becomes an AQL program ([`lower`], pure and golden-tested): one queue
//! per plan lane, kernel-dispatch packets with the barrier bit where a lane needs order, barrier-AND
//! packets on completion signals where an edge crosses lanes, acquire and release fence scopes from
//! the hazards. [`HsaExec`] keeps the packets built once and replays them by copying them into the
//! queues' rings (each header published last, with release order), ringing each doorbell once;
//! slots are patched in kernarg memory, double-buffered so a replay can be prepared while the last
//! one runs. The built-in kernels are code objects compiled by clang for gfx10/11/12 from
//! `kernels/amdgpu/ostinato.cl`; every kernel's argument metadata is checked against its signature.
//!
//! The HSA runtime (`libhsa-runtime64.so.1`) is loaded at run time behind the [`HsaApi`] trait, so
//! everything builds and tests without ROCm. This backend is built to the public ABI and proven in CI
//! against a simulated packet processor (the `ostinato-aql-sim` test tool); it has not yet run on an
//! AMD GPU (docs/hsa.md says what would be measured first).

pub mod abi;
pub mod api;
mod backend;
pub mod builtins;
pub mod codeobject;
mod error;
mod exec;
mod kernarg;
pub mod lower;
pub mod order;
pub mod program;
mod ring;
pub mod rocr;

pub use api::{AgentInfo, DevicePtr, Executable, HsaApi, KernelSymbol, QueueInfo, Signal};
pub use backend::{HsaBackend, HsaKernel, HsaMemory};
pub use error::HsaError;
pub use exec::{HsaExec, DEFAULT_WAIT_TIMEOUT};
pub use program::AqlProgram;
