//! The entry points that change an executable graph in place — the node param setters, enabling a
//! node, a whole-graph update — and its upload. An adopted graph is a second executable graph beside
//! the application's: a change goes to the application's own (its node handles are that graph's)
//! first. A node param change is then made on the adopted graph's replica (a clone of the
//! application's graph with its captured edges and every change since), which is adopted again: where
//! the adopted edges stay, the adopted executable graph takes the same change in place; otherwise the
//! adopted graph is made again from the replica and replaces the old one. A whole-graph update gives
//! the new graph: it is adopted again, as at instantiate, and replaces the old adopted graph. Where
//! either fails (the change cannot be read or adopted), and for enabling or disabling a node, the
//! adoption is revoked: from then on launches run the application's graph, changed (the next launch
//! follows the adopted graph's last one). An upload of an adopted graph uploads the adopted executable
//! graph.
//!
//! Missing one of these would let an adopted graph run without a change the application made, so
//! where one of them cannot be wrapped (its slot already holds another real pointer) adoption stops:
//! no graph is adopted after that, and every adopted graph is revoked at its next launch.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::adopted::Setter;
use super::types::{CuResult, Handle, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, PROC_PER_THREAD};
use super::{guarded, observing, own_work, Slot};

type SetParams = unsafe extern "C" fn(Handle, Handle, *const c_void) -> CuResult;
type SetParamsCtx = unsafe extern "C" fn(Handle, Handle, *const c_void, Handle) -> CuResult;
type SetEnabled = unsafe extern "C" fn(Handle, Handle, c_uint) -> CuResult;
type Update = unsafe extern "C" fn(Handle, Handle, *mut c_void) -> CuResult;
type UpdateLegacy = unsafe extern "C" fn(Handle, Handle, *mut Handle, *mut c_int) -> CuResult;
type Upload = unsafe extern "C" fn(Handle, Handle) -> CuResult;

static KERNEL_V1: Slot = Slot::new();
static KERNEL_V2: Slot = Slot::new();
static NODE: Slot = Slot::new();
static MEMSET: Slot = Slot::new();
static MEMCPY: Slot = Slot::new();
static ENABLED: Slot = Slot::new();
static UPDATE: Slot = Slot::new();
static UPDATE_LEGACY: Slot = Slot::new();
static UPLOAD: Slot = Slot::new();
static UPLOAD_PTSZ: Slot = Slot::new();

/// The first mutating entry point handed out unwrapped (an index into [`NAMES`] plus one; 0: none).
static UNWRAPPED: AtomicUsize = AtomicUsize::new(0);

const NAMES: [&str; 6] = [
    "cuGraphExecKernelNodeSetParams",
    "cuGraphExecNodeSetParams",
    "cuGraphExecMemsetNodeSetParams",
    "cuGraphExecMemcpyNodeSetParams",
    "cuGraphNodeSetEnabled",
    "cuGraphExecUpdate",
];

/// The mutating entry point that was handed out unwrapped, if any.
pub(super) fn unwrapped() -> Option<&'static str> {
    NAMES.get(UNWRAPPED.load(Ordering::Relaxed).checked_sub(1)?).copied()
}

/// The wrapper for `name` at `version` with `flags` (real entry point `real`), for the entry points
/// of this module; `None` for any other.
pub(super) fn wrapper_for(name: &[u8], version: c_int, flags: u64, real: usize) -> Option<usize> {
    let per_thread = flags & PROC_PER_THREAD != 0;
    let (slot, wrapper, mutating): (&Slot, usize, Option<usize>) = match name {
        // Below 12000 the v1 params struct, from 12000 v2: the same C signature, two slots.
        b"cuGraphExecKernelNodeSetParams" if version < 12000 => (&KERNEL_V1, kernel_v1 as SetParams as usize, Some(0)),
        b"cuGraphExecKernelNodeSetParams" => (&KERNEL_V2, kernel_v2 as SetParams as usize, Some(0)),
        b"cuGraphExecNodeSetParams" => (&NODE, node as SetParams as usize, Some(1)),
        b"cuGraphExecMemsetNodeSetParams" => (&MEMSET, memset as SetParamsCtx as usize, Some(2)),
        b"cuGraphExecMemcpyNodeSetParams" => (&MEMCPY, memcpy as SetParamsCtx as usize, Some(3)),
        b"cuGraphNodeSetEnabled" => (&ENABLED, enabled as SetEnabled as usize, Some(4)),
        b"cuGraphExecUpdate" if version < 12000 => (&UPDATE_LEGACY, update_legacy as UpdateLegacy as usize, Some(5)),
        b"cuGraphExecUpdate" => (&UPDATE, update as Update as usize, Some(5)),
        b"cuGraphUpload" if per_thread => (&UPLOAD_PTSZ, upload_ptsz as Upload as usize, None),
        b"cuGraphUpload" => (&UPLOAD, upload as Upload as usize, None),
        _ => return None,
    };
    if real == wrapper {
        return None;
    }
    if slot.claim(real) {
        return Some(wrapper);
    }
    if let Some(i) = mutating {
        let _ = UNWRAPPED.compare_exchange(0, i + 1, Ordering::Relaxed, Ordering::Relaxed);
    }
    None
}

/// Gives the adoption of `exec` up (`api` changed it in place, the change not made on its replica),
/// and destroys the replica, now stale.
fn give_up(state: &crate::state::State, exec: Handle, api: &'static str) {
    if let Some(Some(replica)) = guarded(|| state.revoke(exec as u64, api)) {
        guarded(|| super::adopted::destroy_replica(&replica));
    }
}

/// After `rc` of `api` on `exec`: a change made gives the adoption up.
fn changed(rc: CuResult, exec: Handle, api: &'static str) -> CuResult {
    if rc == CUDA_SUCCESS {
        if let Some(state) = observing() {
            give_up(state, exec, api);
        }
    }
    rc
}

/// After `rc` of a node param change `api` on `exec` (node `node`, `params` of `setter`'s struct;
/// `apply` makes the same change on another executable graph's node): adopted again
/// ([`super::adopted::node_params`]: in place where the adopted edges stay, else made again), or,
/// where that fails, given up.
fn node_changed(
    rc: CuResult,
    exec: Handle,
    node: Handle,
    params: *const c_void,
    setter: Setter,
    api: &'static str,
    apply: &dyn Fn(Handle, Handle) -> CuResult,
) -> CuResult {
    if rc == CUDA_SUCCESS {
        if let Some(state) = observing() {
            if own_work(|| super::adopted::node_params(state, exec as u64, node as u64, params, setter, api, apply)) != Some(true) {
                give_up(state, exec, api);
            }
        }
    }
    rc
}

pub(super) fn set_params(slot: &Slot, setter: Setter, api: &'static str, exec: Handle, node: Handle, params: *const c_void) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<SetParams>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged; then the same params for the adopted
    // executable graph's node (an executable graph and node of the interposer's own).
    let apply = |e: Handle, n: Handle| unsafe { real(e, n, params) };
    node_changed(apply(exec, node), exec, node, params, setter, api, &apply)
}

/// `cuGraphExecKernelNodeSetParams` (v1 params).
unsafe extern "C" fn kernel_v1(exec: Handle, node: Handle, params: *const c_void) -> CuResult {
    set_params(&KERNEL_V1, Setter::KernelV1, "cuGraphExecKernelNodeSetParams", exec, node, params)
}

/// `cuGraphExecKernelNodeSetParams_v2`.
unsafe extern "C" fn kernel_v2(exec: Handle, node: Handle, params: *const c_void) -> CuResult {
    set_params(&KERNEL_V2, Setter::KernelV2, "cuGraphExecKernelNodeSetParams_v2", exec, node, params)
}

/// `cuGraphExecNodeSetParams`.
unsafe extern "C" fn node(exec: Handle, node: Handle, params: *const c_void) -> CuResult {
    set_params(&NODE, Setter::Node, "cuGraphExecNodeSetParams", exec, node, params)
}

pub(super) fn set_params_ctx(slot: &Slot, setter: Setter, api: &'static str, exec: Handle, node: Handle, params: *const c_void, ctx: Handle) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<SetParamsCtx>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged; then the same params and context for the
    // adopted executable graph's node.
    let apply = |e: Handle, n: Handle| unsafe { real(e, n, params, ctx) };
    node_changed(apply(exec, node), exec, node, params, setter, api, &apply)
}

/// `cuGraphExecMemsetNodeSetParams`.
unsafe extern "C" fn memset(exec: Handle, node: Handle, params: *const c_void, ctx: Handle) -> CuResult {
    set_params_ctx(&MEMSET, Setter::Memset, "cuGraphExecMemsetNodeSetParams", exec, node, params, ctx)
}

/// `cuGraphExecMemcpyNodeSetParams`.
unsafe extern "C" fn memcpy(exec: Handle, node: Handle, params: *const c_void, ctx: Handle) -> CuResult {
    set_params_ctx(&MEMCPY, Setter::Memcpy, "cuGraphExecMemcpyNodeSetParams", exec, node, params, ctx)
}

/// `cuGraphNodeSetEnabled` through `slot`.
pub(super) fn enabled_in(slot: &Slot, exec: Handle, node: Handle, on: c_uint) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<SetEnabled>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    changed(unsafe { real(exec, node, on) }, exec, "cuGraphNodeSetEnabled")
}

/// `cuGraphNodeSetEnabled`.
unsafe extern "C" fn enabled(exec: Handle, node: Handle, on: c_uint) -> CuResult {
    enabled_in(&ENABLED, exec, node, on)
}

/// After a whole-graph update of `exec` from `graph`: the adoption made again from `graph` where it
/// ran adopted ([`super::adopted::readopt`]: the same decision and adoption as at instantiate, the
/// adopted graph made again and swapped in), else revoked as any change in place is.
fn updated(rc: CuResult, exec: Handle, graph: Handle, api: &'static str) -> CuResult {
    if rc == CUDA_SUCCESS {
        if let Some(state) = observing() {
            if own_work(|| super::adopted::readopt(state, exec as u64, graph as u64, api)) != Some(true) {
                give_up(state, exec, api);
            }
        }
    }
    rc
}

/// `cuGraphExecUpdate_v2` through `slot`.
pub(super) fn update_in(slot: &Slot, exec: Handle, graph: Handle, info: *mut c_void) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<Update>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    updated(unsafe { real(exec, graph, info) }, exec, graph, "cuGraphExecUpdate_v2")
}

/// `cuGraphExecUpdate_v2`.
unsafe extern "C" fn update(exec: Handle, graph: Handle, info: *mut c_void) -> CuResult {
    update_in(&UPDATE, exec, graph, info)
}

/// `cuGraphExecUpdate` of the legacy signature (error node and result out-pointers) through `slot`.
pub(super) fn update_legacy_in(slot: &Slot, exec: Handle, graph: Handle, error_node: *mut Handle, result: *mut c_int) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<UpdateLegacy>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    // SAFETY: the caller's arguments, forwarded unchanged.
    updated(unsafe { real(exec, graph, error_node, result) }, exec, graph, "cuGraphExecUpdate")
}

/// `cuGraphExecUpdate` asked below 12000.
unsafe extern "C" fn update_legacy(exec: Handle, graph: Handle, error_node: *mut Handle, result: *mut c_int) -> CuResult {
    update_legacy_in(&UPDATE_LEGACY, exec, graph, error_node, result)
}

pub(super) fn upload_with(slot: &Slot, exec: Handle, stream: Handle) -> CuResult {
    // SAFETY: the slot holds the real entry point of this signature.
    let Some(real) = (unsafe { slot.get::<Upload>() }) else { return CUDA_ERROR_NOT_INITIALIZED };
    let target = observing().and_then(|s| guarded(|| s.upload_target(exec as u64))).unwrap_or(exec as u64);
    // SAFETY: the caller's executable graph or its adopted one (made by this interposer), on the
    // caller's stream.
    unsafe { real(target as usize as Handle, stream) }
}

/// `cuGraphUpload`.
unsafe extern "C" fn upload(exec: Handle, stream: Handle) -> CuResult {
    upload_with(&UPLOAD, exec, stream)
}

/// `cuGraphUpload_ptsz`.
unsafe extern "C" fn upload_ptsz(exec: Handle, stream: Handle) -> CuResult {
    upload_with(&UPLOAD_PTSZ, exec, stream)
}
