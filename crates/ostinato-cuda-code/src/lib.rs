//! Ostinato's reading of NVIDIA kernel code, with no driver session: what the kernel contract
//! (docs/contract.md) needs to know of a kernel's code before, or without, any device loads it.
//!
//! - [`ptx`]: the PTX parser and its analyses (access per param, the pre-wait certificate, the
//!   fused-body verdict), built on one address-provenance (taint) analysis;
//! - [`sass`]: the machine code as the toolkit's `nvdisasm` prints it (the certificate of a `.cubin`
//!   declared PDL-capable, and which loads really precede the wait);
//! - [`nvrtc`] (NVRTC loaded at run time) and [`compile`] (its on-disk cache, the build variants
//!   [`PdlTrigger`] and Ostinato's kernel header [`KERNEL_HEADER`]);
//! - [`cubin`]: an entry's params as its cubin's ELF declares them;
//! - [`contract`]: a kernel's code read against its declared signature ([`contract::KernelReport`]);
//! - [`tilemaps`]: each launch's per-block tile maps checked against its kernel's PTX;
//! - [`manifest`]: the parts of a kernel's build manifest that come from its code.
//!
//! The CUDA backend (`ostinato-cuda`) reads the code it loads through this crate; so can a tool that
//! meets code it did not compile (an interposer adopting an application's own CUDA graphs). Nothing
//! here loads the CUDA driver.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

pub mod compile;
pub mod contract;
pub mod cubin;
mod error;
pub mod manifest;
pub mod nvrtc;
pub mod ptx;
pub mod sass;
pub mod tilemaps;

pub use compile::{PdlTrigger, KERNEL_HEADER};
pub use error::{CodeError, Result};
