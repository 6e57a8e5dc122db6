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
    /// (offset, size) of params `0..count`, from `cuFuncGetParamInfo` (driver 12.4+; `None` on older
    /// drivers). `count` comes from the kernel's own code (or the driver's count query): the driver is
    /// never asked about an index past the last param, which it answers with `CUDA_ERROR_INVALID_VALUE`
    /// (an error compute-sanitizer reports). `ParamCount::Unknown` (no code to read, no count query)
    /// probes to the first index refused, the one case that still asks past the end.
    pub(crate) fn param_layout(&self, count: ParamCount) -> Result<Option<Vec<(usize, usize)>>> {
        if driver_version()? < 12040 {
            return Ok(None);
        }
        layout_from(&DriverParams(self.f), count).map(Some)
    }

    /// The param count from the driver's own query, `cuFuncGetParamCount` (CUDA 13.2 and later;
    /// looked up through `cuGetProcAddress` because the bindings target 13.0); `None` before 13.2.
    pub(crate) fn driver_param_count(&self) -> Result<Option<usize>> {
        if driver_version()? < 13020 {
            return Ok(None);
        }
        type CountFn = unsafe extern "C" fn(sys::CUfunction, *mut usize) -> sys::CUresult;
        let mut pfn: *mut c_void = std::ptr::null_mut();
        let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
        // SAFETY: a NUL-terminated symbol name; writes one function pointer and one status.
        check("cuGetProcAddress_v2", unsafe {
            sys::cuGetProcAddress_v2(
                c"cuFuncGetParamCount".as_ptr(),
                &mut pfn,
                13020,
                sys::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT as u64,
                &mut status,
            )
        })?;
        if pfn.is_null() || status != sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS {
            return Ok(None);
        }
        // SAFETY: the driver returned its `cuFuncGetParamCount` (CUDA 13.2 signature) for that version.
        let count_fn: CountFn = unsafe { std::mem::transmute::<*mut c_void, CountFn>(pfn) };
        let mut n = 0usize;
        // SAFETY: a valid function; writes one count.
        check("cuFuncGetParamCount", unsafe { count_fn(self.f, &mut n) })?;
        Ok(Some(n))
    }
}

/// How many params a kernel takes, where something other than a failing probe says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParamCount {
    /// Known (from its PTX, its cubin or the driver's count query).
    Known(usize),
    /// Nothing says: the layout is probed to the first index the driver refuses.
    Unknown,
}

/// Where a param's (offset, size) comes from: the driver, or a test's stand-in.
pub(crate) trait ParamInfoSource {
    /// `Ok(None)` where the source refuses the index as past the last param.
    fn param_info(&self, index: usize) -> Result<Option<(usize, usize)>>;
}

/// `cuFuncGetParamInfo` of one function.
struct DriverParams(sys::CUfunction);

impl ParamInfoSource for DriverParams {
    fn param_info(&self, index: usize) -> Result<Option<(usize, usize)>> {
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: valid function; writes two sizes; an index past the end returns an error code.
        match unsafe { sys::cuFuncGetParamInfo(self.0, index, &mut off, &mut size) } {
            sys::CUresult::CUDA_SUCCESS => Ok(Some((off, size))),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
            r => check("cuFuncGetParamInfo", r).map(|()| None),
        }
    }
}

/// The layout of a kernel's params from `source`: exactly indices `0..n` for a known count `n` (an
/// index refused below it is an error), else every index up to the first refused.
pub(crate) fn layout_from(source: &impl ParamInfoSource, count: ParamCount) -> Result<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    match count {
        ParamCount::Known(n) => {
            for i in 0..n {
                let info = source.param_info(i)?.ok_or_else(|| CudaError::Internal {
                    op: "cuFuncGetParamInfo",
                    reason: format!("the kernel's code declares {n} params but the driver knows no param {i}"),
                })?;
                out.push(info);
            }
        }
        ParamCount::Unknown => {
            for i in 0.. {
                match source.param_info(i)? {
                    Some(info) => out.push(info),
                    None => break,
                }
            }
        }
    }
    Ok(out)
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
