//! The only place that calls the CUDA driver. Thin owning wrappers over cudarc's `sys` layer (loaded at
//! run time); every handle lives in a type that frees it, every call's result becomes a [`CudaError`]
//! with the operation and the driver's code name. Nothing here caches or re-binds on the hot path.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;

use crate::error::{CudaError, Result};

mod attributes;
mod graph;
mod memory;
mod module;
mod stream;

pub(crate) use graph::{Graph, GraphExec, GraphNode};
pub(crate) use memory::{copy_to_device, copy_to_host, synchronize, DeviceAlloc};
#[cfg(test)]
pub(crate) use module::{layout_from, ParamInfoSource};
pub(crate) use module::{Function, KernelArgs, Module, ParamCount};
pub(crate) use stream::{Event, Stream};

fn name_of(code: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string (or leaves it null) for any code.
    let r = unsafe { sys::cuGetErrorName(code, &mut p) };
    if r != sys::CUresult::CUDA_SUCCESS || p.is_null() {
        return format!("CUDA_ERROR_{}", code as u32);
    }
    // SAFETY: the driver returned a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[inline]
fn check(op: &'static str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Driver { op, result: code, name: name_of(code), context: String::new() })
    }
}

/// Loads libcuda and calls `cuInit` once; `Err(NoDriver)` when no driver library is present.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let r = INIT.get_or_init(|| {
        // SAFETY: only tries to dlopen the library by its candidate names; never panics.
        if !unsafe { sys::is_culib_present() } {
            return Err(String::new());
        }
        // SAFETY: cuInit has no preconditions.
        check("cuInit", unsafe { sys::cuInit(0) }).map_err(|e| e.to_string())
    });
    match r {
        Ok(()) => Ok(()),
        Err(m) if m.is_empty() => Err(CudaError::NoDriver),
        Err(m) => Err(CudaError::Init(m.clone())),
    }
}

pub(crate) fn driver_version() -> Result<i32> {
    init()?;
    let mut v = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

pub(crate) fn require_driver(op: &'static str, needed: i32) -> Result<()> {
    let found = driver_version()?;
    if found < needed {
        return Err(CudaError::DriverTooOld { op, needed, found });
    }
    Ok(())
}

pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    // SAFETY: writes one int.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

/// Raw facts about one device.
pub(crate) struct RawDevice {
    pub handle: sys::CUdevice,
    pub name: String,
    pub uuid: [u8; 16],
    pub pci_bus_id: String,
}

pub(crate) fn device(ordinal: i32) -> Result<RawDevice> {
    init()?;
    let mut handle = 0;
    // SAFETY: writes one device handle.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut handle, ordinal) })?;
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer holds 256 chars and the driver NUL-terminates within that length.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, handle) })?;
    // SAFETY: NUL-terminated above.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: writes one CUuuid.
    check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, handle) })?;
    let mut bus = [0 as std::ffi::c_char; 64];
    // SAFETY: the buffer holds 64 chars.
    check("cuDeviceGetPCIBusId", unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, handle) })?;
    // SAFETY: NUL-terminated above.
    let pci_bus_id = unsafe { CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
    Ok(RawDevice { handle, name, uuid: uuid.bytes.map(|b| b as u8), pci_bus_id })
}

pub(crate) fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int for a valid device and attribute enum.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

pub(crate) fn device_total_mem(dev: sys::CUdevice) -> Result<usize> {
    let mut v = 0;
    // SAFETY: writes one size.
    check("cuDeviceTotalMem_v2", unsafe { sys::cuDeviceTotalMem_v2(&mut v, dev) })?;
    Ok(v)
}

/// `(free, total)` bytes of device memory of the current context's device (`cuMemGetInfo_v2`).
pub(crate) fn memory_info() -> Result<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    // SAFETY: writes two sizes for the current context.
    check("cuMemGetInfo_v2", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok((free, total))
}

/// The device's primary context, retained for our lifetime and made current on the creating thread.
pub(crate) struct Context {
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
}

// SAFETY: a retained primary context may be made current on, and used from, any thread.
unsafe impl Send for Context {}
// SAFETY: as above; the handle is never mutated after creation.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn retain(dev: sys::CUdevice) -> Result<Arc<Context>> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: retains the primary context of a valid device.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
        let c = Arc::new(Context { ctx, dev });
        c.bind()?;
        Ok(c)
    }
    /// Makes the context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained while self lives.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx) })
    }
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; operates on the current context.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: releases the retain taken in `retain`.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// Device attribute ids used for provenance.
pub(crate) mod attr {
    use cudarc::driver::sys::CUdevice_attribute as A;
    pub const SM_COUNT: A = A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    pub const CC_MAJOR: A = A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
    pub const CC_MINOR: A = A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR;
    pub const CLOCK_KHZ: A = A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE;
    pub const MEM_CLOCK_KHZ: A = A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE;
    pub const MEM_BUS_BITS: A = A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH;
    pub const MAX_THREADS_PER_BLOCK: A = A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
    pub const MAX_BLOCK: [A; 3] = [A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
    pub const MAX_GRID: [A; 3] = [A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
    pub const MAX_SHARED_PER_BLOCK: A = A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK;
    pub const MAX_SHARED_PER_BLOCK_OPT_IN: A = A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
}
