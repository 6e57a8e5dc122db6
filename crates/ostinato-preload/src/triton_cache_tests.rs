//! Finding a Triton kernel's PTX beside its cubin, in cache folders made here.

use super::*;

const PTX: &str = ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\nret;\n}\n";

/// A fresh cache folder for test `name`.
fn cache(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("ostinato-triton-cache-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).unwrap();
    root
}

/// A compilation folder `hash` holding `k.cubin` (and `k.ptx` where given).
fn compilation(root: &Path, hash: &str, cubin: &[u8], ptx: Option<&str>) -> PathBuf {
    let dir = root.join(hash);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("k.cubin"), cubin).unwrap();
    if let Some(p) = ptx {
        fs::write(dir.join("k.ptx"), p).unwrap();
    }
    fs::write(dir.join("k.json"), "{}").unwrap();
    dir
}

#[test]
fn the_root_is_the_variable_else_the_home_cache() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    assert_eq!(default_root(vars(&[("TRITON_CACHE_DIR", "/c"), ("HOME", "/h")])), Some(PathBuf::from("/c")));
    assert_eq!(default_root(vars(&[("HOME", "/h")])), Some(PathBuf::from("/h/.triton/cache")));
    assert_eq!(default_root(vars(&[])), None);
}

#[test]
fn the_ptx_beside_an_equal_cubin_is_found_and_nothing_else() {
    let root = cache("equal");
    compilation(&root, "aaaa", b"\x7fELF other bytes", Some(PTX));
    compilation(&root, "bbbb", b"\x7fELF cubin bytes", Some(PTX));
    assert_eq!(ptx_for(&root, b"\x7fELF cubin bytes").as_deref(), Some(PTX));
    // Same length, other bytes: none.
    assert_eq!(ptx_for(&root, b"\x7fELF cubin bytez"), None);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_missing_or_foreign_ptx_is_not_taken() {
    let root = cache("missing");
    compilation(&root, "aaaa", b"cubin-one", None);
    assert_eq!(ptx_for(&root, b"cubin-one"), None);
    compilation(&root, "bbbb", b"cubin-two", Some("not ptx at all"));
    assert_eq!(ptx_for(&root, b"cubin-two"), None);
    assert_eq!(ptx_for(&root.join("absent"), b"cubin-two"), None);
    let _ = fs::remove_dir_all(&root);
}

#[cfg(unix)]
#[test]
fn links_are_not_followed() {
    let root = cache("links");
    let elsewhere = cache("links-target");
    let real = compilation(&elsewhere, "cccc", b"linked cubin", Some(PTX));
    std::os::unix::fs::symlink(&real, root.join("linked-folder")).unwrap();
    let dir = root.join("dddd");
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(real.join("k.cubin"), dir.join("k.cubin")).unwrap();
    fs::write(dir.join("k.ptx"), PTX).unwrap();
    assert_eq!(ptx_for(&root, b"linked cubin"), None);
    let _ = fs::remove_dir_all(&root);
    let _ = fs::remove_dir_all(&elsewhere);
}
