//! `include/ostinato.h` is exactly what cbindgen makes of this crate: a change of the ABI without a
//! regenerated header fails here. `OSTINATO_WRITE_HEADER=1` writes the header instead
//! (`scripts/gen-c-header.sh`).

#[test]
fn the_checked_in_header_is_what_cbindgen_generates() {
    let crate_dir = &ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}")).join("crates/ostinato-capi");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new().with_crate(crate_dir).with_config(config).generate().expect("cbindgen generates the header").write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = crate_dir.join("include/ostinato.h");
    if std::env::var_os("OSTINATO_WRITE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == generated, "include/ostinato.h differs from what cbindgen generates: run scripts/gen-c-header.sh and commit it");
    for entry in [
        "ost_graph_load",
        "ost_plan_compile",
        "ost_plan_edge_count",
        "ost_exec_create",
        "ost_exec_replay",
        "ost_exec_read",
        "ost_exec_set_slot_u32",
        "ost_last_error",
        "ost_abi_version",
    ] {
        assert!(generated.contains(&format!("{entry}(")), "the header declares {entry}");
    }
}
