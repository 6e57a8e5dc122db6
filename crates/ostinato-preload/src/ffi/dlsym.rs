//! The exported `dlsym`. cudart (shared or static) opens `libcuda.so.1` and asks it for
//! `cuGetProcAddress_v2` through `dlsym` on that library's handle, so a preloaded definition of a
//! driver entry point is never seen; a preloaded `dlsym` is (the facts, probed on the H200, are in
//! docs/adoption.md). This one hands out the wrapped `cuGetProcAddress` and forwards everything else.
//!
//! `dlsym(RTLD_NEXT, …)` answers relative to its caller's object, found from the return address: so
//! for `RTLD_NEXT` the exported entry jumps to the real `dlsym` (a tail jump, the caller's return
//! address untouched) instead of calling it. The real one is `dlvsym(RTLD_NEXT, "dlsym",
//! "GLIBC_2.34")` (glibc 2.34 moved it into libc), else version `GLIBC_2.2.5`.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{guarded, procaddr};

/// The real `dlsym`'s address (0 until resolved; read by the exported entry's assembly).
static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The real `dlsym`, resolved on first use.
pub(super) fn real_dlsym() -> Option<DlsymFn> {
    let mut raw = REAL_DLSYM.load(Ordering::Acquire);
    if raw == 0 {
        raw = resolve();
        REAL_DLSYM.store(raw, Ordering::Release);
    }
    // SAFETY: `raw` is the address glibc gave for `dlsym`, whose C signature `DlsymFn` is.
    (raw != 0).then(|| unsafe { std::mem::transmute::<usize, DlsymFn>(raw) })
}

fn resolve() -> usize {
    for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
        // SAFETY: both strings are NUL-terminated; `dlvsym` is not wrapped, so this cannot recurse.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
        if !p.is_null() {
            return p as usize;
        }
    }
    0
}

/// Resolves the real `dlsym` when the library is loaded, before anyone can ask with `RTLD_NEXT`.
extern "C" fn resolve_at_load() {
    let _ = real_dlsym();
}

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_AT_LOAD: extern "C" fn() = resolve_at_load;

/// `dlsym`: `RTLD_NEXT` (-1) goes straight to the real one by a tail jump; everything else (and
/// `RTLD_NEXT` before the real one is known) to [`dlsym_hook`].
///
/// # Safety
/// The caller's contract is `dlsym`'s.
#[cfg(not(test))]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "jne 2f",
        "mov rax, qword ptr [rip + {real}@GOTPCREL]",
        "mov rax, qword ptr [rax]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "jmp {hook}",
        real = sym REAL_DLSYM,
        hook = sym dlsym_hook,
    )
}

/// The real `dlsym`'s answer, with the driver's `cuGetProcAddress` entry points swapped for the
/// wrapped ones, and the driver entry points this library exports for its exports
/// ([`super::exports::swap`]).
extern "C" fn dlsym_hook(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let Some(real) = real_dlsym() else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, forwarded unchanged to the real `dlsym`.
    let found = unsafe { real(handle, symbol) };
    if found.is_null() || symbol.is_null() {
        return found;
    }
    // SAFETY: `symbol` is the NUL-terminated name the caller passed (the real `dlsym` just read it).
    let name = unsafe { CStr::from_ptr(symbol) };
    let name = name.to_bytes();
    guarded(|| procaddr::wrap_dlsym(name, found as usize).or_else(|| super::exports::swap(name, found as usize))).flatten().map_or(found, |w| w as *mut c_void)
}

/// `dlsym` as the rest of the interposer calls it (resolving the next definition of one of its own
/// exports, from this library).
pub(super) fn next(symbol: &CStr) -> usize {
    // SAFETY: `RTLD_NEXT` from this library: the first definition after it; the name is NUL-terminated.
    real_dlsym().map_or(0, |real| unsafe { real(libc::RTLD_NEXT, symbol.as_ptr()) } as usize)
}
