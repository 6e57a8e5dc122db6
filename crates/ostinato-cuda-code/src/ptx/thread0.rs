//! Whether thread 0 of a block can end before `griddepcontrol.wait`: a constant evaluation of the code
//! before the wait with `%tid` (and `%laneid`) zero, following both ways of every branch whose
//! condition depends on anything else.
//!
//! Why it matters: a grid completes when all its threads have ended. If one thread of it waits, the
//! grid cannot complete before its producers have, so orderings implied through it hold. Thread
//! (0,0,0) exists in every block, so a kernel whose thread 0 always reaches the wait may let other
//! threads end before it — the producer warp of a bulk-copy pipeline, which only issues copies of
//! weights and returns.

use std::collections::HashMap;

use super::parse::{Entry, Guard, Instr, Item};

pub(super) type State = HashMap<String, u64>;

/// `Err(instruction)` where thread 0 may end the block (or reach the end of the body) before an
/// unpredicated `griddepcontrol.wait`.
pub fn thread_zero_waits(entry: &Entry) -> Result<(), String> {
    let labels = entry.labels();
    let mut at: Vec<Option<State>> = vec![None; entry.items.len() + 1];
    let mut work: Vec<(usize, State)> = vec![(0, State::new())];
    let mut budget = 1_000_000usize;
    while let Some((i, state)) = work.pop() {
        budget = budget.checked_sub(1).ok_or("the code before the wait is too large to evaluate for thread 0")?;
        // Meet with what reached this point before; stop where nothing changed.
        let state = match &at[i] {
            Some(old) => {
                let met: State = old.iter().filter(|(k, v)| state.get(*k) == Some(v)).map(|(k, v)| (k.clone(), *v)).collect();
                if met.len() == old.len() {
                    continue;
                }
                met
            }
            None => state,
        };
        at[i] = Some(state.clone());
        let Some(item) = entry.items.get(i) else {
            return Err("the end of the body".into());
        };
        let Item::Instr(ins) = item else {
            work.push((i + 1, state));
            continue;
        };
        let taken = ins.guard.as_ref().map_or(Some(true), |g| guard_value(g, &state));
        match ins.head() {
            "griddepcontrol" if ins.op.starts_with("griddepcontrol.wait") && ins.guard.is_none() => continue,
            "ret" | "exit" | "trap" if taken != Some(false) => return Err(ins.text.clone()),
            "bra" => {
                let target = ins.operands.first().and_then(|t| labels.get(t.as_str()).copied());
                if taken != Some(false) {
                    // An unknown label is refused by the walk over all threads.
                    if let Some(t) = target {
                        work.push((t, state.clone()));
                    }
                }
                if taken != Some(true) {
                    work.push((i + 1, state));
                }
            }
            _ => {
                let mut next = state;
                step(ins, taken, &mut next);
                work.push((i + 1, next));
            }
        }
    }
    Ok(())
}

fn guard_value(g: &Guard, state: &State) -> Option<bool> {
    state.get(&g.reg).map(|&v| (v != 0) != g.negated)
}

/// Updates `state` with what `ins` writes (known constants only; anything else forgets its
/// destinations). `taken`: whether its guard holds.
pub(super) fn step(ins: &Instr, taken: Option<bool>, state: &mut State) {
    if taken == Some(false) {
        return;
    }
    let dests: Vec<String> = ins.operands.first().map(|d| d.split('|').map(|s| s.trim().to_string()).collect()).unwrap_or_default();
    let value = if taken == Some(true) { eval(ins, state) } else { None };
    for (k, d) in dests.iter().enumerate() {
        if !d.starts_with('%') {
            continue;
        }
        match value {
            // `setp` with `%p|%q` writes the complement to the second.
            Some(v) if k == 1 => _ = state.insert(d.clone(), u64::from(v == 0)),
            Some(v) => _ = state.insert(d.clone(), v),
            None => _ = state.remove(d),
        }
    }
}

/// The value of an operand: a known register (or a launch register the caller put in `state`), an
/// immediate, or `%tid.*`/`%laneid` (0 for thread 0, where `state` does not say otherwise).
fn operand(o: &str, state: &State) -> Option<u64> {
    let o = o.trim();
    if let Some(&v) = state.get(o) {
        return Some(v);
    }
    if matches!(o, "%tid.x" | "%tid.y" | "%tid.z" | "%laneid") {
        return Some(0);
    }
    if o.starts_with('%') {
        return None;
    }
    if let Some(h) = o.strip_prefix("0x").or_else(|| o.strip_prefix("0X")) {
        return u64::from_str_radix(h.trim_end_matches('U'), 16).ok();
    }
    if let Some(n) = o.strip_prefix('-') {
        return n.parse::<u64>().ok().map(|v| v.wrapping_neg());
    }
    o.trim_end_matches('U').parse::<u64>().ok()
}

/// The result of the integer and predicate instructions thread-0 code computes with (`None` for any
/// other: a float, a saturating or high-half operation, a load).
pub(super) fn eval(ins: &Instr, state: &State) -> Option<u64> {
    let parts: Vec<&str> = ins.op.split('.').collect();
    if parts.iter().skip(1).any(|p| matches!(*p, "f16" | "f16x2" | "bf16" | "bf16x2" | "f32" | "f64" | "rn" | "rz" | "rm" | "rp" | "sat" | "hi")) {
        return None;
    }
    if parts[0] == "cvt" {
        // cvt.DST.SRC: the source's bits, extended by the source's signedness, cut to the destination.
        let width = |t: &str| t.get(1..).and_then(|w| w.parse::<u32>().ok());
        let (dst, src) = (parts.get(1)?, parts.iter().rev().find(|p| width(p).is_some())?);
        let (db, sb) = (width(dst)?, width(src)?);
        let v = operand(ins.operands.get(1)?, state)?;
        let v = if sb >= 64 { v } else { v & ((1u64 << sb) - 1) };
        let v = if src.starts_with('s') && sb < 64 { ((v << (64 - sb)) as i64 >> (64 - sb)) as u64 } else { v };
        return Some(if db >= 64 { v } else { v & ((1u64 << db) - 1) });
    }
    let ty = parts.iter().rev().find(|p| p.len() >= 2 && matches!(&p[..1], "u" | "s" | "b") && p[1..].parse::<u32>().is_ok()).copied().unwrap_or("b64");
    let bits: u32 = ty[1..].parse().unwrap_or(64);
    let signed = ty.starts_with('s');
    let mask = |v: u64| if bits >= 64 { v } else { v & ((1u64 << bits) - 1) };
    let sext = |v: u64| if bits >= 64 || !signed { v } else { ((v << (64 - bits)) as i64 >> (64 - bits)) as u64 };
    let arg = |k: usize| ins.operands.get(k).and_then(|o| operand(o, state));
    let (a, b) = (arg(1), arg(2));
    Some(match parts[0] {
        "mov" => mask(arg(1)?),
        "add" => mask(a?.wrapping_add(b?)),
        "sub" => mask(a?.wrapping_sub(b?)),
        "mul" if parts.contains(&"wide") => sext(a?).wrapping_mul(sext(b?)),
        "mul" => mask(a?.wrapping_mul(b?)),
        "mad" if parts.contains(&"wide") => sext(a?).wrapping_mul(sext(b?)).wrapping_add(arg(3)?),
        "mad" => mask(a?.wrapping_mul(b?).wrapping_add(arg(3)?)),
        "rem" | "div" if mask(b?) == 0 => return None,
        "rem" if signed => mask((sext(mask(a?)) as i64).wrapping_rem(sext(mask(b?)) as i64) as u64),
        "rem" => mask(a?) % mask(b?),
        "div" if signed => mask((sext(mask(a?)) as i64).wrapping_div(sext(mask(b?)) as i64) as u64),
        "div" => mask(a?) / mask(b?),
        "and" => mask(a? & b?),
        "or" => mask(a? | b?),
        "xor" => mask(a? ^ b?),
        "not" if parts.contains(&"pred") => u64::from(a? == 0),
        "not" => mask(!a?),
        "shl" => mask(a?.checked_shl(b? as u32).unwrap_or(0)),
        "shr" if signed => mask((sext(a?) as i64).checked_shr(b? as u32).unwrap_or(if (sext(a?) as i64) < 0 { -1 } else { 0 }) as u64),
        "shr" => mask(a?).checked_shr(b? as u32).unwrap_or(0),
        "min" if signed => mask((sext(a?) as i64).min(sext(b?) as i64) as u64),
        "min" => mask(a?).min(mask(b?)),
        "max" if signed => mask((sext(a?) as i64).max(sext(b?) as i64) as u64),
        "max" => mask(a?).max(mask(b?)),
        "selp" => {
            if arg(3)? != 0 {
                a?
            } else {
                b?
            }
        }
        "setp" if parts.len() == 3 => {
            let (x, y) = (sext(mask(a?)), sext(mask(b?)));
            let lt = if signed { (x as i64) < (y as i64) } else { x < y };
            let gt = if signed { (x as i64) > (y as i64) } else { x > y };
            u64::from(match parts[1] {
                "eq" => x == y,
                "ne" => x != y,
                "lt" | "lo" => lt,
                "le" | "ls" => lt || x == y,
                "gt" | "hi" => gt,
                "ge" | "hs" => gt || x == y,
                _ => return None,
            })
        }
        _ => return None,
    })
}
