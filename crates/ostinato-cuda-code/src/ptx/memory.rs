//! What each PTX instruction does to memory: which operand is an address, in which state space, read,
//! written or both, through the non-coherent path or through an opaque handle. One table for every
//! analysis (access per param, pre-wait reads, fused bodies), so they cannot disagree on an opcode.

use super::parse::{scalar_bytes, Instr};

/// The state space an address operand points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrSpace {
    /// `.global`: device memory.
    Global,
    /// No space given: a generic address, classified by where it comes from.
    Generic,
    /// Block- or thread-private memory: `.shared` (any scope), `.local`.
    Private,
    /// Kernel params (`.param`): the launch's argument bytes.
    Param,
    /// Module constants (`.const`): read-only.
    Const,
    /// Memory named by a handle rather than an address: a texture, a surface, a tensor map.
    Opaque,
}

impl AddrSpace {
    fn named(part: &str) -> Option<AddrSpace> {
        Some(match part.split("::").next().unwrap_or("") {
            "global" => AddrSpace::Global,
            "shared" | "local" => AddrSpace::Private,
            "param" => AddrSpace::Param,
            "const" => AddrSpace::Const,
            _ => return None,
        })
    }
}

/// How an instruction uses the memory at one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Read,
    Write,
    /// Read-modify-write: atomics, reductions.
    ReadWrite,
    /// A cache hint: no value is read, nothing is written.
    Prefetch,
}

impl Role {
    pub fn reads(self) -> bool {
        matches!(self, Role::Read | Role::ReadWrite)
    }
    pub fn writes(self) -> bool {
        matches!(self, Role::Write | Role::ReadWrite)
    }
}

/// One memory access of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemOp {
    /// Index of the address operand (`[addr]`), or of the handle for [`AddrSpace::Opaque`].
    pub operand: usize,
    pub space: AddrSpace,
    pub role: Role,
    /// Through the non-coherent path (`ld.global.nc`, `ldu`, texture or surface reads): the ISA allows
    /// it only on memory read-only for the kernel's whole lifetime.
    pub noncoherent: bool,
}

/// The spaces an opcode's qualifiers name, in order (`cp.async.bulk.shared::cluster.global…` → the
/// destination, then the source).
fn spaces(ins: &Instr) -> Vec<AddrSpace> {
    ins.op.split('.').skip(1).filter_map(AddrSpace::named).collect()
}

/// The first `[..]` operand at or after `from`.
fn address_operand(ins: &Instr, from: usize) -> Option<usize> {
    ins.operands.iter().enumerate().skip(from).find(|(_, o)| o.starts_with('[')).map(|(i, _)| i)
}

/// Every memory access `ins` makes, or `None` for an instruction this table does not know to be free of
/// memory effects on global memory (the caller treats it as touching anything).
pub fn memory_ops(ins: &Instr) -> Option<Vec<MemOp>> {
    let one = |space: AddrSpace, role: Role, noncoherent: bool| -> Option<Vec<MemOp>> {
        let operand = address_operand(ins, 0)?;
        Some(vec![MemOp { operand, space, role, noncoherent }])
    };
    let space = spaces(ins).first().copied().unwrap_or(AddrSpace::Generic);
    Some(match ins.head() {
        "ld" => one(space, Role::Read, ins.has("nc"))?,
        "ldu" => one(space, Role::Read, true)?,
        // `st.async` / `red.async` store into a cluster peer's shared memory.
        "st" if ins.has("async") => one(AddrSpace::Private, Role::Write, false)?,
        "st" => one(space, Role::Write, false)?,
        "red" if ins.has("async") => one(AddrSpace::Private, Role::ReadWrite, false)?,
        "atom" | "red" => one(space, Role::ReadWrite, false)?,
        "prefetch" | "prefetchu" if ins.has("tensormap") => Vec::new(),
        "prefetch" | "prefetchu" => one(space, Role::Prefetch, false)?,
        "discard" => one(space, Role::Write, false)?,
        "tex" | "tld4" => one(AddrSpace::Opaque, Role::Read, true)?,
        "suld" => one(AddrSpace::Opaque, Role::Read, true)?,
        "sust" => one(AddrSpace::Opaque, Role::Write, false)?,
        "sured" => one(AddrSpace::Opaque, Role::ReadWrite, false)?,
        "multimem" if ins.has("ld_reduce") => one(AddrSpace::Generic, Role::Read, false)?,
        "multimem" if ins.has("st") => one(AddrSpace::Generic, Role::Write, false)?,
        "multimem" => one(AddrSpace::Generic, Role::ReadWrite, false)?,
        "tensormap" => one(space, Role::Write, false)?,
        "cp" => copy_ops(ins)?,
        // Block-private or no memory at all.
        "mbarrier"
        | "ldmatrix"
        | "stmatrix"
        | "wgmma"
        | "mma"
        | "wmma"
        | "tcgen05"
        | "bar"
        | "barrier"
        | "fence"
        | "membar"
        | "griddepcontrol"
        | "applypriority"
        | "createpolicy"
        | "isspacep"
        | "cvta"
        | "txq"
        | "suq"
        | "istypep"
        | "elect"
        | "setmaxnreg"
        | "nanosleep"
        | "getctarank"
        | "mapa"
        | "clusterlaunchcontrol" => Vec::new(),
        "call" | "brx" => return None,
        // Arithmetic, moves, conversions, comparisons, branches, warp shuffles and votes.
        _ => Vec::new(),
    })
}

/// The `cp.*` family: async copies (destination space first, then source), bulk copies, their tensor
/// forms (through a tensor map), bulk reductions and bulk prefetches.
fn copy_ops(ins: &Instr) -> Option<Vec<MemOp>> {
    let parts: Vec<&str> = ins.op.split('.').collect();
    let sp = spaces(ins);
    if parts.contains(&"prefetch") {
        let space = if parts.contains(&"tensor") { AddrSpace::Opaque } else { sp.first().copied().unwrap_or(AddrSpace::Global) };
        return Some(vec![MemOp { operand: 0, space, role: Role::Prefetch, noncoherent: false }]);
    }
    // commit_group, wait_group, wait_all, mbarrier.arrive: no data moves.
    if sp.len() < 2 {
        return Some(Vec::new());
    }
    let (dst, src) = (sp[0], sp[1]);
    let tensor = parts.contains(&"tensor");
    let dst_role = if parts.contains(&"reduce") { Role::ReadWrite } else { Role::Write };
    if tensor {
        // [dst], [tensorMap, coords] (load) or [tensorMap, coords], [src] (store).
        let (dst_space, src_space) =
            (if dst == AddrSpace::Global { AddrSpace::Opaque } else { dst }, if src == AddrSpace::Global { AddrSpace::Opaque } else { src });
        return Some(vec![
            MemOp { operand: 0, space: dst_space, role: dst_role, noncoherent: false },
            MemOp { operand: 1, space: src_space, role: Role::Read, noncoherent: false },
        ]);
    }
    Some(vec![MemOp { operand: 0, space: dst, role: dst_role, noncoherent: false }, MemOp { operand: 1, space: src, role: Role::Read, noncoherent: false }])
}

/// Bytes of each element an instruction loads or stores (its last type qualifier; 16 for `.b128`),
/// where it names one.
pub fn element_bytes(ins: &Instr) -> Option<u64> {
    ins.op.split('.').rev().find_map(scalar_bytes)
}
