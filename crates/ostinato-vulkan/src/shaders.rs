//! The WGSL twins of the built-in kernels (`kernels/wgsl/`), compiled to SPIR-V with naga.

use crate::VkError;

const COMMON: &str = include_str!("../../../kernels/wgsl/common.wgsl");

/// The grid arithmetic every built-in indexes with: u32 that saturates instead of wrapping, so any
/// grid the device accepts gives each element once.
pub const GRID: &str = include_str!("../../../kernels/wgsl/grid.wgsl");

/// WGSL source of a built-in kernel: its file, with the grid arithmetic appended (WGSL declarations
/// may follow their uses, so the kernel's own lines keep their numbers); the decode kernels get the
/// shared reduction helpers prepended.
pub fn wgsl(name: &str) -> Option<String> {
    let plain = |src: &str| format!("{src}\n{GRID}");
    let decode = |src: &str| format!("{COMMON}\n{src}\n{GRID}");
    Some(match name {
        "add_one" => plain(include_str!("../../../kernels/wgsl/add_one.wgsl")),
        "mix" => plain(include_str!("../../../kernels/wgsl/mix.wgsl")),
        "rmsnorm" => decode(include_str!("../../../kernels/wgsl/rmsnorm.wgsl")),
        "gemv" => decode(include_str!("../../../kernels/wgsl/gemv.wgsl")),
        "rope" => plain(include_str!("../../../kernels/wgsl/rope.wgsl")),
        "kv_store" => plain(include_str!("../../../kernels/wgsl/kv_store.wgsl")),
        "attention" => decode(include_str!("../../../kernels/wgsl/attention.wgsl")),
        "add" => plain(include_str!("../../../kernels/wgsl/add.wgsl")),
        "silu_mul" => plain(include_str!("../../../kernels/wgsl/silu_mul.wgsl")),
        _ => return None,
    })
}

/// Compiles a built-in kernel's WGSL to validated SPIR-V words (entry point `main`).
pub fn spirv(name: &str) -> Result<Vec<u32>, VkError> {
    let src = wgsl(name).ok_or_else(|| VkError::NotApplicable(format!("no WGSL version of kernel `{name}`")))?;
    spirv_of_wgsl(name, &src, "main")
}

/// Compiles `source` (WGSL; `kernel` names it in errors) to validated SPIR-V words of entry point
/// `entry`, as written: its scalars stay push constants and its bindings take no element offsets (what
/// a Vulkan user who records their own command buffers compiles).
pub fn spirv_of_wgsl(kernel: &str, source: &str, entry: &str) -> Result<Vec<u32>, VkError> {
    let err = |m: String| VkError::Shader { kernel: kernel.to_string(), message: m };
    let module = crate::wgsl::parse(source).map_err(err)?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::IMMEDIATES | crate::kernel::FLOAT_ATOMICS)
        .validate(&module)
        .map_err(|e| err(format!("{e:?}")))?;
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.into() };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn builtins_compile_to_spirv() {
        for k in ["add_one", "mix", "rmsnorm", "gemv", "rope", "kv_store", "attention", "add", "silu_mul"] {
            let words = super::spirv(k).unwrap();
            assert_eq!(words[0], 0x0723_0203, "SPIR-V magic for {k}");
        }
        assert!(matches!(super::spirv("fft"), Err(crate::VkError::NotApplicable(_))));
    }
}
