//! Reading the files a graph names — the graph file itself and each kernel's source or machine code —
//! with a size cap. Every backend's loader and the graph-file loader read through here, so no input
//! is read without bound: a kernel "source" that is `/dev/zero`, a FIFO or a 10 GB file is refused
//! with the path, the limit and why, before its bytes are read, instead of growing a buffer until
//! the process runs out of memory. Only regular files are read (a device, a FIFO or a folder is
//! refused: its size says nothing about how much it yields, and opening a FIFO blocks).

use std::io::Read;
use std::path::{Path, PathBuf};

/// How much one kind of input may hold, and what it is called in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// `kernel file`, `graph file`.
    pub what: &'static str,
    pub bytes: u64,
}

/// A kernel's source or machine code (`.cu`, `.ptx`, `.cubin`, `.wgsl`, `.spv`, `.hsaco`): 64 MiB,
/// well above any one kernel module (the Llama pack's CUDA C is 60 KB; a cubin of a large module a
/// few MB).
pub const KERNEL_FILE: Limit = Limit { what: "kernel file", bytes: 64 << 20 };

/// A graph file: 64 MiB (200,000 nodes written out one table each are about 30 MB).
pub const GRAPH_FILE: Limit = Limit { what: "graph file", bytes: 64 << 20 };

/// A file that was not read, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub reason: ReadFailure,
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    /// A device, a FIFO, a socket or a folder.
    #[error("not a regular file (a {kind}); a {what} is read from a regular file only")]
    NotRegular { kind: &'static str, what: &'static str },
    /// Larger than its limit (`size`: at least this many bytes).
    #[error("{size} bytes is more than the {limit} bytes a {what} may have")]
    TooLarge { size: u64, limit: u64, what: &'static str },
    #[error("not UTF-8 text")]
    NotText,
    #[error("cannot allocate {0} bytes to read it")]
    OutOfMemory(u64),
}

impl ReadError {
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Io
    }
}

/// Checks, without reading it, that `path` is a regular file of at most `limit` bytes; returns its
/// size.
pub fn check(path: &Path, limit: Limit) -> Result<u64, ReadError> {
    let fail = |reason| ReadError { path: path.to_path_buf(), reason };
    let meta = std::fs::metadata(path).map_err(|e| fail(ReadFailure::Io(e)))?;
    check_metadata(&meta, limit).map_err(fail)
}

fn check_metadata(meta: &std::fs::Metadata, limit: Limit) -> Result<u64, ReadFailure> {
    if !meta.is_file() {
        return Err(ReadFailure::NotRegular { kind: file_kind(meta), what: limit.what });
    }
    if meta.len() > limit.bytes {
        return Err(ReadFailure::TooLarge { size: meta.len(), limit: limit.bytes, what: limit.what });
    }
    Ok(meta.len())
}

/// The bytes of `path`, a regular file of at most `limit` bytes (also if it grows while it is read).
pub fn read_bytes(path: &Path, limit: Limit) -> Result<Vec<u8>, ReadError> {
    let fail = |reason| ReadError { path: path.to_path_buf(), reason };
    // Checked before it is opened: opening a FIFO would block.
    check(path, limit)?;
    let file = std::fs::File::open(path).map_err(|e| fail(ReadFailure::Io(e)))?;
    // And again on what was opened (the path may name another file by now).
    let size = check_metadata(&file.metadata().map_err(|e| fail(ReadFailure::Io(e)))?, limit).map_err(fail)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|_| fail(ReadFailure::OutOfMemory(size)))?;
    // One byte past the limit tells a file that grew past it from one that ends at it.
    file.take(limit.bytes + 1).read_to_end(&mut bytes).map_err(|e| {
        if e.kind() == std::io::ErrorKind::OutOfMemory {
            fail(ReadFailure::OutOfMemory(limit.bytes))
        } else {
            fail(ReadFailure::Io(e))
        }
    })?;
    if bytes.len() as u64 > limit.bytes {
        return Err(fail(ReadFailure::TooLarge { size: bytes.len() as u64, limit: limit.bytes, what: limit.what }));
    }
    Ok(bytes)
}

/// The text of `path`, a regular file of at most `limit` bytes of UTF-8.
pub fn read_text(path: &Path, limit: Limit) -> Result<String, ReadError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|_| ReadError { path: path.to_path_buf(), reason: ReadFailure::NotText })
}

fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "folder"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ostinato-capped-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn devices_and_folders_are_refused_before_a_byte_is_read() {
        for (path, kind) in [("/dev/zero", "character device"), ("/tmp", "folder")] {
            let e = read_bytes(Path::new(path), KERNEL_FILE).unwrap_err();
            assert_eq!(e.to_string(), format!("{path}: not a regular file (a {kind}); a kernel file is read from a regular file only"));
        }
    }

    #[test]
    fn a_file_past_its_limit_is_refused_naming_size_and_limit() {
        let p = temp("big", &[7u8; 101]);
        let small = Limit { what: "kernel file", bytes: 100 };
        let e = read_bytes(&p, small).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: 101 bytes is more than the 100 bytes a kernel file may have", p.display()));
        assert_eq!(read_bytes(&p, Limit { bytes: 101, ..small }).unwrap().len(), 101, "a file at its limit is read");
        assert!(check(&p, small).is_err() && check(&p, Limit { bytes: 101, ..small }).unwrap() == 101);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn text_must_be_utf8_and_a_missing_file_says_cannot_read() {
        let p = temp("bin", &[0xff, 0xfe]);
        assert!(read_text(&p, GRAPH_FILE).unwrap_err().to_string().ends_with(": not UTF-8 text"));
        let _ = std::fs::remove_file(&p);
        assert!(read_text(&p, GRAPH_FILE).unwrap_err().to_string().contains(": cannot read: "));
    }
}
