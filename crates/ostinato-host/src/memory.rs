//! Host buffers that many worker threads may touch at once without `unsafe`: words of `AtomicU32`
//! accessed with relaxed ordering (plain loads and stores on x86-64 and AArch64). Ordering between
//! nodes comes from the executor's dependency counters (release/acquire), exactly like a GPU's edges.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// A byte-addressed host allocation.
#[derive(Debug)]
pub struct HostMemory {
    words: Box<[AtomicU32]>,
    len: u64,
}

impl HostMemory {
    /// A zeroed allocation of `len` bytes.
    ///
    /// # Panics
    /// When the memory cannot be had; [`HostMemory::try_zeroed`] returns an error instead.
    pub fn zeroed(len: u64) -> Self {
        Self::try_zeroed(len).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A zeroed allocation of `len` bytes, or an error naming the bytes asked for when the system
    /// cannot give them (never an abort).
    pub fn try_zeroed(len: u64) -> Result<Self, String> {
        let refuse = || format!("cannot allocate {len} bytes of host memory");
        if let Some(free) = available_bytes() {
            if len > free {
                return Err(format!("{len} bytes of host memory asked, {free} available"));
            }
        }
        let words = usize::try_from(len.div_ceil(4)).map_err(|_| refuse())?;
        let mut v: Vec<AtomicU32> = Vec::new();
        v.try_reserve_exact(words).map_err(|_| refuse())?;
        v.extend((0..words).map(|_| AtomicU32::new(0)));
        Ok(HostMemory { words: v.into_boxed_slice(), len })
    }

    pub fn len(&self) -> u64 {
        self.len
    }
    /// Where the bytes lie in the process: two roots on overlapping memory are refused
    /// ([`ostinato::check_disjoint_roots`]).
    pub fn extent(&self) -> ostinato::MemoryExtent {
        ostinato::MemoryExtent { space: 0, start: self.words.as_ptr() as u64, len: self.len }
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 4 bytes at `off` (any alignment) as a little-endian u32. Caller checks bounds.
    #[inline]
    pub fn load_u32(&self, off: u64) -> u32 {
        if off % 4 == 0 {
            return self.words[(off / 4) as usize].load(Relaxed);
        }
        let mut b = [0u8; 4];
        for (i, x) in b.iter_mut().enumerate() {
            *x = self.load_u8(off + i as u64);
        }
        u32::from_le_bytes(b)
    }

    #[inline]
    pub fn store_u32(&self, off: u64, v: u32) {
        if off % 4 == 0 {
            return self.words[(off / 4) as usize].store(v, Relaxed);
        }
        for (i, x) in v.to_le_bytes().iter().enumerate() {
            self.store_u8(off + i as u64, *x);
        }
    }

    #[inline]
    pub fn load_u8(&self, off: u64) -> u8 {
        (self.words[(off / 4) as usize].load(Relaxed) >> (8 * (off % 4))) as u8
    }

    /// Stores one byte without disturbing its word's other bytes (another node may own them).
    #[inline]
    pub fn store_u8(&self, off: u64, v: u8) {
        let shift = 8 * (off % 4);
        let w = &self.words[(off / 4) as usize];
        w.fetch_and(!(0xFFu32 << shift), Relaxed);
        w.fetch_or((v as u32) << shift, Relaxed);
    }

    /// `count` whole words starting at the 4-byte-aligned byte offset `off`. Caller checks bounds.
    #[inline]
    pub fn words(&self, off: u64, count: usize) -> &[AtomicU32] {
        let first = (off / 4) as usize;
        &self.words[first..first + count]
    }

    /// Copies `out.len()` bytes starting at `off` into `out`.
    pub fn read(&self, off: u64, out: &mut [u8]) {
        let mut i = 0usize;
        while i < out.len() {
            let o = off + i as u64;
            if o % 4 == 0 && out.len() - i >= 4 {
                out[i..i + 4].copy_from_slice(&self.load_u32(o).to_le_bytes());
                i += 4;
            } else {
                out[i] = self.load_u8(o);
                i += 1;
            }
        }
    }

    /// Copies `data` into the allocation at `off`.
    pub fn write(&self, off: u64, data: &[u8]) {
        let mut i = 0usize;
        while i < data.len() {
            let o = off + i as u64;
            if o % 4 == 0 && data.len() - i >= 4 {
                self.store_u32(o, u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]));
                i += 4;
            } else {
                self.store_u8(o, data[i]);
                i += 1;
            }
        }
    }

    /// The whole allocation as bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        self.read(0, &mut v);
        v
    }
}

/// The memory the system can still give without swapping (`MemAvailable` of `/proc/meminfo`), where
/// the system says. Allocation is checked against it: on Linux an allocation larger than that can
/// succeed and then kill the process when its pages are touched.
pub fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_bytes_round_trip_without_touching_neighbours() {
        let m = HostMemory::zeroed(11);
        m.write(0, &[0xAA; 11]);
        m.write(3, &[1, 2, 3, 4, 5]);
        assert_eq!(m.to_vec(), vec![0xAA, 0xAA, 0xAA, 1, 2, 3, 4, 5, 0xAA, 0xAA, 0xAA]);
        assert_eq!(m.load_u32(3), u32::from_le_bytes([1, 2, 3, 4]));
        m.store_u32(5, 0x0102_0304);
        assert_eq!(m.to_vec()[5..9], [4, 3, 2, 1]);
    }
}
