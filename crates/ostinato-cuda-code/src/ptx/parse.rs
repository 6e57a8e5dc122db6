//! Reading PTX text: the module's `.target`, its source files (`.file`), the memory symbols it declares,
//! and one entry's params and body as labels and instructions, each instruction with its PTX line and,
//! where the compiler emitted `.loc` (NVRTC with `-lineinfo`), its source line.
//!
//! Hand-written: PTX is a line-oriented assembly whose few constructs we need (entries, labels,
//! predicated instructions, operands with `[]` addresses and `{}` vectors, declarations) read in a few
//! dozen lines; no maintained Rust crate parses PTX.

use std::collections::HashMap;

/// The state space a module-level or entry-level variable lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Block-private (`.shared`, also `.shared::cta` / `.shared::cluster`).
    Shared,
    /// Thread-private (`.local`, the stack).
    Local,
    /// Read-only module constants (`.const`).
    Const,
    /// Module-scope global memory (`__device__` variables): state every launch of the module shares.
    Global,
}

impl Space {
    /// The space a declaration line (or an instruction's qualifier) names.
    pub fn named(part: &str) -> Option<Space> {
        match part.split("::").next().unwrap_or("") {
            "shared" => Some(Space::Shared),
            "local" => Some(Space::Local),
            "const" => Some(Space::Const),
            "global" => Some(Space::Global),
            _ => None,
        }
    }
}

/// The predicate guarding an instruction: `@%p1` or `@!%p1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    pub reg: String,
    pub negated: bool,
}

/// One instruction of an entry's body.
#[derive(Clone, Debug)]
pub struct Instr {
    pub guard: Option<Guard>,
    /// The opcode with its qualifiers: `ld.global.nc.v4.u32`.
    pub op: String,
    pub operands: Vec<String>,
    /// The instruction as written (without the `;`).
    pub text: String,
    /// Its line in the PTX text, from 1.
    pub line: usize,
    /// Its source position from the last `.loc`: (file index, line).
    pub loc: Option<(u32, u32)>,
}

impl Instr {
    /// The opcode's first part: `ld`, `st`, `cp`, `griddepcontrol`.
    pub fn head(&self) -> &str {
        self.op.split('.').next().unwrap_or("")
    }
    /// Whether a qualifier of the opcode is `q` (`nc` in `ld.global.nc.u32`).
    pub fn has(&self, q: &str) -> bool {
        self.op.split('.').skip(1).any(|p| p == q)
    }
}

/// A label or an instruction.
#[derive(Clone, Debug)]
pub enum Item {
    Label(String),
    Instr(Instr),
}

/// One `.entry`: its param names in order and its body.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub params: Vec<String>,
    pub items: Vec<Item>,
}

impl Entry {
    /// Index of each label's item.
    pub fn labels(&self) -> HashMap<&str, usize> {
        self.items.iter().enumerate().filter_map(|(i, it)| if let Item::Label(l) = it { Some((l.as_str(), i)) } else { None }).collect()
    }
    /// The instructions, in order.
    pub fn instrs(&self) -> impl Iterator<Item = &Instr> {
        self.items.iter().filter_map(|it| if let Item::Instr(i) = it { Some(i) } else { None })
    }
}

/// What a PTX module declares around its entries.
#[derive(Clone, Debug, Default)]
pub struct ModuleInfo {
    /// `.target sm_90a` → `sm_90a` (the first target; extra ones such as `texmode_independent` dropped).
    pub target: Option<String>,
    /// `.version 8.5` → `8.5`.
    pub version: Option<String>,
    /// `.file N "name"` → name.
    pub files: HashMap<u32, String>,
    /// Variables by name, with their space and size in bytes (module or entry scope).
    pub symbols: HashMap<String, (Space, u64)>,
    /// Every `.entry` name, in order.
    pub entries: Vec<String>,
    /// Where the compiled text joins several files: (file, first line of it in the text), ascending;
    /// `.loc` lines are reported in those files. Empty: lines are the named file's.
    pub parts: Vec<(String, u32)>,
}

impl ModuleInfo {
    /// Reads the module-level declarations of `ptx`.
    pub fn read(ptx: &str) -> ModuleInfo {
        let mut m = ModuleInfo::default();
        for raw in ptx.lines() {
            let line = raw.split("//").next().unwrap_or("").trim();
            if let Some(rest) = line.strip_prefix(".target") {
                if m.target.is_none() {
                    m.target = rest.split(',').next().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
                }
            } else if let Some(rest) = line.strip_prefix(".version") {
                m.version = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix(".file") {
                let mut parts = rest.trim().splitn(2, char::is_whitespace);
                if let (Some(n), Some(name)) = (parts.next().and_then(|n| n.parse().ok()), parts.next()) {
                    let name = name.trim().trim_start_matches('"');
                    m.files.insert(n, name.split('"').next().unwrap_or("").to_string());
                }
            } else if let Some((name, space, bytes)) = symbol_decl(line) {
                m.symbols.insert(name, (space, bytes));
            }
            if let Some(at) = line.find(".entry") {
                if let Some(name) = line[at + 6..].split(|c: char| c == '(' || c.is_whitespace()).find(|s| !s.is_empty()) {
                    m.entries.push(name.to_string());
                }
            }
        }
        m
    }

    /// `file:line` of a `.loc` position, where the file is known.
    pub fn source_line(&self, loc: Option<(u32, u32)>) -> Option<String> {
        let (f, l) = loc?;
        if let Some((name, first)) = self.parts.iter().rev().find(|(_, first)| *first <= l) {
            return Some(format!("{name}:{}", l - first + 1));
        }
        Some(format!("{}:{l}", self.files.get(&f).map_or("?", String::as_str)))
    }
}

/// A variable declaration: `.shared .align 4 .b8 name[128];`, `.global .u32 counter = 0;`,
/// `.extern .shared .align 16 .b8 smem[];`, `.local .align 8 .b8 __local_depot0[16];`.
/// Returns (name, space, bytes); `bytes` is 0 where the size is not given (`[]`).
pub fn symbol_decl(line: &str) -> Option<(String, Space, u64)> {
    let decl = line.trim().trim_end_matches(';').split('=').next()?.trim();
    let mut words = decl.split_whitespace().peekable();
    while words.peek().is_some_and(|w| matches!(*w, ".extern" | ".visible" | ".weak" | ".common")) {
        words.next();
    }
    let space = Space::named(words.next()?.strip_prefix('.')?)?;
    let words: Vec<&str> = words.collect();
    let last = *words.last()?;
    if last.starts_with('.') {
        return None;
    }
    let (name, count) = match last.split_once('[') {
        Some((n, c)) => (n, c.trim_end_matches(']').parse::<u64>().unwrap_or(0)),
        None => (last, 1),
    };
    let elem = words.iter().find_map(|t| scalar_bytes(t)).unwrap_or(1);
    Some((name.to_string(), space, count * elem))
}

/// Bytes of a PTX scalar type qualifier (`.u32` → 4), or `None` for anything else.
pub fn scalar_bytes(t: &str) -> Option<u64> {
    Some(match t.trim_start_matches('.') {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

/// The entry `entry` of `ptx`: its params and body, or why it cannot be read.
pub fn entry(ptx: &str, entry: &str) -> Result<Entry, String> {
    let (params, close) = param_list(ptx, entry)?;
    let body_at = ptx[close..].find('{').map(|b| close + b).ok_or("entry has no body")?;
    let first_line = ptx[..body_at].bytes().filter(|&b| b == b'\n').count() + 1;
    let items = body(&ptx[body_at..], first_line)?;
    Ok(Entry { name: entry.to_string(), params, items })
}

/// The param names of `.entry entry` in `ptx`, in order (without reading its body), or why they
/// cannot be read.
pub fn entry_params(ptx: &str, entry: &str) -> Result<Vec<String>, String> {
    param_list(ptx, entry).map(|(params, _)| params)
}

/// The param names of `.entry entry` and the byte offset of the `)` that ends their list.
fn param_list(ptx: &str, entry: &str) -> Result<(Vec<String>, usize), String> {
    let start = ptx
        .match_indices(".entry")
        .map(|(i, _)| i)
        .find(|&i| {
            let rest = ptx[i + 6..].trim_start();
            rest.starts_with(entry) && rest[entry.len()..].trim_start().starts_with('(')
        })
        .ok_or_else(|| format!("no `.entry {entry}` in the PTX"))?;
    let open = ptx[start..].find('(').map(|p| start + p).ok_or("entry has no param list")?;
    let close = ptx[open..].find(')').map(|p| open + p).ok_or("entry's param list does not end")?;
    let params: Vec<String> = ptx[open + 1..close]
        .split(',')
        .filter_map(|p| p.split_whitespace().last())
        .map(|n| n.split('[').next().unwrap_or("").to_string())
        .filter(|n| !n.is_empty())
        .collect();
    Ok((params, close))
}

/// The items of a body that starts at `text` (its opening `{`), whose first line is PTX line `first_line`.
fn body(text: &str, first_line: usize) -> Result<Vec<Item>, String> {
    let mut depth = 0usize;
    let mut items = Vec::new();
    let mut loc: Option<(u32, u32)> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        // Scopes: `{` and `}` on their own lines (inline asm blocks open nested ones).
        if line == "{" {
            depth += 1;
            continue;
        }
        if line.starts_with('}') {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return Ok(items);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(".loc") {
            let mut nums = rest.split(|c: char| c.is_whitespace() || c == ',').filter(|s| !s.is_empty()).map(|s| s.parse::<u32>().ok());
            if let (Some(Some(f)), Some(Some(l))) = (nums.next(), nums.next()) {
                loc = Some((f, l));
            }
            continue;
        }
        if line.starts_with('.') {
            continue;
        }
        if let Some(label) = line.strip_suffix(':') {
            items.push(Item::Label(label.trim().to_string()));
            continue;
        }
        for stmt in line.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            items.push(Item::Instr(instr(stmt, first_line + n, loc)));
        }
    }
    Err("the entry's body does not end".into())
}

/// One statement: `@!%p1 bra $L__BB0_3`.
fn instr(stmt: &str, line: usize, loc: Option<(u32, u32)>) -> Instr {
    let (guard, rest) = match stmt.strip_prefix('@') {
        Some(r) => {
            let (g, rest) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
            let (negated, reg) = match g.strip_prefix('!') {
                Some(reg) => (true, reg),
                None => (false, g),
            };
            (Some(Guard { reg: reg.to_string(), negated }), rest.trim_start())
        }
        None => (None, stmt),
    };
    let (op, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let text = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
    Instr { guard, op: op.to_string(), operands: split_operands(args), text, line, loc }
}

/// Splits operands at top-level commas (not inside `{}` or `[]`).
pub fn split_operands(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Register names (`%r12`, `%rd3`, `%p1`, `%tid.x` as `%tid`) and plain identifiers (param and variable
/// names) in an operand.
pub fn names(operand: &str) -> Vec<&str> {
    operand
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '%' || c == '$'))
        .filter(|t| !t.is_empty() && !t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}
