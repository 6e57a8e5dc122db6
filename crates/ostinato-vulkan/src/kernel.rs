//! Kernels of the Vulkan backend: WGSL (a built-in of `kernels/wgsl/`, or a `.wgsl` file) or a `.spv`
//! file, read into a naga module and written out as SPIR-V. The convention every kernel follows:
//! binding `i` of set 0 is the signature's `i`-th buffer param (a storage buffer), and the scalar
//! params live in one more storage buffer right after them, in signature order at their natural
//! alignment — so a slot is patched by writing that buffer, never by re-recording. WGSL kernels take
//! their scalars as one `var<immediate>` struct (push constants): a WGSL kernel gets two pipelines, one
//! with the push constants as written (for nodes whose scalars are all constants: recorded into the
//! command buffer, no memory read) and one with them moved to that storage buffer by rewriting the
//! module's address space before validation (for nodes that take a slot). A `.spv` kernel follows the
//! storage-buffer convention only. After the scalars, the params block holds each buffer binding's
//! element offset ([`crate::offsets`]), so a slice may start at any byte. Where that rewrite changed a
//! module, the module as written is kept too ([`AsWritten`]): a node whose every slice starts on a
//! binding boundary runs it, the same code a Vulkan user records by hand, without an add per index.

use std::ffi::CString;
use std::sync::{Arc, OnceLock};

use ostinato::{KernelRef, KernelSig, ParamKind, ScalarType};

use crate::ffi::{Context, Pipeline};
use crate::fusion::Body;
use crate::offsets::{add_offsets, BindingInfo, Offsets, ParamsVar};
use crate::tilemaps::{ParamsAt, TileCode};
use crate::VkError;

/// A bound kernel: its pipelines and the layout of its scalar params.
#[derive(Clone)]
pub struct VulkanKernel {
    /// Scalars in the storage buffer after the buffers (every kernel has it).
    pub(crate) pipeline: Arc<Pipeline>,
    /// Scalars as push constants (WGSL kernels with scalars): what a node without slots launches.
    pub(crate) push: Option<Arc<Pipeline>>,
    /// The module as written, where the offset rewrite changed it: what a node whose every element
    /// offset is 0 launches.
    pub(crate) as_written: Option<Arc<AsWritten>>,
    pub name: String,
    /// Storage-buffer params, in order.
    pub buffers: u32,
    /// Byte offset of each scalar param in the params block (signature order), and the block's size
    /// (the scalars', then the bindings' element offsets).
    pub(crate) scalar_offsets: Vec<u32>,
    pub(crate) params_bytes: u32,
    /// Each buffer binding's element and whether it takes an element offset, which lies at
    /// `offsets_at + 4 i` of the params block (`None`: no binding takes one).
    pub(crate) bindings: Vec<BindingInfo>,
    pub(crate) offsets_at: Option<u32>,
    /// The shader's workgroup size, where known (WGSL, and SPIR-V naga reads); launches must match it.
    pub workgroup: Option<[u32; 3]>,
    /// The kernel as a fused dispatch's body ([`crate::fusion`]), or why it cannot be one; and the
    /// stride of its params blocks in a fused dispatch's params array.
    pub(crate) body: Result<Arc<Body>, String>,
    pub(crate) body_stride: u32,
    /// The code as the tile check reads it ([`crate::tilemaps`]), or why it cannot.
    pub(crate) tiles: Result<Arc<TileCode>, String>,
    /// The generic built-in this is (`builtin:NAME`, its WGSL twin), by name: its per-workgroup
    /// footprint is the core's stated one (`ostinato::builtins::block_footprint`), against which a
    /// node's tile maps are checked, and so is its per-invocation one (`thread_footprint`).
    pub(crate) builtin: Option<String>,
}

impl std::fmt::Debug for VulkanKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VulkanKernel({}, {} buffers, {} param bytes)", self.name, self.buffers, self.params_bytes)
    }
}

/// The params block's layout for `sig`: each scalar at its natural alignment.
pub(crate) fn params_layout(sig: &KernelSig) -> (Vec<u32>, u32) {
    let mut at = 0u32;
    let mut offsets = Vec::new();
    for p in &sig.params {
        if let ParamKind::Scalar(t) = p.kind {
            let size = t.size() as u32;
            at = at.div_ceil(size) * size;
            offsets.push(at);
            at += size;
        }
    }
    (offsets, at)
}

fn refuse(sig: &KernelSig, message: impl Into<String>) -> VkError {
    VkError::Shader { kernel: sig.name.clone(), message: message.into() }
}

/// A kernel's module compiled: SPIR-V with its scalars in the storage buffer, the push-constant build
/// where the module takes push constants, the workgroup size, and the bindings' offsets.
pub(crate) struct Compiled {
    pub(crate) words: Vec<u32>,
    pub(crate) push_words: Option<Vec<u32>>,
    /// The module as written, where the offset rewrite changed it.
    pub(crate) as_written: Option<Builds>,
    pub(crate) workgroup: Option<[u32; 3]>,
    pub(crate) offsets: Offsets,
    pub(crate) body: Result<Arc<Body>, String>,
    pub(crate) body_stride: u32,
    pub(crate) tiles: Result<Arc<TileCode>, String>,
    /// The module adds f32 atomically (an `atomic<f32>`): the device must have
    /// [`Context::float32_atomic_add`].
    pub(crate) float_atomics: bool,
}

/// A module's SPIR-V: scalars in the storage buffer after the buffers, and as push constants where the
/// module takes them.
pub(crate) struct Builds {
    pub(crate) storage: Vec<u32>,
    pub(crate) push: Option<Vec<u32>>,
}

/// A kernel's module as written (no element offsets), where the offset rewrite changed it: its builds,
/// each made a pipeline the first time a node runs it (most kernels never run at a boundary, or never
/// take a slot, so the pipelines nobody runs are never made).
pub(crate) struct AsWritten {
    builds: Builds,
    /// The kernel's name, which an error making a pipeline names.
    kernel: String,
    entry: CString,
    /// The kernel's buffer params; the bytes of its scalars (what a node pushes to the push build).
    n_buf: u32,
    pub(crate) scalar_bytes: u32,
    storage: OnceLock<Arc<Pipeline>>,
    push: OnceLock<Arc<Pipeline>>,
}

impl AsWritten {
    /// The pipeline of the push-constant build (`pushed`) or of the storage build, made on first use.
    pub(crate) fn pipeline(&self, ctx: &Arc<Context>, pushed: bool) -> Result<Arc<Pipeline>, VkError> {
        let (cell, words, bindings, push_bytes) = match (pushed, &self.builds.push) {
            // Push-constant ranges are whole 4-byte words.
            (true, Some(w)) => (&self.push, w, self.n_buf, self.scalar_bytes.div_ceil(4) * 4),
            // A WGSL module without scalars: its one build reads no params, and nothing is pushed.
            (true, None) => (&self.push, &self.builds.storage, self.n_buf, 0),
            // The scalars in the params buffer, after the buffers.
            (false, _) => (&self.storage, &self.builds.storage, self.n_buf + 1, 0),
        };
        if let Some(p) = cell.get() {
            return Ok(p.clone());
        }
        let made = Pipeline::with_entry(ctx, words, bindings, push_bytes, &self.entry)
            .map_err(|e| VkError::Shader { kernel: self.kernel.clone(), message: format!("entry point `{}` as written: {e}", self.entry.to_string_lossy()) })?;
        let made = Arc::new(made);
        // Two threads may make it at once: the first one stored is kept.
        Ok(cell.get_or_init(|| made).clone())
    }
}

/// What naga accepts beyond the base language in every module it validates for this backend: f32
/// atomic adds on storage buffers. A kernel that uses them is refused at bind time on a device
/// without them ([`Context::float32_atomic_add`]), naming the kernel and the device.
pub(crate) const FLOAT_ATOMICS: naga::valid::Capabilities = naga::valid::Capabilities::SHADER_FLOAT32_ATOMIC;

/// Whether `module` declares an f32 atomic (what `OpAtomicFAddEXT` needs).
pub(crate) fn uses_float_atomics(module: &naga::Module) -> bool {
    module.types.iter().any(|(_, t)| matches!(t.inner, naga::TypeInner::Atomic(naga::Scalar { kind: naga::ScalarKind::Float, .. })))
}

/// The module as a fused body (see [`crate::fusion::body`]), with its params blocks' array stride.
fn fusion_body(module: &naga::Module, entry: &str, offsets: &Offsets, n_buf: u32, params: ParamsVar, source: Option<&str>) -> (Result<Arc<Body>, String>, u32) {
    let body = crate::fusion::body(module, entry, offsets, n_buf, params, source);
    let stride = body.as_ref().ok().and_then(|b| b.params_type()).map_or(0, |ty| {
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).map_or(0, |()| layouter[ty].to_stride())
    });
    (body, stride)
}

fn validate(sig: &KernelSig, module: &naga::Module, caps: naga::valid::Capabilities) -> Result<naga::valid::ModuleInfo, VkError> {
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(module).map_err(|e| refuse(sig, format!("{:?}", e.into_inner())))
}

fn write_spirv(sig: &KernelSig, module: &naga::Module, entry: &str, caps: naga::valid::Capabilities) -> Result<Vec<u32>, VkError> {
    let info = validate(sig, module, caps)?;
    spirv_words(sig, module, &info, entry)
}

fn spirv_words(sig: &KernelSig, module: &naga::Module, info: &naga::valid::ModuleInfo, entry: &str) -> Result<Vec<u32>, VkError> {
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.to_string() };
    naga::back::spv::write_vec(module, info, &options, Some(&pipeline)).map_err(|e| refuse(sig, e.to_string()))
}

/// Checks `module`'s storage bindings against the signature: bindings `0..n_buf` of group 0, plus the
/// params buffer at `n_buf` where `params_binding` (a SPIR-V kernel's scalars). The access analysis
/// checks the same layout (`access::code_access`), so what it reads is what binding accepts.
pub(crate) fn check_bindings(sig: &KernelSig, module: &naga::Module, n_buf: u32, params_binding: bool) -> Result<(), VkError> {
    let mut storage: Vec<Option<(u32, u32)>> = module
        .global_variables
        .iter()
        .filter(|(_, v)| matches!(v.space, naga::AddressSpace::Storage { .. }))
        .map(|(_, v)| v.binding.as_ref().map(|b| (b.group, b.binding)))
        .collect();
    if params_binding {
        storage.retain(|b| *b != Some((0, n_buf)));
    }
    let mut want: Vec<Option<(u32, u32)>> = (0..n_buf).map(|b| Some((0, b))).collect();
    storage.sort();
    want.sort();
    if storage != want {
        return Err(refuse(
            sig,
            format!("the shader binds storage buffers {storage:?} (group, binding) but the signature has {n_buf} buffer params: bindings 0..{n_buf} of group 0 expected"),
        ));
    }
    Ok(())
}

/// The workgroup size of entry point `entry`; an error naming the entry points there are.
fn entry_workgroup(sig: &KernelSig, module: &naga::Module, entry: &str) -> Result<[u32; 3], VkError> {
    match module.entry_points.iter().find(|e| e.name == entry) {
        Some(ep) => Ok(ep.workgroup_size),
        None => {
            let names: Vec<&str> = module.entry_points.iter().map(|e| e.name.as_str()).collect();
            Err(refuse(sig, format!("the shader has no entry point `{entry}` (it has: {})", names.join(", "))))
        }
    }
}

pub(crate) fn n_buffers(sig: &KernelSig) -> u32 {
    sig.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32
}

/// WGSL → SPIR-V of `entry`: the storage-buffer build, and the push-constant build where the module
/// takes push constants; its bindings are checked against the signature and take element offsets.
pub(crate) fn compile_wgsl(sig: &KernelSig, source: &str, entry: &str) -> Result<Compiled, VkError> {
    crate::wgsl::with_stack(|| compile_wgsl_here(sig, source, entry)).unwrap_or_else(|e| Err(refuse(sig, e)))
}

/// [`compile_wgsl`] on the calling thread.
fn compile_wgsl_here(sig: &KernelSig, source: &str, entry: &str) -> Result<Compiled, VkError> {
    let mut module = crate::wgsl::parse_here(source).map_err(|e| refuse(sig, e))?;
    let n_buf = n_buffers(sig);
    let n_scalar = sig.params.len() as u32 - n_buf;
    check_bindings(sig, &module, n_buf, false)?;
    let immediates = module.global_variables.iter().filter(|(_, v)| v.space == naga::AddressSpace::Immediate).count();
    if immediates > 1 || (n_scalar > 0 && immediates == 0) {
        return Err(refuse(
            sig,
            format!("the signature has {n_scalar} scalar params: the shader must take them in one `var<immediate>` struct ({immediates} found)"),
        ));
    }
    let workgroup = entry_workgroup(sig, &module, entry)?;
    let float_atomics = uses_float_atomics(&module);
    let info = validate(sig, &module, naga::valid::Capabilities::IMMEDIATES | FLOAT_ATOMICS)?;
    let tiles = tile_code(sig, &module, &info, entry, ParamsAt::Immediate, Some(source));
    let written = module.clone();
    let offsets = add_offsets(&mut module, &info, n_buf, params_layout(sig).1, ParamsVar::Immediate);
    let as_written = if offsets.at.is_some() { Some(wgsl_builds(sig, written, entry, n_buf)?) } else { None };
    let (body, body_stride) = fusion_body(&module, entry, &offsets, n_buf, ParamsVar::Immediate, Some(source));
    let Builds { storage: words, push: push_words } = wgsl_builds(sig, module, entry, n_buf)?;
    Ok(Compiled { words, push_words, as_written, workgroup: Some(workgroup), offsets, body, body_stride, tiles, float_atomics })
}

/// A WGSL module's builds: as it takes its scalars (push constants), where it takes any, and with them
/// moved to the storage buffer at binding `n_buf` (by rewriting the address space before validation).
fn wgsl_builds(sig: &KernelSig, mut module: naga::Module, entry: &str, n_buf: u32) -> Result<Builds, VkError> {
    let has_push = module.global_variables.iter().any(|(_, v)| v.space == naga::AddressSpace::Immediate);
    let push = if has_push { Some(write_spirv(sig, &module, entry, naga::valid::Capabilities::IMMEDIATES | FLOAT_ATOMICS)?) } else { None };
    for (_, var) in module.global_variables.iter_mut() {
        if var.space == naga::AddressSpace::Immediate {
            var.space = naga::AddressSpace::Storage { access: naga::StorageAccess::LOAD };
            var.binding = Some(naga::ResourceBinding { group: 0, binding: n_buf });
        }
    }
    Ok(Builds { storage: write_spirv(sig, &module, entry, FLOAT_ATOMICS)?, push })
}

/// The module (as written, before the offset rewrite) as the tile check reads it.
pub(crate) fn tile_code(
    sig: &KernelSig,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
    at: ParamsAt,
    source: Option<&str>,
) -> Result<Arc<TileCode>, String> {
    TileCode::new(module, info.clone(), sig, entry, &params_layout(sig).0, at, source).map(Arc::new)
}

/// A SPIR-V file's bytes → SPIR-V through naga's front end, its bindings taking element offsets.
/// Where naga cannot read or validate the module: the words as given, no binding taking an offset
/// (each says why).
pub(crate) fn compile_spirv(sig: &KernelSig, bytes: &[u8], entry: &str) -> Result<Compiled, VkError> {
    crate::wgsl::with_stack(|| compile_spirv_here(sig, bytes, entry)).unwrap_or_else(|e| Err(refuse(sig, e)))
}

/// [`compile_spirv`] on the calling thread.
fn compile_spirv_here(sig: &KernelSig, bytes: &[u8], entry: &str) -> Result<Compiled, VkError> {
    let n_buf = n_buffers(sig);
    let scalar_bytes = params_layout(sig).1;
    let given: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let as_given = |why: String, workgroup: Option<[u32; 3]>| {
        let bindings = (0..n_buf).map(|_| BindingInfo { element_size: 1, element: "?".into(), offsets: Err(why.clone()) }).collect();
        Compiled {
            words: given.clone(),
            push_words: None,
            as_written: None,
            workgroup,
            offsets: Offsets { bindings, at: None, params_bytes: scalar_bytes },
            body: Err(why.clone()),
            body_stride: 0,
            tiles: Err(why.clone()),
            // Unknown to naga: the driver checks the module's capabilities against the device.
            float_atomics: false,
        }
    };
    let options = naga::front::spv::Options { adjust_coordinate_space: false, strict_capabilities: false, block_ctx_dump_prefix: None };
    let mut module = match naga::front::spv::parse_u8_slice(bytes, &options) {
        Ok(m) => m,
        Err(e) => return Ok(as_given(format!("naga's SPIR-V front end cannot read the module ({e})"), None)),
    };
    check_bindings(sig, &module, n_buf, true)?;
    let workgroup = entry_workgroup(sig, &module, entry)?;
    let float_atomics = uses_float_atomics(&module);
    let info = match validate(sig, &module, FLOAT_ATOMICS) {
        Ok(i) => i,
        Err(e) => return Ok(as_given(format!("naga does not validate the module it read ({e})"), Some(workgroup))),
    };
    let tiles = tile_code(sig, &module, &info, entry, ParamsAt::Binding(n_buf), None);
    let offsets = add_offsets(&mut module, &info, n_buf, scalar_bytes, ParamsVar::Storage(n_buf));
    let (body, body_stride) = fusion_body(&module, entry, &offsets, n_buf, ParamsVar::Storage(n_buf), None);
    if offsets.at.is_none() {
        // Nothing to rewrite: the module runs as given.
        return Ok(Compiled { offsets, body, body_stride, tiles, float_atomics, ..as_given(String::new(), Some(workgroup)) });
    }
    let words = write_spirv(sig, &module, entry, FLOAT_ATOMICS)?;
    // The words as given run where every element offset of a node is 0.
    let as_written = Some(Builds { storage: given, push: None });
    Ok(Compiled { words, push_words: None, as_written, workgroup: Some(workgroup), offsets, body, body_stride, tiles, float_atomics })
}

/// Binds `reference` for `sig`: `builtin:NAME` (the WGSL twins of the built-in kernels), a `.wgsl`
/// file, WGSL carried in the reference ([`KernelRef::code`], a pack's kernels: its `source` ends in
/// `.wgsl`), or a `.spv` file (SPIR-V words following the binding convention above).
pub(crate) fn bind(ctx: &Arc<Context>, sig: &KernelSig, reference: &KernelRef) -> Result<VulkanKernel, VkError> {
    reference.check_options("vulkan", &[]).map_err(|m| refuse(sig, m))?;
    // A kernel the backend has no code for is not applicable here, before its code is verified.
    let builtin_name = reference.builtin_name().map(|b| if b.is_empty() { sig.name.as_str() } else { b });
    let builtin = match builtin_name {
        Some(name) => Some(crate::shaders::wgsl(name).ok_or_else(|| VkError::NotApplicable(format!("no WGSL version of kernel `{name}`")))?),
        None => None,
    };
    if builtin.is_none() && reference.code.is_none() {
        // A file that cannot be read is refused as such, not as code the analysis cannot read.
        ostinato::capped_read::check(&reference.path(), ostinato::capped_read::KERNEL_FILE).map_err(|e| refuse(sig, e.to_string()))?;
    }
    crate::access::verify(sig, reference)?;
    if sig.params.iter().any(|p| matches!(p.kind, ParamKind::Scalar(ScalarType::F64 | ScalarType::I64 | ScalarType::U64))) && reference.builtin_name().is_some()
    {
        return Err(refuse(sig, "the built-in WGSL kernels take 32-bit scalars"));
    }
    let (compiled, entry) = match builtin {
        Some(src) => (compile_wgsl(sig, &src, "main")?, "main".to_string()),
        None if reference.code.is_some() => {
            let entry = reference.entry_for(&sig.name).to_string();
            (compile_wgsl(sig, crate::access::code_wgsl(reference).map_err(|m| refuse(sig, m))?, &entry)?, entry)
        }
        None => {
            let path = reference.path();
            let entry = reference.entry_for(&sig.name).to_string();
            use ostinato::capped_read::{read_bytes, read_text, KERNEL_FILE};
            let io = |e: ostinato::capped_read::ReadError| refuse(sig, e.to_string());
            match path.extension().and_then(|e| e.to_str()) {
                Some("wgsl") => (compile_wgsl(sig, &read_text(&path, KERNEL_FILE).map_err(io)?, &entry)?, entry),
                Some("spv") => {
                    let bytes = read_bytes(&path, KERNEL_FILE).map_err(io)?;
                    if bytes.len() % 4 != 0 || bytes.len() < 20 || bytes[..4] != [0x03, 0x02, 0x23, 0x07] {
                        return Err(refuse(sig, format!("{}: not little-endian SPIR-V (magic 0x07230203)", path.display())));
                    }
                    (compile_spirv(sig, &bytes, &entry)?, entry)
                }
                _ => return Err(refuse(sig, format!("{}: a Vulkan kernel is a .wgsl or .spv file", path.display()))),
            }
        }
    };
    pipelines(ctx, sig, compiled, &entry).map(|k| VulkanKernel { builtin: builtin_name.map(str::to_string), ..k })
}

/// The kernel's pipelines from its compiled SPIR-V.
fn pipelines(ctx: &Arc<Context>, sig: &KernelSig, compiled: Compiled, entry: &str) -> Result<VulkanKernel, VkError> {
    let n_buf = n_buffers(sig);
    let (scalar_offsets, scalar_bytes) = params_layout(sig);
    let params_bytes = compiled.offsets.params_bytes;
    let bindings = n_buf + u32::from(params_bytes > 0);
    let c_entry = CString::new(entry).map_err(|_| refuse(sig, "the entry name holds a NUL byte"))?;
    let named = |e: VkError| refuse(sig, format!("entry point `{entry}`: {e}"));
    // A pipeline past the device's workgroup limits is invalid to create: refused here, naming them.
    if let Some(wg) = compiled.workgroup {
        ctx.limits.check_workgroup(wg).map_err(|why| VkError::NotApplicable(format!("kernel `{}`: {why} ({})", sig.name, ctx.name)))?;
    }
    if compiled.float_atomics && !ctx.float32_atomic_add() {
        return Err(VkError::NotApplicable(format!(
            "kernel `{}` adds f32 atomically (`atomic<f32>`): {} lacks VK_EXT_shader_atomic_float's shaderBufferFloat32AtomicAdd",
            sig.name, ctx.name
        )));
    }
    // Push-constant ranges are whole 4-byte words.
    let push_bytes = params_bytes.div_ceil(4) * 4;
    let pipeline = Pipeline::with_entry(ctx, &compiled.words, bindings, 0, &c_entry).map_err(named)?;
    let push = match &compiled.push_words {
        Some(w) => Some(Arc::new(Pipeline::with_entry(ctx, w, n_buf, push_bytes, &c_entry).map_err(named)?)),
        None => None,
    };
    let as_written = compiled.as_written.map(|builds| {
        Arc::new(AsWritten { builds, kernel: sig.name.clone(), entry: c_entry.clone(), n_buf, scalar_bytes, storage: OnceLock::new(), push: OnceLock::new() })
    });
    Ok(VulkanKernel {
        pipeline: Arc::new(pipeline),
        push,
        as_written,
        name: sig.name.clone(),
        buffers: n_buf,
        scalar_offsets,
        params_bytes,
        bindings: compiled.offsets.bindings,
        offsets_at: compiled.offsets.at,
        workgroup: compiled.workgroup,
        body: compiled.body,
        body_stride: compiled.body_stride,
        tiles: compiled.tiles,
        builtin: None,
    })
}

/// A fused dispatch's kernel from its module (entry point `main`, `bindings` storage buffers, no push
/// constants).
pub(crate) fn fused_kernel(ctx: &Arc<Context>, name: &str, module: naga::Module, bindings: u32, block: [u32; 3]) -> Result<VulkanKernel, VkError> {
    let sig = KernelSig::new(name);
    // Variables of several bodies share a binding (one per root buffer, one for the params): validated
    // without the binding-collision check, which assumes one variable per binding. And without naga's
    // uniformity pass: each body's barriers were found in uniform control flow at bind
    // (`crate::uniform`, its scalars uniform), and the entry calls the bodies in uniform control flow
    // by construction (a switch on the workgroup id, loops of literal counts); naga would see the
    // bodies' scalars, now loaded into per-invocation private variables, and the loops' counters as
    // varying.
    let flags = naga::valid::ValidationFlags::all() - naga::valid::ValidationFlags::BINDINGS - naga::valid::ValidationFlags::CONTROL_FLOW_UNIFORMITY;
    let info = naga::valid::Validator::new(flags, FLOAT_ATOMICS).validate(&module).map_err(|e| refuse(&sig, format!("{:?}", e.into_inner())))?;
    let mut words = spirv_words(&sig, &module, &info, "main")?;
    // The entry's barriers order calls of one workgroup: workgroup memory scope, not naga's device scope.
    crate::barrier_scope::entry_barriers_to_workgroup_scope(&mut words, "main").map_err(|e| refuse(&sig, e))?;
    let pipeline = Pipeline::with_entry(ctx, &words, bindings, 0, c"main").map_err(|e| refuse(&sig, e.to_string()))?;
    Ok(VulkanKernel {
        pipeline: Arc::new(pipeline),
        push: None,
        as_written: None,
        name: name.to_string(),
        buffers: bindings,
        scalar_offsets: Vec::new(),
        params_bytes: 0,
        bindings: Vec::new(),
        offsets_at: None,
        workgroup: Some(block),
        body: Err("a fused dispatch".into()),
        body_stride: 0,
        tiles: Err("a fused dispatch".into()),
        builtin: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::Access;

    #[test]
    fn builtin_wgsl_moves_its_scalars_into_the_storage_buffer_and_appends_the_offsets() {
        let sig = ostinato_host::builtins::mix_sig();
        let src = crate::shaders::wgsl("mix").unwrap();
        let c = compile_wgsl(&sig, &src, "main").unwrap();
        assert_eq!(c.words[0], 0x0723_0203);
        assert!(c.push_words.is_some());
        assert_eq!(c.workgroup, Some([256, 1, 1]));
        assert_eq!(params_layout(&sig), (vec![0, 4, 8], 12));
        // Both bindings take element offsets, after the 12 bytes of scalars.
        assert_eq!(c.offsets.at, Some(12));
        assert_eq!(c.offsets.params_bytes, 20);
        assert!(c.offsets.bindings.iter().all(|b| b.offsets.is_ok() && b.element_size == 4 && b.element == "u32"), "{:?}", c.offsets.bindings);
    }

    #[test]
    fn a_barrier_after_a_return_some_invocations_take_makes_no_fused_body() {
        // naga records that a barrier needs uniform control flow but does not check it: a kernel with a
        // barrier some invocations return before binds, runs alone, and is no fused body.
        let sig = KernelSig::new("k").buffer("x", Access::ReadWrite);
        let early = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\nvar<workgroup> t: array<u32, 64>;\n@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { if (i >= 32u) { return; } t[i] = i; workgroupBarrier(); x[i] = t[63u - i]; }";
        let c = compile_wgsl(&sig, early, "main").unwrap();
        let e = c.body.err().expect("no fused body");
        assert!(e.contains("barrier at line 3"), "{e}");
        // The same barrier before the return: accepted, and a fused body.
        let late = early.replace("if (i >= 32u) { return; } t[i] = i; workgroupBarrier();", "t[i] = i; workgroupBarrier(); if (i >= 32u) { return; }");
        let c = compile_wgsl(&sig, &late, "main").unwrap();
        assert!(c.body.is_ok(), "{:?}", c.body.err());
    }

    #[test]
    fn a_kernel_with_module_scope_private_variables_is_no_fused_body() {
        let src = "var<private> calls: u32 = 0u;\n@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { calls = calls + 1u; x[i] = calls; }";
        let sig = KernelSig::new("count").buffer("x", Access::ReadWrite);
        let c = compile_wgsl(&sig, src, "main").unwrap();
        assert!(c.body.as_ref().is_err_and(|e| e.contains("private")), "{:?}", c.body.as_ref().err());
    }

    #[test]
    fn a_binding_count_mismatch_and_a_missing_entry_point_are_named() {
        let src = crate::shaders::wgsl("mix").unwrap();
        let three = KernelSig::new("mix3").buffer("a", Access::ReadWrite).buffer("b", Access::Read).buffer("c", Access::Read).scalar("n", ScalarType::U32);
        let e = compile_wgsl(&three, &src, "main").err().unwrap().to_string();
        assert!(e.contains("`mix3`") && e.contains("3 buffer params"), "{e}");
        let e = compile_wgsl(&ostinato_host::builtins::mix_sig(), &src, "mix_main").err().unwrap().to_string();
        assert!(e.contains("no entry point `mix_main`") && e.contains("main"), "{e}");
        let wide = KernelSig::new("w").buffer("out", Access::ReadWrite).scalar("n", ScalarType::U64).scalar("m", ScalarType::U32);
        assert_eq!(params_layout(&wide), (vec![0, 8], 12));
    }

    #[test]
    fn an_f32_atomic_add_compiles_and_is_marked_as_needing_the_device_feature() {
        let body = "@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { atomicAdd(&acc[0], f32(i)); }";
        let sig = KernelSig::new("sum").buffer("acc", Access::ReadWrite);
        let f32_src = format!("@group(0) @binding(0) var<storage, read_write> acc: array<atomic<f32>>;\n{body}");
        let c = compile_wgsl(&sig, &f32_src, "main").unwrap();
        assert!(c.float_atomics);
        // naga writes the add as OpAtomicFAddEXT (opcode 6035) under its capability.
        assert!(c.words.iter().any(|&w| w & 0xffff == 6035), "no OpAtomicFAddEXT");
        let u32_src = f32_src.replace("atomic<f32>", "atomic<u32>").replace("f32(i)", "i");
        assert!(!compile_wgsl(&sig, &u32_src, "main").unwrap().float_atomics);
    }
}

#[cfg(test)]
#[path = "wgsl_fuzz_tests.rs"]
mod wgsl_fuzz_tests;
