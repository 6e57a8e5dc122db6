//! Every full edge of a lowering says why it is full (`FullEdge`), and exactly the programmatic ones
//! have no reason: the policy's each refusal — the consumer cannot wait, PDL off, `auto`'s grid,
//! side-by-side and fan limits — on plans built to hit it. Pure: no GPU.

use ostinato::{Access, Arg, Graph, KernelSig, Launch, Plan, Scalar, ScalarType, Slice};
use ostinato_cuda::lower::{lower, PdlPolicy};
use ostinato_cuda::{FullEdge, PdlMode};

fn sig(name: &str) -> KernelSig {
    KernelSig::new(name).buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

/// `len` dependent nodes of `blocks` blocks on one buffer.
fn chain(len: usize, blocks: u32) -> Plan {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let k = g.add_kernel(sig("add_one")).unwrap();
    for _ in 0..len {
        g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

fn reasons(plan: &Plan, capable: bool, policy: PdlPolicy) -> Vec<Option<FullEdge>> {
    let low = lower(plan, &[capable], true, policy);
    for e in &low.edges {
        assert_eq!(e.programmatic, e.full.is_none(), "{e:?}");
    }
    low.edges.iter().map(|e| e.full).collect()
}

#[test]
fn each_refusal_of_the_policy_is_named_on_its_edge() {
    let auto = PdlPolicy::default();
    assert_eq!(reasons(&chain(3, 1), true, auto), [None, None]);
    assert_eq!(reasons(&chain(3, 1), false, auto), [Some(FullEdge::NotCapable); 2]);
    assert_eq!(reasons(&chain(3, 1), true, PdlPolicy::new(PdlMode::Off)), [Some(FullEdge::PdlOff); 2]);
    assert_eq!(reasons(&chain(2, 1024), true, PdlPolicy::new(PdlMode::On)), [None]);
    let big = auto.auto_max_blocks as u32 + 1;
    assert_eq!(reasons(&chain(2, big), true, auto), [Some(FullEdge::Blocks { blocks: big as u64, limit: auto.auto_max_blocks })]);
    let text = FullEdge::Blocks { blocks: 1024, limit: 512 }.to_string();
    assert_eq!(text, "the smaller grid has 1024 blocks, more than auto's 512");
}

#[test]
fn wide_fans_and_wide_side_by_side_lanes_are_named() {
    let auto = PdlPolicy { shape: ostinato_cuda::lower::ShapeMode::Plan, ..PdlPolicy::default() };
    // A one-block producer feeding 8 one-block consumers on slices of its output: a fan of 8.
    let mut g = Graph::new();
    let a = g.add_buffer("a", 8 * 4096).unwrap();
    let k = g.add_kernel(sig("add_one")).unwrap();
    g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    for i in 0..8u64 {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Buffer(Slice { buffer: a, offset: i * 4096, len: 4096 }), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    }
    let r = reasons(&Plan::compile(&g).unwrap(), true, auto);
    assert_eq!(r, [Some(FullEdge::Fanout { fan: 8, limit: auto.auto_max_fanout }); 8]);
    // Four independent chains of two 300-block nodes: 4 lanes of 300 blocks side by side.
    let mut g = Graph::new();
    let k = g.add_kernel(sig("add_one")).unwrap();
    let bufs: Vec<_> = (0..4).map(|i| g.add_buffer(format!("b{i}"), 4096).unwrap()).collect();
    for _ in 0..2 {
        for &b in &bufs {
            g.add_launch(k, Launch::linear(300, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
        }
    }
    let r = reasons(&Plan::compile(&g).unwrap(), true, auto);
    assert_eq!(r, [Some(FullEdge::SideBySide { blocks: 300, lanes: 4, limit: auto.auto_max_side_by_side_blocks }); 4]);
}
