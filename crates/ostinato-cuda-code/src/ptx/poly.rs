//! Integer polynomials over a launch's symbols, with interval bounds: the form an address takes once a
//! node's geometry and scalar arguments are known (`%ctaid.x · 1024 + %tid.x · 4 + base`).
//!
//! Coefficients are exact integers (`i128`). A value computed in `w`-bit registers is only known modulo
//! 2^w ([`Poly::wrap`] keeps the coefficients small within that congruence); where the code widens or
//! compares a value the caller checks, from the bounds, that the exact integer stays in the register's
//! range, so that the register holds exactly the polynomial's value.

use std::collections::BTreeMap;

/// A symbol of a polynomial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Var {
    /// `%ctaid.{x,y,z}`: the block's index.
    Ctaid(u8),
    /// `%tid.{x,y,z}`: the thread's index in its block.
    Tid(u8),
    /// How many times the loop headed by block `h` has gone round (0 on its first pass).
    Iter(u32),
    /// A buffer param's pointer.
    Base(u32),
    /// A value the analysis bounds but does not follow (a remainder, a masked index): its range is in
    /// the check's table.
    Bounded(u32),
    /// The loop-carried register being recognised as an induction, as it was one iteration before.
    Prev,
}

/// A product of symbols (sorted; empty for the constant term).
pub type Mono = Vec<Var>;

/// The most symbols one term may multiply, and the most terms: past them a form is not followed.
const MAX_DEGREE: usize = 4;
const MAX_TERMS: usize = 48;

/// Σ coefficient · monomial, no zero coefficient.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Poly {
    terms: BTreeMap<Mono, i128>,
}

/// A closed interval of integers; `None` where unbounded (or past `i128`).
pub type Range = Option<(i128, i128)>;

impl Poly {
    pub fn constant(c: i128) -> Poly {
        let mut p = Poly::default();
        if c != 0 {
            p.terms.insert(Vec::new(), c);
        }
        p
    }
    pub fn var(v: Var) -> Poly {
        let mut p = Poly::default();
        p.terms.insert(vec![v], 1);
        p
    }
    /// The value, if the polynomial has no symbol.
    pub fn as_const(&self) -> Option<i128> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }
    pub fn terms(&self) -> impl Iterator<Item = (&Mono, i128)> {
        self.terms.iter().map(|(m, c)| (m, *c))
    }
    /// The coefficient of monomial `m`.
    pub fn coeff(&self, m: &[Var]) -> i128 {
        self.terms.get(m).copied().unwrap_or(0)
    }
    /// Whether any term has a symbol `f` accepts.
    pub fn mentions(&self, f: impl Fn(Var) -> bool) -> bool {
        self.terms.keys().any(|m| m.iter().any(|&v| f(v)))
    }
    fn add_term(&mut self, m: Mono, c: i128) -> Option<()> {
        let e = self.terms.entry(m).or_insert(0);
        *e = e.checked_add(c)?;
        if *e == 0 {
            self.terms.retain(|_, c| *c != 0);
        }
        (self.terms.len() <= MAX_TERMS).then_some(())
    }
    pub fn add(&self, o: &Poly) -> Option<Poly> {
        let mut p = self.clone();
        for (m, c) in &o.terms {
            p.add_term(m.clone(), *c)?;
        }
        Some(p)
    }
    pub fn sub(&self, o: &Poly) -> Option<Poly> {
        self.add(&o.scale(-1)?)
    }
    pub fn scale(&self, k: i128) -> Option<Poly> {
        let mut p = Poly::default();
        for (m, c) in &self.terms {
            p.add_term(m.clone(), c.checked_mul(k)?)?;
        }
        Some(p)
    }
    pub fn mul(&self, o: &Poly) -> Option<Poly> {
        let mut p = Poly::default();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let mut m: Mono = ma.iter().chain(mb).copied().collect();
                if m.len() > MAX_DEGREE {
                    return None;
                }
                m.sort_unstable();
                p.add_term(m, ca.checked_mul(*cb)?)?;
            }
        }
        Some(p)
    }
    /// The same value modulo 2^bits, each coefficient its representative in [-2^(bits-1), 2^(bits-1)).
    pub fn wrap(&self, bits: u32) -> Poly {
        if bits >= 127 {
            return self.clone();
        }
        let m = 1i128 << bits;
        let mut p = Poly::default();
        for (mono, c) in &self.terms {
            let mut r = c.rem_euclid(m);
            if r >= m / 2 {
                r -= m;
            }
            if r != 0 {
                p.terms.insert(mono.clone(), r);
            }
        }
        p
    }
    /// Replaces symbols by polynomials (`f` gives `None` to keep a symbol).
    pub fn substitute(&self, f: &dyn Fn(Var) -> Option<Poly>) -> Option<Poly> {
        let mut out = Poly::default();
        for (m, c) in &self.terms {
            let mut t = Poly::constant(*c);
            for &v in m {
                t = t.mul(&f(v).unwrap_or_else(|| Poly::var(v)))?;
            }
            out = out.add(&t)?;
        }
        Some(out)
    }
    /// Its interval when each symbol ranges over `bounds(v)` (`None`: unbounded).
    pub fn range(&self, bounds: &dyn Fn(Var) -> Range) -> Range {
        let mut lo = 0i128;
        let mut hi = 0i128;
        for (m, c) in &self.terms {
            let mut t = (*c, *c);
            for &v in m {
                t = mul_range(t, bounds(v)?)?;
            }
            lo = lo.checked_add(t.0)?;
            hi = hi.checked_add(t.1)?;
        }
        Some((lo, hi))
    }
    /// Divides every coefficient by `d` where each is a multiple of it.
    pub fn exact_div(&self, d: i128) -> Option<Poly> {
        if d == 0 || self.terms.values().any(|c| c % d != 0) {
            return None;
        }
        Some(Poly { terms: self.terms.iter().map(|(m, c)| (m.clone(), c / d)).collect() })
    }
}

/// The interval of a product.
fn mul_range(a: (i128, i128), b: (i128, i128)) -> Option<(i128, i128)> {
    let c = [a.0.checked_mul(b.0)?, a.0.checked_mul(b.1)?, a.1.checked_mul(b.0)?, a.1.checked_mul(b.1)?];
    Some((*c.iter().min()?, *c.iter().max()?))
}

impl std::fmt::Display for Poly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.terms.is_empty() {
            return write!(f, "0");
        }
        for (i, (m, c)) in self.terms.iter().enumerate() {
            let sep = if i == 0 { "" } else { " + " };
            let names: Vec<String> = m.iter().map(|v| v.to_string()).collect();
            match (m.is_empty(), *c) {
                (true, c) => write!(f, "{sep}{c}")?,
                (false, 1) => write!(f, "{sep}{}", names.join("·"))?,
                (false, c) => write!(f, "{sep}{c}·{}", names.join("·"))?,
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = |i: u8| ["x", "y", "z"].get(i as usize).copied().unwrap_or("?");
        match self {
            Var::Ctaid(i) => write!(f, "%ctaid.{}", d(*i)),
            Var::Tid(i) => write!(f, "%tid.{}", d(*i)),
            Var::Iter(h) => write!(f, "k{h}"),
            Var::Base(p) => write!(f, "base{p}"),
            Var::Bounded(i) => write!(f, "v{i}"),
            Var::Prev => write!(f, "prev"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_wrapping_and_ranges() {
        let (b, t) = (Poly::var(Var::Ctaid(0)), Poly::var(Var::Tid(0)));
        let p = b.scale(256).unwrap().add(&t).unwrap().scale(4).unwrap();
        assert_eq!(p.coeff(&[Var::Ctaid(0)]), 1024);
        assert_eq!(p.to_string(), "1024·%ctaid.x + 4·%tid.x");
        let bounds = |v: Var| match v {
            Var::Ctaid(0) => Some((0, 7)),
            Var::Tid(0) => Some((0, 255)),
            _ => None,
        };
        assert_eq!(p.range(&bounds), Some((0, 7 * 1024 + 255 * 4)));
        assert_eq!(p.add(&Poly::var(Var::Iter(3))).unwrap().range(&bounds), None);
        // -4 and 2^32 - 4 are the same 32-bit value.
        assert_eq!(Poly::constant((1 << 32) - 4).wrap(32), Poly::constant(-4));
        assert_eq!(b.mul(&t).unwrap().sub(&t.mul(&b).unwrap()).unwrap(), Poly::default());
        assert_eq!(p.exact_div(4).unwrap().coeff(&[Var::Tid(0)]), 1);
        assert!(p.exact_div(8).is_none());
        let subst = p.substitute(&|v| (v == Var::Ctaid(0)).then(|| Poly::constant(2))).unwrap();
        assert_eq!(subst.to_string(), "2048 + 4·%tid.x");
    }
}
