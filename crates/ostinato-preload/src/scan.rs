//! Finding the device pointers in a kernel's params: every 8-byte-aligned word (aligned in the param
//! bank, so pointers inside aggregates are found too: `std::array<char*, 2>`, a struct of pointers
//! and host bytes) whose value could be an address is asked of the driver (`cuMemGetAddressRange`);
//! the words it places in an allocation are pointers, with that allocation segment as their extent.

use std::collections::HashMap;

use crate::model::{Hex, PointerWord};

/// The most addresses asked of the driver for one graph (a bound on the read-back's work).
pub const MAX_LOOKUPS: usize = 16_384;

/// Whether a word could be a device address: not a small integer, within 57 bits (the largest
/// virtual address space of the hosts CUDA runs on).
pub fn plausible(word: u64) -> bool {
    (1 << 16..1 << 57).contains(&word)
}

/// The words of a param at bank offset `offset` that are 8-byte aligned in the bank and plausible:
/// (byte offset in the param, value).
pub fn candidate_words(offset: usize, bytes: &[u8]) -> Vec<(usize, u64)> {
    let first = (8 - offset % 8) % 8;
    (first..bytes.len())
        .step_by(8)
        .filter_map(|at| bytes.get(at..at + 8).map(|w| (at, u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))))
        .filter(|&(_, v)| plausible(v))
        .collect()
}

/// Asks the driver for the allocation of each candidate, once per address, within a lookup budget.
pub struct Scanner<'a> {
    lookup: &'a mut dyn FnMut(u64) -> Option<(u64, u64)>,
    seen: HashMap<u64, Option<(u64, u64)>>,
    /// Addresses left to ask.
    pub budget: usize,
}

impl<'a> Scanner<'a> {
    /// `lookup(address)`: the allocation segment (base, size) holding `address`, if any.
    pub fn new(lookup: &'a mut dyn FnMut(u64) -> Option<(u64, u64)>) -> Scanner<'a> {
        Scanner { lookup, seen: HashMap::new(), budget: MAX_LOOKUPS }
    }

    /// The pointer words of a param at bank offset `offset`, or `None` when the budget ran out (then
    /// the param's pointers are not known).
    pub fn pointers(&mut self, offset: usize, bytes: &[u8]) -> Option<Vec<PointerWord>> {
        let mut out = Vec::new();
        for (at, value) in candidate_words(offset, bytes) {
            let segment = match self.seen.get(&value) {
                Some(s) => *s,
                None => {
                    self.budget = self.budget.checked_sub(1)?;
                    let s = (self.lookup)(value).filter(|&(base, size)| base <= value && value - base < size);
                    self.seen.insert(value, s);
                    s
                }
            };
            if let Some((base, size)) = segment {
                out.push(PointerWord { at, value: Hex(value), base: Hex(base), size });
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// One allocation at 0x7f00_0000_0000 of 2 MiB.
    fn segment(v: u64) -> Option<(u64, u64)> {
        let base = 0x7f00_0000_0000;
        (base..base + (2 << 20)).contains(&v).then_some((base, 2 << 20))
    }

    #[test]
    fn small_integers_and_huge_words_are_never_asked() {
        assert!(!plausible(0) && !plausible(4096) && !plausible(u64::MAX) && !plausible(1 << 60));
        assert!(plausible(0x7f00_0000_0000));
    }

    #[test]
    fn words_are_aligned_in_the_bank_not_in_the_param() {
        let bytes = words(&[0x7f00_0000_1000, 0x7f00_0000_2000]);
        assert_eq!(candidate_words(0, &bytes).len(), 2);
        // A param at bank offset 4: its aligned words start at its byte 4 (only one fits whole).
        let c = candidate_words(4, &bytes);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, 4);
        // A partial word at the end is not read.
        assert_eq!(candidate_words(0, &bytes[..12]).len(), 1);
    }

    #[test]
    fn pointers_in_an_aggregate_are_found_with_their_segment() {
        // A struct: an int pair, a pointer, host bytes, a pointer past the allocation, a pointer.
        let bytes = words(&[0x0000_0003_0000_0002, 0x7f00_0000_0100, 0xdead_beef_dead, 0x7f00_0100_0000, 0x7f00_001f_fff8]);
        let mut asked = Vec::new();
        let mut lookup = |v: u64| {
            asked.push(v);
            segment(v)
        };
        let mut s = Scanner::new(&mut lookup);
        let p = s.pointers(0, &bytes).unwrap();
        assert_eq!(p.iter().map(|w| w.at).collect::<Vec<_>>(), vec![8, 32]);
        assert_eq!((p[0].base, p[0].size), (Hex(0x7f00_0000_0000), 2 << 20));
        // The same address in another param is not asked again.
        let again = s.pointers(0, &words(&[0x7f00_0000_0100])).unwrap();
        assert_eq!(again.len(), 1);
        drop(s);
        // Asked once each: the int pair (plausible, not an allocation), the pointers, the host bytes.
        assert_eq!(asked.len(), 5, "{asked:x?}");
    }

    #[test]
    fn a_segment_that_does_not_hold_the_address_is_refused() {
        let mut lookup = |_v: u64| Some((0x1000, 0x10));
        let mut s = Scanner::new(&mut lookup);
        assert!(s.pointers(0, &words(&[0x7f00_0000_0100])).unwrap().is_empty());
    }

    #[test]
    fn the_lookup_budget_bounds_the_work() {
        let mut lookup = segment;
        let mut s = Scanner::new(&mut lookup);
        s.budget = 1;
        assert!(s.pointers(0, &words(&[0x7f00_0000_0100])).is_some());
        assert!(s.pointers(0, &words(&[0x7f00_0000_0200])).is_none());
        assert!(s.pointers(0, &words(&[0x7f00_0000_0100])).is_some(), "an address already asked costs nothing");
    }

    proptest! {
        #[test]
        fn any_bytes_at_any_offset_scan_without_panic(offset in 0usize..64, bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut lookup = segment;
            let mut s = Scanner::new(&mut lookup);
            let p = s.pointers(offset, &bytes).unwrap();
            for w in p {
                prop_assert_eq!((offset + w.at) % 8, 0);
                prop_assert!(w.at + 8 <= bytes.len());
            }
        }
    }
}
