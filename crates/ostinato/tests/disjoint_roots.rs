//! `check_disjoint_roots` against brute force: random root extents in a few address spaces (some
//! touching end to start, some nested, some empty, some unknown), each root written by a node or only
//! read, are refused exactly when two of them share a byte and one of the two is written, and the
//! refusal names two buffers that do.

use ostinato::{check_disjoint_roots, BindError, Graph, MemoryExtent, Plan};
use proptest::prelude::*;

fn overlap(a: &MemoryExtent, b: &MemoryExtent) -> bool {
    a.space == b.space && a.len > 0 && b.len > 0 && a.start < b.start + b.len && b.start < a.start + a.len
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn refused_exactly_when_a_written_root_shares_a_byte(raw in prop::collection::vec((prop::option::of((0u64..3, 0u64..48, 0u64..24)), any::<bool>()), 1..12)) {
        let mut g = Graph::new();
        let bufs: Vec<_> = (0..raw.len()).map(|i| g.add_buffer(format!("b{i}"), 16).unwrap()).collect();
        // A written root is filled; a read-only one is copied into a scratch buffer (no extent).
        for (i, (_, written)) in raw.iter().enumerate() {
            if *written {
                g.add_fill(g.whole(bufs[i]), 7, &[]).unwrap();
            } else {
                let scratch = g.add_buffer(format!("s{i}"), 16).unwrap();
                g.add_copy(g.whole(bufs[i]), g.whole(scratch), &[]).unwrap();
            }
        }
        let plan = Plan::compile(&g).unwrap();
        let mut extents: Vec<Option<MemoryExtent>> = raw.iter().map(|(r, _)| r.map(|(space, start, len)| MemoryExtent { space, start, len })).collect();
        extents.resize(g.buffers().len(), None);
        let racing = |i: usize, j: usize| matches!((&extents[i], &extents[j]), (Some(a), Some(b)) if overlap(a, b)) && (raw[i].1 || raw[j].1);
        let pairs: Vec<(usize, usize)> = (0..raw.len()).flat_map(|i| (i + 1..raw.len()).map(move |j| (i, j))).filter(|&(i, j)| racing(i, j)).collect();
        match check_disjoint_roots(&plan, &extents) {
            Ok(()) => prop_assert!(pairs.is_empty(), "accepted, but {pairs:?} race"),
            Err(BindError::SharedMemory { a, b }) => {
                let idx = |n: &str| n[1..].parse::<usize>().unwrap();
                let (i, j) = (idx(&a), idx(&b));
                prop_assert!(pairs.contains(&(i.min(j), i.max(j))), "named {a} and {b}, which do not race ({pairs:?})");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}
