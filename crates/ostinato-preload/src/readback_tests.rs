//! The read-back over a driver that is a table: the fixture's `scale` kernel loaded from its fat
//! binary, a memset, and edges of both kinds.

use std::cell::RefCell;
use std::collections::HashMap;

use ostinato::contract::Observed;

use super::*;
use crate::decide::{decide, Reason};
use crate::model::{Hex, MemsetNode};
use crate::store::{Origin, Store};

const PLAIN: &[u8] = include_bytes!("../tests/fixtures/scale_plain.fatbin");
const OUT: u64 = 0x7f00_0000_0000;
const IN: u64 = 0x7f00_0010_0000;

/// A function: its name, module, and (offset, size) per param.
type Func = (String, u64, Vec<(usize, usize)>);

#[derive(Default)]
struct Fake {
    nodes: Vec<u64>,
    types: HashMap<u64, u32>,
    kernels: HashMap<u64, RawKernel>,
    edges: Vec<RawEdge>,
    funcs: HashMap<u64, Func>,
    /// Per `CUkernel`: its library and function.
    kerns: HashMap<u64, (u64, u64)>,
    /// Param bytes per (param array, index).
    bytes: HashMap<(u64, usize), Vec<u8>>,
    allocations: Vec<(u64, u64)>,
    fail_nodes: bool,
    asked_params: RefCell<Vec<usize>>,
}

fn err(op: &'static str, code: i32) -> ReadError {
    ReadError::driver(op, code)
}

impl Driver for Fake {
    fn device_arch(&self) -> Result<u32, ReadError> {
        Ok(90)
    }
    fn nodes(&self, _graph: u64) -> Result<Vec<u64>, ReadError> {
        if self.fail_nodes {
            return Err(err("cuGraphGetNodes", 400));
        }
        Ok(self.nodes.clone())
    }
    fn edges(&self, _graph: u64) -> Result<Vec<RawEdge>, ReadError> {
        Ok(self.edges.clone())
    }
    fn node_type(&self, node: u64) -> Result<u32, ReadError> {
        self.types.get(&node).copied().ok_or(err("cuGraphNodeGetType", 400))
    }
    fn kernel(&self, node: u64) -> Result<RawKernel, ReadError> {
        self.kernels.get(&node).copied().ok_or(err("cuGraphKernelNodeGetParams_v2", 400))
    }
    fn memset(&self, _node: u64) -> Result<MemsetNode, ReadError> {
        Ok(MemsetNode { dst: Hex(OUT), pitch: 0, value: 0, element_size: 4, width: 256, height: 1 })
    }
    fn memcpy(&self, _node: u64) -> Result<MemcpyNode, ReadError> {
        Ok(MemcpyNode { src_type: 1, dst_type: 2, src: Hex(0), dst: Hex(OUT), width: 16, height: 1, depth: 1 })
    }
    fn kernel_function(&self, kern: u64) -> Result<u64, ReadError> {
        self.kerns.get(&kern).map(|k| k.1).ok_or(err("cuKernelGetFunction", 400))
    }
    fn func_name(&self, func: u64) -> Result<String, ReadError> {
        self.funcs.get(&func).map(|f| f.0.clone()).ok_or(err("cuFuncGetName", 400))
    }
    fn func_module(&self, func: u64) -> Result<u64, ReadError> {
        self.funcs.get(&func).map(|f| f.1).ok_or(err("cuFuncGetModule", 400))
    }
    fn kernel_library(&self, kern: u64) -> Result<u64, ReadError> {
        self.kerns.get(&kern).map(|k| k.0).ok_or(err("cuKernelGetLibrary", 400))
    }
    fn param_info(&self, func: u64, index: usize) -> Result<(usize, usize), ReadError> {
        self.asked_params.borrow_mut().push(index);
        self.funcs.get(&func).and_then(|f| f.2.get(index).copied()).ok_or(err("cuFuncGetParamInfo", 1))
    }
    fn param_bytes(&self, k: &RawKernel, index: usize, _offset: usize, size: usize) -> Result<Vec<u8>, ReadError> {
        let b = self.bytes.get(&(k.kernel_params, index)).cloned().ok_or(err("param", 1))?;
        Ok(b[..size].to_vec())
    }
    fn address_range(&self, a: u64) -> Option<(u64, u64)> {
        self.allocations.iter().copied().find(|&(base, size)| (base..base + size).contains(&a))
    }
}

/// `scale(out, in, 2.0, 256)` as node 0x10 (function 0xf1 of library 0x11b, kernel 0xe1), a memset
/// as node 0x20, and a programmatic edge from the memset to the kernel.
fn scale_graph() -> Fake {
    let mut f = Fake { nodes: vec![0x20, 0x10], ..Fake::default() };
    f.types.extend([(0x10, 0), (0x20, 2)]);
    let raw = RawKernel { func: 0xf1, kern: 0xe1, grid: [2, 1, 1], block: [128, 1, 1], shared_bytes: 0, kernel_params: 0xa0, extra: 0 };
    f.kernels.insert(0x10, raw);
    f.funcs.insert(0xf1, ("scale".into(), 0x33, vec![(0, 8), (8, 8), (16, 4), (20, 4)]));
    f.kerns.insert(0xe1, (0x11b, 0xf1));
    f.bytes.insert((0xa0, 0), OUT.to_le_bytes().to_vec());
    f.bytes.insert((0xa0, 1), (IN + 64).to_le_bytes().to_vec());
    f.bytes.insert((0xa0, 2), 2.0f32.to_le_bytes().to_vec());
    f.bytes.insert((0xa0, 3), 256u32.to_le_bytes().to_vec());
    f.allocations = vec![(OUT, 1024), (IN, 1024)];
    f.edges = vec![RawEdge { from: 0x20, to: 0x10, from_port: 1, to_port: 0, kind: 1 }];
    f
}

/// Reads `fake` back with the fixture's image bound to library 0x11b (when `known`).
fn read(fake: &Fake, known: bool) -> GraphModel {
    read_with(fake, known, &|_| None)
}

/// [`read`] with the caller's extents before the driver's segments.
fn read_with(fake: &Fake, known: bool, extent: &dyn Fn(u64) -> Option<(u64, u64)>) -> GraphModel {
    let mut store = Store::new(1 << 20);
    if known {
        let held = store.keep(PLAIN, Origin::LibraryLoadData);
        store.bind(Handle::Library(0x11b), held);
    }
    let image = |h: Handle| store.lookup(h).cloned();
    let analyse = |img: &Arc<Image>, entry: &str, arch: u32, p: &[bool]| code::analyse(img, entry, arch, p);
    read_graph(fake, &Code { image: &image, analyse: &analyse, extent }, 0x9, 1)
}

fn kernel(m: &GraphModel, i: usize) -> &KernelNode {
    match &m.nodes[i].body {
        NodeBody::Kernel(k) => k,
        other => panic!("node {i} is {other:?}"),
    }
}

#[test]
fn a_known_kernel_reads_back_with_its_pointers_access_and_edges() {
    let fake = scale_graph();
    let m = read(&fake, true);
    assert_eq!((m.flags, m.arch, m.error.as_deref()), (1, Some(90), None));
    assert!(matches!(m.nodes[0].body, NodeBody::Memset(_)));
    let k = kernel(&m, 1);
    assert_eq!((k.name.as_deref(), k.grid, k.block), (Some("scale"), [2, 1, 1], [128, 1, 1]));
    let access: Vec<Option<Observed>> = k.params.iter().map(|p| p.access).collect();
    assert_eq!(access, vec![Some(Observed::Write), Some(Observed::Read), None, None]);
    assert_eq!(k.params[1].pointers[0].base, Hex(IN));
    assert_eq!(k.params[1].pointers[0].size, 1024);
    assert!(k.params[2].pointers.is_empty());
    assert_eq!(m.edges, vec![Edge::new(0, 1, 1, 0, 1)]);
    assert!(m.edges[0].programmatic);
    assert_eq!(*fake.asked_params.borrow(), vec![0, 1, 2, 3], "never asked past the code's param count");
    assert!(decide(&m).adoptable(), "{:?}", decide(&m));
}

#[test]
fn a_caller_extent_holding_a_pointer_is_its_extent_and_the_segment_elsewhere() {
    let fake = scale_graph();
    // The input pointer (IN + 64) lies in an allocation of 128 bytes from IN; the output's is unknown.
    let m = read_with(&fake, true, &|a| (IN..IN + 128).contains(&a).then_some((IN, 128)));
    let k = kernel(&m, 1);
    assert_eq!((k.params[1].pointers[0].base, k.params[1].pointers[0].size), (Hex(IN), 128));
    assert_eq!((k.params[0].pointers[0].base, k.params[0].pointers[0].size), (Hex(OUT), 1024), "the driver's segment");
}

#[test]
fn an_unknown_image_probes_the_param_count_and_falls_through() {
    let fake = scale_graph();
    let m = read(&fake, false);
    assert_eq!(*fake.asked_params.borrow(), vec![0, 1, 2, 3, 4], "the count: the first index refused");
    let k = kernel(&m, 1);
    assert_eq!(k.params.len(), 4);
    assert!(k.params[0].access.is_none());
    let d = decide(&m);
    assert!(matches!(&d.reasons[..], [Reason::KernelCode { node: 1, kernel, why }] if kernel == "scale" && why.contains("not seen loaded")), "{d:?}");
}

#[test]
fn a_kernel_named_by_its_cukernel_alone_is_found() {
    let mut fake = scale_graph();
    fake.kernels.get_mut(&0x10).unwrap().func = 0;
    let m = read(&fake, true);
    assert_eq!(kernel(&m, 1).name.as_deref(), Some("scale"));
    assert!(decide(&m).adoptable());
}

#[test]
fn a_failed_node_list_or_a_stray_edge_is_a_read_error() {
    let mut fake = scale_graph();
    fake.fail_nodes = true;
    let m = read(&fake, true);
    assert!(m.error.as_deref().unwrap().contains("CUDA_ERROR_INVALID_HANDLE"), "{m:?}");
    let mut fake = scale_graph();
    fake.edges.push(RawEdge { from: 0x99, to: 0x10, from_port: 0, to_port: 0, kind: 0 });
    let m = read(&fake, true);
    assert!(m.error.as_deref().unwrap().contains("0x99"), "{m:?}");
    assert!(matches!(decide(&m).reasons[0], Reason::ReadFailed { .. }));
}

#[test]
fn other_node_types_and_unreadable_nodes_are_kept_in_the_model() {
    let mut fake = scale_graph();
    fake.nodes.extend([0x30, 0x40, 0x50]);
    fake.types.extend([(0x30, 3), (0x40, 1)]);
    let m = read(&fake, true);
    assert_eq!(m.nodes[2].body, NodeBody::Other { code: 3, name: "host" });
    assert!(matches!(m.nodes[3].body, NodeBody::Memcpy(_)));
    assert!(matches!(&m.nodes[4].body, NodeBody::Unreadable { error } if error.contains("cuGraphNodeGetType")));
    let d = decide(&m);
    assert_eq!(d.reasons.len(), 3, "{d:?}");
}

#[test]
fn a_param_array_that_cannot_be_read_is_a_params_error() {
    let mut fake = scale_graph();
    fake.bytes.remove(&(0xa0, 2));
    let m = read(&fake, true);
    let k = kernel(&m, 1);
    assert_eq!(k.params.len(), 2);
    assert!(k.params_error.is_some());
    assert!(matches!(&k.code, CodeStatus::NotAnalysed { why } if why.contains("params could not be read")));
}
