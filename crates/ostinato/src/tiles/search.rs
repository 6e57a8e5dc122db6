//! The block search of a tile relation: for a consumer piece `[lo, hi)` on the root, every producer
//! block whose pieces meet it, solved dimension by dimension (largest stride first, each level
//! narrowing the next one's index range), never by trying every block.
//!
//! The search runs in `i64` where every offset it forms fits with room (below 2<sup>60</sup>: the
//! usual case), else in `i128`: a halo relation of 8,192 blocks took 0.86 ms in `i128`, whose division
//! is a library call, and 0.49 ms in `i64` (`cargo bench -p ostinato --bench plan_scale`). The few
//! operations it needs are a trait of its own ([`SearchInt`]) rather than a numeric-traits crate.

use std::ops::{Add, Mul, Sub};

use super::{TileMap, MAX_TILE_DEPS};

/// The integer the search runs in.
pub(super) trait SearchInt: Copy + Ord + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
    /// `v`, exact where the search runs in this type ([`Search::of`] checks that it does).
    fn of(v: u64) -> Self;
    fn div_euclid(self, d: Self) -> Self;
    /// A non-negative value back as `u64`.
    fn index(self) -> u64;
}

impl SearchInt for i64 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn of(v: u64) -> Self {
        v as i64
    }
    fn div_euclid(self, d: Self) -> Self {
        i64::div_euclid(self, d)
    }
    fn index(self) -> u64 {
        self as u64
    }
}

impl SearchInt for i128 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn of(v: u64) -> Self {
        i128::from(v)
    }
    fn div_euclid(self, d: Self) -> Self {
        i128::div_euclid(self, d)
    }
    fn index(self) -> u64 {
        self as u64
    }
}

/// A producer map's ranges prepared for the search, in the narrowest integer that holds them.
pub(super) enum Search {
    Narrow(Vec<RangeSearch<i64>>),
    Wide(Vec<RangeSearch<i128>>),
}

impl Search {
    /// `map` over `grid`, its slice at `start` on the root, searched for pieces below root byte `hi`.
    pub(super) fn of(map: &TileMap, grid: [u32; 3], start: u64, hi: u64) -> Search {
        let wide = RangeSearch::<i128>::of(map, grid, start);
        // Every offset the search forms is within ±(the largest piece end + `hi`): below 2^60 each,
        // their sums and differences fit an i64 with room.
        const ROOM: i128 = 1 << 60;
        let fits = i128::from(hi) < ROOM && wide.iter().all(|r| r.base + r.span() + r.len < ROOM);
        match fits {
            true => Search::Narrow(wide.iter().map(RangeSearch::narrow).collect()),
            false => Search::Wide(wide),
        }
    }

    /// Adds to `out` every block of `grid` whose pieces meet root bytes `[lo, hi)`. False when the
    /// budget ran out.
    pub(super) fn producer_blocks(&self, grid: [u32; 3], lo: u64, hi: u64, budget: &mut u64, out: &mut Vec<u32>) -> bool {
        match self {
            Search::Narrow(r) => producer_blocks(r, grid, lo, hi, budget, out),
            Search::Wide(r) => producer_blocks(r, grid, lo, hi, budget, out),
        }
    }
}

/// One producer range prepared for the search: its first piece's offset on the root, its piece
/// length, and its dimensions of more than one index (count, stride, which index: the block's x, y,
/// z, then the row) largest stride first, each with what the dimensions after it reach (`Σ
/// stride·(count − 1)`); a dimension of one index is always 0 and is left out.
pub(super) struct RangeSearch<T> {
    base: T,
    len: T,
    dims: Vec<(u64, u64, usize)>,
    reach: Vec<T>,
}

impl RangeSearch<i128> {
    fn of(map: &TileMap, grid: [u32; 3], start: u64) -> Vec<RangeSearch<i128>> {
        Self::over(map, grid.map(u64::from), i128::from(start))
    }

    /// `map`'s ranges over block *offsets* in `grid`: index `i` of dimension `d` stands for the offset
    /// `i − (grid[d] − 1)`, so the counts are `2·grid − 1` and the first piece moves down by
    /// `stride·(grid − 1)`.
    fn offsets(map: &TileMap, grid: [u32; 3], start: u64) -> Vec<RangeSearch<i128>> {
        let counts = grid.map(|g| 2 * u64::from(g) - 1);
        let ranges = Self::over(map, counts, i128::from(start));
        ranges
            .into_iter()
            .zip(map.ranges())
            .map(|(mut s, r)| {
                s.base -= (0..3).map(|d| i128::from(r.stride[d]) * i128::from(grid[d] - 1)).sum::<i128>();
                s
            })
            .collect()
    }

    fn over(map: &TileMap, counts: [u64; 3], start: i128) -> Vec<RangeSearch<i128>> {
        map.ranges()
            .iter()
            .map(|r| {
                let all = [(counts[0], r.stride[0], 0usize), (counts[1], r.stride[1], 1), (counts[2], r.stride[2], 2), (r.rows, r.pitch, 3)];
                let mut dims: Vec<(u64, u64, usize)> = all.into_iter().filter(|d| d.0 > 1).collect();
                // Largest stride first: each level then narrows the next one's range.
                dims.sort_by_key(|d| std::cmp::Reverse(d.1));
                let mut reach = vec![0i128; dims.len()];
                for l in (0..dims.len().saturating_sub(1)).rev() {
                    let (count, stride, _) = dims[l + 1];
                    reach[l] = reach[l + 1] + i128::from(stride) * i128::from(count - 1);
                }
                RangeSearch { base: start + i128::from(r.base), len: i128::from(r.len), dims, reach }
            })
            .collect()
    }

    /// How far the range's last piece starts past its first: every dimension at its last index.
    fn span(&self) -> i128 {
        match (self.dims.first(), self.reach.first()) {
            (Some(&(count, stride, _)), Some(&rest)) => i128::from(stride) * i128::from(count - 1) + rest,
            _ => 0,
        }
    }

    /// The same in `i64` ([`Search::of`] has checked that every value fits).
    fn narrow(&self) -> RangeSearch<i64> {
        RangeSearch { base: self.base as i64, len: self.len as i64, dims: self.dims.clone(), reach: self.reach.iter().map(|&r| r as i64).collect() }
    }
}

/// Adds to `out` every block offset `d` (each component within `±(grid − 1)`) at which a piece of
/// `producer` (its slice at `start` on the root) of block `b + d` meets one of consumer block `b`'s
/// `pieces` (root bytes, of block 0: every block's are these moved by the same stride as the
/// producer's, as `by_offsets` checks). False when the budget ran out.
pub(super) fn block_offsets(producer: &TileMap, start: u64, grid: [u32; 3], pieces: &[(u64, u64)], budget: &mut u64, out: &mut Vec<[i64; 3]>) -> bool {
    let ranges = RangeSearch::offsets(producer, grid, start);
    for &(lo, hi) in pieces {
        for r in &ranges {
            let window = (i128::from(lo) - r.len + 1, i128::from(hi) - 1);
            let mut emit = |i: &[u64; 4]| out.push([0, 1, 2].map(|d| i[d] as i64 - (i64::from(grid[d]) - 1)));
            if !solve(r, 0, r.base, window, &mut [0u64; 4], &mut emit, budget) {
                return false;
            }
        }
    }
    true
}

/// Adds to `out` every block of `grid` whose pieces of `ranges` meet root bytes `[lo, hi)`. False when
/// the budget ran out.
fn producer_blocks<T: SearchInt>(ranges: &[RangeSearch<T>], grid: [u32; 3], lo: u64, hi: u64, budget: &mut u64, out: &mut Vec<u32>) -> bool {
    for r in ranges {
        // A piece at offset o meets [lo, hi) iff lo - len < o < hi, i.e. o in [lo - len + 1, hi - 1].
        let (wlo, whi) = (T::of(lo) - r.len + T::ONE, T::of(hi) - T::ONE);
        let mut idx = [0u64; 4];
        let mut emit = |i: &[u64; 4]| {
            let lin = i[0] + u64::from(grid[0]) * (i[1] + u64::from(grid[1]) * i[2]);
            out.push(lin as u32);
        };
        if !solve(r, 0, r.base, (wlo, whi), &mut idx, &mut emit, budget) {
            return false;
        }
        if out.len() > 4 * MAX_TILE_DEPS {
            out.sort_unstable();
            out.dedup();
        }
    }
    true
}

/// Every index vector of `r`'s dimensions from `level` on with `cur + Σ stride·index` in `[lo, hi]`.
fn solve<T: SearchInt>(
    r: &RangeSearch<T>,
    level: usize,
    cur: T,
    (lo, hi): (T, T),
    idx: &mut [u64; 4],
    emit: &mut impl FnMut(&[u64; 4]),
    budget: &mut u64,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let Some(&(count, stride, which)) = r.dims.get(level) else {
        if lo <= cur && cur <= hi {
            emit(idx);
        }
        return true;
    };
    let reach = r.reach[level];
    let last_index = T::of(count - 1);
    let (first, last) = if stride == 0 {
        if cur > hi || cur + reach < lo {
            return true;
        }
        (T::ZERO, last_index)
    } else {
        let s = T::of(stride);
        // cur + s·i ≤ hi and cur + s·i + reach ≥ lo.
        let first = div_ceil(lo - reach - cur, s).max(T::ZERO);
        let last = (hi - cur).div_euclid(s).min(last_index);
        (first, last)
    };
    let mut i = first;
    while i <= last {
        idx[which] = i.index();
        if !solve(r, level + 1, cur + T::of(stride) * i, (lo, hi), idx, emit, budget) {
            return false;
        }
        i = i + T::ONE;
    }
    true
}

fn div_ceil<T: SearchInt>(a: T, b: T) -> T {
    T::ZERO - (T::ZERO - a).div_euclid(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn div_ceil_rounds_towards_positive_infinity() {
        assert_eq!((div_ceil(7i64, 2), div_ceil(-7i64, 2), div_ceil(6i64, 3), div_ceil(-6i64, 3), div_ceil(0i64, 5)), (4, -3, 2, -2, 0));
        assert_eq!((div_ceil(7i128, 2), div_ceil(-7i128, 2)), (4, -3));
    }

    /// The two widths find the same blocks; a slice start past 2^60 takes the wide one.
    #[test]
    fn both_widths_find_the_same_blocks_and_huge_offsets_stay_wide() {
        let map = TileMap::new(vec![super::super::TileRange::span(0, [1024, 0, 0], 1024), super::super::TileRange::span(1024, [1024, 0, 0], 4)]).unwrap();
        let grid = [63, 1, 1];
        let (narrow, wide) = (Search::of(&map, grid, 0, 65536), Search::Wide(RangeSearch::<i128>::of(&map, grid, 0)));
        assert!(matches!(narrow, Search::Narrow(_)));
        for (lo, hi) in [(0u64, 4u64), (1020, 1030), (2048, 2049), (5000, 9000), (64510, 65000)] {
            let (mut a, mut b, mut budget) = (Vec::new(), Vec::new(), 1000);
            assert!(narrow.producer_blocks(grid, lo, hi, &mut budget, &mut a));
            assert!(wide.producer_blocks(grid, lo, hi, &mut budget, &mut b));
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "[{lo}, {hi})");
        }
        assert!(matches!(Search::of(&map, grid, 1 << 61, (1 << 61) + 65536), Search::Wide(_)));
        let (mut far, start) = (Vec::new(), 1u64 << 61);
        assert!(Search::of(&map, grid, start, start + 65536).producer_blocks(grid, start + 1024, start + 1025, &mut 1000, &mut far));
        far.sort_unstable();
        assert_eq!(far, vec![0, 1]);
    }
}
