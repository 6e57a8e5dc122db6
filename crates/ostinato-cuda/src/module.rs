//! Kernel modules: CUDA C compiled at run time with NVRTC (cached on disk by source, options, NVRTC and
//! driver version), PTX, or cubin. Kernels are looked up by name, their param layout is checked against
//! the graph's signature, and their PDL capability is certified from the PTX (or declared by the user
//! for cubin).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ostinato::{KernelSig, ParamKind};

use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::ffi::{self, Function, Module};
use crate::lower::Variant;
use crate::nvrtc;

/// The built-in kernels (`builtin:<name>`) and the internal copy/fill kernels.
pub const BUILTIN_SOURCE: &str = concat!(
    include_str!("../../../kernels/ostinato.cu"),
    "\n",
    include_str!("../../../kernels/decode.cu"),
    "\n",
    include_str!("../../../kernels/llama/llama.cu")
);

/// The built-ins a fused kernel may call (copy, fill and the small kernels): their source, without the
/// Llama kernels (all of several blocks), so a fused module compiles quickly.
pub const FUSABLE_BUILTIN_SOURCE: &str = concat!(include_str!("../../../kernels/ostinato.cu"), "\n", include_str!("../../../kernels/decode.cu"));

/// Where a PDL-capable kernel lets its dependents launch (the `OST_TRIGGER` macro of our sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PdlTrigger {
    /// Never triggers: dependents launch when it completes.
    Never,
    /// Triggers at entry, before waiting on its own predecessors.
    AtEntry,
    /// Triggers after its last write.
    AfterWrites,
    /// Triggers right after its own wait: dependents launch once it runs, one kernel ahead at most.
    AfterWait,
    /// Compiled without any `griddepcontrol` (not PDL-capable; for measurement).
    Disabled,
}

impl PdlTrigger {
    pub(crate) fn define(self) -> String {
        match self {
            PdlTrigger::Disabled => "-DOST_NO_PDL=1".into(),
            t => format!("-DOST_TRIGGER={}", t as u8),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            PdlTrigger::Never => "never",
            PdlTrigger::AtEntry => "entry",
            PdlTrigger::AfterWrites => "after-writes",
            PdlTrigger::AfterWait => "after-wait",
            PdlTrigger::Disabled => "disabled",
        }
    }
}

/// Source of a module.
#[derive(Clone, Debug)]
pub enum ModuleSource {
    CudaC { name: String, source: String },
    Ptx { name: String, text: String },
    Cubin { name: String, bytes: Vec<u8> },
}

impl ModuleSource {
    /// Reads a file: `.cu` → CUDA C, `.ptx` → PTX, `.cubin` → cubin.
    pub fn from_path(path: &Path) -> Result<ModuleSource> {
        let io = |e: std::io::Error| CudaError::Io { path: path.display().to_string(), message: e.to_string() };
        let name = path.display().to_string();
        match path.extension().and_then(|e| e.to_str()) {
            Some("cu") => Ok(ModuleSource::CudaC { name, source: std::fs::read_to_string(path).map_err(io)? }),
            Some("ptx") => Ok(ModuleSource::Ptx { name, text: std::fs::read_to_string(path).map_err(io)? }),
            Some("cubin") => Ok(ModuleSource::Cubin { name, bytes: std::fs::read(path).map_err(io)? }),
            _ => Err(CudaError::Io { path: name, message: "expected a .cu, .ptx or .cubin file".into() }),
        }
    }
    pub fn builtin() -> ModuleSource {
        ModuleSource::CudaC { name: "builtin".into(), source: BUILTIN_SOURCE.into() }
    }
}

/// A loaded module, with its PTX when known (for PDL certification) and, for CUDA C, its source as
/// fused bodies see it (compiled on the first kernel declared fusable).
pub struct LoadedModule {
    module: Arc<Module>,
    ptx: Option<String>,
    name: String,
    fusion: Option<(Device, FusionCheck)>,
}

/// A kernel bound for the CUDA backend.
#[derive(Clone)]
pub struct CudaKernel {
    pub(crate) func: Function,
    pub name: String,
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
    /// The signature it was checked against.
    pub sig: KernelSig,
    /// The kernel's code as a body a fused kernel calls, where it is certified for that (`None`: the
    /// kernel always launches by itself).
    pub fusion: Option<Arc<FusionBody>>,
    /// Optional variants of the same code: `early` triggers its dependents at entry (for small grids),
    /// `plain` has no `griddepcontrol` at all (for nodes with no programmatic edge: the wait costs
    /// large grids microseconds even when nothing is programmatic; see docs/fences.md).
    pub(crate) early: Option<Function>,
    pub(crate) plain: Option<Function>,
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
    pub fn with_variants(mut self, early: Option<&CudaKernel>, plain: Option<&CudaKernel>) -> CudaKernel {
        self.early = early.filter(|e| e.pdl_capable).map(|e| e.func.clone());
        self.plain = plain.map(|p| p.func.clone());
        self
    }
}

/// A kernel's code as a fused body: the CUDA C source that defines it (which fused kernels include),
/// its name there, and what its PTX as fused says it uses.
#[derive(Debug)]
pub struct FusionBody {
    pub source: Arc<str>,
    pub entry: String,
    pub body: crate::ptx::FusedBody,
}

/// A CUDA C source compiled once as fused bodies see it (`fusion::source::check_source`): the PTX
/// that certifies each of its kernels as a body.
struct FusionCheck {
    source: Arc<str>,
    ptx: OnceLock<std::result::Result<String, String>>,
}

impl FusionCheck {
    fn new(source: &str) -> FusionCheck {
        FusionCheck { source: source.into(), ptx: OnceLock::new() }
    }
    /// `entry` certified as a fused body (compiling the source once, through the cache), or why not.
    fn body(&self, device: &Device, entry: &str) -> std::result::Result<Arc<FusionBody>, String> {
        let ptx = self.ptx.get_or_init(|| {
            compile_cached(device, "fused-bodies", &crate::fusion::source::check_source(&self.source), PdlTrigger::Disabled)
                .map(|(p, _)| p)
                .map_err(|e| e.to_string())
        });
        let ptx = ptx.as_ref().map_err(|e| format!("compiling it as a fused body failed: {e}"))?;
        let body = crate::ptx::fused_body(ptx, entry).map_err(|e| {
            if e.starts_with("no `.entry") {
                format!("{e} as fused (a fused kernel calls it by its name: declare it `extern \"C\"`)")
            } else {
                e
            }
        })?;
        Ok(Arc::new(FusionBody { source: self.source.clone(), entry: entry.to_string(), body }))
    }
}

/// The built-in kernels in all three builds: late trigger (`trigger`), early trigger and plain.
/// Clones share the loaded modules.
#[derive(Clone)]
pub struct BuiltinModules {
    trigger: PdlTrigger,
    main: Arc<LoadedModule>,
    early: Arc<LoadedModule>,
    plain: Arc<LoadedModule>,
    device: Device,
    fusion: Arc<FusionCheck>,
}

impl BuiltinModules {
    /// Compiles (through the cache) the built-in source three times. `trigger` is the main PDL build.
    pub fn load(device: &Device, trigger: PdlTrigger) -> Result<BuiltinModules> {
        let src = ModuleSource::builtin();
        Ok(BuiltinModules {
            trigger,
            main: Arc::new(LoadedModule::load(device, &src, trigger)?),
            early: Arc::new(LoadedModule::load(device, &src, PdlTrigger::AtEntry)?),
            plain: Arc::new(LoadedModule::load(device, &src, PdlTrigger::Disabled)?),
            device: device.clone(),
            fusion: Arc::new(FusionCheck::new(FUSABLE_BUILTIN_SOURCE)),
        })
    }
    /// The built-in `entry` as a fused body, where it is one (copy, fill, `add_one`, `mix`, the
    /// element-wise decode kernels; not the ones with a block barrier or of the Llama step).
    fn fusion(&self, entry: &str) -> Option<Arc<FusionBody>> {
        self.fusion.body(&self.device, entry).ok()
    }
    /// The main PDL build's trigger.
    pub fn trigger(&self) -> PdlTrigger {
        self.trigger
    }
    /// `entry` checked against `sig`, with its variants.
    pub fn kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        let main = self.main.kernel(entry, sig, None)?;
        let early = self.early.kernel(entry, sig, None)?;
        let plain = self.plain.kernel(entry, sig, None)?;
        Ok(CudaKernel { fusion: self.fusion(entry), ..main.with_variants(Some(&early), Some(&plain)) })
    }
    /// Only the plain build (no griddepcontrol), as a baseline that never uses PDL would compile it.
    pub fn plain_kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        Ok(CudaKernel { fusion: self.fusion(entry), ..self.plain.kernel(entry, sig, None)? })
    }
    /// Only the main PDL build.
    pub fn main_kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        self.main.kernel(entry, sig, None)
    }
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaKernel({}, pdl={} by {})", self.name, self.pdl_capable, self.pdl_evidence)
    }
}

/// The on-disk NVRTC cache directory: `OSTINATO_CACHE_DIR`, else `$XDG_CACHE_HOME/ostinato/nvrtc`, else
/// `~/.cache/ostinato/nvrtc`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OSTINATO_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ostinato").join("nvrtc")
}

/// Compiles CUDA C to PTX for `device`, through the cache. Returns (ptx, cache hit).
pub fn compile_cached(device: &Device, name: &str, source: &str, trigger: PdlTrigger) -> Result<(String, bool)> {
    let arch = device.info().arch().replace("sm_", "compute_");
    let options = vec![format!("--gpu-architecture={arch}"), "-default-device".into(), "--std=c++17".into(), trigger.define()];
    let ((maj, min), _) = nvrtc::version()?;
    let driver = device.info().driver_version.to_string();
    let ver = format!("{maj}.{min}");
    let joined = options.join(" ");
    // Each part is length-prefixed, so no two different inputs hash the same bytes.
    let mut hasher = blake3::Hasher::new();
    for part in [source.as_bytes(), joined.as_bytes(), ver.as_bytes(), driver.as_bytes()] {
        hasher.update(&(part.len() as u64).to_le_bytes()).update(part);
    }
    let key = hasher.finalize().to_hex()[..32].to_string();
    let dir = cache_dir();
    let path = dir.join(format!("{key}.ptx"));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        if ptx.contains(".entry") || ptx.contains(".version") {
            return Ok((ptx, true));
        }
    }
    let ptx = nvrtc::compile_ptx(source, name, &options)?;
    // Best effort: a cache that cannot be written only costs a recompile next time.
    if std::fs::create_dir_all(&dir).is_ok() {
        let tmp = dir.join(format!("{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &ptx).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
    Ok((ptx, false))
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedModule({}, ptx: {})", self.name, self.ptx.is_some())
    }
}

impl LoadedModule {
    pub fn load(device: &Device, source: &ModuleSource, trigger: PdlTrigger) -> Result<LoadedModule> {
        device.bind_to_thread()?;
        let (image, ptx, name) = match source {
            ModuleSource::CudaC { name, source } => {
                let (ptx, _) = compile_cached(device, name, source, trigger)?;
                (ptx.clone().into_bytes(), Some(ptx), name.clone())
            }
            ModuleSource::Ptx { name, text } => (text.clone().into_bytes(), Some(text.clone()), name.clone()),
            ModuleSource::Cubin { name, bytes } => (bytes.clone(), None, name.clone()),
        };
        let module = Module::load(&device.ctx, &image).map_err(|e| e.at(format!("module `{name}`")))?;
        let fusion = match source {
            ModuleSource::CudaC { source, .. } => Some((device.clone(), FusionCheck::new(source))),
            _ => None,
        };
        Ok(LoadedModule { module, ptx, name, fusion })
    }

    /// `kernel` (checked against `sig`) declared fusable: certified as a fused body, or refused with
    /// the reason, naming the kernel.
    pub fn fusable_kernel(&self, kernel: CudaKernel, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason: format!("declared fusable, but {reason}") };
        let Some((device, check)) = &self.fusion else {
            return Err(refuse(format!("module `{}` is not CUDA C: a fused kernel includes its bodies' source", self.name)));
        };
        let body = check.body(device, entry).map_err(refuse)?;
        Ok(CudaKernel { fusion: Some(body), ..kernel })
    }

    /// Looks up `entry`, checks it against `sig`, and settles its PDL capability: certified from the PTX
    /// when there is PTX (a declaration that the PTX contradicts is an error), else as declared.
    pub fn kernel(&self, entry: &str, sig: &KernelSig, declared_pdl: Option<bool>) -> Result<CudaKernel> {
        let func = self.module.function(entry).map_err(|e| e.at(format!("module `{}`", self.name)))?;
        let kerr = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
        if let Some(layout) = func.param_layout()? {
            if layout.len() != sig.params.len() {
                return Err(kerr(format!("`{entry}` takes {} params but the graph's signature has {}", layout.len(), sig.params.len())));
            }
            for (p, (_, size)) in sig.params.iter().zip(&layout) {
                let want = match p.kind {
                    ParamKind::Buffer(_) => 8,
                    ParamKind::Scalar(t) => t.size(),
                };
                if *size != want {
                    return Err(kerr(format!("param `{}` is {want} bytes in the graph but {size} bytes in `{entry}`", p.name)));
                }
            }
        }
        let (pdl_capable, pdl_evidence, pre_wait_reads) = match (&self.ptx, declared_pdl) {
            (Some(ptx), declared) => match crate::ptx::pre_wait(ptx, entry, |i| sig.params.get(i).is_some_and(|p| matches!(p.kind, ParamKind::Buffer(_)))) {
                Ok(pre) => (declared.unwrap_or(true), "ptx", pre.reads),
                Err(why) if declared == Some(true) => return Err(kerr(format!("declared PDL-capable but its PTX says otherwise: {why}"))),
                Err(_) => (false, "ptx", Vec::new()),
            },
            (None, Some(d)) => (d, "declared", Vec::new()),
            (None, None) => (false, "none", Vec::new()),
        };
        Ok(CudaKernel {
            func,
            name: sig.name.clone(),
            pdl_capable,
            pdl_evidence,
            pdl_declared: declared_pdl == Some(true),
            pre_wait_reads,
            sig: sig.clone(),
            fusion: None,
            early: None,
            plain: None,
        })
    }
}

impl CudaKernel {
    /// What the lowering needs to know of its PDL behaviour.
    pub fn pdl(&self) -> crate::lower::KernelPdl {
        crate::lower::KernelPdl { capable: self.pdl_capable, declared: self.pdl_declared, pre_wait_reads: self.pre_wait_reads.clone(), ..Default::default() }
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
