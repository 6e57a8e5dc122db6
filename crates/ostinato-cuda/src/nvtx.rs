//! NVTX ranges and marks (an FFI module), so Nsight Systems and Nsight Compute show Ostinato's names:
//! the client side of NVTX v3's injection protocol, with nothing linked at build time. On first use
//! the client reads `NVTX_INJECTION64_PATH` (a profiler sets it to its injection library), loads that
//! library and calls its `InitializeInjectionNvtx2` with this client's export-table getter; the tool
//! asks for the function tables of the NVTX modules and writes its functions into their slots. Without
//! the variable, or when the library will not load or initialise, every call here is a no-op costing
//! one load of an initialised flag.
//!
//! Hand-written: the maintained bindings either load NVTX v2's `libnvToolsExt` by name and panic
//! without it (cudarc's `nvtx`), or compile NVTX's C headers at build time (the `nvtx` crate, through
//! `cc`); the protocol itself is a dozen lines of C ABI — an export table of two entries and per
//! module an array of pointers to function slots.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use libloading::Library;

/// Modules (`NvtxCallbackModule`) and how many ids each has (`NVTX_CBID_*_SIZE`): core, CUDA,
/// OpenCL, CUDA runtime, core2 (domains), sync. Slot `i` of module `m` holds the tool's function for
/// callback id `i` of that module (0 is invalid).
const MODULE_SIZES: [usize; 7] = [0, 16, 9, 15, 7, 16, 7];
const MAX_IDS: usize = 16;
/// Core callback ids this client calls.
const CORE: usize = 1;
const CBID_MARK_A: usize = 2;
const CBID_RANGE_PUSH_A: usize = 9;
const CBID_RANGE_POP: usize = 11;
/// `NVTX_ETID_CALLBACKS`, `NVTX_ETID_VERSIONINFO`, and the NVTX API version this client speaks.
const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;
const NVTX_VERSION: u32 = 3;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_MODULE: [AtomicPtr<c_void>; MAX_IDS] = [EMPTY; MAX_IDS];
/// The function slots the tool fills (plain pointer-sized cells it writes through the tables).
static SLOTS: [[AtomicPtr<c_void>; MAX_IDS]; 7] = [EMPTY_MODULE; 7];

/// Per module, the table handed to the tool: a pointer to each slot by id, null at 0 and at the end.
struct Tables([Box<[*mut *mut c_void]>; 7]);
// SAFETY: the tables are written once, before the tool sees them, and only read afterwards; the
// pointers they hold point into `SLOTS`, a static.
unsafe impl Send for Tables {}
// SAFETY: as above.
unsafe impl Sync for Tables {}
static TABLES: OnceLock<Tables> = OnceLock::new();

fn tables() -> &'static Tables {
    TABLES.get_or_init(|| {
        Tables(std::array::from_fn(|m| {
            (0..=MODULE_SIZES[m]).map(|i| if i == 0 || i == MODULE_SIZES[m] { std::ptr::null_mut() } else { SLOTS[m][i].as_ptr() }).collect()
        }))
    })
}

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(c_int, *mut *mut *mut *mut c_void, *mut c_uint) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(u32),
}

static CALLBACKS: Callbacks = Callbacks { struct_size: std::mem::size_of::<Callbacks>(), get_module_function_table };
static VERSION_INFO: VersionInfo =
    VersionInfo { struct_size: std::mem::size_of::<VersionInfo>(), version: NVTX_VERSION, reserved0: 0, set_injection_nvtx_version };

/// The tool asks for module `module`'s table and its size (the number of ids).
unsafe extern "C" fn get_module_function_table(module: c_int, out_table: *mut *mut *mut *mut c_void, out_size: *mut c_uint) -> c_int {
    let Some(m) = usize::try_from(module).ok().filter(|&m| (1..MODULE_SIZES.len()).contains(&m)) else { return 0 };
    let table = &tables().0[m];
    // SAFETY: the tool passes writable out-pointers or null; the table lives for the process.
    unsafe {
        if !out_table.is_null() {
            *out_table = table.as_ptr() as *mut *mut *mut c_void;
        }
        if !out_size.is_null() {
            *out_size = MODULE_SIZES[m] as c_uint;
        }
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

/// The export-table getter passed to the tool.
unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        ETID_CALLBACKS => &CALLBACKS as *const Callbacks as *const c_void,
        ETID_VERSIONINFO => &VERSION_INFO as *const VersionInfo as *const c_void,
        _ => std::ptr::null(),
    }
}

/// The injection library, kept loaded for the process once it initialised.
struct Injection {
    _lib: Library,
}

/// Loads and initialises the tool `NVTX_INJECTION64_PATH` names; `None` (every call a no-op) without
/// one or where it fails.
fn init() -> Option<Injection> {
    let path = std::env::var_os("NVTX_INJECTION64_PATH")?;
    // SAFETY: loading the tool runs its initialisers, as NVTX's own client does.
    let lib = unsafe { Library::new(&path) }.ok()?;
    type Init = unsafe extern "C" fn(unsafe extern "C" fn(u32) -> *const c_void) -> c_int;
    // SAFETY: the entry point NVTX's protocol names, with its signature.
    let entry: Init = *unsafe { lib.get::<Init>(b"InitializeInjectionNvtx2\0") }.ok()?;
    tables();
    // SAFETY: the protocol's call: the tool reads our export tables and fills the slots.
    if unsafe { entry(get_export_table) } == 0 {
        for slot in SLOTS.iter().flatten() {
            slot.store(std::ptr::null_mut(), Ordering::Release);
        }
        return None;
    }
    Some(Injection { _lib: lib })
}

fn injection() -> Option<&'static Injection> {
    static INJECTION: OnceLock<Option<Injection>> = OnceLock::new();
    INJECTION.get_or_init(init).as_ref()
}

/// The tool's function for core callback id `id`, if a tool is attached and gave one.
fn core(id: usize) -> Option<*mut c_void> {
    injection()?;
    let f = SLOTS[CORE][id].load(Ordering::Acquire);
    (!f.is_null()).then_some(f)
}

/// Whether a profiler's NVTX injection is attached (ranges are recorded).
pub fn active() -> bool {
    core(CBID_RANGE_PUSH_A).is_some()
}

/// Opens a range named `name` on the calling thread (`nvtxRangePushA`).
pub fn push(name: &CStr) {
    if let Some(f) = core(CBID_RANGE_PUSH_A) {
        // SAFETY: the tool put its `nvtxRangePushA` implementation in this slot.
        let f: unsafe extern "C" fn(*const c_char) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: a NUL-terminated string that outlives the call.
        unsafe { f(name.as_ptr()) };
    }
}

/// Closes the calling thread's innermost range (`nvtxRangePop`).
pub fn pop() {
    if let Some(f) = core(CBID_RANGE_POP) {
        // SAFETY: the tool put its `nvtxRangePop` implementation in this slot.
        let f: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: no arguments.
        unsafe { f() };
    }
}

/// Marks an instant named `name` (`nvtxMarkA`).
pub fn mark(name: &CStr) {
    if let Some(f) = core(CBID_MARK_A) {
        // SAFETY: the tool put its `nvtxMarkA` implementation in this slot.
        let f: unsafe extern "C" fn(*const c_char) = unsafe { std::mem::transmute(f) };
        // SAFETY: a NUL-terminated string that outlives the call.
        unsafe { f(name.as_ptr()) };
    }
}

/// A range open until dropped; built only where a tool listens (`name` is not even formatted
/// otherwise).
#[must_use]
pub struct Range(bool);

impl Range {
    /// Opens a range named `name()` where a tool listens.
    pub fn new(name: impl FnOnce() -> String) -> Range {
        if !active() {
            return Range(false);
        }
        let text = std::ffi::CString::new(name().replace('\0', " ")).unwrap_or_default();
        push(&text);
        Range(true)
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.0 {
            pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `NVTX_INJECTION64_PATH` nothing is loaded and every call does nothing.
    #[test]
    fn without_an_injection_every_call_is_a_no_op() {
        if std::env::var_os("NVTX_INJECTION64_PATH").is_some() {
            eprintln!("NVTX_INJECTION64_PATH is set: a profiler is attached, the no-op case is not shown here");
            return;
        }
        assert!(!active());
        push(c"a");
        mark(c"b");
        pop();
        drop(Range::new(|| unreachable!("a range's name is not even formatted without a tool")));
    }

    /// The tables the tool sees: one pointer per callback id into the slots, null at id 0 and at the
    /// end; an unknown module is refused.
    #[test]
    fn each_module_table_points_at_its_slots() {
        for (m, &size) in MODULE_SIZES.iter().enumerate().skip(1) {
            let (mut table, mut n): (*mut *mut *mut c_void, c_uint) = (std::ptr::null_mut(), 0);
            // SAFETY: valid out-pointers.
            assert_eq!(unsafe { get_module_function_table(m as c_int, &mut table, &mut n) }, 1);
            assert_eq!(n as usize, size);
            // SAFETY: the table has size + 1 entries.
            let entries = unsafe { std::slice::from_raw_parts(table, size + 1) };
            assert!(entries[0].is_null() && entries[size].is_null());
            for (i, e) in entries.iter().enumerate().take(size).skip(1) {
                assert_eq!(*e, SLOTS[m][i].as_ptr());
            }
        }
        // SAFETY: null out-pointers are allowed.
        assert_eq!(unsafe { get_module_function_table(7, std::ptr::null_mut(), std::ptr::null_mut()) }, 0);
        // SAFETY: a plain lookup.
        unsafe {
            assert!(!get_export_table(ETID_CALLBACKS).is_null());
            assert!(!get_export_table(ETID_VERSIONINFO).is_null());
            assert!(get_export_table(2).is_null());
        }
    }
}
