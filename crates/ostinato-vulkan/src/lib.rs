//! Ostinato on Vulkan (any vendor): [`VulkanBackend`] and [`VulkanExec`] record a plan into one command
//! buffer once — a barrier only where a plan edge needs one, on the bytes its producers wrote
//! ([`commands`]) — and replay it with one submit, ordered after the previous replay as
//! [`ReplayOrdering`] says; slots live in a storage buffer the kernels read, so patching one
//! re-records nothing. Kernels are WGSL (the built-ins of `kernels/wgsl/`, or files) or SPIR-V files,
//! read into naga modules (each buffer binding then takes a slice at any byte offset: [`offsets`]) and
//! written as SPIR-V at run time; lanes of dependent one-workgroup dispatches fuse into one dispatch
//! ([`fusion`]), and so do chains of many workgroups related block by block by tile maps that a
//! built-in states, its author vouches for, or its code is shown to keep ([`MapUse`]). The Vulkan loader is opened at run time (no SDK needed to build).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

pub mod access;
mod barrier_scope;
mod build;
pub mod commands;
mod error;
mod exec;
mod ffi;
mod fused_entry;
pub mod fusion;
mod kernel;
mod lane_run;
pub mod lanes;
pub mod offsets;
mod options;
mod record;
pub mod shaders;
mod submit;
mod tile_flow;
mod tile_forms;
mod tilemaps;
mod trace;
mod transfer;
mod uniform;
pub mod wgsl;

pub use error::{MisalignedSlice, VkError};
pub use exec::{VulkanBackend, VulkanExec, VulkanMemory};
pub use ffi::{copy, Buffer, Context, DeviceLimits, Pipeline, MAX_QUEUES};
pub use fusion::tile_maps_of;
pub use kernel::VulkanKernel;
pub use options::{FusionMode, QueueMode, ReplayOrdering, VulkanOptions, DEFAULT_WAIT_TIMEOUT};
pub use submit::MAX_REPLAYS_IN_FLIGHT;
pub use tilemaps::{MapKept, MapUse};
