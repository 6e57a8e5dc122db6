//! The C types of CUDA 13.0's `cuda.h` this crate passes to the driver, declared here (the sizes and
//! offsets below were printed by a C program compiled against that header, and are checked at
//! compile time). Handles are opaque pointers.

use std::ffi::{c_int, c_uint, c_void};
use std::mem::{offset_of, size_of};

/// `CUresult`.
pub type CuResult = c_int;
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_NOT_INITIALIZED`: what a wrapper returns when its real entry point is missing.
pub const CUDA_ERROR_NOT_INITIALIZED: CuResult = 3;

/// Any driver handle (`CUgraph`, `CUgraphNode`, `CUgraphExec`, `CUfunction`, `CUkernel`, `CUmodule`,
/// `CUlibrary`, `CUstream`).
pub type Handle = *mut c_void;
/// `CUdeviceptr` (64-bit).
pub type DevicePtr = u64;

/// `cuGetProcAddress` flags: `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`.
pub const PROC_PER_THREAD: u64 = 1 << 1;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
pub const CAPTURE_MODE_RELAXED: c_int = 2;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` and `_MINOR`.
pub const ATTR_CC_MAJOR: c_int = 75;
pub const ATTR_CC_MINOR: c_int = 76;
/// `CU_LAUNCH_PARAM_END`, `CU_LAUNCH_PARAM_BUFFER_POINTER`, `CU_LAUNCH_PARAM_BUFFER_SIZE` (as ints).
pub const LAUNCH_PARAM_END: usize = 0;
pub const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
pub const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;

/// `CUDA_KERNEL_NODE_PARAMS_v2`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelNodeParamsV2 {
    pub func: Handle,
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub kernel_params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
    pub kern: Handle,
    pub ctx: Handle,
}

/// `CUgraphEdgeData`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EdgeData {
    pub from_port: u8,
    pub to_port: u8,
    pub kind: u8,
    pub reserved: [u8; 5],
}

/// `CUDA_MEMSET_NODE_PARAMS` (v1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MemsetNodeParams {
    pub dst: DevicePtr,
    pub pitch: usize,
    pub value: c_uint,
    pub element_size: c_uint,
    pub width: usize,
    pub height: usize,
}

/// `CUDA_MEMCPY3D` (v2).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memcpy3d {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_memory_type: c_uint,
    pub src_host: *const c_void,
    pub src_device: DevicePtr,
    pub src_array: Handle,
    pub reserved0: *mut c_void,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_memory_type: c_uint,
    pub dst_host: *mut c_void,
    pub dst_device: DevicePtr,
    pub dst_array: Handle,
    pub reserved1: *mut c_void,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width_in_bytes: usize,
    pub height: usize,
    pub depth: usize,
}

/// `CUDA_GRAPH_INSTANTIATE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InstantiateParams {
    pub flags: u64,
    pub upload_stream: Handle,
    pub err_node_out: Handle,
    pub result_out: c_int,
}

// The layouts of CUDA 13.0's header on x86-64 Linux.
const _: () = {
    assert!(size_of::<KernelNodeParamsV2>() == 72);
    assert!(offset_of!(KernelNodeParamsV2, grid) == 8);
    assert!(offset_of!(KernelNodeParamsV2, shared_mem_bytes) == 32);
    assert!(offset_of!(KernelNodeParamsV2, kernel_params) == 40);
    assert!(offset_of!(KernelNodeParamsV2, extra) == 48);
    assert!(offset_of!(KernelNodeParamsV2, kern) == 56);
    assert!(offset_of!(KernelNodeParamsV2, ctx) == 64);
    assert!(size_of::<EdgeData>() == 8 && offset_of!(EdgeData, kind) == 2);
    assert!(size_of::<MemsetNodeParams>() == 40);
    assert!(offset_of!(MemsetNodeParams, value) == 16 && offset_of!(MemsetNodeParams, element_size) == 20);
    assert!(offset_of!(MemsetNodeParams, width) == 24 && offset_of!(MemsetNodeParams, height) == 32);
    assert!(size_of::<Memcpy3d>() == 200);
    assert!(offset_of!(Memcpy3d, src_memory_type) == 32 && offset_of!(Memcpy3d, src_device) == 48);
    assert!(offset_of!(Memcpy3d, dst_memory_type) == 120 && offset_of!(Memcpy3d, dst_device) == 136);
    assert!(offset_of!(Memcpy3d, width_in_bytes) == 176 && offset_of!(Memcpy3d, depth) == 192);
    assert!(size_of::<InstantiateParams>() == 32 && offset_of!(InstantiateParams, result_out) == 24);
};
