//! Kernel signatures: each param's kind (a buffer with its access, or a scalar with its type) and
//! how its access is declared, and the params a kernel's author says may alias.

use crate::error::GraphError;

/// How a kernel param touches its buffer extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read_write",
        }
    }
    pub fn parse(s: &str) -> Option<Access> {
        match s {
            "read" => Some(Access::Read),
            "write" => Some(Access::Write),
            "read_write" => Some(Access::ReadWrite),
            _ => None,
        }
    }
}

/// The type of a by-value kernel param; fixes its byte size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalarType {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl ScalarType {
    pub fn size(self) -> usize {
        match self {
            ScalarType::U32 | ScalarType::I32 | ScalarType::F32 => 4,
            ScalarType::U64 | ScalarType::I64 | ScalarType::F64 => 8,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ScalarType::U32 => "u32",
            ScalarType::I32 => "i32",
            ScalarType::F32 => "f32",
            ScalarType::U64 => "u64",
            ScalarType::I64 => "i64",
            ScalarType::F64 => "f64",
        }
    }
    pub fn parse(s: &str) -> Option<ScalarType> {
        Some(match s {
            "u32" => ScalarType::U32,
            "i32" => ScalarType::I32,
            "f32" => ScalarType::F32,
            "u64" => ScalarType::U64,
            "i64" => ScalarType::I64,
            "f64" => ScalarType::F64,
            _ => return None,
        })
    }
}

/// One param of a kernel signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A device pointer to a buffer extent, with the mode the kernel touches it in.
    Buffer(Access),
    /// A value passed by copy.
    Scalar(ScalarType),
}

/// How a buffer param's access mode is established (the kernel contract, docs/contract.md). Every
/// declared mode is checked against the kernel's code when it is bound; the declaration says what may
/// stand where the analysis cannot tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AccessDecl {
    /// Declared, and checked: an access the analysis cannot attribute fails closed.
    #[default]
    Checked,
    /// Declared, and the author vouches for it where the analysis cannot tell (a pointer read from
    /// memory, a texture, machine code): an access the code is seen to make still must fit the mode.
    Vouched,
    /// To be read from the code before planning ([`crate::Graph::resolve_access`]); until then the mode is a
    /// placeholder and [`crate::Plan::compile`] refuses the graph.
    Infer,
    /// Read from the code (it was `Infer`).
    Inferred,
}

impl AccessDecl {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessDecl::Checked => "checked",
            AccessDecl::Vouched => "vouched",
            AccessDecl::Infer => "infer",
            AccessDecl::Inferred => "inferred",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamSig {
    pub name: String,
    pub kind: ParamKind,
    /// How a buffer param's mode is established (scalars: `Checked`).
    pub decl: AccessDecl,
}

/// A kernel's name and ordered params. Implementations are bound per backend at instantiation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSig {
    pub name: String,
    pub params: Vec<ParamSig>,
    /// Pairs of buffer params (indices, the smaller first) that one launch may bind to overlapping
    /// bytes although one of them is written: the kernel's author declares that its code orders their
    /// accesses itself. Any other overlap with a written param is refused when the launch is recorded
    /// (the threads of one launch run in no order).
    pub aliasing: Vec<(usize, usize)>,
}

impl KernelSig {
    pub fn new(name: impl Into<String>) -> Self {
        KernelSig { name: name.into(), params: Vec::new(), aliasing: Vec::new() }
    }
    /// Declares that params `a` and `b` may alias in one launch (see [`KernelSig::aliasing`]); a name
    /// that is no param of the signature is an error naming it.
    pub fn may_alias(mut self, a: &str, b: &str) -> Result<Self, GraphError> {
        let index =
            |p: &str| self.param_index(p).ok_or_else(|| GraphError::BadAlias { kernel: self.name.clone(), reason: format!("`{p}` is not one of its params") });
        let (i, j) = (index(a)?, index(b)?);
        if let Some(p) = [i, j].into_iter().find(|&p| !matches!(self.params[p].kind, ParamKind::Buffer(_))) {
            let reason = format!("`{}`, a scalar param (only buffer params have bytes that can overlap)", self.params[p].name);
            return Err(GraphError::BadAlias { kernel: self.name.clone(), reason });
        }
        if i == j {
            return Err(GraphError::BadAlias { kernel: self.name.clone(), reason: format!("`{a}` with itself") });
        }
        let pair = (i.min(j), i.max(j));
        if !self.aliasing.contains(&pair) {
            self.aliasing.push(pair);
        }
        Ok(self)
    }
    /// Adds a buffer param with its access mode (checked against the code when bound).
    pub fn buffer(mut self, name: impl Into<String>, access: Access) -> Self {
        self.params.push(ParamSig { name: name.into(), kind: ParamKind::Buffer(access), decl: AccessDecl::Checked });
        self
    }
    /// Adds a buffer param whose access mode the author vouches for where the analysis of the code
    /// cannot tell ([`AccessDecl::Vouched`]).
    pub fn buffer_vouched(mut self, name: impl Into<String>, access: Access) -> Self {
        self.params.push(ParamSig { name: name.into(), kind: ParamKind::Buffer(access), decl: AccessDecl::Vouched });
        self
    }
    /// Adds a buffer param whose access mode is read from the kernel's code before planning
    /// ([`AccessDecl::Infer`]; the runtime resolves it). Its extent is still declared by each node.
    pub fn buffer_infer(mut self, name: impl Into<String>) -> Self {
        self.params.push(ParamSig { name: name.into(), kind: ParamKind::Buffer(Access::ReadWrite), decl: AccessDecl::Infer });
        self
    }
    /// Adds a by-value param.
    pub fn scalar(mut self, name: impl Into<String>, ty: ScalarType) -> Self {
        self.params.push(ParamSig { name: name.into(), kind: ParamKind::Scalar(ty), decl: AccessDecl::Checked });
        self
    }
    /// The first param whose mode is still to be inferred.
    pub fn pending(&self) -> Option<&ParamSig> {
        self.params.iter().find(|p| p.decl == AccessDecl::Infer)
    }
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }
}
