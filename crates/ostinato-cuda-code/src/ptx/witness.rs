//! One thread of one block run through an entry's integer code, to show that a tile map is broken: a
//! concrete evaluation (the thread-0 evaluator's, `ptx::thread0`) from the entry with the node's
//! geometry and scalars, each buffer param at an address of its own, following every branch it can
//! decide. Every global access whose address it knows is checked against the block's declared tile;
//! the first one outside is the witness. A value loaded from memory is unknown: a branch that depends
//! on one ends the run (the thread's path is not known past it), an access through one is skipped. So
//! a witness is an access the thread surely makes — the check refuses a map on one, never on a guess.

use std::collections::HashMap;

use ostinato::TileMap;

use super::memory::{element_bytes, memory_ops, AddrSpace, Role};
use super::parse::{Entry, Item};
use super::thread0::{step, State};

/// The address each buffer param's pointer gets: its own 2^40-byte window, the slice's start modulo
/// 256 kept (code may branch on the alignment of a pointer; allocations are 256-byte aligned).
pub fn fake_base(param: usize, align: u64) -> u64 {
    ((param as u64 + 1) << 40) | (align % 256)
}

/// An access outside its block's tile: the param, the instruction (item index) and the bytes,
/// relative to the param's slice (negative: before it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub param: usize,
    pub item: usize,
    pub bytes: (i64, i64),
}

/// The thread and what it runs with.
pub struct Thread<'a> {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub ctaid: [u32; 3],
    pub tid: [u32; 3],
    /// Per param: a scalar's bytes, `None` for a buffer.
    pub scalars: &'a [Option<u64>],
    /// Per param: the declared tile map (buffers only).
    pub maps: &'a [Option<&'a TileMap>],
    /// Per param: its slice's start on its allocation (its alignment is kept).
    pub align: &'a [u64],
}

/// The most instructions one run executes.
const STEPS: usize = 1 << 18;

/// Runs `t` through `entry`: the first access outside its tile of each param (in the order found).
pub fn run(entry: &Entry, t: &Thread) -> Vec<Violation> {
    let labels = entry.labels();
    let mut state = State::new();
    for (d, dim) in ["x", "y", "z"].iter().enumerate() {
        state.insert(format!("%ctaid.{dim}"), u64::from(t.ctaid[d]));
        state.insert(format!("%tid.{dim}"), u64::from(t.tid[d]));
        state.insert(format!("%ntid.{dim}"), u64::from(t.block[d]));
        state.insert(format!("%nctaid.{dim}"), u64::from(t.grid[d]));
    }
    let linear = u64::from(t.tid[0]) + u64::from(t.block[0]) * (u64::from(t.tid[1]) + u64::from(t.block[1]) * u64::from(t.tid[2]));
    state.insert("%laneid".into(), linear % 32);
    let params: HashMap<&str, usize> = entry.params.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
    let mut out: Vec<Violation> = Vec::new();
    let mut pc = 0usize;
    for _ in 0..STEPS {
        let Some(item) = entry.items.get(pc) else { break };
        let Item::Instr(ins) = item else {
            pc += 1;
            continue;
        };
        let taken = ins.guard.as_ref().map_or(Some(true), |g| state.get(&g.reg).map(|&v| (v != 0) != g.negated));
        match ins.head() {
            "bra" => match taken {
                Some(true) => match ins.operands.first().and_then(|l| labels.get(l.as_str())) {
                    Some(&target) => {
                        pc = target;
                        continue;
                    }
                    None => break,
                },
                Some(false) => {}
                None => break,
            },
            "ret" | "exit" | "trap" if taken != Some(false) => break,
            "brx" | "call" => break,
            _ => {}
        }
        if taken == Some(true) {
            check(ins, pc, &state, t, &mut out);
        }
        let dest = ins.operands.first().cloned().unwrap_or_default();
        let special = match ins.head() {
            "ld" if ins.has("param") => Some(ins.operands.get(1).and_then(|a| param_value(a, &params, t, ins))),
            "cvta" if ins.has("global") => Some(ins.operands.get(1).and_then(|a| state.get(a.trim()).copied())),
            _ => None,
        };
        match special {
            Some(v) if taken == Some(true) && dest.starts_with('%') => match v {
                Some(v) => _ = state.insert(dest.trim().to_string(), v),
                None => _ = state.remove(dest.trim()),
            },
            Some(_) if dest.starts_with('%') && taken.is_none() => _ = state.remove(dest.trim()),
            Some(_) => {}
            None => step(ins, taken, &mut state),
        }
        pc += 1;
    }
    out
}

/// `ld.param.T [name]`: a buffer's address or a scalar's value, cut to `T`.
fn param_value(addr: &str, params: &HashMap<&str, usize>, t: &Thread, ins: &super::parse::Instr) -> Option<u64> {
    let name = addr.trim().trim_start_matches('[').trim_end_matches(']').trim();
    let p = *params.get(name)?;
    match t.scalars.get(p).copied().flatten() {
        Some(bits) => {
            let width = element_bytes(ins)?;
            let v = if width >= 8 { bits } else { bits & ((1u64 << (8 * width)) - 1) };
            let signed = ins.op.split('.').any(|q| q.starts_with('s') && q[1..].parse::<u32>().is_ok());
            Some(if signed && width < 8 { (((v << (64 - 8 * width)) as i64) >> (64 - 8 * width)) as u64 } else { v })
        }
        None => Some(fake_base(p, t.align.get(p).copied().unwrap_or(0))),
    }
}

/// Checks the global accesses of `ins` (run by the thread) against the tiles.
fn check(ins: &super::parse::Instr, item: usize, state: &State, t: &Thread, out: &mut Vec<Violation>) {
    let Some(ops) = memory_ops(ins) else { return };
    let vector: u64 = ins.op.split('.').find_map(|p| p.strip_prefix('v').and_then(|n| n.parse().ok())).unwrap_or(1);
    for m in ops {
        if m.role == Role::Prefetch || !matches!(m.space, AddrSpace::Global | AddrSpace::Generic) {
            continue;
        }
        let width = if ins.head() == "cp" {
            ins.operands.get(2).and_then(|o| o.trim().parse::<u64>().ok().or_else(|| state.get(o.trim()).copied()))
        } else {
            element_bytes(ins).map(|b| b * vector)
        };
        let (Some(addr), Some(width)) = (address(&ins.operands[m.operand], state), width) else { continue };
        // Each param's window is 2^40 bytes centred on its base.
        let window = (addr.wrapping_add(1 << 39) >> 40) as usize;
        let Some(p) = window.checked_sub(1) else { continue };
        let Some(Some(map)) = t.maps.get(p) else { continue };
        let off = addr.wrapping_sub(fake_base(p, t.align.get(p).copied().unwrap_or(0))) as i64;
        let inside = off >= 0 && map.covers(t.ctaid, off as u64, off as u64 + width);
        if !inside && !out.iter().any(|v| v.param == p) {
            out.push(Violation { param: p, item, bytes: (off, off + width as i64) });
        }
    }
}

/// The address in `[%rd4]` / `[%rd4+16]`, where the register is known.
fn address(o: &str, state: &State) -> Option<u64> {
    let inner = o.trim().trim_start_matches('[').trim_end_matches(']');
    let (reg, off) = match inner.split_once('+') {
        Some((r, off)) => (r.trim(), super::affine::immediate(off.trim())?),
        None => (inner.trim(), 0),
    };
    let base = *state.get(reg)?;
    Some(base.wrapping_add(off as u64))
}
