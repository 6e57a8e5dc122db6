//! A CUDA graph as read back at instantiate: its nodes (what each is, a kernel's launch, params,
//! pointers and code), its edges (with their port and type: a programmatic edge is PDL). The decision
//! ([`crate::decide`]) and the log line ([`crate::log`]) are functions of this model alone.

use serde::{Serialize, Serializer};

use ostinato::contract::Observed;

use crate::code::CodeStatus;

/// A 64-bit handle or address, written `0x…` in the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.0))
    }
}

/// `CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH`.
pub const FLAG_DEVICE_LAUNCH: u64 = 4;
/// `CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`.
pub const EDGE_PROGRAMMATIC: u8 = 1;

/// The graph.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GraphModel {
    /// The instantiate flags.
    pub flags: u64,
    /// The device's architecture (`90` for compute capability 9.0), where it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<u32>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// The driver's node handles, by node index (what an adoption clones and rewires).
    #[serde(skip)]
    pub handles: Vec<u64>,
    /// Why the graph's nodes or edges could not be read (then the model is partial).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// Node indices.
    pub from: usize,
    pub to: usize,
    pub from_port: u8,
    pub to_port: u8,
    /// `CUgraphDependencyType`.
    #[serde(rename = "type")]
    pub kind: u8,
    /// A programmatic (PDL) edge: type programmatic.
    pub programmatic: bool,
}

impl Edge {
    pub fn new(from: usize, to: usize, from_port: u8, to_port: u8, kind: u8) -> Edge {
        Edge { from, to, from_port, to_port, kind, programmatic: kind == EDGE_PROGRAMMATIC }
    }
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    pub index: usize,
    #[serde(flatten)]
    pub body: NodeBody,
}

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeBody {
    Kernel(KernelNode),
    Memset(MemsetNode),
    Memcpy(MemcpyNode),
    /// Any other type (`CUgraphNodeType`), by its code and name.
    Other {
        code: u32,
        name: &'static str,
    },
    /// A node whose type or params could not be read.
    Unreadable {
        error: String,
    },
}

/// The name of a `CUgraphNodeType`.
pub fn node_type_name(code: u32) -> &'static str {
    match code {
        0 => "kernel",
        1 => "memcpy",
        2 => "memset",
        3 => "host",
        4 => "graph",
        5 => "empty",
        6 => "wait_event",
        7 => "event_record",
        8 => "ext_semas_signal",
        9 => "ext_semas_wait",
        10 => "mem_alloc",
        11 => "mem_free",
        12 => "batch_mem_op",
        13 => "conditional",
        _ => "unknown",
    }
}

/// A kernel node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelNode {
    /// The function's name (mangled), where the driver gave it.
    pub name: Option<String>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub code: CodeStatus,
    pub params: Vec<Param>,
    /// Why the params could not be read (then `params` is what was read before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params_error: Option<String>,
}

/// One param of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Param {
    pub index: usize,
    /// Byte offset in the param bank, and size.
    pub offset: usize,
    pub size: usize,
    /// The access the code shows, for a param that holds device pointers (none otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Observed>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pointers: Vec<PointerWord>,
}

/// An 8-byte-aligned word of a param that is a device address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PointerWord {
    /// Byte offset in the param.
    pub at: usize,
    pub value: Hex,
    /// The allocation segment holding it (`cuMemGetAddressRange`): base and size.
    pub base: Hex,
    pub size: u64,
}

/// A memset node (`CUDA_MEMSET_NODE_PARAMS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemsetNode {
    pub dst: Hex,
    pub pitch: u64,
    pub value: u32,
    pub element_size: u32,
    pub width: u64,
    pub height: u64,
}

/// `CU_MEMORYTYPE_DEVICE` and `CU_MEMORYTYPE_UNIFIED`.
pub const MEMORY_DEVICE: u32 = 2;
pub const MEMORY_UNIFIED: u32 = 4;

/// A memcpy node (`CUDA_MEMCPY3D`): the memory types (`CUmemorytype`) and the device addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemcpyNode {
    pub src_type: u32,
    pub dst_type: u32,
    pub src: Hex,
    pub dst: Hex,
    pub width: u64,
    pub height: u64,
    pub depth: u64,
}

impl MemcpyNode {
    /// Whether both ends are device (or unified) memory.
    pub fn device_to_device(&self) -> bool {
        let device = |t: u32| t == MEMORY_DEVICE || t == MEMORY_UNIFIED;
        device(self.src_type) && device(self.dst_type)
    }
}
