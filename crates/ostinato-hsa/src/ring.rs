//! Writing host memory the runtime handed out: a queue's ring of AQL packets, a kernarg segment.
//! The only `unsafe` writes of the backend; every write is bounds-checked against the region.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::PACKET_BYTES;

/// A region of host memory the runtime allocated and keeps alive while this exists.
#[derive(Debug)]
pub(crate) struct HostRegion {
    base: usize,
    len: usize,
}

impl HostRegion {
    /// # Safety
    /// `base` is the host address of `len` writable bytes that stay allocated, and that nothing but
    /// this region's writes (and the packet processor's reads) touches, for as long as the region is
    /// used.
    pub unsafe fn new(base: usize, len: usize) -> HostRegion {
        HostRegion { base, len }
    }

    pub fn base(&self) -> usize {
        self.base
    }

    /// Copies `bytes` to `at` (`at + bytes.len()` must lie within the region; checked).
    pub fn write(&self, at: usize, bytes: &[u8]) {
        assert!(at.checked_add(bytes.len()).is_some_and(|e| e <= self.len), "write of {} bytes at {at} past a {}-byte region", bytes.len(), self.len);
        // SAFETY: the range lies within the region (checked above), which `new`'s caller vouched is
        // writable host memory nothing else writes; `bytes` is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (self.base + at) as *mut u8, bytes.len()) }
    }

    /// Writes packet `packet` into ring slot `slot`: bytes 4..64 first, then its first 32-bit word
    /// (the header and the next 16 bits) with one release store, so the packet processor never sees a
    /// valid header over a half-written packet (ROCr's and HIP's publish order).
    pub fn publish_packet(&self, slot: usize, packet: &[u8; PACKET_BYTES]) {
        let at = slot * PACKET_BYTES;
        self.write_packet_body(slot, packet);
        assert!(at + 4 <= self.len && (self.base + at) % 4 == 0, "ring slot {slot} outside the ring or misaligned");
        let first = u32::from_le_bytes([packet[0], packet[1], packet[2], packet[3]]);
        // SAFETY: the slot's first word lies within the region and is 4-byte aligned (checked); an
        // AtomicU32 has u32's layout, and the packet processor reads this word atomically too.
        let word = unsafe { &*((self.base + at) as *const AtomicU32) };
        word.store(first, Ordering::Release);
    }

    /// Writes bytes 4..64 of `packet` into slot `slot`, leaving its first word (the header) alone.
    pub fn write_packet_body(&self, slot: usize, packet: &[u8; PACKET_BYTES]) {
        self.write(slot * PACKET_BYTES + 4, &packet[4..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{u16_at, PACKET_TYPE_INVALID};

    #[test]
    fn the_header_is_written_last() {
        let mut ring = vec![0u64; 8 * 4];
        for slot in 0..4 {
            ring[slot * 8] = PACKET_TYPE_INVALID as u64;
        }
        // SAFETY: `ring` is 256 writable bytes, 8-aligned, alive and untouched during the test.
        let region = unsafe { HostRegion::new(ring.as_mut_ptr() as usize, 256) };
        let mut packet = [0xAB; PACKET_BYTES];
        packet[0..4].copy_from_slice(&[2, 0x0B, 1, 0]);
        region.write_packet_body(2, &packet);
        let bytes = |ring: &[u64]| ring.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(u16_at(&bytes(&ring), 128), PACKET_TYPE_INVALID, "the body alone leaves the slot invalid");
        region.publish_packet(2, &packet);
        assert_eq!(&bytes(&ring)[128..192], &packet[..]);
        assert_eq!(u16_at(&bytes(&ring), 64), PACKET_TYPE_INVALID, "other slots untouched");
    }
}
