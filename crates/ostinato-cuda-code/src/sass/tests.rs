use super::*;

/// `nvdisasm -c` of tests/fixtures/sass_wait.cubin (sm_90; see tests/ptx_fixtures.rs).
const SASS: &str = include_str!("../../tests/fixtures/sass_wait.sass");

/// Every kernel of the fixture: out, w, x (pointers), n (u32).
fn certify_fixture(entry: &str) -> Result<SassPreWait, String> {
    let offsets = param_offsets(&[8, 8, 8, 4]);
    certify(&parse(SASS), entry, &offsets, &|p| p < 3)
}

#[test]
fn machine_code_certificate_golden() {
    assert_eq!(parse(SASS).target.as_deref(), Some("sm_90"));
    let plain = certify_fixture("plain_prefetch").unwrap();
    assert_eq!(plain.reads, [1], "the plain load of w precedes ACQBULK");
    assert_eq!(plain.loads.len(), 1);
    assert!(plain.loads[0].starts_with("LDG.E "), "{:?}", plain.loads);
    let ldg = certify_fixture("ldg_prefetch").unwrap();
    assert_eq!(ldg.reads, Vec::<usize>::new(), "ptxas sank the non-coherent load below the wait");
    assert_eq!(ldg.noncoherent_after_wait, 1);
    assert!(certify_fixture("trigger_first").unwrap().early_trigger);
    assert!(!plain.early_trigger);
    let store = certify_fixture("early_store").unwrap_err();
    assert!(store.starts_with("`STG.E") && store.contains("before `ACQBULK`"), "{store}");
    assert!(certify_fixture("early_exit").unwrap_err().contains("EXIT"));
    assert!(certify_fixture("no_wait").unwrap_err().contains("no `ACQBULK`"));
    assert!(certify_fixture("nope").unwrap_err().contains("no function `nope`"));
}

#[test]
fn machine_code_mutations() {
    // A pointer loaded from memory addresses the pre-wait load.
    let offsets = param_offsets(&[8, 8, 8, 4]);
    let chased = SASS.replacen(
        "/*0070*/                   LDG.E R0, desc[UR4][R2.64] ;",
        "/*0070*/                   LDG.E.64 R2, desc[UR4][R2.64] ;\n        /*0074*/                   LDG.E R0, desc[UR4][R2.64] ;",
        1,
    );
    assert_ne!(chased, SASS, "the mutation applies");
    assert!(certify(&parse(&chased), "plain_prefetch", &offsets, &|p| p < 3).unwrap_err().contains("not derived from a buffer param"));
    // A narrow loaded index offsetting the param stays the param's read.
    let indexed = SASS.replacen(
        "/*0050*/                   IMAD.WIDE.U32 R2, R5, 0x4, R2 ;",
        "/*0050*/                   LDG.E R5, desc[UR4][R2.64] ;\n        /*0054*/                   IMAD.WIDE.U32 R2, R5, 0x4, R2 ;",
        1,
    );
    assert_ne!(indexed, SASS, "the mutation applies");
    assert_eq!(certify(&parse(&indexed), "plain_prefetch", &offsets, &|p| p < 3).map(|p| p.reads), Ok(vec![1]));
    // Another architecture's machine code is not read.
    let sm80 = SASS.replace(".target\tsm_90", ".target\tsm_80");
    assert!(certify(&parse(&sm80), "plain_prefetch", &offsets, &|p| p < 3).unwrap_err().contains("sm_90"));
    // A param that is not a buffer addresses nothing by itself.
    assert!(certify(&parse(SASS), "plain_prefetch", &offsets, &|p| p != 1).unwrap_err().contains("not derived from a buffer param"));
}

#[test]
fn params_are_laid_out_at_natural_alignment() {
    assert_eq!(param_offsets(&[8, 4, 8, 4, 4]), [(0, 8), (8, 4), (16, 8), (24, 4), (28, 4)]);
}
