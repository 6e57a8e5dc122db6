//! The adoption's orderings against a brute-force oracle, and its fences, case by case.

use proptest::prelude::*;

use super::*;
use crate::model::{Edge, Hex, MemcpyNode, Node, Param, PointerWord};

const SEG: u64 = 1 << 21;

/// Segment `i` (2 MiB each).
fn seg(i: u64) -> u64 {
    0x7f00_0000_0000 + i * SEG
}

fn certified() -> PdlCode {
    PdlCode::Certified { reads: Vec::new(), atomics: Vec::new(), early_trigger: false }
}

/// A kernel of `grid` blocks whose param `i` points into segment `segs[i].0` with access `segs[i].1`.
fn kernel_in(segs: &[(u64, Observed)], pdl: PdlCode, grid: u32) -> NodeBody {
    let params = segs
        .iter()
        .enumerate()
        .map(|(i, &(s, a))| Param {
            index: i,
            offset: 8 * i,
            size: 8,
            access: Some(a),
            pointers: vec![PointerWord { at: 0, value: Hex(seg(s) + 256), base: Hex(seg(s)), size: SEG }],
        })
        .collect();
    let access = segs.iter().map(|&(_, a)| Some(a)).collect();
    NodeBody::Kernel(KernelNode {
        name: Some("k".into()),
        grid: [grid, 1, 1],
        block: [128, 1, 1],
        shared_bytes: 0,
        code: CodeStatus::Analysed { source: "image 0, PTX sm_90".into(), access, module_writes: Vec::new(), pdl },
        params,
        params_error: None,
    })
}

fn kernel(segs: &[(u64, Observed)]) -> NodeBody {
    kernel_in(segs, certified(), 4)
}

fn graph(bodies: Vec<NodeBody>, edges: &[(usize, usize)]) -> GraphModel {
    GraphModel {
        flags: 0,
        arch: Some(90),
        nodes: bodies.into_iter().enumerate().map(|(index, body)| Node { index, body }).collect(),
        edges: edges.iter().map(|&(a, b)| Edge::new(a, b, 0, 0, 0)).collect(),
        handles: Vec::new(),
        error: None,
    }
}

fn pairs(a: &Adoption) -> Vec<(usize, usize)> {
    let mut p: Vec<(usize, usize)> = a.edges.iter().map(|e| (e.from, e.to)).collect();
    p.sort_unstable();
    p
}

use Observed::{Read as R, ReadWrite as RW, Write as W};

#[test]
fn a_chain_through_one_buffer_keeps_every_edge_and_makes_them_programmatic() {
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(0, R), (1, W)]), kernel(&[(1, R), (2, W)])], &[(0, 1), (1, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert_eq!(pairs(&a), [(0, 1), (1, 2)]);
    assert!(a.edges.iter().all(|e| e.programmatic && e.captured), "{a:?}");
    assert_eq!(a.new_programmatic(&g), 2);
    assert!(a.dropped.is_empty());
}

#[test]
fn independent_kernels_serialised_by_one_stream_lose_their_edges() {
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(1, W)]), kernel(&[(2, RW)])], &[(0, 1), (1, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert!(a.edges.is_empty(), "{a:?}");
    assert_eq!(a.dropped.len(), 2);
    assert!(a.dropped.iter().all(|d| d.why.contains("no conflicting access")));
}

#[test]
fn an_ordering_through_an_unrelated_node_becomes_a_direct_edge() {
    // 0 writes A, 1 touches B only, 2 reads A: 0 -> 2 is needed, through 1 in the capture.
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(1, RW)]), kernel(&[(0, R)])], &[(0, 1), (1, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert_eq!(pairs(&a), [(0, 2)]);
    assert!(!a.edges[0].captured);
}

#[test]
fn an_implied_captured_edge_is_dropped_as_implied() {
    let g = graph(vec![kernel(&[(0, RW)]), kernel(&[(0, RW)]), kernel(&[(0, RW)])], &[(0, 1), (1, 2), (0, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert_eq!(pairs(&a), [(0, 1), (1, 2)]);
    assert_eq!(a.dropped, [DroppedEdge { from: 0, to: 2, why: "implied by the edges kept" }]);
}

#[test]
fn nodes_the_application_left_unordered_stay_unordered_even_in_one_segment() {
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(0, W)])], &[]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap().edges.is_empty());
}

#[test]
fn a_memcpy_or_an_unplaced_pointer_keeps_every_ordering() {
    let copy = NodeBody::Memcpy(MemcpyNode { src_type: 2, dst_type: 2, src: Hex(seg(5)), dst: Hex(seg(6)), width: 64, height: 1, depth: 1 });
    let g = graph(vec![kernel(&[(0, W)]), copy, kernel(&[(1, W)])], &[(0, 1), (1, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert_eq!(pairs(&a), [(0, 1), (1, 2)]);
    assert!(a.edges.iter().all(|e| !e.programmatic && e.full.as_deref() == Some("an end is not a kernel")));
    // A param the code reads whose pointer the driver could not place touches anything.
    let mut unplaced = kernel(&[(0, R)]);
    if let NodeBody::Kernel(k) = &mut unplaced {
        k.params[0].pointers.clear();
    }
    let g = graph(vec![kernel(&[(3, W)]), unplaced], &[(0, 1)]);
    assert_eq!(pairs(&adopt(&g, &default_policy(), Orderings::Needed).unwrap()), [(0, 1)]);
}

#[test]
fn a_pointer_hidden_in_an_aggregate_param_keeps_its_ordering() {
    // Node 1's param 0 is a 16-byte struct whose second word points into the segment node 0 writes:
    // the read-back found it (every aligned word is asked), so the edge stays. Without that word the
    // kernel would touch anything, and the edge would stay too.
    let mut reader = kernel(&[(1, R)]);
    if let NodeBody::Kernel(k) = &mut reader {
        k.params[0].size = 16;
        k.params[0].pointers.push(PointerWord { at: 8, value: Hex(seg(0) + 64), base: Hex(seg(0)), size: SEG });
    }
    let g = graph(vec![kernel(&[(0, W)]), reader.clone()], &[(0, 1)]);
    assert_eq!(pairs(&adopt(&g, &default_policy(), Orderings::Needed).unwrap()), [(0, 1)]);
    // The mutation: the hidden word dropped from the model, the edge would go (so the test can fail).
    if let NodeBody::Kernel(k) = &mut reader {
        k.params[0].pointers.truncate(1);
    }
    let g = graph(vec![kernel(&[(0, W)]), reader], &[(0, 1)]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap().edges.is_empty());
}

#[test]
fn fences_follow_the_consumers_certificate_and_the_policy() {
    let not = PdlCode::NotCertified { why: "no `griddepcontrol.wait` found".into() };
    let g = graph(vec![kernel(&[(0, W)]), kernel_in(&[(0, R), (1, W)], not, 4)], &[(0, 1)]);
    let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
    assert!(!a.edges[0].programmatic);
    assert!(a.edges[0].full.as_deref().unwrap().contains("not certified to wait"), "{a:?}");
    // A captured programmatic edge stays programmatic (the application certified it).
    let mut g2 = g.clone();
    g2.edges = vec![Edge::new(0, 1, 1, 0, 1)];
    assert!(adopt(&g2, &default_policy(), Orderings::Needed).unwrap().edges[0].programmatic);
    // Reading before the wait a segment some node writes.
    let early = PdlCode::Certified { reads: vec![0], atomics: Vec::new(), early_trigger: false };
    let g = graph(vec![kernel(&[(0, W)]), kernel_in(&[(0, R), (1, W)], early, 4)], &[(0, 1)]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap().edges[0].full.as_deref().unwrap().contains("before its wait"));
    // ... and one nobody writes (a weight): programmatic.
    let early = PdlCode::Certified { reads: vec![0], atomics: Vec::new(), early_trigger: false };
    let g = graph(vec![kernel(&[(1, W)]), kernel_in(&[(4, R), (1, RW)], early, 4)], &[(0, 1)]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap().edges[0].programmatic);
    // `auto` keeps grids of more than 512 blocks on full edges.
    let g = graph(vec![kernel_in(&[(0, W)], certified(), 8192), kernel_in(&[(0, R)], certified(), 8192)], &[(0, 1)]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap().edges[0].full.as_deref().unwrap().contains("blocks"));
}

#[test]
fn by_default_every_captured_edge_stays_and_only_fences_change() {
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(1, W)]), kernel(&[(1, R), (2, W)])], &[(0, 1), (1, 2), (0, 2)]);
    let a = adopt(&g, &default_policy(), Orderings::Captured).unwrap();
    assert_eq!(pairs(&a), [(0, 1), (0, 2), (1, 2)]);
    assert!(a.dropped.is_empty() && a.edges.iter().all(|e| e.captured && e.programmatic), "{a:?}");
    assert!(!a.same_as_captured(&g));
    let not = PdlCode::NotCertified { why: "no `griddepcontrol.wait` found".into() };
    let g = graph(vec![kernel(&[(0, W)]), kernel_in(&[(1, W)], not, 4)], &[(0, 1)]);
    assert!(adopt(&g, &default_policy(), Orderings::Captured).unwrap().same_as_captured(&g));
}

#[test]
fn a_cycle_or_a_huge_graph_is_refused() {
    let g = graph(vec![kernel(&[(0, W)]), kernel(&[(0, W)])], &[(0, 1), (1, 0)]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).unwrap_err().contains("cycle"));
    let g = graph((0..=MAX_ADOPTED_NODES).map(|_| kernel(&[(0, R)])).collect(), &[]);
    assert!(adopt(&g, &default_policy(), Orderings::Needed).is_err());
}

/// Reachability over `edges` (brute force).
fn reach(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<bool>> {
    let mut r = vec![vec![false; n]; n];
    for &(a, b) in edges {
        r[a][b] = true;
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if r[i][k] && r[k][j] {
                    r[i][j] = true;
                }
            }
        }
    }
    r
}

fn random_graph() -> impl Strategy<Value = GraphModel> {
    (2usize..14).prop_flat_map(|n| {
        let node = prop::collection::vec((0u64..4, prop::sample::select(vec![R, W, RW])), 1..3);
        (prop::collection::vec(node, n), prop::collection::vec((0..n, 0..n), 0..3 * n)).prop_map(|(nodes, edges)| {
            // Edges go forward in index order (the captured graph is a DAG).
            let edges: Vec<(usize, usize)> = edges.into_iter().filter(|(a, b)| a < b).collect();
            graph(nodes.iter().map(|segs| kernel(segs)).collect(), &edges)
        })
    })
}

proptest! {
    /// Every conflicting pair the capture orders is ordered by the adopted edges; every adopted edge
    /// orders a pair the capture ordered; no adopted edge is implied by the others.
    #[test]
    fn adopted_orderings_are_exactly_the_needed_ones_reduced(g in random_graph()) {
        let n = g.nodes.len();
        let a = adopt(&g, &default_policy(), Orderings::Needed).unwrap();
        let captured: Vec<(usize, usize)> = g.edges.iter().map(|e| (e.from, e.to)).collect();
        let (cr, ar) = (reach(n, &captured), reach(n, &pairs(&a)));
        let prints: Vec<Footprint> = g.nodes.iter().map(|node| footprint(&node.body)).collect();
        for u in 0..n {
            for v in 0..n {
                if cr[u][v] && prints[u].conflicts(&prints[v]) {
                    prop_assert!(ar[u][v], "needed {u} -> {v} not ordered: {a:?}");
                }
                if ar[u][v] {
                    prop_assert!(cr[u][v], "{u} -> {v} ordered but the capture did not: {a:?}");
                }
            }
        }
        let edges = pairs(&a);
        for (i, e) in edges.iter().enumerate() {
            let others: Vec<(usize, usize)> = edges.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, e)| *e).collect();
            prop_assert!(!reach(n, &others)[e.0][e.1], "{e:?} is implied by the others");
        }
    }
}

#[test]
fn an_empty_node_keeps_the_orderings_through_it_and_its_edges_full() {
    // k0 writes segment 0, an empty node joins, k2 reads it: whatever the orderings, k2 stays after k0,
    // and no edge touching the empty node is programmatic (it neither waits nor triggers).
    let empty = NodeBody::Other { code: 5, name: "empty" };
    let g = graph(vec![kernel(&[(0, W)]), empty, kernel(&[(0, R), (1, W)])], &[(0, 1), (1, 2)]);
    for orderings in [Orderings::Captured, Orderings::Needed] {
        let a = adopt(&g, &default_policy(), orderings).unwrap();
        let p = pairs(&a);
        assert!(p == [(0, 1), (1, 2)] || p.contains(&(0, 2)), "{orderings:?}: {p:?}");
        assert!(a.edges.iter().filter(|e| e.from == 1 || e.to == 1).all(|e| !e.programmatic), "{a:?}");
    }
}
