//! The access frontier of a program prefix: for every byte range of every allocation, the last node
//! that wrote it and the nodes that read it since. A new access conflicts with exactly the frontier
//! entries that a hazard needs (a read: the last writer; a write: the last writer and the readers since);
//! every older conflicting access is ordered before those by an earlier hazard.
//!
//! The planner uses it to find hazard predecessors; the host race checker uses it as shadow memory.

use std::collections::BTreeMap;

use crate::graph::RootAccess;

#[derive(Clone, Debug)]
struct Segment {
    end: u64,
    writer: Option<u32>,
    readers: Vec<u32>,
}

/// Per-allocation interval maps of last writer / readers since.
#[derive(Clone, Debug)]
pub struct AccessFrontier {
    maps: Vec<BTreeMap<u64, Segment>>,
}

impl AccessFrontier {
    /// An empty frontier over `allocations` root buffers.
    pub fn new(allocations: usize) -> Self {
        AccessFrontier { maps: vec![BTreeMap::new(); allocations] }
    }

    pub fn clear(&mut self) {
        for m in &mut self.maps {
            m.clear();
        }
    }

    /// Calls `f(node, lo, hi)` for every frontier entry that `a` conflicts with, on bytes `[lo, hi)`.
    pub fn conflicts(&self, a: &RootAccess, mut f: impl FnMut(u32, u64, u64)) {
        let map = &self.maps[a.root.index()];
        let first = map.range(..=a.start).next_back().map_or(a.start, |(s, _)| *s);
        for (&s, seg) in map.range(first..a.end) {
            if seg.end <= a.start {
                continue;
            }
            let (lo, hi) = (s.max(a.start), seg.end.min(a.end));
            if let Some(w) = seg.writer {
                f(w, lo, hi);
            }
            if a.access.writes() {
                for &r in &seg.readers {
                    f(r, lo, hi);
                }
            }
        }
    }

    /// Records all of one node's accesses (reads first, then writes: its own write subsumes its read).
    pub fn record(&mut self, node: u32, accesses: &[RootAccess]) {
        for a in accesses.iter().filter(|a| a.access.reads() && !a.access.writes()) {
            self.record_read(node, a);
        }
        for a in accesses.iter().filter(|a| a.access.writes()) {
            let map = &mut self.maps[a.root.index()];
            split_at(map, a.start);
            split_at(map, a.end);
            let keys: Vec<u64> = map.range(a.start..a.end).map(|(k, _)| *k).collect();
            for k in keys {
                map.remove(&k);
            }
            map.insert(a.start, Segment { end: a.end, writer: Some(node), readers: Vec::new() });
        }
    }

    fn record_read(&mut self, node: u32, a: &RootAccess) {
        let map = &mut self.maps[a.root.index()];
        split_at(map, a.start);
        split_at(map, a.end);
        let mut cursor = a.start;
        let mut gaps = Vec::new();
        for (&s, seg) in map.range_mut(a.start..a.end) {
            if s > cursor {
                gaps.push((cursor, s));
            }
            if seg.readers.last() != Some(&node) {
                seg.readers.push(node);
            }
            cursor = seg.end;
        }
        if cursor < a.end {
            gaps.push((cursor, a.end));
        }
        for (s, e) in gaps {
            map.insert(s, Segment { end: e, writer: None, readers: vec![node] });
        }
    }
}

/// Splits the segment strictly containing `x` so that a segment starts at `x`.
fn split_at(map: &mut BTreeMap<u64, Segment>, x: u64) {
    let hit = map.range(..x).next_back().map(|(s, seg)| (*s, seg.end));
    if let Some((start, end)) = hit {
        if start < x && x < end {
            let right = match map.get_mut(&start) {
                Some(seg) => {
                    seg.end = x;
                    Segment { end, writer: seg.writer, readers: seg.readers.clone() }
                }
                None => return,
            };
            map.insert(x, right);
        }
    }
}
