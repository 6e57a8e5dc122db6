//! Golden tests of the lowering: what an AQL program a plan becomes, and that every barrier bit,
//! dependency and fence left is one the plan needs.

use ostinato::{Access, Arg, Graph, KernelSig, Launch, Plan, PlanOptions, Scalar, ScalarType, Slice};
use ostinato_hsa::lower::{lower, needs};
use ostinato_hsa::order::unmet;
use ostinato_hsa::program::PacketOp;

fn example(name: &str, max_lanes: usize) -> Plan {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    let f = ostinato::file::load(&path, &["host", "cuda", "vulkan", "hsa"]).unwrap();
    Plan::compile_with(&f.graph, PlanOptions { max_lanes }).unwrap()
}

#[test]
fn golden_mix_example() {
    let plan = example("mix.toml", 4);
    let p = lower(&plan).unwrap();
    println!("{}", plan.explain());
    println!("{}", p.describe(&plan));
    assert_eq!(unmet(&p, &needs(&plan)), None);
}
