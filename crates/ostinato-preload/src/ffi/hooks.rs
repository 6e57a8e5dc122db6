//! The wrapped driver entry points, by (name, version, flags): instantiate (every signature), launch
//! (legacy and per-thread stream), destroy, and the module and library loads (and unloads) whose
//! images the interposer keeps. Each wrapper forwards to the one real pointer its slot holds and
//! returns the real result; the observing around it is guarded and skipped on any failure.

use std::ffi::{c_char, c_int, c_uint, c_void};

use super::procaddr;
use super::types::{CuResult, Handle, InstantiateParams, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, PROC_PER_THREAD};
use super::{adopted, driver, guarded, memory, mutate, observing, own_work, Slot};
use crate::log::{AdoptionLog, Call};
use crate::state::{LaunchAs, Stream};
use crate::store::{self, Held, Origin};

type InstantiateFlags = unsafe extern "C" fn(*mut Handle, Handle, u64) -> CuResult;
type InstantiateLegacy = unsafe extern "C" fn(*mut Handle, Handle, *mut Handle, *mut c_char, usize) -> CuResult;
type InstantiateWithParams = unsafe extern "C" fn(*mut Handle, Handle, *mut InstantiateParams) -> CuResult;
type Launch = unsafe extern "C" fn(Handle, Handle) -> CuResult;
type ExecDestroy = unsafe extern "C" fn(Handle) -> CuResult;
type ModuleLoadData = unsafe extern "C" fn(*mut Handle, *const c_void) -> CuResult;
type ModuleLoadDataEx = unsafe extern "C" fn(*mut Handle, *const c_void, c_uint, *mut c_int, *mut *mut c_void) -> CuResult;
type LibraryLoadData = unsafe extern "C" fn(*mut Handle, *const c_void, *mut c_int, *mut *mut c_void, c_uint, *mut c_int, *mut *mut c_void, c_uint) -> CuResult;
type Unload = unsafe extern "C" fn(Handle) -> CuResult;

static INST_FLAGS: Slot = Slot::new();
static INST_V12: Slot = Slot::new();
static INST_LEGACY: Slot = Slot::new();
static INST_PARAMS: Slot = Slot::new();
static INST_PARAMS_PTSZ: Slot = Slot::new();
static LAUNCH: Slot = Slot::new();
static LAUNCH_PTSZ: Slot = Slot::new();
static EXEC_DESTROY: Slot = Slot::new();
static MODULE_LOAD_DATA: Slot = Slot::new();
static MODULE_LOAD_DATA_EX: Slot = Slot::new();
static MODULE_LOAD_FAT_BINARY: Slot = Slot::new();
static LIBRARY_LOAD_DATA: Slot = Slot::new();
static MODULE_UNLOAD: Slot = Slot::new();
static LIBRARY_UNLOAD: Slot = Slot::new();

/// The wrapper handed out for `name` asked at `version` with `flags`, whose real entry point is
/// `real`; `None`: hand out `real` itself.
pub(super) fn wrapper_for(name: &[u8], version: c_int, flags: u64, real: usize) -> Option<usize> {
    let per_thread = flags & PROC_PER_THREAD != 0;
    let (slot, wrapper): (&Slot, usize) = match name {
        b"cuGetProcAddress" => procaddr::through_itself(version),
        // Below 12000 `cuGraphInstantiate` has the five-argument signature (v10000, v11000); from
        // 12000 the header maps it to `cuGraphInstantiateWithFlags`, which is wrapped only where the
        // driver's pointer is that function's.
        b"cuGraphInstantiate" if version < 12000 => (&INST_LEGACY, instantiate_legacy as InstantiateLegacy as usize),
        b"cuGraphInstantiate" if real == procaddr::real_entry(c"cuGraphInstantiateWithFlags", 11040) => {
            (&INST_V12, instantiate_v12 as InstantiateFlags as usize)
        }
        b"cuGraphInstantiateWithFlags" => (&INST_FLAGS, instantiate_with_flags as InstantiateFlags as usize),
        b"cuGraphInstantiateWithParams" if per_thread => (&INST_PARAMS_PTSZ, instantiate_with_params_ptsz as InstantiateWithParams as usize),
        b"cuGraphInstantiateWithParams" => (&INST_PARAMS, instantiate_with_params as InstantiateWithParams as usize),
        b"cuGraphLaunch" if per_thread => (&LAUNCH_PTSZ, launch_ptsz as Launch as usize),
        b"cuGraphLaunch" => (&LAUNCH, launch as Launch as usize),
        b"cuGraphExecDestroy" => (&EXEC_DESTROY, exec_destroy as ExecDestroy as usize),
        b"cuModuleLoadData" => (&MODULE_LOAD_DATA, module_load_data as ModuleLoadData as usize),
        b"cuModuleLoadDataEx" => (&MODULE_LOAD_DATA_EX, module_load_data_ex as ModuleLoadDataEx as usize),
        b"cuModuleLoadFatBinary" => (&MODULE_LOAD_FAT_BINARY, module_load_fat_binary as ModuleLoadData as usize),
        b"cuLibraryLoadData" => (&LIBRARY_LOAD_DATA, library_load_data as LibraryLoadData as usize),
        b"cuModuleUnload" => (&MODULE_UNLOAD, module_unload as Unload as usize),
        b"cuLibraryUnload" => (&LIBRARY_UNLOAD, library_unload as Unload as usize),
        _ => return mutate::wrapper_for(name, version, flags, real),
    };
    (real != wrapper && slot.claim(real)).then_some(wrapper)
}

/// Reads `graph` back (before the real call, which `call` makes), adopts it where it can (the adopted
/// graph instantiated beside the application's executable graph), then logs the decision with the
/// call's result. `upload`: the stream an instantiate with params uploads on.
fn observe_instantiate(api: &'static str, graph: Handle, flags: u64, upload: Option<Handle>, exec: *mut Handle, call: impl FnOnce() -> CuResult) -> CuResult {
    let Some(state) = observing() else {
        return call();
    };
    let read = own_work(|| driver::with_driver(|d| state.read(d, graph as u64, flags))).flatten();
    let rc = call();
    if let Some((model, decision, read_us)) = read {
        // SAFETY: on success the driver wrote the executable graph to the caller's `exec`.
        let exec = if rc == CUDA_SUCCESS && !exec.is_null() { unsafe { *exec as u64 } } else { 0 };
        let (adoption, built) = if exec == 0 {
            (AdoptionLog::not("not_adopted", "the instantiate failed"), None)
        } else {
            own_work(|| adopted::adopt_graph(state, graph as u64, &model, &decision, flags, upload, None))
                .unwrap_or_else(|| (AdoptionLog::not("not_adopted", "the interposer's adoption failed"), None))
        };
        let pair = built.as_ref().map(adopted::Built::pair);
        guarded(|| state.record(&Call { api, graph: graph as u64, exec, result: rc, read_us }, flags, &model, &decision, &adoption, pair));
        if exec != 0 && decision.adoptable() {
            own_work(|| adopted::keep_replica(state, exec, graph as u64, &model, built.as_ref()));
        }
    }
    rc
}

/// An instantiate of the flags signature through the real entry point `slot` holds.
pub(super) fn instantiate_flags_in(slot: &Slot, api: &'static str, exec: *mut Handle, graph: Handle, flags: u64) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<InstantiateFlags>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    observe_instantiate(api, graph, flags, None, exec, || unsafe { real(exec, graph, flags) })
}

/// `cuGraphInstantiateWithFlags`.
unsafe extern "C" fn instantiate_with_flags(exec: *mut Handle, graph: Handle, flags: u64) -> CuResult {
    instantiate_flags_in(&INST_FLAGS, "cuGraphInstantiateWithFlags", exec, graph, flags)
}

/// `cuGraphInstantiate` asked at 12000 or later (the signature of `cuGraphInstantiateWithFlags`).
unsafe extern "C" fn instantiate_v12(exec: *mut Handle, graph: Handle, flags: u64) -> CuResult {
    instantiate_flags_in(&INST_V12, "cuGraphInstantiate", exec, graph, flags)
}

/// An instantiate of the legacy signature (error node and log buffer; no flags) through `slot`.
pub(super) fn instantiate_legacy_in(slot: &Slot, exec: *mut Handle, graph: Handle, err_node: *mut Handle, log: *mut c_char, log_len: usize) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<InstantiateLegacy>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    observe_instantiate("cuGraphInstantiate", graph, 0, None, exec, || unsafe { real(exec, graph, err_node, log, log_len) })
}

/// `cuGraphInstantiate` asked below 12000.
unsafe extern "C" fn instantiate_legacy(exec: *mut Handle, graph: Handle, err_node: *mut Handle, log: *mut c_char, log_len: usize) -> CuResult {
    instantiate_legacy_in(&INST_LEGACY, exec, graph, err_node, log, log_len)
}

pub(super) fn with_params(slot: &Slot, api: &'static str, exec: *mut Handle, graph: Handle, params: *mut InstantiateParams) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<InstantiateWithParams>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: `params`, where not null, is the caller's instantiate params (the driver reads it too).
    let (flags, upload) = if params.is_null() { (0, None) } else { unsafe { ((*params).flags, Some((*params).upload_stream)) } };
    // SAFETY: the caller's arguments, forwarded unchanged.
    observe_instantiate(api, graph, flags, upload, exec, || unsafe { real(exec, graph, params) })
}

/// `cuGraphInstantiateWithParams`.
unsafe extern "C" fn instantiate_with_params(exec: *mut Handle, graph: Handle, params: *mut InstantiateParams) -> CuResult {
    with_params(&INST_PARAMS, "cuGraphInstantiateWithParams", exec, graph, params)
}

/// `cuGraphInstantiateWithParams_ptsz`.
unsafe extern "C" fn instantiate_with_params_ptsz(exec: *mut Handle, graph: Handle, params: *mut InstantiateParams) -> CuResult {
    with_params(&INST_PARAMS_PTSZ, "cuGraphInstantiateWithParams_ptsz", exec, graph, params)
}

pub(super) fn launch_with(slot: &Slot, exec: Handle, stream: Handle, per_thread: bool) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<Launch>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    let at = Stream { handle: stream as u64, per_thread };
    let runs = observing().and_then(|s| guarded(|| s.launch(exec as u64, at, mutate::unwrapped()))).unwrap_or(LaunchAs::Own);
    match runs {
        // SAFETY: the adopted graph's executable graph, on the caller's stream.
        LaunchAs::Adopted(adopted) => unsafe { real(adopted as usize as Handle, stream) },
        LaunchAs::AdoptedAfter(adopted, last) => {
            guarded(|| adopted::follow(last, at));
            // SAFETY: the adopted graph's executable graph, on the caller's stream.
            unsafe { real(adopted as usize as Handle, stream) }
        }
        LaunchAs::OwnAfter(last) => {
            guarded(|| adopted::follow(last, at));
            // SAFETY: the caller's arguments, forwarded unchanged.
            unsafe { real(exec, stream) }
        }
        // SAFETY: the caller's arguments, forwarded unchanged.
        LaunchAs::Own => unsafe { real(exec, stream) },
    }
}

/// `cuGraphLaunch`.
unsafe extern "C" fn launch(exec: Handle, stream: Handle) -> CuResult {
    launch_with(&LAUNCH, exec, stream, false)
}

/// `cuGraphLaunch_ptsz`.
unsafe extern "C" fn launch_ptsz(exec: Handle, stream: Handle) -> CuResult {
    launch_with(&LAUNCH_PTSZ, exec, stream, true)
}

/// `cuGraphExecDestroy` through `slot`: the application's executable graph, and its adopted graph
/// with it.
pub(super) fn exec_destroy_in(slot: &Slot, exec: Handle) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<ExecDestroy>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's argument, forwarded unchanged.
    let rc = unsafe { real(exec) };
    if rc == CUDA_SUCCESS {
        if let Some(state) = observing() {
            if let Some(Some((a, replica))) = guarded(|| state.destroyed(exec as u64)) {
                if let Some(a) = a {
                    guarded(|| adopted::destroy(&a));
                }
                if let Some(replica) = replica {
                    guarded(|| adopted::destroy_replica(&replica));
                }
            }
        }
    }
    rc
}

/// `cuGraphExecDestroy`.
unsafe extern "C" fn exec_destroy(exec: Handle) -> CuResult {
    exec_destroy_in(&EXEC_DESTROY, exec)
}

/// Keeps the image a successful load was given and maps the handle the driver wrote to `out`.
fn keep_loaded(rc: CuResult, out: *mut Handle, image: *const c_void, origin: Origin, library: bool) {
    if rc != CUDA_SUCCESS || out.is_null() || image.is_null() {
        return;
    }
    let Some(state) = observing() else { return };
    own_work(|| {
        // SAFETY: the load succeeded: the driver wrote the handle to `out`.
        let handle = unsafe { *out as u64 };
        // SAFETY: the driver accepted the image: its headers give its true length.
        let held = match unsafe { memory::image(image.cast()) } {
            Ok(bytes) => state.keep(bytes, origin),
            Err(e) => Held::NotKept(format!("the image could not be read: {e}")),
        };
        state.bind(if library { store::Handle::Library(handle) } else { store::Handle::Module(handle) }, held);
    });
}

/// `cuModuleLoadData` (and `cuModuleLoadFatBinary`, of the same signature, as `origin` says)
/// through `slot`.
pub(super) fn module_load_in(slot: &Slot, origin: Origin, module: *mut Handle, image: *const c_void) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<ModuleLoadData>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { real(module, image) };
    keep_loaded(rc, module, image, origin, false);
    rc
}

/// `cuModuleLoadData`.
unsafe extern "C" fn module_load_data(module: *mut Handle, image: *const c_void) -> CuResult {
    module_load_in(&MODULE_LOAD_DATA, Origin::ModuleLoadData, module, image)
}

/// `cuModuleLoadDataEx` through `slot`.
pub(super) fn module_load_ex_in(slot: &Slot, module: *mut Handle, image: *const c_void, n: c_uint, options: *mut c_int, values: *mut *mut c_void) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<ModuleLoadDataEx>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { real(module, image, n, options, values) };
    keep_loaded(rc, module, image, Origin::ModuleLoadDataEx, false);
    rc
}

/// `cuModuleLoadDataEx`.
unsafe extern "C" fn module_load_data_ex(module: *mut Handle, image: *const c_void, n: c_uint, options: *mut c_int, values: *mut *mut c_void) -> CuResult {
    module_load_ex_in(&MODULE_LOAD_DATA_EX, module, image, n, options, values)
}

/// `cuModuleLoadFatBinary`.
unsafe extern "C" fn module_load_fat_binary(module: *mut Handle, fat: *const c_void) -> CuResult {
    module_load_in(&MODULE_LOAD_FAT_BINARY, Origin::ModuleLoadFatBinary, module, fat)
}

/// `cuLibraryLoadData` through `slot`.
#[allow(clippy::too_many_arguments)] // the driver's signature
pub(super) fn library_load_in(
    slot: &Slot,
    library: *mut Handle,
    code: *const c_void,
    jit_options: *mut c_int,
    jit_values: *mut *mut c_void,
    jit_count: c_uint,
    library_options: *mut c_int,
    library_values: *mut *mut c_void,
    library_count: c_uint,
) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<LibraryLoadData>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    let rc = unsafe { real(library, code, jit_options, jit_values, jit_count, library_options, library_values, library_count) };
    keep_loaded(rc, library, code, Origin::LibraryLoadData, true);
    rc
}

/// `cuLibraryLoadData`.
#[allow(clippy::too_many_arguments)] // the driver's signature
unsafe extern "C" fn library_load_data(
    library: *mut Handle,
    code: *const c_void,
    jit_options: *mut c_int,
    jit_values: *mut *mut c_void,
    jit_count: c_uint,
    library_options: *mut c_int,
    library_values: *mut *mut c_void,
    library_count: c_uint,
) -> CuResult {
    library_load_in(&LIBRARY_LOAD_DATA, library, code, jit_options, jit_values, jit_count, library_options, library_values, library_count)
}

pub(super) fn unload_with(slot: &Slot, handle: Handle, library: bool) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<Unload>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's argument, forwarded unchanged.
    let rc = unsafe { real(handle) };
    if rc == CUDA_SUCCESS {
        if let Some(state) = observing() {
            let h = if library { store::Handle::Library(handle as u64) } else { store::Handle::Module(handle as u64) };
            guarded(|| state.unbind(h));
        }
    }
    rc
}

/// `cuModuleUnload`.
unsafe extern "C" fn module_unload(module: Handle) -> CuResult {
    unload_with(&MODULE_UNLOAD, module, false)
}

/// `cuLibraryUnload`.
unsafe extern "C" fn library_unload(library: Handle) -> CuResult {
    unload_with(&LIBRARY_UNLOAD, library, true)
}

/// cudart's next `__cudaRegisterFatBinary` (the shared runtime's).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
static REGISTER_FAT_BINARY: Slot = Slot::new();

/// `__cudaRegisterFatBinary`, which the shared cudart exports and every object nvcc compiled calls
/// at load with its embedded fat binary: the image is kept (it has no module handle yet: cudart
/// loads it lazily through `cuLibraryLoadData`, where the handle is mapped), then the call goes on
/// to the next definition.
///
/// # Safety
/// The caller's contract is cudart's.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(test)))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cudaRegisterFatBinary(fat: *mut c_void) -> *mut *mut c_void {
    type Register = unsafe extern "C" fn(*mut c_void) -> *mut *mut c_void;
    if REGISTER_FAT_BINARY.raw() == 0 {
        REGISTER_FAT_BINARY.claim(super::dlsym::next(c"__cudaRegisterFatBinary"));
    }
    if let Some(state) = observing() {
        own_work(|| {
            // SAFETY: cudart's wrapper of a fat binary nvcc embedded, valid while its object is loaded.
            if let Ok(bytes) = unsafe { memory::image(fat.cast()) } {
                state.keep(bytes, Origin::RegisterFatBinary);
            }
        });
    }
    // SAFETY: the slot holds the next definition of this symbol, of this signature.
    match unsafe { REGISTER_FAT_BINARY.get::<Register>() } {
        // SAFETY: the caller's argument, forwarded unchanged.
        Some(next) => unsafe { next(fat) },
        None => std::ptr::null_mut(),
    }
}
