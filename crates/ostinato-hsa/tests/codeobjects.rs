//! The built-in code objects: their kernel metadata matches the signatures (gfx1100 and every other
//! target), a planted mismatch is refused naming what differs, and they are what their source compiles
//! to (the drift check, where clang 19 is installed).

use ostinato::{Access, KernelSig, ScalarType};
use ostinato_hsa::builtins;
use ostinato_hsa::codeobject::{check_signature, parse};

fn mix_sig() -> KernelSig {
    KernelSig::new("mix")
        .buffer("out", Access::ReadWrite)
        .buffer("inp", Access::Read)
        .scalar("n_out", ScalarType::U32)
        .scalar("n_in", ScalarType::U32)
        .scalar("salt", ScalarType::U32)
}

fn add_one_sig() -> KernelSig {
    KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)
}

#[test]
fn the_gfx1100_builtins_metadata_matches_their_signatures() {
    let object = parse(builtins::code_object_for("gfx1100").unwrap()).unwrap();
    assert_eq!((object.isa.as_str(), object.target.as_str(), object.version), ("gfx1100", "amdgcn-amd-amdhsa--gfx1100", 5));
    let mix = object.kernel("mix").unwrap();
    let layout = check_signature(&mix_sig(), mix).unwrap();
    assert_eq!(mix.kernarg_segment_size, 28);
    let offsets: Vec<(u32, u32)> = layout.fields.iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(offsets, [(0, 8), (8, 8), (16, 4), (20, 4), (24, 4)], "two pointers then three u32s, as the signature");
    assert_eq!(mix.args[1].actual_access.as_deref(), Some("read_only"), "the compiler proved `inp` read-only");
    check_signature(&add_one_sig(), object.kernel("add_one").unwrap()).unwrap();
    check_signature(&builtins::copy_sig(), object.kernel(builtins::COPY).unwrap()).unwrap();
    check_signature(&builtins::fill_sig(), object.kernel(builtins::FILL).unwrap()).unwrap();
    assert_eq!(object.kernel("mix").unwrap().max_flat_workgroup_size, 1024);
}

#[test]
fn every_target_carries_every_builtin() {
    for (target, code) in builtins::CODE_OBJECTS {
        let object = parse(code).unwrap_or_else(|e| panic!("{target}: {e}"));
        assert_eq!(object.isa, *target);
        for (name, sig) in [("mix", mix_sig()), ("add_one", add_one_sig()), (builtins::COPY, builtins::copy_sig()), (builtins::FILL, builtins::fill_sig())] {
            check_signature(&sig, object.kernel(name).unwrap_or_else(|| panic!("{target}: no {name}"))).unwrap_or_else(|e| panic!("{target} {name}: {e}"));
        }
    }
}

#[test]
fn planted_mismatches_are_refused_naming_what_differs() {
    let object = parse(builtins::code_object_for("gfx1100").unwrap()).unwrap();
    let mix = object.kernel("mix").unwrap();
    let refuse = |sig: KernelSig| check_signature(&sig, mix).unwrap_err();
    let e = refuse(
        KernelSig::new("mix")
            .buffer("out", Access::ReadWrite)
            .buffer("inp", Access::Read)
            .scalar("n_out", ScalarType::U64)
            .scalar("n_in", ScalarType::U32)
            .scalar("salt", ScalarType::U32),
    );
    assert!(e.contains("n_out") && e.contains("u64"), "{e}");
    let e = refuse(
        KernelSig::new("mix")
            .buffer("out", Access::ReadWrite)
            .scalar("inp", ScalarType::U64)
            .scalar("n_out", ScalarType::U32)
            .scalar("n_in", ScalarType::U32)
            .scalar("salt", ScalarType::U32),
    );
    assert!(e.contains("inp") && e.contains("global_buffer"), "{e}");
    let e = refuse(
        KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n_out", ScalarType::U32).scalar("n_in", ScalarType::U32),
    );
    assert!(e.contains("5 arguments") && e.contains("4 params"), "{e}");
    let e = refuse(
        KernelSig::new("mix")
            .buffer("out", Access::ReadWrite)
            .buffer("inp", Access::Write)
            .scalar("n_out", ScalarType::U32)
            .scalar("n_in", ScalarType::U32)
            .scalar("salt", ScalarType::U32),
    );
    assert!(e.contains("only reads"), "a `write` param the compiler proved read-only: {e}");
    let e = refuse(
        KernelSig::new("mix")
            .buffer("out", Access::ReadWrite)
            .buffer("inp", Access::Read)
            .scalar("n_out", ScalarType::F32)
            .scalar("n_in", ScalarType::U32)
            .scalar("salt", ScalarType::U32),
    );
    assert!(e.contains("f32") && e.contains("u32"), "a float where the kernel takes a u32: {e}");
    let fill = object.kernel(builtins::FILL).unwrap();
    let e = check_signature(&KernelSig::new("f").buffer("dst", Access::Read).scalar("v", ScalarType::U32).scalar("n", ScalarType::U64), fill).unwrap_err();
    assert!(e.contains("write_only"), "a `read` param the compiler proved write-only: {e}");
}

#[test]
fn a_corrupt_code_object_is_refused_not_panicked_on() {
    let code = builtins::code_object_for("gfx1100").unwrap();
    assert!(parse(&code[..100]).is_err());
    assert!(parse(b"not an elf").is_err());
    let mut wrong_machine = code.to_vec();
    wrong_machine[18] = 62; // EM_X86_64
    assert!(parse(&wrong_machine).unwrap_err().contains("AMDGPU"));
    // Every truncation and every single-byte corruption of the header region: an error or a parse,
    // never a panic.
    for cut in (0..code.len()).step_by(97) {
        let _ = parse(&code[..cut]);
    }
    for at in 0..256.min(code.len()) {
        let mut c = code.to_vec();
        c[at] ^= 0xFF;
        let _ = parse(&c);
    }
}

/// The committed objects are what `kernels/amdgpu/ostinato.cl` compiles to with clang 19
/// (`scripts/build-hsaco.sh`); skipped, saying so, where clang 19 is not installed.
#[test]
fn hsaco_drift() {
    let root = ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"));
    let have_clang =
        std::process::Command::new("sh").arg("-c").arg("command -v clang-19 || test -x /usr/lib/llvm-19/bin/clang").output().is_ok_and(|o| o.status.success());
    if !have_clang {
        eprintln!("hsaco_drift: skipped: clang 19 (Debian's clang-19, which .ci/run installs) is not installed");
        return;
    }
    let out = std::env::temp_dir().join(format!("ostinato-hsaco-{}", std::process::id()));
    let status = std::process::Command::new("bash").arg(root.join("scripts/build-hsaco.sh")).arg(&out).arg(&out).status().unwrap();
    assert!(status.success(), "scripts/build-hsaco.sh failed");
    let compiler = std::fs::read_to_string(out.join("COMPILER")).unwrap();
    let committed = std::fs::read_to_string(root.join("kernels/amdgpu/hsaco/COMPILER")).unwrap();
    for (target, code) in builtins::CODE_OBJECTS {
        let fresh = std::fs::read(out.join(format!("ostinato-{target}.hsaco"))).unwrap();
        assert!(
            fresh == *code,
            "kernels/amdgpu/hsaco/ostinato-{target}.hsaco differs from what kernels/amdgpu/ostinato.cl compiles to (committed with {}, rebuilt with {}): run scripts/build-hsaco.sh",
            committed.trim(),
            compiler.trim()
        );
    }
    let fresh = std::fs::read(out.join("user_mix.hsaco")).unwrap();
    assert!(
        fresh == std::fs::read(root.join("examples/kernels/user_mix.hsaco")).unwrap(),
        "examples/kernels/user_mix.hsaco differs from its source: run scripts/build-hsaco.sh"
    );
    let _ = std::fs::remove_dir_all(&out);
}
