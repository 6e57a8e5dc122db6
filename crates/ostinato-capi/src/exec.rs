//! Executing a plan: `ost_exec_*`.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

use ostinato::BufferBinding;
use ostinato_runtime::{BackendKind, ExecHandle, ExecOptions, KernelSource, Memory, RuntimeError, Session, WaitTimeout};

use crate::graph::{ost_plan, ost_scalar, plan_of, scalar_type, CPlan};
use crate::ost_status::{self, *};
use crate::{guard, items, items_mut, lookup, need, put, register, runtime_error, text, unregister, Fallible, Object};

/// An opaque exec: a plan instantiated on a backend, replayed and patched. One thread at a time may
/// use it (calls from two threads are serialised); it may move between threads.
pub struct ost_exec {
    _private: [u8; 0],
}

/// Options of `ost_exec_create_ex`. Zero-initialise it (`ost_exec_options o = {0};`) for the defaults.
#[repr(C)]
pub struct ost_exec_options {
    /// CUDA: the device, as an ordinal (`"0"`), `GPU-<uuid>` or PCI bus id (`"0000:00:06.0"`); NULL:
    /// `OSTINATO_DEVICE`, else 0. Vulkan: an index, a UUID or part of the device's name; NULL:
    /// `OSTINATO_VK_DEVICE`, else the best device with a compute queue.
    pub device: *const c_char,
    /// CUDA: a `CUstream` of the device's primary context to replay on, in order with the caller's
    /// own work (it must outlive the exec); 0: a stream of the exec's own.
    pub cuda_stream: u64,
    /// CUDA: 1 to make the driver calls of replay and patch on a launch thread the exec owns.
    pub launch_thread: u32,
    /// CUDA, Vulkan, HSA: milliseconds a wait may take before it fails (0: the backend's default,
    /// 60 s).
    pub wait_timeout_ms: u64,
    /// Host: worker threads, 0 for the default (one per core where the plan can use them).
    pub host_threads: u32,
    /// CUDA, Vulkan: chain fusion, `"auto"`, `"on"` or `"off"`; NULL: `"auto"`.
    pub fusion: *const c_char,
    /// Any other backend setting, as comma-separated `key=value` pairs: the settings of the CLI's
    /// flags and Python's keywords (`pdl`, `tune`, `mode`, `trigger`, `graph-build`, `priority`, `shape`,
    /// `queues`, `ordering`, ...), e.g. `"pdl=off,ordering=barrier"`; NULL or `""`: none. An unknown
    /// key or value is `OST_ERR_ARGUMENT` naming it, on every backend.
    pub settings: *const c_char,
}

/// Device memory the caller owns, bound to a root buffer in place of an allocation of the exec's.
#[repr(C)]
pub struct ost_binding {
    /// The buffer's name.
    pub buffer: *const c_char,
    /// A CUDA device address (`CUdeviceptr`) of the exec's device.
    pub device_ptr: u64,
    /// Its length in bytes: the buffer's declared size.
    pub len: u64,
}

pub(crate) struct CExec {
    pub exec: Box<dyn ExecHandle>,
}

fn exec_of(e: *const ost_exec) -> Fallible<Arc<Mutex<CExec>>> {
    match lookup(e as usize, "exec")? {
        Object::Exec(e) => Ok(e),
        _ => Err((OST_ERR_HANDLE, "the handle is not an exec".into())),
    }
}

/// Runs `f` on the exec behind `e`.
fn with_exec<T>(e: *const ost_exec, f: impl FnOnce(&mut dyn ExecHandle) -> Result<T, RuntimeError>) -> Fallible<T> {
    let e = exec_of(e)?;
    let mut e = e.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut *e.exec).map_err(runtime_error)
}

/// Instantiates `plan` on `backend` (`"host"`, `"cuda"`, `"vulkan"` or `"hsa"`) with the defaults: the exec's own memory for
/// every buffer (initialised as a loaded graph file says, else zeroed), its own stream.
///
/// # Safety
/// `backend` is a NUL-terminated string; `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_create(plan: *const ost_plan, backend: *const c_char, out: *mut *mut ost_exec) -> ost_status {
    // SAFETY: forwarded with the caller's promises; NULL options and no bindings.
    unsafe { ost_exec_create_ex(plan, backend, std::ptr::null(), std::ptr::null(), 0, out) }
}

/// Instantiates `plan` on `backend` with `options` (NULL: the defaults) and `nbindings` buffers bound
/// to the caller's device memory (CUDA only). Every kernel is bound (compiled, loaded, checked against
/// its signature) before anything is allocated; on failure nothing is left alive and `out` is not
/// written.
///
/// # Safety
/// `backend` is a NUL-terminated string; `options` is NULL or points to an `ost_exec_options` whose
/// `device` is NULL or a NUL-terminated string and whose `cuda_stream` is 0 or a live stream of the
/// device's primary context that outlives the exec; `bindings` points to `nbindings` items (or the
/// count is 0), each naming a buffer and device memory that stays allocated, and is written by
/// nothing else while a replay may run, for the exec's lifetime; `out` points to writable memory for
/// one pointer.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_create_ex(
    plan: *const ost_plan,
    backend: *const c_char,
    options: *const ost_exec_options,
    bindings: *const ost_binding,
    nbindings: usize,
    out: *mut *mut ost_exec,
) -> ost_status {
    guard(|| {
        let p = plan_of(plan)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let backend = unsafe { text(backend, "backend") }?;
        need(out, "out")?;
        let kind: BackendKind = backend.parse().map_err(runtime_error)?;
        implemented(&p, kind)?;
        // SAFETY: NULL or a readable `ost_exec_options` with the strings and stream it promises, as the
        // caller vouches.
        let options = unsafe { exec_options(options.as_ref()) }?;
        let session = Session::open(&options.spec(kind).map_err(runtime_error)?).map_err(runtime_error)?;
        let g = p.plan.graph();
        let mut buffers = ostinato::allocate_all::<Memory>(&p.plan);
        // SAFETY: the caller vouches for `nbindings` items.
        for (i, b) in unsafe { items(bindings, nbindings, "bindings") }?.iter().enumerate() {
            // SAFETY: the caller vouches for each binding's NUL-terminated buffer name.
            let name = unsafe { text(b.buffer, &format!("bindings[{i}].buffer")) }?;
            let id = g.buffer_by_name(name).ok_or_else(|| (OST_ERR_ARGUMENT, format!("bindings[{i}]: no buffer `{name}`")))?;
            buffers[id.index()] = BufferBinding::External(device_memory(kind, b.device_ptr, b.len)?);
        }
        let backend_name = kind.as_str();
        let source = |k: usize| -> Result<KernelSource, RuntimeError> {
            if kind == BackendKind::Host {
                if let Some(h) = &p.host_fns[k] {
                    return Ok(KernelSource::Host(h.clone()));
                }
            }
            p.impls[k]
                .get(backend_name)
                .cloned()
                .map(KernelSource::Ref)
                .ok_or_else(|| RuntimeError::NoImplementation { kernel: g.kernels()[k].name.clone(), backend: backend_name })
        };
        let mut exec = session.instantiate_sources(&p.plan, &source, buffers).map_err(runtime_error)?;
        exec.write_inits(&p.inits).map_err(runtime_error)?;
        let key = register(Object::Exec(Arc::new(Mutex::new(CExec { exec }))));
        // SAFETY: checked non-NULL above.
        unsafe { put(out, key as *mut ost_exec, "out") }
    })
}

/// Refuses, before any device is opened, a kernel of `p` without an implementation for `kind`, saying
/// which call declares one.
fn implemented(p: &CPlan, kind: BackendKind) -> Fallible<()> {
    let name = kind.as_str();
    for (k, sig) in p.plan.graph().kernels().iter().enumerate() {
        let host_fn = kind == BackendKind::Host && p.host_fns[k].is_some();
        if host_fn || p.impls[k].contains_key(name) {
            continue;
        }
        let builtin = p.impls[k].values().find(|r| r.builtin_name().is_some()).map(|r| format!("\"{}\"", r.source));
        let (example, note) = match builtin {
            Some(b) => (b, ""),
            None => ("SOURCE".to_string(), " (SOURCE: a built-in, \"builtin:NAME\", or a kernel file)"),
        };
        let mut how = match &p.file {
            Some(file) => format!(
                "add `{name} = {example}` to kernel `{}` in {file}, or call ost_graph_set_kernel_impl(g, kernel, \"{name}\", {example}, NULL){note}",
                sig.name
            ),
            None => format!("declare one with ost_graph_set_kernel_impl(g, kernel, \"{name}\", {example}, NULL){note}"),
        };
        if kind == BackendKind::Host {
            how.push_str(" or ost_graph_set_host_kernel");
        }
        let mut has: Vec<&str> = p.impls[k].keys().map(String::as_str).collect();
        if p.host_fns[k].is_some() {
            has.push("host (a C function)");
        }
        let has = if has.is_empty() { "none".to_string() } else { has.join(", ") };
        return Err((OST_ERR_BIND, format!("kernel `{}` has no implementation for the {name} backend (it has: {has}): {how}", sig.name)));
    }
    Ok(())
}

/// The runtime's exec options that `o` (NULL: the defaults) sets.
///
/// # Safety
/// `o` is NULL or a readable `ost_exec_options` whose strings are NULL or NUL-terminated, and whose
/// `cuda_stream` is 0 or a live stream of the device's primary context that outlives the exec.
unsafe fn exec_options(o: Option<&ost_exec_options>) -> Fallible<ExecOptions> {
    let mut options = ExecOptions::default();
    let Some(o) = o else { return Ok(options) };
    if !o.device.is_null() {
        // SAFETY: the caller vouches that a non-NULL `device` is a NUL-terminated string.
        options.device = Some(unsafe { text(o.device, "options.device") }?.to_string());
    }
    if o.host_threads > 0 {
        options.threads = Some(o.host_threads as usize);
    }
    if o.wait_timeout_ms != 0 {
        options.wait_timeout = WaitTimeout::After(std::time::Duration::from_millis(o.wait_timeout_ms));
    }
    if o.launch_thread != 0 {
        options.set("launch", "thread").map_err(runtime_error)?;
    }
    if !o.fusion.is_null() {
        // SAFETY: the caller vouches that a non-NULL `fusion` is a NUL-terminated string.
        let name = unsafe { text(o.fusion, "options.fusion") }?;
        options.set("fusion", name).map_err(runtime_error)?;
    }
    if !o.settings.is_null() {
        // SAFETY: the caller vouches that a non-NULL `settings` is a NUL-terminated string.
        let settings = unsafe { text(o.settings, "options.settings") }?;
        for pair in settings.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| (OST_ERR_ARGUMENT, format!("options.settings: `{pair}` is not key=value")))?;
            options.set(key.trim(), value.trim()).map_err(runtime_error)?;
        }
    }
    #[cfg(feature = "cuda")]
    if o.cuda_stream != 0 {
        // SAFETY: the caller vouches for a live stream of the primary context that outlives the exec.
        options.stream = Some(unsafe { ostinato_runtime::ostinato_cuda::ExternalStream::from_raw(o.cuda_stream) });
    }
    Ok(options)
}

fn device_memory(kind: BackendKind, ptr: u64, len: u64) -> Fallible<Memory> {
    match kind {
        #[cfg(feature = "cuda")]
        // SAFETY: the caller of `ost_exec_create_ex` / `ost_exec_rebind` vouched for the memory.
        BackendKind::Cuda => Ok(Memory::Cuda(unsafe { ostinato_runtime::ostinato_cuda::DeviceMemory::new(ptr, len) })),
        _ => {
            let _ = (ptr, len);
            Err((OST_ERR_ARGUMENT, format!("the {kind} backend takes no device memory bindings")))
        }
    }
}

/// Frees an exec: waits for its replays (unless it is faulted by a hang), frees what it allocated.
/// NULL is a no-op; a freed exec is refused with `OST_ERR_HANDLE`.
#[no_mangle]
pub extern "C" fn ost_exec_free(e: *mut ost_exec) -> ost_status {
    guard(|| unregister(e as usize, "exec", |o| matches!(o, Object::Exec(_))))
}

/// Submits `count` replays of the whole plan (asynchronous on CUDA: returns once submitted).
#[no_mangle]
pub extern "C" fn ost_exec_replay(e: *mut ost_exec, count: u32) -> ost_status {
    guard(|| {
        with_exec(e, |x| {
            for _ in 0..count {
                x.replay()?;
            }
            Ok(())
        })
    })
}

/// Returns once every submitted replay finished; reports their first failure (a fault, a timeout).
#[no_mangle]
pub extern "C" fn ost_exec_wait(e: *mut ost_exec) -> ost_status {
    guard(|| with_exec(e, |x| x.wait()))
}

/// Reads `len` bytes at `offset` of buffer `buffer` into `dst` (waits for submitted replays first).
///
/// # Safety
/// `buffer` is a NUL-terminated string; `dst` points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_read(e: *mut ost_exec, buffer: *const c_char, offset: usize, dst: *mut c_void, len: usize) -> ost_status {
    guard(|| {
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(buffer, "buffer") }?;
        // SAFETY: the caller vouches for `len` writable bytes.
        let out = unsafe { items_mut(dst as *mut u8, len, "dst") }?;
        with_exec(e, |x| {
            let id = <dyn ExecHandle>::buffer_id(x, name)?;
            x.read_buffer(id, offset as u64, out)
        })
    })
}

/// Writes `len` bytes from `src` at `offset` of buffer `buffer` (waits for submitted replays first).
///
/// # Safety
/// `buffer` is a NUL-terminated string; `src` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_write(e: *mut ost_exec, buffer: *const c_char, offset: usize, src: *const c_void, len: usize) -> ost_status {
    guard(|| {
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(buffer, "buffer") }?;
        // SAFETY: the caller vouches for `len` readable bytes.
        let data = unsafe { items(src as *const u8, len, "src") }?;
        with_exec(e, |x| {
            let id = <dyn ExecHandle>::buffer_id(x, name)?;
            x.write_buffer(id, offset as u64, data)
        })
    })
}

/// Patches slot `slot` for the following replays; its type must be the slot's.
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot(e: *mut ost_exec, slot: *const c_char, value: ost_scalar) -> ost_status {
    guard(|| {
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(slot, "slot") }?;
        let v = ostinato::Scalar { ty: scalar_type(value.type_)?, bits: value.bits };
        with_exec(e, |x| <dyn ExecHandle>::set_slot_named(x, name, v))
    })
}

/// Patches a `u32` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_u32(e: *mut ost_exec, slot: *const c_char, value: u32) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_u32(value)) }
}

/// Patches a `i32` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_i32(e: *mut ost_exec, slot: *const c_char, value: i32) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_i32(value)) }
}

/// Patches a `u64` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_u64(e: *mut ost_exec, slot: *const c_char, value: u64) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_u64(value)) }
}

/// Patches a `i64` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_i64(e: *mut ost_exec, slot: *const c_char, value: i64) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_i64(value)) }
}

/// Patches a `f32` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_f32(e: *mut ost_exec, slot: *const c_char, value: f32) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_f32(value)) }
}

/// Patches a `f64` slot (see `ost_exec_set_slot`).
///
/// # Safety
/// `slot` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_set_slot_f64(e: *mut ost_exec, slot: *const c_char, value: f64) -> ost_status {
    // SAFETY: forwarded with the caller's promise.
    unsafe { ost_exec_set_slot(e, slot, crate::graph::ost_scalar_f64(value)) }
}

/// Rebinds root buffer `buffer` to the caller's device memory (same length) from the next replay on
/// (CUDA; the graph's nodes are patched in place). Refused while a replay may run (`OST_ERR_STATE`:
/// call `ost_exec_wait` first), for a view and at another length.
///
/// # Safety
/// `buffer` is a NUL-terminated string; the memory is as `ost_exec_create_ex` requires of a binding.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_rebind(e: *mut ost_exec, buffer: *const c_char, device_ptr: u64, len: u64) -> ost_status {
    guard(|| {
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(buffer, "buffer") }?;
        let ex = exec_of(e)?;
        let mut ex = ex.lock().unwrap_or_else(|p| p.into_inner());
        let kind = ex.exec.backend();
        let memory = device_memory(kind, device_ptr, len)?;
        let id = <dyn ExecHandle>::buffer_id(&*ex.exec, name).map_err(runtime_error)?;
        ex.exec.rebind(id, memory).map_err(runtime_error)
    })
}

/// What `ost_exec_trace` reports of the last replay it traced.
#[repr(C)]
pub struct ost_trace_summary {
    /// Replays traced.
    pub replays: u64,
    /// Bars in the last replay: one per launch or dispatch (a fused group is one).
    pub bars: u64,
    /// The last replay's time on the device: its first start to its last end, in ns.
    pub step_ns: u64,
    /// Its bars' durations added up (more than `busy_ns` where they overlap).
    pub sum_ns: u64,
    /// Time some bar ran.
    pub busy_ns: u64,
    /// Time no bar ran between the first start and the last end, and in how many gaps.
    pub idle_ns: u64,
    pub gaps: u64,
}

/// Runs `replays` replays one after another with every node timed (CUPTI on CUDA, timestamp queries
/// on Vulkan, the worker threads' clock on the host): the buffers end as after `replays` replays.
/// Writes Chrome/Perfetto trace-event JSON to `json_path` and an SVG timeline to `svg_path` where they
/// are non-NULL, and the last replay's sums to `summary` where it is non-NULL. A backend that cannot
/// time nodes is refused (`OST_ERR_BACKEND` without CUPTI, `OST_ERR_UNSUPPORTED` without
/// timestamps) before anything runs.
///
/// # Safety
/// `json_path` and `svg_path` are NULL or NUL-terminated strings; `summary` is NULL or points to a
/// writable `ost_trace_summary`.
#[no_mangle]
pub unsafe extern "C" fn ost_exec_trace(
    e: *mut ost_exec,
    replays: u32,
    json_path: *const c_char,
    svg_path: *const c_char,
    summary: *mut ost_trace_summary,
) -> ost_status {
    guard(|| {
        // SAFETY: NULL or NUL-terminated strings, as the caller vouches.
        let json = if json_path.is_null() { None } else { Some(std::path::PathBuf::from(unsafe { text(json_path, "json_path") }?)) };
        // SAFETY: as above.
        let svg = if svg_path.is_null() { None } else { Some(std::path::PathBuf::from(unsafe { text(svg_path, "svg_path") }?)) };
        let sums = with_exec(e, |x| {
            let t = x.trace(replays as usize)?;
            ostinato_runtime::trace::write(&t, x.plan(), json.as_deref(), svg.as_deref())?;
            let last = t.replays.len().checked_sub(1);
            let s = last.and_then(|r| t.summary(r)).unwrap_or_default();
            Ok(ost_trace_summary {
                replays: t.replays.len() as u64,
                bars: last.map_or(0, |r| t.replays[r].len() as u64),
                step_ns: s.step_ns,
                sum_ns: s.sum_ns,
                busy_ns: s.busy_ns,
                idle_ns: s.idle_ns,
                gaps: s.gaps.len() as u64,
            })
        })?;
        if !summary.is_null() {
            // SAFETY: non-NULL, and the caller vouches it is writable.
            unsafe { summary.write(sums) };
        }
        Ok(())
    })
}
