use super::*;
use crate::fatbin::testing::container;
use crate::store::{ImageId, Origin};

const PLAIN: &[u8] = include_bytes!("../tests/fixtures/scale_plain.fatbin");
const ZSTD: &[u8] = include_bytes!("../tests/fixtures/scale_zstd.fatbin");
const LZ4: &[u8] = include_bytes!("../tests/fixtures/scale_lz4.fatbin");
/// `--compress-mode=size`: the cubin compressed too (zstd), beside the PTX.
const SIZE: &[u8] = include_bytes!("../tests/fixtures/scale_size.fatbin");

fn image(bytes: &[u8]) -> Image {
    Image { id: ImageId::of(bytes), bytes: bytes.to_vec(), origin: Origin::ModuleLoadData }
}

/// The PTX of the fixture's kernel (`scale(float* out, const float* in, float a, int n)`).
fn scale_ptx() -> String {
    let entries = fatbin::parse(PLAIN).unwrap();
    entries.iter().find_map(|e| e.ptx()).unwrap().to_string()
}

fn access(status: &CodeStatus) -> &[Option<Observed>] {
    match status {
        CodeStatus::Analysed { access, .. } => access,
        other => panic!("not analysed: {other:?}"),
    }
}

#[test]
fn the_ptx_beside_the_running_cubin_gives_each_pointers_access() {
    let s = analyse(&image(PLAIN), "scale", 90, &[true, true, false, false]);
    assert_eq!(access(&s), &[Some(Observed::Write), Some(Observed::Read), None, None]);
    let CodeStatus::Analysed { source, module_writes, .. } = &s else { unreachable!() };
    assert!(source.ends_with("PTX sm_90"), "{source}");
    assert!(module_writes.is_empty());
    assert_eq!(param_count(&image(PLAIN), "scale", 90), Some(4));
}

#[test]
fn a_newer_device_compiles_the_ptx_and_an_older_one_runs_nothing() {
    let s = analyse(&image(PLAIN), "scale", 100, &[true, true, false, false]);
    assert_eq!(access(&s)[0], Some(Observed::Write));
    let CodeStatus::NotAnalysed { why } = analyse(&image(PLAIN), "scale", 80, &[true; 4]) else { panic!() };
    assert!(why.contains("runs on sm_80"), "{why}");
}

#[test]
fn compressed_ptx_zstd_by_default_and_lz4_for_speed_is_decompressed_and_read() {
    for fixture in [ZSTD, LZ4, SIZE] {
        let s = analyse(&image(fixture), "scale", 90, &[true, true, false, false]);
        assert_eq!(access(&s), &[Some(Observed::Write), Some(Observed::Read), None, None]);
        assert_eq!(param_count(&image(fixture), "scale", 90), Some(4));
    }
    // Plain text flagged LZ4 is no LZ4 block of the promised size: a reason, not a guess.
    let lz4 = container(&[(1, 90, 0x2011, scale_ptx().as_bytes())]);
    let CodeStatus::NotAnalysed { why } = analyse(&image(&lz4), "scale", 90, &[true, true, false, false]) else { panic!() };
    assert!(why.contains("lz4 payload does not decompress"), "{why}");
}

#[test]
fn machine_code_alone_or_beside_another_architectures_ptx_is_not_analysed() {
    let cubin = fatbin::parse(PLAIN).unwrap()[0].elf().unwrap().to_vec();
    let CodeStatus::NotAnalysed { why } = analyse(&image(&cubin), "scale", 90, &[true; 4]) else { panic!() };
    assert!(why.contains("machine code only"), "{why}");
    assert_eq!(param_count(&image(&cubin), "scale", 90), Some(4));
    let ptx = scale_ptx();
    let mixed = container(&[(2, 90, 0x11, &cubin), (1, 80, 0x11, ptx.as_bytes())]);
    let CodeStatus::NotAnalysed { why } = analyse(&image(&mixed), "scale", 90, &[true; 4]) else { panic!() };
    assert!(why.contains("sm_90"), "{why}");
}

#[test]
fn machine_code_is_read_through_the_ptx_beside_it_where_one_is_given() {
    let cubin = fatbin::parse(PLAIN).unwrap()[0].elf().unwrap().to_vec();
    let want = cubin.clone();
    let beside = move |c: &[u8]| (c == want.as_slice()).then(scale_ptx);
    let s = analyse_with(&image(&cubin), "scale", 90, &[true, true, false, false], &beside);
    assert_eq!(access(&s), &[Some(Observed::Write), Some(Observed::Read), None, None]);
    let CodeStatus::Analysed { source, .. } = &s else { unreachable!() };
    assert!(source.contains("Triton's cache"), "{source}");
    // The same cubin inside a fat binary (machine code only): never looked up.
    let fat = container(&[(2, 90, 0x11, &cubin)]);
    let never = |_: &[u8]| -> Option<String> { panic!("machine code inside a fat binary is not looked up in Triton's cache") };
    let CodeStatus::NotAnalysed { why } = analyse_with(&image(&fat), "scale", 90, &[true; 4], &never) else { panic!() };
    assert!(why.contains("machine code only"), "{why}");
    // Another cubin: not found beside, not analysed.
    let CodeStatus::NotAnalysed { why } = analyse_with(&image(&cubin[..cubin.len() - 1]), "scale", 90, &[true; 4], &beside) else { panic!() };
    assert!(!why.is_empty());
}

#[test]
fn a_raw_ptx_image_is_the_code() {
    let mut text = scale_ptx().into_bytes();
    text.push(0);
    let s = analyse(&image(&text), "scale", 90, &[true, true, false, false]);
    assert_eq!(access(&s)[1], Some(Observed::Read));
}

#[test]
fn an_entry_not_in_the_code_or_a_count_mismatch_is_not_analysed() {
    let CodeStatus::NotAnalysed { why } = analyse(&image(PLAIN), "other", 90, &[true]) else { panic!() };
    assert!(why.contains("no `.entry other`"), "{why}");
    let CodeStatus::NotAnalysed { why } = analyse(&image(PLAIN), "scale", 90, &[true, true]) else { panic!() };
    assert!(why.contains("takes 4 params, the function 2"), "{why}");
}

#[test]
fn a_kernel_that_touches_memory_through_no_known_pointer_is_not_analysed() {
    // `out` was null at capture: no param holds a device allocation, yet the code stores.
    let CodeStatus::NotAnalysed { why } = analyse(&image(PLAIN), "scale", 90, &[false; 4]) else { panic!() };
    assert!(why.contains("no param holds a device allocation"), "{why}");
}

#[test]
fn a_pointer_missed_among_others_makes_every_access_unknown() {
    // `in` was not recognised as a pointer: its load has an address of unknown origin.
    let s = analyse(&image(PLAIN), "scale", 90, &[true, false, false, false]);
    assert_eq!(access(&s)[0], Some(Observed::Unknown));
}

#[test]
fn malformed_images_are_reasons() {
    let CodeStatus::NotAnalysed { why } = analyse(&image(&PLAIN[..100]), "scale", 90, &[true; 4]) else { panic!() };
    assert!(why.contains("cut short"), "{why}");
    let CodeStatus::NotAnalysed { .. } = analyse(&image(b"\xff\xfe\0"), "scale", 90, &[true; 4]) else { panic!() };
}
