//! A node's declared tile maps checked against its kernel's PTX: for each buffer param with a map,
//! whether every access of block `b` provably falls inside block `b`'s tile, for every `b`
//! (**verified**), whether a thread is seen to leave it (**contradicted**, with the thread and the
//! instruction), or neither (**unknown**, with why).
//!
//! Each access's address ([`super::affine`]) is evaluated for the node ([`super::spec`]): a
//! polynomial in `%ctaid`, `%tid`, loop counters and bounded values, plus the param's pointer. Then:
//!
//! - where the offset moves with the block index exactly as every range of the map does (its
//!   `%ctaid` coefficients are the map's strides), block 0 stands for all blocks: it is checked alone,
//!   without the conditions that depend on the block (a superset of what it touches);
//! - otherwise each block is checked, up to a budget. A block's offsets are enumerated over its
//!   threads and loop counters, the conditions that hold where the access runs cutting them, one
//!   dimension kept as an interval where consecutive values touch adjacent bytes; a bounded value
//!   adds its whole range. Each resulting byte interval must lie in the block's tile.
//!
//! A block that may leave its tile is a candidate; one thread of it is then run ([`super::witness`]):
//! an access it surely makes outside the tile contradicts the map. Without one, the map is unknown.

use std::collections::HashMap;

use ostinato::tiles::{block_at, block_count};
use ostinato::TileMap;

use super::affine::{self, Forms, Width};
use super::parse::{Entry, ModuleInfo};
use super::poly::{Poly, Var};
use super::spec::{Constraint, Node, Spec, WhyNot};
use super::taint::{Flow, Target};
use super::witness::{self, Thread};

/// The most offsets (points of a block's threads and counters) one access's check enumerates.
const BUDGET: u64 = 1 << 22;
/// The threads run to look for a witness, per param.
const MAX_WITNESSES: usize = 12;

/// Where an access goes, by the address-provenance analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Goes {
    Params(Vec<usize>),
    /// Any buffer (a pointer loaded from memory, a call, a texture).
    Anywhere,
    /// Memory of the kernel's own (shared, local) or of the module.
    Elsewhere,
}

/// One entry read for the tile check (done once per kernel; [`EntryTiles::check`] per node).
pub struct EntryTiles {
    entry: Entry,
    forms: Forms,
    goes: Vec<Goes>,
}

/// Why a param's map is not verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unverified {
    /// The address of the access does not reduce to a polynomial.
    Not(WhyNot),
    /// The access may touch any buffer.
    Anywhere,
    /// The address is not this param's pointer plus an offset.
    NotOffset,
    /// The access size is not a constant.
    Width,
    /// This block may touch these bytes outside its tile, and no thread was seen to.
    Uncovered { block: [u32; 3], bytes: (i128, i128) },
    /// More blocks, threads and iterations than the budget, and the offset does not move with the map.
    TooLarge,
    /// The entry as a whole is not followed.
    Entry(String),
}

/// The outcome for one param.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Verified,
    /// `thread` of `block` touches `bytes` of the slice (outside its tile) by instruction `item`.
    Contradicted {
        item: usize,
        block: [u32; 3],
        thread: [u32; 3],
        bytes: (i64, i64),
    },
    /// Not verified, at access `item` (none: the entry as a whole).
    Unknown {
        item: Option<usize>,
        why: Unverified,
    },
}

/// A node to check: its launch and scalars, the declared maps (per param), each slice's start.
pub struct Case<'a> {
    pub node: Node<'a>,
    pub maps: &'a [Option<&'a TileMap>],
    pub align: &'a [u64],
}

/// What one access showed.
enum Outcome {
    Covered,
    Unknown(Unverified),
    /// Not covered: the block, some of its threads to run, the bytes.
    Uncovered([u32; 3], Vec<[u32; 3]>, (i128, i128)),
}

#[cfg(test)]
thread_local! {
    /// A mutation for the tests: block 0 stands for every block even where the offset does not move
    /// as the map does.
    pub(crate) static IGNORE_STRIDES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn ignore_strides() -> bool {
    #[cfg(test)]
    {
        IGNORE_STRIDES.with(|c| c.get())
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// Reads `entry` for the tile check. `is_buffer(i)`: param `i` is a pointer.
pub fn analyse(module: &ModuleInfo, entry: &Entry, is_buffer: &dyn Fn(usize) -> bool) -> EntryTiles {
    let forms = affine::forms(entry, is_buffer);
    let flow = Flow::run(entry, module, |_| true);
    let goes = forms
        .accesses
        .iter()
        .map(|a| {
            let Some(super::Item::Instr(ins)) = entry.items.get(a.item) else { return Goes::Anywhere };
            if a.addr.is_none() {
                return Goes::Anywhere;
            }
            match flow.target(&ins.operands[a.operand], a.space) {
                Target::Params(ps) => {
                    let ps: Vec<usize> = ps.into_iter().filter(|&p| is_buffer(p)).collect();
                    if ps.is_empty() {
                        Goes::Anywhere
                    } else {
                        Goes::Params(ps)
                    }
                }
                Target::Unknown => Goes::Anywhere,
                Target::Private | Target::ModuleVars(_) => Goes::Elsewhere,
            }
        })
        .collect();
    EntryTiles { entry: entry.clone(), forms, goes }
}

impl EntryTiles {
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
    /// The scalar params a verdict can depend on: those the accesses' addresses, sizes and conditions,
    /// the paths into them and the loops' bounds are computed from. A patch of any other scalar
    /// changes no verdict.
    pub fn scalars_read(&self) -> std::collections::BTreeSet<usize> {
        let f = &self.forms;
        let mut todo: Vec<affine::ExprId> = Vec::new();
        for a in &f.accesses {
            todo.extend(a.addr);
            if let Some(Width::Expr(e)) = a.width {
                todo.push(e);
            }
            todo.extend(a.facts.iter().map(|&(p, _)| p));
        }
        todo.extend(f.back.values().flatten().map(|&(p, _)| p));
        let mut seen = std::collections::HashSet::new();
        let mut out = std::collections::BTreeSet::new();
        while let Some(e) = todo.pop() {
            if !seen.insert(e) {
                continue;
            }
            match f.expr(e) {
                affine::Expr::Scalar(p) => _ = out.insert(*p),
                affine::Expr::Phi(h, r) => {
                    for i in f.phis.get(&(*h, *r)).into_iter().flatten() {
                        todo.extend(i.value);
                        todo.extend(i.facts.iter().map(|&(p, _)| p));
                    }
                }
                other => todo.extend(other.operands()),
            }
        }
        out
    }

    /// Why the entry as a whole is not followed, if it is not.
    pub fn forms_failed(&self) -> Option<&str> {
        self.forms.failed.as_deref()
    }

    /// The verdict for each param `case.maps` gives a map.
    pub fn check(&self, case: &Case) -> Vec<(usize, Verdict)> {
        let mapped: Vec<usize> = (0..case.maps.len()).filter(|&p| case.maps[p].is_some()).collect();
        let mut outcomes: HashMap<usize, Vec<(usize, Outcome)>> = HashMap::new();
        let iters = self.iteration_bounds(&case.node);
        for (a, goes) in self.forms.accesses.iter().zip(&self.goes) {
            let targets: Vec<usize> = match goes {
                Goes::Elsewhere => continue,
                Goes::Anywhere => mapped.clone(),
                Goes::Params(ps) => ps.iter().copied().filter(|p| mapped.contains(p)).collect(),
            };
            for p in targets {
                let o = match goes {
                    Goes::Params(ps) if ps.len() == 1 => self.access(a, p, iters.clone(), case),
                    Goes::Params(_) => Outcome::Unknown(Unverified::NotOffset),
                    _ => Outcome::Unknown(Unverified::Anywhere),
                };
                outcomes.entry(p).or_default().push((a.item, o));
            }
        }
        let mut runs: HashMap<([u32; 3], [u32; 3]), Vec<witness::Violation>> = HashMap::new();
        mapped
            .iter()
            .map(|&p| {
                let list = outcomes.remove(&p).unwrap_or_default();
                let failed = self.forms.failed.clone();
                if failed.is_none() && list.iter().all(|(_, o)| matches!(o, Outcome::Covered)) {
                    return (p, Verdict::Verified);
                }
                (p, self.refute(p, &list, failed, case, &mut runs))
            })
            .collect()
    }

    /// A param not verified: a witness where a thread run shows one, else why not.
    fn refute(
        &self,
        p: usize,
        list: &[(usize, Outcome)],
        failed: Option<String>,
        case: &Case,
        runs: &mut HashMap<([u32; 3], [u32; 3]), Vec<witness::Violation>>,
    ) -> Verdict {
        let g = case.node.grid;
        let t = case.node.block;
        let last = |d: [u32; 3]| [d[0] - 1, d[1] - 1, d[2] - 1];
        let mut tries: Vec<([u32; 3], [u32; 3])> = Vec::new();
        for (_, o) in list {
            if let Outcome::Uncovered(b, threads, _) = o {
                tries.extend(threads.iter().map(|&th| (*b, th)));
            }
        }
        tries.extend([([0; 3], [0; 3]), ([0; 3], last(t)), (last(g), [0; 3]), (last(g), last(t))]);
        let mut seen = Vec::new();
        for (b, th) in tries {
            if seen.contains(&(b, th)) || seen.len() >= MAX_WITNESSES {
                continue;
            }
            seen.push((b, th));
            let found = runs.entry((b, th)).or_insert_with(|| {
                let thread = Thread { grid: g, block: t, ctaid: b, tid: th, scalars: case.node.scalars, maps: case.maps, align: case.align };
                witness::run(&self.entry, &thread)
            });
            if let Some(v) = found.iter().find(|v| v.param == p) {
                return Verdict::Contradicted { item: v.item, block: b, thread: th, bytes: v.bytes };
            }
        }
        if let Some(why) = failed {
            return Verdict::Unknown { item: None, why: Unverified::Entry(why) };
        }
        let (item, why) = list
            .iter()
            .find_map(|(i, o)| match o {
                Outcome::Covered => None,
                Outcome::Unknown(w) => Some((*i, w.clone())),
                Outcome::Uncovered(b, _, bytes) => Some((*i, Unverified::Uncovered { block: *b, bytes: *bytes })),
            })
            .unwrap_or((0, Unverified::Anywhere));
        Verdict::Unknown { item: Some(item), why }
    }

    /// The most iterations of each loop: from each comparison every back edge of the loop holds, the
    /// first iteration at which it fails, where the values it compares stay exact up to it.
    fn iteration_bounds(&self, node: &Node) -> HashMap<u32, i128> {
        let headers: Vec<u32> = (0..self.forms.is_header.len() as u32).filter(|&h| self.forms.is_header[h as usize]).collect();
        let mut iters: HashMap<u32, i128> = HashMap::new();
        for _ in 0..=headers.len() {
            let mut grew = false;
            let open: Vec<u32> = headers.iter().copied().filter(|h| !iters.contains_key(h)).collect();
            for h in open {
                let mut s = Spec::new(&self.forms, node, iters.clone());
                let mut atoms = Vec::new();
                for &f in self.forms.back.get(&h).into_iter().flatten() {
                    s.atoms(f, &mut atoms);
                }
                let mut best: Option<i128> = None;
                for atom in atoms {
                    let Some(k) = s.first_failure(h, atom) else { continue };
                    if best.is_some_and(|b| b <= k) {
                        continue;
                    }
                    let mut bounded = iters.clone();
                    bounded.insert(h, k);
                    if Spec::new(&self.forms, node, bounded).exact_atom(atom) {
                        best = Some(k);
                    }
                }
                if let Some(k) = best {
                    iters.insert(h, k);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        iters
    }

    /// One access through param `p` against its map.
    fn access(&self, a: &affine::Access, p: usize, iters: HashMap<u32, i128>, case: &Case) -> Outcome {
        let Some(map) = case.maps[p] else { return Outcome::Covered };
        let Some(addr) = a.addr else { return Outcome::Unknown(Unverified::Anywhere) };
        // An access no thread of this node reaches.
        let mut probe = Spec::new(&self.forms, &case.node, iters.clone());
        if a.facts.iter().any(|&(f, holds)| probe.decide(f) == Some(!holds)) {
            return Outcome::Covered;
        }
        let first = self.access_under(a, addr, map, p, iters.clone(), case, false);
        if matches!(first, Outcome::Covered) {
            return first;
        }
        // Not shown covered under the conditions over the block's own symbols: again with the
        // conditions on the values the analysis bounds without following them (a guard
        // `8·(tid & 31) < k` on a masked lane), taken in the analysis that evaluates the address, so
        // that their symbols are the address's. Where that does not show it either, the first
        // outcome stands (its witness search and its message).
        match self.access_under(a, addr, map, p, iters, case, true) {
            Outcome::Covered => Outcome::Covered,
            _ => first,
        }
    }

    /// [`Self::access`] under the conditions where the access runs: those free of bounded symbols,
    /// from an analysis of their own (`with_bounded` false), or every one, from the address's.
    #[allow(clippy::too_many_arguments)]
    fn access_under(
        &self,
        a: &affine::Access,
        addr: affine::ExprId,
        map: &TileMap,
        p: usize,
        iters: HashMap<u32, i128>,
        case: &Case,
        with_bounded: bool,
    ) -> Outcome {
        let mut s = Spec::new(&self.forms, &case.node, iters.clone());
        if with_bounded {
            let all = s.constraints(&a.facts);
            s.context = all.into_iter().filter(|c| !c.poly.mentions(|v| matches!(v, Var::Prev))).collect();
        } else {
            let all = Spec::new(&self.forms, &case.node, iters).constraints(&a.facts);
            s.context = all.iter().filter(|c| !c.poly.mentions(|v| matches!(v, Var::Bounded(_) | Var::Prev))).cloned().collect();
        }
        let val = match s.eval(addr) {
            Ok(v) => v,
            Err(w) => return Outcome::Unknown(Unverified::Not(w)),
        };
        if let Err(w) = s.check_guards(&val) {
            return Outcome::Unknown(Unverified::Not(w));
        }
        let cons: Vec<Constraint> =
            s.context.iter().filter(|c| !c.poly.mentions(|v| matches!(v, Var::Base(_))) && unbounded(&c.poly, &s).is_none()).cloned().collect();
        let base = Var::Base(p as u32);
        let Some(off) = val.poly.sub(&Poly::var(base)) else { return Outcome::Unknown(Unverified::NotOffset) };
        if val.poly.coeff(&[base]) != 1 || off.mentions(|v| matches!(v, Var::Base(_) | Var::Prev)) {
            return Outcome::Unknown(Unverified::NotOffset);
        }
        if let Some(h) = unbounded(&off, &s) {
            return Outcome::Unknown(Unverified::Not(WhyNot::Unbounded(self.forms.block_start.get(h as usize).copied().unwrap_or(0))));
        }
        let width = match a.width {
            Some(Width::Bytes(w)) => Some(i128::from(w)),
            Some(Width::Expr(e)) => s.eval(e).ok().and_then(|v| v.poly.as_const()).filter(|&w| w > 0),
            None => None,
        };
        let Some(width) = width else { return Outcome::Unknown(Unverified::Width) };
        Cover { s: &s, map, width, grid: case.node.grid, budget: BUDGET }.run(&off, &cons)
    }
}

/// A loop counter of `p` with no bound.
fn unbounded(p: &Poly, s: &Spec) -> Option<u32> {
    p.terms().flat_map(|(m, _)| m.iter()).find_map(|&v| match v {
        Var::Iter(h) if s.bound(v).is_none() => Some(h),
        _ => None,
    })
}

/// The widest range of a bounded symbol that the coverage check enumerates value by value.
const MAX_ENUMERATED_BOUNDED: i128 = 1024;

/// The coverage check of one access's offsets.
struct Cover<'a> {
    s: &'a Spec<'a>,
    map: &'a TileMap,
    width: i128,
    grid: [u32; 3],
    budget: u64,
}

impl Cover<'_> {
    fn run(&mut self, off: &Poly, cons: &[Constraint]) -> Outcome {
        if self.moves_with_map(off) {
            let free: Vec<Constraint> = cons.iter().filter(|c| !c.poly.mentions(|v| matches!(v, Var::Ctaid(_)))).cloned().collect();
            if let Some(Outcome::Covered) = self.block_check([0; 3], off, &free) {
                return Outcome::Covered;
            }
        }
        for i in 0..block_count(self.grid) {
            let b = block_at(self.grid, i);
            match self.block_check(b, off, cons) {
                Some(Outcome::Covered) => {}
                Some(o) => return o,
                None => return Outcome::Unknown(Unverified::TooLarge),
            }
        }
        Outcome::Covered
    }

    /// Whether the offset moves with the block index exactly as every range of the map does.
    fn moves_with_map(&self, off: &Poly) -> bool {
        let linear = off.terms().all(|(m, _)| !m.iter().any(|v| matches!(v, Var::Ctaid(_))) || m.len() == 1);
        if ignore_strides() {
            return linear;
        }
        linear && self.map.ranges().iter().all(|r| (0..3).all(|d| self.grid[d] == 1 || i128::from(r.stride[d]) == off.coeff(&[Var::Ctaid(d as u8)])))
    }

    /// Block `b`'s offsets against its tile; `None` past the budget. The block index and the
    /// enumerated symbols are assigned (`vars`/`at`), nothing is rebuilt per block.
    fn block_check(&mut self, b: [u32; 3], off: &Poly, cons: &[Constraint]) -> Option<Outcome> {
        self.budget = self.budget.checked_sub(1)?;
        // The symbols to enumerate, and the one kept as an interval (it appears alone, in one term).
        // A bounded symbol (a masked lane, a quotient: its range, not its value, is known) of a small
        // range is enumerated too, or taken as the interval, so that a 2-D tile's rows stay apart and
        // a condition on it narrows it; a wide one adds its whole range.
        let bound = |v: Var| self.s.bound(v).unwrap_or((0, 0));
        let mut vars: Vec<Var> = vec![Var::Ctaid(0), Var::Ctaid(1), Var::Ctaid(2)];
        for (m, _) in off.terms() {
            for &v in m {
                let small = || matches!(v, Var::Bounded(_)) && self.s.bound(v).is_some_and(|(lo, hi)| hi - lo < MAX_ENUMERATED_BOUNDED);
                if (matches!(v, Var::Tid(_) | Var::Iter(_)) || small()) && !vars.contains(&v) {
                    vars.push(v);
                }
            }
        }
        let run = vars[3..]
            .iter()
            .copied()
            .filter(|&v| {
                let a = off.coeff(&[v]);
                a != 0 && a.abs() <= self.width && off.terms().all(|(m, _)| !m.contains(&v) || m.len() == 1)
            })
            .max_by_key(|&v| bound(v).1 - bound(v).0);
        vars.retain(|&v| Some(v) != run);
        let points: u64 = vars[3..].iter().try_fold(1u64, |n, &v| n.checked_mul(u64::try_from(bound(v).1 - bound(v).0 + 1).ok()?))?;
        self.budget = self.budget.checked_sub(points)?;
        let mut at: Vec<i128> = b.iter().map(|&x| i128::from(x)).collect();
        at.extend(vars[3..].iter().map(|&v| bound(v).0));
        loop {
            if let Some(o) = self.point(b, off, cons, &vars, &at, run) {
                return Some(o);
            }
            // The next point, odometer-wise.
            let mut k = 3;
            loop {
                if k == at.len() {
                    return Some(Outcome::Covered);
                }
                at[k] += 1;
                if at[k] <= bound(vars[k]).1 {
                    break;
                }
                at[k] = bound(vars[k]).0;
                k += 1;
            }
        }
    }

    /// One point of the enumeration: `None` where its bytes are in the tile (or it does not run).
    fn point(&self, b: [u32; 3], q: &Poly, cons: &[Constraint], vars: &[Var], at: &[i128], run: Option<Var>) -> Option<Outcome> {
        let Some((c, a, bounded)) = self.split(q, vars, at, run) else { return Some(Outcome::Unknown(Unverified::TooLarge)) };
        let (mut lo, mut hi) = run.and_then(|v| self.s.bound(v)).unwrap_or((0, 0));
        for c in cons {
            let (poly, eq) = (&c.poly, &c.eq);
            let Some((cf, df, None)) = self.split(poly, vars, at, run) else { continue };
            match (df, eq) {
                (0, false) if cf < 0 => return None,
                (0, true) if cf != 0 => return None,
                (0, _) => {}
                (d, false) if d > 0 => lo = lo.max(div_ceil(-cf, d)),
                (d, false) => hi = hi.min((cf).div_euclid(-d)),
                (d, true) if (-cf) % d == 0 => {
                    lo = lo.max(-cf / d);
                    hi = hi.min(-cf / d);
                }
                (_, true) => return None,
            }
        }
        if lo > hi {
            return None;
        }
        let (blo, bhi) = bounded.unwrap_or((0, 0));
        let (r0, r1) = if a >= 0 { (a * lo, a * hi) } else { (a * hi, a * lo) };
        let (start, end) = (c + r0 + blo, c + r1 + bhi + self.width);
        if start >= 0 && end <= i128::from(u64::MAX) && self.map.covers(b, start as u64, end as u64) {
            return None;
        }
        // Threads to run for a witness: this point's; along the interval's dimension, the one at the
        // first byte outside the tile, and both ends.
        let mut tid = [0u32; 3];
        for (v, &x) in vars.iter().zip(at) {
            if let Var::Tid(d) = v {
                tid[*d as usize] = x as u32;
            }
        }
        let mut threads = vec![tid];
        if let Some(Var::Tid(d)) = run {
            let mut xs = vec![lo, hi];
            // The thread whose bytes hold the first one outside the tile: `c + a·x + blo ≈ byte`.
            let outside = (start.max(0)..end.min(start.max(0) + (1 << 16))).find(|&x| !self.map.touches(b, x as u64));
            if let (Some(byte), true) = (outside, a != 0) {
                let x = (byte - c - blo).div_euclid(a);
                xs.extend([x - 1, x, x + 1].map(|x| x.clamp(lo, hi)));
            }
            for x in xs {
                let mut t = tid;
                t[d as usize] = x as u32;
                if !threads.contains(&t) {
                    threads.push(t);
                }
            }
        }
        Some(Outcome::Uncovered(b, threads, (start, end)))
    }

    /// `q` at a point: its constant, its coefficient of the interval symbol, and the range its bounded
    /// terms add (`None` if it is not linear in those).
    #[allow(clippy::type_complexity)]
    fn split(&self, q: &Poly, vars: &[Var], at: &[i128], run: Option<Var>) -> Option<(i128, i128, Option<(i128, i128)>)> {
        let (mut c, mut a) = (0i128, 0i128);
        let mut bounded: Option<(i128, i128)> = None;
        for (m, coef) in q.terms() {
            let mut k = coef;
            let mut rest: Option<Var> = None;
            for &v in m {
                if let Some(i) = vars.iter().position(|&w| w == v) {
                    k = k.checked_mul(at[i])?;
                } else if rest.is_none() && (Some(v) == run || matches!(v, Var::Bounded(_))) {
                    rest = Some(v);
                } else {
                    return None;
                }
            }
            match rest {
                None => c = c.checked_add(k)?,
                Some(v) if Some(v) == run => a = a.checked_add(k)?,
                Some(v) => {
                    let (lo, hi) = self.s.bound(v)?;
                    let (x, y) = (k.checked_mul(lo)?, k.checked_mul(hi)?);
                    let (x, y) = (x.min(y), x.max(y));
                    let (bl, bh) = bounded.unwrap_or((0, 0));
                    bounded = Some((bl.checked_add(x)?, bh.checked_add(y)?));
                }
            }
        }
        Some((c, a, bounded))
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}
