//! The plan recorded again with each fused group as one node: same buffers, kernels and slots (same
//! ids), the fused kernels' signatures added, and the nodes in an order of the contracted graph — so
//! every two nodes with a hazard keep their order, and the planner derives the fused node's edges from
//! its declared accesses (the union of its members') like any other node's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ostinato::{Graph, KernelId, NodeId, NodeOp, Plan};

use super::source::FusedKernel;
use super::Group;

/// The rewritten graph, and where each original node went.
#[derive(Clone, Debug)]
pub struct Rewritten {
    pub graph: Graph,
    /// The new node that runs each original node (a fused node for every member of a group).
    pub node_of: Vec<NodeId>,
    /// The kernel id of each group's fused kernel in `graph`.
    pub kernels: Vec<KernelId>,
}

/// Records `plan` again with `groups[i]` as one launch of `fused[i]`. Errs only where the fused
/// signatures cannot be added (a user kernel of the same name) or the groups would order a cycle
/// (which [`super::groups`] never produces).
pub fn rewrite(plan: &Plan, groups: &[Group], fused: &[FusedKernel]) -> Result<Rewritten, String> {
    let g = plan.graph();
    let n = plan.node_count();
    // Units: nodes 0..n by themselves, n + i for group i.
    let mut unit: Vec<usize> = (0..n).collect();
    for (i, gr) in groups.iter().enumerate() {
        for v in gr.nodes() {
            unit[v.index()] = n + i;
        }
    }
    let units = n + groups.len();
    let mut pos = vec![usize::MAX; units];
    for (i, v) in plan.order().iter().enumerate() {
        let u = unit[v.index()];
        pos[u] = pos[u].min(i);
    }
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); units];
    let mut indeg = vec![0usize; units];
    for e in plan.edges() {
        let (a, b) = (unit[e.from.index()], unit[e.to.index()]);
        if a != b && !succ[a].contains(&b) {
            succ[a].push(b);
            indeg[b] += 1;
        }
    }
    // Kahn's order, earliest plan position first (a plan without groups records in plan order).
    let live = |u: usize| pos[u] != usize::MAX;
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..units).filter(|&u| live(u) && indeg[u] == 0).map(|u| Reverse((pos[u], u))).collect();
    let mut order = Vec::with_capacity(units);
    while let Some(Reverse((_, u))) = ready.pop() {
        order.push(u);
        for &w in &succ[u] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.push(Reverse((pos[w], w)));
            }
        }
    }
    if order.len() != (0..units).filter(|&u| live(u)).count() {
        return Err("the fused groups would order the plan in a cycle".into());
    }
    let mut out = g.without_nodes();
    let mut kernels = Vec::with_capacity(fused.len());
    for f in fused {
        kernels.push(out.add_kernel(f.sig.clone()).map_err(|e| format!("fused kernel `{}`: {e}", f.sig.name))?);
    }
    let mut new_of_unit = vec![None; units];
    let err = |e: ostinato::GraphError| format!("recording the fused plan: {e}");
    for u in order {
        let members: Vec<NodeId> = if u < n { vec![NodeId(u as u32)] } else { groups[u - n].nodes().collect() };
        // Explicit orderings to nodes outside the unit, through their new ids.
        let mut after: Vec<NodeId> = Vec::new();
        for v in &members {
            for a in &g.node(*v).after {
                let au = unit[a.index()];
                if au != u {
                    let id = new_of_unit[au].ok_or_else(|| format!("n{v} is ordered after n{a}, which the fused order puts later"))?;
                    if !after.contains(&id) {
                        after.push(id);
                    }
                }
            }
        }
        let id = if u >= n {
            let f = &fused[u - n];
            out.add_launch(kernels[u - n], f.launch, &f.args, &after).map_err(err)?
        } else {
            match &g.node(NodeId(u as u32)).op {
                NodeOp::Kernel { kernel, launch, args } => out.add_launch(*kernel, *launch, args, &after).map_err(err)?,
                NodeOp::Copy { src, dst } => out.add_copy(*src, *dst, &after).map_err(err)?,
                NodeOp::Fill { dst, value } => out.add_fill(*dst, *value, &after).map_err(err)?,
                NodeOp::Collective { op, dtype, send, recv } => out.add_collective(*op, *dtype, send, recv, &after).map_err(err)?,
            }
        };
        new_of_unit[u] = Some(id);
    }
    let node_of = (0..n).map(|v| new_of_unit[unit[v]].unwrap_or(NodeId(0))).collect();
    Ok(Rewritten { graph: out, node_of, kernels })
}
