//! A loaded module and the kernels bound from it: each kernel's declared access checked against its
//! code, its PDL capability certified (PTX, or SASS for machine code declared PDL-capable), and what
//! the build manifest records kept beside it.

use std::sync::{Arc, OnceLock};

use ostinato::manifest::{Compiler, Hashed};
use ostinato::{KernelSig, ParamKind};

use crate::builtins::FusionCheck;
use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::ffi::{Module, ParamCount};
use crate::module::{CudaKernel, ModuleSource};
use ostinato_cuda_code::contract::{self, KernelReport};
use ostinato_cuda_code::ptx::ModuleInfo;
use ostinato_cuda_code::sass::Sass;
use ostinato_cuda_code::PdlTrigger;

/// How a module was built and what was loaded: what a kernel's manifest records of its module.
pub struct Build {
    /// The module's name in messages (a path, `builtin`).
    pub name: String,
    /// The source (CUDA C, PTX or the cubin file), hashed.
    pub source: Hashed,
    /// NVRTC's version, options and cache key, for CUDA C.
    pub compiler: Option<Compiler>,
    pub ptx: Option<Arc<str>>,
    pub cubin: Option<Arc<[u8]>>,
    /// What the driver loaded: `cubin` or `ptx` (a cubin it refused falls back to the PTX).
    pub loaded: &'static str,
    /// The built-in source (its lines map back to its files).
    pub builtin: bool,
    info: OnceLock<ModuleInfo>,
    sass: OnceLock<std::result::Result<Arc<Sass>, String>>,
}

impl Build {
    /// The PTX's declarations, read once.
    pub(crate) fn info(&self) -> Option<&ModuleInfo> {
        let ptx = self.ptx.as_deref()?;
        Some(self.info.get_or_init(|| contract::module_info(ptx, if self.builtin { crate::module::BUILTIN_PARTS } else { &[] })))
    }
    /// The cubin disassembled (once), or why not.
    pub fn sass(&self) -> std::result::Result<Arc<Sass>, String> {
        self.sass
            .get_or_init(|| match &self.cubin {
                Some(c) => ostinato_cuda_code::sass::disassemble(c).map(Arc::new),
                None => Err("no cubin".into()),
            })
            .clone()
    }
}

impl std::fmt::Debug for Build {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Build({}, loaded {})", self.name, self.loaded)
    }
}

/// A loaded module, with what it was built from and, for CUDA C, its source as fused bodies see it.
pub struct LoadedModule {
    module: Arc<Module>,
    build: Arc<Build>,
    fusion: Option<(Device, Arc<FusionCheck>)>,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedModule({}, ptx: {})", self.build.name, self.build.ptx.is_some())
    }
}

impl LoadedModule {
    /// Compiles (CUDA C, through the cache, for the device's architecture) or reads the module and loads
    /// it. A PTX whose `.target` the device cannot run is refused before the driver sees it.
    pub fn load(device: &Device, source: &ModuleSource, trigger: PdlTrigger) -> Result<LoadedModule> {
        device.bind_to_thread()?;
        let arch = device.info().arch();
        let build = match source {
            ModuleSource::CudaC { name, source } => {
                let c = ostinato_cuda_code::compile::compile(name, source, &arch, trigger)?;
                let compiler = Compiler {
                    name: "nvrtc".into(),
                    version: format!("{}.{}", c.nvrtc.0, c.nvrtc.1),
                    options: c.options.clone(),
                    arch: Some(arch.clone()),
                    cache_key: Some(c.key.clone()),
                };
                Build::new(name, source.as_bytes(), Some(compiler), Some(c.ptx), c.cubin, name == "builtin")
            }
            ModuleSource::Ptx { name, text } => {
                check_ptx_target(device, name, text)?;
                Build::new(name, text.as_bytes(), None, Some(text.clone()), None, false)
            }
            ModuleSource::Cubin { name, bytes } => Build::new(name, bytes, None, None, Some(bytes.clone()), false),
            ModuleSource::Assembled { name, ptx, cubin } => {
                check_ptx_target(device, name, ptx)?;
                Build::new(name, ptx.as_bytes(), None, Some(ptx.clone()), Some(cubin.clone()), false)
            }
        };
        let (module, loaded) = load_image(device, &build)?;
        let build = Arc::new(Build { loaded, ..build });
        let fusion = match source {
            ModuleSource::CudaC { source, .. } => Some((device.clone(), Arc::new(FusionCheck::new(source)))),
            _ => None,
        };
        Ok(LoadedModule { module, build, fusion })
    }

    /// What the module was built from.
    pub fn build(&self) -> &Arc<Build> {
        &self.build
    }

    /// `kernel` (checked against `sig`) declared fusable: certified as a fused body, or refused with
    /// the reason, naming the kernel.
    pub fn fusable_kernel(&self, kernel: CudaKernel, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason: format!("declared fusable, but {reason}") };
        let Some((device, check)) = &self.fusion else {
            return Err(refuse(format!("module `{}` is not CUDA C: a fused kernel includes its bodies' source", self.build.name)));
        };
        let body = check.body(device, entry).map_err(refuse)?;
        Ok(CudaKernel { fusion: Some(body), ..kernel })
    }

    /// Looks up `entry`, checks it against `sig` — its param layout, and each buffer param's declared
    /// access against what its code does (the kernel contract) — and settles its PDL capability:
    /// certified from the PTX where there is PTX (a declaration the PTX contradicts is an error), from
    /// the SASS for machine code declared PDL-capable (refused where `nvdisasm` is missing), else not.
    pub fn kernel(&self, entry: &str, sig: &KernelSig, declared_pdl: Option<bool>) -> Result<CudaKernel> {
        let func = self.module.function(entry).map_err(|e| e.at(format!("module `{}`", self.build.name)))?;
        let kerr = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
        let sizes = check_layout(&func, &self.build, entry, sig)?;
        let mut report = self.report(entry, sig)?;
        contract::verify(sig, &mut report)?;
        let buffers = contract::is_buffer(sig);
        let (pdl_capable, pdl_evidence, pre_wait) = match (&self.build.ptx, declared_pdl) {
            (Some(_), declared) => match &report.pre_wait {
                Ok(pre) => (declared.unwrap_or(true), "ptx", pre.clone()),
                Err(why) if declared == Some(true) => return Err(kerr(format!("declared PDL-capable but its PTX says otherwise: {why}"))),
                Err(_) => (false, "ptx", Default::default()),
            },
            (None, Some(true)) => {
                let sass = self.build.sass().map_err(|why| kerr(format!("declared PDL-capable: its machine code must be certified, but {why}")))?;
                let offsets = ostinato_cuda_code::sass::param_offsets(&sizes);
                let pre = ostinato_cuda_code::sass::certify(&sass, entry, &offsets, &buffers)
                    .map_err(|why| kerr(format!("declared PDL-capable but its machine code says otherwise: {why}")))?;
                report.pre_wait = Ok(ostinato_cuda_code::ptx::PreWait { reads: pre.reads.clone(), early_trigger: pre.early_trigger, ..Default::default() });
                (true, "sass", ostinato_cuda_code::ptx::PreWait { reads: pre.reads, early_trigger: pre.early_trigger, ..Default::default() })
            }
            (None, _) => (false, "none", Default::default()),
        };
        Ok(CudaKernel {
            func,
            name: sig.name.clone(),
            entry: entry.to_string(),
            pdl_capable,
            pdl_evidence,
            pdl_declared: declared_pdl == Some(true),
            pre_wait_reads: pre_wait.reads,
            pre_wait_atomics: pre_wait.atomics,
            early_trigger: pre_wait.early_trigger,
            sig: sig.clone(),
            report: Arc::new(report),
            build: self.build.clone(),
            fusion: None,
            fusion_refusal: None,
            source_check: self.fusion.clone(),
            early: None,
            plain: None,
            captured: None,
        })
    }

    /// What the code of `entry` does (not yet checked against `sig`).
    fn report(&self, entry: &str, sig: &KernelSig) -> Result<KernelReport> {
        let name = contract::display(&self.build.name);
        match (&self.build.ptx, self.build.info()) {
            (Some(ptx), Some(info)) => Ok(contract::read_ptx_with(info, ptx, &name, entry, sig)?),
            _ => {
                let code = format!("{name} (machine code)");
                let access = contract::unread(sig, &code, "machine code: the access analysis reads PTX");
                Ok(KernelReport { code, access, broader: Vec::new(), pre_wait: Err("no PTX".into()), noncoherent: Vec::new(), target: None })
            }
        }
    }
}

impl Build {
    /// The build record of captured work: no source, PTX or cubin of its own.
    pub(crate) fn captured(label: &str) -> Build {
        Build { loaded: "captured graph", ..Build::new(label, b"", None, None, None, false) }
    }
    fn new(name: &str, source: &[u8], compiler: Option<Compiler>, ptx: Option<String>, cubin: Option<Vec<u8>>, builtin: bool) -> Build {
        Build {
            name: name.to_string(),
            source: Hashed::of(name, source),
            compiler,
            ptx: ptx.map(Arc::from),
            cubin: cubin.map(Arc::from),
            loaded: "ptx",
            builtin,
            info: OnceLock::new(),
            sass: OnceLock::new(),
        }
    }
}

/// Refuses PTX whose `.target` the device cannot run, before the driver sees it.
fn check_ptx_target(device: &Device, name: &str, ptx: &str) -> Result<()> {
    match ModuleInfo::read(ptx).target {
        Some(t) => contract::check_target(&t, device.info().compute_capability)
            .map_err(|why| CudaError::Unsupported { op: "loading PTX", reason: format!("`{name}`: {why}") }),
        None => Ok(()),
    }
}

/// Loads the cubin where there is one (the machine code the SASS checks read), else the PTX; a cubin
/// the driver refuses (a newer toolkit than the driver) falls back to the PTX it came from.
fn load_image(device: &Device, build: &Build) -> Result<(Arc<Module>, &'static str)> {
    let at = |e: CudaError| e.at(format!("module `{}`", build.name));
    if let Some(cubin) = &build.cubin {
        match Module::load(&device.ctx, cubin) {
            Ok(m) => return Ok((m, "cubin")),
            Err(e) if build.ptx.is_none() => return Err(at(e)),
            Err(_) => {}
        }
    }
    let ptx = build.ptx.as_deref().unwrap_or("");
    Ok((Module::load(&device.ctx, ptx.as_bytes()).map_err(at)?, "ptx"))
}

/// Checks the function's param layout against `sig` (where the driver reports it); returns each
/// param's size in bytes. The param count comes from the kernel's own code ([`code_param_count`]), so
/// the driver is asked about params `0..count` only.
fn check_layout(func: &crate::ffi::Function, build: &Build, entry: &str, sig: &KernelSig) -> Result<Vec<u32>> {
    let count = param_count(build, entry, || func.driver_param_count())?;
    let layout = func.param_layout(count)?;
    layout_matches(sig, entry, count, layout.as_deref())
}

/// How many params `entry` takes: from its code ([`code_param_count`]), else the driver's count query
/// (`driver`: CUDA 13.2 and later), else unknown.
fn param_count(build: &Build, entry: &str, driver: impl FnOnce() -> Result<Option<usize>>) -> Result<ParamCount> {
    Ok(match code_param_count(build, entry) {
        Some(n) => ParamCount::Known(n),
        None => driver()?.map_or(ParamCount::Unknown, ParamCount::Known),
    })
}

/// How many params `entry` takes, from the module's own code: its PTX `.entry` list, else its cubin's
/// `.nv.info` param attributes; `None` where neither can be read (a fatbin without PTX).
fn code_param_count(build: &Build, entry: &str) -> Option<usize> {
    if let Some(n) = build.ptx.as_deref().and_then(|ptx| ostinato_cuda_code::ptx::parse::entry_params(ptx, entry).ok()) {
        return Some(n.len());
    }
    build.cubin.as_deref().and_then(|c| ostinato_cuda_code::cubin::entry_params(c, entry).ok()).map(|p| p.len())
}

/// `sig` against the kernel's param count and (where the driver gave it) layout: the same number of
/// params, each of the size its kind has; returns those sizes.
fn layout_matches(sig: &KernelSig, entry: &str, count: ParamCount, layout: Option<&[(usize, usize)]>) -> Result<Vec<u32>> {
    let kerr = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
    let want: Vec<usize> = sig
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Buffer(_) => 8,
            ParamKind::Scalar(t) => t.size(),
        })
        .collect();
    let takes = match (count, layout) {
        (ParamCount::Known(n), _) => Some(n),
        (ParamCount::Unknown, Some(l)) => Some(l.len()),
        (ParamCount::Unknown, None) => None,
    };
    if let Some(n) = takes.filter(|&n| n != sig.params.len()) {
        return Err(kerr(format!("`{entry}` takes {n} params but the graph's signature has {}", sig.params.len())));
    }
    for ((p, (_, size)), w) in sig.params.iter().zip(layout.unwrap_or_default()).zip(&want) {
        if size != w {
            return Err(kerr(format!("param `{}` is {w} bytes in the graph but {size} bytes in `{entry}`", p.name)));
        }
    }
    Ok(want.into_iter().map(|w| w as u32).collect())
}

#[cfg(test)]
mod tests;
