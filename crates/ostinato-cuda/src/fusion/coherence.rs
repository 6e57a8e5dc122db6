//! Fused bodies and the non-coherent path. A fused group is one kernel; the PTX ISA allows `.nc` loads
//! (`__ldg`), `ldu`, texture and surface reads only of memory that is read-only for the kernel's whole
//! lifetime. So a body that reads a param through that path may not follow, in one fused kernel, a body
//! that writes those bytes: it could read them stale from the non-coherent cache. Unfused, a kernel
//! boundary makes the write visible; fused, nothing does.

use std::sync::Arc;

use ostinato::{Arg, NodeId, NodeOp, Plan};

use super::{Fusable, Group};
use crate::module::FusionBody;

/// A non-coherent read after a write in one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The node whose body reads through the non-coherent path.
    pub reader: NodeId,
    /// Its param, and the instruction.
    pub param: String,
    pub instruction: String,
    /// A node of the group that writes those bytes before it (or side by side with it).
    pub writer: NodeId,
}

impl Conflict {
    /// The refusal under `fusion = on`, naming both nodes.
    pub fn describe(&self, plan: &Plan) -> String {
        let g = plan.graph();
        format!(
            "{} reads param `{}` through the non-coherent path (`{}`) and {}, fused before it into one kernel, writes those bytes: \
             the PTX ISA allows that path only on memory read-only for the whole kernel. Fuse with `auto` (which leaves such a node \
             unfused) or read the param with plain loads",
            g.describe_node(self.reader),
            self.param,
            self.instruction,
            g.describe_node(self.writer)
        )
    }
}

/// Bytes of one root allocation: (root, start, end).
type Extent = (u32, u64, u64);

/// The extent body param `p` of node `v` covers: a kernel's arg, or the copy and fill bodies' `dst`
/// (param 0) and `src` (param 1). `None`: not a buffer.
fn body_extent(plan: &Plan, v: NodeId, p: usize) -> Option<Extent> {
    let g = plan.graph();
    let slice = match (&g.node(v).op, p) {
        (NodeOp::Kernel { args, .. }, p) => match args.get(p)? {
            Arg::Buffer(s) => *s,
            _ => return None,
        },
        (NodeOp::Copy { dst, .. } | NodeOp::Fill { dst, .. }, 0) => *dst,
        (NodeOp::Copy { src, .. }, 1) => *src,
        _ => return None,
    };
    let (root, start, end) = g.root_extent(slice);
    Some((root.0, start, end))
}

/// The first conflict in `group`: a body's non-coherent read of bytes another member writes, where
/// that member runs before it in its lane or in another lane of the group.
pub fn conflict(plan: &Plan, group: &Group, bodies: &[Option<(&Arc<FusionBody>, Fusable)>]) -> Option<Conflict> {
    let g = plan.graph();
    let writes = |u: NodeId| g.accesses(u).into_iter().filter(|a| a.access.writes()).map(|a| (a.root.0, a.start, a.end)).collect::<Vec<_>>();
    for (li, lane) in group.lanes.iter().enumerate() {
        for (j, &v) in lane.iter().enumerate() {
            let Some((body, _)) = bodies[v.index()] else { continue };
            let before: Vec<NodeId> = group.lanes.iter().enumerate().flat_map(|(lj, l)| if lj == li { l[..j].to_vec() } else { l.clone() }).collect();
            // (param name, instruction, extent or None for anything).
            let mut reads: Vec<(String, &str, Option<Extent>)> = Vec::new();
            for (p, ins) in &body.body.noncoherent {
                let name = g.param_name(v, *p);
                reads.push((name, ins, body_extent(plan, v, *p)));
            }
            if let Some(ins) = &body.body.noncoherent_unknown {
                reads.push(("(an address it does not derive from a param)".into(), ins, None));
            }
            for (param, ins, extent) in reads {
                let hit = before.iter().copied().find(|&u| {
                    writes(u).iter().any(|&(r, s, e)| match extent {
                        Some((root, start, end)) => r == root && s < end && start < e,
                        None => true,
                    })
                });
                if let Some(writer) = hit {
                    return Some(Conflict { reader: v, param, instruction: ins.to_string(), writer });
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::{groups, FuseKey, FusionMode};
    use ostinato::{Access, Graph, KernelSig, Launch, Scalar, ScalarType};

    /// The bodies of ostinato-cuda-code's tests/fixtures/fusion_ldg.cu as fused (their golden PTX).
    const PTX: &str = include_str!("../../../ostinato-cuda-code/tests/fixtures/fusion_ldg.ptx");

    fn body(entry: &str) -> Arc<FusionBody> {
        Arc::new(FusionBody { source: Arc::from("fusion_ldg.cu"), entry: entry.into(), body: ostinato_cuda_code::ptx::fused_body(PTX, entry).unwrap() })
    }

    /// `bump` writes x; then `reader` reads x into y (a 1-block chain).
    fn chain(reader: &str) -> (Plan, Vec<Arc<FusionBody>>) {
        let mut g = Graph::new();
        let (x, y) = (g.add_buffer("x", 1024).unwrap(), g.add_buffer("y", 1024).unwrap());
        let bump = g.add_kernel(KernelSig::new("bump").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let read = g.add_kernel(KernelSig::new(reader).buffer("out", Access::Write).buffer("in", Access::Read).scalar("n", ScalarType::U32)).unwrap();
        let n = ostinato::Arg::Scalar(Scalar::u32(256));
        g.add_launch(bump, Launch::linear(1, 256), &[ostinato::Arg::Whole(x), n], &[]).unwrap();
        g.add_launch(read, Launch::linear(1, 256), &[ostinato::Arg::Whole(y), ostinato::Arg::Whole(x), n], &[]).unwrap();
        (Plan::compile(&g).unwrap(), vec![body("bump"), body(reader)])
    }

    fn check(reader: &str) -> Option<Conflict> {
        let (plan, b) = chain(reader);
        let key = FuseKey { block: [256, 1, 1], grid: [1, 1, 1], source: 1 };
        let fusable = vec![Some(Fusable { key, uses_shared: false, alone: false }); 2];
        let bodies: Vec<Option<(&Arc<FusionBody>, Fusable)>> = b.iter().map(|b| Some((b, Fusable { key, uses_shared: false, alone: false }))).collect();
        let gs = groups(&plan, &fusable, FusionMode::Auto);
        assert_eq!(gs.len(), 1, "the chain is one group");
        conflict(&plan, &gs[0], &bodies)
    }

    #[test]
    fn an_ldg_read_of_what_an_earlier_body_writes_is_a_conflict_naming_both_nodes() {
        let (plan, _) = chain("ldg_scale");
        let c = check("ldg_scale").expect("conflict");
        assert_eq!((c.reader, c.writer, c.param.as_str()), (NodeId(1), NodeId(0), "in"));
        assert!(c.instruction.starts_with("ld.global.nc"), "{c:?}");
        let msg = c.describe(&plan);
        assert!(msg.contains("node 1 (ldg_scale)") && msg.contains("node 0 (bump)") && msg.contains("`in`"), "{msg}");
        // Plain loads are coherent within the kernel (after the barrier the edge puts between them).
        assert_eq!(check("plain_scale"), None);
    }
}
