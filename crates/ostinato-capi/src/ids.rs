//! The ids C holds for a graph's buffers, kernels, slots and nodes (`uint32_t`), each carrying the
//! graph it belongs to and what it names, so that an id of another graph, of another kind, or one
//! never given out is refused with `OST_ERR_HANDLE`, never taken for this graph's object of the same
//! index.
//!
//! An id is `tag << 20 | kind << 18 | index`: `tag` (12 bits, 1 to 4,095) is the graph's, unique
//! among the graphs alive at once and handed round-robin so that a freed graph's tag is taken again
//! only after 4,094 other graphs; `kind` (2 bits) is buffer, kernel, slot or node; `index` (18 bits)
//! the core's index. So a graph holds at most 262,144 objects of each kind through the C ABI (graph
//! files hold at most 200,000 nodes), and at most 4,095 graphs are alive at once (plans and execs are
//! not counted: they hold no ids).

use std::sync::{Mutex, OnceLock};

use crate::ost_status::*;
use crate::Fallible;

const INDEX_BITS: u32 = 18;
const KIND_BITS: u32 = 2;
const TAG_BITS: u32 = 12;
/// The most objects of one kind a graph numbers through the C ABI.
pub(crate) const MAX_INDEX: usize = 1 << INDEX_BITS;
/// The most graphs alive at once.
pub(crate) const MAX_GRAPHS: usize = (1 << TAG_BITS) - 1;

/// What an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdKind {
    Buffer = 0,
    Kernel = 1,
    Slot = 2,
    Node = 3,
}

impl IdKind {
    pub(crate) fn noun(self) -> &'static str {
        match self {
            IdKind::Buffer => "buffer",
            IdKind::Kernel => "kernel",
            IdKind::Slot => "slot",
            IdKind::Node => "node",
        }
    }
    fn from_bits(bits: u32) -> IdKind {
        match bits & ((1 << KIND_BITS) - 1) {
            0 => IdKind::Buffer,
            1 => IdKind::Kernel,
            2 => IdKind::Slot,
            _ => IdKind::Node,
        }
    }
}

/// A graph's tag, held while the graph lives (released when it drops).
#[derive(Debug)]
pub(crate) struct Tag {
    value: u16,
    /// The graph's handle, for messages about its ids seen elsewhere.
    handle: usize,
}

/// Why an id is not one of a graph's ids of the kind asked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// No id Ostinato gave (a bare index, garbage).
    NotAnId,
    /// An id of another graph: `graph` is its handle where that graph is alive.
    Foreign { graph: Option<usize>, kind: IdKind, index: u32 },
    /// An id of this graph, of another kind.
    OtherKind { kind: IdKind, index: u32 },
}

impl Tag {
    /// The graph's handle.
    pub(crate) fn handle(&self) -> usize {
        self.handle
    }

    /// Refuses to number one more object of `kind` where the graph holds `count` already (before the
    /// object is recorded, so nothing is half-built).
    pub(crate) fn room(&self, kind: IdKind, count: usize) -> Fallible<()> {
        if count >= MAX_INDEX {
            return Err((OST_ERR_GRAPH, format!("the graph holds {count} {}s, the most the C ABI numbers", kind.noun())));
        }
        Ok(())
    }

    /// The id of object `index` of `kind` (an index [`room`](Self::room) allowed).
    pub(crate) fn id(&self, kind: IdKind, index: u32) -> u32 {
        debug_assert!((index as usize) < MAX_INDEX);
        u32::from(self.value) << (INDEX_BITS + KIND_BITS) | (kind as u32) << INDEX_BITS | (index & ((1 << INDEX_BITS) - 1))
    }

    /// The index `id` names, if it is one of this graph's ids of `kind`.
    pub(crate) fn index(&self, id: u32, kind: IdKind) -> Result<u32, Mismatch> {
        let tag = (id >> (INDEX_BITS + KIND_BITS)) as u16;
        let got = IdKind::from_bits(id >> INDEX_BITS);
        let index = id & ((1 << INDEX_BITS) - 1);
        if tag == 0 {
            return Err(Mismatch::NotAnId);
        }
        if tag != self.value {
            return Err(Mismatch::Foreign { graph: owner_of(tag).filter(|h| *h != self.handle), kind: got, index });
        }
        if got != kind {
            return Err(Mismatch::OtherKind { kind: got, index });
        }
        Ok(index)
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        let mut t = tags().lock().unwrap_or_else(|p| p.into_inner());
        if t.owner[self.value as usize] == Some(self.handle) {
            t.owner[self.value as usize] = None;
        }
    }
}

/// Which graph holds each tag (by handle), and the last tag given.
struct Tags {
    owner: Vec<Option<usize>>,
    last: usize,
}

fn tags() -> &'static Mutex<Tags> {
    static T: OnceLock<Mutex<Tags>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Tags { owner: vec![None; MAX_GRAPHS + 1], last: 0 }))
}

/// A tag for the graph of handle `handle`: the next after the last given that no live graph holds.
/// Refused while `MAX_GRAPHS` graphs are alive (their ids could not be told apart).
pub(crate) fn take_tag(handle: usize) -> Fallible<Tag> {
    let mut t = tags().lock().unwrap_or_else(|p| p.into_inner());
    for step in 1..=MAX_GRAPHS {
        let tag = (t.last + step - 1) % MAX_GRAPHS + 1;
        if t.owner[tag].is_none() {
            t.owner[tag] = Some(handle);
            t.last = tag;
            return Ok(Tag { value: tag as u16, handle });
        }
    }
    Err((OST_ERR_STATE, format!("{MAX_GRAPHS} graphs are alive, the most whose ids the C ABI tells apart: free one first (a plan does not need its graph)")))
}

/// The handle of the live graph holding `tag`.
fn owner_of(tag: u16) -> Option<usize> {
    tags().lock().unwrap_or_else(|p| p.into_inner()).owner.get(tag as usize).copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn an_id_names_its_graph_kind_and_index_and_nothing_else() {
        let (a, b) = (take_tag(0x1230).unwrap(), take_tag(0x1240).unwrap());
        let kinds = [IdKind::Buffer, IdKind::Kernel, IdKind::Slot, IdKind::Node];
        for kind in kinds {
            for index in [0, 1, 77, MAX_INDEX as u32 - 1] {
                let id = a.id(kind, index);
                assert_eq!(a.index(id, kind), Ok(index));
                assert_eq!(b.index(id, kind), Err(Mismatch::Foreign { graph: Some(0x1230), kind, index }));
                for other in kinds.into_iter().filter(|k| *k != kind) {
                    assert_eq!(a.index(id, other), Err(Mismatch::OtherKind { kind, index }));
                }
            }
            assert!(a.room(kind, MAX_INDEX - 1).is_ok());
            assert_eq!(a.room(kind, MAX_INDEX).unwrap_err().0, OST_ERR_GRAPH);
            // A bare index (what an id was before ids carried their graph) is no id.
            assert_eq!(a.index(3, kind), Err(Mismatch::NotAnId));
        }
        let stale = a.id(IdKind::Buffer, 0);
        drop(a);
        assert_eq!(b.index(stale, IdKind::Buffer), Err(Mismatch::Foreign { graph: None, kind: IdKind::Buffer, index: 0 }));
    }

    #[test]
    fn ids_name_their_graph_kind_and_index_and_tags_go_round() {
        // One test, so that no other takes tags meanwhile.
        an_id_names_its_graph_kind_and_index_and_nothing_else();
        let first = take_tag(0x10).unwrap();
        let value = first.value;
        drop(first);
        for _ in 0..MAX_GRAPHS - 1 {
            assert_ne!(take_tag(0x20).unwrap().value, value, "a freed tag came back before every other was given");
        }
        assert_eq!(take_tag(0x30).unwrap().value, value);
        let held: Vec<Tag> = (0..MAX_GRAPHS).map(|i| take_tag(0x100 + i).unwrap()).collect();
        let (status, message) = take_tag(0x40).unwrap_err();
        assert_eq!(status, OST_ERR_STATE);
        assert!(message.contains("4095 graphs are alive"), "{message}");
        drop(held);
        assert!(take_tag(0x50).is_ok());
    }
}
