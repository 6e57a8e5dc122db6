//! Collectives as ordinary nodes: an all-reduce, all-gather or reduce-scatter over the DAG's devices,
//! one rank per device, with its access declared like any node's (every rank's send extent read, every
//! rank's receive extent written), so the planner orders it against kernels and copies from the same
//! hazards. Rank `r`'s two extents lie on one device, and no two ranks share a device. The semantics
//! (the host oracle's, and what NCCL computes):
//! - all-reduce: every `recv[r]` = the element-wise sum of every `send[r']` (all of one length);
//! - all-gather: every `recv[r]` = `send[0] ‖ send[1] ‖ …` (each receive `ranks` times a send);
//! - reduce-scatter: `recv[r]` = the `r`-th of `ranks` equal chunks of the element-wise sum of the sends.
//!
//! Sums are in the element type: wrapping for integers, IEEE for floats, adding ranks in order 0, 1, ….

use crate::error::GraphError;
pub use crate::graph::CollectiveOp;
use crate::graph::{Graph, Node, NodeId, NodeOp, ScalarType, Slice};

impl Graph {
    /// Records a collective of element type `dtype`: rank `r` sends `send[r]` and receives into
    /// `recv[r]`. Refused, naming the rank, its buffer and device: no rank, a different number of send
    /// and receive extents, a rank whose two extents lie on different devices, two ranks on one
    /// device, extents that differ across ranks or do not fit the collective, a length that is not a
    /// whole number of elements, a send and receive of one rank that overlap without being the same
    /// extent (an all-reduce may run in place).
    pub fn add_collective(&mut self, op: CollectiveOp, dtype: ScalarType, send: &[Slice], recv: &[Slice], after: &[NodeId]) -> Result<NodeId, GraphError> {
        let node = NodeId(self.nodes.len() as u32);
        let bad = |reason: String| GraphError::Collective { node: node.0, op: op.as_str(), reason };
        if send.is_empty() {
            return Err(bad("no rank: a collective needs a send and a receive extent per device".into()));
        }
        if send.len() != recv.len() {
            return Err(bad(format!("{} send extents but {} receive extents (one of each per rank)", send.len(), recv.len())));
        }
        let ranks = send.len() as u64;
        let elem = dtype.size() as u64;
        let mut devices: Vec<u32> = Vec::with_capacity(send.len());
        for (r, (s, v)) in send.iter().zip(recv).enumerate() {
            self.check_slice(node, &format!("send[{r}]"), *s)?;
            self.check_slice(node, &format!("recv[{r}]"), *v)?;
            let (sb, vb) = (&self.buffers[s.buffer.index()], &self.buffers[v.buffer.index()]);
            if sb.device != vb.device {
                return Err(bad(format!("rank {r} sends from `{}` on device {} but receives into `{}` on device {}", sb.name, sb.device, vb.name, vb.device)));
            }
            if let Some(other) = devices.iter().position(|d| *d == sb.device) {
                return Err(bad(format!("ranks {other} and {r} are both on device {}: one rank per device", sb.device)));
            }
            devices.push(sb.device);
            if s.len % elem != 0 {
                return Err(bad(format!("rank {r}: send `{}` is {} bytes, not a whole number of {} elements", sb.name, s.len, dtype.as_str())));
            }
            if s.len != send[0].len {
                return Err(bad(format!(
                    "rank {r} sends {} bytes of `{}` but rank 0 sends {}: the extents must agree across ranks",
                    s.len, sb.name, send[0].len
                )));
            }
            let want = op
                .recv_len(s.len, ranks)
                .filter(|w| w % elem == 0)
                .ok_or_else(|| bad(format!("a send of {} bytes does not split into {ranks} whole chunks of {} elements", s.len, dtype.as_str())))?;
            if v.len != want {
                return Err(bad(format!(
                    "rank {r} receives {} bytes into `{}`; {} of {} bytes over {ranks} ranks gives {want}",
                    v.len,
                    vb.name,
                    op.as_str(),
                    s.len
                )));
            }
            let ((rs, ss, se), (rv, vs, ve)) = (self.root_extent(*s), self.root_extent(*v));
            let same = rs == rv && ss == vs && se == ve;
            if rs == rv && ss < ve && vs < se && !(same && op == CollectiveOp::AllReduceSum) {
                return Err(bad(format!(
                    "rank {r}: send `{}` and receive `{}` overlap (only an all-reduce may run in place, on one extent)",
                    sb.name, vb.name
                )));
            }
        }
        self.check_after(node, after)?;
        self.nodes.push(Node { op: NodeOp::Collective { op, dtype, send: send.to_vec(), recv: recv.to_vec() }, after: after.to_vec(), tiles: Vec::new() });
        Ok(node)
    }

    /// The device a node runs on: its buffers' (kernels, fills; a copy: its destination's); `None` for
    /// a collective (every rank's device) and a kernel without buffers (any).
    pub fn node_device(&self, id: NodeId) -> Option<u32> {
        let dev = |s: &Slice| self.buffers[s.buffer.index()].device;
        match &self.nodes[id.index()].op {
            NodeOp::Kernel { args, .. } => args.iter().find_map(|a| if let crate::Arg::Buffer(s) = a { Some(dev(s)) } else { None }),
            NodeOp::Copy { dst, .. } => Some(dev(dst)),
            NodeOp::Fill { dst, .. } => Some(dev(dst)),
            NodeOp::Collective { .. } => None,
        }
    }

    /// Every device a node touches (a peer copy: both; a collective: every rank's), ascending.
    pub fn node_devices(&self, id: NodeId) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        self.for_each_access(id, |a| out.push(self.buffers[a.root.index()].device));
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, Arg, KernelSig, Launch, Plan, Scalar};

    fn two_devices() -> (Graph, [crate::BufferId; 4]) {
        let mut g = Graph::new();
        let a0 = g.add_buffer_on("a0", 1024, 0).unwrap();
        let a1 = g.add_buffer_on("a1", 1024, 1).unwrap();
        let b0 = g.add_buffer_on("b0", 2048, 0).unwrap();
        let b1 = g.add_buffer_on("b1", 2048, 1).unwrap();
        (g, [a0, a1, b0, b1])
    }

    #[test]
    fn a_collective_is_ordered_by_its_declared_access() {
        let (mut g, [a0, a1, b0, b1]) = two_devices();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", crate::ScalarType::U32)).unwrap();
        let n = Arg::Scalar(Scalar::u32(256));
        let p0 = g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(a0), n], &[]).unwrap();
        let p1 = g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(a1), n], &[]).unwrap();
        let (wa0, wa1, wb0, wb1) = (g.whole(a0), g.whole(a1), g.whole(b0), g.whole(b1));
        let ar = g.add_collective(CollectiveOp::AllReduceSum, ScalarType::F32, &[wa0, wa1], &[wa0, wa1], &[]).unwrap();
        let ag = g.add_collective(CollectiveOp::AllGather, ScalarType::F32, &[wa0, wa1], &[wb0, wb1], &[]).unwrap();
        let c0 = g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(b0), n], &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        let edges: Vec<(u32, u32)> = plan.edges().iter().map(|e| (e.from.0, e.to.0)).collect();
        assert_eq!(edges, vec![(p0.0, ar.0), (p1.0, ar.0), (ar.0, ag.0), (ag.0, c0.0)]);
        assert_eq!((g.node_device(p1), g.node_device(ar), g.node_devices(ag)), (Some(1), None, vec![0, 1]));
        assert_eq!(g.describe_node(ar), "node 2 (all_reduce over 2 ranks)");
        assert_eq!(g.param_name(ag, 3), "recv[1]");
    }

    #[test]
    fn bad_collectives_name_the_rank_the_buffer_and_the_device() {
        let (mut g, [a0, a1, b0, b1]) = two_devices();
        let v0 = g.add_view("a0_lo", a0, 0, 512).unwrap();
        let w = |g: &Graph, b| g.whole(b);
        let (wa0, wa1, wb0, wb1, wv0) = (w(&g, a0), w(&g, a1), w(&g, b0), w(&g, b1), w(&g, v0));
        let f32 = ScalarType::F32;
        let err = |g: &mut Graph, op, s: &[Slice], r: &[Slice]| g.add_collective(op, f32, s, r, &[]).unwrap_err().to_string();
        use CollectiveOp::*;
        assert!(err(&mut g, AllReduceSum, &[], &[]).contains("no rank"));
        assert!(err(&mut g, AllReduceSum, &[wa0, wa1], &[wa0]).contains("2 send extents but 1 receive"));
        let e = err(&mut g, AllReduceSum, &[wa0, wa1], &[wa1, wa0]);
        assert!(e.contains("node 0 (all_reduce): rank 0 sends from `a0` on device 0 but receives into `a1` on device 1"), "{e}");
        assert!(err(&mut g, AllReduceSum, &[wa0, wv0], &[wa0, wv0]).contains("ranks 0 and 1 are both on device 0"));
        let e = err(&mut g, AllReduceSum, &[wa0, Slice { len: 512, ..wa1 }], &[wa0, Slice { len: 512, ..wa1 }]);
        assert!(e.contains("rank 1 sends 512 bytes of `a1` but rank 0 sends 1024: the extents must agree across ranks"), "{e}");
        assert!(
            err(&mut g, AllGather, &[wa0, wa1], &[wa0, wa1]).contains("rank 0 receives 1024 bytes into `a0`; all_gather of 1024 bytes over 2 ranks gives 2048")
        );
        let e = err(&mut g, ReduceScatterSum, &[wa0, wa1], &[wa0, wa1]);
        assert!(e.contains("rank 0 receives 1024 bytes into `a0`; reduce_scatter of 1024 bytes over 2 ranks gives 512"), "{e}");
        let odd = Slice { len: 6, ..wa0 };
        assert!(err(&mut g, AllReduceSum, &[odd], &[odd]).contains("not a whole number of f32 elements"));
        let k = g.add_kernel(KernelSig::new("mix").buffer("out", Access::Write).buffer("inp", Access::Read)).unwrap();
        let e = g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a0), Arg::Whole(a1)], &[]).unwrap_err().to_string();
        assert!(e.contains("node 0 (mix): `a0` is on device 0 and `a1` on device 1: a kernel runs on one device"), "{e}");
        assert!(g.nodes().is_empty(), "nothing refused was recorded");
        let e = err(&mut g, AllGather, &[Slice { len: 1024, ..wb0 }, Slice { len: 1024, ..wb1 }], &[wb0, wb1]);
        assert!(e.contains("rank 0: send `b0` and receive `b0` overlap"), "in place only for an all-reduce: {e}");
        g.add_copy(wa0, wa1, &[]).expect("a copy between devices is a peer copy");
    }
}
