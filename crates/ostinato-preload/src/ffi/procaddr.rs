//! The wrapped `cuGetProcAddress`. cudart fetches some 440 driver entry points through it by (name,
//! version, flags), and asks for `cuGetProcAddress` itself through it too (at 11030 and 12000): each
//! answer is the real pointer, swapped for a wrapper where [`super::hooks::wrapper_for`] has one for
//! that (name, version, flags) and the wrapper's slot takes that real pointer.

use std::ffi::{c_char, c_int, c_void, CStr};

use super::types::{CuResult, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS};
use super::{guarded, hooks, Slot};

/// `cuGetProcAddress` (the 11.3 signature, asked for below 12000) and `cuGetProcAddress_v2`.
pub(super) static GPA_V1: Slot = Slot::new();
pub(super) static GPA_V2: Slot = Slot::new();

type GpaV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CuResult;
type GpaV2 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuResult;

/// The wrapped `cuGetProcAddress` (v1, `PFN_cuGetProcAddress_v11030`).
///
/// # Safety
/// The caller's contract is the driver's.
pub(super) unsafe extern "C" fn gpa_v1(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) -> CuResult {
    // SAFETY: the slot holds the real `cuGetProcAddress` of this signature.
    let Some(real) = (unsafe { GPA_V1.get::<GpaV1>() }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { real(symbol, pfn, version, flags) };
    rewrite(rc, symbol, pfn, version, flags);
    rc
}

/// The wrapped `cuGetProcAddress_v2` (`PFN_cuGetProcAddress_v12000`).
///
/// # Safety
/// The caller's contract is the driver's.
pub(super) unsafe extern "C" fn gpa_v2(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64, status: *mut c_int) -> CuResult {
    // SAFETY: the slot holds the real `cuGetProcAddress_v2` of this signature.
    let Some(real) = (unsafe { GPA_V2.get::<GpaV2>() }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { real(symbol, pfn, version, flags, status) };
    rewrite(rc, symbol, pfn, version, flags);
    rc
}

/// Swaps the pointer the driver wrote to `*pfn` for its wrapper, where there is one.
fn rewrite(rc: CuResult, symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
    if rc != CUDA_SUCCESS || symbol.is_null() || pfn.is_null() {
        return;
    }
    guarded(|| {
        // SAFETY: the driver succeeded, so `symbol` is a NUL-terminated name and `pfn` a writable
        // pointer it has just filled.
        let (name, real) = unsafe { (CStr::from_ptr(symbol), *pfn as usize) };
        if let Some(wrapper) = hooks::wrapper_for(name.to_bytes(), version, flags, real) {
            // SAFETY: as above; the wrapper has the signature the caller asked for.
            unsafe { *pfn = wrapper as *mut c_void };
        }
    });
}

/// What `dlsym` hands out for `name` found at `real`: the wrapped `cuGetProcAddress` for the driver's
/// two exports of it.
pub(super) fn wrap_dlsym(name: &[u8], real: usize) -> Option<usize> {
    let (slot, wrapper) = match name {
        b"cuGetProcAddress_v2" => (&GPA_V2, gpa_v2 as GpaV2 as usize),
        b"cuGetProcAddress" => (&GPA_V1, gpa_v1 as GpaV1 as usize),
        _ => return None,
    };
    (real != wrapper && slot.claim(real)).then_some(wrapper)
}

/// The wrapper and slot of `cuGetProcAddress` asked for through itself at `version`.
pub(super) fn through_itself(version: c_int) -> (&'static Slot, usize) {
    if version >= 12000 {
        (&GPA_V2, gpa_v2 as GpaV2 as usize)
    } else {
        (&GPA_V1, gpa_v1 as GpaV1 as usize)
    }
}

/// The real driver entry point `name` at `version` (default flags), through the real
/// `cuGetProcAddress`; 0 where it is not offered or no `cuGetProcAddress` was seen yet.
pub(super) fn real_entry(name: &CStr, version: c_int) -> usize {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: each slot holds the real entry point of its signature; the name is NUL-terminated and
    // `p` a writable pointer; a null status pointer is allowed.
    let rc = unsafe {
        if let Some(real) = GPA_V2.get::<GpaV2>() {
            let mut status: c_int = 0;
            real(name.as_ptr(), &mut p, version, 0, &mut status)
        } else if let Some(real) = GPA_V1.get::<GpaV1>() {
            real(name.as_ptr(), &mut p, version, 0)
        } else {
            return 0;
        }
    };
    if rc == CUDA_SUCCESS {
        p as usize
    } else {
        0
    }
}

/// Whether a real `cuGetProcAddress` is known (the read-back can resolve its entry points). A
/// program linked to libcuda that never asks for one gets the next definition of
/// `cuGetProcAddress_v2` after this library.
pub(super) fn ready() -> bool {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    if GPA_V1.raw() == 0 && GPA_V2.raw() == 0 {
        GPA_V2.claim(super::dlsym::next(c"cuGetProcAddress_v2"));
    }
    GPA_V1.raw() != 0 || GPA_V2.raw() != 0
}
