//! The only place that calls the CUDA driver. Thin owning wrappers over cudarc's `sys` layer (loaded at
//! run time); every handle lives in a type that frees it, every call's result becomes a [`CudaError`]
//! with the operation and the driver's code name. Nothing here caches or re-binds on the hot path.

#![allow(unsafe_code)]

use std::ffi::{c_void, CStr, CString};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;

use crate::dims::Dims;
use crate::error::{CudaError, Result};

mod attributes;
fn name_of(code: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string (or leaves it null) for any code.
    let r = unsafe { sys::cuGetErrorName(code, &mut p) };
    if r != sys::CUresult::CUDA_SUCCESS || p.is_null() {
        return format!("CUDA_ERROR_{}", code as u32);
    }
    // SAFETY: the driver returned a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[inline]
fn check(op: &'static str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Driver { op, result: code, name: name_of(code), context: String::new() })
    }
}

/// Loads libcuda and calls `cuInit` once; `Err(NoDriver)` when no driver library is present.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let r = INIT.get_or_init(|| {
        // SAFETY: only tries to dlopen the library by its candidate names; never panics.
        if !unsafe { sys::is_culib_present() } {
            return Err(String::new());
        }
        // SAFETY: cuInit has no preconditions.
        check("cuInit", unsafe { sys::cuInit(0) }).map_err(|e| e.to_string())
    });
    match r {
        Ok(()) => Ok(()),
        Err(m) if m.is_empty() => Err(CudaError::NoDriver),
        Err(m) => Err(CudaError::Init(m.clone())),
    }
}

pub(crate) fn driver_version() -> Result<i32> {
    init()?;
    let mut v = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

pub(crate) fn require_driver(op: &'static str, needed: i32) -> Result<()> {
    let found = driver_version()?;
    if found < needed {
        return Err(CudaError::DriverTooOld { op, needed, found });
    }
    Ok(())
}

pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    // SAFETY: writes one int.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

/// Raw facts about one device.
pub(crate) struct RawDevice {
    pub handle: sys::CUdevice,
    pub name: String,
    pub uuid: [u8; 16],
    pub pci_bus_id: String,
}

pub(crate) fn device(ordinal: i32) -> Result<RawDevice> {
    init()?;
    let mut handle = 0;
    // SAFETY: writes one device handle.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut handle, ordinal) })?;
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer holds 256 chars and the driver NUL-terminates within that length.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, handle) })?;
    // SAFETY: NUL-terminated above.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: writes one CUuuid.
    check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, handle) })?;
    let mut bus = [0 as std::ffi::c_char; 64];
    // SAFETY: the buffer holds 64 chars.
    check("cuDeviceGetPCIBusId", unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, handle) })?;
    // SAFETY: NUL-terminated above.
    let pci_bus_id = unsafe { CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
    Ok(RawDevice { handle, name, uuid: uuid.bytes.map(|b| b as u8), pci_bus_id })
}

pub(crate) fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int for a valid device and attribute enum.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

pub(crate) fn device_total_mem(dev: sys::CUdevice) -> Result<usize> {
    let mut v = 0;
    // SAFETY: writes one size.
    check("cuDeviceTotalMem_v2", unsafe { sys::cuDeviceTotalMem_v2(&mut v, dev) })?;
    Ok(v)
}

/// `(free, total)` bytes of device memory of the current context's device (`cuMemGetInfo_v2`).
pub(crate) fn memory_info() -> Result<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    // SAFETY: writes two sizes for the current context.
    check("cuMemGetInfo_v2", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok((free, total))
}

/// The device's primary context, retained for our lifetime and made current on the creating thread.
pub(crate) struct Context {
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
}

// SAFETY: a retained primary context may be made current on, and used from, any thread.
unsafe impl Send for Context {}
// SAFETY: as above; the handle is never mutated after creation.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn retain(dev: sys::CUdevice) -> Result<Arc<Context>> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: retains the primary context of a valid device.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
        let c = Arc::new(Context { ctx, dev });
        c.bind()?;
        Ok(c)
    }
    /// Makes the context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained while self lives.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx) })
    }
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; operates on the current context.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: releases the retain taken in `retain`.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// A device allocation.
pub(crate) struct DeviceAlloc {
    ptr: sys::CUdeviceptr,
    len: usize,
    _ctx: Arc<Context>,
}

impl DeviceAlloc {
    pub(crate) fn new(ctx: &Arc<Context>, len: usize) -> Result<DeviceAlloc> {
        let mut ptr = 0;
        // SAFETY: allocates `len` bytes in the current context.
        check("cuMemAlloc_v2", unsafe { sys::cuMemAlloc_v2(&mut ptr, len.max(1)) })?;
        Ok(DeviceAlloc { ptr, len, _ctx: ctx.clone() })
    }
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // SAFETY: frees our own allocation once.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Copies host bytes to device address `dst` and returns once they are on the device. The caller
/// checked the range. (`cuMemcpyHtoD` from pageable memory may return while the DMA is still in flight,
/// and it does not order against non-blocking streams: without the synchronize a kernel launched next
/// could read stale bytes — the benchmark's oracle caught exactly that.)
pub(crate) fn copy_to_device(dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: src is a valid host slice; dst is a device range the caller bounds-checked.
    check("cuMemcpyHtoD_v2", unsafe { sys::cuMemcpyHtoD_v2(dst, src.as_ptr() as *const c_void, src.len()) })?;
    // SAFETY: no arguments; waits for the current context's work, the copy included.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// Copies device bytes at `src` into `dst` (synchronous). The caller checked the range.
pub(crate) fn copy_to_host(dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: dst is a valid host slice; src is a device range the caller bounds-checked.
    check("cuMemcpyDtoH_v2", unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len()) })
}

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
    f: sys::CUfunction,
    _module: Arc<Module>,
}

// SAFETY: a function handle of a loaded module may be launched from any thread on which its context is
// current; the module is kept alive by the Arc.
unsafe impl Send for Function {}

impl Function {
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
    fn as_driver(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}

pub(crate) struct Stream {
    s: sys::CUstream,
    _ctx: Arc<Context>,
    /// False for a stream the user owns: never destroyed here.
    owned: bool,
}

// SAFETY: driver API calls on a stream are thread-safe; the exec shares its stream between the caller
// and its launch thread, and orders their use itself (the caller drains the launch thread first).
unsafe impl Send for Stream {}
// SAFETY: as above; the handle is never mutated after creation.
unsafe impl Sync for Stream {}

impl Stream {
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Stream> {
        let mut s = std::ptr::null_mut();
        // SAFETY: creates a non-blocking stream in the current context.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) })?;
        Ok(Stream { s, _ctx: ctx.clone(), owned: true })
    }
    /// A stream the user owns, by its handle; refused unless the driver says it belongs to `ctx`.
    /// The caller guarantees the handle is a live stream (a dangling handle is the user's bug, as a
    /// dangling external buffer pointer is) and that it outlives this value.
    pub(crate) fn external(ctx: &Arc<Context>, handle: u64) -> Result<Stream> {
        let s = handle as usize as sys::CUstream;
        let mut owner = std::ptr::null_mut();
        // SAFETY: writes one context handle; the driver validates the stream handle it is given.
        check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(s, &mut owner) })?;
        if owner != ctx.ctx {
            return Err(CudaError::Usage {
                op: "external stream",
                reason: format!("stream {handle:#x} belongs to another CUDA context than the device's primary context the exec runs in"),
            });
        }
        Ok(Stream { s, _ctx: ctx.clone(), owned: false })
    }
    /// The driver handle, for a user who binds this stream to an exec.
    pub(crate) fn handle(&self) -> u64 {
        self.s as usize as u64
    }
    /// A non-blocking stream at the context's greatest (most urgent) priority.
    pub(crate) fn with_greatest_priority(ctx: &Arc<Context>) -> Result<Stream> {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: two out-params for the current context's priority range.
        check("cuCtxGetStreamPriorityRange", unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) })?;
        let mut s = std::ptr::null_mut();
        // SAFETY: creates a non-blocking stream in the current context at a priority inside its range.
        check("cuStreamCreateWithPriority", unsafe { sys::cuStreamCreateWithPriority(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32, greatest) })?;
        Ok(Stream { s, _ctx: ctx.clone(), owned: true })
    }
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: valid stream.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.s) })
    }
    /// True when everything enqueued on the stream has finished (`cuStreamQuery`).
    pub(crate) fn is_idle(&self) -> Result<bool> {
        // SAFETY: valid stream; the query only reads its state.
        match unsafe { sys::cuStreamQuery(self.s) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuStreamQuery", code).map(|()| true),
        }
    }
    pub(crate) fn wait_event(&self, e: &Event) -> Result<()> {
        // SAFETY: valid stream and event.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(self.s, e.e, 0) })
    }
    /// Launches `f`; `pdl` sets programmatic stream serialization (the kernel must `griddepcontrol.wait`).
    pub(crate) fn launch(&self, f: &Function, d: Dims, args: &mut KernelArgs, pdl: bool) -> Result<()> {
        if !pdl {
            // SAFETY: f is loaded; args hold exactly the kernel's params (checked at bind time).
            return check("cuLaunchKernel", unsafe {
                sys::cuLaunchKernel(
                    f.f,
                    d.grid[0],
                    d.grid[1],
                    d.grid[2],
                    d.block[0],
                    d.block[1],
                    d.block[2],
                    d.shared,
                    self.s,
                    args.as_driver(),
                    std::ptr::null_mut(),
                )
            });
        }
        // SAFETY: the attribute is a plain-old-data union; zeroed is a valid starting value.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: d.grid[0],
            gridDimY: d.grid[1],
            gridDimZ: d.grid[2],
            blockDimX: d.block[0],
            blockDimY: d.block[1],
            blockDimZ: d.block[2],
            sharedMemBytes: d.shared,
            hStream: self.s,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: cfg and attr outlive the call; args as above.
        check("cuLaunchKernelEx", unsafe { sys::cuLaunchKernelEx(&cfg, f.f, args.as_driver(), std::ptr::null_mut()) })
    }
    pub(crate) fn begin_capture(&self) -> Result<()> {
        // SAFETY: valid stream; global capture mode.
        check("cuStreamBeginCapture_v2", unsafe { sys::cuStreamBeginCapture_v2(self.s, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL) })
    }
    /// Begins a capture that only forbids unsafe calls on this thread (a library must not restrict the
    /// caller's other threads).
    pub(crate) fn begin_capture_thread_local(&self) -> Result<()> {
        // SAFETY: valid stream; thread-local capture mode.
        check("cuStreamBeginCapture_v2", unsafe { sys::cuStreamBeginCapture_v2(self.s, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) })
    }
    /// While capturing: replaces the capture's dependency set with `deps` (edge `i` programmatic where
    /// `programmatic[i]`), launches `f` into the capture and returns the node it became.
    pub(crate) fn capture_kernel_after(&self, f: &Function, d: Dims, args: &mut KernelArgs, deps: &[GraphNode], programmatic: &[bool]) -> Result<GraphNode> {
        self.capture_after(deps, programmatic, || self.launch(f, d, args, false))
    }
    /// While capturing: replaces the capture's dependency set with `deps`, runs `enqueue` (work on this
    /// stream: a launch, a library's calls) and returns the node the capture's dependency set ends at.
    pub(crate) fn capture_after(&self, deps: &[GraphNode], programmatic: &[bool], enqueue: impl FnOnce() -> Result<()>) -> Result<GraphNode> {
        require_driver("cuStreamUpdateCaptureDependencies_v2", 12030)?;
        let (mut raw, data) = driver_edges("cuStreamUpdateCaptureDependencies_v2", deps, programmatic)?;
        let (nodes, datas) = if raw.is_empty() { (std::ptr::null_mut(), std::ptr::null()) } else { (raw.as_mut_ptr(), data.as_ptr()) };
        let set = sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES as u32;
        // SAFETY: the stream is capturing; both arrays hold `raw.len()` entries (or are null for none)
        // and outlive the call; the nodes belong to this capture's graph.
        check("cuStreamUpdateCaptureDependencies_v2", unsafe { sys::cuStreamUpdateCaptureDependencies_v2(self.s, nodes, datas, raw.len(), set) })?;
        enqueue()?;
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut after: *const sys::CUgraphNode = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: optional outputs are null; the driver writes the status, a pointer to its own array of
        // the current dependency set (valid until the next call on this stream) and its length.
        check("cuStreamGetCaptureInfo_v3", unsafe {
            sys::cuStreamGetCaptureInfo_v3(self.s, &mut status, std::ptr::null_mut(), std::ptr::null_mut(), &mut after, std::ptr::null_mut(), &mut n)
        })?;
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1 || after.is_null() {
            return Err(CudaError::Internal {
                op: "cuStreamGetCaptureInfo_v3",
                reason: format!("after a captured launch the capture is {status:?} with {n} dependencies (expected active, 1)"),
            });
        }
        // SAFETY: `after` points to `n == 1` node handles owned by the driver; we copy the handle out.
        Ok(GraphNode(unsafe { *after }))
    }
    pub(crate) fn end_capture(&self) -> Result<Graph> {
        let mut g = std::ptr::null_mut();
        // SAFETY: ends the capture begun on this stream; writes the captured graph.
        check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(self.s, &mut g) })?;
        Ok(Graph { g })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: destroys our own stream once (pending work completes first, per the driver).
            let _ = unsafe { sys::cuStreamDestroy_v2(self.s) };
        }
    }
}

pub(crate) struct Event {
    e: sys::CUevent,
}

// SAFETY: an event handle may be recorded and waited on from any thread of its context (driver calls
// on events are thread-safe); an eager exec's events move with it to its launch thread.
unsafe impl Send for Event {}
// SAFETY: as above; the exec's timing events are recorded by its launch thread and read by the caller
// only after the caller has drained that thread; the handle is never mutated after creation.
unsafe impl Sync for Event {}

impl Event {
    pub(crate) fn new(timing: bool) -> Result<Event> {
        let flags = if timing { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
        let mut e = std::ptr::null_mut();
        // SAFETY: creates an event in the current context.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, flags as u32) })?;
        Ok(Event { e })
    }
    pub(crate) fn record(&self, s: &Stream) -> Result<()> {
        // SAFETY: valid event and stream.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.e, s.s) })
    }
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: valid event.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.e) })
    }
    /// Milliseconds from `start` to `self` (both recorded with timing on and completed).
    pub(crate) fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: valid events; writes one float.
        check("cuEventElapsedTime_v2", unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.e, self.e) })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys our own event once.
        let _ = unsafe { sys::cuEventDestroy_v2(self.e) };
    }
}

/// Node handles and their edge data, in the driver's form, for the `deps.len()` edges into (or out of)
/// a node; refused unless every edge has its programmatic flag (the driver reads both arrays to the
/// same length).
fn driver_edges(op: &'static str, deps: &[GraphNode], programmatic: &[bool]) -> Result<(Vec<sys::CUgraphNode>, Vec<sys::CUgraphEdgeData>)> {
    if deps.len() != programmatic.len() {
        return Err(CudaError::Internal { op, reason: format!("{} dependency nodes but {} edge types", deps.len(), programmatic.len()) });
    }
    Ok((deps.iter().map(|n| n.0).collect(), programmatic.iter().map(|&p| edge_data(p)).collect()))
}

/// The data of one graph edge: full, or programmatic (PDL) from the producer's programmatic port.
fn edge_data(programmatic: bool) -> sys::CUgraphEdgeData {
    sys::CUgraphEdgeData {
        from_port: if programmatic { sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8 } else { 0 },
        to_port: 0,
        type_: if programmatic { sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8 } else { 0 },
        reserved: [0; 5],
    }
}

/// A CUDA graph under construction (or captured).
pub(crate) struct Graph {
    g: sys::CUgraph,
}

// SAFETY: a graph may be used from any thread, one at a time (the driver's rule for graph objects);
// its owner (the exec, or a baseline) moves it between threads but never shares it.
unsafe impl Send for Graph {}

/// A node handle of a [`Graph`] (valid while the graph lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GraphNode(sys::CUgraphNode);

// SAFETY: a node handle is an identifier the driver only reads; the exec that patches by it is used from
// one thread at a time.
unsafe impl Send for GraphNode {}

impl Graph {
    pub(crate) fn new() -> Result<Graph> {
        let mut g = std::ptr::null_mut();
        // SAFETY: creates an empty graph.
        check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut g, 0) })?;
        Ok(Graph { g })
    }

    fn kernel_params(f: &Function, d: Dims, args: &mut KernelArgs) -> sys::CUDA_KERNEL_NODE_PARAMS {
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: f.f,
            gridDimX: d.grid[0],
            gridDimY: d.grid[1],
            gridDimZ: d.grid[2],
            blockDimX: d.block[0],
            blockDimY: d.block[1],
            blockDimZ: d.block[2],
            sharedMemBytes: d.shared,
            kernelParams: args.as_driver(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }

    /// Adds a kernel node with no dependencies (edges are added with [`Graph::add_edges`]).
    pub(crate) fn add_kernel(&mut self, f: &Function, d: Dims, args: &mut KernelArgs) -> Result<GraphNode> {
        let p = Self::kernel_params(f, d, args);
        let mut n = std::ptr::null_mut();
        // SAFETY: the driver copies the params (and the arg values they point to) during the call.
        check("cuGraphAddKernelNode_v2", unsafe { sys::cuGraphAddKernelNode_v2(&mut n, self.g, std::ptr::null(), 0, &p) })?;
        Ok(GraphNode(n))
    }

    /// Adds a kernel node together with its in-edges `deps[i]` (programmatic where `programmatic[i]`).
    pub(crate) fn add_kernel_after(&mut self, f: &Function, d: Dims, args: &mut KernelArgs, deps: &[GraphNode], programmatic: &[bool]) -> Result<GraphNode> {
        require_driver("cuGraphAddNode_v2", 12030)?;
        let k = Self::kernel_params(f, d, args);
        // SAFETY: the node-params union is plain-old-data; zeroed is a valid starting value.
        let mut p: sys::CUgraphNodeParams = unsafe { std::mem::zeroed() };
        p.type_ = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL;
        p.__bindgen_anon_1.kernel = sys::CUDA_KERNEL_NODE_PARAMS_v3 {
            func: k.func,
            gridDimX: k.gridDimX,
            gridDimY: k.gridDimY,
            gridDimZ: k.gridDimZ,
            blockDimX: k.blockDimX,
            blockDimY: k.blockDimY,
            blockDimZ: k.blockDimZ,
            sharedMemBytes: k.sharedMemBytes,
            kernelParams: k.kernelParams,
            extra: k.extra,
            kern: k.kern,
            ctx: k.ctx,
        };
        let (raw, data) = driver_edges("cuGraphAddNode_v2", deps, programmatic)?;
        let mut n = std::ptr::null_mut();
        // SAFETY: both dependency arrays hold `raw.len()` entries and outlive the call, the nodes belong to
        // this graph; the driver copies the params (and the arg values they point to) during the call.
        check("cuGraphAddNode_v2", unsafe { sys::cuGraphAddNode_v2(&mut n, self.g, raw.as_ptr(), data.as_ptr(), raw.len(), &mut p) })?;
        Ok(GraphNode(n))
    }

    /// Adds a child-graph node running a copy of `child` (a captured library call), after `deps`
    /// (full edges).
    pub(crate) fn add_child(&mut self, child: &Graph, deps: &[GraphNode]) -> Result<GraphNode> {
        let raw: Vec<sys::CUgraphNode> = deps.iter().map(|n| n.0).collect();
        let mut n = std::ptr::null_mut();
        // SAFETY: `raw` holds nodes of this graph and outlives the call; the driver clones `child`.
        check("cuGraphAddChildGraphNode", unsafe { sys::cuGraphAddChildGraphNode(&mut n, self.g, raw.as_ptr(), raw.len(), child.g) })?;
        Ok(GraphNode(n))
    }

    /// Adds edges `from[i] -> to[i]`; `programmatic[i]` makes an edge a programmatic (PDL) dependency
    /// from the producer's programmatic port (needs driver 12.3+).
    pub(crate) fn add_edges(&mut self, from: &[GraphNode], to: &[GraphNode], programmatic: &[bool]) -> Result<()> {
        if from.is_empty() {
            return Ok(());
        }
        require_driver("cuGraphAddDependencies_v2", 12030)?;
        let op = "cuGraphAddDependencies_v2";
        let (f, data) = driver_edges(op, from, programmatic)?;
        if to.len() != from.len() {
            return Err(CudaError::Internal { op, reason: format!("{} edge sources but {} targets", from.len(), to.len()) });
        }
        let t: Vec<sys::CUgraphNode> = to.iter().map(|n| n.0).collect();
        // SAFETY: the three arrays have equal length and outlive the call; nodes belong to this graph.
        check(op, unsafe { sys::cuGraphAddDependencies_v2(self.g, f.as_ptr(), t.as_ptr(), data.as_ptr(), f.len()) })
    }

    pub(crate) fn instantiate(&self) -> Result<GraphExec> {
        let mut e = std::ptr::null_mut();
        // SAFETY: instantiates a complete graph.
        check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut e, self.g, 0) })?;
        Ok(GraphExec { e })
    }

    /// Writes the driver's verbose DOT description of the graph (nodes with their launch params) to
    /// `path`, then one comment line per edge with its type and ports (which the driver's DOT omits):
    /// `// edge 0x<from handle> -> 0x<to handle> type=<n> from_port=<n> to_port=<n>`.
    pub(crate) fn write_dot(&self, path: &std::path::Path) -> Result<()> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| CudaError::Usage { op: "cuGraphDebugDotPrint", reason: format!("path {} contains a NUL byte", path.display()) })?;
        let flags = sys::CUgraphDebugDot_flags::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE as u32;
        // SAFETY: a complete graph of ours and a NUL-terminated path that outlives the call.
        check("cuGraphDebugDotPrint", unsafe { sys::cuGraphDebugDotPrint(self.g, c.as_ptr(), flags) }).map_err(|e| e.at(path.display().to_string()))?;
        let mut text = String::new();
        for (from, to, d) in self.edges()? {
            text.push_str(&format!(
                "// edge {:#018X} -> {:#018X} type={} from_port={} to_port={}\n",
                from as usize, to as usize, d.type_, d.from_port, d.to_port
            ));
        }
        let io = |e: std::io::Error| CudaError::Io { path: path.display().to_string(), message: e.to_string() };
        let mut f = std::fs::OpenOptions::new().append(true).open(path).map_err(io)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(io)
    }

    /// Every edge as `(from, to, programmatic)`: exactly the two kinds of edge data we submit, a full
    /// edge (all zero) or a programmatic dependency from the producer's programmatic port. Any other
    /// edge data is an error, not a guess.
    pub(crate) fn typed_edges(&self) -> Result<Vec<(GraphNode, GraphNode, bool)>> {
        let same = |a: &sys::CUgraphEdgeData, b: &sys::CUgraphEdgeData| (a.type_, a.from_port, a.to_port) == (b.type_, b.from_port, b.to_port);
        let (full, programmatic) = (edge_data(false), edge_data(true));
        self.edges()?
            .into_iter()
            .map(|(f, t, d)| match (same(&d, &full), same(&d, &programmatic)) {
                (true, _) => Ok((GraphNode(f), GraphNode(t), false)),
                (_, true) => Ok((GraphNode(f), GraphNode(t), true)),
                _ => Err(CudaError::Internal {
                    op: "cuGraphGetEdges_v2",
                    reason: format!("an edge holds type {} from port {} to port {}, which Ostinato never submits", d.type_, d.from_port, d.to_port),
                }),
            })
            .collect()
    }

    /// Every edge with its data (type and ports).
    fn edges(&self) -> Result<Vec<(sys::CUgraphNode, sys::CUgraphNode, sys::CUgraphEdgeData)>> {
        require_driver("cuGraphGetEdges_v2", 12030)?;
        let mut n = 0usize;
        // SAFETY: with null arrays the driver only writes the count.
        check("cuGraphGetEdges_v2", unsafe { sys::cuGraphGetEdges_v2(self.g, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), &mut n) })?;
        if n == 0 {
            // An edgeless graph (independent roots only): the driver refuses the second call with
            // empty arrays, so there is nothing to ask for.
            return Ok(Vec::new());
        }
        let mut from = vec![std::ptr::null_mut(); n];
        let mut to = vec![std::ptr::null_mut(); n];
        let mut data = vec![sys::CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] }; n];
        // SAFETY: three arrays of `n` entries, as the count call reported; the driver fills at most `n`.
        check("cuGraphGetEdges_v2", unsafe { sys::cuGraphGetEdges_v2(self.g, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut n) })?;
        Ok((0..n.min(from.len())).map(|i| (from[i], to[i], data[i])).collect())
    }

    pub(crate) fn node_count(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: with a null array the driver only writes the count.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(self.g, std::ptr::null_mut(), &mut n) })?;
        Ok(n)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: destroys our own graph once.
        let _ = unsafe { sys::cuGraphDestroy(self.g) };
    }
}

/// An instantiated, uploaded graph.
pub(crate) struct GraphExec {
    e: sys::CUgraphExec,
}

// SAFETY: a graph exec may be used from any thread of its context, one thread at a time (the driver does
// not synchronize it); it moves to the launch thread whole and is used only there.
unsafe impl Send for GraphExec {}

impl GraphExec {
    pub(crate) fn upload(&self, s: &Stream) -> Result<()> {
        // SAFETY: valid exec and stream.
        check("cuGraphUpload", unsafe { sys::cuGraphUpload(self.e, s.s) })
    }
    #[inline]
    pub(crate) fn launch(&self, s: &Stream) -> Result<()> {
        // SAFETY: valid exec and stream.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.e, s.s) })
    }
    /// Replaces a kernel node's params for future launches (launches already enqueued keep theirs).
    pub(crate) fn set_kernel_params(&self, node: GraphNode, f: &Function, d: Dims, args: &mut KernelArgs) -> Result<()> {
        let p = Graph::kernel_params(f, d, args);
        // SAFETY: node belongs to the graph this exec came from (which the caller keeps alive); the
        // driver copies the params during the call.
        check("cuGraphExecKernelNodeSetParams_v2", unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.e, node.0, &p) })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: destroys our own exec once.
        let _ = unsafe { sys::cuGraphExecDestroy(self.e) };
    }
}

/// Device attribute ids used for provenance.
pub(crate) mod attr {
    use cudarc::driver::sys::CUdevice_attribute as A;
    pub const SM_COUNT: A = A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    pub const CC_MAJOR: A = A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
    pub const CC_MINOR: A = A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR;
    pub const CLOCK_KHZ: A = A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE;
    pub const MEM_CLOCK_KHZ: A = A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE;
    pub const MAX_THREADS_PER_BLOCK: A = A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
    pub const MAX_BLOCK: [A; 3] = [A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
    pub const MAX_GRID: [A; 3] = [A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
    pub const MAX_SHARED_PER_BLOCK: A = A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_arrays_reach_the_driver_only_at_equal_lengths_with_the_right_edge_types() {
        let nodes = [GraphNode(std::ptr::null_mut()), GraphNode(std::ptr::null_mut())];
        let err = driver_edges("cuGraphAddNode_v2", &nodes, &[true]).unwrap_err().to_string();
        assert!(err.contains("cuGraphAddNode_v2") && err.contains("2 dependency nodes but 1 edge types"), "{err}");
        let (raw, data) = driver_edges("cuGraphAddNode_v2", &nodes, &[false, true]).unwrap();
        assert_eq!(raw.len(), 2);
        assert_eq!((data[0].type_, data[0].from_port), (0, 0), "a full edge is the default type from the default port");
        assert_eq!(data[1].type_, sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8);
        assert_eq!(data[1].from_port, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8);
    }
}
