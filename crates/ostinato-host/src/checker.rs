//! The race checker: a happens-before check on shadow memory, independent of timing.
//!
//! Shadow memory is an [`AccessFrontier`] of the current replay: for every byte range, the last node
//! that wrote it and the readers since. When a node starts, every frontier entry it conflicts with must
//! belong to one of its ancestors in the *executed* edge set; otherwise the two nodes were free to run at
//! the same time and the replay fails with [`HostError::Race`]. The check is against ordering, not
//! timing, so a missing edge is caught on every run, whichever node happened to run first (and two
//! running nodes that touch overlapping bytes with a write are always caught).

use std::sync::Mutex;

use ostinato::frontier::AccessFrontier;
use ostinato::{Graph, NodeId, Plan};

use crate::HostError;

pub(crate) struct RaceChecker {
    /// Each node's position in the plan's topological order: no node earlier than `a` descends from it.
    topo: Vec<u32>,
    /// The executed edges, backwards: `preds[v]`.
    preds: Vec<Vec<u32>>,
    state: Mutex<Shadow>,
}

/// What the checker updates under its lock: the frontier, and the scratch of a reachability search.
struct Shadow {
    frontier: AccessFrontier,
    /// `seen[v] == stamp` when node `v` was visited by the current search.
    seen: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
}

impl RaceChecker {
    /// A checker of `plan`'s executed edges. Its memory is proportional to nodes plus edges (an ancestor
    /// matrix would be quadratic: 5 GB at 200,000 nodes); an ordering is a search backwards from the
    /// later node, pruned by topological position, run only for accesses that conflict.
    pub(crate) fn new(plan: &Plan) -> Result<Self, HostError> {
        let n = plan.node_count();
        let refuse = || HostError::OutOfMemory { operation: "race checker", reason: format!("cannot allocate the shadow of {n} nodes") };
        let mut topo = Vec::new();
        topo.try_reserve_exact(n).map_err(|_| refuse())?;
        topo.resize(n, 0u32);
        for (i, v) in plan.order().iter().enumerate() {
            topo[v.index()] = i as u32;
        }
        let mut preds = Vec::new();
        preds.try_reserve_exact(n).map_err(|_| refuse())?;
        for v in 0..n {
            preds.push(plan.preds(NodeId(v as u32)).to_vec());
        }
        let mut seen = Vec::new();
        seen.try_reserve_exact(n).map_err(|_| refuse())?;
        seen.resize(n, 0u32);
        let frontier = AccessFrontier::new(plan.graph().buffers().len());
        Ok(RaceChecker { topo, preds, state: Mutex::new(Shadow { frontier, seen, stamp: 0, stack: Vec::new() }) })
    }

    pub(crate) fn reset(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).frontier.clear();
    }

    /// True when an executed path leads from `a` to `v`.
    fn ordered_before(&self, shadow: &mut Shadow, a: u32, v: usize) -> bool {
        let floor = self.topo[a as usize];
        if self.topo[v] <= floor {
            return false;
        }
        shadow.stamp = shadow.stamp.wrapping_add(1);
        if shadow.stamp == 0 {
            shadow.seen.iter_mut().for_each(|s| *s = 0);
            shadow.stamp = 1;
        }
        let stamp = shadow.stamp;
        shadow.stack.clear();
        shadow.stack.push(v as u32);
        while let Some(u) = shadow.stack.pop() {
            for &p in &self.preds[u as usize] {
                if p == a {
                    return true;
                }
                if self.topo[p as usize] > floor && shadow.seen[p as usize] != stamp {
                    shadow.seen[p as usize] = stamp;
                    shadow.stack.push(p);
                }
            }
        }
        false
    }

    /// Checks and records node `v`'s accesses at its start.
    pub(crate) fn on_start(&self, g: &Graph, v: NodeId) -> Result<(), HostError> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let shadow = &mut *guard;
        let accesses = g.accesses(v);
        let mut conflicting = Vec::new();
        for (i, a) in accesses.iter().enumerate() {
            shadow.frontier.conflicts(a, |other, lo, hi| {
                if other != v.0 {
                    conflicting.push((i, other, lo, hi));
                }
            });
        }
        for (i, other, lo, hi) in conflicting {
            if !self.ordered_before(shadow, other, v.index()) {
                let a = &accesses[i];
                return Err(HostError::Race {
                    first: g.describe_node(NodeId(other)),
                    second: g.describe_node(v),
                    second_param: g.param_name(v, a.param),
                    buffer: g.buffer(a.root).name.clone(),
                    lo,
                    hi,
                });
            }
        }
        shadow.frontier.record(v.0, &accesses);
        Ok(())
    }
}
