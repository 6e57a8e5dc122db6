//! Pure translation of a [`Plan`] into an [`AqlProgram`]: one queue per plan lane; kernel-dispatch
//! packets (copies and fills become the built-in `ostinato_copy` / `ostinato_fill` kernels); the
//! barrier bit for in-lane order; barrier-AND packets on the producers' completion signals for edges
//! that cross lanes; fence scopes from the hazards (an agent-scope release on a node whose stores a
//! later node reads and an agent-scope acquire on that reader, none where an edge is WAR or WAW only,
//! a system-scope acquire where a node reads what the host or the previous replay wrote, a
//! system-scope release only at the end, where the host reads); one completion signal per replay.
//!
//! Visibility follows the transitive RAW relation, not the reduced edges: a reader may see a write
//! whose edge the reduction dropped because a WAR or WAW path implies the order (docs/hsa.md). The
//! program is first built sufficient, then every barrier bit, dependency and scope the rest implies is
//! removed ([`crate::order`]): what remains is each necessary.

use ostinato::frontier::AccessFrontier;
use ostinato::{Access, Arg, NodeId, NodeOp, Plan, RootAccess};

use crate::error::HsaError;
use crate::order::{unmet, Needs};
use crate::program::{AqlProgram, ArgValue, Callee, Dispatch, Packet, PacketOp, Scope, SignalId};

/// The copy and fill kernels' work-group size.
pub const HELPER_WORKGROUP: u32 = 256;

/// Programs with more packets than this keep the sufficient fences (the minimizing pass is quadratic
/// in packets per candidate); they are correct, with some redundant barriers or fences.
pub const MINIMIZE_MAX_PACKETS: usize = 600;

/// Lowers `plan`; an error names a node AQL cannot run as recorded (a collective, a geometry past
/// the packet's fields).
pub fn lower(plan: &Plan) -> Result<AqlProgram, HsaError> {
    let dispatches = dispatches(plan)?;
    let needs = needs(plan);
    let program = sufficient(plan, dispatches, &needs);
    debug_assert_eq!(unmet(&program, &needs), None, "the sufficient program meets every need");
    let total: usize = program.queues.iter().map(Vec::len).sum();
    Ok(if total <= MINIMIZE_MAX_PACKETS { minimize(program, &needs) } else { program })
}

/// Each node as a kernel dispatch.
pub fn dispatches(plan: &Plan) -> Result<Vec<Dispatch>, HsaError> {
    let g = plan.graph();
    let ptr = |s: &ostinato::Slice| {
        let (root, start, _) = g.root_extent(*s);
        ArgValue::Pointer { root, offset: start }
    };
    let mut out = Vec::with_capacity(plan.node_count());
    for (i, node) in g.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        let unsupported = |reason: String| HsaError::Unsupported { what: g.describe_node(id), reason };
        let d = match &node.op {
            NodeOp::Kernel { kernel, launch, args } => {
                let args = args
                    .iter()
                    .map(|a| match a {
                        Arg::Buffer(s) => ptr(s),
                        Arg::Scalar(v) => ArgValue::Bits(v.bits),
                        Arg::Slot(s) => ArgValue::Slot(*s),
                        Arg::Whole(b) => ptr(&g.whole(*b)),
                    })
                    .collect();
                let (dimensions, workgroup_size, grid_size) = geometry(launch.grid, launch.block).map_err(unsupported)?;
                Dispatch { node: id, callee: Callee::Kernel(*kernel), dimensions, workgroup_size, grid_size, dynamic_group_bytes: launch.shared_bytes, args }
            }
            NodeOp::Copy { src, dst } => {
                let (dimensions, workgroup_size, grid_size) = helper_geometry(src.len.div_ceil(4));
                let args = vec![ptr(dst), ptr(src), ArgValue::Bits(src.len)];
                Dispatch { node: id, callee: Callee::Copy, dimensions, workgroup_size, grid_size, dynamic_group_bytes: 0, args }
            }
            NodeOp::Fill { dst, value } => {
                let (dimensions, workgroup_size, grid_size) = helper_geometry(dst.len / 4);
                let args = vec![ptr(dst), ArgValue::Bits(*value as u64), ArgValue::Bits(dst.len / 4)];
                Dispatch { node: id, callee: Callee::Fill, dimensions, workgroup_size, grid_size, dynamic_group_bytes: 0, args }
            }
            NodeOp::Collective { .. } => return Err(unsupported("the HSA backend has no collective (RCCL) lowering".into())),
        };
        out.push(d);
    }
    Ok(out)
}

type Geometry = (u16, [u16; 3], [u32; 3]);

/// A launch's blocks × threads as AQL's work-group size and grid size in work-items.
fn geometry(grid: [u32; 3], block: [u32; 3]) -> Result<Geometry, String> {
    let mut wg = [0u16; 3];
    let mut size = [0u32; 3];
    for d in 0..3 {
        wg[d] = u16::try_from(block[d]).map_err(|_| format!("block dimension {d} is {}, past AQL's 16-bit work-group size", block[d]))?;
        size[d] = grid[d]
            .checked_mul(block[d])
            .ok_or_else(|| format!("grid dimension {d}: {} blocks of {} threads pass AQL's 32-bit grid size", grid[d], block[d]))?;
    }
    let dimensions = if size[2] > 1 || wg[2] > 1 {
        3
    } else if size[1] > 1 || wg[1] > 1 {
        2
    } else {
        1
    };
    Ok((dimensions, wg, size))
}

/// The copy and fill kernels' geometry over `words` 4-byte words: 256-item groups, at most 1,024.
pub fn helper_geometry(words: u64) -> Geometry {
    let groups = words.div_ceil(HELPER_WORKGROUP as u64).clamp(1, 1024) as u32;
    (1, [HELPER_WORKGROUP as u16, 1, 1], [groups * HELPER_WORKGROUP, 1, 1])
}

/// What the plan needs: its edges, the (last writer, reader) pairs of every byte read, and the nodes
/// that read bytes no earlier node writes.
pub fn needs(plan: &Plan) -> Needs {
    let g = plan.graph();
    let mut frontier = AccessFrontier::new(g.buffers().len());
    let mut raw = Vec::new();
    let mut external_reads = Vec::new();
    let mut acc: Vec<RootAccess> = Vec::new();
    for v in 0..plan.node_count() {
        let node = NodeId(v as u32);
        acc.clear();
        g.for_each_access(node, |a| acc.push(a));
        let mut external = false;
        for a in acc.iter().filter(|a| a.access.reads()) {
            let read = RootAccess { access: Access::Read, ..*a };
            let mut covered = 0;
            frontier.conflicts(&read, |w, lo, hi| {
                raw.push((NodeId(w), node));
                covered += hi - lo;
            });
            external |= covered < a.end - a.start;
        }
        if external {
            external_reads.push(node);
        }
        frontier.record(v as u32, &acc);
    }
    raw.sort_unstable();
    raw.dedup();
    Needs { edges: plan.edges().iter().map(|e| (e.from, e.to)).collect(), raw, external_reads }
}

/// A program that meets every need, before the redundant parts are removed.
fn sufficient(plan: &Plan, dispatches: Vec<Dispatch>, needs: &Needs) -> AqlProgram {
    let lanes = plan.lanes();
    let nq = lanes.count().max(1);
    let mut queues: Vec<Vec<Packet>> = vec![Vec::new(); nq];
    let mut signals = 0u32;
    let mut new_signal = || {
        signals += 1;
        SignalId(signals - 1)
    };
    let barrier_and = |deps: Vec<SignalId>, barrier: bool, completion: Option<SignalId>| Packet {
        op: PacketOp::BarrierAnd { deps },
        barrier,
        acquire: Scope::None,
        release: Scope::None,
        completion,
    };
    // The gate: queues 1.. start once queue 0 has passed the previous replay's last packet.
    if nq > 1 {
        let start = new_signal();
        queues[0].push(barrier_and(Vec::new(), false, Some(start)));
        for q in queues.iter_mut().skip(1) {
            q.push(barrier_and(vec![start], false, None));
        }
    }
    let mut at: Vec<Option<(usize, usize)>> = vec![None; plan.node_count()];
    let producers: std::collections::HashSet<NodeId> = needs.raw.iter().map(|r| r.0).collect();
    let consumers: std::collections::HashSet<NodeId> = needs.raw.iter().map(|r| r.1).collect();
    let external: std::collections::HashSet<NodeId> = needs.external_reads.iter().copied().collect();
    for &v in plan.order() {
        let q = lanes.lane_of(v);
        let mut deps = Vec::new();
        let mut in_lane = false;
        for &p in plan.preds(v) {
            let p = NodeId(p);
            let Some((pq, pi)) = at[p.index()] else { continue };
            if pq == q {
                in_lane = true;
                continue;
            }
            let c = *queues[pq][pi].completion.get_or_insert_with(&mut new_signal);
            deps.push(c);
        }
        for chunk in deps.chunks(crate::abi::barrier_and::DEP_SIGNALS) {
            queues[q].push(barrier_and(chunk.to_vec(), false, None));
        }
        let acquire = if external.contains(&v) {
            Scope::System
        } else if consumers.contains(&v) {
            Scope::Agent
        } else {
            Scope::None
        };
        let release = if producers.contains(&v) { Scope::Agent } else { Scope::None };
        at[v.index()] = Some((q, queues[q].len()));
        queues[q].push(Packet { op: PacketOp::Dispatch { node: v }, barrier: in_lane, acquire, release, completion: None });
    }
    // Each other queue ends with a barrier packet whose completion says the whole queue completed;
    // queue 0 ends with the replay's last packet: it waits for them and releases to the system.
    let mut tails = Vec::new();
    for q in queues.iter_mut().skip(1) {
        let s = new_signal();
        tails.push(s);
        q.push(barrier_and(Vec::new(), true, Some(s)));
    }
    let done = new_signal();
    let chunks: Vec<Vec<SignalId>> = tails.chunks(crate::abi::barrier_and::DEP_SIGNALS).map(<[SignalId]>::to_vec).collect();
    let (last, first) = chunks.split_last().map_or((Vec::new(), &[][..]), |(l, f)| (l.clone(), f));
    for c in first {
        queues[0].push(barrier_and(c.clone(), false, None));
    }
    let mut terminal = barrier_and(last, true, Some(done));
    terminal.release = Scope::System;
    queues[0].push(terminal);
    AqlProgram { dispatches, queues, signals, done }
}

/// Removes every dependency, barrier bit and fence scope the rest of the program implies, then the
/// barrier-AND packets left doing nothing and the signals nobody waits for.
pub fn minimize(mut program: AqlProgram, needs: &Needs) -> AqlProgram {
    let holds = |p: &AqlProgram| unmet(p, needs).is_none();
    // Whole barrier-AND packets first (a queue's tail, a wait another path implies), each with its
    // completion signal removed from whatever waits for it.
    for q in 0..program.queues.len() {
        for i in (0..program.queues[q].len()).rev() {
            let p = &program.queues[q][i];
            if !matches!(p.op, PacketOp::BarrierAnd { .. }) || p.completion == Some(program.done) {
                continue;
            }
            let mut trial = program.clone();
            let gone = trial.queues[q].remove(i).completion;
            for packet in trial.queues.iter_mut().flatten() {
                if let PacketOp::BarrierAnd { deps } = &mut packet.op {
                    deps.retain(|d| Some(*d) != gone);
                }
            }
            if holds(&trial) {
                program = trial;
            }
        }
    }
    let places: Vec<(usize, usize)> = program.packets().map(|(q, i, _)| (q, i)).collect();
    for &(q, i) in places.iter().rev() {
        let n = match &program.queues[q][i].op {
            PacketOp::BarrierAnd { deps } => deps.len(),
            PacketOp::Dispatch { .. } => 0,
        };
        for d in (0..n).rev() {
            let mut trial = program.clone();
            if let PacketOp::BarrierAnd { deps } = &mut trial.queues[q][i].op {
                deps.remove(d);
            }
            if holds(&trial) {
                program = trial;
            }
        }
    }
    for &(q, i) in places.iter().rev() {
        if program.queues[q][i].barrier {
            let mut trial = program.clone();
            trial.queues[q][i].barrier = false;
            if holds(&trial) {
                program = trial;
            }
        }
    }
    for &(q, i) in places.iter().rev() {
        while program.queues[q][i].acquire != Scope::None {
            let mut trial = program.clone();
            trial.queues[q][i].acquire = trial.queues[q][i].acquire.weaker();
            if !holds(&trial) {
                break;
            }
            program = trial;
        }
    }
    for &(q, i) in &places {
        while program.queues[q][i].release != Scope::None {
            let mut trial = program.clone();
            trial.queues[q][i].release = trial.queues[q][i].release.weaker();
            if !holds(&trial) {
                break;
            }
            program = trial;
        }
    }
    tidy(program, needs)
}

/// Drops barrier-AND packets that do nothing (no dependency, no barrier bit, no fence, no signal
/// anyone waits for), and renumbers the signals that remain in use.
fn tidy(mut program: AqlProgram, needs: &Needs) -> AqlProgram {
    let waited = |p: &AqlProgram| -> std::collections::HashSet<SignalId> {
        p.packets()
            .flat_map(|(_, _, pk)| match &pk.op {
                PacketOp::BarrierAnd { deps } => deps.clone(),
                PacketOp::Dispatch { .. } => Vec::new(),
            })
            .chain([p.done])
            .collect()
    };
    let used = waited(&program);
    for q in &mut program.queues {
        for p in q.iter_mut() {
            if p.completion.is_some_and(|c| !used.contains(&c)) {
                p.completion = None;
            }
        }
    }
    for q in 0..program.queues.len() {
        let mut i = 0;
        while i < program.queues[q].len() {
            let p = &program.queues[q][i];
            let idle = matches!(&p.op, PacketOp::BarrierAnd { deps } if deps.is_empty())
                && !p.barrier
                && p.acquire == Scope::None
                && p.release == Scope::None
                && p.completion.is_none();
            if idle {
                let mut trial = program.clone();
                trial.queues[q].remove(i);
                if unmet(&trial, needs).is_none() {
                    program = trial;
                    continue;
                }
            }
            i += 1;
        }
    }
    // Renumber: signals in order of first appearance.
    let mut map = std::collections::HashMap::new();
    let mut next = 0u32;
    let mut id = |s: SignalId| {
        *map.entry(s).or_insert_with(|| {
            next += 1;
            SignalId(next - 1)
        })
    };
    for q in &mut program.queues {
        for p in q.iter_mut() {
            if let Some(c) = p.completion {
                p.completion = Some(id(c));
            }
        }
    }
    program.done = id(program.done);
    for q in &mut program.queues {
        for p in q.iter_mut() {
            if let PacketOp::BarrierAnd { deps } = &mut p.op {
                for d in deps.iter_mut() {
                    *d = id(*d);
                }
            }
        }
    }
    program.signals = next;
    program
}
