//! Planning-time benchmark: `cargo bench -p ostinato --bench plan_scale`.
//! A 10,000-node graph over 1,000 buffers (random extents and modes, decode-like locality) is planned
//! repeatedly on one thread; prints the median and the edge count.

use std::time::Instant;

use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, Plan, PlanOptions, Scalar, ScalarType, Slice};

fn build(nodes: usize, buffers: usize, seed: u64) -> Graph {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut g = Graph::new();
    for b in 0..buffers {
        g.add_buffer(format!("b{b}"), 1 << 16).unwrap();
    }
    let k = g
        .add_kernel(KernelSig::new("k").buffer("out", Access::ReadWrite).buffer("a", Access::Read).buffer("b", Access::Read).scalar("n", ScalarType::U32))
        .unwrap();
    for i in 0..nodes {
        // Mostly-local buffer choice (like a layer stack), sometimes far away.
        let mut pick = || {
            let r = next();
            let base = (i * buffers / nodes) as u64;
            let b = if r % 8 == 0 { (r >> 8) % buffers as u64 } else { (base + (r >> 8) % 8) % buffers as u64 };
            let off = ((r >> 20) % 16) * 4096;
            Slice { buffer: BufferId(b as u32), offset: off, len: 4096 * (1 + (r >> 40) % 4).min(16 - off / 4096) }
        };
        let args = [Arg::Buffer(pick()), Arg::Buffer(pick()), Arg::Buffer(pick()), Arg::Scalar(Scalar::u32(1024))];
        g.add_launch(k, Launch::linear(1, 256), &args, &[]).unwrap();
    }
    g
}

fn main() {
    for (nodes, buffers) in [(1_000, 100), (10_000, 1_000), (20_000, 1_000)] {
        let g = build(nodes, buffers, 0x5eed);
        let mut times = Vec::new();
        let mut edges = 0;
        for _ in 0..7 {
            let t = Instant::now();
            let p = Plan::compile_with(&g, PlanOptions { max_lanes: 4 }).expect("plans");
            times.push(t.elapsed().as_secs_f64() * 1e3);
            edges = p.edges().len();
        }
        times.sort_by(f64::total_cmp);
        println!("plan {nodes:>6} nodes / {buffers:>5} buffers: median {:8.2} ms (min {:.2}, max {:.2}), {edges} edges", times[3], times[0], times[6]);
    }
}
