//! The kernarg segment of a replay: one block per dispatch, laid out from each kernel's checked
//! metadata; where every pointer, slot and hidden argument goes, so a replay set is written once and
//! then only slots (and rebound pointers) are patched in place.

use ostinato::{BufferId, Scalar, SlotId};

use crate::codeobject::{ArgSource, Hidden, KernargLayout};
use crate::program::{ArgValue, Dispatch};

/// Where the bytes of one replay set's kernarg segment come from.
#[derive(Clone, Debug, Default)]
pub(crate) struct KernargPlan {
    /// Bytes of one set.
    pub bytes: usize,
    /// Per node: its block's offset in the segment.
    pub block: Vec<usize>,
    /// Everything but pointers and slots.
    pub image: Vec<u8>,
    /// (offset, root, byte offset in the root): device addresses.
    pub pointers: Vec<(usize, BufferId, u64)>,
    /// Per slot: (offset, size) of each use.
    pub slots: Vec<Vec<(usize, usize)>>,
}

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl KernargPlan {
    /// Lays out `dispatches[i]`'s block with `layouts[i]`; `slots` is the graph's slot count.
    pub fn new(dispatches: &[Dispatch], layouts: &[&KernargLayout], slots: usize) -> Result<KernargPlan, String> {
        let mut p = KernargPlan { slots: vec![Vec::new(); slots], ..Default::default() };
        let mut at = 0usize;
        for (d, layout) in dispatches.iter().zip(layouts) {
            at = align(at, layout.align as usize);
            p.block.push(at);
            let end = at + layout.size.max(1) as usize;
            p.image.resize(end, 0);
            for &(offset, size, source) in &layout.fields {
                let (o, size) = (at + offset as usize, size as usize);
                match source {
                    ArgSource::Param(i) => match d.args.get(i) {
                        Some(ArgValue::Pointer { root, offset }) => p.pointers.push((o, *root, *offset)),
                        Some(ArgValue::Bits(b)) => p.image[o..o + size].copy_from_slice(&b.to_le_bytes()[..size.min(8)]),
                        Some(ArgValue::Slot(s)) => p.slots[s.index()].push((o, size)),
                        None => return Err(format!("node {}: argument {i} missing", d.node)),
                    },
                    ArgSource::Hidden(h) => {
                        let v = hidden_value(h, d);
                        p.image[o..o + size].copy_from_slice(&v.to_le_bytes()[..size.min(8)]);
                    }
                }
            }
            at = end;
        }
        p.bytes = align(at.max(64), 64);
        p.image.resize(p.bytes, 0);
        Ok(p)
    }

    /// The whole segment of one set: the image, the pointers from `root_address`, the slots' values.
    pub fn render(&self, root_address: &dyn Fn(BufferId) -> u64, slot_value: &dyn Fn(SlotId) -> Scalar) -> Vec<u8> {
        let mut bytes = self.image.clone();
        for &(o, root, offset) in &self.pointers {
            bytes[o..o + 8].copy_from_slice(&(root_address(root) + offset).to_le_bytes());
        }
        for (s, uses) in self.slots.iter().enumerate() {
            let v = slot_value(SlotId(s as u32)).le_bytes();
            for &(o, size) in uses {
                bytes[o..o + size].copy_from_slice(&v[..size.min(8)]);
            }
        }
        bytes
    }
}

/// The value of a hidden argument for dispatch `d` (COV5 implicit arguments a language runtime fills).
fn hidden_value(h: Hidden, d: &Dispatch) -> u64 {
    let wg = |i: usize| d.workgroup_size[i].max(1) as u64;
    match h {
        Hidden::BlockCount(i) => (d.grid_size[i] as u64).div_ceil(wg(i)),
        Hidden::GroupSize(i) => wg(i),
        Hidden::Remainder(i) => d.grid_size[i] as u64 % wg(i),
        Hidden::GlobalOffset(_) | Hidden::None => 0,
        Hidden::GridDims => d.dimensions as u64,
        Hidden::DynamicLdsSize => d.dynamic_group_bytes as u64,
    }
}
