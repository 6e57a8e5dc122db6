//! The values the WGSL tile check ([`crate::tilemaps`]) computes with: an integer as an affine form of
//! the workgroup id plus a range, `Σ coef[d]·wid[d] + r` with `r ∈ [lo, hi]`, exact in the integers for
//! every workgroup of the launch (an operation whose result may leave its type's range, and so wrap, is
//! not a form: the check then knows nothing of it).

/// An integer `Σ coef[d]·wid[d] + r`, `lo ≤ r ≤ hi`, over every workgroup `wid` of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Form {
    pub(crate) coef: [i128; 3],
    pub(crate) lo: i128,
    pub(crate) hi: i128,
}

/// What the check knows of a value: an integer form, a vector of them, or nothing (and why).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    Int(Form),
    Vec(Vec<Form>),
    Top(&'static str),
}

/// The range of an integer type, as the check needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IntRange {
    pub(crate) min: i128,
    pub(crate) max: i128,
}

impl IntRange {
    pub(crate) const U32: IntRange = IntRange { min: 0, max: u32::MAX as i128 };
    pub(crate) const I32: IntRange = IntRange { min: i32::MIN as i128, max: i32::MAX as i128 };
    pub(crate) const U64: IntRange = IntRange { min: 0, max: u64::MAX as i128 };
    pub(crate) const I64: IntRange = IntRange { min: i64::MIN as i128, max: i64::MAX as i128 };

    /// The range of a naga integer scalar; `None` for any other.
    pub(crate) fn of(s: naga::Scalar) -> Option<IntRange> {
        match (s.kind, s.width) {
            (naga::ScalarKind::Uint, 4) => Some(Self::U32),
            (naga::ScalarKind::Sint, 4) => Some(Self::I32),
            (naga::ScalarKind::Uint, 8) => Some(Self::U64),
            (naga::ScalarKind::Sint, 8) => Some(Self::I64),
            _ => None,
        }
    }
}

impl Form {
    pub(crate) const fn constant(c: i128) -> Form {
        Form { coef: [0; 3], lo: c, hi: c }
    }
    pub(crate) const fn range(lo: i128, hi: i128) -> Form {
        Form { coef: [0; 3], lo, hi }
    }
    /// `coef` times workgroup id component `d`, plus `[lo, hi]`.
    pub(crate) fn along(d: usize, coef: i128, lo: i128, hi: i128) -> Form {
        let mut f = Form::range(lo, hi);
        f.coef[d] = coef;
        f
    }
    /// The value where it does not depend on the workgroup and is one number.
    pub(crate) fn as_constant(&self) -> Option<i128> {
        (self.coef == [0; 3] && self.lo == self.hi).then_some(self.lo)
    }
    pub(crate) fn block_free(&self) -> bool {
        self.coef == [0; 3]
    }
    /// The least and greatest value over the workgroups of `grid`.
    pub(crate) fn extremes(&self, grid: [u32; 3]) -> (i128, i128) {
        let (mut lo, mut hi) = (self.lo, self.hi);
        for (c, g) in self.coef.iter().zip(grid) {
            let far = c * (i128::from(g) - 1);
            lo += far.min(0);
            hi += far.max(0);
        }
        (lo, hi)
    }
    /// The form, where every value it takes over `grid` lies in `range` (else the operation that made
    /// it may have wrapped).
    pub(crate) fn fit(self, range: IntRange, grid: [u32; 3]) -> Val {
        let (lo, hi) = self.extremes(grid);
        if lo < range.min || hi > range.max {
            Val::Top("a value that may wrap around its type")
        } else {
            Val::Int(self)
        }
    }
    /// The value at workgroup `wid`: its range.
    pub(crate) fn at(&self, wid: [u32; 3]) -> (i128, i128) {
        let off: i128 = (0..3).map(|d| self.coef[d] * i128::from(wid[d])).sum();
        (self.lo + off, self.hi + off)
    }

    pub(crate) fn add(self, o: Form) -> Form {
        Form { coef: [self.coef[0] + o.coef[0], self.coef[1] + o.coef[1], self.coef[2] + o.coef[2]], lo: self.lo + o.lo, hi: self.hi + o.hi }
    }
    pub(crate) fn neg(self) -> Form {
        Form { coef: [-self.coef[0], -self.coef[1], -self.coef[2]], lo: -self.hi, hi: -self.lo }
    }
    pub(crate) fn sub(self, o: Form) -> Form {
        self.add(o.neg())
    }
    /// `k` times the form (`None` past what `i128` holds: no integer type of a shader gets there).
    pub(crate) fn scale(self, k: i128) -> Option<Form> {
        let (a, b) = (self.lo.checked_mul(k)?, self.hi.checked_mul(k)?);
        let coef = [self.coef[0].checked_mul(k)?, self.coef[1].checked_mul(k)?, self.coef[2].checked_mul(k)?];
        Some(Form { coef, lo: a.min(b), hi: a.max(b) })
    }
    /// The product, where one side is a constant or neither depends on the workgroup.
    pub(crate) fn mul(self, o: Form) -> Option<Form> {
        if let Some(k) = o.as_constant() {
            return self.scale(k);
        }
        if let Some(k) = self.as_constant() {
            return o.scale(k);
        }
        if self.block_free() && o.block_free() {
            let c = [self.lo.checked_mul(o.lo)?, self.lo.checked_mul(o.hi)?, self.hi.checked_mul(o.lo)?, self.hi.checked_mul(o.hi)?];
            return Some(Form::range(*c.iter().min()?, *c.iter().max()?));
        }
        None
    }
    /// `self / d` (truncating) for a constant `d > 0`, where `self` is never negative over `grid`.
    pub(crate) fn div(self, d: i128, grid: [u32; 3]) -> Option<Form> {
        if d <= 0 || self.extremes(grid).0 < 0 {
            return None;
        }
        if self.coef.iter().all(|c| c % d == 0) {
            // (c·w + r) / d = (c/d)·w + floor(r/d) where d divides c (the whole is never negative,
            // so truncation is the floor).
            let coef = [self.coef[0] / d, self.coef[1] / d, self.coef[2] / d];
            return Some(Form { coef, lo: self.lo.div_euclid(d), hi: self.hi.div_euclid(d) });
        }
        None
    }
    /// `self % d` for a constant `d > 0`, where `self` is never negative over `grid`.
    pub(crate) fn rem(self, d: i128, grid: [u32; 3]) -> Option<Form> {
        if d <= 0 || self.extremes(grid).0 < 0 {
            return None;
        }
        if self.coef.iter().all(|c| c % d == 0) && self.lo.div_euclid(d) == self.hi.div_euclid(d) {
            return Some(Form::range(self.lo.rem_euclid(d), self.hi.rem_euclid(d)));
        }
        Some(Form::range(0, d - 1))
    }
    /// `self & m` for a constant `m ≥ 0`, where `self` is never negative over `grid`.
    pub(crate) fn and(self, m: i128, grid: [u32; 3]) -> Option<Form> {
        if m < 0 || self.extremes(grid).0 < 0 {
            return None;
        }
        if (m + 1) & m == 0 {
            // A mask of the low bits is the remainder of the power of two above it.
            return self.rem(m + 1, grid);
        }
        Some(Form::range(0, m.min(self.extremes(grid).1)))
    }
    /// The union of two values of the same workgroup coefficients.
    pub(crate) fn join(self, o: Form) -> Option<Form> {
        (self.coef == o.coef).then(|| Form { coef: self.coef, lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) })
    }
}

impl Val {
    pub(crate) fn join(&self, o: &Val) -> Val {
        match (self, o) {
            (Val::Int(a), Val::Int(b)) => a.join(*b).map_or(Val::Top("a value that differs by path with the workgroup"), Val::Int),
            (Val::Vec(a), Val::Vec(b)) if a.len() == b.len() => {
                let v: Option<Vec<Form>> = a.iter().zip(b).map(|(x, y)| x.join(*y)).collect();
                v.map_or(Val::Top("a value that differs by path with the workgroup"), Val::Vec)
            }
            (Val::Top(w), _) | (_, Val::Top(w)) => Val::Top(w),
            _ => Val::Top("a value of different shapes by path"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value the form says it takes, brute force, for small grids.
    fn values(f: Form, grid: [u32; 3]) -> Vec<([u32; 3], i128, i128)> {
        let mut out = Vec::new();
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    let (lo, hi) = f.at([x, y, z]);
                    out.push(([x, y, z], lo, hi));
                }
            }
        }
        out
    }

    #[test]
    fn division_and_remainder_hold_for_every_value_they_stand_for() {
        let grid = [5, 3, 1];
        for (coef, lo, hi, d) in [([8, 0, 0], 0, 7, 8), ([12, 4, 0], 1, 30, 4), ([6, 0, 0], 0, 5, 3), ([0, 0, 0], 3, 40, 7)] {
            let f = Form { coef, lo, hi };
            let q = f.div(d, grid);
            let r = f.rem(d, grid).unwrap();
            for (w, a, b) in values(f, grid) {
                for v in a..=b {
                    if let Some(q) = q {
                        let (ql, qh) = q.at(w);
                        assert!((ql..=qh).contains(&(v / d)), "{f:?} / {d} at {w:?}: {v} / {d} = {} outside [{ql}, {qh}]", v / d);
                    }
                    let (rl, rh) = r.at(w);
                    assert!((rl..=rh).contains(&(v % d)), "{f:?} % {d} at {w:?}");
                }
            }
        }
        // A coefficient the divisor does not divide: no form (the quotient is not affine).
        assert_eq!(Form::along(0, 6, 0, 5).div(4, grid), None);
        // A negative value is not divided.
        assert_eq!(Form::range(-1, 5).div(2, grid), None);
    }

    #[test]
    fn a_product_of_two_workgroup_dependent_values_is_no_form_and_wrapping_is_caught() {
        let w = Form::along(0, 1, 0, 0);
        assert_eq!(w.mul(w), None);
        assert_eq!(w.mul(Form::constant(-3)), Some(Form::along(0, -3, 0, 0)));
        // Past i128 (two u64 ranges multiplied): no form rather than an overflow.
        let wide = Form::range(0, u64::MAX as i128);
        assert_eq!(wide.mul(wide), None);
        let big = Form::along(0, 1 << 20, 0, (1 << 20) - 1);
        assert!(matches!(big.fit(IntRange::U32, [4096, 1, 1]), Val::Int(_)));
        assert_eq!(big.fit(IntRange::U32, [4097, 1, 1]), Val::Top("a value that may wrap around its type"));
        assert!(matches!(Form::range(-1, 0).fit(IntRange::U32, [1, 1, 1]), Val::Top(_)));
    }

    #[test]
    fn masks_of_low_bits_are_remainders() {
        let f = Form::along(0, 32, 0, 31);
        assert_eq!(f.and(31, [9, 1, 1]), Some(Form::range(0, 31)));
        assert_eq!(Form::range(3, 5).and(7, [1, 1, 1]), Some(Form::range(3, 5)));
        assert_eq!(Form::range(3, 100).and(12, [1, 1, 1]), Some(Form::range(0, 12)));
    }
}
