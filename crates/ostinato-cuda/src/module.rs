//! Kernel modules: CUDA C compiled at run time with NVRTC (through the cache of
//! [`ostinato_cuda_code::compile`]), PTX, or cubin; the kernels bound from them ([`CudaKernel`]).
//! Loading and the checks at bind time — param layout, declared access against the code, PDL
//! capability — are in [`LoadedModule`].

use std::path::Path;
use std::sync::Arc;

use ostinato::KernelSig;
use ostinato_cuda_code::contract::KernelReport;
use ostinato_cuda_code::PdlTrigger;

pub use crate::builtins::{copy_sig, fill_sig, BuiltinModules, FusionBody};
use crate::error::{CudaError, Result};
use crate::ffi::{self, Function};
pub use crate::loaded::{Build, LoadedModule};
use crate::lower::Variant;

/// The built-in kernels (`builtin:<name>`) and the internal copy/fill kernels: generic kernels only
/// (a domain pack's kernels bind through [`ostinato::KernelRef::code`]).
pub const BUILTIN_SOURCE: &str = concat!(include_str!("../../../kernels/ostinato.cu"), "\n", include_str!("../../../kernels/decode.cu"));

/// The files of [`BUILTIN_SOURCE`], in order (joined with one newline between them): where its lines
/// come from.
pub const BUILTIN_PARTS: &[(&str, &str)] =
    &[("kernels/ostinato.cu", include_str!("../../../kernels/ostinato.cu")), ("kernels/decode.cu", include_str!("../../../kernels/decode.cu"))];

/// Source of a module.
#[derive(Clone, Debug)]
pub enum ModuleSource {
    CudaC {
        name: String,
        source: String,
    },
    Ptx {
        name: String,
        text: String,
    },
    Cubin {
        name: String,
        bytes: Vec<u8>,
    },
    /// PTX with the cubin its compiler assembled from it (Triton's output): the cubin is what loads
    /// and runs, the PTX is what the contract reads.
    Assembled {
        name: String,
        ptx: String,
        cubin: Vec<u8>,
    },
}

impl ModuleSource {
    /// Reads a file: `.cu` → CUDA C, `.ptx` → PTX, `.cubin` → cubin.
    pub fn from_path(path: &Path) -> Result<ModuleSource> {
        use ostinato::capped_read::{read_bytes, read_text, KERNEL_FILE};
        let io = |e: ostinato::capped_read::ReadError| CudaError::Io { path: path.display().to_string(), message: e.reason.to_string() };
        let name = path.display().to_string();
        match path.extension().and_then(|e| e.to_str()) {
            Some("cu") => Ok(ModuleSource::CudaC { name, source: read_text(path, KERNEL_FILE).map_err(io)? }),
            Some("ptx") => Ok(ModuleSource::Ptx { name, text: read_text(path, KERNEL_FILE).map_err(io)? }),
            Some("cubin") => Ok(ModuleSource::Cubin { name, bytes: read_bytes(path, KERNEL_FILE).map_err(io)? }),
            _ => Err(CudaError::Io { path: name, message: "expected a .cu, .ptx or .cubin file".into() }),
        }
    }
    /// The module a non-built-in reference names: its file, or the code it carries
    /// ([`ostinato::KernelRef::code`], with the machine code assembled from it where
    /// [`ostinato::KernelRef::binary`] holds it), by the extension of its name.
    pub fn from_ref(reference: &ostinato::KernelRef) -> Result<ModuleSource> {
        let name = reference.source.clone();
        let ext = Path::new(&name).extension().and_then(|e| e.to_str());
        match (&reference.code, &reference.binary, ext) {
            (None, None, _) => ModuleSource::from_path(&reference.path()),
            (Some(code), None, Some("cu")) => Ok(ModuleSource::CudaC { name, source: code.to_string() }),
            (Some(code), None, Some("ptx")) => Ok(ModuleSource::Ptx { name, text: code.to_string() }),
            (Some(code), Some(cubin), Some("ptx")) => Ok(ModuleSource::Assembled { name, ptx: code.to_string(), cubin: cubin.to_vec() }),
            (None, Some(cubin), Some("cubin")) => Ok(ModuleSource::Cubin { name, bytes: cubin.to_vec() }),
            _ => Err(CudaError::Io {
                path: name,
                message: "code given in memory must be named `*.cu` (CUDA C) or `*.ptx` (PTX, with the cubin assembled from it or without), machine code alone `*.cubin`".into(),
            }),
        }
    }
    /// True for CUDA C that places its `griddepcontrol` through Ostinato's `OST_ENTRY`/`OST_EXIT`
    /// macros (`kernels/ostinato.cuh`): it is built in each trigger variant, as the built-ins are.
    pub fn has_trigger_variants(&self) -> bool {
        matches!(self, ModuleSource::CudaC { source, .. } if source.contains("OST_ENTRY"))
    }
    pub fn builtin() -> ModuleSource {
        ModuleSource::CudaC { name: "builtin".into(), source: BUILTIN_SOURCE.into() }
    }
}

/// A kernel bound for the CUDA backend.
#[derive(Clone)]
pub struct CudaKernel {
    pub(crate) func: Function,
    pub name: String,
    /// Its symbol in the module.
    pub entry: String,
    /// The kernel waits (`griddepcontrol.wait`) before touching memory, so programmatic edges into it
    /// are safe.
    pub pdl_capable: bool,
    /// How `pdl_capable` was established: "ptx" (inspected), "declared" or "none".
    pub pdl_evidence: &'static str,
    /// The user declared the kernel PDL-safe (option `pdl = true`): a pre-wait read that could race is
    /// refused rather than avoided.
    pub pdl_declared: bool,
    /// Params the kernel reads before its wait (from the PTX; empty where there is none to read).
    pub pre_wait_reads: Vec<usize>,
    /// Params it updates atomically before its wait (a counter it owns).
    pub pre_wait_atomics: Vec<usize>,
    /// Its code triggers its dependents before its own wait.
    pub early_trigger: bool,
    /// What its code was read to do (access per param, pre-wait certificate), for its manifest.
    pub report: Arc<KernelReport>,
    /// The module it came from.
    pub build: Arc<Build>,
    /// The signature it was checked against.
    pub sig: KernelSig,
    /// The kernel's code as a body a fused kernel calls, where it is certified for that (`None`: the
    /// kernel always launches by itself).
    pub fusion: Option<Arc<FusionBody>>,
    /// Why the kernel is not a fused body, where that was asked.
    pub fusion_refusal: Option<String>,
    /// Its module's CUDA C source as bodies see it (compiled on first use): where a tile hand-off
    /// wraps the kernel, its body is certified from it (`FusionCheck::handoff`). `None`: no source.
    pub(crate) source_check: Option<(crate::device::Device, Arc<crate::builtins::FusionCheck>)>,
    /// Optional variants of the same code: `early` triggers its dependents at entry (for small grids),
    /// `plain` has no `griddepcontrol` at all (for nodes with no programmatic edge: the wait costs
    /// large grids microseconds even when nothing is programmatic; see docs/fences.md).
    pub(crate) early: Option<Function>,
    pub(crate) plain: Option<Function>,
    /// Captured work this kernel runs instead of a function (`func` is then a placeholder never
    /// launched): a child-graph node in graph mode, an instance of its own in eager mode.
    pub captured: Option<Arc<crate::captured::CapturedGraph>>,
}

impl CudaKernel {
    /// The function a node running build `variant` launches. A kernel without that variant launches
    /// its one build.
    pub(crate) fn build(&self, variant: Variant) -> &Function {
        match variant {
            Variant::Plain => self.plain.as_ref().unwrap_or(&self.func),
            Variant::Early => self.early.as_ref().unwrap_or(&self.func),
            Variant::Late => &self.func,
        }
    }
    /// Attaches the early-trigger and plain variants (same code, other `OST_TRIGGER` builds).
    /// The driver's handle of this kernel's main build, for a program that launches the very same code
    /// itself (the benchmark's hand-written baselines). It stays valid while this value lives (it
    /// keeps the module loaded); launching it is the caller's own driver call.
    pub fn cu_function(&self) -> cudarc::driver::sys::CUfunction {
        self.func.handle()
    }
    /// This kernel in one build only (`variant`; its one build where it has no such variant): what a
    /// baseline that launches the same code without Ostinato's per-node choice of build uses.
    pub fn only(&self, variant: Variant) -> CudaKernel {
        let func = self.build(variant).clone();
        let plain = variant == Variant::Plain && self.plain.is_some();
        CudaKernel {
            func,
            pdl_capable: self.pdl_capable && !plain,
            pre_wait_reads: if plain { Vec::new() } else { self.pre_wait_reads.clone() },
            early: None,
            plain: None,
            ..self.clone()
        }
    }
    pub fn with_variants(mut self, early: Option<&CudaKernel>, plain: Option<&CudaKernel>) -> CudaKernel {
        self.early = early.filter(|e| e.pdl_capable).map(|e| e.func.clone());
        self.plain = plain.map(|p| p.func.clone());
        self
    }
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaKernel({}, pdl={} by {})", self.name, self.pdl_capable, self.pdl_evidence)
    }
}

/// Compiles CUDA C to PTX for `device`, through the cache. Returns (ptx, cache hit).
pub fn compile_cached(device: &crate::Device, name: &str, source: &str, trigger: PdlTrigger) -> Result<(String, bool)> {
    Ok(ostinato_cuda_code::compile::compile(name, source, &device.info().arch(), trigger).map(|c| (c.ptx, c.cache_hit))?)
}

impl CudaKernel {
    /// What the lowering needs to know of its PDL behaviour.
    pub fn pdl(&self) -> crate::lower::KernelPdl {
        crate::lower::KernelPdl {
            capable: self.pdl_capable,
            declared: self.pdl_declared,
            pre_wait_reads: self.pre_wait_reads.clone(),
            pre_wait_atomics: self.pre_wait_atomics.clone(),
            early_trigger: self.early_trigger,
            child_graph: self.captured.is_some(),
        }
    }
}

/// Resolves a graph file's CUDA implementation reference: `builtin:<entry>` or a path (relative to
/// `base`) with an optional entry name (default: the kernel's name).
pub fn resolve_source(reference: &str, base: &Path) -> Result<ModuleSource> {
    if reference.starts_with("builtin:") || reference == "builtin" {
        return Ok(ModuleSource::builtin());
    }
    let p = Path::new(reference);
    ModuleSource::from_path(&if p.is_absolute() { p.to_path_buf() } else { base.join(p) })
}

/// The driver's version, for cache keys and provenance.
pub fn driver_version() -> Result<i32> {
    ffi::driver_version()
}
