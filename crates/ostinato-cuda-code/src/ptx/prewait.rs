//! What a kernel does before `griddepcontrol.wait`, read from its PTX: the evidence behind every
//! programmatic (PDL) edge.
//!
//! A kernel on a programmatic edge may start while its producer still runs; only what it does before
//! its wait can race. The analysis walks the entry's control flow from the first instruction along
//! every path until an unpredicated `griddepcontrol.wait`, and certifies that on those paths the kernel
//! - writes no memory but its own shared and local memory, except atomics on a buffer param (a ticket
//!   counter: reported, and the lowering keeps the edge only where no node that may still run touches
//!   those bytes);
//! - reads global memory only through addresses derived from its buffer params — loads, and bulk or
//!   async copies into its shared memory (`cp.async.bulk`, `cp.async`), whose source is what is read;
//! - calls nothing and takes no indirect branch;
//! - lets thread 0 of every block reach the wait (`ptx::thread0`): other threads may end before
//!   it (a producer warp that only issues copies), since the grid cannot complete while one of its
//!   threads waits.
//!
//! It reports the params read before the wait (the *prefetched* params), the params updated
//! atomically, and whether the kernel triggers its dependents (`griddepcontrol.launch_dependents`)
//! before its wait: then they may start while its own producers still run, which the lowering's
//! prefetch check takes into account. Address provenance is the taint analysis of [`super::taint`]
//! over the pre-wait instructions only.

use std::collections::{BTreeSet, HashSet};

use super::memory::{memory_ops, AddrSpace, Role};
use super::parse::{Entry, Item, ModuleInfo};
use super::taint::{Flow, Target};

/// A certified kernel's pre-wait behaviour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreWait {
    /// Params (by index) from which some global-memory read before the wait (a load, or the source of
    /// a bulk or async copy) derives its address, ascending. Empty: the kernel reads nothing before
    /// its wait.
    pub reads: Vec<usize>,
    /// Params updated by an atomic before the wait (a counter the kernel owns), ascending.
    pub atomics: Vec<usize>,
    /// Some path triggers the dependents (`griddepcontrol.launch_dependents`) before the wait.
    pub early_trigger: bool,
    /// Some threads (never thread 0 of a block) may end before the wait.
    pub exits_before_wait: bool,
}

/// The instructions (item indices) reachable before an unpredicated wait, and the exits among them
/// (`items.len()`: the end of the body).
fn before_wait(entry: &Entry) -> Result<(Vec<usize>, Vec<usize>), String> {
    let labels = entry.labels();
    let mut pre = Vec::new();
    let mut exits = Vec::new();
    let (mut seen, mut stack) = (HashSet::new(), vec![0usize]);
    while let Some(mut i) = stack.pop() {
        loop {
            if !seen.insert(i) {
                break;
            }
            let Some(item) = entry.items.get(i) else {
                exits.push(i);
                break;
            };
            let Item::Instr(ins) = item else {
                i += 1;
                continue;
            };
            if ins.op.starts_with("griddepcontrol.wait") && ins.guard.is_none() {
                break;
            }
            pre.push(i);
            match ins.head() {
                "bra" => {
                    let target = ins.operands.first().map(String::as_str).unwrap_or("");
                    let t = *labels.get(target).ok_or_else(|| format!("`{}` branches to unknown label `{target}` before `griddepcontrol.wait`", ins.text))?;
                    if ins.guard.is_some() {
                        stack.push(t);
                    } else {
                        i = t;
                        continue;
                    }
                }
                "ret" | "exit" | "trap" => {
                    exits.push(i);
                    if ins.guard.is_none() {
                        break;
                    }
                }
                "call" if !ins.operands.iter().any(|o| super::access::HARMLESS_CALLS.contains(&o.as_str())) => {
                    return Err(format!("`{}` comes before `griddepcontrol.wait`", ins.text))
                }
                "brx" => return Err(format!("`{}` comes before `griddepcontrol.wait`", ins.text)),
                _ => {}
            }
            i += 1;
        }
    }
    Ok((pre, exits))
}

/// Certifies `entry` of `ptx` for programmatic edges and reports what it does before its wait; an
/// `Err` says why it is not PDL-capable. `is_buffer(i)`: param `i` is a buffer pointer (an address must
/// derive from at least one; scalars only offset it).
pub fn pre_wait(ptx: &str, entry: &str, is_buffer: impl Fn(usize) -> bool) -> Result<PreWait, String> {
    let module = ModuleInfo::read(ptx);
    let entry = super::parse::entry(ptx, entry)?;
    certify(&module, &entry, &is_buffer)
}

/// [`pre_wait`] of a parsed entry.
pub fn certify(module: &ModuleInfo, entry: &Entry, is_buffer: &dyn Fn(usize) -> bool) -> Result<PreWait, String> {
    if !entry.instrs().any(|i| i.op.starts_with("griddepcontrol.wait")) {
        return Err("no `griddepcontrol.wait` found".into());
    }
    let (pre, exits) = before_wait(entry)?;
    if !exits.is_empty() {
        super::thread0::thread_zero_waits(entry).map_err(|at| {
            if at == "the end of the body" {
                "a path reaches the end of the body without `griddepcontrol.wait`".to_string()
            } else {
                format!("`{at}` may end the block before `griddepcontrol.wait` (thread 0 of a block can reach it)")
            }
        })?;
    }
    if !entry.instrs().any(|i| i.op.starts_with("griddepcontrol.wait") && i.guard.is_none()) {
        return Err("no `griddepcontrol.wait` found".into());
    }
    let in_pre: HashSet<usize> = pre.iter().copied().collect();
    let flow = Flow::run(entry, module, |i| in_pre.contains(&i));
    let mut out = PreWait { exits_before_wait: !exits.is_empty(), ..PreWait::default() };
    let (mut reads, mut atomics) = (BTreeSet::new(), BTreeSet::new());
    for &i in &pre {
        let Item::Instr(ins) = &entry.items[i] else { continue };
        if ins.op.starts_with("griddepcontrol.launch_dependents") {
            out.early_trigger = true;
        }
        let Some(ops) = memory_ops(ins) else { continue };
        for m in ops {
            if m.role == Role::Prefetch || matches!(m.space, AddrSpace::Private | AddrSpace::Const | AddrSpace::Param) {
                continue;
            }
            let target = flow.target(&ins.operands[m.operand], m.space);
            let buffers: Vec<usize> = match &target {
                Target::Params(ps) => ps.iter().copied().filter(|&p| is_buffer(p)).collect(),
                _ => Vec::new(),
            };
            match (target, m.role) {
                (Target::Private, _) => {}
                (Target::ModuleVars(v), Role::Read) => {
                    let _ = v;
                }
                (Target::ModuleVars(v), _) => {
                    return Err(format!("`{}` writes module variable `{}` before `griddepcontrol.wait`", ins.text, v.into_iter().next().unwrap_or_default()))
                }
                (Target::Params(_), Role::Write) => return Err(format!("`{}` writes memory before `griddepcontrol.wait`", ins.text)),
                (Target::Params(_), _) if buffers.is_empty() => {
                    return Err(format!("`{}` touches memory before `griddepcontrol.wait` through an address not derived from a buffer param", ins.text))
                }
                (Target::Params(_), Role::ReadWrite) => atomics.extend(buffers),
                (Target::Params(_), _) => reads.extend(buffers),
                (Target::Unknown, Role::Read) => {
                    return Err(format!("`{}` reads memory before `griddepcontrol.wait` through an address not derived from a buffer param alone", ins.text))
                }
                (Target::Unknown, _) => return Err(format!("`{}` writes memory before `griddepcontrol.wait` through an address of unknown origin", ins.text)),
            }
        }
    }
    out.reads = reads.into_iter().collect();
    out.atomics = atomics.into_iter().collect();
    Ok(out)
}
