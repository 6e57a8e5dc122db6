//! Streams (launches, stream capture) and events.

#![allow(unsafe_code)]

use cudarc::driver::sys;

use super::check;
use super::graph::{driver_edges, Graph, GraphNode};
use super::module::{Function, KernelArgs};
use super::{require_driver, Context};
use crate::dims::Dims;
use crate::error::{CudaError, Result};
use std::sync::Arc;

pub(crate) struct Stream {
    pub(super) s: sys::CUstream,
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
        // SAFETY: the attribute is a plain-old-data union; zeroed is a valid starting value.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let cfg = launch_config(d, self.s, if pdl { std::slice::from_mut(&mut attr) } else { &mut [] });
        // SAFETY: f is loaded; args hold exactly the kernel's params (checked at bind time); cfg and the
        // attribute it points to outlive the call.
        check("cuLaunchKernelEx", unsafe { sys::cuLaunchKernelEx(&cfg, f.f, args.as_driver(), std::ptr::null_mut()) })
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

/// A launch's geometry as the driver takes it, with its attributes (which must outlive the launch).
fn launch_config(d: Dims, stream: sys::CUstream, attrs: &mut [sys::CUlaunchAttribute]) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: d.grid[0],
        gridDimY: d.grid[1],
        gridDimZ: d.grid[2],
        blockDimX: d.block[0],
        blockDimY: d.block[1],
        blockDimZ: d.block[2],
        sharedMemBytes: d.shared,
        hStream: stream,
        attrs: if attrs.is_empty() { std::ptr::null_mut() } else { attrs.as_mut_ptr() },
        numAttrs: attrs.len() as u32,
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
    pub(super) e: sys::CUevent,
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
    /// Whether the work before the event's last record has completed; never waits.
    pub(crate) fn is_done(&self) -> Result<bool> {
        // SAFETY: valid event; the query only reads its state.
        match unsafe { sys::cuEventQuery(self.e) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| true),
        }
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
