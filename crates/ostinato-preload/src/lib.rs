//! Ostinato's interposer of an application's own CUDA graphs (`LD_PRELOAD=libostinato_preload.so`).
//!
//! It reaches the driver the way cudart does (docs/adoption.md): it wraps `dlsym`, hands out a
//! wrapped `cuGetProcAddress`, and wraps the entry points it needs by (name, version, flags). It
//! keeps every code image the process loads ([`store`], [`fatbin`], [`image`]), reads each graph back
//! when it is instantiated ([`readback`] into a [`model`]: nodes, edges with their PDL flag, each
//! kernel's params, the device pointers in them ([`scan`]) and what its code does to each
//! ([`code`])), and decides whether Ostinato could replay it ([`decide`]). This version observes: it
//! always calls the real instantiate and launch, and writes the decision to its log ([`log`]).
//!
//! Only [`ffi`] holds unsafe code (the C entry points, the real driver calls); everything else is
//! plain Rust over the read-back model and runs in tests without a GPU.

#![deny(unsafe_code)]

pub mod adopt;
pub mod code;
pub mod decide;
pub mod error;
pub mod fatbin;
#[allow(unsafe_code)]
pub mod ffi;
pub mod image;
pub mod log;
pub mod model;
pub mod readback;
pub mod scan;
pub mod state;
pub mod store;
pub mod triton_cache;
