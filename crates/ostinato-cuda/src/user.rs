//! Device memory and a stream a user owns, made on an exec's device: what a program without another
//! CUDA library binds to buffers (`BufferBinding::External`, `Exec::rebind`) and replays execs on
//! (`CudaBackend::instantiate_on`).

use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::ffi;
use crate::options::{DeviceMemory, ExternalStream};

/// A device allocation the user owns (freed when dropped).
pub struct DeviceBuffer(ffi::DeviceAlloc);

impl DeviceBuffer {
    /// `len` bytes on `device` (uninitialised).
    pub fn new(device: &Device, len: usize) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer(ffi::DeviceAlloc::new(&device.ctx, len)?))
    }
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.0.ptr()
    }
    /// This allocation as memory to bind a buffer to. An exec bound to it must be dropped, or rebound
    /// elsewhere, before this buffer.
    pub fn memory(&self) -> DeviceMemory {
        DeviceMemory::vouched(self.ptr(), self.len() as u64)
    }
    /// `len` bytes of this allocation from `offset`, as memory to bind (bounds-checked; same rule).
    pub fn memory_at(&self, offset: usize, len: usize) -> Result<DeviceMemory> {
        self.check(offset, len, "DeviceBuffer::memory_at")?;
        Ok(DeviceMemory::vouched(self.ptr() + offset as u64, len as u64))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
    /// Synchronous host → device copy at `offset` (bounds-checked).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len(), "DeviceBuffer::write")?;
        ffi::copy_to_device(self.ptr() + offset as u64, data)
    }
    /// Synchronous device → host copy from `offset` (bounds-checked).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len(), "DeviceBuffer::read")?;
        ffi::copy_to_host(out, self.ptr() + offset as u64)
    }
    fn check(&self, offset: usize, len: usize, op: &'static str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.len()) {
            return Err(CudaError::Usage { op, reason: format!("{offset}+{len} outside {} bytes", self.len()) });
        }
        Ok(())
    }
}

/// A stream the user owns (destroyed when dropped), to replay execs on.
pub struct UserStream(ffi::Stream);

impl UserStream {
    /// A non-blocking stream in `device`'s primary context.
    pub fn new(device: &Device) -> Result<UserStream> {
        Ok(UserStream(ffi::Stream::new(&device.ctx)?))
    }
    /// This stream as an exec's stream. An exec bound to it must be dropped before this stream.
    pub fn external(&self) -> ExternalStream {
        ExternalStream::vouched(self.0.handle())
    }
    /// Waits for everything enqueued on the stream.
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
}
