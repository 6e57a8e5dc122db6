//! Device memory: allocations and synchronous copies.

#![allow(unsafe_code)]

use cudarc::driver::sys;

use super::check;
use super::Context;
use crate::error::Result;
use std::ffi::c_void;
use std::sync::Arc;

/// A device allocation.
pub(crate) struct DeviceAlloc {
    ptr: sys::CUdeviceptr,
    len: usize,
    _ctx: Arc<Context>,
}

impl DeviceAlloc {
    pub(crate) fn new(ctx: &Arc<Context>, len: usize) -> Result<DeviceAlloc> {
        let mut ptr = 0;
        // SAFETY: allocates `len` bytes in the current context.
        check("cuMemAlloc_v2", unsafe { sys::cuMemAlloc_v2(&mut ptr, len.max(1)) })?;
        Ok(DeviceAlloc { ptr, len, _ctx: ctx.clone() })
    }
    /// Sets every byte to zero (`cuMemAlloc` returns memory holding whatever it held). Asynchronous
    /// to the host on the null stream: [`synchronize`] before another stream uses the memory.
    pub(crate) fn zero(&self) -> Result<()> {
        // SAFETY: `len` bytes of our own live allocation.
        check("cuMemsetD8_v2", unsafe { sys::cuMemsetD8_v2(self.ptr, 0, self.len) })
    }
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // SAFETY: frees our own allocation once.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Copies host bytes to device address `dst` and returns once they are on the device. The caller
/// checked the range. (`cuMemcpyHtoD` from pageable memory may return while the DMA is still in flight,
/// and it does not order against non-blocking streams: without the synchronize a kernel launched next
/// could read stale bytes — the benchmark's oracle caught exactly that.)
pub(crate) fn copy_to_device(dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: src is a valid host slice; dst is a device range the caller bounds-checked.
    check("cuMemcpyHtoD_v2", unsafe { sys::cuMemcpyHtoD_v2(dst, src.as_ptr() as *const c_void, src.len()) })?;
    // SAFETY: no arguments; waits for the current context's work, the copy included.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// Waits for the current context's work (the zeroing of new allocations included).
pub(crate) fn synchronize() -> Result<()> {
    // SAFETY: no arguments; waits for the current context's work.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// Copies device bytes at `src` into `dst` (synchronous). The caller checked the range.
pub(crate) fn copy_to_host(dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: dst is a valid host slice; src is a device range the caller bounds-checked.
    check("cuMemcpyDtoH_v2", unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len()) })
}
