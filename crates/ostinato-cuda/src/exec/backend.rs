//! The CUDA backend on one device: binding kernels (built-ins, files, code a pack carries) and
//! instantiating plans (the stages are in `instantiate.rs`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ostinato::{Backend, BufferBinding, KernelRef, KernelSig, Plan};

use super::CudaExec;
use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::ffi::Context;
use crate::module::{BuiltinModules, CudaKernel, LoadedModule, ModuleSource};
use crate::options::{CudaOptions, DeviceMemory};
use ostinato_cuda_code::PdlTrigger;

/// The CUDA backend on one device.
pub struct CudaBackend {
    pub(super) ctx: Arc<Context>,
    pub(super) device: Device,
    pub(super) options: CudaOptions,
    pub(super) builtins: BuiltinModules,
    pub(super) helpers: (CudaKernel, CudaKernel),
    /// Modules [`Backend::bind_kernel`] loaded from files or code, by path (or name and hash): each is
    /// compiled and loaded once per backend, however many kernels it holds.
    files: Mutex<Vec<(PathBuf, Arc<FileModules>)>>,
}

/// A user's or a pack's module in its builds: the main one, and the early-trigger and plain builds
/// where the source places its `griddepcontrol` through Ostinato's macros.
struct FileModules {
    main: LoadedModule,
    variants: Option<(LoadedModule, LoadedModule)>,
}

impl CudaBackend {
    /// A backend on `device`. Loads the internal copy/fill kernels (NVRTC, cached).
    pub fn new(device: &Device, options: CudaOptions) -> Result<CudaBackend> {
        Self::with_builtins(device, &BuiltinModules::load(device, options.trigger)?, options)
    }
    /// A backend whose copy/fill kernels come from already loaded built-in modules (no second load).
    /// The modules' main build must be the one `options.trigger` names.
    pub fn with_builtins(device: &Device, modules: &BuiltinModules, options: CudaOptions) -> Result<CudaBackend> {
        if modules.trigger() != options.trigger {
            return Err(CudaError::Usage {
                op: "CudaBackend::with_builtins",
                reason: format!(
                    "the built-in modules were built with trigger `{}`, the options ask for `{}`",
                    modules.trigger().as_str(),
                    options.trigger.as_str()
                ),
            });
        }
        let (copy_sig, fill_sig) = (crate::builtins::copy_sig(), crate::builtins::fill_sig());
        let copy = modules.kernel("ostinato_copy", &copy_sig)?;
        let fill = modules.kernel("ostinato_fill", &fill_sig)?;
        Ok(CudaBackend {
            ctx: device.ctx.clone(),
            device: device.clone(),
            options,
            builtins: modules.clone(),
            helpers: (copy, fill),
            files: Mutex::new(Vec::new()),
        })
    }
    pub fn options(&self) -> CudaOptions {
        self.options
    }
    /// The device's architecture (`sm_90`).
    pub fn arch(&self) -> String {
        self.device.info().arch()
    }
    /// The device the backend runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The modules of a kernel file or of code given in memory, loaded once: the main build (the
    /// built-ins' trigger) and, for CUDA C written with `OST_ENTRY`/`OST_EXIT`, the early-trigger and
    /// plain builds the built-ins have too.
    fn file_module(&self, reference: &KernelRef) -> Result<Arc<FileModules>> {
        let key = match &reference.code {
            Some(code) => {
                let mut h = blake3::Hasher::new();
                h.update(code.as_bytes());
                h.update(reference.binary.as_deref().unwrap_or_default());
                PathBuf::from(format!("code:{}:{}", reference.source, h.finalize().to_hex()))
            }
            None => match &reference.binary {
                Some(bin) => PathBuf::from(format!("binary:{}:{}", reference.source, blake3::hash(bin).to_hex())),
                None => reference.path(),
            },
        };
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, m)) = files.iter().find(|(p, _)| *p == key) {
            return Ok(m.clone());
        }
        let source = ModuleSource::from_ref(reference)?;
        let main = LoadedModule::load(&self.device, &source, self.options.trigger)?;
        let variants = if source.has_trigger_variants() {
            Some((LoadedModule::load(&self.device, &source, PdlTrigger::AtEntry)?, LoadedModule::load(&self.device, &source, PdlTrigger::Disabled)?))
        } else {
            None
        };
        let m = Arc::new(FileModules { main, variants });
        files.push((key, m.clone()));
        Ok(m)
    }
}

impl CudaBackend {
    /// Captured work as the implementation of `sig` (`crate::captured`): its graph copied, its
    /// declarations checked (every param a buffer, declared and vouched), never PDL-capable, never a
    /// fused body. Its placeholder function is the internal fill kernel, which it never launches.
    pub fn captured_kernel(&self, sig: &KernelSig, work: &crate::CapturedWork) -> Result<CudaKernel> {
        self.ctx.bind()?;
        let captured = Arc::new(crate::captured::CapturedGraph::bind(work, &sig.name)?);
        let report = crate::captured::report(sig, &captured)?;
        let fill = &self.helpers.1;
        Ok(CudaKernel {
            func: fill.func.clone(),
            name: sig.name.clone(),
            entry: work.label().to_string(),
            pdl_capable: false,
            pdl_evidence: "none",
            pdl_declared: false,
            pre_wait_reads: Vec::new(),
            pre_wait_atomics: Vec::new(),
            early_trigger: false,
            report: Arc::new(report),
            build: Arc::new(crate::loaded::Build::captured(work.label())),
            sig: sig.clone(),
            fusion: None,
            fusion_refusal: Some("captured work runs as a child graph, not as a body".into()),
            source_check: None,
            early: None,
            plain: None,
            captured: Some(captured),
        })
    }
}

impl Backend for CudaBackend {
    type Kernel = CudaKernel;
    type Memory = DeviceMemory;
    type Exec = CudaExec;
    type Error = CudaError;

    fn name(&self) -> &'static str {
        "cuda"
    }

    /// `builtin:NAME` (the built-in kernels, in all their builds), or a `.cu` (compiled by NVRTC), `.ptx`
    /// or `.cubin` file with an optional `entry`. Option `pdl`: declares the kernel PDL-capable (or
    /// not); where there is PTX it is certified from it, and a declaration the PTX contradicts is
    /// refused. Option `fusable = true`: the kernel (CUDA C, `extern "C"`) may run as a body of a fused
    /// kernel (`crate::fusion`); certified from its PTX as fused, refused naming what stands in the way.
    /// The built-ins are certified without a declaration.
    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<CudaKernel> {
        let refuse = |reason: String| CudaError::Kernel { kernel: sig.name.clone(), reason };
        reference.check_options("cuda", &["pdl", "fusable"]).map_err(refuse)?;
        let pdl = reference.bool_option("pdl").map_err(refuse)?;
        let fusable = reference.bool_option("fusable").map_err(refuse)?;
        let entry = reference.entry_for(&sig.name);
        match reference.builtin_name() {
            Some(_) if pdl.is_some() || fusable.is_some() => {
                Err(refuse("built-in kernels are certified from their PTX; `pdl` and `fusable` are for a user's kernels".into()))
            }
            Some(_) => self.builtins.kernel(entry, sig),
            None => {
                let module = self.file_module(reference).map_err(|e| e.at(format!("kernel `{}`", sig.name)))?;
                let mut kernel = module.main.kernel(entry, sig, pdl)?;
                if let Some((early, plain)) = &module.variants {
                    kernel = kernel.with_variants(Some(&early.kernel(entry, sig, pdl)?), Some(&plain.kernel(entry, sig, None)?));
                }
                if fusable == Some(true) {
                    module.main.fusable_kernel(kernel, entry, sig)
                } else {
                    Ok(kernel)
                }
            }
        }
    }

    fn instantiate(&self, plan: &Plan, kernels: Vec<CudaKernel>, buffers: Vec<BufferBinding<DeviceMemory>>) -> Result<CudaExec> {
        self.build_exec(plan, kernels, buffers, None)
    }
}
