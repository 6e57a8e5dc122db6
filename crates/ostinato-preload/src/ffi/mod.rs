//! The C side: the exported entry points (`dlsym`, `__cudaRegisterFatBinary`, the wrapped driver
//! entry points under their own names for code linked to libcuda), the wrapped
//! `cuGetProcAddress` and driver entry points, the real driver calls of the read-back, and the reads
//! of code images through raw pointers. All of this crate's unsafe code is here.
//!
//! Every entry point the application can reach catches panics (none crosses the C boundary) and, on
//! any failure of the interposer's own work, simply calls the real entry: the application sees the
//! real driver's results, always.
//!
//! The unit tests' binary exports none of the entry points (a test binary must not define `dlsym`),
//! so there most of this module is unused.

#![cfg_attr(test, allow(dead_code))]

mod adopted;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod dlsym;
mod driver;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod exports;
mod hooks;
mod memory;
mod mutate;
mod procaddr;
pub mod types;

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f`, catching a panic: `None` on one.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(f)).ok()
}

thread_local! {
    /// Whether this thread is inside the interposer's own work.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Runs the interposer's own work `f` (guarded), unless this thread is already inside it.
fn own_work<T>(f: impl FnOnce() -> T) -> Option<T> {
    if BUSY.get() {
        return None;
    }
    BUSY.set(true);
    let out = guarded(f);
    BUSY.set(false);
    out
}

/// The state when observing (a panic while reading the settings counts as not observing).
fn observing() -> Option<&'static crate::state::State> {
    guarded(crate::state::observing).flatten()
}

/// Switches adoption for graphs instantiated after the call (`on` non-zero: adopt). Returns the
/// previous setting (1 or 0), or -1 where the interposer is inactive (started with neither adoption
/// nor a log). For programs that measure a graph adopted and not in one process.
#[unsafe(no_mangle)]
pub extern "C" fn ostinato_preload_set_adopt(on: std::ffi::c_int) -> std::ffi::c_int {
    guarded(|| observing().map_or(-1, |s| std::ffi::c_int::from(s.set_adopting(on != 0)))).unwrap_or(-1)
}

/// Adopts executable graph `exec` again from its replica (the graph it was instantiated or last
/// updated from, with every node param change since), each device address's extent taken from the
/// `n` (base, size) pairs at `extents` (2n words; the application's allocator's allocations, each the
/// union of those that ever held its bytes) where one holds it, else the driver's segment. The
/// extents serve this read-back only. Returns 1 where `exec` runs adopted after, 0 where not, -1
/// where the interposer is inactive or has no replica of `exec` (never seen, not adoptable, or changed
/// in place without the change made on its replica), -2 where the extents are empty, wrap or overlap.
///
/// # Safety
/// `extents` must be null (with `n` 0) or point to `2 * n` readable `u64`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ostinato_preload_readopt(exec: u64, extents: *const u64, n: usize) -> std::ffi::c_int {
    let pairs: Vec<(u64, u64)> = if extents.is_null() || n == 0 {
        Vec::new()
    } else {
        let Some(len) = n.checked_mul(2) else { return -2 };
        // SAFETY: `extents` points to `2 * n` readable words (the caller's promise).
        let words = unsafe { std::slice::from_raw_parts(extents, len) };
        words.chunks_exact(2).map(|p| (p[0], p[1])).collect()
    };
    let Ok(extents) = crate::state::Extents::new(pairs) else { return -2 };
    let Some(state) = observing() else { return -1 };
    match own_work(|| adopted::readopt_with(state, exec, &extents)) {
        Some(Some(true)) => 1,
        Some(Some(false)) => 0,
        _ => -1,
    }
}

/// Writes what became of executable graph `exec` — a JSON object: its nodes, captured edges, the
/// decision, the adoption with every edge kept or dropped and why, and whether it runs adopted now —
/// to `out` (at most `capacity` bytes, NUL-terminated, cut short where it does not fit). Returns the
/// object's length in bytes (without the NUL: call again with a larger buffer where it is not below
/// `capacity`), or -1 where the interposer is inactive or never saw `exec` instantiated.
///
/// # Safety
/// `out` must be null (with `capacity` 0) or point to `capacity` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ostinato_preload_explain(exec: u64, out: *mut std::ffi::c_char, capacity: usize) -> isize {
    let Some(Some(text)) = guarded(|| observing().and_then(|s| s.explain(exec))) else { return -1 };
    if !out.is_null() && capacity > 0 {
        let n = text.len().min(capacity - 1);
        // SAFETY: `out` has `capacity` writable bytes (the caller's promise) and `n + 1 <= capacity`;
        // the source is this function's own string, not overlapping it.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
            *out.add(n) = 0;
        }
    }
    isize::try_from(text.len()).unwrap_or(isize::MAX)
}

/// A real entry point, taken once: a wrapper forwards to the one pointer its slot holds.
pub(crate) struct Slot(AtomicUsize);

impl Slot {
    pub const fn new() -> Slot {
        Slot(AtomicUsize::new(0))
    }

    /// Takes `real` as this slot's entry point; false when the slot already holds another (then the
    /// caller hands `real` out unwrapped).
    pub fn claim(&self, real: usize) -> bool {
        real != 0
            && match self.0.compare_exchange(0, real, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => true,
                Err(held) => held == real,
            }
    }

    pub fn raw(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// The entry point as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` must be the C signature of the entry point claimed into this slot.
    pub unsafe fn get<F: Copy>(&self) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<usize>()) };
        let raw = self.raw();
        // SAFETY: `raw` is a non-null function address of signature `F` (the caller's promise) and
        // `F` is a function pointer of the same size as `usize`.
        (raw != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&raw) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_takes_one_real_entry_point() {
        let s = Slot::new();
        assert!(!s.claim(0), "a null entry point is never taken");
        assert!(s.claim(0x1000));
        assert!(s.claim(0x1000), "the same one again");
        assert!(!s.claim(0x2000), "another one is handed out unwrapped");
        assert_eq!(s.raw(), 0x1000);
    }

    #[test]
    fn readopt_refuses_extents_that_overlap_or_wrap_before_anything_else() {
        let bad: [[u64; 4]; 3] = [[0x1000, 0x100, 0x10f0, 0x10], [0x1000, 0, 0, 0], [u64::MAX - 8, 16, 0, 0]];
        for (pairs, n) in bad.iter().zip([2usize, 1, 1]) {
            // SAFETY: `pairs` holds 2n words.
            assert_eq!(unsafe { ostinato_preload_readopt(0x42, pairs.as_ptr(), n) }, -2, "{pairs:x?}");
        }
        // Valid extents (or none) go on to the graph: -1, the interposer never saw executable graph 0x42.
        let good = [0x1000u64, 0x100, 0x2000, 0x10];
        // SAFETY: `good` holds 4 words; a null pointer with n = 0.
        unsafe {
            assert_eq!(ostinato_preload_readopt(0x42, good.as_ptr(), 2), -1);
            assert_eq!(ostinato_preload_readopt(0x42, std::ptr::null(), 0), -1);
        }
    }

    #[test]
    fn own_work_does_not_nest_and_survives_a_panic() {
        assert_eq!(own_work(|| own_work(|| 1)), Some(None));
        assert_eq!(own_work(|| -> u8 { panic!("inside") }), None);
        assert_eq!(own_work(|| 2), Some(2), "the thread is free again after a panic");
    }
}
