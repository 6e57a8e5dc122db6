//! Host memory the simulator hands out: queue rings and kernarg segments, which the backend writes
//! through raw addresses exactly as it would ROCr's, and the packet processor reads.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU32, Ordering};

/// A zeroed, 64-byte-aligned block of host memory, freed on drop.
#[derive(Debug)]
pub struct HostBlock {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the block is plain memory; the simulator reads it only under its state lock, and the backend
// writes it only while it holds no reference the simulator gave out (the HSA producer protocol).
unsafe impl Send for HostBlock {}

impl HostBlock {
    /// `len` zeroed bytes (at least 64); `None` when the allocator refuses.
    pub fn new(len: usize) -> Option<HostBlock> {
        let layout = Layout::from_size_align(len.max(64), 64).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(HostBlock { ptr, layout })
    }

    pub fn address(&self) -> usize {
        self.ptr as usize
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether `[address, address + len)` lies in the block.
    pub fn contains(&self, address: usize, len: usize) -> bool {
        address >= self.address() && address.checked_add(len).is_some_and(|e| e <= self.address() + self.len())
    }

    /// Copies `out.len()` bytes from `offset`.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len(), "read past a host block");
        // SAFETY: in bounds (checked); the block is alive; `out` is a distinct Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), out.len()) }
    }

    /// The 32-bit word at `offset` (4-aligned), loaded with acquire order: a packet's first word,
    /// which its producer stores last with release order.
    pub fn load_word_acquire(&self, offset: usize) -> u32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.len(), "misaligned or out-of-block word");
        // SAFETY: in bounds and aligned (checked); AtomicU32 has u32's layout.
        unsafe { &*(self.ptr.add(offset) as *const AtomicU32) }.load(Ordering::Acquire)
    }

    /// Stores the 32-bit word at `offset` (the packet processor invalidating a consumed slot).
    pub fn store_word(&self, offset: usize, value: u32) {
        assert!(offset % 4 == 0 && offset + 4 <= self.len(), "misaligned or out-of-block word");
        // SAFETY: in bounds and aligned (checked); AtomicU32 has u32's layout.
        unsafe { &*(self.ptr.add(offset) as *const AtomicU32) }.store(value, Ordering::Release)
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
