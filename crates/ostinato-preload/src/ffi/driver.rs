//! The real driver calls the read-back makes, resolved once through the real `cuGetProcAddress`
//! (never through the wrappers) at the version of the signature declared here, and run under the
//! relaxed stream-capture mode (a global-mode capture on another thread would otherwise refuse them).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::mem::MaybeUninit;
use std::ptr::null_mut;
use std::sync::OnceLock;

use super::procaddr;
use super::types::*;
use crate::error::ReadError;
use crate::model::{Hex, MemcpyNode, MemsetNode};
use crate::readback::{Driver, RawEdge, RawKernel, MAX_EDGES, MAX_NODES};

/// Resolves `name` at `version` as the function pointer type `F` (the signature of that version).
macro_rules! entry {
    ($name:literal, $version:literal, $ty:ty) => {{
        let raw = procaddr::real_entry($name, $version);
        // SAFETY: the driver's entry point `name` at `version` has the C signature `$ty` (cuda.h,
        // cudaTypedefs.h of CUDA 13.0); a function pointer is pointer-sized.
        (raw != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(raw) })
    }};
}

/// The real entry points (each `None` where the driver does not offer it).
pub(super) struct Table {
    get_nodes: Option<unsafe extern "C" fn(Handle, *mut Handle, *mut usize) -> CuResult>,
    get_edges: Option<unsafe extern "C" fn(Handle, *mut Handle, *mut Handle, *mut EdgeData, *mut usize) -> CuResult>,
    node_type: Option<unsafe extern "C" fn(Handle, *mut c_uint) -> CuResult>,
    kernel_params: Option<unsafe extern "C" fn(Handle, *mut KernelNodeParamsV2) -> CuResult>,
    memset_params: Option<unsafe extern "C" fn(Handle, *mut MemsetNodeParams) -> CuResult>,
    memcpy_params: Option<unsafe extern "C" fn(Handle, *mut Memcpy3d) -> CuResult>,
    func_name: Option<unsafe extern "C" fn(*mut *const c_char, Handle) -> CuResult>,
    func_module: Option<unsafe extern "C" fn(*mut Handle, Handle) -> CuResult>,
    func_param_info: Option<unsafe extern "C" fn(Handle, usize, *mut usize, *mut usize) -> CuResult>,
    kernel_library: Option<unsafe extern "C" fn(*mut Handle, Handle) -> CuResult>,
    kernel_function: Option<unsafe extern "C" fn(*mut Handle, Handle) -> CuResult>,
    address_range: Option<unsafe extern "C" fn(*mut DevicePtr, *mut usize, DevicePtr) -> CuResult>,
    exchange_capture_mode: Option<unsafe extern "C" fn(*mut c_int) -> CuResult>,
    ctx_get_device: Option<unsafe extern "C" fn(*mut c_int) -> CuResult>,
    device_attribute: Option<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult>,
}

impl Table {
    fn resolve() -> Table {
        Table {
            get_nodes: entry!(c"cuGraphGetNodes", 11030, _),
            get_edges: entry!(c"cuGraphGetEdges", 12030, _),
            node_type: entry!(c"cuGraphNodeGetType", 11030, _),
            kernel_params: entry!(c"cuGraphKernelNodeGetParams", 12000, _),
            memset_params: entry!(c"cuGraphMemsetNodeGetParams", 11030, _),
            memcpy_params: entry!(c"cuGraphMemcpyNodeGetParams", 11030, _),
            func_name: entry!(c"cuFuncGetName", 12030, _),
            func_module: entry!(c"cuFuncGetModule", 11030, _),
            func_param_info: entry!(c"cuFuncGetParamInfo", 12040, _),
            kernel_library: entry!(c"cuKernelGetLibrary", 12050, _),
            kernel_function: entry!(c"cuKernelGetFunction", 12000, _),
            address_range: entry!(c"cuMemGetAddressRange", 11030, _),
            exchange_capture_mode: entry!(c"cuThreadExchangeStreamCaptureMode", 11030, _),
            // 12000: the one-argument signature (13000 adds a context argument).
            ctx_get_device: entry!(c"cuCtxGetDevice", 12000, _),
            device_attribute: entry!(c"cuDeviceGetAttribute", 11030, _),
        }
    }
}

static TABLE: OnceLock<Table> = OnceLock::new();

/// Runs `f` over the real driver, under the relaxed capture mode; `None` before any real
/// `cuGetProcAddress` was seen.
pub(super) fn with_driver<T>(f: impl FnOnce(&Table) -> T) -> Option<T> {
    if TABLE.get().is_none() && !procaddr::ready() {
        return None;
    }
    let table = TABLE.get_or_init(Table::resolve);
    let _relaxed = Relaxed::enter(table);
    Some(f(table))
}

/// The relaxed capture mode for this thread, the previous one restored on drop.
struct Relaxed<'a> {
    table: &'a Table,
    previous: Option<c_int>,
}

impl<'a> Relaxed<'a> {
    fn enter(table: &'a Table) -> Relaxed<'a> {
        let mut mode = CAPTURE_MODE_RELAXED;
        // SAFETY: `mode` is a valid in/out capture mode.
        let ok = table.exchange_capture_mode.is_some_and(|f| unsafe { f(&mut mode) } == CUDA_SUCCESS);
        Relaxed { table, previous: ok.then_some(mode) }
    }
}

impl Drop for Relaxed<'_> {
    fn drop(&mut self) {
        if let (Some(mut mode), Some(f)) = (self.previous, self.table.exchange_capture_mode) {
            // SAFETY: as in `enter`, restoring the mode it returned.
            let _ = unsafe { f(&mut mode) };
        }
    }
}

/// `Ok` for success, else the error of `op`.
fn check(op: &'static str, rc: CuResult) -> Result<(), ReadError> {
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(ReadError::driver(op, rc))
    }
}

fn need<F>(f: Option<F>, op: &'static str) -> Result<F, ReadError> {
    f.ok_or(ReadError::Unresolved { op })
}

fn bound(what: &'static str, count: usize, limit: usize) -> Result<(), ReadError> {
    if count > limit {
        return Err(ReadError::Bound { what, count, limit });
    }
    Ok(())
}

fn handle(h: u64) -> Handle {
    h as usize as Handle
}

impl Driver for Table {
    fn device_arch(&self) -> Result<u32, ReadError> {
        let get = need(self.ctx_get_device, "cuCtxGetDevice")?;
        let attr = need(self.device_attribute, "cuDeviceGetAttribute")?;
        let (mut dev, mut major, mut minor) = (0, 0, 0);
        // SAFETY: out-pointers to locals.
        check("cuCtxGetDevice", unsafe { get(&mut dev) })?;
        // SAFETY: out-pointers to locals; `dev` the current device.
        check("cuDeviceGetAttribute", unsafe { attr(&mut major, ATTR_CC_MAJOR, dev) })?;
        // SAFETY: as above.
        check("cuDeviceGetAttribute", unsafe { attr(&mut minor, ATTR_CC_MINOR, dev) })?;
        Ok((major * 10 + minor) as u32)
    }

    fn nodes(&self, graph: u64) -> Result<Vec<u64>, ReadError> {
        let f = need(self.get_nodes, "cuGraphGetNodes")?;
        let mut n = 0usize;
        // SAFETY: a null array asks for the count only.
        check("cuGraphGetNodes", unsafe { f(handle(graph), null_mut(), &mut n) })?;
        bound("graph nodes", n, MAX_NODES)?;
        let mut nodes = vec![null_mut(); n];
        let mut got = n;
        // SAFETY: `nodes` holds `got` entries.
        check("cuGraphGetNodes", unsafe { f(handle(graph), nodes.as_mut_ptr(), &mut got) })?;
        nodes.truncate(got.min(n));
        Ok(nodes.into_iter().map(|h| h as u64).collect())
    }

    fn edges(&self, graph: u64) -> Result<Vec<RawEdge>, ReadError> {
        let f = need(self.get_edges, "cuGraphGetEdges_v2")?;
        let mut n = 0usize;
        // SAFETY: null arrays ask for the count only.
        check("cuGraphGetEdges_v2", unsafe { f(handle(graph), null_mut(), null_mut(), null_mut(), &mut n) })?;
        bound("graph edges", n, MAX_EDGES)?;
        let (mut from, mut to, mut data) = (vec![null_mut(); n], vec![null_mut(); n], vec![EdgeData::default(); n]);
        let mut got = n;
        // SAFETY: the three arrays hold `got` entries each.
        check("cuGraphGetEdges_v2", unsafe { f(handle(graph), from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut got) })?;
        let edges = from.iter().zip(&to).zip(&data).take(got.min(n));
        Ok(edges.map(|((f, t), d)| RawEdge { from: *f as u64, to: *t as u64, from_port: d.from_port, to_port: d.to_port, kind: d.kind }).collect())
    }

    fn node_type(&self, node: u64) -> Result<u32, ReadError> {
        let f = need(self.node_type, "cuGraphNodeGetType")?;
        let mut t: c_uint = 0;
        // SAFETY: an out-pointer to a local of the enum's size.
        check("cuGraphNodeGetType", unsafe { f(handle(node), &mut t) })?;
        Ok(t)
    }

    fn kernel(&self, node: u64) -> Result<RawKernel, ReadError> {
        let f = need(self.kernel_params, "cuGraphKernelNodeGetParams_v2")?;
        let mut p = MaybeUninit::<KernelNodeParamsV2>::zeroed();
        // SAFETY: an out-pointer to a zeroed struct of the v2 layout.
        check("cuGraphKernelNodeGetParams_v2", unsafe { f(handle(node), p.as_mut_ptr()) })?;
        // SAFETY: all-zero is a valid value of every field (pointers, integers), and the driver filled it.
        let p = unsafe { p.assume_init() };
        Ok(RawKernel {
            func: p.func as u64,
            kern: p.kern as u64,
            grid: p.grid,
            block: p.block,
            shared_bytes: p.shared_mem_bytes,
            kernel_params: p.kernel_params as u64,
            extra: p.extra as u64,
        })
    }

    fn memset(&self, node: u64) -> Result<MemsetNode, ReadError> {
        let f = need(self.memset_params, "cuGraphMemsetNodeGetParams")?;
        let mut p = MemsetNodeParams::default();
        // SAFETY: an out-pointer to a struct of the header's layout.
        check("cuGraphMemsetNodeGetParams", unsafe { f(handle(node), &mut p) })?;
        Ok(MemsetNode { dst: Hex(p.dst), pitch: p.pitch as u64, value: p.value, element_size: p.element_size, width: p.width as u64, height: p.height as u64 })
    }

    fn memcpy(&self, node: u64) -> Result<MemcpyNode, ReadError> {
        let f = need(self.memcpy_params, "cuGraphMemcpyNodeGetParams")?;
        let mut p = MaybeUninit::<Memcpy3d>::zeroed();
        // SAFETY: an out-pointer to a zeroed struct of the header's layout.
        check("cuGraphMemcpyNodeGetParams", unsafe { f(handle(node), p.as_mut_ptr()) })?;
        // SAFETY: all-zero is a valid value of every field, and the driver filled it.
        let p = unsafe { p.assume_init() };
        Ok(MemcpyNode {
            src_type: p.src_memory_type,
            dst_type: p.dst_memory_type,
            src: Hex(p.src_device),
            dst: Hex(p.dst_device),
            width: p.width_in_bytes as u64,
            height: p.height as u64,
            depth: p.depth as u64,
        })
    }

    fn kernel_function(&self, kern: u64) -> Result<u64, ReadError> {
        let f = need(self.kernel_function, "cuKernelGetFunction")?;
        let mut func: Handle = null_mut();
        // SAFETY: an out-pointer to a local handle.
        check("cuKernelGetFunction", unsafe { f(&mut func, handle(kern)) })?;
        Ok(func as u64)
    }

    fn func_name(&self, func: u64) -> Result<String, ReadError> {
        let f = need(self.func_name, "cuFuncGetName")?;
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: an out-pointer to a local.
        check("cuFuncGetName", unsafe { f(&mut name, handle(func)) })?;
        if name.is_null() {
            return Err(ReadError::Invalid { op: "cuFuncGetName", reason: "a null name".into() });
        }
        // SAFETY: the driver returns a NUL-terminated name it owns, valid while the module is loaded.
        Ok(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
    }

    fn func_module(&self, func: u64) -> Result<u64, ReadError> {
        let f = need(self.func_module, "cuFuncGetModule")?;
        let mut module: Handle = null_mut();
        // SAFETY: an out-pointer to a local handle.
        check("cuFuncGetModule", unsafe { f(&mut module, handle(func)) })?;
        Ok(module as u64)
    }

    fn kernel_library(&self, kern: u64) -> Result<u64, ReadError> {
        let f = need(self.kernel_library, "cuKernelGetLibrary")?;
        let mut library: Handle = null_mut();
        // SAFETY: an out-pointer to a local handle.
        check("cuKernelGetLibrary", unsafe { f(&mut library, handle(kern)) })?;
        Ok(library as u64)
    }

    fn param_info(&self, func: u64, index: usize) -> Result<(usize, usize), ReadError> {
        let f = need(self.func_param_info, "cuFuncGetParamInfo")?;
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: out-pointers to locals.
        check("cuFuncGetParamInfo", unsafe { f(handle(func), index, &mut offset, &mut size) })?;
        Ok((offset, size))
    }

    fn param_bytes(&self, kernel: &RawKernel, index: usize, offset: usize, size: usize) -> Result<Vec<u8>, ReadError> {
        if kernel.kernel_params != 0 {
            let array = kernel.kernel_params as usize as *const *const u8;
            // SAFETY: the node's param array holds one pointer per param of the function, and `index`
            // is below the function's param count.
            let value = unsafe { *array.add(index) };
            if value.is_null() {
                return Err(ReadError::Invalid { op: "cuGraphKernelNodeGetParams_v2", reason: format!("param {index} is a null pointer") });
            }
            // SAFETY: param `index`'s value is `size` bytes (the driver's param info).
            return Ok(unsafe { std::slice::from_raw_parts(value, size) }.to_vec());
        }
        // SAFETY: `extra`, when not null, is the node's launch option list.
        let (buffer, len) = unsafe { extra_buffer(kernel.extra as usize as *const *mut c_void) }?;
        let end = offset.checked_add(size).filter(|&e| e <= len);
        let end =
            end.ok_or_else(|| ReadError::Invalid { op: "kernel extra", reason: format!("param {index} ({offset}+{size}) is past the {len}-byte buffer") })?;
        // SAFETY: the buffer holds `len` bytes and `offset..end` lies within them.
        Ok(unsafe { std::slice::from_raw_parts(buffer.add(offset), end - offset) }.to_vec())
    }

    fn address_range(&self, address: u64) -> Option<(u64, u64)> {
        let f = self.address_range?;
        let (mut base, mut size) = (0 as DevicePtr, 0usize);
        // SAFETY: out-pointers to locals; any address may be asked.
        let rc = unsafe { f(&mut base, &mut size, address) };
        (rc == CUDA_SUCCESS && size > 0).then_some((base, size as u64))
    }
}

/// The param buffer of a launch's `extra` list (`CU_LAUNCH_PARAM_BUFFER_POINTER`,
/// `CU_LAUNCH_PARAM_BUFFER_SIZE` pairs, ended by `CU_LAUNCH_PARAM_END`), read at most 16 pairs far.
///
/// # Safety
/// `extra` must be null or such a list, with the buffer and size it names valid.
unsafe fn extra_buffer(extra: *const *mut c_void) -> Result<(*const u8, usize), ReadError> {
    let invalid = |reason: &str| ReadError::Invalid { op: "kernel extra", reason: reason.to_string() };
    if extra.is_null() {
        return Err(invalid("the node has neither a param array nor an extra list"));
    }
    let (mut buffer, mut len) = (None, None);
    for pair in 0..16 {
        // SAFETY: the list holds key/value pairs up to its end key.
        let key = unsafe { *extra.add(2 * pair) } as usize;
        if key == LAUNCH_PARAM_END {
            break;
        }
        // SAFETY: as above: a key other than the end is followed by its value.
        let value = unsafe { *extra.add(2 * pair + 1) };
        match key {
            LAUNCH_PARAM_BUFFER_POINTER => buffer = Some(value as *const u8),
            // SAFETY: the size key's value points to a `size_t`.
            LAUNCH_PARAM_BUFFER_SIZE if !value.is_null() => len = Some(unsafe { *(value as *const usize) }),
            _ => return Err(invalid(&format!("an unknown key {key:#x}"))),
        }
    }
    match (buffer, len) {
        (Some(b), Some(l)) if !b.is_null() => Ok((b, l)),
        _ => Err(invalid("no param buffer and size")),
    }
}
