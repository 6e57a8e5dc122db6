//! The exported `dlsym`. cudart (shared or static) opens `libcuda.so.1` and asks it for
//! `cuGetProcAddress_v2` through `dlsym` on that library's handle, so a preloaded definition of a
//! driver entry point is never seen; a preloaded `dlsym` is (the facts, probed on the H200, are in
//! docs/adoption.md). This one hands out the wrapped `cuGetProcAddress` and forwards everything else.
//!
//! `dlsym(RTLD_NEXT, …)` answers relative to its caller's object, found from the return address: so
//! for `RTLD_NEXT` the exported entry jumps to the real `dlsym` (a tail jump, the caller's return
//! address untouched) instead of calling it. The real one is `dlvsym(RTLD_NEXT, "dlsym",
//! "GLIBC_2.34")` (glibc 2.34 moved it into libc), else version `GLIBC_2.2.5`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
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

/// The next definition of `symbol` after this library (what one of its exports forwards to):
/// `dlsym(RTLD_NEXT)`, else the first loaded object, in load order, other than this library, that
/// defines it. The second search is for definers out of `RTLD_NEXT`'s sight: a library opened with
/// `RTLD_LOCAL` (a Python extension module, say) brings libcuda or cudart in as a dependency of its own
/// local scope, while its calls by name bind to this library's global exports.
pub(super) fn next(symbol: &CStr) -> usize {
    match next_global(symbol) {
        0 => real_dlsym().map_or(0, |real| in_loaded_objects(real, symbol)),
        found => found,
    }
}

/// `dlsym(RTLD_NEXT, symbol)` from this library: the next definition in the global scope (0: none).
pub(super) fn next_global(symbol: &CStr) -> usize {
    // SAFETY: `RTLD_NEXT` from this library: the first definition after it; the name is NUL-terminated.
    real_dlsym().map_or(0, |real| unsafe { real(libc::RTLD_NEXT, symbol.as_ptr()) } as usize)
}

/// The base address of the object that holds `addr` (0 where none does).
fn object_base(addr: usize) -> usize {
    // SAFETY: `Dl_info` is plain pointers and integers, for which all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` only reads the address and writes `info`.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// `symbol` in each loaded object but this library, in load order.
fn in_loaded_objects(real: DlsymFn, symbol: &CStr) -> usize {
    unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Vec` passed below, `info` the loader's record for this call; a name,
        // where present, is NUL-terminated. Nothing here calls back into the loader.
        unsafe {
            let names = &mut *data.cast::<Vec<CString>>();
            let name = (*info).dlpi_name;
            if !name.is_null() && *name != 0 {
                names.push(CStr::from_ptr(name).to_owned());
            }
        }
        0
    }
    let mut names: Vec<CString> = Vec::new();
    // SAFETY: `collect` matches the callback type and only appends to `names` (no loader call inside
    // the iteration: objects are opened below, after it).
    unsafe { libc::dl_iterate_phdr(Some(collect), (&mut names as *mut Vec<CString>).cast()) };
    let own = object_base(next as *const () as usize);
    for name in names {
        // SAFETY: `RTLD_NOLOAD` opens nothing new: a handle of an object already loaded, or null.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if handle.is_null() {
            continue;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let found = unsafe { real(handle, symbol.as_ptr()) } as usize;
        // SAFETY: the handle from the `dlopen` above (it raised the object's count: this lowers it).
        unsafe { libc::dlclose(handle) };
        if found != 0 && object_base(found) != own {
            return found;
        }
    }
    0
}
