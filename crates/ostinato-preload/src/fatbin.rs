//! The fat binary container nvcc embeds in a host object and cudart registers
//! (`__cudaRegisterFatBinary`): a 16-byte header, then entries, each a header and a payload (a PTX
//! text or a cubin, for one architecture). The layout was read from nvcc 13.0's own output (the
//! fixtures in the tests below were built the same way):
//!
//! - container header: u32 magic `0xBA55ED50`, u16 version (1), u16 header size (16), u64 size of
//!   the entries that follow;
//! - entry header (64 bytes or more, its size in the header): u16 kind (1 PTX, 2 ELF), u16 version,
//!   u32 header size, u64 payload size (padded), u32 compressed size, u32, u32, u32 architecture
//!   (`90` for sm_90), u32 name offset, u32 name size, u64 flags, u64, u64 uncompressed size;
//! - flags: bit 0x1 64-bit, 0x2 debug, 0x10 Linux, 0x2000 payload compressed with LZ4 (nvcc
//!   `--compress-mode=speed`), 0x8000 compressed with zstd (nvcc 13.0's default for PTX).
//!
//! A compressed PTX payload — a standard zstd frame, or an LZ4 block (no frame), of the header's
//! compressed size — is decompressed by [`Entry::ptx_text`] (the `ruzstd` and `lz4_flex` crates,
//! pure Rust: no C library in a preloaded process), to exactly the header's uncompressed size and at
//! most [`MAX_DECOMPRESSED`] bytes. Every offset is checked: a malformed container is a
//! [`FatbinError`], never a panic.

use serde::Serialize;

/// The container's magic number.
pub const MAGIC: u32 = 0xBA55_ED50;
/// Bytes of the container header.
pub const HEADER_LEN: usize = 16;
/// The fewest bytes an entry header has (the fields read here).
const ENTRY_HEADER_MIN: usize = 64;
/// The most entries one container may hold (a bound on work, far above what nvcc writes).
pub const MAX_ENTRIES: usize = 4096;

/// The most bytes one compressed entry may decompress to.
pub const MAX_DECOMPRESSED: u64 = 256 << 20;

const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;

/// A container that cannot be read, with where it goes wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FatbinError {
    #[error("not a fat binary: magic {found:#010x} (expected {MAGIC:#010x})")]
    Magic { found: u32 },
    #[error("fat binary cut short: {what} needs bytes {start}..{end}, the image has {len}")]
    Truncated { what: &'static str, start: usize, end: usize, len: usize },
    #[error("fat binary entry {index} at byte {at}: header size {size} (at least {ENTRY_HEADER_MIN})")]
    EntryHeader { index: usize, at: usize, size: usize },
    #[error("fat binary holds more than {MAX_ENTRIES} entries")]
    TooManyEntries,
    #[error("fat binary entry (sm_{arch}): its {codec} payload does not decompress: {reason}")]
    Decompress { arch: u32, codec: &'static str, reason: String },
}

/// What an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Ptx,
    Elf,
    /// A kind this reader does not know, with its number.
    Other(u16),
}

impl Kind {
    fn from_code(code: u16) -> Kind {
        match code {
            1 => Kind::Ptx,
            2 => Kind::Elf,
            n => Kind::Other(n),
        }
    }
}

/// One entry of a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub kind: Kind,
    /// The architecture: `90` for sm_90 (or compute_90 PTX).
    pub arch: u32,
    pub flags: u64,
    /// The payload as stored (padded; compressed where [`Entry::compression`] says so).
    pub payload: &'a [u8],
    /// The payload's size once decompressed (0 where it is not compressed).
    pub uncompressed_len: u64,
    /// The compressed bytes at the start of `payload` (0 where it is not compressed).
    pub compressed_len: u32,
}

impl<'a> Entry<'a> {
    /// The codec of a compressed payload (`lz4`, `zstd`), `None` for a plain one.
    pub fn compression(&self) -> Option<&'static str> {
        match (self.flags & FLAG_LZ4 != 0, self.flags & FLAG_ZSTD != 0) {
            (false, false) => None,
            (true, false) => Some("lz4"),
            (false, true) => Some("zstd"),
            (true, true) => Some("lz4+zstd"),
        }
    }

    /// The PTX text of a plain PTX entry (up to its first NUL), `None` for any other entry or a text
    /// that is not UTF-8.
    pub fn ptx(&self) -> Option<&'a str> {
        if self.kind != Kind::Ptx || self.compression().is_some() {
            return None;
        }
        let end = self.payload.iter().position(|&b| b == 0).unwrap_or(self.payload.len());
        std::str::from_utf8(&self.payload[..end]).ok()
    }

    /// The PTX text of a PTX entry, plain or compressed (zstd or LZ4; `Ok(None)` for any other entry
    /// or a text that is not UTF-8). The decompressed text must have exactly the size the header
    /// gives, at most [`MAX_DECOMPRESSED`] bytes.
    pub fn ptx_text(&self) -> Result<Option<std::borrow::Cow<'a, str>>, FatbinError> {
        if let Some(text) = self.ptx() {
            return Ok(Some(std::borrow::Cow::Borrowed(text)));
        }
        let codec = match (self.kind, self.compression()) {
            (Kind::Ptx, Some(c @ ("zstd" | "lz4"))) => c,
            _ => return Ok(None),
        };
        let fail = |reason: String| FatbinError::Decompress { arch: self.arch, codec, reason };
        let want = self.uncompressed_len;
        if want == 0 || want > MAX_DECOMPRESSED {
            return Err(fail(format!("its header gives {want} bytes decompressed (1 to {MAX_DECOMPRESSED})")));
        }
        let frame = self
            .payload
            .get(..self.compressed_len as usize)
            .ok_or_else(|| fail(format!("its header gives {} compressed bytes, the payload has {}", self.compressed_len, self.payload.len())))?;
        let mut out = Vec::new();
        out.try_reserve_exact(want as usize).map_err(|e| fail(e.to_string()))?;
        if codec == "zstd" {
            let decoder = ruzstd::decoding::StreamingDecoder::new(frame).map_err(|e| fail(e.to_string()))?;
            // One byte more than promised: a frame that holds more is refused, not cut.
            std::io::Read::read_to_end(&mut std::io::Read::take(decoder, want + 1), &mut out).map_err(|e| fail(e.to_string()))?;
        } else {
            // An LZ4 block (no frame) of exactly the promised size: a block that holds more fails to
            // fit and is refused.
            out.resize(want as usize, 0);
            let n = lz4_flex::block::decompress_into(frame, &mut out).map_err(|e| fail(e.to_string()))?;
            out.truncate(n);
        }
        if out.len() as u64 != want {
            return Err(fail(format!("{} bytes decompressed, the header gives {want}", out.len())));
        }
        let end = out.iter().position(|&b| b == 0).unwrap_or(out.len());
        out.truncate(end);
        Ok(String::from_utf8(out).ok().map(std::borrow::Cow::Owned))
    }

    /// The cubin of a plain ELF entry, `None` for any other entry.
    pub fn elf(&self) -> Option<&'a [u8]> {
        (self.kind == Kind::Elf && self.compression().is_none()).then_some(self.payload)
    }
}

/// The bytes `start..start + len` of `bytes`, or why not.
fn span<'a>(bytes: &'a [u8], what: &'static str, start: usize, len: usize) -> Result<&'a [u8], FatbinError> {
    let end = start.saturating_add(len);
    bytes.get(start..end).ok_or(FatbinError::Truncated { what, start, end, len: bytes.len() })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7]])
}

/// The whole container's size in bytes, read from its header (the first [`HEADER_LEN`] bytes): how
/// much to copy from a pointer the runtime passes without a length.
pub fn container_len(header: &[u8]) -> Result<usize, FatbinError> {
    let h = span(header, "the container header", 0, HEADER_LEN)?;
    let magic = u32_at(h, 0);
    if magic != MAGIC {
        return Err(FatbinError::Magic { found: magic });
    }
    let header_len = usize::from(u16_at(h, 6)).max(HEADER_LEN);
    let body = usize::try_from(u64_at(h, 8)).unwrap_or(usize::MAX);
    Ok(header_len.saturating_add(body))
}

/// Reads a container's entries. Bytes past the size its header gives are ignored.
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry<'_>>, FatbinError> {
    let total = container_len(bytes)?;
    let header_len = usize::from(u16_at(bytes, 6)).max(HEADER_LEN);
    let image = span(bytes, "the entries", 0, total)?;
    let mut entries = Vec::new();
    let mut at = header_len;
    while at < image.len() {
        if entries.len() == MAX_ENTRIES {
            return Err(FatbinError::TooManyEntries);
        }
        let (entry, next) = entry_at(image, at, entries.len())?;
        entries.push(entry);
        at = next;
    }
    Ok(entries)
}

/// The entry whose header starts at byte `at`, and where the next one starts.
fn entry_at(image: &[u8], at: usize, index: usize) -> Result<(Entry<'_>, usize), FatbinError> {
    let fixed = span(image, "an entry header", at, ENTRY_HEADER_MIN)?;
    let header_len = u32_at(fixed, 4) as usize;
    if header_len < ENTRY_HEADER_MIN {
        return Err(FatbinError::EntryHeader { index, at, size: header_len });
    }
    span(image, "an entry header", at, header_len)?;
    let payload_len = usize::try_from(u64_at(fixed, 8)).unwrap_or(usize::MAX);
    let payload = span(image, "an entry payload", at + header_len, payload_len)?;
    let entry = Entry {
        kind: Kind::from_code(u16_at(fixed, 0)),
        arch: u32_at(fixed, 28),
        flags: u64_at(fixed, 40),
        payload,
        uncompressed_len: u64_at(fixed, 56),
        compressed_len: u32_at(fixed, 16),
    };
    Ok((entry, at + header_len + payload_len))
}

/// Containers built by hand, for the tests of this crate.
#[cfg(test)]
pub(crate) mod testing {
    /// A container of `(kind, arch, flags, payload)` entries, laid out as nvcc lays them out (64-byte
    /// entry headers, payloads padded to 8 bytes).
    pub fn container(entries: &[(u16, u32, u64, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, arch, flags, payload) in entries {
            let padded = payload.len().div_ceil(8) * 8;
            let mut h = [0u8; 64];
            h[0..2].copy_from_slice(&kind.to_le_bytes());
            h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
            h[4..8].copy_from_slice(&64u32.to_le_bytes());
            h[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
            h[28..32].copy_from_slice(&arch.to_le_bytes());
            h[40..48].copy_from_slice(&flags.to_le_bytes());
            body.extend_from_slice(&h);
            body.extend_from_slice(payload);
            body.resize(body.len() + padded - payload.len(), 0);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&super::MAGIC.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

#[cfg(test)]
#[path = "fatbin_tests.rs"]
mod tests;
