//! Reading a code image through the pointer the application handed the driver, which comes without a
//! length: the format from its first bytes, then its length from its own header (see
//! [`crate::image`]), never reading past what the header (or a PTX text's NUL) says, and never more
//! than [`image::MAX_IMAGE`] bytes.

use crate::image::{self, Format, ImageError};

/// The bytes `ptr..ptr + len`.
///
/// # Safety
/// Those bytes must be readable for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// The image at `ptr`: a fat binary (or cudart's wrapper of one: then the fat binary it points to),
/// a cubin, or a NUL-terminated PTX text.
///
/// # Safety
/// `ptr` must be an image the driver accepted (or is about to be given), valid for `'a`: its headers
/// tell its true length.
pub(super) unsafe fn image<'a>(ptr: *const u8) -> Result<&'a [u8], ImageError> {
    let mut prefix = Vec::with_capacity(4);
    while image::wants_byte(&prefix) {
        // SAFETY: byte `prefix.len()` is read only while the bytes before it match a magic (which
        // holds no NUL), so it lies within the image or its terminating NUL.
        prefix.push(unsafe { *ptr.add(prefix.len()) });
    }
    match image::format(&prefix) {
        // SAFETY: the caller's promise: a fat binary holds its header and the length it gives.
        Format::Fatbin => unsafe { fatbin(ptr) },
        Format::Wrapper => {
            // SAFETY: a wrapper is `image::WRAPPER_LEN` bytes.
            let (_, data) = image::wrapper(unsafe { bytes(ptr, image::WRAPPER_LEN) })?;
            let inner = data as *const u8;
            let mut magic = Vec::with_capacity(4);
            while image::wants_byte(&magic) {
                // SAFETY: as above, for the fat binary the wrapper points to.
                magic.push(unsafe { *inner.add(magic.len()) });
            }
            match image::format(&magic) {
                // SAFETY: the wrapper's fat binary, under the caller's promise.
                Format::Fatbin => unsafe { fatbin(inner) },
                other => Err(ImageError::Wrapper(format!("it points to a {other:?} image, not a fat binary"))),
            }
        }
        Format::Elf => {
            // SAFETY: an ELF image holds its 64-byte header.
            let tables = image::elf_tables_end(unsafe { bytes(ptr, image::ELF_HEADER_LEN) })?;
            // SAFETY: a cubin holds the tables its header places.
            let len = image::elf_len(unsafe { bytes(ptr, tables) })?;
            // SAFETY: and the sections those tables place.
            Ok(unsafe { bytes(ptr, len) })
        }
        Format::Ptx => {
            let mut len = 0usize;
            // SAFETY: a PTX text ends at its NUL: no byte past it is read.
            while unsafe { *ptr.add(len) } != 0 {
                len += 1;
                if len > image::MAX_IMAGE {
                    return Err(ImageError::TooLarge { what: "a PTX text", len });
                }
            }
            // SAFETY: the text and its NUL.
            Ok(unsafe { bytes(ptr, len + 1) })
        }
    }
}

/// The fat binary at `ptr`.
///
/// # Safety
/// `ptr` must start a fat binary valid for `'a`.
unsafe fn fatbin<'a>(ptr: *const u8) -> Result<&'a [u8], ImageError> {
    // SAFETY: the container header.
    let len = image::fatbin_len(unsafe { bytes(ptr, crate::fatbin::HEADER_LEN) })?;
    // SAFETY: the length the header gives.
    Ok(unsafe { bytes(ptr, len) })
}
