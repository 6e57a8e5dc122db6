//! What an AQL program guarantees in every schedule the HSA queue semantics allow, and whether that
//! covers what a plan needs. The lowering uses it to drop every barrier bit, dependency signal and
//! fence scope the rest of the program already implies (so each one left is necessary: the mutation
//! tests prove the simulator catches the loss of any one).
//!
//! The semantics (`hsa.h`, HSA 1.2 §2.9): packets of a queue launch in order; a packet with the
//! barrier bit launches only once every earlier packet of its queue completed; a barrier-AND packet
//! completes once all its dependency signals are 0 and blocks its queue until then; an acquire fence
//! (applied when a packet enters its active phase, or for a barrier-AND when its dependencies are met)
//! makes everything released before it at that scope visible to every dispatch that becomes active
//! after it, on any queue of the agent; a release fence (when a packet completes, before its signal)
//! publishes the stores of every dispatch that finished its active phase before it. The previous
//! replay ends with a barrier-AND on queue 0 (`PREV` below), which blocks that queue.

use ostinato::NodeId;

use crate::program::{AqlProgram, PacketOp, Scope};

/// What a plan needs from its AQL program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Every plan edge (from, to): `from` completes before `to` launches.
    pub edges: Vec<(NodeId, NodeId)>,
    /// (writer, reader): `reader` reads bytes whose last writer in the replay is `writer`, so the
    /// writer's stores must be released and acquired (agent scope) before the reader runs.
    pub raw: Vec<(NodeId, NodeId)>,
    /// Nodes that read bytes no earlier node of the replay writes (the host's or the previous
    /// replay's): a system-scope acquire must precede them.
    pub external_reads: Vec<NodeId>,
}

/// A set of packets as a bitset.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn has(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    fn union(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= *b;
        }
    }
}

/// The knowledge of every packet: which packets are certainly complete when it launches (`k`), and
/// before its release fence (`r`).
pub struct Knowledge {
    /// Packet ids: `PREV` is 0, the previous replay's tail of queue q ≥ 1 is q, the program's packet
    /// (q, i) is `ids[q][i]`.
    pub ids: Vec<Vec<usize>>,
    k: Vec<Bits>,
    r: Vec<Bits>,
    node_packet: Vec<Option<usize>>,
    queue_of: Vec<(usize, usize)>,
}

/// The previous replay's final packet (a barrier-AND on queue 0).
pub const PREV: usize = 0;

impl Knowledge {
    /// Computes the knowledge of `program`; `None` when its dependencies form a cycle (a packet waits
    /// for a signal only a later packet of its own chain can give).
    pub fn of(program: &AqlProgram) -> Option<Knowledge> {
        let nq = program.queues.len();
        let mut ids = Vec::with_capacity(nq);
        let mut queue_of = vec![(0, 0); nq];
        let mut next = nq.max(1);
        for (q, ps) in program.queues.iter().enumerate() {
            ids.push((0..ps.len()).map(|i| next + i).collect::<Vec<_>>());
            queue_of.extend((0..ps.len()).map(|i| (q, i)));
            next += ps.len();
        }
        let n = next;
        let mut producer = vec![None; program.signals as usize];
        let mut node_packet = vec![None; program.dispatches.len()];
        for (q, i, p) in program.packets() {
            if let Some(s) = p.completion {
                producer[s.0 as usize] = Some(ids[q][i]);
            }
            if let PacketOp::Dispatch { node } = p.op {
                node_packet[node.index()] = Some(ids[q][i]);
            }
        }
        let empty = Bits::new(n);
        let (mut k, mut c, mut r) = (vec![empty.clone(); n], vec![empty.clone(); n], vec![empty.clone(); n]);
        // Virtual packets: PREV, and each queue's previous tail.
        for (v, cv) in c.iter_mut().enumerate().take(nq.max(1)) {
            cv.set(v);
        }
        let mut done = vec![false; n];
        done.iter_mut().take(nq.max(1)).for_each(|d| *d = true);
        let mut cursor = vec![0usize; nq];
        let mut progress = true;
        while progress {
            progress = false;
            for q in 0..nq {
                while cursor[q] < program.queues[q].len() {
                    let i = cursor[q];
                    let p = &program.queues[q][i];
                    let deps: &[crate::program::SignalId] = match &p.op {
                        PacketOp::BarrierAnd { deps } => deps,
                        PacketOp::Dispatch { .. } => &[],
                    };
                    let producers: Option<Vec<usize>> = deps.iter().map(|d| producer.get(d.0 as usize).copied().flatten()).collect();
                    let producers = producers?;
                    if !producers.iter().all(|&x| done[x]) {
                        break;
                    }
                    let me = ids[q][i];
                    // The packet before it in the queue: the previous replay's last one for i = 0.
                    let prev = if i == 0 {
                        if q == 0 {
                            PREV
                        } else {
                            q
                        }
                    } else {
                        ids[q][i - 1]
                    };
                    let prev_is_barrier_and = i == 0 || matches!(program.queues[q][i - 1].op, PacketOp::BarrierAnd { .. });
                    let mut kk = k[prev].clone();
                    if prev_is_barrier_and {
                        kk.union(&c[prev]);
                    }
                    if p.barrier {
                        kk.union(&c[if q == 0 { PREV } else { q }]);
                        for j in 0..i {
                            kk.union(&c[ids[q][j]]);
                        }
                    }
                    let mut rr = kk.clone();
                    for &x in &producers {
                        rr.union(&c[x]);
                    }
                    let mut cc = rr.clone();
                    cc.set(me);
                    if matches!(p.op, PacketOp::Dispatch { .. }) {
                        rr = kk.clone();
                    }
                    k[me] = kk;
                    r[me] = rr;
                    c[me] = cc;
                    done[me] = true;
                    cursor[q] += 1;
                    progress = true;
                }
            }
        }
        if (0..nq).any(|q| cursor[q] < program.queues[q].len()) {
            return None;
        }
        Some(Knowledge { ids, k, r, node_packet, queue_of })
    }

    /// Whether packet `a` is certainly complete when packet `b` launches.
    pub fn complete_before_launch(&self, a: usize, b: usize) -> bool {
        self.k[b].has(a)
    }

    /// The packet of node `node`'s dispatch.
    pub fn packet_of(&self, node: NodeId) -> Option<usize> {
        self.node_packet.get(node.index()).copied().flatten()
    }

    fn packet<'a>(&self, program: &'a AqlProgram, id: usize) -> Option<&'a crate::program::Packet> {
        let (q, i) = *self.queue_of.get(id)?;
        if id < program.queues.len().max(1) {
            return None;
        }
        program.queues.get(q)?.get(i)
    }

    /// The packets whose acquire fence certainly precedes dispatch `v`'s active phase: itself, the
    /// earlier packets of its queue (launched in order) and every packet complete at its launch.
    fn acquire_points(&self, program: &AqlProgram, v: usize) -> Vec<usize> {
        let (q, i) = self.queue_of[v];
        let mut out: Vec<usize> = self.ids[q][..=i].to_vec();
        // A packet of another queue launched (its acquire done) once any later packet of its queue
        // completed: queues launch in order.
        for (_, ids) in self.ids.iter().enumerate().filter(|(qq, _)| *qq != q) {
            if let Some(last) = ids.iter().rposition(|&x| self.k[v].has(x)) {
                out.extend_from_slice(&ids[..=last]);
            }
        }
        let _ = program;
        out
    }

    /// For every packet with an acquire fence: the dispatches whose stores are certainly released
    /// before that acquire (a packet complete before it released them, its own or, cumulatively,
    /// those complete before its release).
    fn released_before_acquires(&self, program: &AqlProgram) -> Vec<Option<Bits>> {
        let n = self.queue_of.len();
        let mut released: Vec<Option<Bits>> = vec![None; n];
        for (p, slot) in released.iter_mut().enumerate() {
            if self.packet(program, p).is_some_and(|pp| pp.release != Scope::None) {
                let mut b = self.r[p].clone();
                b.set(p);
                *slot = Some(b);
            }
        }
        (0..n)
            .map(|q| {
                let qp = self.packet(program, q)?;
                if qp.acquire == Scope::None {
                    return None;
                }
                let before = if matches!(qp.op, PacketOp::Dispatch { .. }) { &self.k[q] } else { &self.r[q] };
                let mut cov = Bits::new(n);
                for (p, rel) in released.iter().enumerate() {
                    if let Some(rel) = rel.as_ref().filter(|_| before.has(p)) {
                        cov.union(rel);
                    }
                }
                Some(cov)
            })
            .collect()
    }

    /// Whether the stores of dispatch packet `u` are certainly visible (at agent scope) to dispatch `v`.
    fn visible(&self, program: &AqlProgram, covered: &[Option<Bits>], u: usize, v: usize) -> bool {
        self.acquire_points(program, v).into_iter().any(|q| covered[q].as_ref().is_some_and(|c| c.has(u)))
    }

    /// Whether a system-scope acquire certainly precedes dispatch `v`'s active phase.
    fn system_acquired(&self, program: &AqlProgram, v: usize) -> bool {
        self.acquire_points(program, v).into_iter().any(|q| self.packet(program, q).is_some_and(|p| p.acquire == Scope::System))
    }
}

/// The first need of `needs` that `program` does not certainly meet, in words; `None` when it meets
/// them all.
pub fn unmet(program: &AqlProgram, needs: &Needs) -> Option<String> {
    let Some(kn) = Knowledge::of(program) else { return Some("the dependency signals form a cycle".into()) };
    let pk = |n: NodeId| kn.packet_of(n);
    for &(u, v) in &needs.edges {
        match (pk(u), pk(v)) {
            (Some(a), Some(b)) if kn.complete_before_launch(a, b) => {}
            _ => return Some(format!("edge n{u} -> n{v}: n{u} is not certainly complete when n{v} launches")),
        }
    }
    let covered = if needs.raw.is_empty() { Vec::new() } else { kn.released_before_acquires(program) };
    for &(u, v) in &needs.raw {
        match (pk(u), pk(v)) {
            (Some(a), Some(b)) if kn.visible(program, &covered, a, b) => {}
            _ => return Some(format!("n{v} reads what n{u} wrote without a release and acquire between them")),
        }
    }
    for &v in &needs.external_reads {
        match pk(v) {
            Some(b) if kn.system_acquired(program, b) => {}
            _ => return Some(format!("n{v} reads bytes the host or the previous replay wrote without a system-scope acquire before it")),
        }
    }
    // Nothing of this replay acts before the previous replay completed: a dispatch launches after
    // it, a barrier-AND completes (applies its fences, lets its queue go on) after it.
    for (q, i, p) in program.packets() {
        let id = kn.ids[q][i];
        let known = if matches!(p.op, PacketOp::Dispatch { .. }) { &kn.k[id] } else { &kn.r[id] };
        if !known.has(PREV) {
            return Some(format!("packet {i} of queue {q} may act before the previous replay completed"));
        }
    }
    // The replay's completion: every packet complete, every store released to the system.
    let done = program.packets().find(|(_, _, p)| p.completion == Some(program.done));
    let Some((q, i, last)) = done else { return Some("no packet signals the replay's completion".into()) };
    let id = kn.ids[q][i];
    for (qq, ids) in kn.ids.iter().enumerate() {
        for (j, &x) in ids.iter().enumerate() {
            if x != id && !kn.r[id].has(x) {
                return Some(format!("packet {j} of queue {qq} may still run when the replay signals completion"));
            }
        }
    }
    if last.release != Scope::System {
        return Some("the replay's last packet does not release to the system: the host may read stale bytes".into());
    }
    None
}
