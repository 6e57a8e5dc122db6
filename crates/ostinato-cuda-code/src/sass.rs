//! What a kernel's machine code does before its dependency wait, read from the SASS the toolkit's
//! `nvdisasm` prints: the certificate of a `.cubin` declared PDL-capable (there is no PTX to read), and
//! the manifest's report of which loads of a compiled kernel really precede the wait — ptxas may sink a
//! non-coherent load (`__ldg`, `ld.global.nc`) written before `griddepcontrol.wait` below it.
//!
//! On sm_90 `griddepcontrol.wait` is `ACQBULK` and `griddepcontrol.launch_dependents` is `PREEXIT`;
//! kernel params live in constant bank 0 from byte 0x210. The walk follows every path from the entry
//! to an unpredicated `ACQBULK` and refuses a store, an atomic or a bulk write to global memory, an
//! exit, a call or an indirect branch before it; each global load before it is attributed to the
//! buffer params its address derives from (a taint analysis like the PTX one: `LDC c[0x0][off]` is
//! the param at `off`, a loaded 64-bit value may be any address, a loaded narrow value only offsets).
//! Stricter than the PTX certificate (no early exit of other threads, no pre-wait atomic): machine
//! code is the fallback where no PTX exists.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

/// Where constant bank 0 holds the first kernel param, per architecture.
fn param_base(target: &str) -> Option<u32> {
    let arch = target.trim_start_matches("sm_").trim_end_matches(['a', 'f']);
    match arch {
        "90" => Some(0x210),
        _ => None,
    }
}

/// The toolkit's `nvdisasm`: `OSTINATO_NVDISASM`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`,
/// `/usr/local/cuda/bin`, then `PATH`. `Err` says what to install.
pub fn nvdisasm() -> Result<PathBuf, String> {
    let mut tried: Vec<PathBuf> = std::env::var_os("OSTINATO_NVDISASM").map(PathBuf::from).into_iter().collect();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            tried.push(PathBuf::from(d).join("bin/nvdisasm"));
        }
    }
    tried.push("/usr/local/cuda/bin/nvdisasm".into());
    if let Some(path) = std::env::var_os("PATH") {
        tried.extend(std::env::split_paths(&path).map(|d| d.join("nvdisasm")));
    }
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        "nvdisasm not found (OSTINATO_NVDISASM, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH): install the CUDA toolkit's nvdisasm \
         (the `cuda-nvdisasm` package, or `pip install nvidia-cuda-nvdisasm` and set OSTINATO_NVDISASM to its bin/nvdisasm) \
         to certify machine code"
            .to_string()
    })
}

/// One SASS instruction.
#[derive(Clone, Debug)]
pub struct Instr {
    /// Offset in the function (`/*0290*/`).
    pub offset: u32,
    /// `P0`, `!P0`; `None` when unpredicated (or `@PT`).
    pub guard: Option<String>,
    pub op: String,
    pub operands: Vec<String>,
    pub text: String,
}

#[derive(Clone, Debug)]
enum Item {
    Label(String),
    Instr(Instr),
}

/// A disassembled cubin: its target and each function's body.
#[derive(Clone, Debug, Default)]
pub struct Sass {
    pub target: Option<String>,
    functions: HashMap<String, Vec<Item>>,
}

/// Disassembles `cubin` with `nvdisasm -c`.
pub fn disassemble(cubin: &[u8]) -> Result<Sass, String> {
    let tool = nvdisasm()?;
    let path = std::env::temp_dir().join(format!("ostinato-{}-{}.cubin", std::process::id(), blake3::hash(cubin).to_hex()));
    std::fs::write(&path, cubin).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let out = std::process::Command::new(&tool).arg("-c").arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| format!("running {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", tool.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(parse(&String::from_utf8_lossy(&out.stdout)))
}

/// Reads `nvdisasm -c` output.
pub fn parse(text: &str) -> Sass {
    let mut sass = Sass::default();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(t) = line.strip_prefix(".target") {
            sass.target.get_or_insert_with(|| t.trim().to_string());
        } else if let Some(name) = line.strip_prefix(".text.").and_then(|l| l.strip_suffix(':')) {
            current = Some(name.to_string());
            sass.functions.entry(name.to_string()).or_default();
        } else if let (Some(f), Some(label)) = (&current, line.strip_suffix(':').filter(|l| l.starts_with(".L"))) {
            sass.functions.entry(f.clone()).or_default().push(Item::Label(label.to_string()));
        } else if let (Some(f), Some(rest)) = (&current, line.strip_prefix("/*")) {
            if let Some((off, body)) = rest.split_once("*/") {
                let offset = u32::from_str_radix(off.trim(), 16).unwrap_or(0);
                let body = body.trim().trim_end_matches(';').trim();
                if !body.is_empty() {
                    sass.functions.entry(f.clone()).or_default().push(Item::Instr(instr(offset, body)));
                }
            }
        }
    }
    sass
}

fn instr(offset: u32, body: &str) -> Instr {
    let (guard, rest) = match body.strip_prefix('@') {
        Some(r) => {
            let (g, rest) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
            (if g == "PT" { None } else { Some(g.to_string()) }, rest.trim())
        }
        None => (None, body),
    };
    let (op, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    Instr { offset, guard, op: op.to_string(), operands: crate::ptx::parse::split_operands(args), text: body.to_string() }
}

/// What machine code does before its wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SassPreWait {
    /// Buffer params read before `ACQBULK`.
    pub reads: Vec<usize>,
    /// `PREEXIT` before `ACQBULK` on some path.
    pub early_trigger: bool,
    /// The global loads before the wait, as written (`LDG.E R3, desc[UR4][R2.64]` at `0x0060`).
    pub loads: Vec<String>,
    /// Non-coherent loads (`LDG.E.CONSTANT`) after the wait: written before it in the source, ptxas may
    /// have sunk them.
    pub noncoherent_after_wait: usize,
}

/// The taint of a register: params its value derives from, or loaded data (wide: may be a pointer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Taint {
    params: BTreeSet<usize>,
    wide: bool,
    narrow: bool,
}

/// Register names in an operand (`R2.64` → R2 and R3), `RZ`/`URZ` excluded.
fn regs(operand: &str, pairs: bool) -> Vec<String> {
    let mut out = Vec::new();
    for tok in operand.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')) {
        let base = tok.split('.').next().unwrap_or("");
        let (prefix, num) = if let Some(n) = base.strip_prefix("UR") {
            ("UR", n)
        } else if let Some(n) = base.strip_prefix('R') {
            ("R", n)
        } else {
            continue;
        };
        let Ok(n) = num.parse::<u32>() else { continue };
        out.push(format!("{prefix}{n}"));
        if pairs || tok.contains(".64") {
            out.push(format!("{prefix}{}", n + 1));
        }
    }
    out
}

/// A constant-bank-0 offset named in an operand: `c[0x0][0x218]` → 0x218.
fn cbank0(operand: &str) -> Option<u32> {
    let rest = operand.split("c[0x0][").nth(1)?;
    u32::from_str_radix(rest.split(']').next()?.trim_start_matches("0x"), 16).ok()
}

/// The address operand of a memory instruction, without its descriptor (`desc[UR4][R2.64]` → `[R2.64]`).
fn address(operand: &str) -> &str {
    match operand.strip_prefix("desc[") {
        Some(r) => r.split_once(']').map_or(operand, |(_, a)| a),
        None => operand,
    }
}

/// Certifies function `entry` of `sass` for programmatic edges. `param_offsets[i]`: the byte offset and
/// size of param `i` in the launch's param block; `is_buffer(i)`: it is a buffer pointer.
pub fn certify(sass: &Sass, entry: &str, param_offsets: &[(u32, u32)], is_buffer: &dyn Fn(usize) -> bool) -> Result<SassPreWait, String> {
    let target = sass.target.as_deref().unwrap_or("unknown");
    let base = param_base(target).ok_or_else(|| {
        format!("machine code for {target}: Ostinato reads the SASS of sm_90 (ACQBULK, PREEXIT, params at c[0x0][0x210]); give the kernel's PTX")
    })?;
    let (items, pre) = before_wait(sass, entry)?;
    let param_at = |off: u32| param_offsets.iter().position(|&(o, s)| off >= base + o && off < base + o + s);
    let mut taint: HashMap<String, Taint> = HashMap::new();
    let mut out = SassPreWait::default();
    let mut reads = BTreeSet::new();
    // Flow-insensitive fixpoint of the register taints over the pre-wait code.
    for _ in 0..10_000 {
        let mut changed = false;
        for &i in &pre {
            let Item::Instr(ins) = &items[i] else { continue };
            changed |= step(ins, &mut taint, &param_at);
        }
        if !changed {
            break;
        }
    }
    for &i in &pre {
        let Item::Instr(ins) = &items[i] else { continue };
        let head = ins.op.split('.').next().unwrap_or("");
        let refused = match head {
            "STG" | "ST" | "ATOMG" | "ATOM" | "RED" | "REDG" | "UBLKRED" | "UTMASTG" | "UTMAREDG" | "UTMALDG" => true,
            "UBLKCP" => !ins.op.starts_with("UBLKCP.S.G"),
            "EXIT" | "RET" | "CALL" | "BRX" | "JMX" | "JMP" | "BPT" | "KILL" => true,
            _ => false,
        };
        if refused {
            return Err(format!(
                "`{}` (at {:#06x}) comes before `ACQBULK` (griddepcontrol.wait): machine code may not store, update, exit or call before its wait",
                ins.text, ins.offset
            ));
        }
        if head == "PREEXIT" {
            out.early_trigger = true;
        }
        let src = match head {
            "LDG" | "LD" => ins.operands.get(1),
            "UBLKCP" | "LDGSTS" => ins.operands.get(1),
            _ => None,
        };
        if let Some(src) = src {
            let mut t = Taint::default();
            for r in regs(address(src), false) {
                if let Some(x) = taint.get(&r) {
                    t.params.extend(x.params.iter().copied());
                    t.wide |= x.wide;
                }
            }
            let buffers: Vec<usize> = t.params.iter().copied().filter(|&p| is_buffer(p)).collect();
            if t.wide || buffers.is_empty() {
                return Err(format!(
                    "`{}` (at {:#06x}) reads memory before `ACQBULK` through an address not derived from a buffer param",
                    ins.text, ins.offset
                ));
            }
            reads.extend(buffers);
            out.loads.push(format!("{} at {:#06x}", ins.text, ins.offset));
        }
    }
    out.reads = reads.into_iter().collect();
    let in_pre: HashSet<usize> = pre.iter().copied().collect();
    out.noncoherent_after_wait = noncoherent_outside(items, &in_pre);
    Ok(out)
}

/// The function's items and the indices of those before an unpredicated `ACQBULK`, on every path.
fn before_wait<'a>(sass: &'a Sass, entry: &str) -> Result<(&'a [Item], Vec<usize>), String> {
    let items = sass.functions.get(entry).ok_or_else(|| format!("no function `{entry}` in the cubin"))?;
    let labels: HashMap<&str, usize> =
        items.iter().enumerate().filter_map(|(i, it)| if let Item::Label(l) = it { Some((l.as_str(), i)) } else { None }).collect();
    if !items.iter().any(|it| matches!(it, Item::Instr(i) if i.op == "ACQBULK" && i.guard.is_none())) {
        return Err("no `ACQBULK` (griddepcontrol.wait) in its machine code".into());
    }
    // The instructions before the wait, every path.
    let mut pre: Vec<usize> = Vec::new();
    let (mut seen, mut stack) = (HashSet::new(), vec![0usize]);
    while let Some(mut i) = stack.pop() {
        while seen.insert(i) {
            let Some(item) = items.get(i) else { return Err("a path reaches the end of the code before `ACQBULK`".into()) };
            let Item::Instr(ins) = item else {
                i += 1;
                continue;
            };
            if ins.op == "ACQBULK" && ins.guard.is_none() {
                break;
            }
            pre.push(i);
            let head = ins.op.split('.').next().unwrap_or("");
            if matches!(head, "EXIT" | "RET") && ins.guard.is_none() {
                break;
            }
            if head == "BRA" {
                let label = ins.operands.last().map(|t| t.trim_matches(|c| c == '`' || c == '(' || c == ')')).unwrap_or("");
                let t = *labels.get(label).ok_or_else(|| format!("`{}` branches to an unknown label", ins.text))?;
                if ins.guard.is_some() || ins.op.contains("DIV") {
                    stack.push(t);
                } else {
                    i = t;
                    continue;
                }
            }
            i += 1;
        }
    }
    Ok((items, pre))
}

/// The manifest's view of compiled machine code: which global loads really precede the wait, and how
/// many non-coherent loads follow it (written before it, ptxas may have sunk them).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SassLoads {
    pub target: String,
    pub early_trigger: bool,
    pub loads_before_wait: Vec<String>,
    pub noncoherent_after_wait: usize,
}

/// [`SassLoads`] of `entry`, for a kernel whose machine code has a wait.
pub fn loads(sass: &Sass, entry: &str) -> Result<SassLoads, String> {
    let (items, pre) = before_wait(sass, entry)?;
    let mut out = SassLoads { target: sass.target.clone().unwrap_or_default(), ..SassLoads::default() };
    for &i in &pre {
        let Item::Instr(ins) = &items[i] else { continue };
        let head = ins.op.split('.').next().unwrap_or("");
        out.early_trigger |= head == "PREEXIT";
        if matches!(head, "LDG" | "LD" | "LDGSTS" | "UTMALDG") || ins.op.starts_with("UBLKCP.S.G") {
            out.loads_before_wait.push(format!("{} at {:#06x}", ins.text, ins.offset));
        }
    }
    let pre: HashSet<usize> = pre.into_iter().collect();
    out.noncoherent_after_wait = noncoherent_outside(items, &pre);
    Ok(out)
}

fn noncoherent_outside(items: &[Item], pre: &HashSet<usize>) -> usize {
    items.iter().enumerate().filter(|(i, it)| !pre.contains(i) && matches!(it, Item::Instr(x) if x.op.starts_with("LDG") && x.op.contains("CONSTANT"))).count()
}

/// One transfer of the register taint; true when something grew.
fn step(ins: &Instr, taint: &mut HashMap<String, Taint>, param_at: &dyn Fn(u32) -> Option<usize>) -> bool {
    let Some(dest) = ins.operands.first() else { return false };
    let head = ins.op.split('.').next().unwrap_or("");
    let wide_op = ins.op.contains("64") || ins.op.contains("128") || ins.op.contains("WIDE");
    if matches!(
        head,
        "STG" | "ST" | "STS" | "STL" | "RED" | "BRA" | "EXIT" | "BAR" | "ACQBULK" | "PREEXIT" | "UBLKCP" | "LDGSTS" | "SYNCS" | "MEMBAR" | "FENCE"
    ) {
        return false;
    }
    let value = match head {
        "LDC" | "ULDC" => match ins.operands.get(1).and_then(|o| cbank0(o)) {
            Some(off) => Taint { params: param_at(off).into_iter().collect(), ..Taint::default() },
            None => Taint { wide: wide_op, narrow: !wide_op, ..Taint::default() },
        },
        "LDG" | "LD" | "LDS" | "LDL" | "ATOMG" | "ATOM" | "ATOMS" | "LDSM" => Taint { wide: wide_op, narrow: !wide_op, ..Taint::default() },
        "S2R" | "S2UR" | "CS2R" => Taint::default(),
        _ => {
            let mut t = Taint::default();
            for o in &ins.operands[1..] {
                for r in regs(o, wide_op) {
                    if let Some(x) = taint.get(&r) {
                        t.params.extend(x.params.iter().copied());
                        t.wide |= x.wide;
                        t.narrow |= x.narrow;
                    }
                }
            }
            t
        }
    };
    let mut changed = false;
    for r in regs(dest, wide_op) {
        let e = taint.entry(r).or_default();
        let before = e.clone();
        e.params.extend(value.params.iter().copied());
        e.wide |= value.wide;
        e.narrow |= value.narrow;
        changed |= *e != before;
    }
    changed
}

/// Byte offset and size of each param of a launch: pointers and 8-byte scalars 8-aligned, 4-byte
/// scalars 4-aligned, in order (the C ABI of `__global__` params).
pub fn param_offsets(sizes: &[u32]) -> Vec<(u32, u32)> {
    let mut at = 0u32;
    sizes
        .iter()
        .map(|&s| {
            at = at.div_ceil(s.max(1)) * s.max(1);
            let o = (at, s);
            at += s;
            o
        })
        .collect()
}

#[cfg(test)]
mod tests;
