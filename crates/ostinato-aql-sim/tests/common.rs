//! Shared by the simulator's tests: a program on the HSA backend over the simulator, and the serial
//! oracle, with the same slot patched before every replay; both say what every node wrote in every
//! replay (the bytes of its write extents just after it ran) and every buffer's final bytes.

#![allow(dead_code)]

use std::sync::Arc;

use ostinato::{allocate_all, bind_builtins, read_roots, write_inits, Backend, BufferId, Exec, NodeId, NodeOp, Plan, Scalar};
use ostinato_aql_sim::{SimOptions, Simulator};
use ostinato_host::{CallArg, HostMemory};
use ostinato_hsa::{AqlProgram, HsaBackend, HsaError};
use ostinato_testkit::random_graphs::RandomProgram;

pub type Buffers = Vec<(BufferId, Vec<u8>)>;

/// Per replay, per node: the bytes of each of its write extents just after it ran.
pub type NodeWrites = Vec<Vec<Vec<Vec<u8>>>>;

/// What a run shows: final buffers, what each node wrote, and (simulated runs) the orderings the
/// schedule broke.
pub struct Run {
    pub buffers: Buffers,
    pub writes: NodeWrites,
    pub broken: Vec<String>,
}

/// The salt for replay `r` (patched before every replay).
pub fn salt(r: usize) -> Scalar {
    Scalar::u32(0x9E37_79B9u32.wrapping_mul(r as u32 + 1))
}

/// Node `v`'s write extents: (root, start, end).
fn writes(plan: &Plan, v: NodeId) -> Vec<(BufferId, u64, u64)> {
    plan.graph().accesses(v).iter().filter(|a| a.access.writes()).map(|a| (a.root, a.start, a.end)).collect()
}

/// The serial oracle: the plan's order on host memory, node by node, through the host twins.
pub fn oracle(plan: &Plan, prog: &RandomProgram, replays: usize) -> Run {
    let g = plan.graph();
    let memory: Vec<Arc<HostMemory>> =
        g.buffers().iter().enumerate().map(|(i, b)| Arc::new(HostMemory::zeroed(if b.root.index() == i { b.size } else { 0 }))).collect();
    let sizes: Vec<u64> = g.buffers().iter().map(|b| b.size).collect();
    ostinato::for_each_init_piece::<()>(&prog.inits, &sizes, |b, off, bytes| {
        memory[b.index()].write(off, bytes);
        Ok(())
    })
    .unwrap();
    let mut log = Vec::new();
    for r in 0..replays {
        let mut per_node = vec![Vec::new(); plan.node_count()];
        for &v in plan.order() {
            let ext = |s: &ostinato::Slice| g.root_extent(*s);
            match &g.node(v).op {
                NodeOp::Kernel { kernel, launch, args } => {
                    let sig = g.kernel(*kernel);
                    let twin = ostinato_host::builtins::lookup(&sig.name).unwrap();
                    let call: Vec<CallArg> = sig
                        .params
                        .iter()
                        .zip(args)
                        .map(|(p, a)| match (&p.kind, a) {
                            (ostinato::ParamKind::Buffer(access), ostinato::Arg::Buffer(s)) => {
                                let (root, start, end) = ext(s);
                                CallArg::Buffer { memory: root.index(), start, len: end - start, access: *access }
                            }
                            (_, ostinato::Arg::Scalar(x)) => CallArg::Scalar(*x),
                            (_, ostinato::Arg::Slot(_)) => CallArg::Scalar(salt(r)),
                            _ => unreachable!(),
                        })
                        .collect();
                    twin.call(&call, &memory, *launch).unwrap();
                }
                NodeOp::Copy { src, dst } => {
                    let ((rs, ss, es), (rd, sd, _)) = (ext(src), ext(dst));
                    let mut bytes = vec![0u8; (es - ss) as usize];
                    memory[rs.index()].read(ss, &mut bytes);
                    memory[rd.index()].write(sd, &bytes);
                }
                NodeOp::Fill { dst, value } => {
                    let (rd, sd, ed) = ext(dst);
                    let bytes: Vec<u8> = (0..ed - sd).map(|i| value.to_le_bytes()[i as usize % 4]).collect();
                    memory[rd.index()].write(sd, &bytes);
                }
                NodeOp::Collective { .. } => unreachable!(),
            }
            per_node[v.index()] = writes(plan, v)
                .into_iter()
                .map(|(root, start, end)| {
                    let mut b = vec![0u8; (end - start) as usize];
                    memory[root.index()].read(start, &mut b);
                    b
                })
                .collect();
        }
        log.push(per_node);
    }
    let finals = g.buffers().iter().enumerate().filter(|(i, b)| b.root.index() == *i).map(|(i, _)| (BufferId(i as u32), memory[i].to_vec())).collect();
    Run { buffers: finals, writes: log, broken: Vec::new() }
}

/// The simulator's result: `replays` replays submitted back to back (two in flight), the slot
/// patched before each; `mutate` may change the lowered program before the exec encodes it.
pub fn simulated(plan: &Plan, prog: &RandomProgram, replays: usize, options: SimOptions, mutate: Option<&dyn Fn(&mut AqlProgram)>) -> Result<Run, HsaError> {
    let sim = Arc::new(Simulator::new(options));
    sim.record_dispatches();
    let backend = HsaBackend::open(sim.clone(), None)?;
    let kernels = bind_builtins(&backend, plan)?;
    let mut exec = match mutate {
        None => backend.instantiate(plan, kernels, allocate_all(plan))?,
        Some(m) => ostinato_hsa::HsaExec::with_program(&backend, plan, kernels, allocate_all(plan), m)?,
    };
    write_inits(&mut exec, &prog.inits)?;
    for r in 0..replays {
        exec.set_slot(prog.salt_slot, salt(r))?;
        exec.replay()?;
    }
    exec.wait()?;
    let finals = read_roots(&mut exec)?;
    let records = sim.take_records();
    let mut log = Vec::new();
    let mut broken = Vec::new();
    let record = |r: usize, v: NodeId| records.iter().filter(|d| d.kernarg_address == exec.kernarg_address(r % 2, v)).nth(r / 2);
    let span = |r: usize| -> (u64, u64) {
        (0..plan.node_count()).filter_map(|v| record(r, NodeId(v as u32))).fold((u64::MAX, 0), |(s, e), d| (s.min(d.start), e.max(d.end)))
    };
    for r in 0..replays {
        // The happens-before the plan promises: every edge inside the replay, and the replay after
        // the one before it.
        for e in plan.edges() {
            if let (Some(u), Some(v)) = (record(r, e.from), record(r, e.to)) {
                if u.end >= v.start {
                    broken.push(format!("replay {r}: n{} became active before n{} ended", e.to, e.from));
                }
            }
        }
        if r > 0 && span(r - 1).1 >= span(r).0 {
            broken.push(format!("replay {r} began before replay {} ended", r - 1));
        }
        let mut per_node = Vec::with_capacity(plan.node_count());
        for v in 0..plan.node_count() {
            let v = NodeId(v as u32);
            let address = exec.kernarg_address(r % 2, v);
            let record = records.iter().filter(|d| d.kernarg_address == address).nth(r / 2);
            per_node.push(
                writes(plan, v)
                    .into_iter()
                    .map(|(root, start, end)| {
                        let a = exec.root_address(root);
                        record
                            .and_then(|d| d.outputs.iter().find(|(addr, _)| *addr == a))
                            .map_or_else(Vec::new, |(_, bytes)| bytes[start as usize..end as usize].to_vec())
                    })
                    .collect(),
            );
        }
        log.push(per_node);
    }
    Ok(Run { buffers: finals, writes: log, broken })
}

/// The first difference between two runs, in words.
pub fn difference(want: &Run, got: &Run) -> Option<String> {
    for (r, (w, g)) in want.writes.iter().zip(&got.writes).enumerate() {
        for (v, (wn, gn)) in w.iter().zip(g).enumerate() {
            if wn != gn {
                return Some(format!("replay {r}: node {v} wrote other bytes than in the serial program"));
            }
        }
    }
    (want.buffers != got.buffers).then(|| "the final buffers differ".to_string())
}
