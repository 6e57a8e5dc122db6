//! A graph's ids as C passes them in and gets them back: each checked to be this graph's, of the kind
//! asked (`ids`), and looked up by name or recording order.

use std::ffi::c_char;

use ostinato::{BufferId, KernelId, NodeId, Slice, SlotId};

use crate::graph::{graph_of, ost_graph, ost_slice, CGraph, OST_WHOLE};
use crate::ids::{IdKind, Mismatch};
use crate::ost_status::{self, *};
use crate::{guard, lookup, need, put, text, Fallible, Object};

impl CGraph {
    /// The id of this graph's object `index` of `kind`.
    pub(crate) fn id(&self, kind: IdKind, index: u32) -> u32 {
        self.tag.id(kind, index)
    }

    /// How many objects of `kind` the graph holds.
    fn count(&self, kind: IdKind) -> usize {
        match kind {
            IdKind::Buffer => self.graph.buffers().len(),
            IdKind::Kernel => self.graph.kernels().len(),
            IdKind::Slot => self.graph.slots().len(),
            IdKind::Node => self.graph.nodes().len(),
        }
    }

    /// Object `index` of `kind` as a message names it (`buffer `x``, `node 3`).
    fn name_of(&self, kind: IdKind, index: u32) -> Option<String> {
        let i = index as usize;
        match kind {
            IdKind::Buffer => self.graph.buffers().get(i).map(|b| format!("buffer `{}`", b.name)),
            IdKind::Kernel => self.graph.kernels().get(i).map(|k| format!("kernel `{}`", k.name)),
            IdKind::Slot => self.graph.slots().get(i).map(|s| format!("slot `{}`", s.name)),
            IdKind::Node => self.graph.nodes().get(i).map(|_| format!("node {i}")),
        }
    }

    /// The index of this graph's object of `kind` that `id` names (`what` says where the id was
    /// given); an id of another graph or kind, or none Ostinato gave, is `OST_ERR_HANDLE`.
    pub(crate) fn index(&self, id: u32, kind: IdKind, what: &dyn Fn() -> String) -> Fallible<u32> {
        let this = format!("graph {:#x}", self.tag.handle());
        let why = match self.tag.index(id, kind) {
            Ok(index) if (index as usize) < self.count(kind) => return Ok(index),
            Ok(index) => format!("names {} {index}, which {this} does not hold (it has {})", kind.noun(), self.count(kind)),
            Err(Mismatch::NotAnId) => format!(
                "is not an id Ostinato gave (an id is not an index: use the one the `ost_graph_add_*` call wrote, or `ost_graph_{}_id`)",
                if kind == IdKind::Node { "node" } else { kind.noun() }
            ),
            Err(Mismatch::Foreign { graph: Some(h), kind: k, index }) => {
                let named = foreign_name(h, k, index).unwrap_or_else(|| format!("{} {index}", k.noun()));
                format!("is {named} of graph {h:#x}, not of {this} (the graph of this call)")
            }
            Err(Mismatch::Foreign { graph: None, .. }) => format!("is an id of another graph (freed since), not of {this} (the graph of this call)"),
            Err(Mismatch::OtherKind { kind: k, index }) => {
                format!("is {} of {this}, not a {}", self.name_of(k, index).unwrap_or_else(|| format!("{} {index}", k.noun())), kind.noun())
            }
        };
        Err((OST_ERR_HANDLE, format!("{}: {} id {id:#x} {why}", what(), kind.noun())))
    }

    pub(crate) fn buffer_id(&self, id: u32, what: &dyn Fn() -> String) -> Fallible<BufferId> {
        self.index(id, IdKind::Buffer, what).map(BufferId)
    }
    pub(crate) fn kernel_id(&self, id: u32, what: &dyn Fn() -> String) -> Fallible<KernelId> {
        self.index(id, IdKind::Kernel, what).map(KernelId)
    }
    pub(crate) fn slot_id(&self, id: u32, what: &dyn Fn() -> String) -> Fallible<SlotId> {
        self.index(id, IdKind::Slot, what).map(SlotId)
    }
    pub(crate) fn node_ids(&self, ids: &[u32], what: &str) -> Fallible<Vec<NodeId>> {
        ids.iter().enumerate().map(|(i, &id)| self.index(id, IdKind::Node, &|| format!("{what}[{i}]")).map(NodeId)).collect()
    }

    /// A slice argument: its buffer id checked, `OST_WHOLE` resolved.
    pub(crate) fn slice(&self, s: ost_slice, what: &dyn Fn() -> String) -> Fallible<Slice> {
        let buffer = self.buffer_id(s.buffer, what)?;
        let size = self.graph.buffer(buffer).size;
        let len = if s.len == OST_WHOLE { size.saturating_sub(s.offset) } else { s.len };
        Ok(Slice { buffer, offset: s.offset, len })
    }
}

/// Object `index` of `kind` of the live graph at `handle`, as a message names it, where that graph is
/// not busy (it is never waited for: its lock may be held by a thread waiting for ours).
fn foreign_name(handle: usize, kind: IdKind, index: u32) -> Option<String> {
    let Ok(Object::Graph(g)) = lookup(handle, "graph") else { return None };
    let g = g.try_lock().ok()?;
    g.name_of(kind, index)
}

/// The id of the buffer named `name` (of a loaded graph, say).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_buffer_id(g: *const ost_graph, name: *const c_char, id: *mut u32) -> ost_status {
    // SAFETY: forwarded with the caller's promises.
    unsafe { id_by_name(g, name, id, IdKind::Buffer) }
}

/// The id of the kernel named `name` (of a loaded graph, say).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_kernel_id(g: *const ost_graph, name: *const c_char, id: *mut u32) -> ost_status {
    // SAFETY: forwarded with the caller's promises.
    unsafe { id_by_name(g, name, id, IdKind::Kernel) }
}

/// The id of the slot named `name` (of a loaded graph, say).
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_slot_id(g: *const ost_graph, name: *const c_char, id: *mut u32) -> ost_status {
    // SAFETY: forwarded with the caller's promises.
    unsafe { id_by_name(g, name, id, IdKind::Slot) }
}

/// The id of the node recorded `index`-th (from 0: a loaded graph's nodes in the file's order, each
/// `repeat` counted).
///
/// # Safety
/// `id` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ost_graph_node_id(g: *const ost_graph, index: u32, id: *mut u32) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        need(id, "id")?;
        let g = g.lock().unwrap_or_else(|p| p.into_inner());
        let n = g.graph.nodes().len();
        if index as usize >= n {
            return Err((OST_ERR_ARGUMENT, format!("node index {index}: the graph has {n} nodes")));
        }
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(IdKind::Node, index), "id") }
    })
}

/// The id of the object of `kind` named `name`.
///
/// # Safety
/// `name` is a NUL-terminated string; `id` points to a writable `uint32_t`.
unsafe fn id_by_name(g: *const ost_graph, name: *const c_char, id: *mut u32, kind: IdKind) -> ost_status {
    guard(|| {
        let g = graph_of(g)?;
        // SAFETY: the caller vouches for a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        need(id, "id")?;
        let g = g.lock().unwrap_or_else(|p| p.into_inner());
        let graph = &g.graph;
        let index = match kind {
            IdKind::Buffer => graph.buffer_by_name(name).map(|b| b.0),
            IdKind::Kernel => graph.kernels().iter().position(|k| k.name == name).map(|i| i as u32),
            IdKind::Slot => graph.slots().iter().position(|s| s.name == name).map(|i| i as u32),
            IdKind::Node => None,
        };
        let index = index.ok_or_else(|| (OST_ERR_ARGUMENT, format!("graph {:#x} has no {} `{name}`", g.tag.handle(), kind.noun())))?;
        // SAFETY: checked non-NULL above.
        unsafe { put(id, g.id(kind, index), "id") }
    })
}
