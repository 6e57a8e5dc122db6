//! The CUDA driver calls of the hand-written baselines: streams, launches (with the PDL launch
//! attribute where the expert's arm sets it), stream capture, events, graphs. The baselines launch the
//! very kernels Ostinato binds (`CudaKernel::cu_function`) on the same memory, but submit them through
//! this layer of the benchmark's own rather than Ostinato's driver layer, so a bug in Ostinato's
//! submission path cannot flatter its own arms and the baselines alike. Every call goes to the driver
//! loaded at run time through cudarc's `sys` layer; the device's primary context must be current on
//! the calling thread (`Device::bind_to_thread`).

// The driver API is the FFI boundary: each unsafe block says what makes it sound.
#![allow(unsafe_code)]

use std::ffi::c_void;

use cudarc::driver::sys;
use ostinato_cuda::{CudaKernel, Dims};

/// A failed driver call: its name and the driver's code.
fn check(op: &'static str, code: sys::CUresult) -> Result<(), String> {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{op} failed: {code:?}"))
    }
}

/// Kernel argument values (pointers and scalar bits), in param order: each value in its own 8-byte cell,
/// with the pointer array the driver reads (it points into `cells`, boxed, which never moves).
pub struct Args {
    cells: Box<[u64]>,
    ptrs: Box<[*mut c_void]>,
}

impl Args {
    pub fn new(values: &[u64]) -> Args {
        let mut cells: Box<[u64]> = values.into();
        let ptrs = cells.iter_mut().map(|c| c as *mut u64 as *mut c_void).collect();
        Args { cells, ptrs }
    }
    pub fn set(&mut self, i: usize, v: u64) {
        self.cells[i] = v;
    }
}

/// Lets launches of `k`'s main build ask for up to `bytes` of dynamic shared memory (the opt-in past
/// the 48 KiB a block gets by default).
pub fn allow_dynamic_shared(k: &CudaKernel, bytes: u32) -> Result<(), String> {
    let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    let bytes = i32::try_from(bytes).map_err(|_| format!("{bytes} bytes of shared memory"))?;
    // SAFETY: `k` keeps its module loaded, so its function handle is valid; the driver checks the value.
    check("cuFuncSetAttribute", unsafe { sys::cuFuncSetAttribute(k.cu_function(), attr, bytes) })
}

/// A non-blocking stream of the current context.
pub struct Stream(sys::CUstream);

// SAFETY: driver calls on a stream handle are thread-safe; the handle never changes after creation.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new() -> Result<Stream, String> {
        let mut s = std::ptr::null_mut();
        // SAFETY: writes one stream handle of the current context.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) })?;
        Ok(Stream(s))
    }
    /// Launches `k`'s main build; `pdl` sets programmatic stream serialization on the launch.
    #[inline]
    pub fn launch(&self, k: &CudaKernel, d: Dims, args: &mut Args, pdl: bool) -> Result<(), String> {
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
            hStream: self.0,
            attrs: &mut attr,
            numAttrs: u32::from(pdl),
        };
        // SAFETY: `k` keeps its module loaded; `args` holds one cell per param of the kernel, which was
        // checked against the graph's signature when it was bound; cfg and attr outlive the call.
        check("cuLaunchKernelEx", unsafe { sys::cuLaunchKernelEx(&cfg, k.cu_function(), args.ptrs.as_mut_ptr(), std::ptr::null_mut()) })
    }
    /// This stream as an Ostinato exec's stream (the Ostinato arms replay on the baselines' stream). An
    /// exec bound to it must be dropped before this stream.
    pub fn external(&self) -> ostinato_cuda::ExternalStream {
        // SAFETY: a live stream of ours, made in the current context, which the benchmark keeps as the
        // device's primary context; every exec bound to it is dropped with the row, before it.
        unsafe { ostinato_cuda::ExternalStream::from_raw(self.0 as usize as u64) }
    }
    pub fn synchronize(&self) -> Result<(), String> {
        // SAFETY: a stream of ours.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.0) })
    }
    pub fn record(&self, e: &Event) -> Result<(), String> {
        // SAFETY: an event and a stream of ours.
        check("cuEventRecord", unsafe { sys::cuEventRecord(e.0, self.0) })
    }
    pub fn wait(&self, e: &Event) -> Result<(), String> {
        // SAFETY: an event and a stream of ours.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(self.0, e.0, 0) })
    }
    pub fn begin_capture(&self) -> Result<(), String> {
        // SAFETY: a stream of ours; global capture mode, as a user's capture takes by default.
        check("cuStreamBeginCapture_v2", unsafe { sys::cuStreamBeginCapture_v2(self.0, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL) })
    }
    /// Ends the capture, instantiates and uploads the graph.
    pub fn end_capture(&self) -> Result<CapturedGraph, String> {
        let mut g = std::ptr::null_mut();
        // SAFETY: ends the capture begun on this stream; writes the captured graph.
        check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(self.0, &mut g) })?;
        // Owned from here on: dropped (destroyed) on any later failure.
        let mut graph = CapturedGraph { graph: g, exec: std::ptr::null_mut(), nodes: 0 };
        // SAFETY: a complete graph of ours; writes the executable graph.
        check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut graph.exec, graph.graph, 0) })?;
        // SAFETY: with a null array the driver only writes the count.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(graph.graph, std::ptr::null_mut(), &mut graph.nodes) })?;
        // SAFETY: an executable graph of ours and a stream of ours.
        check("cuGraphUpload", unsafe { sys::cuGraphUpload(graph.exec, self.0) })?;
        Ok(graph)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys our own stream once (pending work completes first, per the driver).
        let _ = unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

/// An event of the current context.
pub struct Event(sys::CUevent);

impl Event {
    pub fn new(timing: bool) -> Result<Event, String> {
        let flags = if timing { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
        let mut e = std::ptr::null_mut();
        // SAFETY: writes one event handle of the current context.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, flags as u32) })?;
        Ok(Event(e))
    }
    pub fn synchronize(&self) -> Result<(), String> {
        // SAFETY: an event of ours.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.0) })
    }
    /// Milliseconds from `start` to `self` (both recorded with timing on and completed).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f64, String> {
        let mut ms = 0f32;
        // SAFETY: events of ours; writes one float.
        check("cuEventElapsedTime_v2", unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.0, self.0) })?;
        Ok(f64::from(ms))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys our own event once.
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// A graph made by stream capture, instantiated.
pub struct CapturedGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    nodes: usize,
}

impl CapturedGraph {
    #[inline]
    pub fn launch(&self, s: &Stream) -> Result<(), String> {
        // SAFETY: an executable graph of ours and a stream of ours.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.exec, s.0) })
    }
    pub fn node_count(&self) -> usize {
        self.nodes
    }
    /// The driver's verbose DOT description of the captured graph.
    pub fn write_dot(&self, path: &std::path::Path) -> Result<(), String> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| format!("path {} contains a NUL byte", path.display()))?;
        let flags = sys::CUgraphDebugDot_flags::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE as u32;
        // SAFETY: a complete graph of ours and a NUL-terminated path that outlives the call.
        check("cuGraphDebugDotPrint", unsafe { sys::cuGraphDebugDotPrint(self.graph, c.as_ptr(), flags) })
    }
}

impl Drop for CapturedGraph {
    fn drop(&mut self) {
        // SAFETY: destroys our own executable graph (if instantiated) and graph, once each.
        unsafe {
            if !self.exec.is_null() {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}
