use super::testing::container;
use super::*;
use proptest::prelude::*;

const PLAIN: &[u8] = include_bytes!("../tests/fixtures/scale_plain.fatbin");
const ZSTD: &[u8] = include_bytes!("../tests/fixtures/scale_zstd.fatbin");
const LZ4: &[u8] = include_bytes!("../tests/fixtures/scale_lz4.fatbin");

#[test]
fn nvccs_plain_container_gives_its_cubin_and_its_ptx() {
    assert_eq!(container_len(PLAIN).unwrap(), PLAIN.len());
    let entries = parse(PLAIN).unwrap();
    let kinds: Vec<(Kind, u32)> = entries.iter().map(|e| (e.kind, e.arch)).collect();
    assert_eq!(kinds, vec![(Kind::Elf, 90), (Kind::Ptx, 90)]);
    assert!(entries[0].elf().unwrap().starts_with(b"\x7fELF"));
    let ptx = entries[1].ptx().unwrap();
    assert!(ptx.contains(".entry scale(") && ptx.contains(".target sm_90"), "{ptx}");
    assert!(entries.iter().all(|e| e.compression().is_none()));
}

#[test]
fn nvccs_default_container_compresses_its_ptx_and_says_so() {
    let entries = parse(ZSTD).unwrap();
    let ptx = entries.iter().find(|e| e.kind == Kind::Ptx).unwrap();
    assert_eq!(ptx.compression(), Some("zstd"));
    assert!(ptx.ptx().is_none(), "a compressed text is not read as text");
    assert!(ptx.payload.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]), "zstd's frame magic");
    assert!(ptx.uncompressed_len > ptx.payload.len() as u64 / 2);
    // Decompressed, it is the plain container's PTX text, byte for byte.
    let plain = parse(PLAIN).unwrap().iter().find_map(|e| e.ptx()).unwrap().to_string();
    assert_eq!(ptx.ptx_text().unwrap().as_deref(), Some(plain.as_str()));
}

#[test]
fn the_speed_container_compresses_its_ptx_as_an_lz4_block_that_decompresses_to_the_plain_text() {
    let entries = parse(LZ4).unwrap();
    let ptx = entries.iter().find(|e| e.kind == Kind::Ptx).unwrap();
    assert_eq!(ptx.compression(), Some("lz4"));
    assert!(ptx.ptx().is_none());
    let text = ptx.ptx_text().unwrap().unwrap();
    assert!(text.contains(".entry scale(") && text.contains(".target sm_90"), "{text}");
    let plain = parse(PLAIN).unwrap().iter().find_map(|e| e.ptx()).unwrap().to_string();
    assert_eq!(text, plain, "the same PTX as the plain build, byte for byte");
    // A size that lies, or a corrupt block: an error naming the codec.
    let mut c = LZ4.to_vec();
    let at = ptx.payload.as_ptr() as usize - LZ4.as_ptr() as usize - 80;
    c[at + 56..at + 64].copy_from_slice(&100u64.to_le_bytes());
    let e = parse(&c).unwrap().iter().find(|e| e.kind == Kind::Ptx).unwrap().ptx_text().unwrap_err();
    assert!(e.to_string().starts_with("fat binary entry (sm_90): its lz4 payload does not decompress"), "{e}");
}

/// The zstd fixture's PTX entry with `edit` applied to a copy of the container.
fn zstd_entry_edited(edit: impl Fn(&mut Vec<u8>, usize)) -> Result<Option<String>, FatbinError> {
    let mut c = ZSTD.to_vec();
    let at = {
        let entries = parse(ZSTD).unwrap();
        let e = entries.iter().find(|e| e.kind == Kind::Ptx).unwrap();
        e.payload.as_ptr() as usize - ZSTD.as_ptr() as usize
    };
    edit(&mut c, at);
    let entries = parse(&c)?;
    let e = entries.iter().find(|e| e.kind == Kind::Ptx).unwrap();
    e.ptx_text().map(|t| t.map(|t| t.into_owned()))
}

#[test]
fn a_zstd_payload_that_lies_about_its_sizes_or_is_corrupt_is_an_error_naming_why() {
    // The PTX entry's header is the 80 bytes before its payload (kind 1, header size 80): compressed
    // size at 16, uncompressed at 56.
    let header = |at: usize| at - 80;
    let _ = zstd_entry_edited(|c, at| {
        assert_eq!((u16_at(c, header(at)), u32_at(c, header(at) + 4)), (1, 80), "the fixture's layout");
    });
    let e = zstd_entry_edited(|c, at| c[header(at) + 56..header(at) + 64].copy_from_slice(&700u64.to_le_bytes())).unwrap_err();
    assert!(e.to_string().contains("the header gives 700"), "{e}");
    let e = zstd_entry_edited(|c, at| c[header(at) + 56..header(at) + 64].copy_from_slice(&(1u64 << 40).to_le_bytes())).unwrap_err();
    assert!(e.to_string().contains("decompressed (1 to"), "{e}");
    let e = zstd_entry_edited(|c, at| c[header(at) + 16..header(at) + 20].copy_from_slice(&100_000u32.to_le_bytes())).unwrap_err();
    assert!(e.to_string().contains("compressed bytes"), "{e}");
    let e = zstd_entry_edited(|c, at| c[at] ^= 0xff).unwrap_err();
    assert!(e.to_string().starts_with("fat binary entry (sm_90): its zstd payload does not decompress"), "{e}");
}

#[test]
fn a_hand_built_container_reads_back_entry_for_entry() {
    let c = container(&[(1, 80, 0x11, b".version 8.0\n\0"), (2, 90, 0x11, b"\x7fELF...."), (7, 100, 0x2011, b"zz")]);
    let e = parse(&c).unwrap();
    assert_eq!(e.len(), 3);
    assert_eq!((e[0].kind, e[0].arch, e[0].ptx()), (Kind::Ptx, 80, Some(".version 8.0\n")));
    assert_eq!(e[1].elf().map(|b| &b[..4]), Some(&b"\x7fELF"[..]));
    assert_eq!((e[2].kind, e[2].compression()), (Kind::Other(7), Some("lz4")));
    assert!(e[2].elf().is_none() && e[2].ptx().is_none());
}

#[test]
fn trailing_bytes_past_the_declared_size_are_not_read() {
    let mut c = container(&[(1, 90, 0, b"x")]);
    c.extend_from_slice(&[0xff; 40]);
    assert_eq!(parse(&c).unwrap().len(), 1);
}

#[test]
fn malformed_containers_are_errors_naming_the_fault() {
    assert!(matches!(parse(b"\x50\xed\x55"), Err(FatbinError::Truncated { .. })));
    assert_eq!(parse(&[0u8; 16]), Err(FatbinError::Magic { found: 0 }));
    let good = container(&[(1, 90, 0, b"abcdefgh")]);
    // Cut anywhere: the header, an entry header, a payload.
    for cut in [8, 20, 70, good.len() - 1] {
        assert!(matches!(parse(&good[..cut]), Err(FatbinError::Truncated { .. })), "cut at {cut}");
    }
    let mut small = good.clone();
    small[16 + 4..16 + 8].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(parse(&small), Err(FatbinError::EntryHeader { index: 0, at: 16, size: 8 })));
    let mut huge = good.clone();
    huge[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(parse(&huge), Err(FatbinError::Truncated { .. })));
    let mut body = good.clone();
    body[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(parse(&body).is_err());
}

#[test]
fn the_entry_count_is_bounded() {
    let many: Vec<(u16, u32, u64, &[u8])> = (0..MAX_ENTRIES + 1).map(|_| (1u16, 90u32, 0u64, &b""[..])).collect();
    assert_eq!(parse(&container(&many)), Err(FatbinError::TooManyEntries));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = container_len(&bytes);
        let _ = parse(&bytes);
    }

    #[test]
    fn random_bytes_behind_a_real_magic_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 16..1024)) {
        bytes[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        if let Ok(entries) = parse(&bytes) {
            for e in entries {
                let _ = (e.ptx(), e.elf(), e.compression(), e.ptx_text());
            }
        }
    }

    #[test]
    fn a_real_container_with_any_byte_changed_never_panics(at in 0usize..4792, value in any::<u8>()) {
        let mut c = PLAIN.to_vec();
        c[at % PLAIN.len()] = value;
        if let Ok(entries) = parse(&c) {
            for e in entries {
                let _ = (e.ptx(), e.elf());
            }
        }
    }
}

proptest! {
    #[test]
    fn the_compressed_containers_with_any_byte_changed_never_panic(at in 0usize..4096, value in any::<u8>(), lz4 in any::<bool>()) {
        let mut c = if lz4 { LZ4.to_vec() } else { ZSTD.to_vec() };
        let n = c.len();
        c[at % n] = value;
        if let Ok(entries) = parse(&c) {
            for e in entries {
                let _ = e.ptx_text();
            }
        }
    }
}
