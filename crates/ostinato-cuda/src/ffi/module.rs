//! Modules, their kernel functions, and the argument storage a launch reads.

#![allow(unsafe_code)]

use cudarc::driver::sys;

use super::check;
use super::{driver_version, Context};
use crate::error::{CudaError, Result};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// A loaded module; functions keep it alive.
pub(crate) struct Module {
    module: sys::CUmodule,
    _ctx: Arc<Context>,
}

// SAFETY: a CUmodule may be used from any thread whose current context is the module's.
unsafe impl Send for Module {}
// SAFETY: as above; lookups are read-only.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a PTX (NUL-terminated text) or cubin image.
    pub(crate) fn load(ctx: &Arc<Context>, image: &[u8]) -> Result<Arc<Module>> {
        let mut owned;
        let data = if image.last() == Some(&0) || image.starts_with(b"\x7fELF") {
            image
        } else {
            owned = image.to_vec();
            owned.push(0);
            &owned[..]
        };
        let mut module = std::ptr::null_mut();
        // SAFETY: data is a complete PTX (NUL-terminated) or ELF image that outlives the call.
        check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut module, data.as_ptr() as *const c_void) })?;
        Ok(Arc::new(Module { module, _ctx: ctx.clone() }))
    }

    pub(crate) fn function(self: &Arc<Self>, name: &str) -> Result<Function> {
        let cname = CString::new(name).map_err(|_| CudaError::Usage { op: "cuModuleGetFunction", reason: format!("name `{name}` has a NUL") })?;
        let mut f = std::ptr::null_mut();
        // SAFETY: the module is loaded; the name is NUL-terminated.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) }).map_err(|e| e.at(format!("kernel `{name}`")))?;
        Ok(Function { f, _module: self.clone() })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: unloads our own module once; functions hold an Arc so none outlive it.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// A kernel function of a loaded module.
#[derive(Clone)]
pub(crate) struct Function {
    pub(super) f: sys::CUfunction,
    _module: Arc<Module>,
}

// SAFETY: a function handle of a loaded module may be launched from any thread on which its context is
// current; the module is kept alive by the Arc.
unsafe impl Send for Function {}

impl Function {
    /// The driver handle (valid while this value, which keeps its module loaded, lives).
    pub(crate) fn handle(&self) -> sys::CUfunction {
        self.f
    }
    /// A function attribute (`cuFuncGetAttribute`).
    pub(crate) fn attribute(&self, attr: sys::CUfunction_attribute) -> Result<i32> {
        let mut v = 0;
        // SAFETY: valid function and attribute enum; writes one int.
        check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut v, attr, self.f) })?;
        Ok(v)
    }
    /// Bytes of static shared memory the function declares.
    pub(crate) fn static_shared_bytes(&self) -> Result<u32> {
        Ok(self.attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u32)
    }
    /// Lets launches of this function ask for up to `bytes` of dynamic shared memory (the opt-in past
    /// the default 48 KiB a block gets).
    pub(crate) fn allow_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: valid function and attribute enum; the driver checks the value against the device.
        check("cuFuncSetAttribute", unsafe { sys::cuFuncSetAttribute(self.f, attr, bytes as i32) })
    }
    /// (offset, size) of each param, from `cuFuncGetParamInfo` (driver 12.4+); `None` on older drivers.
    pub(crate) fn param_layout(&self) -> Result<Option<Vec<(usize, usize)>>> {
        if driver_version()? < 12040 {
            return Ok(None);
        }
        let mut out = Vec::new();
        for i in 0.. {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: valid function; writes two sizes; an index past the end returns an error code.
            let r = unsafe { sys::cuFuncGetParamInfo(self.f, i, &mut off, &mut size) };
            if r != sys::CUresult::CUDA_SUCCESS {
                if r == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
                    break;
                }
                check("cuFuncGetParamInfo", r)?;
            }
            out.push((off, size));
        }
        Ok(Some(out))
    }
}

/// Argument storage for one launch: each value in its own 8-byte-aligned cell, plus the pointer array
/// the driver reads. The pointer array points into `cells`, which never reallocates after `new`.
pub(crate) struct KernelArgs {
    cells: Box<[u64]>,
    ptrs: Box<[*mut c_void]>,
}

// SAFETY: `ptrs` points only into `cells`, which KernelArgs owns and which does not move when the
// struct does (boxed); moving both to another thread keeps the pointers valid.
unsafe impl Send for KernelArgs {}

impl KernelArgs {
    pub(crate) fn new(values: &[u64]) -> KernelArgs {
        let mut cells: Box<[u64]> = values.into();
        let ptrs = cells.iter_mut().map(|c| c as *mut u64 as *mut c_void).collect();
        KernelArgs { cells, ptrs }
    }
    pub(crate) fn set(&mut self, i: usize, v: u64) {
        self.cells[i] = v;
    }
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.cells[i]
    }
    pub(super) fn as_driver(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}
