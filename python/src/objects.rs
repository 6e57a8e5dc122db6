//! The objects a graph hands out — `Buffer`, `BufferSlice`, `Kernel`, `Slot` — each marked with the
//! graph it belongs to, and the conversion of Python ints (of any size) into byte offsets, lengths and
//! counts: out of range is an error naming the value, never a clipped or wrapped one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::PySlice;

use crate::errors::err;

/// Which graph an object belongs to: a serial number no other graph of this process has, and how the
/// graph is named in messages (`graph #3`, `graph #4 (loaded from examples/mix.toml)`).
#[derive(Clone)]
pub(crate) struct Owner {
    serial: u64,
    label: Arc<str>,
}

impl Owner {
    /// A new graph's identity; `origin` says where it came from, where not recorded from Python.
    pub(crate) fn fresh(origin: Option<&str>) -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        let label = match origin {
            Some(o) => format!("graph #{serial} ({o})"),
            None => format!("graph #{serial}"),
        };
        Owner { serial, label: label.into() }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Refuses `object` (`buffer `a``, described by `what`) unless it belongs to the graph `self`
    /// names: an object of another graph has an id that means another object here.
    pub(crate) fn check(&self, object: &Owner, what: impl FnOnce() -> String) -> PyResult<()> {
        if object.serial == self.serial {
            return Ok(());
        }
        Err(err(format!("{} belongs to {}, not to {}: use the objects this graph made", what(), object.label, self.label)))
    }
}

/// A byte range of a buffer (the declared extent of an access): `buffer[lo:hi]`.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
pub(crate) struct BufferSlice {
    #[pyo3(get)]
    pub(crate) buffer: String,
    pub(crate) id: u32,
    #[pyo3(get)]
    pub(crate) offset: u64,
    #[pyo3(get)]
    pub(crate) len: u64,
    pub(crate) owner: Owner,
}

#[pymethods]
impl BufferSlice {
    fn __repr__(&self) -> String {
        format!("{}[{}:{}]", self.buffer, self.offset, self.offset + self.len)
    }
}

/// A declared buffer; `b[lo:hi]` is a byte slice of it, `b` alone the whole buffer.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
pub(crate) struct Buffer {
    #[pyo3(get)]
    pub(crate) name: String,
    pub(crate) id: u32,
    #[pyo3(get)]
    pub(crate) size: u64,
    pub(crate) owner: Owner,
}

#[pymethods]
impl Buffer {
    /// `b[lo:hi]`: bytes `lo` to `hi` (negative counts from the end, as in Python). Unlike a Python
    /// sequence, a bound outside `[-size, size]` is an error, whatever the size of the int.
    fn __getitem__(&self, key: &Bound<'_, PySlice>) -> PyResult<BufferSlice> {
        let step = key.getattr("step")?;
        if !step.is_none() && step.extract::<i128>().ok() != Some(1) {
            return Err(err(format!("buffer `{}`: a slice is a contiguous byte range (step 1, not {step})", self.name)));
        }
        let lo = self.slice_bound(&key.getattr("start")?, "first byte")?.unwrap_or(0);
        let hi = self.slice_bound(&key.getattr("stop")?, "end")?.unwrap_or(self.size).max(lo);
        Ok(BufferSlice { buffer: self.name.clone(), id: self.id, offset: lo, len: hi - lo, owner: self.owner.clone() })
    }
    fn __len__(&self) -> PyResult<usize> {
        usize::try_from(self.size).map_err(|_| err(format!("buffer `{}`: {} bytes is past what len() counts", self.name, self.size)))
    }
    fn __repr__(&self) -> String {
        format!("Buffer({:?}, {} bytes, {})", self.name, self.size, self.owner.label())
    }
}

impl Buffer {
    /// A slice bound as a byte offset: `None` for an omitted one, an error for one outside the buffer.
    fn slice_bound(&self, v: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<u64>> {
        if v.is_none() {
            return Ok(None);
        }
        let outside = || err(format!("buffer `{}`: slice {what} {v} lies outside its {} bytes", self.name, self.size));
        let i = match v.extract::<i128>() {
            Ok(i) => i,
            Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => return Err(outside()),
            Err(_) => return Err(err(format!("buffer `{}`: slice {what} {v} is not an int", self.name))),
        };
        let size = i128::from(self.size);
        if i > size || i < -size {
            return Err(outside());
        }
        Ok(Some(if i < 0 { size + i } else { i } as u64))
    }
}

/// A declared kernel signature.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
pub(crate) struct Kernel {
    #[pyo3(get)]
    pub(crate) name: String,
    pub(crate) id: u32,
    pub(crate) owner: Owner,
}

#[pymethods]
impl Kernel {
    fn __repr__(&self) -> String {
        format!("Kernel({:?}, {})", self.name, self.owner.label())
    }
}

/// A patchable scalar slot.
#[pyclass(module = "ostinato", frozen)]
#[derive(Clone)]
pub(crate) struct Slot {
    #[pyo3(get)]
    pub(crate) name: String,
    pub(crate) id: u32,
    /// Its scalar type (`u32`, `i32`, `u64`, `i64`, `f32`, `f64`).
    #[pyo3(get)]
    pub(crate) ty: &'static str,
    pub(crate) owner: Owner,
}

#[pymethods]
impl Slot {
    fn __repr__(&self) -> String {
        format!("Slot({:?}, {}, {})", self.name, self.ty, self.owner.label())
    }
}

/// A Python int (of any size, or anything with `__index__`) as a `u64` (a byte offset, length or
/// size); `what` names the value in the error when it is not an int or lies outside 0 to 2**64 - 1.
pub(crate) fn unsigned(v: &Bound<'_, PyAny>, what: impl FnOnce() -> String) -> PyResult<u64> {
    match v.extract::<i128>() {
        Ok(i) => u64::try_from(i).map_err(|_| err(format!("{} {i} is outside 0 to 2**64 - 1", what()))),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => Err(err(format!("{} {v} is outside 0 to 2**64 - 1", what()))),
        Err(_) => Err(err(format!("{} {v} is not an int", what()))),
    }
}
