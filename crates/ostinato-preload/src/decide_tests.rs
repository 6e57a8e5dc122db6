//! Every fall-through reason, each from a graph that is adoptable but for it.

use super::*;
use crate::model::{Hex, MemcpyNode, MemsetNode, Param};

fn kernel(name: &str, access: &[Option<Observed>]) -> NodeBody {
    let params = access.iter().enumerate().map(|(i, a)| Param { index: i, offset: 8 * i, size: 8, access: *a, pointers: Vec::new() }).collect();
    NodeBody::Kernel(KernelNode {
        name: Some(name.into()),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_bytes: 0,
        code: CodeStatus::Analysed {
            source: "image 0, PTX sm_90".into(),
            access: access.to_vec(),
            module_writes: Vec::new(),
            pdl: crate::code::PdlCode::NotCertified { why: "no wait".into() },
        },
        params,
        params_error: None,
    })
}

fn memset() -> NodeBody {
    NodeBody::Memset(MemsetNode { dst: Hex(0x7f00_0000_0000), pitch: 0, value: 0, element_size: 4, width: 64, height: 1 })
}

fn memcpy(src_type: u32, dst_type: u32) -> NodeBody {
    NodeBody::Memcpy(MemcpyNode { src_type, dst_type, src: Hex(1 << 40), dst: Hex(2 << 40), width: 64, height: 1, depth: 1 })
}

/// kernel `a` -> memset -> kernel `b` (programmatic), plus a device copy.
fn good() -> GraphModel {
    let bodies = [kernel("a", &[Some(Observed::Write), None]), memset(), kernel("b", &[Some(Observed::Read)]), memcpy(2, 4)];
    GraphModel {
        flags: 1 | 8,
        arch: Some(90),
        nodes: bodies.into_iter().enumerate().map(|(index, body)| Node { index, body }).collect(),
        edges: vec![Edge::new(0, 1, 0, 0, 0), Edge::new(1, 2, 1, 0, 1), Edge::new(2, 3, 0, 0, 0)],
        handles: Vec::new(),
        error: None,
    }
}

fn only_reason(g: &GraphModel) -> Reason {
    let d = decide(g);
    assert_eq!(d.verdict, "fall_through");
    assert_eq!(d.reasons.len(), 1, "{d:?}");
    assert_eq!(d.reason.as_deref(), Some(d.reasons[0].to_string().as_str()));
    d.reasons[0].clone()
}

#[test]
fn kernels_memsets_device_copies_and_pdl_edges_are_adoptable() {
    let d = decide(&good());
    assert!(d.adoptable() && d.verdict == "adoptable" && d.reason.is_none(), "{d:?}");
}

#[test]
fn device_launch_falls_through() {
    let mut g = good();
    g.flags |= FLAG_DEVICE_LAUNCH;
    assert_eq!(only_reason(&g), Reason::DeviceLaunch { flags: 13 });
}

#[test]
fn a_graph_not_read_or_empty_falls_through() {
    let mut g = good();
    g.error = Some("cuGraphGetNodes failed".into());
    assert!(matches!(only_reason(&g), Reason::ReadFailed { .. }));
    let g = GraphModel::default();
    assert_eq!(only_reason(&g), Reason::Empty);
}

#[test]
fn every_other_node_type_falls_through_naming_node_and_type() {
    for (code, name) in [(3, "host"), (4, "graph"), (6, "wait_event"), (7, "event_record"), (10, "mem_alloc"), (11, "mem_free"), (13, "conditional")] {
        let mut g = good();
        g.nodes[1].body = NodeBody::Other { code, name };
        let r = only_reason(&g);
        assert_eq!(r, Reason::NodeType { node: 1, node_type: name });
        assert!(r.to_string().contains(&format!("node 1 is a {name} node")));
    }
}

#[test]
fn an_empty_node_only_orders_and_is_adopted() {
    let mut g = good();
    g.nodes[1].body = NodeBody::Other { code: 5, name: "empty" };
    assert!(decide(&g).adoptable(), "{:?}", decide(&g));
}

#[test]
fn an_unreadable_node_falls_through() {
    let mut g = good();
    g.nodes[3].body = NodeBody::Unreadable { error: "cuGraphNodeGetType failed".into() };
    assert!(matches!(only_reason(&g), Reason::Unreadable { node: 3, .. }));
}

#[test]
fn a_kernel_whose_code_is_not_analysed_falls_through_with_its_name() {
    let mut g = good();
    let NodeBody::Kernel(k) = &mut g.nodes[2].body else { unreachable!() };
    k.code = CodeStatus::NotAnalysed { why: "machine code only (sm_90)".into() };
    let r = only_reason(&g);
    assert!(matches!(&r, Reason::KernelCode { node: 2, kernel, .. } if kernel == "b"));
    assert!(r.to_string().contains("kernel `b`") && r.to_string().contains("machine code only"));
}

#[test]
fn an_unknown_access_falls_through_naming_the_param() {
    let mut g = good();
    g.nodes[0].body = kernel("a", &[Some(Observed::Write), Some(Observed::Unknown)]);
    assert_eq!(only_reason(&g), Reason::UnknownAccess { node: 0, kernel: "a".into(), param: 1 });
}

#[test]
fn a_write_to_module_state_falls_through() {
    let mut g = good();
    let NodeBody::Kernel(k) = &mut g.nodes[0].body else { unreachable!() };
    let CodeStatus::Analysed { module_writes, .. } = &mut k.code else { unreachable!() };
    module_writes.push("`st.global.u32 [counter], 1` (line 9)".into());
    assert!(matches!(only_reason(&g), Reason::ModuleWrites { node: 0, .. }));
}

#[test]
fn unreadable_params_fall_through() {
    let mut g = good();
    let NodeBody::Kernel(k) = &mut g.nodes[0].body else { unreachable!() };
    k.params_error = Some("cuFuncGetParamInfo failed".into());
    assert!(matches!(only_reason(&g), Reason::KernelParams { node: 0, .. }));
}

#[test]
fn a_copy_touching_host_memory_falls_through() {
    let mut g = good();
    g.nodes[3].body = memcpy(1, 2);
    assert_eq!(only_reason(&g), Reason::MemcpyNotDevice { node: 3, src_type: 1, dst_type: 2 });
}

#[test]
fn edges_other_than_full_or_programmatic_fall_through() {
    for (from_port, to_port, kind) in [(2, 0, 1), (0, 1, 0), (1, 0, 0), (0, 0, 7)] {
        let mut g = good();
        g.edges[0] = Edge::new(0, 1, from_port, to_port, kind);
        assert_eq!(only_reason(&g), Reason::Edge { from: 0, to: 1, from_port, to_port, edge_type: kind });
    }
}

#[test]
fn reasons_are_all_kept_up_to_a_bound() {
    let mut g = good();
    g.nodes = (0..100).map(|index| Node { index, body: NodeBody::Other { code: 3, name: "host" } }).collect();
    g.edges.clear();
    let d = decide(&g);
    assert_eq!(d.reasons.len(), MAX_REASONS);
    assert_eq!(d.reasons[0], Reason::NodeType { node: 0, node_type: "host" });
}
