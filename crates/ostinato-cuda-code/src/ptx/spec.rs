//! An entry's expressions ([`super::affine`]) evaluated for one node: its geometry and scalar
//! arguments substituted, every expression folded into a polynomial over `%ctaid`, `%tid`, loop
//! counters and bounded values ([`super::poly`]), or the reason it cannot be.
//!
//! - A value widened from `w` bits (`cvt`, `mul.wide`, a narrow param) equals its polynomial only
//!   where the polynomial stays in the `w`-bit range: each widening is a *guard* the caller checks
//!   from the bounds before it trusts the value.
//! - A remainder, quotient, mask, shift or min/max of exact operands (their guards hold, their range
//!   fits the register) is followed where its result is one of them (`i % n` with `i < n`, `(4·t)/4`)
//!   and bounded otherwise (`i % 5` in `[0, 4]`).
//! - A phi at a loop head is an induction `i0 + k·step` where every way into the loop gives the same
//!   `i0` and every way round adds the same constant; the loop's counter `k` is bounded by the first
//!   iteration at which a condition its back edges hold fails ([`Spec::first_failure`]). Other phis
//!   are followed where every path that can run gives the same value, or bounded over their ranges.

use std::collections::{HashMap, HashSet};

pub use super::affine::domain;
use super::affine::{Cmp, ExactOp, Expr, ExprId, Fact, Forms, Ring, Special, Why};
use super::poly::{Poly, Range, Var};

/// Why an expression has no polynomial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhyNot {
    /// It depends on an opaque value made by this instruction (item index).
    Opaque(Why, usize),
    /// On a value its loop carries that is not an induction (the register's name).
    Carried(String),
    /// On which path reaches it (the register).
    Path(String),
    /// On a loop counter no condition bounds (the loop head's first item).
    Unbounded(usize),
    /// A value of the instruction (item) may wrap in its register before it is widened or compared.
    Wraps(Option<usize>),
    /// Not of a form the analysis follows (a product too large, a shift by a variable).
    Form(Option<usize>),
}

/// A polynomial and the widenings (`Ext` expressions) it is exact under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Val {
    pub poly: Poly,
    pub guards: Vec<ExprId>,
}

impl Val {
    fn of(poly: Poly) -> Val {
        Val { poly, guards: Vec::new() }
    }
    fn with(poly: Poly, a: &Val, b: &Val) -> Val {
        let mut guards: Vec<ExprId> = a.guards.iter().chain(&b.guards).copied().collect();
        guards.sort_unstable();
        guards.dedup();
        Val { poly, guards }
    }
}

/// The most phis one evaluation follows into one another.
const MAX_PHI_DEPTH: usize = 32;
/// The most expressions one evaluation may be inside at once (each a level of recursion).
const MAX_EVAL_DEPTH: usize = 1024;

/// A node's launch and scalars, as the check sees them.
pub struct Node<'a> {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Per param: a scalar's bytes (zero-extended), `None` for a buffer.
    pub scalars: &'a [Option<u64>],
}

/// An induction `init + step·k` of a loop head's register, in `bits`-bit arithmetic.
#[derive(Clone, Debug)]
pub struct Induction {
    pub init: Val,
    pub step: i128,
    pub bits: Option<u8>,
}

/// A linear condition on the node's symbols: `poly ≥ 0`, or `poly = 0` where `eq`.
#[derive(Clone, Debug)]
pub struct Constraint {
    pub poly: Poly,
    pub eq: bool,
}

type Saved = (HashMap<ExprId, Result<Val, WhyNot>>, HashSet<ExprId>, HashMap<ExprId, (Poly, i128, i128)>, Option<(u32, u32)>, Vec<Constraint>);

/// The evaluation of one entry's expressions for one node, under bounds on the loop counters.
pub struct Spec<'a> {
    pub forms: &'a Forms,
    node: &'a Node<'a>,
    /// The most iterations of each loop (by head block) known so far.
    pub iters: HashMap<u32, i128>,
    /// The ranges of the bounded values made so far.
    pub bounded: Vec<(i128, i128)>,
    memo: HashMap<ExprId, Result<Val, WhyNot>>,
    busy: HashSet<ExprId>,
    /// Each guard: the polynomial and the range it must stay in.
    guards: HashMap<ExprId, (Poly, i128, i128)>,
    /// While recognising an induction: the loop head and register whose previous value is `Prev`.
    prev: Option<(u32, u32)>,
    pub inductions: HashMap<(u32, u32), Induction>,
    /// Conditions known to hold where the value evaluated is used (an access's), which narrow ranges.
    pub context: Vec<Constraint>,
    /// How many times an evaluation met an expression it was evaluating (a cycle through a phi).
    cycles: u64,
    /// The phis being evaluated, across the recognition of inductions (which starts afresh).
    phi_stack: Vec<(u32, u32)>,
    /// How many evaluations are under way (the recursion's depth, across phis).
    depth: usize,
}

/// The register value of the exact integer `v` in `bits` bits, read signed or not.
fn in_register(v: i128, bits: u8, signed: bool) -> i128 {
    let m = 1i128 << bits;
    let r = v.rem_euclid(m);
    if signed && r >= m / 2 {
        r - m
    } else {
        r
    }
}

impl<'a> Spec<'a> {
    pub fn new(forms: &'a Forms, node: &'a Node<'a>, iters: HashMap<u32, i128>) -> Spec<'a> {
        Spec {
            forms,
            node,
            iters,
            bounded: Vec::new(),
            memo: HashMap::new(),
            busy: HashSet::new(),
            guards: HashMap::new(),
            prev: None,
            inductions: HashMap::new(),
            context: Vec::new(),
            cycles: 0,
            phi_stack: Vec::new(),
            depth: 0,
        }
    }

    /// The range each symbol takes: the grid, the block, the loop bounds known, the bounded values.
    pub fn bound(&self, v: Var) -> Range {
        let d = |x: u8| x as usize;
        match v {
            Var::Ctaid(i) => Some((0, i128::from(self.node.grid[d(i)]) - 1)),
            Var::Tid(i) => Some((0, i128::from(self.node.block[d(i)]) - 1)),
            Var::Iter(h) => self.iters.get(&h).map(|&k| (0, k)),
            Var::Bounded(i) => self.bounded.get(i as usize).copied(),
            Var::Base(_) | Var::Prev => None,
        }
    }
    pub fn range(&self, p: &Poly) -> Range {
        p.range(&|v| self.bound(v))
    }

    /// Whether every guard of `v` holds (where the context holds): `Err` names the widening that may wrap.
    pub fn check_guards(&self, v: &Val) -> Result<(), WhyNot> {
        for g in &v.guards {
            let wraps = || WhyNot::Wraps(self.forms.origin.get(g).copied());
            let Some((p, lo, hi)) = self.guards.get(g) else { return Err(wraps()) };
            match self.narrowed(p) {
                Some((a, b)) if a >= *lo && b <= *hi => {}
                _ => return Err(wraps()),
            }
        }
        Ok(())
    }

    /// The range of `p` where the context holds: `p` stays above `lo` where `p - k·c ≥ lo` for a
    /// condition `c ≥ 0` and any `k ≥ 0`, below `hi` where `p + k·c ≤ hi`. The `k` tried are 1 and
    /// each that cancels a symbol `p` and `c` share (a guard `8·lane < 128` bounds `16·lane`).
    pub fn narrowed(&self, p: &Poly) -> Range {
        let (mut a, mut b) = self.range(p).unwrap_or((i128::MIN, i128::MAX));
        for c in self.context.iter().filter(|c| !c.eq) {
            for k in cancelling_multiples(p, &c.poly) {
                let Some(kc) = c.poly.scale(k) else { continue };
                if let Some((x, _)) = p.sub(&kc).and_then(|d| self.range(&d)) {
                    a = a.max(x);
                }
                if let Some((_, y)) = p.add(&kc).and_then(|d| self.range(&d)) {
                    b = b.min(y);
                }
            }
        }
        (a > i128::MIN && b < i128::MAX).then_some((a, b))
    }

    /// The range of `v` where it is exact and fits a `bits`-bit register read signed or not.
    pub fn exact_range(&self, v: &Val, bits: u8, signed: bool) -> Option<(i128, i128)> {
        self.check_guards(v).ok()?;
        let (lo, hi) = self.narrowed(&v.poly)?;
        let (dlo, dhi) = domain(bits, signed);
        (lo >= dlo && hi <= dhi).then_some((lo, hi))
    }

    fn origin(&self, e: ExprId) -> Option<usize> {
        self.forms.origin.get(&e).copied()
    }
    fn reg_name(&self, r: u32) -> String {
        self.forms.regs.get(r as usize).cloned().unwrap_or_else(|| format!("register {r}"))
    }
    fn new_bounded(&mut self, lo: i128, hi: i128) -> Poly {
        self.bounded.push((lo, hi));
        Poly::var(Var::Bounded(self.bounded.len() as u32 - 1))
    }

    /// The polynomial of expression `e`.
    pub fn eval(&mut self, e: ExprId) -> Result<Val, WhyNot> {
        if let Some(r) = self.memo.get(&e) {
            return r.clone();
        }
        // Expressions are at most MAX_EXPR_DEPTH deep, but phis lead on into other blocks' values:
        // the recursion is bounded here too.
        if self.depth >= MAX_EVAL_DEPTH {
            return Err(WhyNot::Opaque(Why::TooDeep, self.origin(e).unwrap_or(0)));
        }
        if !self.busy.insert(e) {
            self.cycles += 1;
            return Err(WhyNot::Form(self.origin(e)));
        }
        let cycles = self.cycles;
        self.depth += 1;
        let r = self.eval_uncached(e);
        self.depth -= 1;
        self.busy.remove(&e);
        // A result that met a value still being evaluated is not the value's own: not kept.
        if self.cycles == cycles {
            self.memo.insert(e, r.clone());
        }
        r
    }

    fn eval_uncached(&mut self, e: ExprId) -> Result<Val, WhyNot> {
        let origin = self.origin(e);
        let form = || WhyNot::Form(origin);
        let node = self.node;
        Ok(match self.forms.expr(e).clone() {
            Expr::Const(c) => Val::of(Poly::constant(c)),
            Expr::Special(s, d) => Val::of(match s {
                Special::Ctaid => Poly::var(Var::Ctaid(d)),
                Special::Tid => Poly::var(Var::Tid(d)),
                Special::Ntid => Poly::constant(i128::from(node.block[d as usize])),
                Special::Nctaid => Poly::constant(i128::from(node.grid[d as usize])),
            }),
            Expr::Scalar(p) => Val::of(Poly::constant(i128::from(node.scalars.get(p).copied().flatten().ok_or_else(form)?))),
            Expr::Base(p) => Val::of(Poly::var(Var::Base(p as u32))),
            Expr::Ring(op, a, b, bits) => {
                let (va, vb) = (self.eval(a)?, self.eval(b)?);
                let p = match op {
                    Ring::Add => va.poly.add(&vb.poly),
                    Ring::Sub => va.poly.sub(&vb.poly),
                    Ring::Mul => va.poly.mul(&vb.poly),
                    Ring::Shl => match vb.poly.as_const() {
                        Some(c) if (0..i128::from(bits)).contains(&c) => va.poly.scale(1i128 << c),
                        _ => None,
                    },
                };
                Val::with(p.ok_or_else(form)?.wrap(u32::from(bits)), &va, &vb)
            }
            Expr::Ext { of, from, signed } => {
                let v = self.eval(of)?;
                if let Some(c) = v.poly.as_const() {
                    return Ok(Val::of(Poly::constant(in_register(c, from, signed))));
                }
                let (lo, hi) = domain(from, signed);
                self.guards.insert(e, (v.poly.clone(), lo, hi));
                let mut guards = v.guards.clone();
                guards.push(e);
                guards.sort_unstable();
                guards.dedup();
                Val { poly: v.poly, guards }
            }
            Expr::Exact(op, a, b, bits, signed) => self.exact(e, op, a, b, bits, signed)?,
            Expr::Select(c, a, b) => match self.decide(c) {
                Some(true) => self.eval(a)?,
                Some(false) => self.eval(b)?,
                None => {
                    let (va, vb) = (self.eval(a)?, self.eval(b)?);
                    let why = WhyNot::Path(self.origin(e).map_or_else(|| "a selected value".into(), |i| format!("item {i}")));
                    self.merge(&[va, vb], why)?
                }
            },
            Expr::Phi(h, r) => self.phi(h, r)?,
            Expr::Opaque(why, item) => return Err(WhyNot::Opaque(why, item)),
            Expr::Cmp(..) | Expr::Not(_) | Expr::And(..) | Expr::Or(..) => return Err(form()),
        })
    }

    /// One of several values: their polynomial where they agree, else a bounded value over the
    /// union of their ranges (it is congruent to the register whichever is taken), else `why`.
    fn merge(&mut self, vals: &[Val], why: WhyNot) -> Result<Val, WhyNot> {
        let mut guards: Vec<ExprId> = vals.iter().flat_map(|v| v.guards.iter().copied()).collect();
        guards.sort_unstable();
        guards.dedup();
        if vals.iter().all(|v| v.poly == vals[0].poly) {
            return Ok(Val { poly: vals[0].poly.clone(), guards });
        }
        let mut hull: Option<(i128, i128)> = None;
        for v in vals {
            let (lo, hi) = self.narrowed(&v.poly).ok_or_else(|| why.clone())?;
            hull = Some(hull.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        let (lo, hi) = hull.ok_or(why)?;
        Ok(Val { poly: self.new_bounded(lo, hi), guards })
    }

    /// A remainder, quotient, mask, shift, min or max.
    fn exact(&mut self, e: ExprId, op: ExactOp, a: ExprId, b: ExprId, bits: u8, signed: bool) -> Result<Val, WhyNot> {
        let (va, vb) = (self.register_value(a, bits, signed)?, self.register_value(b, bits, signed)?);
        let not_followed = WhyNot::Opaque(Why::NotFollowed, self.origin(e).unwrap_or(0));
        let (Some(ra), Some(rb)) = (self.exact_range(&va, bits, signed), self.exact_range(&vb, bits, signed)) else {
            return Err(WhyNot::Wraps(self.origin(e)));
        };
        let keep = |v: &Val| Val::with(v.poly.clone(), &va, &vb);
        if let (Some(x), Some(y)) = (va.poly.as_const(), vb.poly.as_const()) {
            let v = match op {
                ExactOp::Rem | ExactOp::Div if y == 0 => return Err(not_followed),
                ExactOp::Rem => x % y,
                ExactOp::Div => x / y,
                ExactOp::And => in_register(in_register(x, bits, false) & in_register(y, bits, false), bits, signed),
                ExactOp::Or => in_register(in_register(x, bits, false) | in_register(y, bits, false), bits, signed),
                ExactOp::Shr if !(0..i128::from(bits)).contains(&y) => return Err(not_followed),
                ExactOp::Shr => x >> y,
                ExactOp::Min => x.min(y),
                ExactOp::Max => x.max(y),
            };
            return Ok(Val::of(Poly::constant(v)));
        }
        if op == ExactOp::Or {
            return self.or_as_add(&va, &vb, ra, rb).ok_or(not_followed);
        }
        let y = vb.poly.as_const();
        let p = match (op, y) {
            (ExactOp::Rem, Some(m)) if m > 0 && ra.0 >= 0 && ra.1 < m => return Ok(keep(&va)),
            (ExactOp::Rem, Some(m)) if m > 0 && ra.0 >= 0 => self.new_bounded(0, (m - 1).min(ra.1)),
            (ExactOp::Rem, Some(m)) if m > 0 => self.new_bounded(-(m - 1), m - 1),
            (ExactOp::Div, Some(d)) if d > 0 => match va.poly.exact_div(d) {
                Some(q) => return Ok(Val::with(q, &va, &vb)),
                None => self.new_bounded(ra.0 / d, ra.1 / d),
            },
            (ExactOp::Shr, Some(k)) if (0..i128::from(bits)).contains(&k) => match va.poly.exact_div(1i128 << k) {
                Some(q) => return Ok(Val::with(q, &va, &vb)),
                None => self.new_bounded(ra.0 >> k, ra.1 >> k),
            },
            (ExactOp::And, Some(m)) if ra.0 >= 0 => {
                let m = in_register(m, bits, false);
                if m & (m + 1) == 0 && ra.1 <= m {
                    return Ok(keep(&va));
                }
                // A mask with its low `t` bits clear leaves a multiple of `2^t` (an index rounded
                // down to a warp's or a row's start): kept as one, so that an `or` into those bits is
                // known to be an add.
                let t = m.trailing_zeros().min(64);
                let q = self.new_bounded(0, m.min(ra.1) >> t);
                match q.scale(1i128 << t) {
                    Some(p) => p,
                    None => return Err(not_followed),
                }
            }
            (ExactOp::Min | ExactOp::Max, _) => {
                let min = op == ExactOp::Min;
                if ra.1 <= rb.0 {
                    return Ok(if min { keep(&va) } else { Val::with(vb.poly.clone(), &va, &vb) });
                }
                if rb.1 <= ra.0 {
                    return Ok(if min { Val::with(vb.poly.clone(), &va, &vb) } else { keep(&va) });
                }
                if min {
                    self.new_bounded(ra.0.min(rb.0), ra.1.min(rb.1))
                } else {
                    self.new_bounded(ra.0.max(rb.0), ra.1.max(rb.1))
                }
            }
            _ => return Err(not_followed),
        };
        Ok(Val::with(p, &va, &vb))
    }

    /// `a | b` where no bit of one can meet a bit of the other: then it is `a + b`. Known where both
    /// are non-negative and one is a multiple of `2^t` (its polynomial's every coefficient is) while
    /// the other lies below `2^t` (a constant's bits above an index's, an aligned base and an offset
    /// into it). Else `None`.
    fn or_as_add(&self, va: &Val, vb: &Val, ra: (i128, i128), rb: (i128, i128)) -> Option<Val> {
        if ra.0 < 0 || rb.0 < 0 {
            return None;
        }
        let below = |v: &Val, r: (i128, i128)| {
            let t = pow2_divisor(&v.poly);
            t >= 127 || r.1 < (1i128 << t)
        };
        let sum = || Some(Val::with(va.poly.add(&vb.poly)?, va, vb));
        if below(va, rb) || below(vb, ra) {
            return sum();
        }
        // A constant `c` into a value `x = H + L` whose terms are multiples of `2^hb` (above `c`'s
        // highest bit) but for a part `0 <= L < 2^lb` (below `c`'s lowest bit): `x`'s bits miss `c`'s.
        let (x, c) = match (va.poly.as_const(), vb.poly.as_const()) {
            (None, Some(c)) => (&va.poly, c),
            (Some(c), None) => (&vb.poly, c),
            _ => return None,
        };
        if c <= 0 {
            return None;
        }
        let (hb, lb) = (128 - c.leading_zeros(), c.trailing_zeros());
        let mut low = Poly::constant(0);
        for (m, k) in x.terms() {
            if k.trailing_zeros() < hb {
                let mut term = Poly::constant(k);
                for &v in m {
                    term = term.mul(&Poly::var(v))?;
                }
                low = low.add(&term)?;
            }
        }
        let (lo, hi) = self.narrowed(&low)?;
        (lo >= 0 && hi < (1i128 << lb)).then(sum).flatten()
    }

    /// The value of `e`, a constant read as the `bits`-bit register holds it.
    fn register_value(&mut self, e: ExprId, bits: u8, signed: bool) -> Result<Val, WhyNot> {
        let v = self.eval(e)?;
        Ok(match v.poly.as_const() {
            Some(c) => Val::of(Poly::constant(in_register(c, bits, signed))),
            None => v,
        })
    }

    /// Whether predicate `p` holds for every thread of the node (`None`: it depends).
    pub fn decide(&mut self, p: ExprId) -> Option<bool> {
        match self.forms.expr(p).clone() {
            Expr::Cmp(op, a, b, bits, signed) => {
                let (va, vb) = (self.eval(a).ok()?, self.eval(b).ok()?);
                let (x, y) = match (va.poly.as_const(), vb.poly.as_const()) {
                    (Some(x), Some(y)) => {
                        ((in_register(x, bits, signed), in_register(x, bits, signed)), (in_register(y, bits, signed), in_register(y, bits, signed)))
                    }
                    _ => (self.exact_range(&va, bits, signed)?, self.exact_range(&vb, bits, signed)?),
                };
                let (lt, ge) = (x.1 < y.0, x.0 >= y.1);
                let (le, gt) = (x.1 <= y.0, x.0 > y.1);
                let single = x.0 == x.1 && y.0 == y.1;
                match op {
                    Cmp::Lt if lt || ge => Some(lt),
                    Cmp::Le if le || gt => Some(le),
                    Cmp::Gt if gt || le => Some(gt),
                    Cmp::Ge if ge || lt => Some(ge),
                    Cmp::Eq if single || lt || gt => Some(single && x.0 == y.0),
                    Cmp::Ne if single || lt || gt => Some(!(single && x.0 == y.0)),
                    _ => None,
                }
            }
            Expr::Not(q) => self.decide(q).map(|v| !v),
            Expr::And(a, b) => match (self.decide(a), self.decide(b)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Expr::Or(a, b) => match (self.decide(a), self.decide(b)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether an edge with these facts can be taken by some thread (false where one surely fails).
    fn feasible(&mut self, facts: &[Fact]) -> bool {
        facts.iter().all(|&(p, holds)| self.decide(p) != Some(!holds))
    }

    /// The value of register `r` at the start of block `h`.
    fn phi(&mut self, h: u32, r: u32) -> Result<Val, WhyNot> {
        if let Some((ph, pr)) = self.prev {
            if ph == h {
                return if pr == r { Ok(Val::of(Poly::var(Var::Prev))) } else { Err(WhyNot::Carried(self.reg_name(r))) };
            }
        }
        // Phis whose values depend on each other round loops, or nested too deep: not followed.
        if self.phi_stack.contains(&(h, r)) || self.phi_stack.len() >= MAX_PHI_DEPTH {
            self.cycles += 1;
            return Err(WhyNot::Carried(self.reg_name(r)));
        }
        self.phi_stack.push((h, r));
        let v = self.phi_value(h, r);
        self.phi_stack.pop();
        v
    }

    fn phi_value(&mut self, h: u32, r: u32) -> Result<Val, WhyNot> {
        let incoming = self.forms.phis.get(&(h, r)).cloned().unwrap_or_default();
        let live: Vec<_> = incoming.into_iter().filter(|i| self.feasible(&i.facts)).collect();
        let (into, round): (Vec<_>, Vec<_>) = live.into_iter().partition(|i| !i.back);
        let mut alternatives = Vec::new();
        for i in &into {
            alternatives.push(self.eval(i.value.ok_or_else(|| WhyNot::Path(self.reg_name(r)))?)?);
        }
        if alternatives.is_empty() {
            return Err(WhyNot::Carried(self.reg_name(r)));
        }
        let init = self.merge(&alternatives, WhyNot::Path(self.reg_name(r)))?;
        if round.is_empty() {
            return Ok(init);
        }
        // Each way round: its value with this register's previous value as `Prev`.
        let saved: Saved = (
            std::mem::take(&mut self.memo),
            std::mem::take(&mut self.busy),
            std::mem::take(&mut self.guards),
            self.prev.replace((h, r)),
            std::mem::take(&mut self.context),
        );
        let mut step: Option<i128> = None;
        let mut bits = None;
        let mut ok = true;
        for i in &round {
            let Some(value) = i.value else {
                ok = false;
                break;
            };
            bits = match self.forms.expr(value) {
                Expr::Ring(_, _, _, b) => Some(*b),
                _ => None,
            };
            let c = match self.eval(value) {
                Ok(v) if v.guards.is_empty() => v.poly.sub(&Poly::var(Var::Prev)).and_then(|d| d.as_const()),
                _ => None,
            };
            match (c, step) {
                (Some(c), None) => step = Some(c),
                (Some(c), Some(s)) if c == s => {}
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        (self.memo, self.busy, self.guards, self.prev, self.context) = saved;
        let (true, Some(step)) = (ok, step) else { return Err(WhyNot::Carried(self.reg_name(r))) };
        if self.prev.is_none() {
            self.inductions.insert((h, r), Induction { init: init.clone(), step, bits });
        }
        if step == 0 {
            return Ok(init);
        }
        let k = Poly::var(Var::Iter(h)).scale(step).and_then(|k| k.add(&init.poly)).ok_or(WhyNot::Form(None))?;
        Ok(Val { poly: k, guards: init.guards })
    }

    /// The comparisons a fact holds, each as `(op, a, b, bits, signed)` holding.
    pub fn atoms(&self, (p, holds): Fact, out: &mut Vec<(Cmp, ExprId, ExprId, u8, bool)>) {
        match self.forms.expr(p).clone() {
            Expr::Not(q) => self.atoms((q, !holds), out),
            Expr::And(a, b) if holds => {
                self.atoms((a, true), out);
                self.atoms((b, true), out);
            }
            Expr::Or(a, b) if !holds => {
                self.atoms((a, false), out);
                self.atoms((b, false), out);
            }
            Expr::Cmp(op, a, b, bits, signed) => out.push((if holds { op } else { op.negated() }, a, b, bits, signed)),
            _ => {}
        }
    }

    /// The first iteration `j` of the loop headed by `h` at which comparison `atom`, evaluated on the
    /// values of iteration `j` as exact integers, fails, for every thread (`None`: not found). Where
    /// `atom` holds on every back edge, the loop cannot go round past that iteration provided the
    /// values stay exact over it ([`Spec::exact_atom`] checks that).
    pub fn first_failure(&mut self, h: u32, (op, a, b, bits, signed): (Cmp, ExprId, ExprId, u8, bool)) -> Option<i128> {
        let (va, vb) = (self.register_value(a, bits, signed).ok()?, self.register_value(b, bits, signed).ok()?);
        let one = Poly::constant(1);
        // d ≥ 0 (or d ≠ 0) while the comparison holds.
        let d = match op {
            Cmp::Lt => vb.poly.sub(&va.poly)?.sub(&one)?,
            Cmp::Le => vb.poly.sub(&va.poly)?,
            Cmp::Gt => va.poly.sub(&vb.poly)?.sub(&one)?,
            Cmp::Ge => va.poly.sub(&vb.poly)?,
            Cmp::Ne => va.poly.sub(&vb.poly)?,
            Cmp::Eq => return None,
        };
        let k = Var::Iter(h);
        if d.terms().any(|(m, _)| m.contains(&k) && m.len() != 1) {
            return None;
        }
        let c = d.coeff(&[k]);
        let d0 = d.substitute(&|v| (v == k).then(|| Poly::constant(0)))?;
        if op == Cmp::Ne {
            let d0 = d0.as_const()?;
            return (c != 0 && d0 % c == 0 && -d0 / c >= 0).then(|| -d0 / c);
        }
        if c >= 0 {
            return None;
        }
        let (_, hi) = self.range(&d0)?;
        Some((hi.div_euclid(-c) + 1).max(0))
    }

    /// Whether both sides of `atom` are exact and fit its registers under the present bounds.
    pub fn exact_atom(&mut self, (_, a, b, bits, signed): (Cmp, ExprId, ExprId, u8, bool)) -> bool {
        let (Ok(va), Ok(vb)) = (self.register_value(a, bits, signed), self.register_value(b, bits, signed)) else { return false };
        self.exact_range(&va, bits, signed).is_some() && self.exact_range(&vb, bits, signed).is_some()
    }

    /// The facts as linear conditions, where both sides are exact (a fact the analysis cannot read
    /// exactly is left out: the conditions then hold of a superset of the threads that run).
    pub fn constraints(&mut self, facts: &[Fact]) -> Vec<Constraint> {
        let mut out = Vec::new();
        for &f in facts {
            self.constrain(f, &mut out);
        }
        out
    }

    fn constrain(&mut self, (p, holds): Fact, out: &mut Vec<Constraint>) {
        match self.forms.expr(p).clone() {
            Expr::Not(q) => self.constrain((q, !holds), out),
            Expr::And(a, b) if holds => {
                self.constrain((a, true), out);
                self.constrain((b, true), out);
            }
            Expr::Or(a, b) if !holds => {
                self.constrain((a, false), out);
                self.constrain((b, false), out);
            }
            Expr::Cmp(op, a, b, bits, signed) => {
                let op = if holds { op } else { op.negated() };
                let (Ok(va), Ok(vb)) = (self.register_value(a, bits, signed), self.register_value(b, bits, signed)) else { return };
                if self.exact_range(&va, bits, signed).is_none() || self.exact_range(&vb, bits, signed).is_none() {
                    return;
                }
                let (x, y) = (&va.poly, &vb.poly);
                let one = Poly::constant(1);
                let c = match op {
                    Cmp::Lt => y.sub(x).and_then(|d| d.sub(&one)).map(|poly| Constraint { poly, eq: false }),
                    Cmp::Le => y.sub(x).map(|poly| Constraint { poly, eq: false }),
                    Cmp::Gt => x.sub(y).and_then(|d| d.sub(&one)).map(|poly| Constraint { poly, eq: false }),
                    Cmp::Ge => x.sub(y).map(|poly| Constraint { poly, eq: false }),
                    Cmp::Eq => x.sub(y).map(|poly| Constraint { poly, eq: true }),
                    Cmp::Ne => None,
                };
                out.extend(c);
            }
            _ => {}
        }
    }
}

/// The multipliers [`Spec::narrowed`] tries for a condition `c ≥ 0` on `p`: 1, and each `|p's
/// coefficient / c's coefficient|` of a symbol term both have where it divides evenly (at most 8).
fn cancelling_multiples(p: &Poly, c: &Poly) -> Vec<i128> {
    let mut ks = vec![1];
    for (m, cc) in c.terms() {
        let pc = p.coeff(m);
        if m.is_empty() || pc == 0 || pc % cc != 0 {
            continue;
        }
        let k = (pc / cc).abs();
        if k > 1 && !ks.contains(&k) && ks.len() < 8 {
            ks.push(k);
        }
    }
    ks
}

/// The largest `t` with every coefficient of `p` (its constant too) a multiple of `2^t`: 127 for the
/// zero polynomial.
fn pow2_divisor(p: &Poly) -> u32 {
    p.terms().map(|(_, c)| c.trailing_zeros()).min().unwrap_or(127).min(127)
}
