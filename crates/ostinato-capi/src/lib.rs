//! Ostinato's C ABI (`include/ostinato.h`, generated from this crate by cbindgen).
//!
//! The C side holds opaque handles (`ost_graph`, `ost_plan`, `ost_exec`). Every function returns an
//! `ost_status` (`OST_OK` is 0) and leaves the calling thread's message in `ost_last_error()`. A
//! handle is a key into a registry of live objects: a pointer that is not a live handle of the right
//! kind (NULL, freed, of another kind, or garbage) is refused with `OST_ERR_HANDLE` and never
//! dereferenced; freeing twice is refused the same way. The ids of a graph's buffers, kernels, slots
//! and nodes (`uint32_t`) carry their graph and kind: another graph's id, or one of another kind, is
//! refused the same way, never taken for this graph's object of the same index (`ids`). Each object is behind a lock, so two threads
//! that share a handle are serialised, never racing. Every entry catches panics: none crosses into C.
//! A call that fails leaves nothing half-built: an `out` pointer is written only on success.
//!
//! This crate holds no logic of its own: recording is the core's `Graph`, planning `Plan::compile`,
//! execution the runtime's `Session` and `ExecHandle`.

// The C ABI is the FFI boundary: raw pointers from C are read here, each use with its SAFETY line.
#![allow(unsafe_code)]
#![allow(non_camel_case_types)]

mod exec;
mod graph;
mod graph_ids;
mod host_fn;
mod ids;

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

pub use exec::*;
pub use graph::*;
pub use graph_ids::*;
pub use host_fn::*;

/// The ABI version: bumped on any incompatible change of the header.
pub const OST_ABI_VERSION: u32 = 3;

/// What every entry point returns. Each failure class has its own code; the message of
/// `ost_last_error()` names the culprit (file:line, node, param, buffer, slot, driver code).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ost_status {
    OST_OK = 0,
    /// A required pointer argument was NULL.
    OST_ERR_NULL = 1,
    /// A handle that is not a live handle of the expected kind (freed, of another kind, garbage), or
    /// an id (buffer, kernel, slot, node) of another graph, of another kind, or not given by Ostinato.
    OST_ERR_HANDLE = 2,
    /// An argument out of its domain: not UTF-8, an unknown name, a value out of range.
    OST_ERR_ARGUMENT = 3,
    /// The graph refused a recording call (bad slice, wrong arg count, duplicate name, ...).
    OST_ERR_GRAPH = 4,
    /// A graph file could not be read or parsed.
    OST_ERR_FILE = 5,
    /// Planning failed (a cycle through explicit edges, a graph past the planner's budget).
    OST_ERR_PLAN = 6,
    /// A kernel could not be bound (no implementation, another signature, a compile error).
    OST_ERR_BIND = 7,
    /// The backend or device could not be opened (no driver, no such device, not in this build).
    OST_ERR_BACKEND = 8,
    /// The device or backend failed at run time (a driver error, a kernel fault, a timeout).
    OST_ERR_RUNTIME = 9,
    /// The call is not allowed now (a replay in flight, a faulted exec).
    OST_ERR_STATE = 10,
    /// A panic inside Ostinato was caught at the boundary (a bug: please report it).
    OST_ERR_PANIC = 11,
    /// The backend or device cannot run the plan as recorded (a launch past the device's limits, a
    /// buffer on a device the exec does not drive, a feature the device lacks).
    OST_ERR_UNSUPPORTED = 12,
    /// A kernel faulted or replays missed their deadline: the exec is faulted and refuses every
    /// later call but `ost_exec_free`.
    OST_ERR_FAULT = 13,
    /// A result differs from the host oracle.
    OST_ERR_MISMATCH = 14,
    /// A file could not be read or written, or memory could not be had.
    OST_ERR_IO = 15,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as the thread's last error and returns `status`.
pub(crate) fn fail(status: ost_status, message: impl Into<String>) -> ost_status {
    let text = message.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(text).unwrap_or_default());
    status
}

/// A failure: its class and message.
pub(crate) type Fallible<T> = Result<T, (ost_status, String)>;

/// Runs one entry point's body: a panic becomes `OST_ERR_PANIC`, an error its status with the message.
pub(crate) fn guard(body: impl FnOnce() -> Fallible<()>) -> ost_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ost_status::OST_OK,
        Ok(Err((status, message))) => fail(status, message),
        Err(panic) => fail(ost_status::OST_ERR_PANIC, format!("internal error (caught at the C boundary): {}", panic_text(&panic))),
    }
}

fn panic_text(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}

/// The status of an error kind: the one place a C status is chosen (from the error's kind, never
/// from its message).
pub(crate) fn status_of(kind: ostinato_runtime::ostinato::ErrorKind) -> ost_status {
    use ostinato_runtime::ostinato::ErrorKind as K;
    match kind {
        K::Graph => ost_status::OST_ERR_GRAPH,
        K::File => ost_status::OST_ERR_FILE,
        K::Plan => ost_status::OST_ERR_PLAN,
        K::Argument => ost_status::OST_ERR_ARGUMENT,
        K::State => ost_status::OST_ERR_STATE,
        K::Bind => ost_status::OST_ERR_BIND,
        K::Unsupported => ost_status::OST_ERR_UNSUPPORTED,
        K::BackendMissing => ost_status::OST_ERR_BACKEND,
        K::Runtime => ost_status::OST_ERR_RUNTIME,
        K::Fault => ost_status::OST_ERR_FAULT,
        K::Mismatch => ost_status::OST_ERR_MISMATCH,
        K::Io => ost_status::OST_ERR_IO,
        _ => ost_status::OST_ERR_RUNTIME,
    }
}

/// Maps a runtime error to its status class and message.
pub(crate) fn runtime_error(e: ostinato_runtime::RuntimeError) -> (ost_status, String) {
    (status_of(e.kind()), e.to_string())
}

/// The live objects behind handles, by key. A handle is a key drawn from a counter that never repeats
/// (64-bit: it does not wrap), not an address: a freed handle names nothing ever again, however many
/// objects are made after it. The object is kept alive by the registry (and by any call in progress
/// on it) and dropped when freed.
#[derive(Clone)]
pub(crate) enum Object {
    Graph(Arc<Mutex<graph::CGraph>>),
    Plan(Arc<graph::CPlan>),
    Exec(Arc<Mutex<exec::CExec>>),
}

fn registry() -> &'static Mutex<HashMap<usize, Object>> {
    static R: OnceLock<Mutex<HashMap<usize, Object>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A fresh key: never returned before in this process, never 0, a multiple of 16 (so a handle looks
/// like an aligned pointer to C tools).
pub(crate) fn next_key() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x100);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 4
}

/// Registers `object` and returns its handle.
pub(crate) fn register(object: Object) -> usize {
    let key = next_key();
    register_at(key, object);
    key
}

/// Registers `object` under `key`, a fresh key of [`next_key`] (the handle it was made for).
pub(crate) fn register_at(key: usize, object: Object) {
    registry().lock().unwrap_or_else(|p| p.into_inner()).insert(key, object);
}

/// The live object at `handle`, or why not.
pub(crate) fn lookup(handle: usize, kind: &'static str) -> Fallible<Object> {
    if handle == 0 {
        return Err((ost_status::OST_ERR_NULL, format!("the {kind} handle is NULL")));
    }
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&handle)
        .cloned()
        .ok_or_else(|| (ost_status::OST_ERR_HANDLE, format!("{handle:#x} is not a live {kind} handle (freed already, or never made by Ostinato)")))
}

/// Removes the object at `handle` (of `kind`); NULL is a no-op, as `free(NULL)` is.
pub(crate) fn unregister(handle: usize, kind: &'static str, is_kind: fn(&Object) -> bool) -> Fallible<()> {
    if handle == 0 {
        return Ok(());
    }
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    match r.get(&handle) {
        Some(o) if is_kind(o) => {
            r.remove(&handle);
            Ok(())
        }
        Some(_) => Err((ost_status::OST_ERR_HANDLE, format!("{handle:#x} is a live handle, but not of an {kind}"))),
        None => Err((ost_status::OST_ERR_HANDLE, format!("{handle:#x} is not a live {kind} handle (freed already, or never made by Ostinato)"))),
    }
}

/// Reads a C string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid for the call.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Fallible<&'a str> {
    if p.is_null() {
        return Err((ost_status::OST_ERR_NULL, format!("{what} is NULL")));
    }
    // SAFETY: the caller vouches for a NUL-terminated string (the header says so for every `const char *`).
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| (ost_status::OST_ERR_ARGUMENT, format!("{what} is not UTF-8")))
}

/// Refuses `n` items at `p` that no C array can be: NULL with a count, misaligned for `T`, or more
/// bytes than memory holds (a slice over them would be undefined, not merely wrong).
fn check_array<T>(p: *const T, n: usize, what: &str) -> Fallible<()> {
    if p.is_null() {
        return Err((ost_status::OST_ERR_NULL, format!("{what} is NULL with a count of {n}")));
    }
    if !p.is_aligned() {
        return Err((ost_status::OST_ERR_ARGUMENT, format!("{what} ({p:p}) is not aligned for its items ({} bytes)", std::mem::align_of::<T>())));
    }
    if n.checked_mul(std::mem::size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err((ost_status::OST_ERR_ARGUMENT, format!("{what}: a count of {n} is more than memory holds")));
    }
    Ok(())
}

/// A C array of `n` items (`n == 0` takes NULL).
///
/// # Safety
/// `p` points to `n` readable items, or `n` is 0.
pub(crate) unsafe fn items<'a, T>(p: *const T, n: usize, what: &str) -> Fallible<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    check_array(p, n, what)?;
    // SAFETY: non-NULL, aligned, at most isize::MAX bytes, and the caller vouches for `n` readable items.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// A writable C array of `n` items (`n == 0` takes NULL).
///
/// # Safety
/// `p` points to `n` writable items, or `n` is 0.
pub(crate) unsafe fn items_mut<'a, T>(p: *mut T, n: usize, what: &str) -> Fallible<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    check_array(p, n, what)?;
    // SAFETY: non-NULL, aligned, at most isize::MAX bytes, and the caller vouches for `n` writable items.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Writes `value` through an out pointer that must not be NULL (nor misaligned).
///
/// # Safety
/// `out` is NULL or points to writable memory for one `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Fallible<()> {
    need(out, what)?;
    // SAFETY: non-NULL, and the caller vouches that it points to a writable `T`.
    unsafe { out.write(value) };
    Ok(())
}

/// Checks an out pointer before any work, so a call that would fail on it changes nothing.
pub(crate) fn need<T>(out: *mut T, what: &str) -> Fallible<()> {
    if out.is_null() {
        return Err((ost_status::OST_ERR_NULL, format!("{what} is NULL")));
    }
    if !out.is_aligned() {
        return Err((ost_status::OST_ERR_ARGUMENT, format!("{what} ({out:p}) is not aligned for what it points to ({} bytes)", std::mem::align_of::<T>())));
    }
    Ok(())
}

/// The ABI version of the library (`OST_ABI_VERSION` of the header it was built with).
#[no_mangle]
pub extern "C" fn ost_abi_version() -> u32 {
    OST_ABI_VERSION
}

/// The calling thread's last error message ("" when none). The pointer stays valid until the next
/// failing call on this thread; copy it to keep it.
#[no_mangle]
pub extern "C" fn ost_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a status code (`"OST_ERR_BIND"`), a static string; `"OST_UNKNOWN"` for a code that is
/// none. Takes the code as an integer, so any value C passes is defined.
#[no_mangle]
pub extern "C" fn ost_status_name(status: i32) -> *const c_char {
    let s: &'static CStr = match status {
        0 => c"OST_OK",
        1 => c"OST_ERR_NULL",
        2 => c"OST_ERR_HANDLE",
        3 => c"OST_ERR_ARGUMENT",
        4 => c"OST_ERR_GRAPH",
        5 => c"OST_ERR_FILE",
        6 => c"OST_ERR_PLAN",
        7 => c"OST_ERR_BIND",
        8 => c"OST_ERR_BACKEND",
        9 => c"OST_ERR_RUNTIME",
        10 => c"OST_ERR_STATE",
        11 => c"OST_ERR_PANIC",
        12 => c"OST_ERR_UNSUPPORTED",
        13 => c"OST_ERR_FAULT",
        14 => c"OST_ERR_MISMATCH",
        15 => c"OST_ERR_IO",
        _ => c"OST_UNKNOWN",
    };
    s.as_ptr()
}
