//! The address of every global memory access of an entry as an expression over the launch's symbols
//! (`%ctaid`, `%tid`, `%ntid`, `%nctaid`), its params (a buffer's pointer, a scalar's value) and values
//! the analysis does not follow (opaque: a loaded value, a call's result), together with the branch
//! conditions known to hold where the access runs. The tile-map check ([`super::tiles`]) evaluates
//! these expressions once a node's geometry and scalars are known.
//!
//! A forward dataflow over the entry's basic blocks, run to a fixpoint: each register holds a
//! hash-consed expression. Where paths meet with different values a register becomes a *phi* of the
//! block (its incoming values kept per edge, with the conditions of that edge); at a loop head the
//! check recognises `i = i0 + k·step` from them. Conditions are facts `(predicate, holds)`: a fact on
//! an edge into a block survives the join only where every edge has it, the values that become phis
//! renamed to them; a fact about a loop head's phi that reaches it round the loop (it speaks of the
//! previous iteration's value) is dropped there. The facts every back edge of a loop holds are kept
//! for the bound on its counter ([`Forms::back`]). Conservative by construction: an instruction not
//! understood makes its result opaque.

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use super::expr::*;
use super::memory::{element_bytes, memory_ops, AddrSpace, Role};
use super::parse::{names, Entry, Instr, Item};

/// Register state at a program point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    regs: BTreeMap<u32, ExprId>,
    facts: BTreeSet<Fact>,
}

/// A basic block's successors: (block, the branch guard `(register, taken-when)` of that edge).
struct Block {
    start: usize,
    end: usize,
    succs: Vec<(usize, Option<(String, bool)>)>,
}

/// The most fixpoint rounds before the entry is given up as not followed.
const MAX_ROUNDS: usize = 64;

/// Reads `entry`'s accesses and their address expressions. `is_buffer(i)`: param `i` is a pointer.
pub fn forms(entry: &Entry, is_buffer: &dyn Fn(usize) -> bool) -> Forms {
    let mut b = Builder { f: Forms::default(), entry, is_buffer, reg_index: HashMap::new(), params: HashMap::new() };
    b.params = entry.params.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
    match blocks(entry) {
        Ok(blocks) => b.run(&blocks),
        Err(why) => b.f.failed = Some(why),
    }
    b.f
}

/// Splits the body into basic blocks.
fn blocks(entry: &Entry) -> Result<Vec<Block>, String> {
    let labels = entry.labels();
    let mut starts: BTreeSet<usize> = BTreeSet::from([0]);
    for (i, it) in entry.items.iter().enumerate() {
        match it {
            Item::Label(_) => _ = starts.insert(i),
            Item::Instr(ins) if matches!(ins.head(), "bra" | "ret" | "exit" | "brx" | "trap") => _ = starts.insert(i + 1),
            _ => {}
        }
    }
    let starts: Vec<usize> = starts.into_iter().filter(|&s| s < entry.items.len()).collect();
    let block_of = |item: usize| starts.partition_point(|&s| s <= item) - 1;
    let mut out = Vec::new();
    for (bi, &s) in starts.iter().enumerate() {
        let end = starts.get(bi + 1).copied().unwrap_or(entry.items.len());
        let mut succs = Vec::new();
        let last = entry.items[s..end].iter().rev().find_map(|it| if let Item::Instr(i) = it { Some(i) } else { None });
        let fall = (end < entry.items.len()).then(|| block_of(end));
        match last {
            Some(ins) if ins.head() == "brx" => return Err(format!("an indirect branch (`{}`)", ins.text)),
            Some(ins) if ins.head() == "bra" => {
                let target =
                    ins.operands.first().and_then(|l| labels.get(l.as_str())).ok_or_else(|| format!("a branch to an unknown label (`{}`)", ins.text))?;
                match &ins.guard {
                    None => succs.push((block_of(*target), None)),
                    Some(g) => {
                        succs.push((block_of(*target), Some((g.reg.clone(), !g.negated))));
                        if let Some(f) = fall {
                            succs.push((f, Some((g.reg.clone(), g.negated))));
                        }
                    }
                }
            }
            Some(ins) if matches!(ins.head(), "ret" | "exit" | "trap") => {
                if let (Some(g), Some(f)) = (&ins.guard, fall) {
                    succs.push((f, Some((g.reg.clone(), g.negated))));
                }
            }
            _ => succs.extend(fall.map(|f| (f, None))),
        }
        out.push(Block { start: s, end, succs });
    }
    Ok(out)
}

struct Builder<'a> {
    f: Forms,
    entry: &'a Entry,
    is_buffer: &'a dyn Fn(usize) -> bool,
    reg_index: HashMap<String, u32>,
    params: HashMap<String, usize>,
}

/// The modifiers whose instruction's result the analysis does not follow as an integer: floating-point
/// types and roundings (`add.rn.f32`, `cvt.rzi.s32.f32`), saturation, a carry (`add.cc`), `approx`, `ftz`.
const FLOAT_MODIFIERS: [&str; 19] =
    ["f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "sat", "cc", "approx", "ftz"];

impl Builder<'_> {
    fn run(&mut self, blocks: &[Block]) {
        let n = blocks.len();
        self.f.block_start = blocks.iter().map(|b| b.start).collect();
        let mut preds: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
        for (bi, b) in blocks.iter().enumerate() {
            for (k, (s, _)) in b.succs.iter().enumerate() {
                preds[*s].push((bi, k));
            }
        }
        self.f.is_header = (0..n).map(|h| preds[h].iter().any(|&(p, _)| p >= h)).collect();
        let mut edge: HashMap<(usize, usize), State> = HashMap::new();
        let mut ins: Vec<Option<State>> = vec![None; n];
        let mut converged = false;
        for _ in 0..MAX_ROUNDS {
            let mut changed = false;
            for bi in 0..n {
                let Some(state) = self.join(bi, &preds[bi], &edge) else { continue };
                if ins[bi].as_ref() != Some(&state) {
                    ins[bi] = Some(state.clone());
                    changed = true;
                }
                self.propagate(bi, &blocks[bi], state, &mut edge, false);
            }
            if !changed {
                converged = true;
                break;
            }
        }
        if !converged {
            self.f.failed = Some(format!("the dataflow over its loops did not settle in {MAX_ROUNDS} rounds"));
            return;
        }
        for bi in 0..n {
            if let Some(state) = ins[bi].clone() {
                self.propagate(bi, &blocks[bi], state, &mut edge, true);
            }
        }
        self.loop_facts(&preds, &edge);
    }

    /// Runs block `bi` from `state`; stores the state of each of its out-edges.
    fn propagate(&mut self, bi: usize, b: &Block, mut state: State, edge: &mut HashMap<(usize, usize), State>, record: bool) {
        for i in b.start..b.end {
            if let Item::Instr(ins) = &self.entry.items[i] {
                if ins.head() != "bra" {
                    self.transfer(ins, i, &mut state, record);
                }
            }
        }
        for (k, (_, guard)) in b.succs.iter().enumerate() {
            let mut s = state.clone();
            if let Some((reg, holds)) = guard {
                if let Some(&p) = self.reg(reg).and_then(|r| state.regs.get(&r)) {
                    s.facts.insert(self.fact(p, *holds));
                }
            }
            edge.insert((bi, k), s);
        }
    }

    /// The state at the start of block `h`: the entry's for block 0, else the join of its visited edges.
    fn join(&mut self, h: usize, preds: &[(usize, usize)], edge: &HashMap<(usize, usize), State>) -> Option<State> {
        let mut incoming: Vec<(u32, bool, &State)> = preds.iter().filter_map(|&(p, k)| edge.get(&(p, k)).map(|s| (p as u32, p >= h, s))).collect();
        let entry_state = State::default();
        if h == 0 {
            incoming.insert(0, (u32::MAX, false, &entry_state));
        }
        if incoming.is_empty() {
            return None;
        }
        let hb = h as u32;
        self.f.phis.retain(|&(b, _), _| b != hb);
        let keys: BTreeSet<u32> = incoming.iter().flat_map(|(_, _, s)| s.regs.keys().copied()).collect();
        let mut out = State::default();
        let mut renames: Vec<HashMap<ExprId, Vec<ExprId>>> = vec![HashMap::new(); incoming.len()];
        for r in keys {
            let vals: Vec<Option<ExprId>> = incoming.iter().map(|(_, _, s)| s.regs.get(&r).copied()).collect();
            let same = vals.iter().all(|v| *v == vals[0]) && vals[0].is_some_and(|v| !self.f.mentions(v, hb));
            if same {
                if let Some(v) = vals[0] {
                    out.regs.insert(r, v);
                }
                continue;
            }
            let phi = self.f.intern(Expr::Phi(hb, r));
            out.regs.insert(r, phi);
            let list = incoming
                .iter()
                .zip(&vals)
                .map(|((from, back, s), v)| Incoming { from: *from, value: *v, facts: s.facts.iter().copied().collect(), back: *back })
                .collect();
            self.f.phis.insert((hb, r), list);
            for (i, v) in vals.iter().enumerate() {
                if let Some(v) = v {
                    renames[i].entry(*v).or_default().push(phi);
                }
            }
        }
        let mut common: Option<BTreeSet<Fact>> = None;
        for (i, (_, _, s)) in incoming.iter().enumerate() {
            let mut set = BTreeSet::new();
            for &(p, holds) in &s.facts {
                if !self.f.mentions(p, hb) {
                    set.insert((p, holds));
                }
                for q in self.rename(p, hb, &renames[i]) {
                    set.insert((q, holds));
                }
            }
            common = Some(match common {
                None => set,
                Some(c) => c.intersection(&set).copied().collect(),
            });
        }
        out.facts = common.unwrap_or_default();
        Some(out)
    }

    /// The predicate `p` with its operands that are incoming values replaced by their phis at `h`;
    /// none where an operand still speaks of `h`'s phis as they were.
    fn rename(&mut self, p: ExprId, h: u32, map: &HashMap<ExprId, Vec<ExprId>>) -> Vec<ExprId> {
        let operand = |f: &Forms, x: ExprId| -> Vec<ExprId> {
            let mut v = map.get(&x).cloned().unwrap_or_default();
            if !f.mentions(x, h) {
                v.push(x);
            }
            v
        };
        match self.f.expr(p).clone() {
            Expr::Cmp(op, a, b, bits, signed) => {
                let (xs, ys) = (operand(&self.f, a), operand(&self.f, b));
                let mut out = Vec::new();
                for &x in &xs {
                    for &y in &ys {
                        if x != a || y != b {
                            out.push(self.f.intern(Expr::Cmp(op, x, y, bits, signed)));
                        }
                    }
                }
                out
            }
            Expr::Not(q) => self.rename(q, h, map).into_iter().map(|q| self.f.intern(Expr::Not(q))).collect(),
            _ => Vec::new(),
        }
    }

    /// For each loop head, the facts of its back edges (see [`Forms::back`]).
    fn loop_facts(&mut self, preds: &[Vec<(usize, usize)>], edge: &HashMap<(usize, usize), State>) {
        for (h, into) in preds.iter().enumerate() {
            if !self.f.is_header[h] {
                continue;
            }
            let mut back: Option<BTreeSet<Fact>> = None;
            for &(p, k) in into.iter().filter(|&&(p, _)| p >= h) {
                let Some(s) = edge.get(&(p, k)) else { continue };
                back = Some(back.map_or_else(|| s.facts.clone(), |x| x.intersection(&s.facts).copied().collect()));
            }
            self.f.back.insert(h as u32, back.unwrap_or_default().into_iter().collect());
        }
    }

    /// A fact in one form for each meaning, so that edges that check the same condition differently
    /// agree: a failed comparison is its negation holding; `x > c` is `x ≥ c + 1` and `x ≤ c` is
    /// `x < c + 1` (where `c + 1` is a value of the register); `not p` failing is `p` holding.
    fn fact(&mut self, p: ExprId, holds: bool) -> Fact {
        match self.f.expr(p).clone() {
            Expr::Not(q) => self.fact(q, !holds),
            Expr::Cmp(op, a, b, bits, signed) => {
                let op = if holds { op } else { op.negated() };
                let (lo, hi) = domain(bits, signed);
                let next = match self.f.expr(b) {
                    Expr::Const(c) if matches!(op, Cmp::Gt | Cmp::Le) && *c >= lo && *c < hi => Some(*c + 1),
                    _ => None,
                };
                let (op, b) = match next {
                    Some(c) => (if op == Cmp::Gt { Cmp::Ge } else { Cmp::Lt }, self.konst(c)),
                    None => (op, b),
                };
                (self.f.intern(Expr::Cmp(op, a, b, bits, signed)), true)
            }
            _ => (p, holds),
        }
    }

    fn reg(&self, name: &str) -> Option<u32> {
        self.reg_index.get(name).copied()
    }
    fn reg_or_new(&mut self, name: &str) -> u32 {
        if let Some(&r) = self.reg_index.get(name) {
            return r;
        }
        let r = self.f.regs.len() as u32;
        self.f.regs.push(name.to_string());
        self.reg_index.insert(name.to_string(), r);
        r
    }
    fn opaque(&mut self, why: Why, item: usize) -> ExprId {
        self.f.intern(Expr::Opaque(why, item))
    }
    fn konst(&mut self, c: i128) -> ExprId {
        self.f.intern(Expr::Const(c))
    }

    /// The value of a source operand.
    fn value(&mut self, o: &str, st: &State, item: usize) -> ExprId {
        let o = o.trim();
        if let Some(rest) = o.strip_prefix('%') {
            let (name, dim) = rest.split_once('.').unwrap_or((rest, ""));
            let d = match dim {
                "x" => Some(0),
                "y" => Some(1),
                "z" => Some(2),
                _ => None,
            };
            let special = match name {
                "ctaid" => Some(Special::Ctaid),
                "tid" => Some(Special::Tid),
                "ntid" => Some(Special::Ntid),
                "nctaid" => Some(Special::Nctaid),
                _ => None,
            };
            if let (Some(s), Some(d)) = (special, d) {
                return self.f.intern(Expr::Special(s, d));
            }
            return match self.reg(o).and_then(|r| st.regs.get(&r)) {
                Some(&v) => v,
                None => self.opaque(Why::NotFollowed, item),
            };
        }
        match immediate(o) {
            Some(c) => self.konst(c),
            None => self.opaque(Why::NotFollowed, item),
        }
    }

    /// The address in operand `o` (`[%rd4]`, `[%rd4+16]`, `[%rd4+-8]`).
    fn address(&mut self, o: &str, st: &State, item: usize) -> ExprId {
        let inner = o.trim().trim_start_matches('[').trim_end_matches(']');
        let (base, off) = match inner.split_once('+') {
            Some((b, off)) => (b.trim(), immediate(off.trim())),
            None => (inner, Some(0)),
        };
        let Some(off) = off else { return self.opaque(Why::NotFollowed, item) };
        if !base.starts_with('%') {
            return match immediate(base) {
                Some(c) => self.konst(c + off),
                None => self.opaque(Why::NotFollowed, item),
            };
        }
        let b = self.value(base, st, item);
        if off == 0 {
            return b;
        }
        let k = self.konst(off);
        self.f.intern(Expr::Ring(Ring::Add, b, k, 64))
    }

    /// One instruction: its accesses (when `record`) and its destinations' new values.
    fn transfer(&mut self, ins: &Instr, item: usize, st: &mut State, record: bool) {
        let guard = ins.guard.as_ref().and_then(|g| self.reg(&g.reg).and_then(|r| st.regs.get(&r)).map(|&p| (p, !g.negated)));
        if record {
            let fact = guard.map(|(p, holds)| self.fact(p, holds));
            self.record(ins, item, st, fact);
        }
        let head = ins.head();
        let writes_nothing = matches!(
            head,
            "st" | "red" | "bar" | "barrier" | "bra" | "ret" | "exit" | "trap" | "prefetch" | "prefetchu" | "membar" | "fence" | "griddepcontrol" | "cp"
        ) || matches!(head, "discard" | "sust" | "sured" | "tensormap" | "applypriority" | "stmatrix" | "nanosleep")
            || (head == "multimem" && !ins.has("ld_reduce"));
        let Some(first) = ins.operands.first() else { return };
        if writes_nothing || first.starts_with('[') {
            return;
        }
        // `setp` writes `p|q` by position (either may be `_`); others write every register named.
        let dests: Vec<Option<String>> = if head == "setp" {
            first.split('|').map(|d| Some(d.trim().to_string()).filter(|d| d.starts_with('%'))).collect()
        } else {
            names(first).into_iter().filter(|d| d.starts_with('%')).map(|d| Some(d.to_string())).collect()
        };
        let values: Vec<ExprId> = if head == "setp" || dests.len() == 1 {
            self.result(ins, item, st, dests.len().max(2))
        } else {
            vec![self.opaque(Why::NotFollowed, item); dests.len()]
        };
        for (d, v) in dests.iter().zip(values) {
            let Some(d) = d else { continue };
            self.f.origin.entry(v).or_insert(item);
            let r = self.reg_or_new(d);
            let v = match guard {
                Some((p, holds)) => {
                    let old = st.regs.get(&r).copied().unwrap_or_else(|| self.opaque(Why::Undefined, item));
                    let cond = if holds { p } else { self.f.intern(Expr::Not(p)) };
                    self.f.intern(Expr::Select(cond, v, old))
                }
                None => v,
            };
            self.f.origin.entry(v).or_insert(item);
            st.regs.insert(r, v);
        }
    }

    /// The accesses of `ins`.
    fn record(&mut self, ins: &Instr, item: usize, st: &State, guard: Option<Fact>) {
        let mut facts: Vec<Fact> = st.facts.iter().copied().collect();
        facts.extend(guard);
        let Some(ops) = memory_ops(ins) else {
            if ins.head() == "call" && ins.operands.iter().any(|o| super::access::HARMLESS_CALLS.contains(&o.as_str())) {
                return;
            }
            self.f.accesses.push(Access { item, operand: 0, space: AddrSpace::Opaque, role: Role::ReadWrite, addr: None, width: None, facts });
            return;
        };
        let vector: u64 = ins.op.split('.').find_map(|p| p.strip_prefix('v').and_then(|n| n.parse().ok())).unwrap_or(1);
        for m in ops {
            if m.role == Role::Prefetch || matches!(m.space, AddrSpace::Private | AddrSpace::Const | AddrSpace::Param) {
                continue;
            }
            let addr = (m.space != AddrSpace::Opaque).then(|| self.address(&ins.operands[m.operand], st, item));
            let width = if ins.head() == "cp" {
                ins.operands.get(2).map(|o| Width::Expr(self.value(o, st, item)))
            } else {
                element_bytes(ins).map(|b| Width::Bytes(b * vector))
            };
            self.f.accesses.push(Access { item, operand: m.operand, space: m.space, role: m.role, addr, width, facts: facts.clone() });
        }
    }

    /// The values `ins` gives its `n` destinations.
    fn result(&mut self, ins: &Instr, item: usize, st: &State, n: usize) -> Vec<ExprId> {
        let opaque = |b: &mut Self| vec![b.opaque(Why::NotFollowed, item); n];
        let parts: Vec<&str> = ins.op.split('.').collect();
        let float = parts.iter().skip(1).any(|p| FLOAT_MODIFIERS.contains(p));
        let ty = int_type(&parts);
        let arg = |b: &mut Self, k: usize| match ins.operands.get(k) {
            Some(o) => b.value(o, st, item),
            None => b.opaque(Why::NotFollowed, item),
        };
        let head = parts[0];
        if matches!(head, "ld" | "ldu" | "atom" | "multimem" | "tex" | "tld4" | "suld" | "shfl" | "vote" | "redux" | "match" | "activemask" | "call") {
            if head == "ld" && ins.has("param") {
                return vec![self.param_load(ins, item, ty); n];
            }
            return vec![self.opaque(Why::Loaded, item); n];
        }
        if float && head != "setp" {
            return opaque(self);
        }
        let v = match (head, ty) {
            ("mov", _) if ins.operands.get(1).is_some_and(|o| o.starts_with('{')) => return opaque(self),
            ("mov", _) => arg(self, 1),
            ("cvta", _) if ins.has("global") => arg(self, 1),
            ("cvt", _) => {
                let widths: Vec<(u32, bool)> = parts[1..].iter().filter_map(|p| int_width(p)).collect();
                let [(dst, _), (src, signed)] = widths[..] else { return opaque(self) };
                let a = arg(self, 1);
                if dst > src {
                    self.f.intern(Expr::Ext { of: a, from: src as u8, signed })
                } else {
                    a
                }
            }
            ("add" | "sub", Some((bits, _))) => {
                let (a, b) = (arg(self, 1), arg(self, 2));
                self.f.intern(Expr::Ring(if head == "add" { Ring::Add } else { Ring::Sub }, a, b, bits as u8))
            }
            // `not x` is `-1 - x` in two's complement.
            ("not", Some((bits, _))) => {
                let (m, a) = (self.konst(-1), arg(self, 1));
                self.f.intern(Expr::Ring(Ring::Sub, m, a, bits as u8))
            }
            ("neg", Some((bits, _))) => {
                let (z, a) = (self.konst(0), arg(self, 1));
                self.f.intern(Expr::Ring(Ring::Sub, z, a, bits as u8))
            }
            ("shl", Some((bits, _))) => {
                let (a, b) = (arg(self, 1), arg(self, 2));
                self.f.intern(Expr::Ring(Ring::Shl, a, b, bits as u8))
            }
            ("mul" | "mad", Some((bits, signed))) if parts.contains(&"wide") || parts.contains(&"lo") => {
                let (mut a, mut b) = (arg(self, 1), arg(self, 2));
                let mut w = bits;
                if parts.contains(&"wide") {
                    a = self.f.intern(Expr::Ext { of: a, from: bits as u8, signed });
                    b = self.f.intern(Expr::Ext { of: b, from: bits as u8, signed });
                    w = 2 * bits;
                }
                let p = self.f.intern(Expr::Ring(Ring::Mul, a, b, w as u8));
                if head == "mad" {
                    let c = arg(self, 3);
                    self.f.intern(Expr::Ring(Ring::Add, p, c, w as u8))
                } else {
                    p
                }
            }
            ("rem" | "div" | "and" | "or" | "shr" | "min" | "max", Some((bits, signed))) => {
                let op = match head {
                    "rem" => ExactOp::Rem,
                    "div" => ExactOp::Div,
                    "and" => ExactOp::And,
                    "or" => ExactOp::Or,
                    "shr" => ExactOp::Shr,
                    "min" => ExactOp::Min,
                    _ => ExactOp::Max,
                };
                let (a, b) = (arg(self, 1), arg(self, 2));
                self.f.intern(Expr::Exact(op, a, b, bits as u8, signed))
            }
            ("and" | "or", None) if parts.contains(&"pred") => {
                let (a, b) = (arg(self, 1), arg(self, 2));
                self.f.intern(if head == "and" { Expr::And(a, b) } else { Expr::Or(a, b) })
            }
            ("not", None) if parts.contains(&"pred") => {
                let a = arg(self, 1);
                self.f.intern(Expr::Not(a))
            }
            ("selp", _) => {
                let (a, b, c) = (arg(self, 1), arg(self, 2), arg(self, 3));
                self.f.intern(Expr::Select(c, a, b))
            }
            ("setp", _) => return self.setp(ins, item, st, &parts, float, n),
            _ => return opaque(self),
        };
        vec![v; n]
    }

    /// `setp.CMP[.BOOL].TYPE p[|q], a, b[, c]`.
    fn setp(&mut self, ins: &Instr, item: usize, st: &State, parts: &[&str], float: bool, n: usize) -> Vec<ExprId> {
        let cmp = parts.get(1).and_then(|c| {
            Some(match *c {
                "eq" => (Cmp::Eq, None),
                "ne" => (Cmp::Ne, None),
                "lt" => (Cmp::Lt, None),
                "le" => (Cmp::Le, None),
                "gt" => (Cmp::Gt, None),
                "ge" => (Cmp::Ge, None),
                "lo" => (Cmp::Lt, Some(false)),
                "ls" => (Cmp::Le, Some(false)),
                "hi" => (Cmp::Gt, Some(false)),
                "hs" => (Cmp::Ge, Some(false)),
                _ => return None,
            })
        });
        let (Some((op, force_unsigned)), Some((bits, signed)), false) = (cmp, int_type(parts), float) else {
            return vec![self.opaque(Why::NotFollowed, item); n];
        };
        let signed = force_unsigned.unwrap_or(signed) && matches!(op, Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge);
        let a = self.value(&ins.operands[1], st, item);
        let b = match ins.operands.get(2) {
            Some(o) => self.value(o, st, item),
            None => return vec![self.opaque(Why::NotFollowed, item); n],
        };
        let t = self.f.intern(Expr::Cmp(op, a, b, bits as u8, signed));
        let nt = self.f.intern(Expr::Not(t));
        let combine = |me: &mut Self, x: ExprId| -> ExprId {
            match parts.get(2).copied() {
                Some("and") | Some("or") => {
                    let c = match ins.operands.get(3) {
                        Some(o) => me.value(o, st, item),
                        None => me.opaque(Why::NotFollowed, item),
                    };
                    me.f.intern(if parts[2] == "and" { Expr::And(x, c) } else { Expr::Or(x, c) })
                }
                Some("xor") => me.opaque(Why::NotFollowed, item),
                _ => x,
            }
        };
        let p = combine(self, t);
        let q = combine(self, nt);
        let mut out = vec![p, q];
        out.resize(n.max(2), q);
        out
    }

    /// `ld.param.T d, [name]`: a buffer's pointer or a scalar's value (low `T` bits, extended).
    fn param_load(&mut self, ins: &Instr, item: usize, ty: Option<(u32, bool)>) -> ExprId {
        let addr = ins.operands.get(1).map(|o| o.trim().trim_start_matches('[').trim_end_matches(']').trim()).unwrap_or("");
        let (Some(&p), Some((bits, signed))) = (self.params.get(addr), ty) else { return self.opaque(Why::NotFollowed, item) };
        if (self.is_buffer)(p) {
            return if bits == 64 { self.f.intern(Expr::Base(p)) } else { self.opaque(Why::NotFollowed, item) };
        }
        let s = self.f.intern(Expr::Scalar(p));
        self.f.intern(Expr::Ext { of: s, from: bits as u8, signed })
    }
}

/// `u32` → (32, false), `s64` → (64, true), `b16` → (16, false).
fn int_width(p: &str) -> Option<(u32, bool)> {
    let (signed, rest) = match p.as_bytes().first()? {
        b's' => (true, &p[1..]),
        b'u' | b'b' => (false, &p[1..]),
        _ => return None,
    };
    let bits: u32 = rest.parse().ok()?;
    matches!(bits, 8 | 16 | 32 | 64).then_some((bits, signed))
}

/// The integer type an opcode computes in (its last type qualifier).
fn int_type(parts: &[&str]) -> Option<(u32, bool)> {
    parts.iter().skip(1).rev().find_map(|p| int_width(p))
}
