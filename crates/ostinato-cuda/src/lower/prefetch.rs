//! Certified pre-wait prefetch: a kernel on a programmatic edge starts while its producer (and, where
//! the producer triggers before its own wait, the producer's running predecessors) still run, and may
//! read memory before its `griddepcontrol.wait` — weights, typically, which no node of the graph writes —
//! and update a counter it owns atomically (the tile tickets of a persistent kernel).
//! [`ostinato_cuda_code::ptx::pre_wait`] reports which params a kernel reads and updates before the wait; here each
//! programmatic edge is kept only where none of the read params' declared extents overlaps a declared
//! write, and none of the updated params' extents any declared access, of a node that may still be
//! running when the consumer starts. Otherwise the edge becomes a full one (the
//! consumer launches after its producer completes), or — for a kernel the user *declared* PDL-safe — the
//! plan is refused, naming kernel, param, edge and the writer it would race with.
//!
//! Which nodes may still run when `v` starts: for each programmatic edge `u → v` kept, `u` itself, and,
//! where `u`'s build triggers at entry (the early build, or code that triggers before its own wait),
//! whatever may still run when `u` starts.
//! A node that is not an ancestor of `v` has no hazard with `v` (the plan orders every hazard), and a
//! full edge means completion.

use std::collections::BTreeSet;

use ostinato::{NodeId, Plan};

use super::{GraphEdge, Variant};

/// What the lowering knows of a kernel's PDL behaviour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelPdl {
    /// It waits (`griddepcontrol.wait`) on every path before touching what a producer writes.
    pub capable: bool,
    /// The user declared it PDL-safe: a prefetch race is then refused, not avoided.
    pub declared: bool,
    /// Params it reads before the wait (see [`ostinato_cuda_code::ptx::PreWait`]).
    pub pre_wait_reads: Vec<usize>,
    /// Params it updates atomically before the wait.
    pub pre_wait_atomics: Vec<usize>,
    /// Its code triggers its dependents before its own wait.
    pub early_trigger: bool,
    /// It runs as a child graph (captured work), which has no programmatic port: its edges are full.
    pub child_graph: bool,
}

impl KernelPdl {
    /// A kernel certified to touch nothing before its wait (or not PDL-capable at all).
    pub fn plain(capable: bool) -> KernelPdl {
        KernelPdl { capable, ..KernelPdl::default() }
    }
}

/// A declared-PDL kernel's pre-wait read that overlaps a write of a node that may still run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}` (node n{node}) is declared PDL-safe but {} param `{param}` (buffer `{buffer}`) before `griddepcontrol.wait`, \
     and on the programmatic edge n{from} -> n{node} node n{writer} may still be {} those bytes; \
     move that access after the wait, or drop the declaration (the edge then becomes a full one)",
    if *.atomic { "updates" } else { "reads" },
    if *.atomic { "accessing" } else { "writing" }
)]
pub struct PrefetchRace {
    pub kernel: String,
    /// The kernel updates the param atomically before its wait (else it reads it).
    pub atomic: bool,
    pub node: u32,
    pub param: String,
    pub buffer: String,
    pub from: u32,
    pub writer: u32,
}

/// Demotes (or, for declared kernels, refuses) every programmatic edge of `edges` on which a prefetch
/// could race. `kernel_of[v]`: the kernel node `v` runs (`None` for copies and fills, which read nothing
/// before their wait). `variant[v]`: the build node `v` launches. Returns how many edges it demoted.
pub fn demote_racing(
    plan: &Plan,
    kernels: &[KernelPdl],
    kernel_of: &[Option<usize>],
    variant: &[Variant],
    edges: &mut [GraphEdge],
) -> Result<usize, PrefetchRace> {
    let g = plan.graph();
    let kernel = |v: usize| kernel_of[v].map(|k| &kernels[k]);
    let prefetched = |v: usize| kernel(v).filter(|k| !k.pre_wait_reads.is_empty() || !k.pre_wait_atomics.is_empty());
    if !(0..plan.node_count()).any(|v| prefetched(v).is_some()) {
        return Ok(0);
    }
    // Each node's declared accesses: (root, start, end, writes).
    let accesses: Vec<Vec<(u32, u64, u64, bool)>> =
        (0..plan.node_count()).map(|n| g.accesses(NodeId(n as u32)).into_iter().map(|a| (a.root.0, a.start, a.end, a.access.writes())).collect()).collect();
    let mut into: Vec<Vec<usize>> = vec![Vec::new(); plan.node_count()];
    for (i, e) in edges.iter().enumerate() {
        into[e.to.index()].push(i);
    }
    // running[v]: the nodes that may still run when v starts.
    let mut running: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); plan.node_count()];
    let mut demoted = 0;
    for &v in plan.order() {
        let vi = v.index();
        // (param, root, start, end, atomic): what v touches before its wait.
        let early: Vec<(usize, u32, u64, u64, bool)> = match prefetched(vi) {
            Some(k) => g
                .accesses(v)
                .into_iter()
                .filter_map(|a| {
                    let atomic = k.pre_wait_atomics.contains(&a.param);
                    (atomic || k.pre_wait_reads.contains(&a.param)).then_some((a.param, a.root.0, a.start, a.end, atomic))
                })
                .collect(),
            None => Vec::new(),
        };
        let mut mine = BTreeSet::new();
        for &ei in &into[vi] {
            if !edges[ei].programmatic {
                continue;
            }
            let u = edges[ei].from.index();
            let mut may_run: BTreeSet<u32> = BTreeSet::from([u as u32]);
            let triggers_early = variant[u] == Variant::Early || (variant[u] != Variant::Plain && kernel(u).is_some_and(|k| k.early_trigger));
            if triggers_early {
                may_run.extend(running[u].iter().copied());
            }
            // A read races with a running writer; an atomic update with any running access.
            let race = may_run.iter().find_map(|&w| {
                early.iter().find_map(|&(param, root, s, e, atomic)| {
                    accesses[w as usize]
                        .iter()
                        .any(|&(r, ws, we, writes)| r == root && ws < e && s < we && (writes || atomic))
                        .then_some((w, param, root, atomic))
                })
            });
            match race {
                Some((writer, param, root, atomic)) => {
                    if kernel(vi).is_some_and(|k| k.declared) {
                        return Err(PrefetchRace {
                            kernel: match &g.node(v).op {
                                ostinato::NodeOp::Kernel { kernel, .. } => g.kernel(*kernel).name.clone(),
                                _ => String::new(),
                            },
                            atomic,
                            node: v.0,
                            param: g.param_name(v, param),
                            buffer: g.buffer(ostinato::BufferId(root)).name.clone(),
                            from: u as u32,
                            writer,
                        });
                    }
                    edges[ei].programmatic = false;
                    edges[ei].full = Some(super::FullEdge::PrefetchRace);
                    demoted += 1;
                }
                None => mine.extend(may_run),
            }
        }
        running[vi] = mine;
    }
    Ok(demoted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::{lower_with, PdlMode, PdlPolicy};
    use ostinato::{Access, Arg, Graph, KernelSig, Launch, Scalar, ScalarType};

    /// `producer` writes `x` (and reads `seed`); `consumer` reads `w` and `x`, writes `y`. With `hop`,
    /// two relays between them: producer → relay (r from x) → relay (y from r) → consumer (y from w
    /// and x). `blocks` sets every grid (≤ 4: the early-trigger build).
    fn plan(hop: bool, blocks: u32) -> Plan {
        let mut g = Graph::new();
        let [seed, x, w, y, r] = ["seed", "x", "w", "y", "r"].map(|n| g.add_buffer(n, 1024).unwrap());
        let rw =
            |name: &str| KernelSig::new(name).buffer("out", Access::ReadWrite).buffer("a", Access::Read).buffer("b", Access::Read).scalar("n", ScalarType::U32);
        let producer = g.add_kernel(rw("producer")).unwrap();
        let relay = g.add_kernel(rw("relay")).unwrap();
        let consumer = g.add_kernel(rw("consumer")).unwrap();
        let n = Arg::Scalar(Scalar::u32(256));
        let l = Launch::linear(blocks, 256);
        g.add_launch(producer, l, &[Arg::Whole(x), Arg::Whole(seed), Arg::Whole(seed), n], &[]).unwrap();
        if hop {
            g.add_launch(relay, l, &[Arg::Whole(r), Arg::Whole(x), Arg::Whole(seed), n], &[]).unwrap();
            g.add_launch(relay, l, &[Arg::Whole(y), Arg::Whole(r), Arg::Whole(seed), n], &[]).unwrap();
            // The consumer reads x, written by the producer three hops up (that edge is reduced away).
            g.add_launch(consumer, l, &[Arg::Whole(y), Arg::Whole(w), Arg::Whole(x), n], &[]).unwrap();
        } else {
            g.add_launch(consumer, l, &[Arg::Whole(y), Arg::Whole(w), Arg::Whole(x), n], &[]).unwrap();
        }
        Plan::compile(&g).unwrap()
    }

    fn kernels(consumer_reads: &[usize], declared: bool) -> Vec<KernelPdl> {
        vec![
            KernelPdl::plain(true),
            KernelPdl::plain(true),
            KernelPdl { capable: true, declared, pre_wait_reads: consumer_reads.to_vec(), ..KernelPdl::default() },
        ]
    }

    fn programmatic(p: &Plan, k: &[KernelPdl]) -> Vec<(u32, u32, bool)> {
        let low = lower_with(p, k, true, PdlPolicy::new(PdlMode::On)).unwrap();
        low.edges.iter().map(|e| (e.from.0, e.to.0, e.programmatic)).collect()
    }

    #[test]
    fn a_weight_prefetch_keeps_the_edge_and_an_input_prefetch_demotes_it() {
        let p = plan(false, 64);
        assert_eq!(programmatic(&p, &kernels(&[1], false)), [(0, 1, true)], "w is written by nobody");
        assert_eq!(programmatic(&p, &kernels(&[1, 2], false)), [(0, 1, false)], "x is the producer's output");
        assert_eq!(programmatic(&p, &kernels(&[], false)), [(0, 1, true)]);
    }

    #[test]
    fn a_declared_kernel_that_would_race_is_refused_naming_kernel_param_and_edge() {
        let p = plan(false, 64);
        let e = lower_with(&p, &kernels(&[1, 2], true), true, PdlPolicy::new(PdlMode::On)).unwrap_err();
        assert_eq!((e.kernel.as_str(), e.param.as_str(), e.buffer.as_str(), e.from, e.node, e.writer), ("consumer", "b", "x", 0, 1, 0));
        let msg = e.to_string();
        assert!(msg.contains("`consumer`") && msg.contains("param `b`") && msg.contains("n0 -> n1"), "{msg}");
        // Without PDL there is no programmatic edge, so nothing to refuse.
        assert!(lower_with(&p, &kernels(&[1, 2], true), true, PdlPolicy::new(PdlMode::Off)).is_ok());
    }

    #[test]
    fn an_early_trigger_lets_a_writer_two_hops_up_still_run() {
        // Node 3 prefetches x, which node 0 wrote; only node 2 precedes it directly. With the early
        // (entry) trigger node 1 may start before node 0 finished, node 2 before node 1, node 3 before
        // node 2: node 0 may still run when node 3 prefetches x, so the edge into node 3 is demoted.
        let early = programmatic(&plan(true, 1), &kernels(&[2], false));
        let into3: Vec<_> = early.iter().filter(|e| e.1 == 3).collect();
        assert!(!into3.is_empty() && into3.iter().all(|e| !e.2), "{early:?}");
        // With the after-wait trigger (grids above 4 blocks) a node triggers only after its own wait:
        // node 0 has completed by then, and the prefetch is safe.
        let late = programmatic(&plan(true, 64), &kernels(&[2], false));
        assert!(late.iter().filter(|e| e.1 == 3).all(|e| e.2), "{late:?}");
    }

    #[test]
    fn an_early_trigger_in_the_code_counts_as_the_early_build() {
        // As above with the after-wait build (64 blocks), but the relays' code triggers before its wait.
        let p = plan(true, 64);
        let mut k = kernels(&[2], false);
        k[1].early_trigger = true;
        let into3: Vec<_> = programmatic(&p, &k).into_iter().filter(|e| e.1 == 3).collect();
        assert!(!into3.is_empty() && into3.iter().all(|e| !e.2), "{into3:?}");
    }

    #[test]
    fn a_pre_wait_atomic_races_with_any_running_access_of_its_bytes() {
        let p = plan(false, 64);
        let atomic = |param: usize, declared: bool| {
            vec![KernelPdl::plain(true), KernelPdl::plain(true), KernelPdl { capable: true, declared, pre_wait_atomics: vec![param], ..KernelPdl::default() }]
        };
        // The consumer's own output `y`: the producer does not touch it.
        assert_eq!(programmatic(&p, &atomic(0, false)), [(0, 1, true)]);
        // `x`, which the producer writes.
        assert_eq!(programmatic(&p, &atomic(2, false)), [(0, 1, false)]);
        let e = lower_with(&p, &atomic(2, true), true, PdlPolicy::new(PdlMode::On)).unwrap_err();
        assert!(e.to_string().contains("updates param `b`") && e.to_string().contains("accessing"), "{e}");
    }
}
