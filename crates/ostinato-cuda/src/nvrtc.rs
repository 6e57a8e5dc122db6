//! NVRTC, loaded at run time. cudarc's loader only tries the library names of its binding level (12.x),
//! while CUDA 13 ships `libnvrtc.so.13`, often outside the loader path; so this module finds the library
//! itself (`OSTINATO_NVRTC`, `CUDA_HOME`/`CUDA_PATH`, `/usr/local/cuda`, then the loader path, newest
//! major first) and calls its eight stable C entry points.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

use crate::error::{CudaError, Result};

type Prog = *mut std::ffi::c_void;

struct Api {
    _lib: Library,
    path: String,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
    create: unsafe extern "C" fn(*mut Prog, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> c_int,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    ptx_size: unsafe extern "C" fn(Prog, *mut usize) -> c_int,
    ptx: unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Prog) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

// SAFETY: NVRTC's API is thread-safe for distinct programs; the table itself is immutable.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

fn candidates() -> Vec<PathBuf> {
    let names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&d).join("lib64"));
            dirs.push(PathBuf::from(&d).join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("OSTINATO_NVRTC") {
        out.push(PathBuf::from(p));
    }
    for d in &dirs {
        for n in names {
            out.push(d.join(n));
        }
    }
    // Bare names: the dynamic loader's own search path.
    out.extend(names.iter().map(PathBuf::from));
    out
}

fn load() -> std::result::Result<Api, String> {
    let mut tried = Vec::new();
    for c in candidates() {
        // SAFETY: loading NVRTC runs no initialisers with preconditions.
        match unsafe { Library::new(&c) } {
            Ok(lib) => {
                macro_rules! sym {
                    ($name:literal) => {
                        // SAFETY: the symbol has this C signature in every NVRTC since 11.1.
                        *unsafe { lib.get($name) }.map_err(|e| format!("{}: {e}", c.display()))?
                    };
                }
                return Ok(Api {
                    path: c.display().to_string(),
                    version: sym!(b"nvrtcVersion\0"),
                    create: sym!(b"nvrtcCreateProgram\0"),
                    compile: sym!(b"nvrtcCompileProgram\0"),
                    log_size: sym!(b"nvrtcGetProgramLogSize\0"),
                    log: sym!(b"nvrtcGetProgramLog\0"),
                    ptx_size: sym!(b"nvrtcGetPTXSize\0"),
                    ptx: sym!(b"nvrtcGetPTX\0"),
                    destroy: sym!(b"nvrtcDestroyProgram\0"),
                    error_string: sym!(b"nvrtcGetErrorString\0"),
                    _lib: lib,
                });
            }
            Err(_) => tried.push(c.display().to_string()),
        }
    }
    Err(format!("libnvrtc not found (tried {}); set OSTINATO_NVRTC to its path", tried.join(", ")))
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| CudaError::NvrtcMissing(e.clone()))
}

fn check(a: &Api, op: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: returns a static string for any code.
    let p = unsafe { (a.error_string)(code) };
    let name = if p.is_null() {
        format!("NVRTC_ERROR_{code}")
    } else {
        // SAFETY: NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    Err(CudaError::Nvrtc { op, code, name })
}

/// NVRTC's (major, minor) version and the library path it was loaded from.
pub fn version() -> Result<((i32, i32), String)> {
    let a = api()?;
    let (mut maj, mut min) = (0, 0);
    // SAFETY: writes two ints.
    check(a, "nvrtcVersion", unsafe { (a.version)(&mut maj, &mut min) })?;
    Ok(((maj, min), a.path.clone()))
}

/// Compiles CUDA C `source` to PTX with `options`; returns the PTX text.
pub fn compile_ptx(source: &str, source_name: &str, options: &[String]) -> Result<String> {
    let a = api()?;
    let src = CString::new(source).map_err(|_| CudaError::Usage { op: "nvrtcCreateProgram", reason: "source has a NUL byte".into() })?;
    let name = CString::new(source_name).unwrap_or_else(|_| c"kernel.cu".into());
    let opts: Vec<CString> = options.iter().filter_map(|o| CString::new(o.as_str()).ok()).collect();
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: Prog = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings that outlive the call; no headers.
    check(a, "nvrtcCreateProgram", unsafe { (a.create)(&mut prog, src.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null()) })?;
    struct Guard<'a>(&'a Api, Prog);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            // SAFETY: destroys the program created above exactly once.
            let _ = unsafe { (self.0.destroy)(&mut self.1) };
        }
    }
    let guard = Guard(a, prog);
    // SAFETY: valid program; options array of opts.len() NUL-terminated strings.
    let compiled = unsafe { (a.compile)(guard.1, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    let mut log_len = 0usize;
    // SAFETY: writes one size.
    check(a, "nvrtcGetProgramLogSize", unsafe { (a.log_size)(guard.1, &mut log_len) })?;
    let mut log = vec![0u8; log_len.max(1)];
    // SAFETY: the buffer holds log_len bytes.
    check(a, "nvrtcGetProgramLog", unsafe { (a.log)(guard.1, log.as_mut_ptr() as *mut c_char) })?;
    let log = String::from_utf8_lossy(&log).trim_end_matches('\0').to_string();
    if compiled != 0 {
        return Err(CudaError::Compile { source_name: source_name.to_string(), log });
    }
    let mut n = 0usize;
    // SAFETY: writes one size.
    check(a, "nvrtcGetPTXSize", unsafe { (a.ptx_size)(guard.1, &mut n) })?;
    let mut ptx = vec![0u8; n];
    // SAFETY: the buffer holds n bytes.
    check(a, "nvrtcGetPTX", unsafe { (a.ptx)(guard.1, ptx.as_mut_ptr() as *mut c_char) })?;
    Ok(String::from_utf8_lossy(&ptx).trim_end_matches('\0').to_string())
}
