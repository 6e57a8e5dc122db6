//! How graph mode submits a lowering: the driver calls that build the retained graph in each
//! [`GraphBuild`] (kernel nodes; the collectives' NCCL calls and captured work as child graphs), and the
//! NCCL call of each collective node.

use std::sync::Arc;

use ostinato::{NodeId, Plan};

use crate::captured::CapturedGraph;
use crate::error::{CudaError, Result};
use crate::ffi::{Context, Function, Graph, GraphExec, GraphNode, KernelArgs, Stream};
use crate::lower::{ArgValue, Lowering};
use crate::nccl::Communicator;
use crate::options::GraphBuild;

/// The graph node of launch `j`, which must have been added already (plan order is topological, and
/// the bulk build adds every node before any edge); `to` names the launch whose edge needs it.
fn node_of(slots: &[Option<GraphNode>], j: usize, to: usize) -> Result<GraphNode> {
    slots[j].ok_or_else(|| CudaError::Internal { op: "build_graph", reason: format!("launch {j} has no graph node yet, for an edge into launch {to}") })
}

/// Adds every launch in plan order with `add(launch, its in-edges' nodes, which of them are
/// programmatic)`, in the lowering's edge order, and keeps each new node in `slots`.
fn add_in_plan_order(
    plan: &Plan,
    low: &Lowering,
    slots: &mut [Option<GraphNode>],
    mut add: impl FnMut(usize, &[GraphNode], &[bool]) -> Result<GraphNode>,
) -> Result<()> {
    let mut incoming: Vec<Vec<(usize, bool)>> = vec![Vec::new(); low.launches.len()];
    for e in &low.edges {
        incoming[e.to.index()].push((e.from.index(), e.programmatic));
    }
    for &v in plan.order() {
        let i = v.index();
        let deps = incoming[i].iter().map(|&(from, _)| node_of(slots, from, i)).collect::<Result<Vec<_>>>()?;
        let programmatic: Vec<bool> = incoming[i].iter().map(|&(_, p)| p).collect();
        slots[i] = Some(add(i, &deps, &programmatic)?);
    }
    Ok(())
}

/// Builds, instantiates and uploads the graph; returns it, its exec and the node of each launch.
pub(crate) fn build_graph(
    plan: &Plan,
    low: &Lowering,
    funcs: &[Function],
    args: &mut [KernelArgs],
    stream: &Stream,
    build: GraphBuild,
    collectives: &Collectives,
) -> Result<(Graph, GraphExec, Vec<GraphNode>)> {
    let g = plan.graph();
    let at = |i: usize| move |e: CudaError| e.at(g.describe_node(low.launches[i].node));
    let mut slots: Vec<Option<GraphNode>> = vec![None; low.launches.len()];
    let graph = match build {
        GraphBuild::Bulk => {
            let mut graph = Graph::new()?;
            for (i, l) in low.launches.iter().enumerate() {
                slots[i] = Some(match collectives.add_child(i, &mut graph, &[]).map_err(at(i))? {
                    Some(node) => node,
                    None => graph.add_kernel(&funcs[i], l.dims, &mut args[i]).map_err(at(i))?,
                });
            }
            let groups: Vec<Vec<&crate::lower::GraphEdge>> =
                [false, true].iter().map(|&p| low.edges.iter().filter(|e| e.programmatic == p).collect()).collect();
            for group in groups {
                let from = group.iter().map(|e| node_of(&slots, e.from.index(), e.to.index())).collect::<Result<Vec<_>>>()?;
                let to = group.iter().map(|e| node_of(&slots, e.to.index(), e.to.index())).collect::<Result<Vec<_>>>()?;
                let prog: Vec<bool> = group.iter().map(|e| e.programmatic).collect();
                graph.add_edges(&from, &to, &prog)?;
            }
            graph
        }
        GraphBuild::InOrder => {
            let mut graph = Graph::new()?;
            add_in_plan_order(plan, low, &mut slots, |i, deps, prog| match collectives.add_child(i, &mut graph, deps).map_err(at(i))? {
                Some(node) => Ok(node),
                None => graph.add_kernel_after(&funcs[i], low.launches[i].dims, &mut args[i], deps, prog).map_err(at(i)),
            })?;
            graph
        }
        GraphBuild::Capture => {
            if let Some(i) = collectives.captured.iter().position(Option::is_some) {
                return Err(CudaError::Unsupported {
                    op: "instantiate",
                    reason: format!(
                        "{} runs captured work, which the stream-capture build cannot place: use the bulk or in-order build",
                        g.describe_node(low.launches[i].node)
                    ),
                });
            }
            stream.begin_capture_thread_local()?;
            let result = add_in_plan_order(plan, low, &mut slots, |i, deps, prog| match (&collectives.calls[i], collectives.comm) {
                (Some(call), Some(comm)) => stream.capture_after(deps, prog, || call.enqueue(comm, stream)).map_err(at(i)),
                _ => stream.capture_kernel_after(&funcs[i], low.launches[i].dims, &mut args[i], deps, prog).map_err(at(i)),
            });
            // The capture always ends, so that a failed build leaves the stream usable.
            let graph = stream.end_capture();
            result?;
            graph?
        }
    };
    let nodes: Vec<GraphNode> =
        slots.into_iter().collect::<Option<Vec<_>>>().ok_or(CudaError::Internal { op: "build_graph", reason: "a node was not added".into() })?;
    let exec = graph.instantiate()?;
    exec.upload(stream)?;
    // Resolve the patch entry point now (the driver symbol is looked up, and cached, on first use), so
    // that no later set_slot pays for it: re-set one node's unchanged params.
    if let Some(i) = (0..low.launches.len()).find(|&i| low.launches[i].args.iter().any(|a| matches!(a, ArgValue::Slot(_)))) {
        exec.set_kernel_params(nodes[i], &funcs[i], low.launches[i].dims, &mut args[i])?;
    }
    stream.synchronize()?;
    Ok((graph, exec, nodes))
}

/// A collective node's NCCL call: device addresses and element count.
pub(crate) struct CollectiveCall {
    op: ostinato::collective::CollectiveOp,
    ty: ostinato::ScalarType,
    send: u64,
    recv: u64,
    elements: usize,
}

impl CollectiveCall {
    /// The call node `v` of `plan` makes, where it is a collective (one rank: the exec's device).
    pub(crate) fn of(plan: &Plan, v: NodeId, base: &[u64]) -> Option<CollectiveCall> {
        let g = plan.graph();
        let ostinato::NodeOp::Collective { op, dtype, send, recv } = &g.node(v).op else { return None };
        let at = |s: &ostinato::Slice| {
            let (root, start, _) = g.root_extent(*s);
            base[root.index()] + start
        };
        let counted = if *op == ostinato::collective::CollectiveOp::ReduceScatterSum { &recv[0] } else { &send[0] };
        Some(CollectiveCall { op: *op, ty: *dtype, send: at(&send[0]), recv: at(&recv[0]), elements: (counted.len / dtype.size() as u64) as usize })
    }
    pub(crate) fn enqueue(&self, comm: &Communicator, stream: &Stream) -> Result<()> {
        comm.enqueue(self.op, self.ty, self.send, self.recv, self.elements, stream.handle())
    }
}

/// What graph building needs of the launches that run as child graphs: each collective's call, the
/// communicator, the context to capture a call's child graph on a stream of its own, and each launch's
/// captured work.
pub(crate) struct Collectives<'a> {
    pub(crate) calls: &'a [Option<CollectiveCall>],
    pub(crate) comm: Option<&'a Communicator>,
    pub(crate) ctx: &'a Arc<Context>,
    pub(crate) captured: &'a [Option<Arc<CapturedGraph>>],
}

impl Collectives<'_> {
    /// Adds launch `i` to `graph` as a child graph after `deps`, where it is one (a collective or
    /// captured work); `None` for a kernel launch.
    fn add_child(&self, i: usize, graph: &mut Graph, deps: &[GraphNode]) -> Result<Option<GraphNode>> {
        if let Some(work) = &self.captured[i] {
            return work.add_to(graph, deps).map(Some);
        }
        match self.child(i)? {
            Some(child) => graph.add_child(&child, deps).map(Some),
            None => Ok(None),
        }
    }
    /// Launch `i`'s NCCL call captured into a graph, where launch `i` is a collective.
    fn child(&self, i: usize) -> Result<Option<Graph>> {
        let (Some(call), Some(comm)) = (&self.calls[i], self.comm) else { return Ok(None) };
        let s = Stream::new(self.ctx)?;
        s.begin_capture_thread_local()?;
        let r = call.enqueue(comm, &s);
        // The capture always ends, so that a failed call leaves the stream usable.
        let child = s.end_capture();
        r?;
        Ok(Some(child?))
    }
}
