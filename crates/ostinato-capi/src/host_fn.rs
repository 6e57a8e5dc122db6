//! Host kernels written in C: a function pointer with user data, called once per launch with a
//! context through which it reads and writes its declared extents (every access checked).

use std::ffi::{c_char, c_void};

use ostinato_runtime::ostinato_host::{HostKernel, KernelCtx};

use crate::graph::{graph_of, ost_scalar};
use crate::ost_status::{self, *};
use crate::{guard, put, Fallible};

/// The context of one launch of a C host kernel: a key valid on the thread that runs the call, while
/// it runs. Any other value — garbage, a handle of a finished call, or one used from another thread —
/// is refused with `OST_ERR_HANDLE`, never dereferenced.
pub struct ost_host_call {
    _private: [u8; 0],
}

/// A host kernel's body: runs one launch; returns `OST_OK` (0), or any other code to fail the replay
/// (with `ost_host_call_fail` for a message). It may be called from any of the host backend's worker
/// threads, one launch at a time per node, so `user` must be safe to use from several threads.
pub type ost_host_fn = Option<unsafe extern "C" fn(call: *const ost_host_call, user: *mut c_void) -> i32>;

/// What a C host kernel's call sees.
struct Call<'a, 'b> {
    cx: &'a KernelCtx<'b>,
    message: std::cell::RefCell<Option<String>>,
}

/// The C function and its user data, as a Rust closure may hold them.
#[derive(Clone, Copy)]
struct CFunction {
    f: unsafe extern "C" fn(*const ost_host_call, *mut c_void) -> i32,
    user: *mut c_void,
}

impl CFunction {
    /// Calls the function with its user data.
    ///
    /// # Safety
    /// `call` points to the live `Call` of this launch.
    unsafe fn call(&self, call: *const ost_host_call) -> i32 {
        // SAFETY: the caller of `ost_graph_set_host_kernel` vouched for the function and its data.
        unsafe { (self.f)(call, self.user) }
    }
}

// SAFETY: the header makes the caller promise that the function and its user data may be called from
// any thread; Ostinato calls it for one launch at a time per node, as the plan's edges allow.
unsafe impl Send for CFunction {}
// SAFETY: as above.
unsafe impl Sync for CFunction {}

/// Binds kernel `kernel` on the host backend to the C function `f` with `user` (kept until the graph
/// and every plan and exec made from it are freed; Ostinato never frees `user`).
///
/// # Safety
/// `f` is a function of the `ost_host_fn` type that may be called from any thread with `user`, for as
/// long as an exec made from this graph lives.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_set_host_kernel(g: *mut crate::graph::ost_graph, kernel: u32, f: ost_host_fn, user: *mut c_void) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        let f = f.ok_or((OST_ERR_NULL, "the host function is NULL".to_string()))?;
        let c = CFunction { f, user };
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        let kernel = g.kernel_id(kernel, &|| "kernel".into())?;
        let sig = g.graph.kernels()[kernel.index()].clone();
        let name = sig.name.clone();
        let k = HostKernel::new(sig, move |cx| {
            let call = Call { cx, message: std::cell::RefCell::new(None) };
            let live = LiveCall::enter(&call);
            // SAFETY: the handle is a key of `call`, live on this thread until `live` drops after it.
            let code = unsafe { c.call(live.key as *const ost_host_call) };
            drop(live);
            match code {
                0 => Ok(()),
                code => Err(call.message.borrow_mut().take().unwrap_or_else(|| format!("host kernel `{name}` returned {code}"))),
            }
        });
        g.host_fns[kernel.index()] = Some(k);
        Ok(())
    })
}

thread_local! {
    /// The calls running on this thread (innermost last), by key, with their address.
    static LIVE_CALLS: std::cell::RefCell<Vec<(usize, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A call registered as live on this thread while the value lives: its key is the handle C gets.
struct LiveCall {
    key: usize,
}

impl LiveCall {
    fn enter(call: &Call<'_, '_>) -> LiveCall {
        let key = crate::next_key();
        LIVE_CALLS.with(|l| l.borrow_mut().push((key, call as *const Call as usize)));
        LiveCall { key }
    }
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        LIVE_CALLS.with(|l| l.borrow_mut().retain(|(k, _)| *k != self.key));
    }
}

/// The call behind a handle the C function was given: a key of a call live on this thread, or refused.
fn call_of<'a>(call: *const ost_host_call) -> Fallible<&'a Call<'a, 'a>> {
    if call.is_null() {
        return Err((OST_ERR_NULL, "the call handle is NULL".into()));
    }
    let key = call as usize;
    let address = LIVE_CALLS.with(|l| l.borrow().iter().find(|(k, _)| *k == key).map(|(_, a)| *a)).ok_or_else(|| {
        (OST_ERR_HANDLE, format!("{key:#x} is not the handle of a host kernel call running on this thread (a call handle is valid only during its call)"))
    })?;
    // SAFETY: the key is registered only while its `Call` lives on this thread's stack (`LiveCall` is
    // dropped before the call returns), and it is looked up on that thread only.
    Ok(unsafe { &*(address as *const Call) })
}

/// Reads `len` bytes at `offset` of buffer param `param` into `dst`. Refused outside the param's
/// declared extent or for a param declared write-only.
///
/// # Safety
/// `dst` points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ost_host_call_read(call: *const ost_host_call, param: u32, offset: u64, dst: *mut c_void, len: usize) -> ost_status {
    guard(|| {
        let c = call_of(call)?;
        // SAFETY: the caller vouches for `len` writable bytes.
        let out = unsafe { crate::items_mut(dst as *mut u8, len, "dst") }?;
        let view = c.cx.buffer(param as usize).map_err(|e| (OST_ERR_ARGUMENT, e))?;
        view.read_bytes(offset, out).map_err(|e| (OST_ERR_ARGUMENT, e))
    })
}

/// Writes `len` bytes from `src` at `offset` of buffer param `param`. Refused outside the declared
/// extent or for a param declared read-only.
///
/// # Safety
/// `src` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ost_host_call_write(call: *const ost_host_call, param: u32, offset: u64, src: *const c_void, len: usize) -> ost_status {
    guard(|| {
        let c = call_of(call)?;
        // SAFETY: the caller vouches for `len` readable bytes.
        let data = unsafe { crate::items(src as *const u8, len, "src") }?;
        let view = c.cx.buffer(param as usize).map_err(|e| (OST_ERR_ARGUMENT, e))?;
        view.write_bytes(offset, data).map_err(|e| (OST_ERR_ARGUMENT, e))
    })
}

/// The value of scalar param `param` (a slot's value at this replay for a slot arg).
///
/// # Safety
/// `out` is NULL or points to a writable `ost_scalar`.
#[no_mangle]
pub unsafe extern "C" fn ost_host_call_scalar(call: *const ost_host_call, param: u32, out: *mut ost_scalar) -> ost_status {
    guard(|| {
        let c = call_of(call)?;
        let s = c.cx.scalar(param as usize).map_err(|e| (OST_ERR_ARGUMENT, e))?;
        let type_ = match s.ty {
            ostinato::ScalarType::U32 => crate::graph::OST_U32,
            ostinato::ScalarType::I32 => crate::graph::OST_I32,
            ostinato::ScalarType::U64 => crate::graph::OST_U64,
            ostinato::ScalarType::I64 => crate::graph::OST_I64,
            ostinato::ScalarType::F32 => crate::graph::OST_F32,
            ostinato::ScalarType::F64 => crate::graph::OST_F64,
        };
        // SAFETY: the caller vouches for a writable `ost_scalar`.
        unsafe { put(out, ost_scalar { type_, bits: s.bits }, "out") }
    })
}

/// Gives the failing replay a message (the function then returns a non-zero code).
///
/// # Safety
/// `message` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ost_host_call_fail(call: *const ost_host_call, message: *const c_char) -> ost_status {
    guard(|| {
        let c = call_of(call)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let m = unsafe { crate::text(message, "message") }?;
        *c.message.borrow_mut() = Some(m.to_string());
        Ok(())
    })
}
