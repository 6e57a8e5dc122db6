//! The kernel contract: what a kernel's code does to each buffer param, and the rule that checks a
//! declaration against it. Backends read their code (CUDA: PTX, SASS; Vulkan: naga's module; the host:
//! its built-ins' own specifications) into a [`CodeAccess`]; this module decides, the same way for
//! every backend and every shell, whether a declaration holds ([`verify`]) and what an `infer`
//! declaration becomes ([`infer`]). docs/contract.md explains the rules.

use crate::graph::{Access, AccessDecl, KernelSig, ParamKind};

/// Where in a kernel's code an access was seen: the instruction (PTX text, a naga statement) and its
/// position (`kernel.cu:12`, `PTX line 345`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Evidence {
    pub instruction: String,
    pub at: String,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` ({})", self.instruction, self.at)
    }
}

/// Whether the code reads (or writes) a param's buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "seen", rename_all = "snake_case")]
pub enum Seen {
    /// Never.
    #[default]
    No,
    /// Yes, first at this instruction.
    Yes(Evidence),
    /// The analysis cannot tell: an access through an address of unknown origin (a pointer read from
    /// memory), a call, a texture or tensor map, or code the analysis cannot read.
    Unknown(Evidence),
}

impl Seen {
    /// Keeps the strongest finding: unknown over yes over no (the first evidence of each).
    pub fn add(&mut self, other: Seen) {
        let rank = |s: &Seen| match s {
            Seen::No => 0,
            Seen::Yes(_) => 1,
            Seen::Unknown(_) => 2,
        };
        if rank(&other) > rank(self) {
            *self = other;
        }
    }
    pub fn is_no(&self) -> bool {
        matches!(self, Seen::No)
    }
}

/// The observed access of one buffer param.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ParamUse {
    pub read: Seen,
    pub write: Seen,
}

/// The access mode a param's code shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Observed {
    None,
    Read,
    Write,
    ReadWrite,
    Unknown,
}

impl Observed {
    pub fn as_str(self) -> &'static str {
        match self {
            Observed::None => "none",
            Observed::Read => "read",
            Observed::Write => "write",
            Observed::ReadWrite => "read_write",
            Observed::Unknown => "unknown",
        }
    }
}

impl ParamUse {
    pub fn observed(&self) -> Observed {
        match (&self.read, &self.write) {
            (Seen::Unknown(_), _) | (_, Seen::Unknown(_)) => Observed::Unknown,
            (Seen::No, Seen::No) => Observed::None,
            (Seen::Yes(_), Seen::No) => Observed::Read,
            (Seen::No, Seen::Yes(_)) => Observed::Write,
            (Seen::Yes(_), Seen::Yes(_)) => Observed::ReadWrite,
        }
    }
}

/// What one implementation's code does, param by param.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CodeAccess {
    /// The code, for messages: `cuda: kernels/user_mix.cu (PTX)`.
    pub code: String,
    /// One entry per param of the signature; `None` for scalars.
    pub params: Vec<Option<ParamUse>>,
    /// Accesses no param declaration can cover (a write to a module-scope `__device__` variable: state
    /// every launch of the module shares); a kernel with any is refused.
    pub undeclarable: Vec<Evidence>,
}

/// A declaration the code contradicts, or one the analysis cannot check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("kernel `{kernel}` declares param `{param}` {declared}, but its code ({code}) {verb} it: {evidence}")]
    Contradicted { kernel: String, param: String, declared: &'static str, code: String, verb: &'static str, evidence: Box<Evidence> },
    #[error(
        "kernel `{kernel}` param `{param}`: its code ({code}) may {verb} memory the analysis cannot attribute: {evidence}; \
         declare the param `vouched` if you know the access stays within what is declared"
    )]
    Unknown { kernel: String, param: String, code: String, verb: &'static str, evidence: Box<Evidence> },
    #[error(
        "kernel `{kernel}`: its code ({code}) writes memory outside its params: {evidence}; \
         state every launch shares cannot be ordered by a declaration (pass it as a buffer param)"
    )]
    Undeclarable { kernel: String, code: String, evidence: Box<Evidence> },
    #[error("kernel `{kernel}` param `{param}` is declared `infer`, but its code ({code}) may {verb} memory the analysis cannot attribute: {evidence}; declare its access")]
    CannotInfer { kernel: String, param: String, code: String, verb: &'static str, evidence: Box<Evidence> },
    #[error("kernel `{kernel}` param `{param}` is declared `infer`, but no implementation's code could be read here ({why})")]
    NoCode { kernel: String, param: String, why: String },
    #[error("kernel `{kernel}`: the code reports {got} params, the signature has {want}")]
    Shape { kernel: String, want: usize, got: usize },
}

impl ContractError {
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Bind
    }
    /// The kernel it is about.
    pub fn kernel(&self) -> &str {
        match self {
            ContractError::Contradicted { kernel, .. }
            | ContractError::Unknown { kernel, .. }
            | ContractError::Undeclarable { kernel, .. }
            | ContractError::CannotInfer { kernel, .. }
            | ContractError::NoCode { kernel, .. }
            | ContractError::Shape { kernel, .. } => kernel,
        }
    }
}

/// A declaration broader than the code (allowed: it orders more than needed), for `plan --explain`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Broader {
    pub param: String,
    pub declared: &'static str,
    pub observed: Observed,
}

/// Checks `sig`'s declarations against `code`: a declared `read` the code writes, or a declared `write`
/// the code reads, is refused naming the instruction; an access the analysis cannot attribute fails
/// closed unless the param is declared vouched; a write outside every param is refused. Returns the
/// params whose declaration is broader than the code.
pub fn verify(sig: &KernelSig, code: &CodeAccess) -> Result<Vec<Broader>, ContractError> {
    if code.params.len() != sig.params.len() {
        return Err(ContractError::Shape { kernel: sig.name.clone(), want: sig.params.len(), got: code.params.len() });
    }
    if let Some(e) = code.undeclarable.first() {
        return Err(ContractError::Undeclarable { kernel: sig.name.clone(), code: code.code.clone(), evidence: Box::new(e.clone()) });
    }
    let mut broader = Vec::new();
    for (p, seen) in sig.params.iter().zip(&code.params) {
        let (ParamKind::Buffer(mode), Some(seen)) = (&p.kind, seen) else { continue };
        let vouched = p.decl == AccessDecl::Vouched;
        for (side, allowed, verb) in [(&seen.write, mode.writes(), "writes"), (&seen.read, mode.reads(), "reads")] {
            match side {
                Seen::Yes(e) if !allowed => {
                    return Err(ContractError::Contradicted {
                        kernel: sig.name.clone(),
                        param: p.name.clone(),
                        declared: mode.as_str(),
                        code: code.code.clone(),
                        verb,
                        evidence: Box::new(e.clone()),
                    })
                }
                Seen::Unknown(e) if !allowed && !vouched => {
                    return Err(ContractError::Unknown {
                        kernel: sig.name.clone(),
                        param: p.name.clone(),
                        code: code.code.clone(),
                        verb: if verb == "writes" { "write" } else { "read" },
                        evidence: Box::new(e.clone()),
                    })
                }
                _ => {}
            }
        }
        let observed = seen.observed();
        let exact = match observed {
            Observed::Read => *mode == Access::Read,
            Observed::Write => *mode == Access::Write,
            Observed::ReadWrite | Observed::Unknown => true,
            Observed::None => false,
        };
        if !exact {
            broader.push(Broader { param: p.name.clone(), declared: mode.as_str(), observed });
        }
    }
    Ok(broader)
}

/// The mode each `infer` param of `sig` takes from `codes` (every implementation read here): what any
/// of them reads or writes; a param none touches becomes `read` (the weakest mode: it orders after
/// writers, never less than needed). Unknown accesses cannot be inferred. `(param index, mode)`.
pub fn infer(sig: &KernelSig, codes: &[CodeAccess], unread: &str) -> Result<Vec<(usize, Access)>, ContractError> {
    let mut out = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        if p.decl != AccessDecl::Infer {
            continue;
        }
        if codes.is_empty() {
            return Err(ContractError::NoCode { kernel: sig.name.clone(), param: p.name.clone(), why: unread.to_string() });
        }
        let (mut reads, mut writes) = (false, false);
        for code in codes {
            if code.params.len() != sig.params.len() {
                return Err(ContractError::Shape { kernel: sig.name.clone(), want: sig.params.len(), got: code.params.len() });
            }
            let Some(seen) = &code.params[i] else { continue };
            for (side, verb) in [(&seen.read, "read"), (&seen.write, "write")] {
                if let Seen::Unknown(e) = side {
                    return Err(ContractError::CannotInfer {
                        kernel: sig.name.clone(),
                        param: p.name.clone(),
                        code: code.code.clone(),
                        verb,
                        evidence: Box::new(e.clone()),
                    });
                }
            }
            reads |= !seen.read.is_no();
            writes |= !seen.write.is_no();
        }
        out.push((
            i,
            if writes && reads {
                Access::ReadWrite
            } else if writes {
                Access::Write
            } else {
                Access::Read
            },
        ));
    }
    Ok(out)
}

/// The [`CodeAccess`] of an implementation whose signature is its own specification (the host's
/// built-ins): exactly the declared modes.
pub fn specified(sig: &KernelSig, code: &str) -> CodeAccess {
    let at = |p: &str| Evidence { instruction: format!("the built-in's declared access of `{p}`"), at: code.to_string() };
    let params = sig
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Buffer(m) => Some(ParamUse {
                read: if m.reads() { Seen::Yes(at(&p.name)) } else { Seen::No },
                write: if m.writes() { Seen::Yes(at(&p.name)) } else { Seen::No },
            }),
            ParamKind::Scalar(_) => None,
        })
        .collect();
    CodeAccess { code: code.to_string(), params, undeclarable: Vec::new() }
}
