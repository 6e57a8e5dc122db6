//! The kernel contract on Vulkan: what a WGSL or SPIR-V kernel's code does to each storage buffer, read
//! from naga's module. naga's validator already knows, per entry point, how it uses each global
//! variable (read, write, atomic: `GlobalUse`, its callees' uses included); binding `i` of group 0 is
//! the signature's `i`-th buffer param (the backend's convention, `kernel.rs`). The first load, store or
//! atomic through each binding is found in the entry point's body (and its callees') with its source
//! line, for the message that refuses a declaration the code contradicts.

use std::collections::HashMap;

use naga::valid::GlobalUse;
use naga::{Expression, Function, Handle, Module, Statement};
use ostinato::contract::{CodeAccess, Evidence, ParamUse, Seen};
use ostinato::{KernelRef, KernelSig, ParamKind};

/// A kernel's module, read by naga.
pub struct Code {
    pub module: Module,
    /// The text spans refer to (WGSL), for line numbers.
    pub source: Option<String>,
    /// The entry point.
    pub entry: String,
    /// What the code is, for messages: `kernels/wgsl/mix.wgsl (WGSL)`.
    pub name: String,
}

/// Reads the module `reference` names for `sig` (a built-in WGSL twin, WGSL the reference carries, a
/// `.wgsl` or a `.spv` file).
pub fn read_reference(sig: &KernelSig, reference: &KernelRef) -> Result<Code, String> {
    match reference.builtin_name() {
        Some(b) => {
            let name = if b.is_empty() { sig.name.as_str() } else { b };
            let src = crate::shaders::wgsl(name).ok_or_else(|| format!("no WGSL version of kernel `{name}`"))?;
            wgsl(&src, "main", &format!("builtin:{name} (WGSL)"))
        }
        None if reference.code.is_some() => wgsl(code_wgsl(reference)?, reference.entry_for(&sig.name), &format!("{} (WGSL)", reference.source)),
        None => {
            let path = reference.path();
            let entry = reference.entry_for(&sig.name).to_string();
            match path.extension().and_then(|e| e.to_str()) {
                Some("wgsl") => {
                    let src = ostinato::capped_read::read_text(&path, ostinato::capped_read::KERNEL_FILE).map_err(|e| e.to_string())?;
                    wgsl(&src, &entry, &format!("{} (WGSL)", path.display()))
                }
                Some("spv") => {
                    let bytes = ostinato::capped_read::read_bytes(&path, ostinato::capped_read::KERNEL_FILE).map_err(|e| e.to_string())?;
                    spirv(&bytes, &entry, &format!("{} (SPIR-V)", path.display()))
                }
                _ => Err(format!("{}: a Vulkan kernel is a .wgsl or .spv file", path.display())),
            }
        }
    }
}

/// The WGSL a reference carries in memory ([`KernelRef::code`]); its `source` names it and must end in
/// `.wgsl` (the Vulkan backend takes code in memory as WGSL only).
pub(crate) fn code_wgsl(reference: &KernelRef) -> Result<&str, String> {
    match &reference.code {
        Some(code) if reference.source.ends_with(".wgsl") => Ok(code),
        Some(_) => Err(format!("`{}`: code given in a kernel reference must be WGSL, named `*.wgsl`", reference.source)),
        None => Err(format!("`{}` carries no code", reference.source)),
    }
}

/// A WGSL module.
pub fn wgsl(source: &str, entry: &str, name: &str) -> Result<Code, String> {
    let module = crate::wgsl::parse(source)?;
    Ok(Code { module, source: Some(source.to_string()), entry: entry.to_string(), name: name.to_string() })
}

/// A SPIR-V module.
pub fn spirv(bytes: &[u8], entry: &str, name: &str) -> Result<Code, String> {
    let module = naga::front::spv::parse_u8_slice(bytes, &naga::front::spv::Options::default()).map_err(|e| format!("{name}: naga cannot read it: {e}"))?;
    Ok(Code { module, source: None, entry: entry.to_string(), name: name.to_string() })
}

/// The access each param of `sig` has in `code`: storage binding `i` of group 0 is the `i`-th buffer
/// param. A module naga cannot validate, an entry point it lacks, or storage bindings other than
/// binding refuses (another group, a binding past the signature's buffers) is an error.
pub fn code_access(sig: &KernelSig, code: &Code) -> Result<CodeAccess, String> {
    // A SPIR-V kernel takes its scalars in a storage buffer at the binding after its buffers.
    crate::kernel::check_bindings(sig, &code.module, crate::kernel::n_buffers(sig), code.source.is_none()).map_err(|e| e.to_string())?;
    let caps = naga::valid::Capabilities::all();
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&code.module).map_err(|e| format!("{}: {e:?}", code.name))?;
    let (ep_index, ep) = code.module.entry_points.iter().enumerate().find(|(_, e)| e.name == code.entry).ok_or_else(|| {
        let names: Vec<&str> = code.module.entry_points.iter().map(|e| e.name.as_str()).collect();
        format!("{}: no entry point `{}` (it has: {})", code.name, code.entry, names.join(", "))
    })?;
    let uses = info.get_entry_point(ep_index);
    // Binding → global variable, for storage buffers of group 0.
    let by_binding: HashMap<u32, Handle<naga::GlobalVariable>> = code
        .module
        .global_variables
        .iter()
        .filter(|(_, v)| matches!(v.space, naga::AddressSpace::Storage { .. }))
        .filter_map(|(h, v)| v.binding.as_ref().filter(|b| b.group == 0).map(|b| (b.binding, h)))
        .collect();
    let mut first = Finder { module: &code.module, code, found: HashMap::new(), visited: Vec::new() };
    first.function(&ep.function);
    let mut params = Vec::with_capacity(sig.params.len());
    let mut binding = 0u32;
    for p in &sig.params {
        if !matches!(p.kind, ParamKind::Buffer(_)) {
            params.push(None);
            continue;
        }
        let mut u = ParamUse::default();
        if let Some(&g) = by_binding.get(&binding) {
            let used = uses[g];
            let fallback = || Evidence { instruction: format!("the entry point's use of binding {binding}"), at: code.name.clone() };
            let ev = |kind: usize| first.found.get(&(g, kind)).cloned().unwrap_or_else(fallback);
            if used.intersects(GlobalUse::READ | GlobalUse::ATOMIC) {
                u.read = Seen::Yes(ev(0));
            }
            if used.intersects(GlobalUse::WRITE | GlobalUse::ATOMIC) {
                u.write = Seen::Yes(ev(1));
            }
        }
        params.push(Some(u));
        binding += 1;
    }
    Ok(CodeAccess { code: code.name.clone(), params, undeclarable: Vec::new() })
}

/// The first read (0) and write (1) of each global in the entry point's body and its callees.
struct Finder<'a> {
    module: &'a Module,
    code: &'a Code,
    found: HashMap<(Handle<naga::GlobalVariable>, usize), Evidence>,
    visited: Vec<Handle<Function>>,
}

impl Finder<'_> {
    fn at(&self, span: naga::Span) -> String {
        match (&self.code.source, span.is_defined()) {
            (Some(src), true) => format!("{}:{}", self.code.name.split(" (").next().unwrap_or(&self.code.name), span.location(src).line_number),
            _ => self.code.name.clone(),
        }
    }
    fn note(&mut self, f: &Function, pointer: Handle<Expression>, kind: usize, what: &str, span: naga::Span) {
        if let Some(g) = root(f, pointer) {
            let ev = Evidence { instruction: format!("{what} of `{}`", self.module.global_variables[g].name.as_deref().unwrap_or("?")), at: self.at(span) };
            self.found.entry((g, kind)).or_insert(ev);
        }
    }
    fn function(&mut self, f: &Function) {
        for (h, e) in f.expressions.iter() {
            if let Expression::Load { pointer } = e {
                self.note(f, *pointer, 0, "a load", f.expressions.get_span(h));
            }
        }
        self.block(f, &f.body);
    }
    fn block(&mut self, f: &Function, block: &naga::Block) {
        for (s, span) in block.span_iter() {
            match s {
                Statement::Store { pointer, .. } => self.note(f, *pointer, 1, "a store", *span),
                Statement::Atomic { pointer, .. } => {
                    self.note(f, *pointer, 0, "an atomic", *span);
                    self.note(f, *pointer, 1, "an atomic", *span);
                }
                Statement::Block(b) => self.block(f, b),
                Statement::If { accept, reject, .. } => {
                    self.block(f, accept);
                    self.block(f, reject);
                }
                Statement::Loop { body, continuing, .. } => {
                    self.block(f, body);
                    self.block(f, continuing);
                }
                Statement::Switch { cases, .. } => {
                    for c in cases {
                        self.block(f, &c.body);
                    }
                }
                Statement::Call { function, .. } if !self.visited.contains(function) => {
                    self.visited.push(*function);
                    let callee = &self.module.functions[*function];
                    self.function(callee);
                }
                _ => {}
            }
        }
    }
}

/// The kernel contract at bind time: `sig`'s declared access checked against the code `reference`
/// names. Code naga cannot read counts as unknown (refused unless the params are declared vouched).
pub fn verify(sig: &KernelSig, reference: &KernelRef) -> Result<Vec<ostinato::contract::Broader>, crate::VkError> {
    let access = match read_reference(sig, reference) {
        Ok(code) => {
            // Bindings outside the signature's layout are refused as binding refuses them, by name.
            crate::kernel::check_bindings(sig, &code.module, crate::kernel::n_buffers(sig), code.source.is_none())?;
            code_access(sig, &code)
        }
        Err(why) => Err(why),
    };
    let access = match access {
        Ok(a) => a,
        Err(why) => {
            let ev = Evidence { instruction: format!("the code could not be read: {why}"), at: reference.source.clone() };
            let params = sig
                .params
                .iter()
                .map(|p| matches!(p.kind, ParamKind::Buffer(_)).then(|| ParamUse { read: Seen::Unknown(ev.clone()), write: Seen::Unknown(ev.clone()) }))
                .collect();
            CodeAccess { code: reference.source.clone(), params, undeclarable: Vec::new() }
        }
    };
    Ok(ostinato::contract::verify(sig, &access)?)
}

/// The build manifest of the kernel `reference` names: its source, naga's version, the SPIR-V naga
/// writes of it (scalars as the shader declares them) and the access its code shows, checked against
/// `sig`.
pub fn manifest(sig: &KernelSig, reference: &KernelRef) -> Result<ostinato::manifest::KernelManifest, String> {
    use ostinato::manifest::{Compiler, Hashed, KernelManifest};
    let code = read_reference(sig, reference)?;
    let access = code_access(sig, &code)?;
    let broader = ostinato::contract::verify(sig, &access).map_err(|e| e.to_string())?;
    let mut m = KernelManifest::new(sig, "vulkan", &code.entry);
    match &code.source {
        Some(src) => m.source.push(Hashed::of(&code.name, src.as_bytes())),
        None => {
            let bytes = ostinato::capped_read::read_bytes(&reference.path(), ostinato::capped_read::KERNEL_FILE).map_err(|e| e.to_string())?;
            m.source.push(Hashed::of(&code.name, &bytes))
        }
    }
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    m.compiler = Some(Compiler { name: "naga".into(), version: "28".into(), options: vec!["spv 1.3".into()], arch: None, cache_key: None });
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&code.module)
        .map_err(|e| format!("{e:?}"))?;
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: code.entry.clone() };
    let words = naga::back::spv::write_vec(&code.module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    m.artifacts.push(Hashed::of("spirv", &bytes));
    m.set_access(sig, &access, &broader);
    if let Some(ep) = code.module.entry_points.iter().find(|e| e.name == code.entry) {
        m.resources.insert("workgroup_size".into(), ep.workgroup_size.iter().map(|&d| d as i64).product());
    }
    m.notes.push("resources: the workgroup's threads (a pipeline's register use is the driver's, not reported by Vulkan)".into());
    Ok(m)
}

/// The global variable a pointer expression is into, through accesses.
pub(crate) fn root(f: &Function, mut e: Handle<Expression>) -> Option<Handle<naga::GlobalVariable>> {
    loop {
        match &f.expressions[e] {
            Expression::GlobalVariable(g) => return Some(*g),
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => e = *base,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::Access;

    fn observed(sig: &KernelSig, src: &str) -> Vec<&'static str> {
        let code = wgsl(src, "main", "k.wgsl (WGSL)").unwrap();
        code_access(sig, &code).unwrap().params.iter().flatten().map(|u| u.observed().as_str()).collect()
    }

    #[test]
    fn builtin_wgsl_kernels_show_their_declared_access() {
        let sig = ostinato_host::builtins::mix_sig();
        let code = read_reference(&sig, &KernelRef::builtin("mix")).unwrap();
        let access = code_access(&sig, &code).unwrap();
        let modes: Vec<_> = access.params.iter().flatten().map(|u| u.observed().as_str()).collect();
        assert_eq!(modes, ["read_write", "read"]);
        assert_eq!(ostinato::contract::verify(&sig, &access), Ok(vec![]));
    }

    #[test]
    fn every_builtin_wgsl_twin_passes_its_declared_signature() {
        let mut checked = 0;
        for k in ostinato_host::builtins::all() {
            let Ok(code) = read_reference(&k.sig, &KernelRef::builtin(&k.sig.name)) else { continue };
            let access = code_access(&k.sig, &code).unwrap();
            // Broader declarations are allowed (kv_store declares its cache read_write; the code only writes).
            assert!(ostinato::contract::verify(&k.sig, &access).is_ok(), "{}: {access:?}", k.sig.name);
            checked += 1;
        }
        assert!(checked >= 9, "only {checked} WGSL twins found");
    }

    const K: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> inp: array<u32>;
@group(0) @binding(2) var<storage, read_write> counter: atomic<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = inp[id.x];
    inp[id.x] = v + 1u;
    out[id.x] = v;
    atomicAdd(&counter, 1u);
}
"#;

    #[test]
    fn a_declaration_the_shader_contradicts_is_refused_with_its_line() {
        let sig = KernelSig::new("k").buffer("out", Access::Write).buffer("inp", Access::Read).buffer("counter", Access::ReadWrite);
        assert_eq!(observed(&sig, K), ["write", "read_write", "read_write"]);
        let code = wgsl(K, "main", "k.wgsl (WGSL)").unwrap();
        let e = ostinato::contract::verify(&sig, &code_access(&sig, &code).unwrap()).unwrap_err().to_string();
        assert!(e.contains("param `inp`") && e.contains("writes it") && e.contains("a store of `inp`") && e.contains("k.wgsl:8"), "{e}");
        // Declared read_write where it only writes: broader, allowed.
        let broad = KernelSig::new("k").buffer("out", Access::ReadWrite).buffer("inp", Access::ReadWrite).buffer("counter", Access::ReadWrite);
        let b = ostinato::contract::verify(&broad, &code_access(&broad, &code).unwrap()).unwrap();
        assert_eq!(b.iter().map(|b| b.param.as_str()).collect::<Vec<_>>(), ["out"]);
    }

    #[test]
    fn spirv_is_read_through_naga_too() {
        let sig = KernelSig::new("k").buffer("out", Access::Write).buffer("inp", Access::ReadWrite).buffer("counter", Access::ReadWrite);
        let code = wgsl(K, "main", "k").unwrap();
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty()).validate(&code.module).unwrap();
        let words = naga::back::spv::write_vec(&code.module, &info, &naga::back::spv::Options::default(), None).unwrap();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let spv = spirv(&bytes, "main", "k.spv (SPIR-V)").unwrap();
        let modes: Vec<_> = code_access(&sig, &spv).unwrap().params.iter().flatten().map(|u| u.observed().as_str()).collect();
        assert_eq!(modes, ["write", "read_write", "read_write"]);
    }
}
