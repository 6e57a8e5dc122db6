//! A global allocator that forwards to the system allocator and counts every allocation, for the
//! zero-allocation tests. A test binary installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: ostinato_testkit::counting_alloc::Counting = ostinato_testkit::counting_alloc::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls (realloc and alloc_zeroed use
// the default methods, which call `alloc`, so they are counted too).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
}

/// Allocations made by the whole process so far.
pub fn allocations() -> usize {
    ALLOCS.load(Ordering::SeqCst)
}
