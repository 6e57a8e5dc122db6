//! Raw CUDA objects for baselines and tools that must submit work the way a user would by hand (eager
//! launches, stream capture, PDL launch attributes) with the very same kernels the exec uses.

use crate::device::Device;
use crate::dims::Dims;
use crate::error::Result;
use crate::ffi;
use crate::module::CudaKernel;

/// A device allocation.
pub struct Buffer(ffi::DeviceAlloc);

impl Buffer {
    pub fn new(device: &Device, len: usize) -> Result<Buffer> {
        Ok(Buffer(ffi::DeviceAlloc::new(&device.ctx, len)?))
    }
    pub fn ptr(&self) -> u64 {
        self.0.ptr()
    }
    /// This allocation as memory to bind a buffer to (`BufferBinding::External`, `Exec::rebind`). An
    /// exec bound to it must be dropped, or rebound elsewhere, before this buffer.
    pub fn memory(&self) -> crate::DeviceMemory {
        crate::DeviceMemory::vouched(self.ptr(), self.len() as u64)
    }
    /// `len` bytes of this allocation from `offset`, as memory to bind (bounds-checked; same rule).
    pub fn memory_at(&self, offset: usize, len: usize) -> Result<crate::DeviceMemory> {
        self.check(offset, len, "Buffer::memory_at")?;
        Ok(crate::DeviceMemory::vouched(self.ptr() + offset as u64, len as u64))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
    /// Synchronous host → device copy at `offset` (bounds-checked).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len(), "Buffer::write")?;
        ffi::copy_to_device(self.ptr() + offset as u64, data)
    }
    /// Synchronous device → host copy from `offset` (bounds-checked).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len(), "Buffer::read")?;
        ffi::copy_to_host(out, self.ptr() + offset as u64)
    }
    fn check(&self, offset: usize, len: usize, op: &'static str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.len()) {
            return Err(crate::CudaError::Usage { op, reason: format!("{offset}+{len} outside {} bytes", self.len()) });
        }
        Ok(())
    }
}

/// Kernel argument values (pointers and scalar bits), in param order.
pub struct Args(ffi::KernelArgs);

impl Args {
    pub fn new(values: &[u64]) -> Args {
        Args(ffi::KernelArgs::new(values))
    }
    pub fn set(&mut self, i: usize, v: u64) {
        self.0.set(i, v)
    }
}

pub struct Stream(ffi::Stream);

impl Stream {
    pub fn new(device: &Device) -> Result<Stream> {
        Ok(Stream(ffi::Stream::new(&device.ctx)?))
    }
    /// This stream's handle, to replay an Ostinato exec on it (`CudaBackend::instantiate_on`). An exec
    /// bound to it must be dropped before this stream.
    pub fn external(&self) -> crate::ExternalStream {
        crate::ExternalStream::vouched(self.0.handle())
    }
    /// Launches `k`; with `pdl`, sets programmatic stream serialization on the launch.
    #[inline]
    pub fn launch(&self, k: &CudaKernel, dims: Dims, args: &mut Args, pdl: bool) -> Result<()> {
        self.0.launch(&k.func, dims, &mut args.0, pdl)
    }
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    pub fn record(&self, e: &Event) -> Result<()> {
        e.0.record(&self.0)
    }
    pub fn wait(&self, e: &Event) -> Result<()> {
        self.0.wait_event(&e.0)
    }
    pub fn begin_capture(&self) -> Result<()> {
        self.0.begin_capture()
    }
    /// Ends the capture, instantiates and uploads the graph.
    pub fn end_capture(&self) -> Result<CapturedGraph> {
        let graph = self.0.end_capture()?;
        let exec = graph.instantiate()?;
        exec.upload(&self.0)?;
        let nodes = graph.node_count()?;
        Ok(CapturedGraph { _graph: graph, exec, nodes })
    }
}

pub struct Event(ffi::Event);

impl Event {
    pub fn new(timing: bool) -> Result<Event> {
        Ok(Event(ffi::Event::new(timing)?))
    }
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f64> {
        Ok(self.0.elapsed_ms_since(&start.0)? as f64)
    }
}

/// An instantiated graph made by stream capture.
pub struct CapturedGraph {
    _graph: ffi::Graph,
    exec: ffi::GraphExec,
    nodes: usize,
}

impl CapturedGraph {
    #[inline]
    pub fn launch(&self, s: &Stream) -> Result<()> {
        self.exec.launch(&s.0)
    }
    pub fn node_count(&self) -> usize {
        self.nodes
    }
    /// The driver's verbose DOT description of the captured graph.
    pub fn write_dot(&self, path: &std::path::Path) -> Result<()> {
        self._graph.write_dot(path)
    }
}
