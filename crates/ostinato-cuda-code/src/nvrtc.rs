//! NVRTC through cudarc's `sys` bindings (CUDA 13 level, loaded at run time by library name, e.g.
//! `libnvrtc.so.13`). What is kept by hand is only a search path: CUDA installs NVRTC under
//! `/usr/local/cuda/lib64`, often outside the dynamic loader's path, and cudarc looks up bare names
//! (and panics where none loads). So, where the loader cannot find it by name, this module first loads
//! the library by absolute path (`OSTINATO_NVRTC`, `CUDA_HOME`/`CUDA_PATH`, `/usr/local/cuda`) and
//! keeps it loaded: cudarc's later load by name then resolves to it (the loader matches the library's
//! soname). NVRTC itself loads its builtins library (`libnvrtc-builtins.so.13.0`) by bare name at
//! compile time, so the builtins found beside a library loaded by path are loaded too (the loader
//! then answers NVRTC's own load by soname): a toolkit outside the loader's path, or the `nvidia-cuda-nvrtc`
//! wheel's `lib/`, compiles without `LD_LIBRARY_PATH`. Every entry point checks that a library is
//! present first, so no panic is reachable.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::nvrtc::sys;
use libloading::Library;

use crate::error::{CodeError, Result};

/// Absolute paths to try where the loader's path has no NVRTC, in order.
fn search_path() -> Vec<PathBuf> {
    let names = ["libnvrtc.so.13", "libnvrtc.so.12"];
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&d).join("lib64"));
            dirs.push(PathBuf::from(&d).join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    let mut out: Vec<PathBuf> = std::env::var_os("OSTINATO_NVRTC").map(PathBuf::from).into_iter().collect();
    out.extend(dirs.iter().flat_map(|d| names.iter().map(move |n| d.join(n))));
    out
}

/// The builtins libraries in `dir` (`libnvrtc-builtins.so.<major>.<minor>`, not the `.alt.` build),
/// in name order.
fn builtins_beside(dir: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so.")))
        .collect();
    found.sort();
    found
}

/// What stays loaded for the process: NVRTC loaded by path and the builtins beside it.
type Kept = (String, Vec<Library>);

/// Where NVRTC came from, once it is loadable by name; the libraries loaded by path stay loaded.
fn api() -> Result<&'static str> {
    static LOADED: OnceLock<std::result::Result<Kept, String>> = OnceLock::new();
    let r = LOADED.get_or_init(|| {
        // SAFETY: only tries to load the library by the names cudarc knows; loading NVRTC runs no
        // initialisers with preconditions.
        if unsafe { sys::is_culib_present() } {
            return Ok(("the dynamic loader's path".to_string(), Vec::new()));
        }
        let mut tried = Vec::new();
        for p in search_path() {
            // SAFETY: as above, by absolute path.
            if let Ok(lib) = unsafe { Library::new(&p) } {
                // SAFETY: as above; the library just loaded now answers to its soname.
                if unsafe { sys::is_culib_present() } {
                    let mut kept = vec![lib];
                    for b in p.parent().map(builtins_beside).unwrap_or_default() {
                        // SAFETY: as above; a builtins library only holds NVRTC's headers and data.
                        // One that fails to load leaves NVRTC's own load by name to report it.
                        kept.extend(unsafe { Library::new(&b) }.ok());
                    }
                    return Ok((p.display().to_string(), kept));
                }
            }
            tried.push(p.display().to_string());
        }
        Err(format!("libnvrtc not found on the loader's path nor at {}; set OSTINATO_NVRTC to its path", tried.join(", ")))
    });
    r.as_ref().map(|(path, _)| path.as_str()).map_err(|e| CodeError::NvrtcMissing(e.clone()))
}

fn check(op: &'static str, code: sys::nvrtcResult) -> Result<()> {
    if code == sys::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static string for any code (the library is loaded: `api` ran first).
    let p = unsafe { sys::nvrtcGetErrorString(code) };
    let code = code as c_int;
    let name = if p.is_null() {
        format!("NVRTC_ERROR_{code}")
    } else {
        // SAFETY: NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    Err(CodeError::Nvrtc { op, code, name })
}

/// NVRTC's (major, minor) version and the library path it was loaded from.
pub fn version() -> Result<((i32, i32), String)> {
    let path = api()?;
    let (mut maj, mut min) = (0, 0);
    // SAFETY: writes two ints.
    check("nvrtcVersion", unsafe { sys::nvrtcVersion(&mut maj, &mut min) })?;
    Ok(((maj, min), path.to_string()))
}

/// Compiles CUDA C `source` to PTX with `options`; returns the PTX text.
pub fn compile_ptx(source: &str, source_name: &str, options: &[String]) -> Result<String> {
    compile(source, source_name, options).map(|c| c.ptx)
}

/// What one NVRTC compile gives: the PTX, and the cubin where the options name a real architecture
/// (`--gpu-architecture=sm_90`; `compute_90` gives PTX only).
#[derive(Clone, Debug)]
pub struct Output {
    pub ptx: String,
    pub cubin: Option<Vec<u8>>,
}

/// Compiles CUDA C `source` with `options`: its PTX, and its cubin where there is one.
pub fn compile(source: &str, source_name: &str, options: &[String]) -> Result<Output> {
    api()?;
    let src = CString::new(source).map_err(|_| CodeError::Usage { op: "nvrtcCreateProgram", reason: "source has a NUL byte".into() })?;
    let name = CString::new(source_name).unwrap_or_else(|_| c"kernel.cu".into());
    let opts: Vec<CString> = options.iter().filter_map(|o| CString::new(o.as_str()).ok()).collect();
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // Every program can `#include "ostinato.cuh"` (the kernel header; no file is read for it).
    let (header, header_name) = (CString::new(crate::compile::KERNEL_HEADER).unwrap_or_default(), c"ostinato.cuh");
    let (headers, header_names) = ([header.as_ptr()], [header_name.as_ptr()]);
    // SAFETY: NUL-terminated strings that outlive the call; one header with its include name.
    check("nvrtcCreateProgram", unsafe { sys::nvrtcCreateProgram(&mut prog, src.as_ptr(), name.as_ptr(), 1, headers.as_ptr(), header_names.as_ptr()) })?;
    struct Guard(sys::nvrtcProgram);
    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: destroys the program created above exactly once.
            let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
        }
    }
    let guard = Guard(prog);
    // SAFETY: valid program; options array of opts.len() NUL-terminated strings.
    let compiled = unsafe { sys::nvrtcCompileProgram(guard.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    let mut log_len = 0usize;
    // SAFETY: writes one size.
    check("nvrtcGetProgramLogSize", unsafe { sys::nvrtcGetProgramLogSize(guard.0, &mut log_len) })?;
    let mut log = vec![0u8; log_len.max(1)];
    // SAFETY: the buffer holds log_len bytes.
    check("nvrtcGetProgramLog", unsafe { sys::nvrtcGetProgramLog(guard.0, log.as_mut_ptr() as *mut c_char) })?;
    let log = String::from_utf8_lossy(&log).trim_end_matches('\0').to_string();
    if compiled != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CodeError::Compile { source_name: source_name.to_string(), log });
    }
    let mut n = 0usize;
    // SAFETY: writes one size.
    check("nvrtcGetPTXSize", unsafe { sys::nvrtcGetPTXSize(guard.0, &mut n) })?;
    let mut ptx = vec![0u8; n];
    // SAFETY: the buffer holds n bytes.
    check("nvrtcGetPTX", unsafe { sys::nvrtcGetPTX(guard.0, ptx.as_mut_ptr() as *mut c_char) })?;
    let ptx = String::from_utf8_lossy(&ptx).trim_end_matches('\0').to_string();
    let mut n = 0usize;
    // SAFETY: writes one size; a compile for a virtual architecture has no cubin (size 0 or an error).
    let has_cubin = unsafe { sys::nvrtcGetCUBINSize(guard.0, &mut n) } == sys::nvrtcResult::NVRTC_SUCCESS && n > 0;
    let cubin = if has_cubin {
        let mut bytes = vec![0u8; n];
        // SAFETY: the buffer holds n bytes.
        check("nvrtcGetCUBIN", unsafe { sys::nvrtcGetCUBIN(guard.0, bytes.as_mut_ptr() as *mut c_char) })?;
        Some(bytes)
    } else {
        None
    };
    Ok(Output { ptx, cubin })
}
