//! The driver entry points the interposer wraps, exported under their own names for code linked to
//! libcuda directly. cudart reaches the driver through `cuGetProcAddress` (wrapped in
//! [`super::procaddr`]), but a program or library built with `-lcuda` calls `cuModuleLoadData`,
//! `cuGraphLaunch`, ... through its PLT, and the dynamic linker binds those to the first definition in
//! load order: the preloaded library's. Triton is one: its `cuda_utils` module is linked to libcuda
//! and loads every compiled kernel with `cuModuleLoadData`, so without these exports no Triton kernel's
//! code would be known. A library that opens libcuda itself and asks `dlsym` for one of these names
//! gets the export too (the exported `dlsym` swaps it in, [`swap`]).
//!
//! Each export forwards to the real entry point of the same name — the next definition after this
//! library ([`dlsym::next`]: `dlsym(RTLD_NEXT, …)`, else the first other loaded object that defines
//! it, for definers in a library's local scope), or the one a `dlsym` on libcuda's handle returned —
//! held in a slot of its own, through the same observing code as the `cuGetProcAddress` wrappers. The names are the
//! symbols libcuda exports, each with that symbol's signature: the unsuffixed `cuGraphInstantiate`,
//! `cuGraphExecKernelNodeSetParams` and `cuGraphExecUpdate` are the oldest ABI (CUDA 13's header maps
//! those names to `cuGraphInstantiateWithFlags`, `…_v2` and `cuGraphExecUpdate_v2`, also exported).
//! Where no libcuda is in the global scope, `dlsym` of these names there answers null, as it would
//! without the interposer.

#![allow(non_snake_case)]
// In the unit tests' binary nothing is exported, and the bodies' imports and the name macro go unused.
#![cfg_attr(test, allow(unused_imports, unused_macros))]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use super::adopted::Setter;
use super::types::{CuResult, Handle, InstantiateParams};
use super::{dlsym, hooks, mutate, Slot};
use crate::store::Origin;

/// The real entry point `slot` holds, resolved as the next definition of `name` on first use.
fn resolved<'a>(slot: &'a Slot, name: &CStr) -> &'a Slot {
    if slot.raw() == 0 {
        slot.claim(dlsym::next(name));
    }
    slot
}

/// An export's name as a `CStr`, at compile time.
macro_rules! name {
    ($name:ident) => {
        const { cstr(concat!(stringify!($name), "\0")) }
    };
}

macro_rules! exports {
    ($($name:ident ($($arg:ident: $ty:ty),*) |$slot:ident| $body:expr;)*) => {
        /// The real entry point of each export.
        #[allow(non_upper_case_globals)]
        mod real {
            use super::Slot;
            $(pub static $name: Slot = Slot::new();)*
        }

        $(
            #[doc = concat!("`", stringify!($name), "`, for callers linked to libcuda.")]
            ///
            /// # Safety
            /// The caller's contract is the driver's.
            #[cfg(not(test))]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CuResult {
                let $slot = resolved(&real::$name, name!($name));
                $body
            }
        )*

        /// Each export: its name, the slot of its real entry point and its address.
        #[cfg(not(test))]
        fn table() -> &'static [(&'static CStr, &'static Slot, usize)] {
            type Entry = (&'static CStr, &'static Slot, usize);
            static TABLE: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
            TABLE.get_or_init(|| vec![$((name!($name), &real::$name, $name as unsafe extern "C" fn($($ty),*) -> CuResult as usize),)*])
        }
    };
}

/// `text` (NUL-terminated, no NUL inside) as a `CStr`, at compile time.
const fn cstr(text: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(text.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("an export's name must be NUL-terminated"),
    }
}

exports! {
    cuGraphInstantiateWithFlags(exec: *mut Handle, graph: Handle, flags: u64) |s|
        hooks::instantiate_flags_in(s, "cuGraphInstantiateWithFlags", exec, graph, flags);
    cuGraphInstantiate(exec: *mut Handle, graph: Handle, err: *mut Handle, log: *mut c_char, len: usize) |s|
        hooks::instantiate_legacy_in(s, exec, graph, err, log, len);
    cuGraphInstantiate_v2(exec: *mut Handle, graph: Handle, err: *mut Handle, log: *mut c_char, len: usize) |s|
        hooks::instantiate_legacy_in(s, exec, graph, err, log, len);
    cuGraphInstantiateWithParams(exec: *mut Handle, graph: Handle, params: *mut InstantiateParams) |s|
        hooks::with_params(s, "cuGraphInstantiateWithParams", exec, graph, params);
    cuGraphInstantiateWithParams_ptsz(exec: *mut Handle, graph: Handle, params: *mut InstantiateParams) |s|
        hooks::with_params(s, "cuGraphInstantiateWithParams_ptsz", exec, graph, params);
    cuGraphLaunch(exec: Handle, stream: Handle) |s| hooks::launch_with(s, exec, stream, false);
    cuGraphLaunch_ptsz(exec: Handle, stream: Handle) |s| hooks::launch_with(s, exec, stream, true);
    cuGraphExecDestroy(exec: Handle) |s| hooks::exec_destroy_in(s, exec);
    cuGraphUpload(exec: Handle, stream: Handle) |s| mutate::upload_with(s, exec, stream);
    cuGraphUpload_ptsz(exec: Handle, stream: Handle) |s| mutate::upload_with(s, exec, stream);
    cuModuleLoadData(module: *mut Handle, image: *const c_void) |s|
        hooks::module_load_in(s, Origin::ModuleLoadData, module, image);
    cuModuleLoadDataEx(module: *mut Handle, image: *const c_void, n: c_uint, options: *mut c_int, values: *mut *mut c_void) |s|
        hooks::module_load_ex_in(s, module, image, n, options, values);
    cuModuleLoadFatBinary(module: *mut Handle, fat: *const c_void) |s|
        hooks::module_load_in(s, Origin::ModuleLoadFatBinary, module, fat);
    cuLibraryLoadData(library: *mut Handle, code: *const c_void, jit_options: *mut c_int, jit_values: *mut *mut c_void, jit_count: c_uint,
        library_options: *mut c_int, library_values: *mut *mut c_void, library_count: c_uint) |s|
        hooks::library_load_in(s, library, code, jit_options, jit_values, jit_count, library_options, library_values, library_count);
    cuModuleUnload(module: Handle) |s| hooks::unload_with(s, module, false);
    cuLibraryUnload(library: Handle) |s| hooks::unload_with(s, library, true);
    cuGraphExecKernelNodeSetParams(exec: Handle, node: Handle, params: *const c_void) |s|
        mutate::set_params(s, Setter::KernelV1, "cuGraphExecKernelNodeSetParams", exec, node, params);
    cuGraphExecKernelNodeSetParams_v2(exec: Handle, node: Handle, params: *const c_void) |s|
        mutate::set_params(s, Setter::KernelV2, "cuGraphExecKernelNodeSetParams_v2", exec, node, params);
    cuGraphExecNodeSetParams(exec: Handle, node: Handle, params: *const c_void) |s|
        mutate::set_params(s, Setter::Node, "cuGraphExecNodeSetParams", exec, node, params);
    cuGraphExecMemsetNodeSetParams(exec: Handle, node: Handle, params: *const c_void, ctx: Handle) |s|
        mutate::set_params_ctx(s, Setter::Memset, "cuGraphExecMemsetNodeSetParams", exec, node, params, ctx);
    cuGraphExecMemcpyNodeSetParams(exec: Handle, node: Handle, params: *const c_void, ctx: Handle) |s|
        mutate::set_params_ctx(s, Setter::Memcpy, "cuGraphExecMemcpyNodeSetParams", exec, node, params, ctx);
    cuGraphNodeSetEnabled(exec: Handle, node: Handle, on: c_uint) |s| mutate::enabled_in(s, exec, node, on);
    cuGraphExecUpdate(exec: Handle, graph: Handle, error_node: *mut Handle, result: *mut c_int) |s|
        mutate::update_legacy_in(s, exec, graph, error_node, result);
    cuGraphExecUpdate_v2(exec: Handle, graph: Handle, info: *mut c_void) |s| mutate::update_in(s, exec, graph, info);
}

/// What `dlsym` answers for `name` where the real `dlsym` found `found`: `Some(export)` where this
/// library exports `name` and forwards it to `found`, `Some(0)` (null) where `found` is the export
/// itself but no definition follows it in the global scope, `None` (answer `found`) otherwise.
#[cfg(not(test))]
pub(super) fn swap(name: &[u8], found: usize) -> Option<usize> {
    let (name, slot, export) = table().iter().find(|(n, _, _)| n.to_bytes() == name)?;
    if found == *export {
        // Asked of the global scope (`RTLD_DEFAULT`, say): answered as without the interposer — null
        // unless a definition follows there.
        let global = dlsym::next_global(name);
        if global == 0 {
            return Some(0);
        }
        slot.claim(global);
        return Some(*export);
    }
    // Another definition (asked of libcuda's handle): the export forwards to it if its slot holds it.
    slot.claim(found);
    (slot.raw() == found).then_some(*export)
}

/// In the unit tests' binary nothing is exported.
#[cfg(test)]
pub(super) fn swap(_name: &[u8], _found: usize) -> Option<usize> {
    None
}
