//! Where Python environments keep NVIDIA's wheels (`nvidia-cuda-cupti`, `nvidia-nccl-cu12`, …): the
//! libraries a runtime-loaded NVIDIA component may come from when neither the loader's path nor the
//! toolkit has it.

use std::path::PathBuf;

/// `nvidia/FILE` for each of `files` under every Python environment's `site-packages` and
/// `dist-packages`, in order: the active virtualenv or conda prefix, `/usr/local`, `/usr`, then
/// `/opt/*/.venv`.
pub(crate) fn nvidia_wheel_files(files: &[&str]) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
    if let Ok(opt) = std::fs::read_dir("/opt") {
        prefixes.extend(opt.flatten().map(|e| e.path().join(".venv")));
    }
    let mut out = Vec::new();
    for p in prefixes {
        let Ok(libs) = std::fs::read_dir(p.join("lib")) else { continue };
        for py in libs.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("python3")) {
            for pkgs in ["site-packages", "dist-packages"] {
                let base = py.path().join(pkgs).join("nvidia");
                out.extend(files.iter().map(|f| base.join(f)));
            }
        }
    }
    out
}
