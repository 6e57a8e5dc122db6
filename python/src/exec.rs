//! A retained exec as Python holds it: replay, patch slots, read and write buffers, rebind, trace.

use std::path::PathBuf;

use ostinato_runtime::{ExecHandle, Memory, RuntimeError};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::err;
use crate::framework::framework_array;
use crate::objects::unsigned;
use crate::scalar;

/// A retained exec: replay, patch slots, read and write buffers.
#[pyclass(module = "ostinato")]
pub(crate) struct PyExec {
    /// Behind a lock: Python threads may share an exec; their calls are serialised.
    pub(crate) exec: std::sync::Mutex<Box<dyn ExecHandle>>,
    /// The DLPack capsules of bound tensors: held for the exec's lifetime (their destructors release
    /// the tensors afterwards).
    pub(crate) keep: std::sync::Mutex<Vec<Py<PyAny>>>,
}

impl PyExec {
    fn inner(&self) -> std::sync::MutexGuard<'_, Box<dyn ExecHandle>> {
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyExec {
    /// Submits `count` replays (asynchronous on CUDA).
    #[pyo3(signature = (count=1))]
    fn replay(&self, count: u32) -> PyResult<()> {
        let mut exec = self.inner();
        for _ in 0..count {
            exec.replay().map_err(err)?;
        }
        Ok(())
    }
    /// Returns once every submitted replay finished.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        // The GIL is released while the GPU finishes; the lock is taken on the waiting thread.
        py.detach(|| self.inner().wait()).map_err(err)
    }
    /// Patches slot `name` for the following replays (the value is checked against its type).
    fn set_slot(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut exec = self.inner();
        let id = exec.slot_id(name).map_err(err)?;
        let ty = exec.plan().graph().slots()[id.index()].ty;
        let v = scalar(ty, value, &format!("slot `{name}`"))?;
        exec.set_slot(id, v).map_err(err)
    }
    /// The bytes of buffer `name` (from `offset`, `length` bytes or to the end). The range is checked
    /// before anything is allocated; memory for the result that cannot be had is an `IoError`.
    #[pyo3(signature = (name, offset=None, length=None))]
    fn read<'py>(&self, py: Python<'py>, name: &str, offset: Option<&Bound<'py, PyAny>>, length: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyBytes>> {
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        let offset = offset.map(|v| unsigned(v, || format!("read of buffer `{name}`: offset"))).transpose()?.unwrap_or(0);
        let size = exec.plan().graph().buffer(id).size;
        let len = match length {
            Some(v) => unsigned(v, || format!("read of buffer `{name}`: length"))?,
            None => size.saturating_sub(offset),
        };
        ostinato::check_range(exec.plan(), id, offset, len).map_err(|source| err(RuntimeError::Range { operation: "read", source }))?;
        let no_memory = || err(RuntimeError::OutOfMemory(format!("read of buffer `{name}`: cannot allocate {len} bytes for the result")));
        let n = usize::try_from(len).ok().filter(|n| isize::try_from(*n).is_ok()).ok_or_else(no_memory)?;
        // Read straight into the bytes object: one allocation of `len` bytes, Python's, which fails
        // with MemoryError (raised here as the IoError of memory that cannot be had).
        PyBytes::new_with(py, n, |buf| exec.read_buffer(id, offset, buf).map_err(err)).map_err(|e| {
            if e.is_instance_of::<PyMemoryError>(py) {
                let refused = no_memory();
                refused.set_cause(py, Some(e));
                refused
            } else {
                e
            }
        })
    }
    /// Writes `data` (bytes) into buffer `name` at `offset`.
    #[pyo3(signature = (name, data, offset=None))]
    fn write(&self, name: &str, data: &[u8], offset: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let offset = offset.map(|v| unsigned(v, || format!("write of buffer `{name}`: offset"))).transpose()?.unwrap_or(0);
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        exec.write_buffer(id, offset, data).map_err(err)
    }
    /// CUDA: rebinds buffer `name` to another framework array of the same length (between replays).
    fn rebind(&self, name: &str, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut exec = self.inner();
        let id = exec.buffer_id(name).map_err(err)?;
        let size = exec.plan().graph().buffer(id).size;
        let (ptr, len, owner) = framework_array(array, size, name)?;
        // SAFETY: as for `bind=` at instantiation.
        #[allow(unsafe_code)]
        let m = unsafe { ostinato_runtime::ostinato_cuda::DeviceMemory::new(ptr, len) };
        exec.rebind(id, Memory::Cuda(m)).map_err(err)?;
        // The previous capsule of this buffer may still be read by a replay in flight: all stay held.
        if let Ok(mut keep) = self.keep.lock() {
            keep.extend(owner);
        }
        Ok(())
    }
    /// Runs `replays` replays with every node timed (CUPTI on CUDA, timestamp queries on Vulkan, the
    /// worker threads' clock on the host); writes Chrome/Perfetto trace-event JSON to `json` and an
    /// SVG timeline to `svg` where given; returns the trace-event object (a dict).
    #[pyo3(signature = (replays=1, json=None, svg=None))]
    fn trace<'py>(&self, py: Python<'py>, replays: usize, json: Option<PathBuf>, svg: Option<PathBuf>) -> PyResult<Bound<'py, PyAny>> {
        let text = py
            .detach(|| {
                let mut exec = self.inner();
                let t = exec.trace(replays)?;
                ostinato_runtime::trace::write(&t, exec.plan(), json.as_deref(), svg.as_deref())?;
                Ok::<_, RuntimeError>(ostinato_runtime::trace::chrome_json(&t, exec.plan())?.to_string())
            })
            .map_err(err)?;
        py.import("json")?.call_method1("loads", (text,))
    }
    /// The backend's name.
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner().backend().as_str()
    }
    /// What the backend chose that a user may want to know (CUDA: how many programmatic edges, how
    /// many nodes fused).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner().notes().to_vec()
    }
}
