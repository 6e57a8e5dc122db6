//! Golden tests of the lowering: the AQL program a plan becomes, that it meets every need of the
//! plan, and that visibility follows the transitive RAW relation.

use ostinato::{Access, Arg, Graph, KernelSig, Launch, Plan, PlanOptions, Slice};
use ostinato_hsa::lower::{lower, needs};
use ostinato_hsa::order::unmet;
use ostinato_hsa::program::{PacketOp, Scope};

fn example(name: &str, max_lanes: usize) -> Plan {
    let path = ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}")).join("examples").join(name);
    let f = ostinato::file::load(&path, &["host", "cuda", "vulkan", "hsa"]).unwrap();
    Plan::compile_with(&f.graph, PlanOptions { max_lanes }).unwrap()
}

#[test]
fn golden_mix_example() {
    let plan = example("mix.toml", 4);
    let p = lower(&plan).unwrap();
    assert_eq!(
        p.describe(&plan),
        "queue 0:
  barrier-and [] -> s0
  dispatch n0 mix grid 256 wg 256 acquire=system release=agent
  barrier-and [s3]
  dispatch n2 mix grid 512 wg 256 barrier acquire=agent release=agent -> s1
  dispatch n3 ostinato_copy grid 256 wg 256 barrier acquire=agent
  barrier-and [s4] barrier release=system -> s2
queue 1:
  barrier-and [s0]
  dispatch n1 mix grid 256 wg 256 acquire=system release=agent -> s3
queue 2:
  barrier-and [s1]
  dispatch n4 ostinato_fill grid 256 wg 256
  barrier-and [] barrier -> s4
done s2
"
    );
    assert_eq!(unmet(&p, &needs(&plan)), None);
    // The fill's edge is WAR only: no fence on it, only the wait for n2.
    let fill = p.queues[2].iter().find(|x| matches!(x.op, PacketOp::Dispatch { node } if node.0 == 4)).unwrap();
    assert_eq!((fill.acquire, fill.release), (Scope::None, Scope::None));
}

#[test]
fn golden_one_lane_is_a_barrier_chain_with_one_system_release() {
    let plan = example("add_one_serial_941.toml", 1);
    let p = lower(&plan).unwrap();
    assert_eq!(p.queues.len(), 1);
    let d = p.describe(&plan);
    let lines: Vec<&str> = d.lines().collect();
    assert_eq!(lines[1], "  dispatch n0 add_one grid 256 wg 256 acquire=system release=agent");
    assert_eq!(lines[2], "  dispatch n1 add_one grid 256 wg 256 barrier acquire=agent release=agent");
    assert_eq!(lines[lines.len() - 3], "  dispatch n940 add_one grid 256 wg 256 barrier acquire=agent");
    assert_eq!(lines[lines.len() - 2], "  barrier-and [] barrier release=system -> s0");
    let (dispatches, barrier_ands, _, _, releases) = p.counts();
    assert_eq!((dispatches, barrier_ands, releases), (941, 1, 941), "one release per producer and the system release at the end");
}

/// n0 writes `b` and `c`; n1 writes `c` (WAW on n0) and reads `d`; n2 reads `b` (RAW on n0) and writes
/// `d` (WAR on n1). The reduction drops n0 -> n2 (implied by n0 -> n1 -> n2), whose edges are WAW and
/// WAR only — yet n2 must see n0's stores to `b`: visibility follows the transitive RAW pair.
#[test]
fn visibility_follows_the_transitive_raw_pair_not_the_reduced_edges() {
    let mut g = Graph::new();
    let (b, c, d) = (g.add_buffer("b", 64).unwrap(), g.add_buffer("c", 64).unwrap(), g.add_buffer("d", 64).unwrap());
    let k2 = g.add_kernel(KernelSig::new("w2").buffer("x", Access::Write).buffer("y", Access::Write)).unwrap();
    let kwr = g.add_kernel(KernelSig::new("wr").buffer("x", Access::Write).buffer("y", Access::Read)).unwrap();
    let l = Launch::linear(1, 64);
    let whole = |g: &Graph, x| Arg::Buffer(Slice { buffer: x, offset: 0, len: g.buffer(x).size });
    g.add_launch(k2, l, &[whole(&g, b), whole(&g, c)], &[]).unwrap();
    g.add_launch(kwr, l, &[whole(&g, c), whole(&g, d)], &[]).unwrap();
    g.add_launch(kwr, l, &[whole(&g, d), whole(&g, b)], &[]).unwrap();
    let plan = Plan::compile_with(&g, PlanOptions { max_lanes: 1 }).unwrap();
    let kinds: Vec<(u32, u32, Vec<&str>)> = plan.edges().iter().map(|e| (e.from.0, e.to.0, e.hazards.names())).collect();
    assert_eq!(kinds, [(0, 1, vec!["WAW"]), (1, 2, vec!["WAR"])]);
    assert!(needs(&plan).raw.contains(&(ostinato::NodeId(0), ostinato::NodeId(2))));
    let p = lower(&plan).unwrap();
    // n0 releases its stores; n1's system acquire (n1 reads `d`, which the host wrote) comes after
    // that release and before n2, so it makes them visible to n2 too: n2 needs no fence of its own.
    assert_eq!(
        p.describe(&plan),
        "queue 0:
  dispatch n0 w2 grid 64 wg 64 release=agent
  dispatch n1 wr grid 64 wg 64 barrier acquire=system
  dispatch n2 wr grid 64 wg 64 barrier
  barrier-and [] barrier release=system -> s0
done s0
"
    );
    let mut weaker = p.clone();
    weaker.queues[0][0].release = Scope::None;
    assert!(unmet(&weaker, &needs(&plan)).unwrap().contains("n2 reads what n0 wrote"), "without n0's release, n2 would read stale bytes");
}

#[test]
fn random_programs_lower_to_programs_that_meet_every_need() {
    for seed in 0..40u64 {
        let prog = ostinato_testkit::random_graphs::random_mix_program(seed, 3 + seed as usize % 24);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + seed as usize % 6 }).unwrap();
        let p = lower(&plan).unwrap();
        assert_eq!(unmet(&p, &needs(&plan)), None, "seed {seed}");
        assert_eq!(p.queues.len(), plan.lanes().count().max(1));
        assert!(p.queues.iter().flatten().all(|x| !matches!(&x.op, PacketOp::BarrierAnd { deps } if deps.len() > 5)));
    }
}
