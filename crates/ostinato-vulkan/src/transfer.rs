//! An exec's uploads and downloads (`write_buffer`, `read_buffer`) go through one host-visible
//! staging buffer the exec keeps, grown to the largest transfer it has made up to [`STAGING_MAX`]
//! bytes; a larger transfer goes through it in pieces. Allocating and freeing a staging buffer around
//! every transfer cost the host 0.8 ms per 1 KiB upload on the H200's driver and slowed the next
//! dispatch by 0.86 µs (`lab/probes/vulkan_dispatch_gap.rs`, `single_dispatch_after_host_work`;
//! docs/fences-vulkan.md, "Replay ordering on Vulkan").

use std::sync::Arc;
use std::time::Duration;

use crate::ffi::{self, Buffer, Context};
use crate::VkError;

/// The most bytes an exec's staging buffer holds.
pub(crate) const STAGING_MAX: u64 = 16 << 20;

/// The smallest staging buffer an exec makes (small writes, such as a token id per step, share it).
const STAGING_MIN: u64 = 64 << 10;

/// The staging buffer an exec keeps: none until its first transfer.
#[derive(Default)]
pub(crate) struct Staging {
    buffer: Option<Buffer>,
}

impl Staging {
    /// The staging buffer, holding at least `len` bytes (`len <= STAGING_MAX`). A smaller one is
    /// replaced: every transfer through it was waited for.
    fn at_least(&mut self, ctx: &Arc<Context>, len: u64) -> Result<&mut Buffer, VkError> {
        if self.buffer.as_ref().is_none_or(|b| b.size < len) {
            let size = len.next_power_of_two().clamp(STAGING_MIN, STAGING_MAX);
            self.buffer = None;
            self.buffer = Some(Buffer::new(ctx, size, true)?);
        }
        self.buffer.as_mut().ok_or_else(|| VkError::Internal { op: "staging", reason: "no staging buffer".into() })
    }
}

fn unmapped(op: &'static str) -> VkError {
    VkError::Internal { op, reason: "the staging buffer is not mapped".into() }
}

/// Copies `data` into `dst` at byte `at`, through `staging`, piece by piece; each copy waited for
/// (at most `timeout`).
pub(crate) fn upload(ctx: &Arc<Context>, staging: &mut Staging, dst: &Buffer, at: u64, data: &[u8], timeout: Option<Duration>) -> Result<(), VkError> {
    for (i, piece) in data.chunks(STAGING_MAX as usize).enumerate() {
        let s = staging.at_least(ctx, piece.len() as u64)?;
        s.bytes().ok_or_else(|| unmapped("write_buffer"))?[..piece.len()].copy_from_slice(piece);
        ffi::copy(ctx, s, 0, dst, at + (i as u64) * STAGING_MAX, piece.len() as u64, timeout)?;
    }
    Ok(())
}

/// Copies `out.len()` bytes of `src` at byte `at` into `out`, through `staging`, piece by piece.
pub(crate) fn download(ctx: &Arc<Context>, staging: &mut Staging, src: &Buffer, at: u64, out: &mut [u8], timeout: Option<Duration>) -> Result<(), VkError> {
    for (i, piece) in out.chunks_mut(STAGING_MAX as usize).enumerate() {
        let s = staging.at_least(ctx, piece.len() as u64)?;
        ffi::copy(ctx, src, at + (i as u64) * STAGING_MAX, s, 0, piece.len() as u64, timeout)?;
        piece.copy_from_slice(&s.bytes().ok_or_else(|| unmapped("read_buffer"))?[..piece.len()]);
    }
    Ok(())
}
