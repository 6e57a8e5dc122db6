//! Reading AMDGPU code objects (`.hsaco`): the ELF header (machine, HSA OS ABI, code object
//! version), the `NT_AMDGPU_METADATA` note (MessagePack) with every kernel's arguments, and each
//! kernel's 64-byte descriptor (`<name>.kd`); and checking a kernel against a graph signature,
//! failing closed: every explicit argument must match its param's kind and size, an access the
//! compiler proved must not contradict the declared one, and a hidden argument the backend cannot
//! fill, a dynamic call stack, or a descriptor that disagrees with the metadata is refused.

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::{LittleEndian as LE, Object, ObjectSection, ObjectSymbol};
use ostinato::{Access, KernelSig, ParamKind, ScalarType};
use serde::Deserialize;

/// `EM_AMDGPU`.
pub const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`.
pub const NT_AMDGPU_METADATA: u32 = 32;

#[derive(Debug, Deserialize)]
struct RootMd {
    #[serde(rename = "amdhsa.target", default)]
    target: String,
    #[serde(rename = "amdhsa.kernels", default)]
    kernels: Vec<KernelMd>,
}

#[derive(Debug, Deserialize)]
struct KernelMd {
    #[serde(rename = ".name")]
    name: String,
    #[serde(rename = ".symbol")]
    symbol: String,
    #[serde(rename = ".kernarg_segment_size")]
    kernarg_segment_size: u32,
    #[serde(rename = ".kernarg_segment_align")]
    kernarg_segment_align: u32,
    #[serde(rename = ".group_segment_fixed_size")]
    group_segment_fixed_size: u32,
    #[serde(rename = ".private_segment_fixed_size")]
    private_segment_fixed_size: u32,
    #[serde(rename = ".max_flat_workgroup_size", default)]
    max_flat_workgroup_size: Option<u32>,
    #[serde(rename = ".uses_dynamic_stack", default)]
    uses_dynamic_stack: Option<bool>,
    #[serde(rename = ".args", default)]
    args: Vec<ArgMd>,
}

#[derive(Clone, Debug, Deserialize)]
struct ArgMd {
    #[serde(rename = ".name", default)]
    name: Option<String>,
    #[serde(rename = ".type_name", default)]
    type_name: Option<String>,
    #[serde(rename = ".size")]
    size: u32,
    #[serde(rename = ".offset")]
    offset: u32,
    #[serde(rename = ".value_kind")]
    value_kind: String,
    #[serde(rename = ".address_space", default)]
    address_space: Option<String>,
    #[serde(rename = ".actual_access", default)]
    actual_access: Option<String>,
}

/// One kernel argument as the code object's metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgInfo {
    pub name: String,
    pub type_name: String,
    pub offset: u32,
    pub size: u32,
    /// `global_buffer`, `by_value`, `hidden_block_count_x`, ...
    pub value_kind: String,
    pub address_space: Option<String>,
    /// What the compiler proved: `read_only`, `write_only`, or `None` (it may read and write).
    pub actual_access: Option<String>,
}

impl ArgInfo {
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// One kernel of a code object: its metadata and its descriptor's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    /// The descriptor symbol (`<name>.kd`).
    pub symbol: String,
    pub kernarg_segment_size: u32,
    pub kernarg_segment_align: u32,
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub max_flat_workgroup_size: u32,
    pub uses_dynamic_stack: bool,
    pub args: Vec<ArgInfo>,
}

/// A parsed code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject {
    /// The ISA the object targets (`gfx1100`).
    pub isa: String,
    /// `amdhsa.target` (`amdgcn-amd-amdhsa--gfx1100`).
    pub target: String,
    /// The code object version (4, 5 or 6).
    pub version: u8,
    pub kernels: Vec<KernelInfo>,
}

impl CodeObject {
    pub fn kernel(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// Parses a code object; an error says what is wrong with it.
pub fn parse(bytes: &[u8]) -> Result<CodeObject, String> {
    let file = ElfFile64::<LE>::parse(bytes).map_err(|e| format!("not a 64-bit little-endian ELF file: {e}"))?;
    let header = file.elf_header();
    let e = file.endian();
    if header.e_machine(e) != EM_AMDGPU {
        return Err(format!("ELF machine {} is not AMDGPU ({EM_AMDGPU})", header.e_machine(e)));
    }
    let ident = header.e_ident();
    if ident.os_abi != ELFOSABI_AMDGPU_HSA {
        return Err(format!("ELF OS ABI {} is not AMDGPU HSA ({ELFOSABI_AMDGPU_HSA})", ident.os_abi));
    }
    let version = match ident.abi_version {
        2 => 4,
        3 => 5,
        4 => 6,
        v => return Err(format!("code object ABI version {v} (code object v{}) is not one of v4, v5, v6", v + 1)),
    };
    let metadata = metadata_note(&file)?;
    let root: RootMd = rmp_serde::from_slice(&metadata).map_err(|e| format!("NT_AMDGPU_METADATA is not the expected MessagePack map: {e}"))?;
    let isa = root.target.rsplit("--").next().unwrap_or_default().split(':').next().unwrap_or_default().to_string();
    if isa.is_empty() {
        return Err(format!("amdhsa.target `{}` names no processor", root.target));
    }
    let mut kernels = Vec::with_capacity(root.kernels.len());
    for k in root.kernels {
        let descriptor = descriptor(&file, &k.symbol)?;
        check_descriptor(&k, &descriptor)?;
        kernels.push(KernelInfo {
            name: k.name,
            symbol: k.symbol,
            kernarg_segment_size: k.kernarg_segment_size,
            kernarg_segment_align: k.kernarg_segment_align,
            group_segment_fixed_size: k.group_segment_fixed_size,
            private_segment_fixed_size: k.private_segment_fixed_size,
            max_flat_workgroup_size: k.max_flat_workgroup_size.unwrap_or(256),
            uses_dynamic_stack: k.uses_dynamic_stack.unwrap_or(false) || descriptor_dynamic_stack(&descriptor),
            args: k
                .args
                .into_iter()
                .map(|a| ArgInfo {
                    name: a.name.unwrap_or_default(),
                    type_name: a.type_name.unwrap_or_default(),
                    offset: a.offset,
                    size: a.size,
                    value_kind: a.value_kind,
                    address_space: a.address_space,
                    actual_access: a.actual_access,
                })
                .collect(),
        });
    }
    Ok(CodeObject { isa, target: root.target, version, kernels })
}

/// The `AMDGPU` note of type `NT_AMDGPU_METADATA`.
fn metadata_note(file: &ElfFile64<'_, LE>) -> Result<Vec<u8>, String> {
    let e = file.endian();
    let data = file.data();
    for section in file.elf_section_table().iter() {
        if section.sh_type(e) != elf::SHT_NOTE {
            continue;
        }
        let Ok(Some(mut notes)) = section.notes(e, data) else { continue };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                return Ok(note.desc().to_vec());
            }
        }
    }
    Err("no NT_AMDGPU_METADATA note (code objects before v3 are not supported)".into())
}

/// The 64 bytes of the kernel descriptor `symbol`.
fn descriptor(file: &ElfFile64<'_, LE>, symbol: &str) -> Result<[u8; 64], String> {
    let sym = file.symbols().chain(file.dynamic_symbols()).find(|s| s.name() == Ok(symbol)).ok_or_else(|| format!("no kernel descriptor symbol `{symbol}`"))?;
    let section = sym.section_index().and_then(|i| file.section_by_index(i).ok()).ok_or_else(|| format!("descriptor `{symbol}` is in no section"))?;
    let data = section.data().map_err(|e| format!("descriptor `{symbol}`: {e}"))?;
    let at = sym.address().checked_sub(section.address()).map(|a| a as usize).ok_or_else(|| format!("descriptor `{symbol}` lies before its section"))?;
    data.get(at..at + 64).and_then(|b| b.try_into().ok()).ok_or_else(|| format!("descriptor `{symbol}` runs past its section"))
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `kernel_code_properties` bit 11: the kernel uses a dynamic call stack.
fn descriptor_dynamic_stack(kd: &[u8; 64]) -> bool {
    u16::from_le_bytes([kd[56], kd[57]]) >> 11 & 1 == 1
}

/// The descriptor's segment sizes must equal the metadata's (the runtime reads the descriptor).
fn check_descriptor(k: &KernelMd, kd: &[u8; 64]) -> Result<(), String> {
    let (group, private, kernarg) = (le32(kd, 0), le32(kd, 4), le32(kd, 8));
    if (group, private, kernarg) != (k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_segment_size) {
        return Err(format!(
            "kernel `{}`: its descriptor says group {group}, private {private}, kernarg {kernarg} bytes; its metadata {}, {}, {}",
            k.name, k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_segment_size
        ));
    }
    Ok(())
}

/// A hidden argument the backend fills in every dispatch's kernarg block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hidden {
    BlockCount(usize),
    GroupSize(usize),
    Remainder(usize),
    GlobalOffset(usize),
    GridDims,
    DynamicLdsSize,
    /// An unused slot (`hidden_none`): left zero.
    None,
}

fn hidden(kind: &str) -> Option<Hidden> {
    let axis = |s: &str| match s {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let (stem, last) = kind.rsplit_once('_')?;
    Some(match stem {
        "hidden_block_count" => Hidden::BlockCount(axis(last)?),
        "hidden_group_size" => Hidden::GroupSize(axis(last)?),
        "hidden_remainder" => Hidden::Remainder(axis(last)?),
        "hidden_global_offset" => Hidden::GlobalOffset(axis(last)?),
        _ => match kind {
            "hidden_grid_dims" => Hidden::GridDims,
            "hidden_dynamic_lds_size" => Hidden::DynamicLdsSize,
            "hidden_none" => Hidden::None,
            _ => return None,
        },
    })
}

/// Where a kernarg byte range comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// The signature's param `i`.
    Param(usize),
    Hidden(Hidden),
}

/// A kernel's kernarg layout, checked against a signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernargLayout {
    pub size: u32,
    pub align: u32,
    /// (offset, size, source), in metadata order.
    pub fields: Vec<(u32, u32, ArgSource)>,
}

/// The C type a by-value argument's `.type_name` names, where it is one of the fixed-size types.
fn scalar_of_type_name(t: &str) -> Option<ScalarType> {
    Some(match t.trim() {
        "u32" | "uint" | "unsigned int" | "uint32_t" | "unsigned" => ScalarType::U32,
        "int" | "i32" | "int32_t" => ScalarType::I32,
        "float" | "f32" => ScalarType::F32,
        "u64" | "ulong" | "unsigned long" | "uint64_t" | "size_t" | "unsigned long long" => ScalarType::U64,
        "long" | "i64" | "int64_t" | "long long" => ScalarType::I64,
        "double" | "f64" => ScalarType::F64,
        _ => return None,
    })
}

/// Checks kernel `k` against `sig` and lays out its kernarg segment; the error says which argument
/// does not fit and why.
pub fn check_signature(sig: &KernelSig, k: &KernelInfo) -> Result<KernargLayout, String> {
    if k.uses_dynamic_stack {
        return Err("it uses a dynamic call stack, whose size a raw AQL dispatch cannot know".into());
    }
    let explicit: Vec<&ArgInfo> = k.args.iter().filter(|a| !a.is_hidden()).collect();
    if explicit.len() != sig.params.len() {
        return Err(format!("the code object's kernel takes {} arguments, the signature has {} params", explicit.len(), sig.params.len()));
    }
    let mut fields = Vec::with_capacity(k.args.len());
    let mut param = 0;
    for a in &k.args {
        let end = a.offset.checked_add(a.size).filter(|&e| e <= k.kernarg_segment_size);
        if end.is_none() {
            return Err(format!("argument `{}` ({}+{}) lies outside the {}-byte kernarg segment", a.name, a.offset, a.size, k.kernarg_segment_size));
        }
        if a.is_hidden() {
            let h = hidden(&a.value_kind)
                .ok_or_else(|| format!("hidden argument `{}` needs a runtime service a raw AQL dispatch does not provide", a.value_kind))?;
            fields.push((a.offset, a.size, ArgSource::Hidden(h)));
            continue;
        }
        let p = &sig.params[param];
        check_arg(p, a).map_err(|why| format!("param `{}` (argument {param}, `{}` in the code object): {why}", p.name, a.name))?;
        fields.push((a.offset, a.size, ArgSource::Param(param)));
        param += 1;
    }
    if !k.kernarg_segment_align.is_power_of_two() {
        return Err(format!("kernarg alignment {} is not a power of two", k.kernarg_segment_align));
    }
    Ok(KernargLayout { size: k.kernarg_segment_size, align: k.kernarg_segment_align.max(16), fields })
}

fn check_arg(p: &ostinato::ParamSig, a: &ArgInfo) -> Result<(), String> {
    match p.kind {
        ParamKind::Buffer(access) => {
            if a.value_kind != "global_buffer" || a.size != 8 {
                return Err(format!("a {} buffer param, but the kernel takes a {}-byte `{}`", access.as_str(), a.size, a.value_kind));
            }
            if let Some(space) = a.address_space.as_deref().filter(|s| !matches!(*s, "global" | "generic" | "constant")) {
                return Err(format!("a buffer param, but the kernel's pointer is in the `{space}` address space"));
            }
            match (access, a.actual_access.as_deref()) {
                (Access::Read, Some(w @ ("write_only" | "read_write"))) => Err(format!("declared `read`, but the compiler found the kernel's access `{w}`")),
                (Access::Read, _) if a.address_space.as_deref() == Some("constant") => Ok(()),
                (Access::Write, Some("read_only")) => Err("declared `write`, but the compiler found the kernel only reads it".into()),
                (Access::ReadWrite | Access::Write, _) if a.address_space.as_deref() == Some("constant") => {
                    Err(format!("declared `{}`, but the kernel's pointer is to constant memory", access.as_str()))
                }
                _ => Ok(()),
            }
        }
        ParamKind::Scalar(ty) => {
            if a.value_kind != "by_value" || a.size as usize != ty.size() {
                return Err(format!("a {} scalar param ({} bytes), but the kernel takes a {}-byte `{}`", ty.as_str(), ty.size(), a.size, a.value_kind));
            }
            match scalar_of_type_name(&a.type_name) {
                Some(t) if t != ty => Err(format!("a {} scalar param, but the kernel's argument is a `{}`", ty.as_str(), a.type_name)),
                _ => Ok(()),
            }
        }
    }
}
