//! Ostinato's runtime: the one layer the shells (the CLI, and the C and Python bindings) call.
//!
//! A [`Session`] opens a backend by name ([`BackendKind`]); [`Session::instantiate`] binds each kernel
//! of a plan from its per-backend [`ostinato::KernelRef`] through the backend's own
//! [`ostinato::Backend::bind_kernel`], instantiates, and hands back an [`ExecHandle`]: one exec of any
//! backend, to replay, patch slots, rebind buffers, read and write. [`oracle`] runs the same plan in
//! the host's serial order and compares, bit for bit; [`run_file`] is what `ostinato run` does.
//!
//! ```
//! use ostinato::{Access, Arg, Graph, KernelRef, KernelSig, Launch, Plan, Scalar, ScalarType};
//! use ostinato_runtime::{BackendSpec, Session};
//!
//! let mut g = Graph::new();
//! let x = g.add_buffer("x", 1024).unwrap();
//! let add_one = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
//! let salt = g.add_slot("n", Scalar::u32(256)).unwrap();
//! for _ in 0..3 {
//!     g.add_launch(add_one, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Slot(salt)], &[]).unwrap();
//! }
//! let plan = Plan::compile(&g).unwrap();
//! let session = Session::open(&BackendSpec::host()).unwrap();
//! let mut exec = session.instantiate(&plan, &|_| Ok(KernelRef::builtin("add_one"))).unwrap();
//! exec.replay().unwrap();
//! exec.wait().unwrap();
//! let mut out = [0u8; 4];
//! exec.read_buffer(x, 0, &mut out).unwrap();
//! assert_eq!(f32::from_le_bytes(out), 3.0); // add_one adds 1.0 to each of the first n f32s
//! ```

#![deny(unsafe_code)]

mod backends;
pub mod contract;
pub mod devices;
mod error;
mod exec;
mod extents;
#[cfg(feature = "hsa")]
mod hsa;
pub mod kernels;
mod kind;
pub mod options;
pub mod oracle;
mod outputs;
mod report;
mod run;
mod session;
pub mod trace;

pub use error::RuntimeError;
pub use exec::NamedBuffers;
pub use exec::{ExecHandle, Memory};
pub use kind::BackendKind;
pub use options::{ExecOptions, WaitTimeout};
pub use oracle::{compare, host_serial};
pub use ostinato::PIECE;
pub use report::{plan_report, PlanReport};
pub use run::{dump, run_file, RunOptions, RunReport};
pub use session::{BackendSpec, KernelSource, Session};

/// The README's Rust example, compiled and run by `cargo test`.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeExample;

pub use ostinato;
#[cfg(feature = "cuda")]
pub use ostinato_cuda;
#[cfg(feature = "cuda")]
pub use ostinato_cuda_code;
pub use ostinato_host;
#[cfg(feature = "hsa")]
pub use ostinato_hsa;
#[cfg(feature = "vulkan")]
pub use ostinato_vulkan;
