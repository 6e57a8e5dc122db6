//! Whether a host exec with worker threads runs its replays on the pool or inline, on the calling
//! thread in plan order. Handing a node to another thread costs tens of nanoseconds (an atomic counter,
//! a wake-up, cache lines moving between cores); a plan gains from threads only when nodes can run side
//! by side and each does more work than that. Measured on the 2-core CI machine
//! (`docs/design.md`, "Host backend"): tiny nodes (1 KiB each)
//! ran 2× slower on the pool than inline even as four independent chains, while 128 KiB nodes in four
//! chains ran 1.9× faster.

use ostinato::{Arg, NodeOp, Plan};

/// Under [`Schedule::Auto`], the pool is used only when the plan's nodes touch at least this many bytes
/// on average (declared access: buffer arguments, both sides of a copy, a fill's range).
pub const POOL_MIN_NODE_BYTES: u64 = 16 * 1024;

/// How a host exec with worker threads schedules a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Always on the pool (what the parallel tests exercise).
    Pool,
    /// On the pool when the plan can use it ([`inline_reason`] says when not).
    Auto,
}

/// Why `plan` runs inline under [`Schedule::Auto`], or `None` when it goes to the pool.
pub fn inline_reason(plan: &Plan) -> Option<String> {
    if plan.lanes().count() <= 1 {
        return Some("one lane: no two nodes can run side by side".into());
    }
    let g = plan.graph();
    let bytes: u64 = g
        .nodes()
        .iter()
        .map(|n| match &n.op {
            NodeOp::Kernel { args, .. } => args.iter().map(|a| if let Arg::Buffer(s) = a { s.len } else { 0 }).sum(),
            NodeOp::Copy { src, .. } => 2 * src.len,
            NodeOp::Fill { dst, .. } => dst.len,
            NodeOp::Collective { send, recv, .. } => send.iter().chain(recv).map(|s| s.len).sum(),
        })
        .sum();
    let nodes = g.nodes().len().max(1) as u64;
    (bytes / nodes < POOL_MIN_NODE_BYTES)
        .then(|| format!("nodes touch {} bytes on average, less than {POOL_MIN_NODE_BYTES}: less work than handing them to threads", bytes / nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, Graph, KernelSig, Launch, PlanOptions, Scalar, ScalarType};

    /// `chains` independent chains of `len` add_one nodes, each over its own buffer of `bytes`.
    fn chains(chains: usize, len: usize, bytes: u64) -> Plan {
        let mut g = Graph::new();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let bufs: Vec<_> = (0..chains).map(|c| g.add_buffer(format!("b{c}"), bytes).unwrap()).collect();
        for _ in 0..len {
            for b in &bufs {
                g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(*b), Arg::Scalar(Scalar::u32((bytes / 4) as u32))], &[]).unwrap();
            }
        }
        Plan::compile_with(&g, PlanOptions { max_lanes: 4 }).unwrap()
    }

    #[test]
    fn a_chain_runs_inline_whatever_its_size() {
        let why = inline_reason(&chains(1, 20, 1 << 20)).expect("inline");
        assert!(why.contains("one lane"), "{why}");
    }

    #[test]
    fn side_by_side_chains_go_to_the_pool_only_with_enough_work_per_node() {
        let why = inline_reason(&chains(4, 20, 1024)).expect("1 KiB nodes run inline");
        assert!(why.contains("1024 bytes on average"), "{why}");
        assert_eq!(inline_reason(&chains(4, 20, POOL_MIN_NODE_BYTES)), None, "at the threshold: pool");
        assert_eq!(inline_reason(&chains(4, 20, 128 * 1024)), None);
    }
}
