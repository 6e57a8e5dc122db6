//! The built-in kernels in their three builds, and the fused-body view of a CUDA C source (each of its
//! kernels certified, from its PTX as fused, as a body a fused kernel may call).

use std::sync::{Arc, OnceLock};

use ostinato::KernelSig;

use crate::device::Device;
use crate::error::Result;
use crate::module::{CudaKernel, LoadedModule, ModuleSource, BUILTIN_SOURCE};
use ostinato_cuda_code::PdlTrigger;

/// The signature of the internal kernel a copy node runs (`ostinato_copy`).
pub fn copy_sig() -> KernelSig {
    KernelSig::new("ostinato_copy").buffer("dst", ostinato::Access::Write).buffer("src", ostinato::Access::Read).scalar("n", ostinato::ScalarType::U64)
}

/// The signature of the internal kernel a fill node runs (`ostinato_fill`).
pub fn fill_sig() -> KernelSig {
    KernelSig::new("ostinato_fill")
        .buffer("dst", ostinato::Access::Write)
        .scalar("value", ostinato::ScalarType::U32)
        .scalar("n_words", ostinato::ScalarType::U64)
}

/// A kernel's code as a fused body: the CUDA C source that defines it (which fused kernels include),
/// its name there, and what its PTX as fused says it uses.
#[derive(Debug)]
pub struct FusionBody {
    pub source: Arc<str>,
    pub entry: String,
    pub body: ostinato_cuda_code::ptx::FusedBody,
}

/// A kernel's code as the body of a tile hand-off wrapper: its source, its name there, and what its
/// PTX says of it (`ostinato_cuda_code::ptx::handoff_body`).
#[derive(Debug)]
pub struct HandoffSource {
    pub source: Arc<str>,
    pub entry: String,
    pub body: ostinato_cuda_code::ptx::HandoffBody,
}

/// A CUDA C source compiled once as fused bodies see it (`fusion::source::check_source`): the PTX
/// that certifies each of its kernels as a body.
pub(crate) struct FusionCheck {
    source: Arc<str>,
    ptx: OnceLock<std::result::Result<String, String>>,
}

impl FusionCheck {
    pub(crate) fn new(source: &str) -> FusionCheck {
        FusionCheck { source: source.into(), ptx: OnceLock::new() }
    }
    /// `entry` certified as a hand-off body (the same compile as [`FusionCheck::body`]), or why not.
    pub(crate) fn handoff(&self, device: &Device, entry: &str) -> std::result::Result<Arc<HandoffSource>, String> {
        let ptx = self.ptx(device)?;
        let body = ostinato_cuda_code::ptx::handoff_body(ptx, entry)?;
        Ok(Arc::new(HandoffSource { source: self.source.clone(), entry: entry.to_string(), body }))
    }

    /// The source's PTX as bodies see it, compiled once through the cache.
    fn ptx(&self, device: &Device) -> std::result::Result<&String, String> {
        let ptx = self.ptx.get_or_init(|| {
            ostinato_cuda_code::compile::compile(
                "fused-bodies",
                &crate::fusion::source::check_source(&self.source),
                &device.info().arch().replace("sm_", "compute_"),
                PdlTrigger::Disabled,
            )
            .map(|c| c.ptx)
            .map_err(|e| e.to_string())
        });
        ptx.as_ref().map_err(|e| format!("compiling it as a fused body failed: {e}"))
    }

    /// `entry` certified as a fused body (compiling the source once, through the cache), or why not.
    pub(crate) fn body(&self, device: &Device, entry: &str) -> std::result::Result<Arc<FusionBody>, String> {
        let ptx = self.ptx(device)?;
        let body = ostinato_cuda_code::ptx::fused_body(ptx, entry).map_err(|e| {
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
            fusion: Arc::new(FusionCheck::new(BUILTIN_SOURCE)),
        })
    }
    /// The built-in `entry` as a fused body (every built-in is one: `rmsnorm` and `attention`, with
    /// their block barriers, alone in their block), or why not.
    fn fusion(&self, entry: &str) -> (Option<Arc<FusionBody>>, Option<String>) {
        match self.fusion.body(&self.device, entry) {
            Ok(b) => (Some(b), None),
            Err(why) => (None, Some(why)),
        }
    }
    /// The main PDL build's trigger.
    pub fn trigger(&self) -> PdlTrigger {
        self.trigger
    }
    /// `entry` checked against `sig` (its declared access against its code, too), with its variants.
    pub fn kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        let main = self.main.kernel(entry, sig, None)?;
        let early = self.early.kernel(entry, sig, None)?;
        let plain = self.plain.kernel(entry, sig, None)?;
        let (fusion, fusion_refusal) = self.fusion(entry);
        let source_check = Some((self.device.clone(), self.fusion.clone()));
        Ok(CudaKernel { fusion, fusion_refusal, source_check, ..main.with_variants(Some(&early), Some(&plain)) })
    }
    /// Only the plain build (no griddepcontrol), as a baseline that never uses PDL would compile it.
    pub fn plain_kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        let (fusion, fusion_refusal) = self.fusion(entry);
        let source_check = Some((self.device.clone(), self.fusion.clone()));
        Ok(CudaKernel { fusion, fusion_refusal, source_check, ..self.plain.kernel(entry, sig, None)? })
    }
    /// Only the main PDL build.
    pub fn main_kernel(&self, entry: &str, sig: &KernelSig) -> Result<CudaKernel> {
        self.main.kernel(entry, sig, None)
    }
}
