//! NCCL, loaded at run time (an FFI module): `libnccl.so.2` from `OSTINATO_NCCL`, the dynamic loader's
//! path, or the NVIDIA wheel a Python environment ships (`nvidia/nccl/lib` under `site-packages` of
//! `VIRTUAL_ENV`, `CONDA_PREFIX`, `/usr/local`, `/usr` or `/opt/*/.venv`, where PyTorch installs it).
//! Hand-written because no maintained crate loads NCCL at run time without linking it; it binds only
//! the seven entry points a collective node needs. Without NCCL every use is
//! [`CudaError::NcclMissing`], naming the library and where it was looked for.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;
use ostinato::collective::CollectiveOp;
use ostinato::ScalarType;

use crate::error::{CudaError, Result};

type Comm = *mut c_void;
type Stream = *mut c_void;

/// The entry points, copied out of the library (which stays loaded for the process).
struct Api {
    _lib: Library,
    version: i32,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> c_int,
    comm_destroy: unsafe extern "C" fn(Comm) -> c_int,
    all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int,
    all_gather: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> c_int,
    reduce_scatter: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int,
}

/// Where to look for `libnccl.so.2` after the loader's own path, in order.
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("OSTINATO_NCCL").map(PathBuf::from).into_iter().collect();
    out.extend(crate::wheels::nvidia_wheel_files(&["nccl/lib/libnccl.so.2"]));
    out
}

fn load() -> std::result::Result<Api, String> {
    // SAFETY: loading NCCL runs its initialisers, which have no preconditions.
    let lib = match unsafe { Library::new("libnccl.so.2") } {
        Ok(l) => l,
        Err(_) => {
            let tried = candidates();
            // SAFETY: as above, by absolute path.
            tried.iter().find_map(|p| unsafe { Library::new(p) }.ok()).ok_or_else(|| {
                let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
                format!("libnccl.so.2 not found on the loader's path nor at {} (set OSTINATO_NCCL to its path)", list.join(", "))
            })?
        }
    };
    // SAFETY: each symbol is looked up by its NCCL name with the signature of nccl.h (NCCL 2.x); the
    // pointers stay valid while `lib` is loaded, which the `Api` keeps for the process.
    unsafe {
        fn missing(name: &str) -> impl Fn(libloading::Error) -> String + '_ {
            move |e| format!("libnccl.so.2 has no `{name}`: {e}")
        }
        let get_version: unsafe extern "C" fn(*mut c_int) -> c_int = *lib.get(b"ncclGetVersion\0").map_err(missing("ncclGetVersion"))?;
        let mut version = 0;
        get_version(&mut version);
        Ok(Api {
            version,
            get_error_string: *lib.get(b"ncclGetErrorString\0").map_err(missing("ncclGetErrorString"))?,
            comm_init_all: *lib.get(b"ncclCommInitAll\0").map_err(missing("ncclCommInitAll"))?,
            comm_destroy: *lib.get(b"ncclCommDestroy\0").map_err(missing("ncclCommDestroy"))?,
            all_reduce: *lib.get(b"ncclAllReduce\0").map_err(missing("ncclAllReduce"))?,
            all_gather: *lib.get(b"ncclAllGather\0").map_err(missing("ncclAllGather"))?,
            reduce_scatter: *lib.get(b"ncclReduceScatter\0").map_err(missing("ncclReduceScatter"))?,
            _lib: lib,
        })
    }
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| CudaError::NcclMissing(e.clone()))
}

/// NCCL's version (`ncclGetVersion`: major × 10,000 + minor × 100 + patch), or why it is missing.
pub fn version() -> Result<i32> {
    api().map(|a| a.version)
}

fn check(op: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let name = api()
        .ok()
        // SAFETY: NCCL returns a static NUL-terminated string for any code.
        .map(|a| unsafe { CStr::from_ptr((a.get_error_string)(code)) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(CudaError::Nccl { op, code, name })
}

/// `ncclDataType_t` of an element type.
fn dtype(t: ScalarType) -> c_int {
    match t {
        ScalarType::I32 => 2,
        ScalarType::U32 => 3,
        ScalarType::I64 => 4,
        ScalarType::U64 => 5,
        ScalarType::F32 => 7,
        ScalarType::F64 => 8,
    }
}

/// `ncclSum`.
const SUM: c_int = 0;

/// A communicator of one rank on one device (NCCL's collectives over the exec's one device).
pub(crate) struct Communicator {
    comm: Comm,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the exec that owns it
// is used from one thread at a time.
unsafe impl Send for Communicator {}

impl Communicator {
    /// A one-rank communicator on device `ordinal` (its primary context must be current).
    pub(crate) fn single(ordinal: i32) -> Result<Communicator> {
        let a = api()?;
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: one communicator written for one device ordinal.
        check("ncclCommInitAll", unsafe { (a.comm_init_all)(&mut comm, 1, &ordinal) })?;
        Ok(Communicator { comm })
    }

    /// Enqueues `op` over `elements` elements of `ty` (all-reduce: of the send; all-gather: of each
    /// rank's send; reduce-scatter: of each rank's receive) from device address `send` into `recv` on
    /// `stream` (a `CUstream` of the communicator's device; it may be capturing).
    pub(crate) fn enqueue(&self, op: CollectiveOp, ty: ScalarType, send: u64, recv: u64, elements: usize, stream: u64) -> Result<()> {
        let a = api()?;
        let (s, r, st) = (send as *const c_void, recv as *mut c_void, stream as Stream);
        // SAFETY: the exec vouches that `send` and `recv` are device memory of this device holding the
        // collective's extents (checked when the node was recorded), and that `stream` is live.
        let code = unsafe {
            match op {
                CollectiveOp::AllReduceSum => (a.all_reduce)(s, r, elements, dtype(ty), SUM, self.comm, st),
                CollectiveOp::AllGather => (a.all_gather)(s, r, elements, dtype(ty), self.comm, st),
                CollectiveOp::ReduceScatterSum => (a.reduce_scatter)(s, r, elements, dtype(ty), SUM, self.comm, st),
            }
        };
        check(op_name(op), code)
    }
}

fn op_name(op: CollectiveOp) -> &'static str {
    match op {
        CollectiveOp::AllReduceSum => "ncclAllReduce",
        CollectiveOp::AllGather => "ncclAllGather",
        CollectiveOp::ReduceScatterSum => "ncclReduceScatter",
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            // SAFETY: our own communicator, destroyed once; its work completed (the exec waits first).
            let _ = unsafe { (a.comm_destroy)(self.comm) };
        }
    }
}
