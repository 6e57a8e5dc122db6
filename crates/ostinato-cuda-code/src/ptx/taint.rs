//! Where each register's value comes from: a flow-insensitive taint analysis over a set of
//! instructions, run to a fixpoint (loops feed values back).
//!
//! - `ld.param` (or a load through the address of a param) taints its destination with that param;
//! - naming a module variable taints with the variable (a `.shared`/`.local`/`.const` one is private
//!   memory; a `.global` one is module state);
//! - every other instruction taints its destinations with the union of its sources;
//! - a value loaded from memory (but a param) is data of unknown origin. A 64-bit one may be a pointer
//!   (`wide`): an address built from it may point anywhere. One of at most 32 bits cannot hold a
//!   pointer (`narrow`): an index, a ticket, a count — it may offset a param's address, the access
//!   stays in that param's buffer (C's pointer provenance: `p + i` points into `p`'s object). Two
//!   narrow values packed into 64 bits (`mov.b64 %rd, {%r1, %r2}`) are wide.
//! - values stored to private memory (shared, local: spilled registers, shared tables) come back with
//!   the union of everything stored there; a copy from global memory into shared memory stores wide
//!   data.
//!
//! Conservative by construction: an instruction it does not understand joins its sources, never
//! clears a taint.

use std::collections::{BTreeSet, HashMap};

use super::memory::{element_bytes, memory_ops, AddrSpace};
use super::parse::{names, Entry, Instr, ModuleInfo, Space};

/// The origins of a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    /// Params whose value it derives from (by index).
    pub params: BTreeSet<usize>,
    /// Params whose *address* (in param space) it is.
    pub param_slots: BTreeSet<usize>,
    /// Module `.global` variables whose address it derives from.
    pub module_vars: BTreeSet<String>,
    /// It derives from the address of block- or thread-private memory (or module constants).
    pub private: bool,
    /// Loaded data that may be a pointer.
    pub wide: bool,
    /// Loaded data of at most 32 bits: an index, never a pointer.
    pub narrow: bool,
}

impl Taint {
    /// Adds `other`'s origins; true when something was new.
    pub fn join(&mut self, other: &Taint) -> bool {
        let before = (self.params.len(), self.param_slots.len(), self.module_vars.len(), self.private, self.wide, self.narrow);
        self.params.extend(other.params.iter().copied());
        self.param_slots.extend(other.param_slots.iter().copied());
        self.module_vars.extend(other.module_vars.iter().cloned());
        self.private |= other.private;
        self.wide |= other.wide;
        self.narrow |= other.narrow;
        before != (self.params.len(), self.param_slots.len(), self.module_vars.len(), self.private, self.wide, self.narrow)
    }
    fn data(wide: bool) -> Taint {
        Taint { wide, narrow: !wide, ..Taint::default() }
    }
}

/// Where an address points, as far as its taint tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Into the buffers of these params (a buffer param's pointer, offset by anything but a pointer).
    Params(BTreeSet<usize>),
    /// Block- or thread-private memory, or module constants.
    Private,
    /// Module `.global` variables.
    ModuleVars(BTreeSet<String>),
    /// Anywhere: a pointer read from memory, or an address derived from no pointer at all.
    Unknown,
}

/// The taint of every register after the fixpoint.
pub struct Flow<'a> {
    entry: &'a Entry,
    module: &'a ModuleInfo,
    param_index: HashMap<&'a str, usize>,
    regs: HashMap<String, Taint>,
    /// Everything stored into private memory.
    private_mem: Taint,
}

impl<'a> Flow<'a> {
    /// Runs the analysis over `entry`'s instructions whose item index `include` accepts.
    pub fn run(entry: &'a Entry, module: &'a ModuleInfo, include: impl Fn(usize) -> bool) -> Flow<'a> {
        let param_index = entry.params.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
        let mut flow = Flow { entry, module, param_index, regs: HashMap::new(), private_mem: Taint::default() };
        let instrs: Vec<&Instr> = entry
            .items
            .iter()
            .enumerate()
            .filter(|(i, _)| include(*i))
            .filter_map(|(_, it)| if let super::Item::Instr(x) = it { Some(x) } else { None })
            .collect();
        // Each round only adds origins; a register's taint is bounded, so this ends. The bound is a
        // guard against a bug, far above any kernel's need.
        for _ in 0..100_000 {
            let mut changed = false;
            for ins in &instrs {
                changed |= flow.step(ins);
            }
            if !changed {
                break;
            }
        }
        flow
    }

    /// The taint of an operand: the union of its registers and named symbols.
    pub fn of(&self, operand: &str) -> Taint {
        let mut t = Taint::default();
        for n in names(operand) {
            if let Some(&p) = self.param_index.get(n) {
                t.param_slots.insert(p);
            } else if let Some((space, _)) = self.module.symbols.get(n) {
                match space {
                    Space::Global => _ = t.module_vars.insert(n.to_string()),
                    _ => t.private = true,
                }
            } else if let Some(x) = self.regs.get(n) {
                t.join(x);
            }
        }
        t
    }

    /// Where the address in `operand` points, for an access in `space`.
    pub fn target(&self, operand: &str, space: AddrSpace) -> Target {
        match space {
            AddrSpace::Private | AddrSpace::Const | AddrSpace::Param => return Target::Private,
            AddrSpace::Opaque => return Target::Unknown,
            AddrSpace::Global | AddrSpace::Generic => {}
        }
        let t = self.of(operand);
        if t.wide {
            return Target::Unknown;
        }
        if !t.params.is_empty() {
            return Target::Params(t.params);
        }
        if !t.module_vars.is_empty() {
            return Target::ModuleVars(t.module_vars);
        }
        if t.private || (!t.param_slots.is_empty() && space == AddrSpace::Generic) {
            return Target::Private;
        }
        Target::Unknown
    }

    /// The params `entry` names, for messages.
    pub fn entry(&self) -> &Entry {
        self.entry
    }

    /// One transfer; true when a taint grew.
    fn step(&mut self, ins: &Instr) -> bool {
        let Some(first) = ins.operands.first() else { return false };
        let head = ins.head();
        let ops = memory_ops(ins);
        let mut changed = false;
        // Stores into private memory: what they store comes back from private loads.
        for m in ops.iter().flatten().filter(|m| m.role.writes()) {
            let private = match m.space {
                AddrSpace::Private => true,
                AddrSpace::Generic => self.target(&ins.operands[m.operand], m.space) == Target::Private,
                _ => false,
            };
            if private {
                let stored = if head == "cp" {
                    Taint::data(true)
                } else {
                    let mut v = Taint::default();
                    for (i, o) in ins.operands.iter().enumerate() {
                        if i != m.operand && !(matches!(head, "atom") && i == 0) {
                            v.join(&self.of(o));
                        }
                    }
                    v
                };
                changed |= self.private_mem.join(&stored);
            }
        }
        if matches!(head, "st" | "red" | "bar" | "barrier" | "bra" | "brx" | "prefetch" | "prefetchu" | "membar" | "fence" | "griddepcontrol" | "cp")
            || matches!(head, "discard" | "sust" | "sured" | "ret" | "exit" | "trap" | "tensormap" | "applypriority" | "stmatrix" | "nanosleep")
            || (head == "multimem" && !ins.has("ld_reduce"))
        {
            return changed;
        }
        let value = self.result(ins, ops.as_deref());
        for d in names(first) {
            if d == "_" {
                continue;
            }
            changed |= self.regs.entry(d.to_string()).or_default().join(&value);
        }
        changed
    }

    /// The taint of what `ins` writes to its destination registers.
    fn result(&self, ins: &Instr, ops: Option<&[super::memory::MemOp]>) -> Taint {
        let head = ins.head();
        let wide = element_bytes(ins).is_none_or(|b| b > 4);
        let load = ops.and_then(|o| o.iter().find(|m| m.role.reads()));
        match (head, load) {
            ("ld" | "ldu" | "atom" | "multimem" | "tex" | "tld4" | "suld", Some(m)) => {
                let addr = self.of(&ins.operands[m.operand]);
                if !addr.param_slots.is_empty() && matches!(m.space, AddrSpace::Param | AddrSpace::Generic) && addr.params.is_empty() && !addr.wide {
                    // A param's value, read from its slot.
                    return Taint { params: addr.param_slots, ..Taint::default() };
                }
                if !wide {
                    return Taint::data(false);
                }
                let private =
                    m.space == AddrSpace::Private || (m.space == AddrSpace::Generic && self.target(&ins.operands[m.operand], m.space) == Target::Private);
                if private {
                    self.private_mem.clone()
                } else {
                    Taint::data(true)
                }
            }
            ("call", _) => Taint::data(true),
            ("mbarrier" | "elect" | "vote" | "activemask" | "match" | "redux", _) => {
                let mut t = Taint::data(false);
                for o in &ins.operands[1..] {
                    t.join(&self.of(o));
                }
                t
            }
            _ => {
                let mut t = Taint::default();
                for o in &ins.operands[1..] {
                    t.join(&self.of(o));
                }
                // Two 32-bit values packed into a 64-bit register may be a pointer.
                if head == "mov" && t.narrow && ins.operands.get(1).is_some_and(|o| o.starts_with('{')) && wide {
                    t.wide = true;
                }
                t
            }
        }
    }
}
