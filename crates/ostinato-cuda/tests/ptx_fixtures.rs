//! Makes the golden PTX fixtures of the kernel-contract analyses (ostinato-cuda-code's
//! tests/fixtures/) from their CUDA C sources there, with the NVRTC Ostinato loads (ignored by default:
//! the committed fixtures are what the analyses are tested on, everywhere, NVRTC or not). It lives with
//! the backend because one fixture is a fused body, compiled as the backend's fusion compiles bodies
//! ([`check_source`]). To remake them after changing a source, from the repository or this crate:
//!
//! ```sh
//! OSTINATO_NVRTC=/path/to/libnvrtc.so.13 OSTINATO_NVDISASM=/path/to/nvdisasm \
//!   cargo test -p ostinato-cuda --test ptx_fixtures -- --ignored
//! ```
//!
//! The sources travel inside the test binary; the fixtures are written to the folder found from the
//! working directory (the repository's root, or a crate's folder as under `cargo test`).

use std::path::PathBuf;

use ostinato_cuda::fusion::source::check_source;
use ostinato_cuda_code::nvrtc;

/// (source name, its text, fixture, compiled as a fused body, architecture).
const FIXTURES: &[(&str, &str, &str, bool, &str)] = &[
    ("access.cu", include_str!("../../ostinato-cuda-code/tests/fixtures/access.cu"), "access.ptx", false, "compute_90"),
    ("bulk.cu", include_str!("../../ostinato-cuda-code/tests/fixtures/bulk.cu"), "bulk.ptx", false, "compute_90"),
    ("fusion_ldg.cu", include_str!("../../ostinato-cuda-code/tests/fixtures/fusion_ldg.cu"), "fusion_ldg.ptx", true, "compute_90"),
    ("tiles.cu", include_str!("../../ostinato-cuda-code/tests/fixtures/tiles.cu"), "tiles.ptx", false, "compute_90"),
    // The built-ins, for the tile-map check's test that it verifies their stated footprints.
    ("ostinato.cu", include_str!("../../../kernels/ostinato.cu"), "tiles_builtins.ptx", false, "compute_90"),
];

/// The machine-code fixture's source.
const SASS_WAIT_CU: &str = include_str!("../../ostinato-cuda-code/tests/fixtures/sass_wait.cu");

/// The fixtures' folder, from the working directory.
fn fixture_dir() -> PathBuf {
    let candidates = ["crates/ostinato-cuda-code/tests/fixtures", "../ostinato-cuda-code/tests/fixtures"];
    candidates.iter().map(PathBuf::from).find(|d| d.is_dir()).unwrap_or_else(|| {
        let cwd = std::env::current_dir().unwrap_or_default();
        panic!("no {} under {}: run this from the repository or a crate's folder", candidates[0], cwd.display())
    })
}

#[test]
#[ignore = "remakes the committed fixtures; needs NVRTC"]
fn regenerate_contract_fixtures() {
    let dir = fixture_dir();
    let ((maj, min), _) = nvrtc::version().expect("NVRTC loads (set OSTINATO_NVRTC)");
    for &(source, text, fixture, fused, arch) in FIXTURES {
        let text = if fused { check_source(text) } else { text.to_string() };
        let options = [format!("--gpu-architecture={arch}"), "-default-device".into(), "--std=c++17".into(), "-lineinfo".into()];
        let ptx = nvrtc::compile_ptx(&text, source, &options).expect("compiles");
        // NVRTC names the source by its absolute path: keep the file name only.
        let ptx: String = ptx
            .lines()
            .map(|l| if l.trim_start().starts_with(".file") && l.contains(source) { format!("\t.file\t1 \"{source}\"") } else { l.to_string() })
            .collect::<Vec<_>>()
            .join("\n");
        let how = if fused { ", as a fused body (fusion::source::check_source)" } else { "" };
        let header = format!("// Golden PTX fixture: tests/fixtures/{source}{how}, NVRTC {maj}.{min}, {}.\n", options.join(" "));
        std::fs::write(dir.join(fixture), header + &ptx).expect("writes");
        eprintln!("wrote {}", dir.join(fixture).display());
    }
    // Machine code: a cubin for sm_90 and its disassembly.
    let options = ["--gpu-architecture=sm_90".to_string(), "-default-device".into(), "--std=c++17".into()];
    let cubin = nvrtc::compile(SASS_WAIT_CU, "sass_wait.cu", &options).expect("compiles").cubin.expect("a cubin for sm_90");
    let cubin_path = dir.join("sass_wait.cubin");
    std::fs::write(&cubin_path, &cubin).expect("writes");
    let tool = ostinato_cuda_code::sass::nvdisasm().expect("nvdisasm (set OSTINATO_NVDISASM)");
    let out = std::process::Command::new(tool).arg("-c").arg(&cubin_path).output().expect("nvdisasm runs");
    assert!(out.status.success());
    std::fs::write(dir.join("sass_wait.sass"), out.stdout).expect("writes");
    eprintln!("wrote {}, sass_wait.sass", cubin_path.display());
}
