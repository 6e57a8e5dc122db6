//! The access each buffer param of an entry really has, read from its whole body: every load, store,
//! atomic, reduction and copy, attributed to params by the taint of its address ([`super::taint`]).
//!
//! - an address derived from buffer params (offset by scalars, indices, even loaded ones) accesses
//!   those params' buffers;
//! - shared, local, param and constant memory is the kernel's own;
//! - an address of unknown origin (a pointer read from memory, a texture, a surface, a tensor map, or
//!   a call) may be any buffer: every buffer param's read (or write) side becomes *unknown*;
//! - a write to a module-scope `.global` variable is state every launch of the module shares:
//!   reported as undeclarable.
//!
//! Prefetches are hints: they read no value and are not accesses.

use std::collections::BTreeSet;

use ostinato::contract::{CodeAccess, Evidence, ParamUse, Seen};

use super::memory::{memory_ops, AddrSpace, Role};
use super::parse::{Entry, Instr, ModuleInfo};
use super::taint::{Flow, Target};

/// Functions a kernel may call that touch none of its buffers (the device runtime's printf and assert).
pub const HARMLESS_CALLS: &[&str] = &["vprintf", "__assertfail"];

/// Where an instruction is: `file.cu:12` where `.loc` gives it, and always its PTX line (`kernel.ptx:40`
/// for a PTX file, `line 40 of the PTX of kernel.cu` for compiled CUDA C).
pub fn evidence(module: &ModuleInfo, source: &str, ins: &Instr) -> Evidence {
    let ptx_at = if source.ends_with(".ptx") { format!("{source}:{}", ins.line) } else { format!("line {} of the PTX of {source}", ins.line) };
    let at = match module.source_line(ins.loc) {
        Some(src) => format!("{src}, {ptx_at}"),
        None => ptx_at,
    };
    Evidence { instruction: ins.text.clone(), at }
}

/// The per-param findings of one entry.
#[derive(Clone, Debug, Default)]
pub struct EntryAccess {
    /// One per param of the entry.
    pub params: Vec<ParamUse>,
    /// Writes to module `.global` variables.
    pub module_writes: Vec<Evidence>,
    /// Params read through the non-coherent path (`.nc`, `ldu`, texture, surface), with the first
    /// instruction; `unknown_noncoherent` holds such a read whose address the analysis cannot attribute.
    pub noncoherent: Vec<(usize, Evidence)>,
    pub unknown_noncoherent: Option<Evidence>,
    /// Params reached by an access other than a plain weak load or store (an atomic, a reduction, a
    /// cache or eviction qualifier, a memory-model qualifier, a bulk copy), with the first instruction.
    pub unplain: Vec<(usize, Evidence)>,
    /// The first access of device memory (or call) whose address the analysis cannot attribute to a
    /// param: it may touch any buffer.
    pub unattributed: Option<Evidence>,
}

/// The qualifiers a plain weak `ld` / `st` may carry: its state space (global or none), `weak`, a
/// vector width and a type. Anything else (`.nc`, `.volatile`, `.relaxed`, `.acquire`, `.release`,
/// `.ca`, `.cg`, `.cs`, `.lu`, `.cv`, `.wb`, `.wt`, `.L1::…`, `.L2::…`, `.mmio`, `.async`) makes it not plain.
const PLAIN_QUALIFIERS: &[&str] = &[
    "global", "weak", "v2", "v4", "v8", "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16", "f16x2", "bf16",
    "bf16x2", "f32", "f64",
];

/// Whether `ins` is a plain weak load or store of global or generic memory: what C++ compiles a
/// dereference to, and what reads and writes the same bytes whatever memory a generic address names.
pub fn is_plain_access(ins: &Instr) -> bool {
    matches!(ins.head(), "ld" | "st") && ins.op.split('.').skip(1).all(|q| PLAIN_QUALIFIERS.contains(&q))
}

impl EntryAccess {
    /// The access as the core's contract sees it: params that are buffers (`is_buffer`) only.
    pub fn code_access(&self, code: &str, is_buffer: impl Fn(usize) -> bool) -> CodeAccess {
        let params = self.params.iter().enumerate().map(|(i, u)| is_buffer(i).then(|| u.clone())).collect();
        CodeAccess { code: code.to_string(), params, undeclarable: self.module_writes.clone() }
    }
}

/// Reads every access of `entry`. `is_buffer(i)`: param `i` is a pointer to a buffer (scalars only
/// offset addresses: an address derived from scalars alone is of unknown origin). `source` names the
/// module in evidence.
pub fn entry_access(module: &ModuleInfo, entry: &Entry, source: &str, is_buffer: &dyn Fn(usize) -> bool) -> EntryAccess {
    let flow = Flow::run(entry, module, |_| true);
    let n = entry.params.len();
    let mut out = EntryAccess { params: vec![ParamUse::default(); n], ..EntryAccess::default() };
    let buffers: Vec<usize> = (0..n).filter(|&i| is_buffer(i)).collect();
    let mut noncoherent_seen: BTreeSet<usize> = BTreeSet::new();
    for ins in entry.instrs() {
        let ev = || evidence(module, source, ins);
        let ops = match memory_ops(ins) {
            Some(ops) => ops,
            None if ins.head() == "call" && ins.operands.iter().any(|o| HARMLESS_CALLS.contains(&o.as_str())) => continue,
            // A call or an indirect branch: anything may happen.
            None => {
                out.unattributed.get_or_insert_with(ev);
                for &b in &buffers {
                    out.params[b].read.add(Seen::Unknown(ev()));
                    out.params[b].write.add(Seen::Unknown(ev()));
                }
                continue;
            }
        };
        for m in ops {
            if m.role == Role::Prefetch || matches!(m.space, AddrSpace::Private | AddrSpace::Const | AddrSpace::Param) {
                continue;
            }
            let target = match flow.target(&ins.operands[m.operand], m.space) {
                Target::Params(ps) => {
                    let ps: Vec<usize> = ps.into_iter().filter(|p| is_buffer(*p)).collect();
                    if ps.is_empty() {
                        Target::Unknown
                    } else {
                        Target::Params(ps.into_iter().collect())
                    }
                }
                t => t,
            };
            match target {
                Target::Private => {}
                Target::ModuleVars(_) if m.role.writes() => out.module_writes.push(ev()),
                Target::ModuleVars(_) => {}
                Target::Params(ps) => {
                    let plain = is_plain_access(ins);
                    for p in ps {
                        if !plain && !out.unplain.iter().any(|(q, _)| *q == p) {
                            out.unplain.push((p, ev()));
                        }
                        if m.role.reads() {
                            out.params[p].read.add(Seen::Yes(ev()));
                        }
                        if m.role.writes() {
                            out.params[p].write.add(Seen::Yes(ev()));
                        }
                        if m.noncoherent && noncoherent_seen.insert(p) {
                            out.noncoherent.push((p, ev()));
                        }
                    }
                }
                Target::Unknown => {
                    out.unattributed.get_or_insert_with(ev);
                    for &b in &buffers {
                        if m.role.reads() {
                            out.params[b].read.add(Seen::Unknown(ev()));
                        }
                        if m.role.writes() {
                            out.params[b].write.add(Seen::Unknown(ev()));
                        }
                    }
                    if m.noncoherent && out.unknown_noncoherent.is_none() {
                        out.unknown_noncoherent = Some(ev());
                    }
                }
            }
        }
    }
    out
}
