//! Every fail-closed case of the data model (`docs/design.md`, "Data model") returns its specific error, names the node and param,
//! and leaves the graph exactly as it was.

use std::path::Path;

use ostinato::file::{self, FileError};
use ostinato::{check_slot, Access, Arg, Graph, GraphError, KernelSig, Launch, NodeId, Plan, PlanError, Scalar, ScalarType, Slice, SlotError};

fn base() -> (Graph, ostinato::BufferId, ostinato::KernelId) {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 64).unwrap();
    // `out` and `inp` may alias: these tests bind both to `a`.
    let sig = KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n", ScalarType::U32).may_alias("out", "inp").unwrap();
    let k = g.add_kernel(sig).unwrap();
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(a), Arg::Scalar(Scalar::u32(4))], &[]).unwrap();
    (g, a, k)
}

#[test]
fn a_written_param_overlapping_another_of_its_launch_is_refused_unless_declared() {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 4096).unwrap();
    let v = g.add_view("v", a, 160, 3376).unwrap();
    let sig = KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n", ScalarType::U32);
    let k = g.add_kernel(sig.clone()).unwrap();
    let before = g.clone();
    // Through a view of the same root: bytes [160, 3536) of `a` overlap.
    let e = g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(v), Arg::Scalar(Scalar::u32(4))], &[]).unwrap_err();
    assert_eq!(e, GraphError::Aliasing { node: 0, kernel: "mix".into(), first: "out".into(), second: "inp".into(), buffer: "a".into(), lo: 160, hi: 3536 });
    assert!(e.to_string().contains("params `out` and `inp` overlap on bytes [160, 3536) of `a`"), "{e}");
    assert_eq!(g, before, "a refused node leaves the graph unchanged");
    // Disjoint slices of one buffer are fine, as are two reads of the same bytes.
    let lo = Slice { buffer: a, offset: 0, len: 160 };
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Buffer(lo), Arg::Buffer(Slice { buffer: a, offset: 160, len: 160 }), Arg::Scalar(Scalar::u32(4))], &[])
        .unwrap();
    let reads = g.add_kernel(KernelSig::new("sum").buffer("x", Access::Read).buffer("y", Access::Read).buffer("out", Access::Write)).unwrap();
    let b = g.add_buffer("b", 64).unwrap();
    g.add_launch(reads, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(a), Arg::Whole(b)], &[]).unwrap();
    // A write-only param overlapping a write-only one: refused too.
    let two = g.add_kernel(KernelSig::new("two").buffer("p", Access::Write).buffer("q", Access::Write)).unwrap();
    let e = g.add_launch(two, Launch::linear(1, 1), &[Arg::Buffer(lo), Arg::Buffer(Slice { buffer: a, offset: 159, len: 1 })], &[]).unwrap_err();
    assert!(matches!(e, GraphError::Aliasing { lo: 159, hi: 160, .. }), "{e}");
    // Declared in the signature: the kernel's author owns it.
    let declared = g.add_kernel(KernelSig { name: "mix_aliased".into(), ..sig }.may_alias("inp", "out").unwrap()).unwrap();
    g.add_launch(declared, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(v), Arg::Scalar(Scalar::u32(4))], &[]).unwrap();
    // A declaration must name two params of the signature.
    let bad = KernelSig::new("k").buffer("x", Access::Write).may_alias("x", "y").unwrap_err();
    assert!(bad.to_string().contains("`y` is not one of its params"), "{bad}");
    assert!(KernelSig::new("k").buffer("x", Access::Write).may_alias("x", "x").is_err());
}

#[test]
fn slice_outside_its_buffer_names_node_and_param() {
    let (mut g, a, k) = base();
    let before = g.clone();
    let e = g
        .add_launch(k, Launch::linear(1, 32), &[Arg::Buffer(Slice { buffer: a, offset: 60, len: 8 }), Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[])
        .unwrap_err();
    assert_eq!(e, GraphError::SliceOutOfRange { node: 1, param: "mix.out".into(), buffer: "a".into(), offset: 60, len: 8, size: 64 });
    assert!(e.to_string().contains("node 1, param `mix.out`"), "{e}");
    assert_eq!(g, before, "a refused node must leave the graph unchanged");
    // offset + len overflow is also out of range, not a wrap-around
    let e = g
        .add_launch(k, Launch::linear(1, 1), &[Arg::Buffer(Slice { buffer: a, offset: u64::MAX, len: 2 }), Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[])
        .unwrap_err();
    assert!(matches!(e, GraphError::SliceOutOfRange { node: 1, .. }));
}

#[test]
fn slot_of_the_wrong_type_is_refused() {
    let (mut g, a, k) = base();
    let s = g.add_slot("pos", Scalar::u64(0)).unwrap();
    let before = g.clone();
    let e = g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(a), Arg::Whole(a), Arg::Slot(s)], &[]).unwrap_err();
    assert_eq!(e, GraphError::SlotType { node: 1, param: "mix.n".into(), slot: "pos".into(), expected: "u32", got: "u64" });
    assert_eq!(g, before);
    // patching a slot with a value of another size/type is refused too
    let s32 = g.add_slot("pos32", Scalar::u32(0)).unwrap();
    g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(a), Arg::Whole(a), Arg::Slot(s32)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    assert_eq!(check_slot(&plan, s32, Scalar::u64(3)), Err(SlotError::WrongType { slot: "pos32".into(), expected: "u32", got: "u64" }));
    assert_eq!(check_slot(&plan, ostinato::SlotId(9), Scalar::u32(3)), Err(SlotError::Unknown(9)));
    assert_eq!(check_slot(&plan, s32, Scalar::u32(3)), Ok(()));
}

#[test]
fn scalar_for_buffer_param_and_wrong_arg_count_are_refused() {
    let (mut g, a, k) = base();
    let e = g.add_launch(k, Launch::linear(1, 1), &[Arg::Scalar(Scalar::u32(1)), Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[]).unwrap_err();
    assert!(matches!(&e, GraphError::BadArg { node: 1, param, .. } if param == "mix.out"), "{e}");
    let e = g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(a)], &[]).unwrap_err();
    assert_eq!(e, GraphError::ArgCount { node: 1, kernel: "mix".into(), expected: 3, got: 1 });
    let e = g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(a), Arg::Whole(a), Arg::Scalar(Scalar::f32(1.0))], &[]).unwrap_err();
    assert!(matches!(&e, GraphError::BadArg { node: 1, param, .. } if param == "mix.n"), "{e}");
    let e = g.add_launch(k, Launch::new([0, 1, 1], [32, 1, 1]), &[Arg::Whole(a), Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[]).unwrap_err();
    assert!(matches!(e, GraphError::BadLaunch { node: 1, .. }));
    assert_eq!(g.nodes().len(), 1);
}

#[test]
fn cycle_through_explicit_edges_is_reported_with_its_nodes() {
    let (mut g, a, k) = base();
    let n1 = g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(a), Arg::Whole(a), Arg::Scalar(Scalar::u32(1))], &[]).unwrap();
    // hazard order says 0 -> 1; the explicit edge says 1 -> 0
    g.add_edge(n1, NodeId(0)).unwrap();
    let e = Plan::compile(&g).unwrap_err();
    assert_eq!(e, PlanError::Cycle { cycle: vec![0, 1] });
    assert_eq!(e.to_string(), "explicit edges make a cycle: node 0 -> node 1 -> node 0");
    assert_eq!(g.add_edge(NodeId(0), NodeId(0)), Err(GraphError::SelfEdge { node: 0 }));
    assert_eq!(g.add_edge(NodeId(0), NodeId(7)), Err(GraphError::UnknownNode { node: 0, referenced: 7 }));
}

#[test]
fn duplicate_names_views_and_empty_extents_are_refused() {
    let (mut g, a, _) = base();
    assert!(matches!(g.add_buffer("a", 4), Err(GraphError::DuplicateName { what: "buffer", .. })));
    assert!(matches!(g.add_buffer("z", 0), Err(GraphError::EmptyBuffer { .. })));
    assert!(matches!(g.add_view("v", a, 60, 8), Err(GraphError::ViewOutOfRange { .. })));
    assert!(matches!(g.add_fill(Slice { buffer: a, offset: 0, len: 0 }, 1, &[]), Err(GraphError::EmptySlice { node: 1, .. })));
    assert!(matches!(g.add_fill(Slice { buffer: a, offset: 2, len: 4 }, 1, &[]), Err(GraphError::BadArg { node: 1, .. })));
    let v = g.add_view("v", a, 0, 16).unwrap();
    assert!(matches!(g.add_copy(Slice { buffer: a, offset: 8, len: 8 }, Slice { buffer: v, offset: 4, len: 8 }, &[]), Err(GraphError::BadArg { .. })));
}

fn parse(src: &str) -> Result<file::GraphFile, FileError> {
    file::parse(src, Path::new("g.toml"), &["host", "cuda"])
}

const KERNEL: &str = r#"
[[buffer]]
name = "a"
size = 64
[[kernel]]
name = "mix"
params = [{ name = "out", access = "read_write" }, { name = "n", scalar = "u32" }]
host = "builtin:mix"
"#;

#[test]
fn file_buffer_param_without_access_is_an_error_with_line() {
    let src = "[[buffer]]\nname = \"a\"\nsize = 64\n\n[[kernel]]\nname = \"k\"\nparams = [{ name = \"out\" }]\n";
    let e = parse(src).unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    assert!(e.to_string().starts_with("g.toml:5: kernel `k` param `out`: declare `access`"), "{e}");
}

#[test]
fn file_errors_name_line_node_and_param() {
    let e = parse(&format!(
        "{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = {{ buffer = \"a\", offset = 60, len = 8 }}, n = 4 }}\n"
    ))
    .unwrap_err();
    assert_eq!(e.line, Some(10), "{e}");
    assert!(e.message.contains("node 0, param `mix.out`") && e.message.contains("outside buffer `a`"), "{e}");

    let e = parse(&format!("{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = \"nope\", n = 4 }}\n")).unwrap_err();
    assert!(e.message.contains("unknown buffer `nope`"), "{e}");
    let e = parse(&format!("{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = \"a\" }}\n")).unwrap_err();
    assert!(e.message.contains("missing arg `n`"), "{e}");
    let e = parse(&format!("{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = \"a\", n = -1 }}\n")).unwrap_err();
    assert!(e.message.contains("-1 does not fit a u32"), "{e}");
    let e = parse(&format!("{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = \"a\", n = 1, m = 2 }}\n")).unwrap_err();
    assert!(e.message.contains("no param `m`"), "{e}");
    let e = parse(&KERNEL.replace("host = ", "hots = ")).unwrap_err();
    assert!(e.message.contains("unknown key `hots`"), "{e}");
    let e = parse(&format!("{KERNEL}\n[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = {{ out = \"a\", n = 1 }}\nafter = [0]\n")).unwrap_err();
    assert!(e.message.contains("names the node itself"), "{e}");
    let e = parse("[[buffer]]\nname = \"a\"\nsize = 4\nsizee = 5\n").unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
}

#[test]
fn file_forward_after_can_close_a_cycle_and_plan_reports_it() {
    let node = "[[node]]\nkernel = \"mix\"\ngrid = [1]\nblock = [32]\nargs = { out = \"a\", n = 1 }\n";
    let src = format!("{KERNEL}\n{node}after = [1]\n{node}");
    let f = parse(&src).unwrap();
    assert_eq!(Plan::compile(&f.graph).unwrap_err(), PlanError::Cycle { cycle: vec![0, 1] });
}

#[test]
fn file_example_from_the_issue_parses_and_plans() {
    let src = r#"
[[buffer]]
name = "a"
size = 4096
init = "iota"
[[kernel]]
name = "mix"
params = [{ name = "out", access = "read_write" }, { name = "inp", access = "read" },
          { name = "n_out", scalar = "u32" }, { name = "n_in", scalar = "u32" }, { name = "salt", scalar = "u32" }]
alias = [["out", "inp"]]
host = "builtin:mix"
[[node]]
kernel = "mix"
grid = [1, 1, 1]
block = [256, 1, 1]
args = { out = { buffer = "a", offset = 0, len = 1024 }, inp = "a", n_out = 256, n_in = 1024, salt = 7 }
[[node]]
kernel = "mix"
grid = [1, 1, 1]
block = [256, 1, 1]
args = { out = { buffer = "a", offset = 1024, len = 1024 }, inp = { buffer = "a", offset = 2048 }, n_out = 256, n_in = 512, salt = 7 }
"#;
    let f = parse(src).unwrap();
    let p = Plan::compile(&f.graph).unwrap();
    // node 0 writes [0,1024) and reads all; node 1 writes [1024,2048): WAR on [1024,2048)
    assert_eq!(p.edges().len(), 1);
    assert!(p.edges()[0].hazards.contains(ostinato::Hazards::WAR));
    assert!(!p.edges()[0].hazards.contains(ostinato::Hazards::RAW));
}

#[test]
fn a_graph_past_the_planners_bitset_budget_is_planned_by_search() {
    use ostinato::{Access, Arg, Graph, KernelSig, Launch, Plan};
    // 230,000 nodes: the ancestor bitsets would take 3.3 GB, past the budget; the search takes O(n).
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64).unwrap();
    let k = g.add_kernel(KernelSig::new("k").buffer("x", Access::ReadWrite)).unwrap();
    for _ in 0..230_000 {
        g.add_launch(k, Launch::linear(1, 1), &[Arg::Whole(x)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).expect("a long chain plans");
    assert_eq!(plan.edges().len(), 229_999);
    assert!(plan.edges().iter().enumerate().all(|(i, e)| (e.from.0, e.to.0) == (i as u32, i as u32 + 1)), "a chain reduces to its links");
}

#[test]
fn graph_files_place_buffers_and_name_a_bad_collective_by_line() {
    use std::path::Path;
    let head = r#"
[[buffer]]
name = "a0"
size = 64

[[buffer]]
name = "a1"
size = 64
device = 1
"#;
    let parse = |tail: &str| ostinato::file::parse(&format!("{head}{tail}"), Path::new("g.toml"), &["host"]);
    let ok = parse("[[node]]\ncollective = { op = \"all_reduce\", dtype = \"f32\", send = [\"a0\", \"a1\"], recv = [\"a0\", \"a1\"] }\n").unwrap();
    assert_eq!(ok.graph.buffers()[1].device, 1);
    assert_eq!(ok.graph.describe_node(ostinato::NodeId(0)), "node 0 (all_reduce over 2 ranks)");
    let e = parse("[[node]]\ncollective = { op = \"all_sum\", dtype = \"f32\", send = [\"a0\"], recv = [\"a0\"] }\n").unwrap_err().to_string();
    assert!(e.contains("g.toml:10") && e.contains("node 0 (collective): `op = \"all_sum\"`: all_reduce, all_gather or reduce_scatter"), "{e}");
    let e =
        parse("[[node]]\ncollective = { op = \"all_reduce\", dtype = \"f32\", send = [\"a0\", \"a1\"], recv = [\"a1\", \"a0\"] }\n").unwrap_err().to_string();
    assert!(e.contains("g.toml:10") && e.contains("rank 0 sends from `a0` on device 0 but receives into `a1` on device 1"), "{e}");
    let e = parse("[[buffer]]\nname = \"v\"\nsize = 8\nview = { of = \"a1\", offset = 0 }\ndevice = 0\n").unwrap_err().to_string();
    assert!(e.contains("view `v`: a view lies on its parent's device"), "{e}");
}
