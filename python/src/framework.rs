//! Framework memory and streams as the extension binds them: a device pointer from an object's
//! `__cuda_array_interface__` or DLPack capsule (checked for device, contiguity and length), a stream
//! handle from a framework's stream object, and the buffers a graph recorded on framework memory.

use ostinato::{BufferBinding, Plan};
use ostinato_runtime::Memory;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::err;

/// A buffer bound to framework memory when it was recorded: the object whose
/// `__cuda_array_interface__` covers the buffer's bytes (held by every exec bound to it), and the
/// CUDA device it lies on.
pub(crate) struct External {
    pub(crate) buffer: u32,
    pub(crate) memory: Py<PyAny>,
    pub(crate) device: i32,
}

impl External {
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> External {
        External { buffer: self.buffer, memory: self.memory.clone_ref(py), device: self.device }
    }
}

/// A CUDA device pointer from an object with `__cuda_array_interface__` (torch, CuPy), checked for
/// contiguity and length.
fn cuda_array(obj: &Bound<'_, PyAny>, want: u64, name: &str) -> PyResult<(u64, u64)> {
    let cai = obj
        .getattr("__cuda_array_interface__")
        .map_err(|_| err(format!("bind `{name}`: the object has no __cuda_array_interface__ (a torch tensor or CuPy array on the GPU)")))?;
    let (ptr, _readonly): (u64, bool) = cai.get_item("data")?.extract()?;
    let shape: Vec<u64> = cai.get_item("shape")?.extract()?;
    let typestr: String = cai.get_item("typestr")?.extract()?;
    let itemsize: u64 = typestr.get(2..).and_then(|s| s.parse().ok()).ok_or_else(|| err(format!("bind `{name}`: typestr `{typestr}`")))?;
    // The array's bytes, counted without wrapping: a shape whose product overflows is refused, never
    // taken for the small length it wraps to.
    let bytes = shape
        .iter()
        .try_fold(itemsize, |n, d| n.checked_mul(*d))
        .ok_or_else(|| err(format!("bind `{name}`: shape {shape:?} of {itemsize}-byte items is past 2**64 bytes")))?;
    let strides = cai.get_item("strides").ok().filter(|s| !s.is_none());
    if let Some(s) = strides {
        let s: Vec<i64> = s.extract()?;
        let mut expect = Some(itemsize as i128);
        for (dim, stride) in shape.iter().zip(&s).rev() {
            if *dim > 1 && Some(i128::from(*stride)) != expect {
                return Err(err(format!("bind `{name}`: the array is not C-contiguous (strides {s:?})")));
            }
            expect = expect.and_then(|e| e.checked_mul(i128::from(*dim)));
        }
    }
    if bytes != want {
        return Err(err(format!("bind `{name}`: the array has {bytes} bytes, the buffer declares {want}")));
    }
    if ptr == 0 && bytes > 0 {
        return Err(err(format!("bind `{name}`: the array's data pointer is NULL")));
    }
    Ok((ptr, bytes))
}

// DLPack's C structs (dlpack.h, v0.8 and the unversioned capsule of v1): what `__dlpack__()` hands over.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DlTensor {
    data: *mut std::ffi::c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut std::ffi::c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// DLPack's device types for memory a CUDA kernel can address.
const DL_CUDA: i32 = 2;
const DL_CUDA_MANAGED: i32 = 13;

/// Framework memory to bind: its device pointer and length, and what keeps it alive (a DLPack capsule,
/// which the exec holds and whose destructor releases the tensor; `None` for
/// `__cuda_array_interface__`, whose owner the caller keeps alive).
type BoundArray = (u64, u64, Option<Py<PyAny>>);

/// Device memory from a torch tensor, a CuPy array, or any object with `__cuda_array_interface__` or
/// `__dlpack__`, checked for device, C-contiguity and byte length.
pub(crate) fn framework_array(obj: &Bound<'_, PyAny>, want: u64, name: &str) -> PyResult<BoundArray> {
    if obj.hasattr("__cuda_array_interface__")? {
        let (ptr, len) = cuda_array(obj, want, name)?;
        return Ok((ptr, len, None));
    }
    if !obj.hasattr("__dlpack__")? {
        return Err(err(format!(
            "bind `{name}`: the object has neither __cuda_array_interface__ nor __dlpack__ (a torch tensor, a CuPy array, any DLPack producer on the GPU)"
        )));
    }
    let capsule = obj.call_method0("__dlpack__")?;
    let capsule = capsule.cast_into::<pyo3::types::PyCapsule>().map_err(|_| err(format!("bind `{name}`: __dlpack__() did not return a capsule")))?;
    // The name check is DLPack's only type check: "dltensor" (not yet consumed, unversioned).
    let managed =
        capsule.pointer_checked(Some(c"dltensor")).map_err(|_| err(format!("bind `{name}`: __dlpack__() gave no unconsumed `dltensor` capsule")))?.as_ptr()
            as *const DlManagedTensor;
    // SAFETY: a live capsule named "dltensor" holds a DLManagedTensor (the DLPack contract); the
    // capsule is kept alive while its fields are read, and the shape/strides arrays hold `ndim` entries.
    #[allow(unsafe_code)]
    let (ptr, device, dims, strides, elem_bits) = unsafe {
        let t = &(*managed).dl_tensor;
        let n = t.ndim.max(0) as usize;
        let dims: Vec<i64> = if n == 0 || t.shape.is_null() { Vec::new() } else { std::slice::from_raw_parts(t.shape, n).to_vec() };
        let strides: Option<Vec<i64>> = if t.strides.is_null() || n == 0 { None } else { Some(std::slice::from_raw_parts(t.strides, n).to_vec()) };
        ((t.data as u64).checked_add(t.byte_offset), t.device.device_type, dims, strides, t.dtype.bits as u64 * t.dtype.lanes as u64)
    };
    let ptr = ptr.ok_or_else(|| err(format!("bind `{name}`: the DLPack tensor's data pointer and byte offset are past 2**64")))?;
    if device != DL_CUDA && device != DL_CUDA_MANAGED {
        return Err(err(format!("bind `{name}`: the DLPack tensor lives on device type {device} (kDLCPU = 1), not on a CUDA GPU (kDLCUDA = 2)")));
    }
    if elem_bits % 8 != 0 {
        return Err(err(format!("bind `{name}`: DLPack elements of {elem_bits} bits are not whole bytes")));
    }
    if let Some(s) = &strides {
        let mut expect = Some(1i128);
        for (d, st) in dims.iter().zip(s).rev() {
            if *d > 1 && Some(i128::from(*st)) != expect {
                return Err(err(format!("bind `{name}`: the DLPack tensor is not C-contiguous (strides {s:?} elements)")));
            }
            expect = expect.and_then(|e| e.checked_mul(i128::from(*d)));
        }
    }
    if let Some(d) = dims.iter().find(|d| **d < 0) {
        return Err(err(format!("bind `{name}`: the DLPack tensor has a negative dimension ({d}) in shape {dims:?}")));
    }
    let bytes = dims
        .iter()
        .try_fold(elem_bits / 8, |n, d| n.checked_mul(*d as u64))
        .ok_or_else(|| err(format!("bind `{name}`: DLPack shape {dims:?} of {elem_bits}-bit elements is past 2**64 bytes")))?;
    if bytes != want {
        return Err(err(format!("bind `{name}`: the DLPack tensor has {bytes} bytes, the buffer declares {want}")));
    }
    if ptr == 0 && bytes > 0 {
        return Err(err(format!("bind `{name}`: the DLPack tensor's data pointer is NULL")));
    }
    Ok((ptr, bytes, Some(capsule.into_any().unbind())))
}

/// A stream handle from an int or an object with `cuda_stream` (torch) or `ptr` (CuPy).
pub(crate) fn stream_handle(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(h) = obj.extract::<u64>() {
        return Ok(h);
    }
    for attr in ["cuda_stream", "ptr"] {
        if let Ok(h) = obj.getattr(attr).and_then(|h| h.extract::<u64>()) {
            return Ok(h);
        }
    }
    Err(err("stream: give a torch.cuda.Stream, a CuPy stream or a CUstream handle (int)"))
}

/// Binds the buffers `plan` recorded on framework memory (`externals`: a tensor's storage), except
/// those `bind=` names (the user's binding wins); their memory objects go to `keep`, held by the exec.
/// The exec runs on the CUDA device they lie on: `device` is set to it, or refused where it names
/// another ordinal; tensors on two devices are refused.
pub(crate) fn bind_recorded(
    py: Python<'_>,
    (plan, externals): (&Plan, &[External]),
    bind: Option<&Bound<'_, PyDict>>,
    (buffers, keep): (&mut [BufferBinding<Memory>], &mut Vec<Py<PyAny>>),
    device: &mut Option<String>,
) -> PyResult<()> {
    let g = plan.graph();
    let mut recorded = None;
    for e in externals {
        let decl = &g.buffers()[e.buffer as usize];
        if bind.is_some_and(|b| b.contains(&decl.name).unwrap_or(false)) {
            continue;
        }
        match recorded {
            Some(d) if d != e.device => {
                return Err(err(format!("buffer `{}` lies on CUDA device {}, others on device {d}: one exec runs on one device", decl.name, e.device)))
            }
            _ => recorded = Some(e.device),
        }
        let memory = e.memory.bind(py);
        let (ptr, len, _) = framework_array(memory, decl.size, &decl.name)?;
        // SAFETY: the pointer comes from the memory object's own `__cuda_array_interface__`, and the
        // exec holds that object (which holds the tensor's storage) for its lifetime.
        #[allow(unsafe_code)]
        let m = unsafe { ostinato_runtime::ostinato_cuda::DeviceMemory::new(ptr, len) };
        buffers[e.buffer as usize] = BufferBinding::External(Memory::Cuda(m));
        keep.push(memory.clone().unbind());
    }
    match (&device, recorded) {
        (None, Some(d)) => *device = Some(d.to_string()),
        (Some(asked), Some(d)) if asked.parse::<i32>().is_ok_and(|a| a != d) => {
            return Err(err(format!("device={asked}: the graph's tensors lie on CUDA device {d}")));
        }
        _ => {}
    }
    Ok(())
}
