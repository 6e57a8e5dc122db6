//! CUPTI's Activity API, loaded at run time (an FFI module), as a trace needs it: kernel
//! (`CONCURRENT_KERNEL`), memcpy and memset records with their start, end, stream and graph node id;
//! external-correlation records tying each to the replay (and, in eager mode, the launch) it came
//! from; and the resource callback that reports each node a graph instantiation clones, so a graph
//! exec's records can be mapped to the nodes Ostinato added.
//!
//! `libcupti.so` is found like NCCL: `OSTINATO_CUPTI`, the loader's path, the toolkit
//! (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`: `extras/CUPTI/lib64`, `lib64`), a Python
//! environment's `nvidia-cuda-cupti` wheel (`nvidia/cuda_cupti/lib`, `nvidia/cu13/lib`). Without it,
//! [`CudaError::CuptiMissing`] names every place looked. Hand-written because the maintained binding
//! (cudarc's `cupti` module) loads the library only by name from the loader's path and panics where
//! it is missing; the record layouts are a `#[repr(C)]` prefix of CUPTI's own (checked field by field
//! against cudarc's bindgen output in the tests), read only after the record's `kind` and the bytes
//! left in the buffer say the prefix is there.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use libloading::Library;

use crate::error::{CudaError, Result};

/// `CUpti_ActivityKind` values.
const KIND_MEMCPY: u32 = 1;
const KIND_MEMSET: u32 = 2;
const KIND_DRIVER: u32 = 4;
const KIND_CONCURRENT_KERNEL: u32 = 10;
const KIND_EXTERNAL_CORRELATION: u32 = 39;
/// What a trace enables (the driver API records carry the external correlation).
const KINDS: [u32; 5] = [KIND_DRIVER, KIND_EXTERNAL_CORRELATION, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET];
/// `CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`.
const EXTERNAL_KIND: u32 = 3;
/// `CUPTI_CB_DOMAIN_RESOURCE`, `CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED`.
const DOMAIN_RESOURCE: u32 = 3;
const CBID_GRAPHNODE_CLONED: u32 = 20;
/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`.
const FLUSH_FORCED: u32 = 1;
/// `CUPTI_ERROR_MAX_LIMIT_REACHED`: no more records in a buffer.
const MAX_LIMIT_REACHED: c_int = 12;
/// Bytes of each activity buffer handed to CUPTI.
const BUFFER_BYTES: usize = 8 << 20;

/// The prefix of `CUpti_ActivityKernel5`..`13` (every later version appends fields).
// SAFETY (layout): `#[repr(C)]` with the C types of cupti_activity.h in their order; every field is
// naturally aligned there, so CUPTI's `packed(8)` places them at the same offsets
// (`record_prefixes_match_cuptis_own_layouts` checks each against cudarc's bindgen struct).
#[repr(C)]
#[derive(Clone, Copy)]
struct KernelRecord {
    kind: u32,
    cache_config: u8,
    shared_memory_config: u8,
    registers_per_thread: u16,
    partitioned_cache_requested: u32,
    partitioned_cache_executed: u32,
    start: u64,
    end: u64,
    completed: u64,
    device_id: u32,
    context_id: u32,
    stream_id: u32,
    grid: [i32; 3],
    block: [i32; 3],
    static_shared_memory: i32,
    dynamic_shared_memory: i32,
    local_memory_per_thread: u32,
    local_memory_total: u32,
    correlation_id: u32,
    grid_id: i64,
    name: *const c_char,
    reserved0: *mut c_void,
    queued: u64,
    submitted: u64,
    launch_type: u8,
    carveout_requested_set: u8,
    carveout_requested: u8,
    padding: u8,
    shared_memory_executed: u32,
    graph_node_id: u64,
    shmem_limit_config: u32,
    graph_id: u32,
}

/// The prefix of `CUpti_ActivityMemcpy5`..`7`.
// SAFETY (layout): as for `KernelRecord`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemcpyRecord {
    kind: u32,
    copy_kind: u8,
    src_kind: u8,
    dst_kind: u8,
    flags: u8,
    bytes: u64,
    start: u64,
    end: u64,
    device_id: u32,
    context_id: u32,
    stream_id: u32,
    correlation_id: u32,
    runtime_correlation_id: u32,
    pad: u32,
    reserved0: *mut c_void,
    graph_node_id: u64,
    graph_id: u32,
    channel_id: u32,
}

/// The prefix of `CUpti_ActivityMemset4`..`5`.
// SAFETY (layout): as for `KernelRecord`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemsetRecord {
    kind: u32,
    value: u32,
    bytes: u64,
    start: u64,
    end: u64,
    device_id: u32,
    context_id: u32,
    stream_id: u32,
    correlation_id: u32,
    flags: u16,
    memory_kind: u16,
    pad: u32,
    reserved0: *mut c_void,
    graph_node_id: u64,
    graph_id: u32,
    channel_id: u32,
}

/// `CUpti_ActivityExternalCorrelation`.
// SAFETY (layout): as for `KernelRecord`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ExternalRecord {
    kind: u32,
    external_kind: u32,
    external_id: u64,
    correlation_id: u32,
    reserved: u32,
}

/// The start of `CUpti_ResourceData` and `CUpti_GraphData` (cupti_callbacks.h), as far as a clone
/// callback reads them.
// SAFETY (layout): pointers and a union of one pointer, then `CUgraphNodeType` (a C enum, 4 bytes)
// padded to the next pointer, as the C compiler lays them out; checked against cudarc in the tests.
#[repr(C)]
struct ResourceData {
    context: *mut c_void,
    resource_handle: *mut c_void,
    resource_descriptor: *mut c_void,
}

#[repr(C)]
struct GraphData {
    graph: *mut c_void,
    original_graph: *mut c_void,
    node: *mut c_void,
    original_node: *mut c_void,
    node_type: u32,
    dependency: *mut c_void,
    graph_exec: *mut c_void,
}

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// The entry points, copied out of the library (which stays loaded for the process).
struct Api {
    _lib: Library,
    path: String,
    version: u32,
    result_string: unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int,
    register_callbacks: unsafe extern "C" fn(Option<RequestFn>, Option<CompleteFn>) -> c_int,
    enable: unsafe extern "C" fn(u32) -> c_int,
    disable: unsafe extern "C" fn(u32) -> c_int,
    flush_all: unsafe extern "C" fn(u32) -> c_int,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> c_int,
    dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> c_int,
    push_external: unsafe extern "C" fn(u32, u64) -> c_int,
    pop_external: unsafe extern "C" fn(u32, *mut u64) -> c_int,
    subscribe: unsafe extern "C" fn(*mut *mut c_void, Option<CallbackFn>, *mut c_void) -> c_int,
    unsubscribe: unsafe extern "C" fn(*mut c_void) -> c_int,
    enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> c_int,
    graph_node_id: unsafe extern "C" fn(*mut c_void, *mut u64) -> c_int,
    /// `cuptiFinalize`: detaches CUPTI from the process (absent from old CUPTI: then it stays).
    finalize: Option<unsafe extern "C" fn() -> c_int>,
}

/// Where to look for `libcupti.so`, in order: `OSTINATO_CUPTI`, the loader's names, the toolkit,
/// Python environments' wheels.
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("OSTINATO_CUPTI").map(PathBuf::from).into_iter().collect();
    out.extend(["libcupti.so", "libcupti.so.13", "libcupti.so.12"].map(PathBuf::from));
    let mut toolkits: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    toolkits.push("/usr/local/cuda".into());
    for t in toolkits {
        out.push(t.join("extras/CUPTI/lib64/libcupti.so"));
        out.push(t.join("lib64/libcupti.so"));
    }
    out.extend(crate::wheels::nvidia_wheel_files(&["cuda_cupti/lib/libcupti.so.12", "cuda_cupti/lib/libcupti.so.13", "cu13/lib/libcupti.so.13"]));
    out
}

fn load() -> std::result::Result<Api, String> {
    let tried = candidates();
    // SAFETY: loading CUPTI runs its initialisers, which have no preconditions.
    let (lib, path) = tried.iter().find_map(|p| unsafe { Library::new(p) }.ok().map(|l| (l, p.display().to_string()))).ok_or_else(|| {
        let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        format!("libcupti.so not found: looked at {} (set OSTINATO_CUPTI to its path)", list.join(", "))
    })?;
    fn missing(name: &str) -> impl Fn(libloading::Error) -> String + '_ {
        move |e| format!("libcupti.so has no `{name}`: {e}")
    }
    // SAFETY: each symbol is looked up by its CUPTI name with the signature of cupti_activity.h /
    // cupti_callbacks.h (CUPTI 11 and later); the pointers stay valid while `lib` is loaded, which the
    // `Api` keeps for the process.
    unsafe {
        let get_version: unsafe extern "C" fn(*mut u32) -> c_int = *lib.get(b"cuptiGetVersion\0").map_err(missing("cuptiGetVersion"))?;
        let mut version = 0;
        get_version(&mut version);
        Ok(Api {
            path,
            version,
            result_string: *lib.get(b"cuptiGetResultString\0").map_err(missing("cuptiGetResultString"))?,
            register_callbacks: *lib.get(b"cuptiActivityRegisterCallbacks\0").map_err(missing("cuptiActivityRegisterCallbacks"))?,
            enable: *lib.get(b"cuptiActivityEnable\0").map_err(missing("cuptiActivityEnable"))?,
            disable: *lib.get(b"cuptiActivityDisable\0").map_err(missing("cuptiActivityDisable"))?,
            flush_all: *lib.get(b"cuptiActivityFlushAll\0").map_err(missing("cuptiActivityFlushAll"))?,
            next_record: *lib.get(b"cuptiActivityGetNextRecord\0").map_err(missing("cuptiActivityGetNextRecord"))?,
            dropped: *lib.get(b"cuptiActivityGetNumDroppedRecords\0").map_err(missing("cuptiActivityGetNumDroppedRecords"))?,
            push_external: *lib.get(b"cuptiActivityPushExternalCorrelationId\0").map_err(missing("cuptiActivityPushExternalCorrelationId"))?,
            pop_external: *lib.get(b"cuptiActivityPopExternalCorrelationId\0").map_err(missing("cuptiActivityPopExternalCorrelationId"))?,
            subscribe: *lib.get(b"cuptiSubscribe\0").map_err(missing("cuptiSubscribe"))?,
            unsubscribe: *lib.get(b"cuptiUnsubscribe\0").map_err(missing("cuptiUnsubscribe"))?,
            enable_callback: *lib.get(b"cuptiEnableCallback\0").map_err(missing("cuptiEnableCallback"))?,
            graph_node_id: *lib.get(b"cuptiGetGraphNodeId\0").map_err(missing("cuptiGetGraphNodeId"))?,
            finalize: lib.get(b"cuptiFinalize\0").ok().map(|f| *f),
            _lib: lib,
        })
    }
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| CudaError::CuptiMissing(e.clone()))
}

/// The CUPTI library a trace would use — its path and API version — or why there is none.
pub fn library() -> Result<String> {
    api().map(|a| format!("{} (CUPTI API version {})", a.path, a.version))
}

fn check(op: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let mut p: *const c_char = std::ptr::null();
    let name = match api() {
        // SAFETY: writes a pointer to a static NUL-terminated string (or leaves it null) for any code.
        Ok(a) if unsafe { (a.result_string)(code, &mut p) } == 0 && !p.is_null() => unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
        _ => format!("CUPTI_ERROR_{code}"),
    };
    Err(CudaError::Cupti { op, code, name })
}

/// What a traced run collected.
#[derive(Default)]
pub(crate) struct Collected {
    pub activities: Vec<Activity>,
    /// CUPTI correlation id → the external id pushed around the call.
    pub external: HashMap<u32, u64>,
    /// (original node handle, id of its clone) for every node a watched instantiation cloned.
    pub clones: Vec<(usize, u64)>,
    pub dropped: usize,
    /// Records that could not be read, and why.
    pub problems: Vec<String>,
}

/// One kernel, memcpy or memset on the device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Activity {
    pub what: &'static str,
    pub start: u64,
    pub end: u64,
    pub stream: u32,
    pub correlation: u32,
    pub graph_node: u64,
}

/// The fields the kernel, memcpy and memset records share.
trait TimedRecord: Copy {
    fn activity(&self, what: &'static str) -> Activity;
}

macro_rules! timed_records {
    ($($record:ty),*) => {$(
        impl TimedRecord for $record {
            fn activity(&self, what: &'static str) -> Activity {
                Activity { what, start: self.start, end: self.end, stream: self.stream_id, correlation: self.correlation_id, graph_node: self.graph_node_id }
            }
        }
    )*};
}
timed_records!(KernelRecord, MemcpyRecord, MemsetRecord);

fn collected() -> MutexGuard<'static, Collected> {
    static COLLECTED: OnceLock<Mutex<Collected>> = OnceLock::new();
    COLLECTED.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

fn buffer_layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(BUFFER_BYTES, 8).unwrap_or_else(|_| std::alloc::Layout::new::<u64>())
}

/// CUPTI asks for a buffer: 8 MiB, 8-byte aligned (a null buffer, on allocation failure, makes CUPTI
/// drop records, which the trace then reports).
unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let layout = buffer_layout();
    // SAFETY: a non-zero-sized layout.
    let p = unsafe { std::alloc::alloc(layout) };
    // SAFETY: CUPTI passes three writable out-pointers.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { layout.size() };
        *max_records = 0;
    }
}

/// CUPTI hands a filled buffer back: its records are read into the collector, the buffer freed.
unsafe extern "C" fn buffer_completed(ctx: *mut c_void, stream: u32, buffer: *mut u8, _size: usize, valid: usize) {
    if buffer.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let Ok(a) = api() else { return };
        let mut c = collected();
        let mut record: *mut u8 = std::ptr::null_mut();
        loop {
            // SAFETY: `buffer` holds `valid` bytes of records CUPTI wrote; `record` is its cursor.
            let status = unsafe { (a.next_record)(buffer, valid, &mut record) };
            if status == MAX_LIMIT_REACHED {
                break;
            }
            if status != 0 {
                c.problems.push(format!("cuptiActivityGetNextRecord returned {status}"));
                break;
            }
            let left = valid - (record as usize - buffer as usize).min(valid);
            // SAFETY: `record` points into the buffer with `left` bytes to its end.
            unsafe { read_record(record, left, &mut c) };
        }
        let mut dropped = 0;
        // SAFETY: writes one count for the context and stream CUPTI named.
        if unsafe { (a.dropped)(ctx, stream, &mut dropped) } == 0 {
            c.dropped += dropped;
        }
    });
    // SAFETY: the buffer came from `buffer_requested` with this layout and is no longer CUPTI's.
    unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
}

/// Reads one record of `left` bytes at most into `c`, after checking its kind and that its prefix fits.
///
/// # Safety
/// `record` points to `left` readable bytes.
unsafe fn read_record(record: *const u8, left: usize, c: &mut Collected) {
    /// The prefix `T` of a record, or `None` where fewer bytes are left.
    ///
    /// # Safety
    /// `record` points to `left` readable bytes.
    unsafe fn prefix<T: Copy>(record: *const u8, left: usize) -> Option<T> {
        // SAFETY: `size_of::<T>()` bytes are there; any bit pattern is a valid `T` (integers, raw pointers).
        (left >= std::mem::size_of::<T>()).then(|| unsafe { std::ptr::read_unaligned(record as *const T) })
    }
    /// A timed record (kernel, memcpy, memset) of `left` bytes as an activity, or a problem where it
    /// is shorter than its prefix.
    ///
    /// # Safety
    /// `record` points to `left` readable bytes.
    unsafe fn timed<R: TimedRecord>(record: *const u8, left: usize, what: &'static str, c: &mut Collected) {
        // SAFETY: as the caller vouches.
        match unsafe { prefix::<R>(record, left) } {
            Some(r) => c.activities.push(r.activity(what)),
            None => c.problems.push(format!("a {what} record of {left} bytes, shorter than its fields this build reads")),
        }
    }
    if left < 4 {
        return;
    }
    // SAFETY: four bytes are there.
    let kind = unsafe { std::ptr::read_unaligned(record as *const u32) };
    let short = |what: &str| format!("a {what} record of {left} bytes, shorter than its fields this build reads");
    match kind {
        // SAFETY: `record` has `left` bytes, as the caller vouches (here and in the next two arms).
        KIND_CONCURRENT_KERNEL => unsafe { timed::<KernelRecord>(record, left, "kernel", c) },
        // SAFETY: as above.
        KIND_MEMCPY => unsafe { timed::<MemcpyRecord>(record, left, "memcpy", c) },
        // SAFETY: as above.
        KIND_MEMSET => unsafe { timed::<MemsetRecord>(record, left, "memset", c) },
        // SAFETY: as above.
        KIND_EXTERNAL_CORRELATION => match unsafe { prefix::<ExternalRecord>(record, left) } {
            Some(x) if x.external_kind == EXTERNAL_KIND => {
                c.external.insert(x.correlation_id, x.external_id);
            }
            Some(_) => {}
            None => c.problems.push(short("external correlation")),
        },
        _ => {}
    }
}

/// The resource callback: records (original node, clone's id) for each node an instantiation clones.
unsafe extern "C" fn on_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if domain != DOMAIN_RESOURCE || cbid != CBID_GRAPHNODE_CLONED || data.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let Ok(a) = api() else { return };
        // SAFETY: for a resource callback CUPTI passes a `CUpti_ResourceData` whose descriptor is a
        // `CUpti_GraphData` for the graph-node ids (cupti_callbacks.h).
        let (node, original) = unsafe {
            let rd = &*(data as *const ResourceData);
            if rd.resource_descriptor.is_null() {
                return;
            }
            let gd = &*(rd.resource_descriptor as *const GraphData);
            (gd.node, gd.original_node)
        };
        let mut id = 0u64;
        // SAFETY: a node handle CUPTI just reported; writes one id.
        if unsafe { (a.graph_node_id)(node, &mut id) } == 0 {
            collected().clones.push((original as usize, id));
        }
    });
}

/// One trace's use of CUPTI: the process's only one while it lives (CUPTI's activity state is the
/// process's). Enables the kinds a trace reads; [`ActivityWatch::finish`] flushes, hands back what
/// came and detaches CUPTI from the process: attached, CUPTI slowed every later launch of the process
/// (an H200 ran graph replays after one traced Llama step 7–25% slower, their host calls 3.8 µs
/// instead of 1.2, captured graphs alike; `docs/trace.md`). The next trace attaches it again.
pub(crate) struct ActivityWatch {
    api: &'static Api,
    enabled: Vec<u32>,
    only: MutexGuard<'static, bool>,
}

impl ActivityWatch {
    pub(crate) fn begin() -> Result<ActivityWatch> {
        // Held by the one watch; says whether our buffer callbacks are registered with the CUPTI
        // attached now (a detach forgets them).
        static ONLY: Mutex<bool> = Mutex::new(false);
        let api = api()?;
        let mut only = ONLY.lock().unwrap_or_else(|p| p.into_inner());
        if !*only {
            // SAFETY: two functions of ours with CUPTI's buffer-callback signatures.
            check("cuptiActivityRegisterCallbacks", unsafe { (api.register_callbacks)(Some(buffer_requested), Some(buffer_completed)) })?;
            *only = true;
        }
        *collected() = Collected::default();
        let mut s = ActivityWatch { api, enabled: Vec::new(), only };
        for kind in KINDS {
            // SAFETY: enables one activity kind.
            check("cuptiActivityEnable", unsafe { (api.enable)(kind) })?;
            s.enabled.push(kind);
        }
        Ok(s)
    }

    /// Runs `f` (an instantiation) with the graph-node clone callback on: what it clones is collected.
    pub(crate) fn watch_clones<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut subscriber: *mut c_void = std::ptr::null_mut();
        // SAFETY: our callback, no user data; writes one subscriber handle.
        check("cuptiSubscribe", unsafe { (self.api.subscribe)(&mut subscriber, Some(on_callback), std::ptr::null_mut()) })?;
        // SAFETY: the subscriber just made; one (domain, callback id) pair.
        let r = check("cuptiEnableCallback", unsafe { (self.api.enable_callback)(1, subscriber, DOMAIN_RESOURCE, CBID_GRAPHNODE_CLONED) }).and_then(|()| f());
        // SAFETY: our own subscriber, once.
        let _ = unsafe { (self.api.unsubscribe)(subscriber) };
        r
    }

    /// Flushes every buffer, turns the kinds off, detaches CUPTI and hands back what was collected.
    /// The caller has waited for the traced work (CUPTI's condition for detaching outside a
    /// callback: its work synchronized, its buffers flushed); the context is synchronized again
    /// before the detach.
    pub(crate) fn finish(mut self) -> Result<Collected> {
        // SAFETY: no arguments but the flag.
        let flushed = check("cuptiActivityFlushAll", unsafe { (self.api.flush_all)(FLUSH_FORCED) });
        self.disable();
        flushed?;
        let out = std::mem::take(&mut *collected());
        if let Some(finalize) = self.api.finalize {
            crate::ffi::synchronize()?;
            // SAFETY: no arguments; every kind is off, the buffers are flushed and the context is idle.
            check("cuptiFinalize", unsafe { finalize() })?;
            *self.only = false;
        }
        Ok(out)
    }

    fn disable(&mut self) {
        for kind in self.enabled.drain(..) {
            // SAFETY: disables a kind this watch enabled.
            let _ = unsafe { (self.api.disable)(kind) };
        }
    }
}

impl Drop for ActivityWatch {
    fn drop(&mut self) {
        self.disable();
    }
}

/// Tags the calling thread's next CUDA calls with `id` (their records' correlation ids map to it).
pub(crate) fn push_external(id: u64) -> Result<()> {
    let a = api()?;
    // SAFETY: pushes one id of our kind on this thread's stack.
    check("cuptiActivityPushExternalCorrelationId", unsafe { (a.push_external)(EXTERNAL_KIND, id) })
}

/// Ends the tag [`push_external`] began.
pub(crate) fn pop_external() -> Result<()> {
    let a = api()?;
    let mut last = 0;
    // SAFETY: pops the id this thread pushed; writes it.
    check("cuptiActivityPopExternalCorrelationId", unsafe { (a.pop_external)(EXTERNAL_KIND, &mut last) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Each field this build reads lies where CUPTI's own struct (cudarc's bindgen output of
    /// cupti_activity.h / cupti_callbacks.h, CUDA 13.0) has it.
    #[test]
    fn record_prefixes_match_cuptis_own_layouts() {
        use cudarc::cupti::sys as c;
        macro_rules! same {
            ($ours:ty, $theirs:ty, $($a:ident = $b:ident),*) => {$(
                assert_eq!(offset_of!($ours, $a), offset_of!($theirs, $b), "{}.{}", stringify!($theirs), stringify!($b));
            )*};
        }
        same!(
            KernelRecord,
            c::CUpti_ActivityKernel10,
            kind = kind,
            start = start,
            end = end,
            stream_id = streamId,
            grid = gridX,
            block = blockX,
            correlation_id = correlationId,
            grid_id = gridId,
            name = name,
            queued = queued,
            shared_memory_executed = sharedMemoryExecuted,
            graph_node_id = graphNodeId,
            shmem_limit_config = shmemLimitConfig,
            graph_id = graphId
        );
        same!(KernelRecord, c::CUpti_ActivityKernel9, graph_node_id = graphNodeId, graph_id = graphId);
        same!(
            MemcpyRecord,
            c::CUpti_ActivityMemcpy6,
            kind = kind,
            bytes = bytes,
            start = start,
            end = end,
            stream_id = streamId,
            correlation_id = correlationId,
            reserved0 = reserved0,
            graph_node_id = graphNodeId,
            graph_id = graphId,
            channel_id = channelID
        );
        same!(
            MemsetRecord,
            c::CUpti_ActivityMemset4,
            kind = kind,
            value = value,
            start = start,
            end = end,
            stream_id = streamId,
            correlation_id = correlationId,
            flags = flags,
            graph_node_id = graphNodeId,
            graph_id = graphId,
            channel_id = channelID
        );
        same!(
            ExternalRecord,
            c::CUpti_ActivityExternalCorrelation,
            kind = kind,
            external_kind = externalKind,
            external_id = externalId,
            correlation_id = correlationId
        );
        same!(
            GraphData,
            c::CUpti_GraphData,
            graph = graph,
            node = node,
            original_node = originalNode,
            node_type = nodeType,
            dependency = dependency,
            graph_exec = graphExec
        );
        same!(ResourceData, c::CUpti_ResourceData, context = context, resource_handle = resourceHandle, resource_descriptor = resourceDescriptor);
        assert!(size_of::<KernelRecord>() <= size_of::<c::CUpti_ActivityKernel9>());
        assert!(size_of::<MemcpyRecord>() <= size_of::<c::CUpti_ActivityMemcpy6>());
        assert!(size_of::<ExternalRecord>() == size_of::<c::CUpti_ActivityExternalCorrelation>());
        assert_eq!(c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32, KIND_CONCURRENT_KERNEL);
        assert_eq!(c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION as u32, KIND_EXTERNAL_CORRELATION);
        assert_eq!(c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER as u32, KIND_DRIVER);
        assert_eq!(c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY as u32, KIND_MEMCPY);
        assert_eq!(c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET as u32, KIND_MEMSET);
        assert_eq!(c::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 as u32, EXTERNAL_KIND);
        assert_eq!(c::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE as u32, DOMAIN_RESOURCE);
        assert_eq!(c::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED as u32, CBID_GRAPHNODE_CLONED);
        assert_eq!(c::CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED as c_int, MAX_LIMIT_REACHED);
    }

    /// A record is read only where its kind is one the trace reads and its prefix fits the bytes left.
    #[test]
    fn a_record_is_read_only_where_its_kind_and_length_allow() {
        let mut c = Collected::default();
        let k = KernelRecord {
            kind: KIND_CONCURRENT_KERNEL,
            start: 100,
            end: 250,
            stream_id: 7,
            correlation_id: 42,
            graph_node_id: 0x1_0000_0003,
            // SAFETY: an all-zero record is a valid value of this plain struct.
            ..unsafe { std::mem::zeroed() }
        };
        let bytes = &k as *const KernelRecord as *const u8;
        // SAFETY: `bytes` points to the whole record; the shorter length claims fewer bytes of it.
        unsafe {
            read_record(bytes, size_of::<KernelRecord>() - 1, &mut c);
            assert_eq!((c.activities.len(), c.problems.len()), (0, 1));
            read_record(bytes, size_of::<KernelRecord>(), &mut c);
        }
        let a = c.activities[0];
        assert_eq!((a.what, a.start, a.end, a.stream, a.correlation, a.graph_node), ("kernel", 100, 250, 7, 42, 0x1_0000_0003));
        let x = ExternalRecord { kind: KIND_EXTERNAL_CORRELATION, external_kind: EXTERNAL_KIND, external_id: 9 << 32, correlation_id: 42, reserved: 0 };
        let other = ExternalRecord { external_kind: 1, correlation_id: 43, ..x };
        // SAFETY: whole records.
        unsafe {
            read_record(&x as *const _ as *const u8, size_of::<ExternalRecord>(), &mut c);
            read_record(&other as *const _ as *const u8, size_of::<ExternalRecord>(), &mut c);
        }
        assert_eq!(c.external.get(&42), Some(&(9 << 32)));
        assert_eq!(c.external.get(&43), None, "another kind's external ids are not ours");
    }

    /// Without the library a trace fails with an error naming every place looked (this machine has
    /// none at the path given).
    #[test]
    fn without_cupti_the_error_names_every_place_looked() {
        if let Ok(found) = library() {
            eprintln!("CUPTI found at {found}: the missing-library error is not shown here");
            return;
        }
        let e = library().unwrap_err();
        assert_eq!(e.kind(), ostinato::ErrorKind::BackendMissing);
        let m = e.to_string();
        for place in ["libcupti.so", "extras/CUPTI/lib64", "OSTINATO_CUPTI"] {
            assert!(m.contains(place), "{m}");
        }
    }
}
