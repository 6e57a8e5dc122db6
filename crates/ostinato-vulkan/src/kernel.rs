//! Kernels of the Vulkan backend: WGSL (a built-in of `kernels/wgsl/`, or a `.wgsl` file) compiled to
//! SPIR-V with naga, or a `.spv` file. The convention every kernel follows: binding `i` of set 0 is the
//! signature's `i`-th buffer param (a storage buffer), and the scalar params live in one more storage
//! buffer right after them, in signature order at their natural alignment — so a slot is patched by
//! writing that buffer, never by re-recording. WGSL kernels take their scalars as one `var<immediate>`
//! struct (push constants): a WGSL kernel gets two pipelines, one with the push constants as written
//! (for nodes whose scalars are all constants: recorded into the command buffer, no memory read) and
//! one with them moved to that storage buffer by rewriting the module's address space before
//! validation (for nodes that take a slot). A `.spv` kernel follows the storage-buffer convention only.

use std::ffi::CString;
use std::sync::Arc;

use ostinato::{KernelRef, KernelSig, ParamKind, ScalarType};

use crate::ffi::{Context, Pipeline};
use crate::VkError;

/// A bound kernel: its pipelines and the layout of its scalar params.
#[derive(Clone)]
pub struct VulkanKernel {
    /// Scalars in the storage buffer after the buffers (every kernel has it).
    pub(crate) pipeline: Arc<Pipeline>,
    /// Scalars as push constants (WGSL kernels with scalars): what a node without slots launches.
    pub(crate) push: Option<Arc<Pipeline>>,
    pub name: String,
    /// Storage-buffer params, in order.
    pub buffers: u32,
    /// Byte offset of each scalar param in the params block (signature order), and the block's size.
    pub(crate) scalar_offsets: Vec<u32>,
    pub(crate) params_bytes: u32,
    /// The shader's workgroup size, where known (WGSL); launches must match it.
    pub workgroup: Option<[u32; 3]>,
}

impl std::fmt::Debug for VulkanKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VulkanKernel({}, {} buffers, {} param bytes)", self.name, self.buffers, self.params_bytes)
    }
}

/// The params block's layout for `sig`: each scalar at its natural alignment.
fn params_layout(sig: &KernelSig) -> (Vec<u32>, u32) {
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

/// Where a WGSL kernel's scalar params live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalars {
    /// Push constants, as the shader declares them.
    Push,
    /// The storage buffer after the signature's buffers.
    Storage,
}

/// WGSL → validated SPIR-V of `entry`, its scalars where `scalars` says; the module's storage bindings
/// are checked against the signature.
pub(crate) fn wgsl_to_spirv(sig: &KernelSig, source: &str, entry: &str, scalars: Scalars) -> Result<(Vec<u32>, Option<[u32; 3]>), VkError> {
    let mut module = naga::front::wgsl::parse_str(source).map_err(|e| refuse(sig, e.emit_to_string(source)))?;
    let n_buf = sig.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32;
    let n_scalar = sig.params.len() as u32 - n_buf;
    let mut storage = Vec::new();
    let mut immediates = 0;
    for (_, var) in module.global_variables.iter_mut() {
        match var.space {
            naga::AddressSpace::Storage { .. } => storage.push(var.binding.as_ref().map(|b| (b.group, b.binding))),
            naga::AddressSpace::Immediate => {
                immediates += 1;
                if scalars == Scalars::Storage {
                    var.space = naga::AddressSpace::Storage { access: naga::StorageAccess::LOAD };
                    var.binding = Some(naga::ResourceBinding { group: 0, binding: n_buf });
                }
            }
            _ => {}
        }
    }
    let mut want: Vec<Option<(u32, u32)>> = (0..n_buf).map(|b| Some((0, b))).collect();
    storage.sort();
    want.sort();
    if storage != want {
        return Err(refuse(sig, format!("the shader binds storage buffers {storage:?} (group, binding) but the signature has {n_buf} buffer params: bindings 0..{n_buf} of group 0 expected")));
    }
    if immediates > 1 || (n_scalar > 0 && immediates == 0) {
        return Err(refuse(
            sig,
            format!("the signature has {n_scalar} scalar params: the shader must take them in one `var<immediate>` struct ({immediates} found)"),
        ));
    }
    let Some(ep) = module.entry_points.iter().find(|e| e.name == entry) else {
        let names: Vec<&str> = module.entry_points.iter().map(|e| e.name.as_str()).collect();
        return Err(refuse(sig, format!("the shader has no entry point `{entry}` (it has: {})", names.join(", "))));
    };
    let workgroup = Some(ep.workgroup_size);
    let caps = if scalars == Scalars::Push { naga::valid::Capabilities::IMMEDIATES } else { naga::valid::Capabilities::empty() };
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module).map_err(|e| refuse(sig, format!("{e:?}")))?;
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.to_string() };
    let words = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| refuse(sig, e.to_string()))?;
    Ok((words, workgroup))
}

/// A kernel's SPIR-V words with its scalars in the storage buffer, the push-constant build where there
/// is one, and the workgroup size where known.
type Spirv = (Vec<u32>, Option<Vec<u32>>, Option<[u32; 3]>);

/// Binds `reference` for `sig`: `builtin:NAME` (the WGSL twins of the built-in kernels), a `.wgsl`
/// file, or a `.spv` file (SPIR-V words following the binding convention above).
pub(crate) fn bind(ctx: &Arc<Context>, sig: &KernelSig, reference: &KernelRef) -> Result<VulkanKernel, VkError> {
    reference.check_options("vulkan", &[]).map_err(|m| refuse(sig, m))?;
    crate::access::verify(sig, reference)?;
    if sig.params.iter().any(|p| matches!(p.kind, ParamKind::Scalar(ScalarType::F64 | ScalarType::I64 | ScalarType::U64))) && reference.builtin_name().is_some()
    {
        return Err(refuse(sig, "the built-in WGSL kernels take 32-bit scalars"));
    }
    // (storage-buffer words, push-constant words where the kernel is WGSL with scalars, workgroup, entry)
    let has_scalars = sig.params.iter().any(|p| matches!(p.kind, ParamKind::Scalar(_)));
    let wgsl = |src: &str, entry: &str| -> Result<Spirv, VkError> {
        let (w, wg) = wgsl_to_spirv(sig, src, entry, Scalars::Storage)?;
        let push = if has_scalars { Some(wgsl_to_spirv(sig, src, entry, Scalars::Push)?.0) } else { None };
        Ok((w, push, wg))
    };
    let (words, push_words, workgroup, entry) = match reference.builtin_name() {
        Some(b) => {
            let name = if b.is_empty() { sig.name.as_str() } else { b };
            let src = crate::shaders::wgsl(name).ok_or_else(|| VkError::NotApplicable(format!("no WGSL version of kernel `{name}`")))?;
            let (w, p, wg) = wgsl(&src, "main")?;
            (w, p, wg, "main".to_string())
        }
        None => {
            let path = reference.path();
            let entry = reference.entry_for(&sig.name).to_string();
            let io = |e: std::io::Error| refuse(sig, format!("{}: {e}", path.display()));
            match path.extension().and_then(|e| e.to_str()) {
                Some("wgsl") => {
                    let src = std::fs::read_to_string(&path).map_err(io)?;
                    let (w, p, wg) = wgsl(&src, &entry)?;
                    (w, p, wg, entry)
                }
                Some("spv") => {
                    let bytes = std::fs::read(&path).map_err(io)?;
                    if bytes.len() % 4 != 0 || bytes.len() < 20 || bytes[..4] != [0x03, 0x02, 0x23, 0x07] {
                        return Err(refuse(sig, format!("{}: not little-endian SPIR-V (magic 0x07230203)", path.display())));
                    }
                    (bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(), None, None, entry)
                }
                _ => return Err(refuse(sig, format!("{}: a Vulkan kernel is a .wgsl or .spv file", path.display()))),
            }
        }
    };
    let n_buf = sig.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32;
    let (scalar_offsets, params_bytes) = params_layout(sig);
    let bindings = n_buf + u32::from(!scalar_offsets.is_empty());
    let c_entry = CString::new(entry.clone()).map_err(|_| refuse(sig, "the entry name holds a NUL byte"))?;
    let named = |e: VkError| refuse(sig, format!("entry point `{entry}`: {e}"));
    // Push-constant ranges are whole 4-byte words.
    let push_bytes = params_bytes.div_ceil(4) * 4;
    let pipeline = Pipeline::with_entry(ctx, &words, bindings, 0, &c_entry).map_err(named)?;
    let push = match push_words {
        Some(w) => Some(Arc::new(Pipeline::with_entry(ctx, &w, n_buf, push_bytes, &c_entry).map_err(named)?)),
        None => None,
    };
    Ok(VulkanKernel { pipeline: Arc::new(pipeline), push, name: sig.name.clone(), buffers: n_buf, scalar_offsets, params_bytes, workgroup })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::Access;

    #[test]
    fn builtin_wgsl_moves_its_scalars_into_the_storage_buffer_after_the_buffers() {
        let sig = ostinato_host::builtins::mix_sig();
        let src = crate::shaders::wgsl("mix").unwrap();
        let (words, wg) = wgsl_to_spirv(&sig, &src, "main", Scalars::Storage).unwrap();
        assert_eq!(words[0], 0x0723_0203);
        assert_eq!(wg, Some([256, 1, 1]));
        assert_eq!(params_layout(&sig), (vec![0, 4, 8], 12));
    }

    #[test]
    fn a_binding_count_mismatch_and_a_missing_entry_point_are_named() {
        let src = crate::shaders::wgsl("mix").unwrap();
        let three = KernelSig::new("mix3").buffer("a", Access::ReadWrite).buffer("b", Access::Read).buffer("c", Access::Read).scalar("n", ScalarType::U32);
        let e = wgsl_to_spirv(&three, &src, "main", Scalars::Storage).unwrap_err().to_string();
        assert!(e.contains("`mix3`") && e.contains("3 buffer params"), "{e}");
        let e = wgsl_to_spirv(&ostinato_host::builtins::mix_sig(), &src, "mix_main", Scalars::Push).unwrap_err().to_string();
        assert!(e.contains("no entry point `mix_main`") && e.contains("main"), "{e}");
        let wide = KernelSig::new("w").buffer("out", Access::ReadWrite).scalar("n", ScalarType::U64).scalar("m", ScalarType::U32);
        assert_eq!(params_layout(&wide), (vec![0, 8], 12));
    }
}
