//! Simulated device memory with the HSA memory model's visibility: every store is kept with the time
//! it was made, and a reader sees, per byte, the latest store it is guaranteed to see — a store of a
//! dispatch once a release fence (agent or system scope) after it was followed by an acquire fence
//! before the reader became active; a store of the host once a system-scope acquire followed it. Any
//! newer store is invisible to it: the reader gets the old bytes a stale cache could hold.
//!
//! Allocations live at made-up device addresses the host never dereferences, and start filled with
//! seeded garbage (device memory is not zeroed).

use ostinato::rng::XorShift64;

/// Who made a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// A dispatch (visible to a reader through release then acquire).
    Gpu,
    /// The host, through a copy or a fill (visible to a dispatch after a system-scope acquire).
    Host,
}

#[derive(Clone, Debug)]
struct Store {
    time: u64,
    writer: Writer,
    offset: usize,
    bytes: Vec<u8>,
}

/// What a reader is guaranteed to see: GPU stores up to `gpu`, host stores up to `host`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Visibility {
    pub gpu: u64,
    pub host: u64,
}

impl Visibility {
    fn sees(&self, s: &Store) -> bool {
        match s.writer {
            Writer::Gpu => s.time <= self.gpu,
            Writer::Host => s.time <= self.host,
        }
    }
}

/// One allocation.
#[derive(Clone, Debug)]
pub struct Allocation {
    pub address: u64,
    /// Bytes every reader sees (stores folded in once no reader can miss them).
    base: Vec<u8>,
    /// Newer stores, in time order.
    stores: Vec<Store>,
}

impl Allocation {
    pub fn len(&self) -> usize {
        self.base.len()
    }
    pub fn is_empty(&self) -> bool {
        self.base.is_empty()
    }

    /// The bytes `vis` sees.
    pub fn view(&self, vis: Visibility) -> Vec<u8> {
        let mut out = self.base.clone();
        for s in self.stores.iter().filter(|s| vis.sees(s)) {
            out[s.offset..s.offset + s.bytes.len()].copy_from_slice(&s.bytes);
        }
        out
    }

    /// The bytes of the latest stores (what a reader that saw everything would see).
    pub fn latest(&self) -> Vec<u8> {
        self.view(Visibility { gpu: u64::MAX, host: u64::MAX })
    }

    /// Records a store of `bytes` at `offset`.
    pub fn store(&mut self, time: u64, writer: Writer, offset: usize, bytes: &[u8]) {
        self.stores.push(Store { time, writer, offset, bytes: bytes.to_vec() });
    }

    /// Folds every store all future readers see (`vis`: the least any of them will have) into the base.
    pub fn compact(&mut self, vis: Visibility) {
        let n = self.stores.iter().take_while(|s| vis.sees(s)).count();
        for s in self.stores.drain(..n) {
            self.base[s.offset..s.offset + s.bytes.len()].copy_from_slice(&s.bytes);
        }
    }
}

/// Every allocation, by address.
#[derive(Debug, Default)]
pub struct DeviceMemory {
    allocations: Vec<Allocation>,
    next: u64,
}

/// Where the simulator's device addresses start (no host mapping is there: a host dereference of
/// one faults).
const DEVICE_BASE: u64 = 0x7e00_0000_0000;

impl DeviceMemory {
    /// A new allocation of `len` bytes of seeded garbage; `None` where the host cannot give the bytes
    /// (the simulated pool is then out of memory, as a device's would be).
    pub fn allocate(&mut self, len: usize, rng: &mut XorShift64) -> Option<u64> {
        let mut base = Vec::new();
        base.try_reserve_exact(len).ok()?;
        base.resize(len, 0u8);
        let address = DEVICE_BASE + self.next;
        self.next += (len as u64).div_ceil(4096).max(1) * 4096 + 4096;
        for chunk in base.chunks_mut(8) {
            let r = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        self.allocations.push(Allocation { address, base, stores: Vec::new() });
        Some(address)
    }

    pub fn free(&mut self, address: u64) -> bool {
        let before = self.allocations.len();
        self.allocations.retain(|a| a.address != address);
        self.allocations.len() < before
    }

    /// The allocation holding `address`, and the offset in it.
    pub fn find(&self, address: u64) -> Option<(usize, usize)> {
        self.allocations
            .iter()
            .position(|a| address >= a.address && address < a.address + a.len() as u64)
            .map(|i| (i, (address - self.allocations[i].address) as usize))
    }

    /// The allocation holding `[address, address + len)` entirely, and the offset in it.
    pub fn find_range(&self, address: u64, len: usize) -> Option<(usize, usize)> {
        let (i, off) = self.find(address)?;
        (off + len <= self.allocations[i].len()).then_some((i, off))
    }

    pub fn get(&self, i: usize) -> &Allocation {
        &self.allocations[i]
    }
    pub fn get_mut(&mut self, i: usize) -> &mut Allocation {
        &mut self.allocations[i]
    }
    pub fn compact(&mut self, vis: Visibility) {
        for a in &mut self.allocations {
            a.compact(vis);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_only_what_was_released_and_acquired() {
        let mut m = DeviceMemory::default();
        let a = m.allocate(8, &mut XorShift64::seeded(1)).unwrap();
        let (i, _) = m.find(a).unwrap();
        let garbage = m.get(i).latest();
        m.get_mut(i).store(1, Writer::Host, 0, &[0; 8]);
        m.get_mut(i).store(5, Writer::Gpu, 2, &[7, 7]);
        assert_eq!(m.get(i).view(Visibility { gpu: 0, host: 0 }), garbage, "no system acquire: the garbage");
        assert_eq!(m.get(i).view(Visibility { gpu: 4, host: 1 }), vec![0; 8], "the host's zeros, not the unreleased store");
        assert_eq!(m.get(i).view(Visibility { gpu: 5, host: 1 }), vec![0, 0, 7, 7, 0, 0, 0, 0]);
        m.compact(Visibility { gpu: 0, host: 1 });
        assert_eq!(m.get(i).view(Visibility { gpu: 0, host: 0 }), vec![0; 8], "folded: every reader sees the host's store now");
        assert_eq!(m.find_range(a + 6, 2), Some((i, 6)));
        assert_eq!(m.find_range(a + 6, 3), None);
    }
}
