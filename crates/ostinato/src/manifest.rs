//! A kernel's build manifest: what was compiled or loaded, from what, by which compiler with which
//! options, what came out (hashed), what the device says it uses, and what the contract analysis read
//! from the code. Each backend fills one per kernel it binds; the record's BLAKE3 hash names the build
//! (a benchmark's provenance records it per arm). Printed by `ostinato kernels`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::contract::{Broader, CodeAccess, Observed, Seen};
use crate::graph::{KernelSig, ParamKind};

/// Bytes hashed: a source, an include, an artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hashed {
    /// What it is: a path, `builtin`, `ptx`, `cubin`, `spirv`.
    pub name: String,
    pub bytes: u64,
    /// BLAKE3, hex.
    pub blake3: String,
}

impl Hashed {
    pub fn of(name: impl Into<String>, bytes: &[u8]) -> Hashed {
        Hashed { name: name.into(), bytes: bytes.len() as u64, blake3: blake3::hash(bytes).to_hex().to_string() }
    }
}

/// The compiler of a build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compiler {
    /// `nvrtc`, `naga`.
    pub name: String,
    pub version: String,
    pub options: Vec<String>,
    /// The architecture compiled for (`sm_90`), where there is one.
    pub arch: Option<String>,
    /// The key of the compile cache's entry, where the build went through one.
    pub cache_key: Option<String>,
}

/// One buffer param's line of the manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParamRecord {
    pub param: String,
    /// The declared mode (`read`…) and how (`checked`, `vouched`, `inferred`).
    pub declared: String,
    pub decl: String,
    pub observed: Observed,
    /// The first instruction of each side the code was seen to make.
    pub read: Seen,
    pub write: Seen,
    /// The declaration is broader than the code.
    pub broader: bool,
}

/// A kernel's build manifest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelManifest {
    pub kernel: String,
    pub backend: String,
    pub entry: String,
    /// The source and what it includes (a compile's whole input).
    pub source: Vec<Hashed>,
    pub compiler: Option<Compiler>,
    /// What the build produced or what was loaded: PTX, cubin, SPIR-V.
    pub artifacts: Vec<Hashed>,
    /// What the device reports of the loaded kernel (registers, local bytes, static shared bytes, most
    /// threads per block), where it was loaded on one.
    pub resources: BTreeMap<String, i64>,
    pub access: Vec<ParamRecord>,
    /// Backend-specific findings: the pre-wait certificate, the fused-body verdict, the machine-code
    /// report.
    pub analysis: BTreeMap<String, serde_json::Value>,
    pub notes: Vec<String>,
}

impl KernelManifest {
    /// The skeleton for `sig`'s kernel on `backend`.
    pub fn new(sig: &KernelSig, backend: &str, entry: &str) -> KernelManifest {
        KernelManifest {
            kernel: sig.name.clone(),
            backend: backend.to_string(),
            entry: entry.to_string(),
            source: Vec::new(),
            compiler: None,
            artifacts: Vec::new(),
            resources: BTreeMap::new(),
            access: Vec::new(),
            analysis: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// Records the contract: each buffer param's declaration beside what `code` shows.
    pub fn set_access(&mut self, sig: &KernelSig, code: &CodeAccess, broader: &[Broader]) {
        self.access = sig
            .params
            .iter()
            .zip(&code.params)
            .filter_map(|(p, u)| match (&p.kind, u) {
                (ParamKind::Buffer(m), Some(u)) => Some(ParamRecord {
                    param: p.name.clone(),
                    declared: m.as_str().to_string(),
                    decl: p.decl.as_str().to_string(),
                    observed: u.observed(),
                    read: u.read.clone(),
                    write: u.write.clone(),
                    broader: broader.iter().any(|b| b.param == p.name),
                }),
                _ => None,
            })
            .collect();
    }

    /// The manifest's BLAKE3 hash (hex): of its JSON form, fields in declaration order and maps sorted,
    /// so equal builds hash equal everywhere.
    pub fn hash(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        blake3::hash(&json).to_hex().to_string()
    }

    /// One JSON object: the manifest and its hash.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let serde_json::Value::Object(m) = &mut v {
            m.insert("hash".into(), serde_json::Value::String(self.hash()));
        }
        v
    }

    /// A few lines for people.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "kernel `{}` ({}, entry `{}`) manifest {}", self.kernel, self.backend, self.entry, &self.hash()[..16]);
        for src in &self.source {
            let _ = writeln!(s, "  source {} ({} bytes, blake3 {})", src.name, src.bytes, &src.blake3[..16]);
        }
        if let Some(c) = &self.compiler {
            let _ = writeln!(
                s,
                "  compiler {} {} {}{}",
                c.name,
                c.version,
                c.options.join(" "),
                c.cache_key.as_ref().map(|k| format!(" (cache {k})")).unwrap_or_default()
            );
        }
        for a in &self.artifacts {
            let _ = writeln!(s, "  {} {} bytes, blake3 {}", a.name, a.bytes, &a.blake3[..16]);
        }
        if !self.resources.is_empty() {
            let r: Vec<String> = self.resources.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  resources: {}", r.join(", "));
        }
        for p in &self.access {
            let broader = if p.broader { " (declaration broader than the code)" } else { "" };
            let _ = writeln!(s, "  param {}: declared {} ({}), code {}{broader}", p.param, p.declared, p.decl, p.observed.as_str());
        }
        for (k, v) in &self.analysis {
            let _ = writeln!(s, "  {k}: {v}");
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        s
    }
}
