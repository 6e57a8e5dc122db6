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
    wheel_files_under(&prefixes, files)
}

/// `PREFIX/lib/python3*/{site,dist}-packages/nvidia/FILE` for each prefix, Python and file, in order.
fn wheel_files_under(prefixes: &[PathBuf], files: &[&str]) -> Vec<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_python_of_every_prefix_is_looked_in_and_nothing_else() {
        let root = std::env::temp_dir().join(format!("ostinato-wheels-{}", std::process::id()));
        let (venv, none) = (root.join("venv"), root.join("no-python"));
        std::fs::create_dir_all(venv.join("lib/python3.12")).unwrap();
        std::fs::create_dir_all(venv.join("lib/perl5")).unwrap();
        std::fs::create_dir_all(none.join("lib")).unwrap();
        let got = wheel_files_under(&[root.join("missing"), none, venv.clone()], &["nccl/lib/libnccl.so.2", "cu13/lib/libcupti.so.13"]);
        let py = venv.join("lib/python3.12");
        let want: Vec<PathBuf> = ["site-packages", "dist-packages"]
            .iter()
            .flat_map(|p| ["nccl/lib/libnccl.so.2", "cu13/lib/libcupti.so.13"].map(|f| py.join(p).join("nvidia").join(f)))
            .collect();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
