//! Built-in launches kept within their declared extents on every backend: checked when the plan is
//! instantiated (with the slots' initial values) and again on every slot patch that a built-in launch
//! reads (`ostinato::builtins`), launches alike once (`LaunchChecks`). A user's kernel keeps its
//! declared extents (the host checks each of its accesses; a GPU kernel is its author's to keep).

use ostinato::builtins::LaunchChecks;
use ostinato::{Arg, NodeId, NodeOp, Plan, Scalar, SlotId};

use crate::error::RuntimeError;

/// The built-in launches of an exec and the slot values they were last checked with.
#[derive(Debug, Default)]
pub(crate) struct BuiltinExtents {
    /// Per kernel of the plan: the built-in it is bound to, if any.
    builtin_of: Vec<Option<String>>,
    /// Per slot: the built-in launches that read it.
    readers: Vec<Vec<NodeId>>,
    /// Every slot's value (initial, then as patched).
    values: Vec<Scalar>,
}

impl BuiltinExtents {
    /// Checks every built-in launch of `plan` (kernel `k` bound to built-in `builtin_of[k]`) with the
    /// slots' initial values; the first launch past its extent is the error.
    pub fn check_plan(plan: &Plan, builtin_of: Vec<Option<String>>) -> Result<BuiltinExtents, RuntimeError> {
        let g = plan.graph();
        let values: Vec<Scalar> = g.slots().iter().map(|s| s.initial).collect();
        let mut readers = vec![Vec::new(); g.slots().len()];
        let mut checks = LaunchChecks::default();
        for (i, node) in g.nodes().iter().enumerate() {
            let NodeOp::Kernel { kernel, args, .. } = &node.op else { continue };
            let Some(name) = &builtin_of[kernel.index()] else { continue };
            let v = NodeId(i as u32);
            checks.check(g, v, name, &|s| values[s.index()])?;
            for a in args {
                if let Arg::Slot(s) = a {
                    // Nodes come in ascending order: one already listed is the last.
                    if readers[s.index()].last() != Some(&v) {
                        readers[s.index()].push(v);
                    }
                }
            }
        }
        Ok(BuiltinExtents { builtin_of, readers, values })
    }

    /// Checks the built-in launches that read `slot` with it at `value` (the others at theirs); on
    /// success the value is recorded.
    pub fn check_patch(&mut self, plan: &Plan, slot: SlotId, value: Scalar) -> Result<(), RuntimeError> {
        let Some(readers) = self.readers.get(slot.index()) else { return Ok(()) };
        let g = plan.graph();
        let values = &self.values;
        let value_of = |s: SlotId| if s == slot { value } else { values[s.index()] };
        let mut checks = LaunchChecks::default();
        for &v in readers {
            if let NodeOp::Kernel { kernel, .. } = &g.node(v).op {
                if let Some(name) = &self.builtin_of[kernel.index()] {
                    checks.check(g, v, name, &value_of)?;
                }
            }
        }
        self.values[slot.index()] = value;
        Ok(())
    }
}
