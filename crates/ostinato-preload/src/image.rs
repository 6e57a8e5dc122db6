//! What a code image handed to the driver is, and how long it is. `cuModuleLoadData`,
//! `cuLibraryLoadData` and `__cudaRegisterFatBinary` pass a pointer and no length: the length comes
//! from the image's own header (a fat binary's, a cubin's ELF header and section table), or from the
//! terminating NUL of a PTX text. These functions read headers already copied out; the FFI layer
//! copies step by step, never more than a header says (and never more than [`MAX_IMAGE`]).

use crate::fatbin;

/// The largest image kept (a bound on every copy).
pub const MAX_IMAGE: usize = 256 << 20;
/// cudart's wrapper around a fat binary (`__fatBinC_Wrapper_t`): its magic.
pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// Bytes of the wrapper: i32 magic, i32 version, a pointer to the fat binary, a pointer to a file
/// name or to linked fat binaries.
pub const WRAPPER_LEN: usize = 24;
/// Bytes of a 64-bit ELF header.
pub const ELF_HEADER_LEN: usize = 64;
const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

/// What an image is, told by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A fat binary container ([`fatbin`]).
    Fatbin,
    /// cudart's wrapper, pointing at a fat binary.
    Wrapper,
    /// A cubin.
    Elf,
    /// Anything else is read as a NUL-terminated PTX text (what the driver does too).
    Ptx,
}

/// An image whose length cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Fatbin(#[from] fatbin::FatbinError),
    #[error("ELF header: {0}")]
    Elf(String),
    #[error("wrapper: {0}")]
    Wrapper(String),
    #[error("{what} of {len} bytes is larger than the {MAX_IMAGE} bytes kept")]
    TooLarge { what: &'static str, len: usize },
}

/// The magic of each format with one, in the order they are tried.
const MAGICS: [(Format, [u8; 4]); 3] =
    [(Format::Fatbin, fatbin::MAGIC.to_le_bytes()), (Format::Wrapper, WRAPPER_MAGIC.to_le_bytes()), (Format::Elf, ELF_MAGIC)];

/// Whether byte `at` of the image is worth reading to tell its format, given the bytes before it:
/// only while they still match a magic (no magic holds a NUL, so a short PTX text is never read past
/// its end).
pub fn wants_byte(prefix: &[u8]) -> bool {
    prefix.len() < 4 && MAGICS.iter().any(|(_, m)| m.starts_with(prefix))
}

/// The format of an image whose first bytes (read while [`wants_byte`]) are `prefix`.
pub fn format(prefix: &[u8]) -> Format {
    MAGICS.iter().find(|(_, m)| prefix == m).map_or(Format::Ptx, |(f, _)| *f)
}

fn bounded(what: &'static str, len: usize) -> Result<usize, ImageError> {
    if len > MAX_IMAGE {
        return Err(ImageError::TooLarge { what, len });
    }
    Ok(len)
}

/// A fat binary's length, from its 16-byte header.
pub fn fatbin_len(header: &[u8]) -> Result<usize, ImageError> {
    bounded("a fat binary", fatbin::container_len(header)?)
}

/// The wrapper's version and the address of its fat binary.
pub fn wrapper(bytes: &[u8]) -> Result<(u32, u64), ImageError> {
    let b = bytes.get(..WRAPPER_LEN).ok_or_else(|| ImageError::Wrapper(format!("{} bytes, {WRAPPER_LEN} needed", bytes.len())))?;
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if word(0) != WRAPPER_MAGIC {
        return Err(ImageError::Wrapper(format!("magic {:#010x}", word(0))));
    }
    let data = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    if data == 0 {
        return Err(ImageError::Wrapper("a null fat binary pointer".into()));
    }
    Ok((word(4), data))
}

/// Reads little-endian fields of an ELF header.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u16(&self, at: usize) -> usize {
        usize::from(u16::from_le_bytes([self.0[at], self.0[at + 1]]))
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes([self.0[at], self.0[at + 1], self.0[at + 2], self.0[at + 3]])
    }
    fn u64(&self, at: usize) -> usize {
        let b = &self.0[at..at + 8];
        usize::try_from(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).unwrap_or(usize::MAX)
    }
}

/// How far a cubin's header says it extends: the end of its section and program header tables (ptxas
/// writes them last). The section table it names is checked by [`elf_len`].
pub fn elf_tables_end(header: &[u8]) -> Result<usize, ImageError> {
    let h = header.get(..ELF_HEADER_LEN).ok_or_else(|| ImageError::Elf(format!("{} bytes, {ELF_HEADER_LEN} needed", header.len())))?;
    if h[..4] != ELF_MAGIC || h[4] != 2 || h[5] != 1 {
        return Err(ImageError::Elf("not a little-endian 64-bit ELF".into()));
    }
    let f = Fields(h);
    let table = |off: usize, size: usize, count: usize| off.saturating_add(size.saturating_mul(count));
    let end = table(f.u64(0x28), f.u16(0x3a), f.u16(0x3c)).max(table(f.u64(0x20), f.u16(0x36), f.u16(0x38))).max(ELF_HEADER_LEN);
    bounded("a cubin", end)
}

/// A cubin's full length: the end of its tables or of its last section with file bytes, whichever
/// is further. `elf` holds at least [`elf_tables_end`] bytes.
pub fn elf_len(elf: &[u8]) -> Result<usize, ImageError> {
    let tables = elf_tables_end(elf)?;
    if elf.len() < tables {
        return Err(ImageError::Elf(format!("{} bytes, the tables end at {tables}", elf.len())));
    }
    let f = Fields(elf);
    let (shoff, shentsize, shnum) = (f.u64(0x28), f.u16(0x3a), f.u16(0x3c));
    if shnum > 0 && shentsize < 64 {
        return Err(ImageError::Elf(format!("section headers of {shentsize} bytes")));
    }
    let mut end = tables;
    for i in 0..shnum {
        let at = shoff.saturating_add(i * shentsize);
        let sh = elf.get(at..at.saturating_add(64)).ok_or_else(|| ImageError::Elf(format!("section header {i} past the image")))?;
        let s = Fields(sh);
        const SHT_NOBITS: u32 = 8;
        if s.u32(4) != SHT_NOBITS {
            end = end.max(s.u64(0x18).saturating_add(s.u64(0x20)));
        }
    }
    bounded("a cubin", end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PLAIN: &[u8] = include_bytes!("../tests/fixtures/scale_plain.fatbin");

    fn prefix_of(image: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        while wants_byte(&p) && p.len() < image.len() {
            p.push(image[p.len()]);
        }
        p
    }

    #[test]
    fn formats_are_told_by_their_magic_and_text_is_never_overread() {
        assert_eq!(format(&prefix_of(PLAIN)), Format::Fatbin);
        assert_eq!(format(&prefix_of(&WRAPPER_MAGIC.to_le_bytes())), Format::Wrapper);
        assert_eq!(format(&prefix_of(b"\x7fELF\x02\x01")), Format::Elf);
        assert_eq!(format(&prefix_of(b".version 8.0")), Format::Ptx);
        // A PTX text of one byte (its NUL) is read one byte far: no magic starts with NUL.
        assert_eq!(prefix_of(b"\0"), b"\0");
        assert_eq!(prefix_of(b"P\0"), b"P\0".to_vec(), "0x50 starts the fat binary magic, NUL ends it");
        assert_eq!(format(b"P\0"), Format::Ptx);
    }

    #[test]
    fn a_cubins_length_is_its_tables_end() {
        let entries = crate::fatbin::parse(PLAIN).unwrap();
        let elf = entries[0].elf().unwrap();
        let tables = elf_tables_end(elf).unwrap();
        assert_eq!(tables, elf.len(), "ptxas writes the tables last; the payload is not padded here");
        assert_eq!(elf_len(elf).unwrap(), elf.len());
        assert!(matches!(elf_len(&elf[..tables - 1]), Err(ImageError::Elf(_))));
    }

    #[test]
    fn a_wrapper_points_at_its_fat_binary() {
        let mut w = [0u8; WRAPPER_LEN];
        w[..4].copy_from_slice(&WRAPPER_MAGIC.to_le_bytes());
        w[4..8].copy_from_slice(&1u32.to_le_bytes());
        w[8..16].copy_from_slice(&0x1234u64.to_le_bytes());
        assert_eq!(wrapper(&w).unwrap(), (1, 0x1234));
        w[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(wrapper(&w).is_err());
        assert!(wrapper(&w[..10]).is_err());
    }

    #[test]
    fn lengths_past_the_bound_are_refused() {
        let mut h = PLAIN[..16].to_vec();
        h[8..16].copy_from_slice(&(MAX_IMAGE as u64).to_le_bytes());
        assert!(matches!(fatbin_len(&h), Err(ImageError::TooLarge { .. })));
        assert_eq!(fatbin_len(&PLAIN[..16]).unwrap(), PLAIN.len());
    }

    proptest! {
        #[test]
        fn random_headers_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..600), elf in any::<bool>()) {
            if elf && bytes.len() >= 6 {
                bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
            }
            let _ = format(&prefix_of(&bytes));
            let _ = (fatbin_len(&bytes), wrapper(&bytes), elf_tables_end(&bytes), elf_len(&bytes));
        }
    }
}
