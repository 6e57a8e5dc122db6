//! Makes the golden PTX fixtures of the kernel-contract analyses from their CUDA C sources in
//! ostinato-cuda-code's tests/fixtures/, with the NVRTC Ostinato loads (ignored by default: the committed fixtures are what
//! the analyses are tested on, everywhere, NVRTC or not). To remake them after changing a source:
//!
//! ```sh
//! OSTINATO_NVRTC=/path/to/libnvrtc.so.13 cargo test -p ostinato-cuda --test ptx_fixtures -- --ignored
//! ```

use std::path::Path;

use ostinato_cuda::fusion::source::check_source;
use ostinato_cuda_code::nvrtc;

/// (source, fixture, compiled as a fused body, architecture).
const FIXTURES: &[(&str, &str, bool, &str)] =
    &[("access.cu", "access.ptx", false, "compute_90"), ("bulk.cu", "bulk.ptx", false, "compute_90"), ("fusion_ldg.cu", "fusion_ldg.ptx", true, "compute_90")];

#[test]
#[ignore = "remakes the committed fixtures; needs NVRTC"]
fn regenerate_contract_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ostinato-cuda-code/tests/fixtures");
    let ((maj, min), _) = nvrtc::version().expect("NVRTC loads (set OSTINATO_NVRTC)");
    for &(source, fixture, fused, arch) in FIXTURES {
        let text = std::fs::read_to_string(dir.join(source)).expect("fixture source");
        let text = if fused { check_source(&text) } else { text };
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
        eprintln!("wrote {fixture}");
    }
    // Machine code: a cubin for sm_90 and its disassembly.
    let text = std::fs::read_to_string(dir.join("sass_wait.cu")).expect("fixture source");
    let options = ["--gpu-architecture=sm_90".to_string(), "-default-device".into(), "--std=c++17".into()];
    let cubin = nvrtc::compile(&text, "sass_wait.cu", &options).expect("compiles").cubin.expect("a cubin for sm_90");
    std::fs::write(dir.join("sass_wait.cubin"), &cubin).expect("writes");
    let tool = ostinato_cuda_code::sass::nvdisasm().expect("nvdisasm (set OSTINATO_NVDISASM)");
    let out = std::process::Command::new(tool).arg("-c").arg(dir.join("sass_wait.cubin")).output().expect("nvdisasm runs");
    assert!(out.status.success());
    std::fs::write(dir.join("sass_wait.sass"), out.stdout).expect("writes");
    eprintln!("wrote sass_wait.cubin, sass_wait.sass");
}
