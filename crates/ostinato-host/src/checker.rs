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
    /// ancestors[v] as a bitset over node ids, from the executed edges.
    anc: Vec<u64>,
    words: usize,
    shadow: Mutex<AccessFrontier>,
}

impl RaceChecker {
    pub(crate) fn new(plan: &Plan) -> Self {
        let n = plan.node_count();
        let words = n.div_ceil(64).max(1);
        let mut anc = vec![0u64; n * words];
        for &v in plan.order() {
            let vi = v.index();
            for &p in plan.preds(v) {
                let p = p as usize;
                for w in 0..words {
                    let x = anc[p * words + w];
                    anc[vi * words + w] |= x;
                }
                anc[vi * words + p / 64] |= 1 << (p % 64);
            }
        }
        RaceChecker { anc, words, shadow: Mutex::new(AccessFrontier::new(plan.graph().buffers().len())) }
    }

    pub(crate) fn reset(&self) {
        self.shadow.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn ordered_before(&self, a: u32, v: usize) -> bool {
        let a = a as usize;
        self.anc[v * self.words + a / 64] >> (a % 64) & 1 == 1
    }

    /// Checks and records node `v`'s accesses at its start.
    pub(crate) fn on_start(&self, g: &Graph, v: NodeId) -> Result<(), HostError> {
        let mut shadow = self.shadow.lock().unwrap_or_else(|e| e.into_inner());
        let accesses = g.accesses(v);
        let mut race = None;
        for a in &accesses {
            shadow.conflicts(a, |other, lo, hi| {
                if race.is_none() && other != v.0 && !self.ordered_before(other, v.index()) {
                    race = Some(HostError::Race {
                        first: g.describe_node(NodeId(other)),
                        second: g.describe_node(v),
                        second_param: g.param_name(v, a.param),
                        buffer: g.buffer(a.root).name.clone(),
                        lo,
                        hi,
                    });
                }
            });
        }
        if let Some(r) = race {
            return Err(r);
        }
        shadow.record(v.0, &accesses);
        Ok(())
    }
}
