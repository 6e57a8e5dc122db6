//! What a kernel does before `griddepcontrol.wait`, read from its PTX: the evidence behind every
//! programmatic (PDL) edge.
//!
//! A kernel on a programmatic edge may start while its producer still runs; only what it does before its
//! wait can race. The analysis walks the entry's control flow from the first instruction along every path
//! until an unpredicated `griddepcontrol.wait`, and certifies that on those paths the kernel
//! - stores, reduces or performs atomics on no memory but its own shared and local memory,
//! - calls nothing, takes no indirect branch, and never exits (a block that exits without waiting would
//!   let its grid complete before the producer, losing the orderings the plan reduced away),
//! - reads global memory only through addresses derived from its pointer params.
//!
//! It reports which params those pre-wait reads derive from (the *prefetched* params): the lowering then
//! keeps a programmatic edge only where no node that may still run writes their declared extents
//! (`lower/prefetch.rs`). Address provenance is a taint analysis over the pre-wait instructions: `ld.param`
//! taints its destination with the param, every other instruction taints its destinations with the union
//! of its sources, and a value loaded from memory is of unknown origin (a pointer read from memory could
//! point anywhere): an address of unknown origin fails certification. Conservative by construction: an
//! instruction it does not understand taints, never clears.

use std::collections::{BTreeSet, HashMap, HashSet};

/// A certified kernel's pre-wait behaviour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreWait {
    /// Params (by index) from which some global-memory read before the wait derives its address,
    /// ascending. Empty: the kernel touches no memory before its wait.
    pub reads: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Item {
    Label(String),
    Instr { guarded: bool, op: String, operands: Vec<String>, text: String },
}

/// The entry's param names (in order) and body items.
fn entry_body(ptx: &str, entry: &str) -> Result<(Vec<String>, Vec<Item>), String> {
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
    let body_at = ptx[close..].find('{').map(|b| close + b).ok_or("entry has no body")?;
    let mut depth = 0usize;
    let mut items = Vec::new();
    for raw in ptx[body_at..].lines() {
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
                return Ok((params, items));
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
            let (guarded, rest) = match stmt.strip_prefix('@') {
                Some(r) => (true, r.split_once(char::is_whitespace).map_or("", |x| x.1).trim_start()),
                None => (false, stmt),
            };
            let (op, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            items.push(Item::Instr { guarded, op: op.to_string(), operands: split_operands(args), text: stmt.to_string() });
        }
    }
    Err("the entry's body does not end".into())
}

/// Splits operands at top-level commas (not inside `{}` or `[]`).
fn split_operands(s: &str) -> Vec<String> {
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

/// Register names (`%r12`, `%rd3`, `%p1`) and plain identifiers (param names) in an operand.
fn names(operand: &str) -> Vec<&str> {
    operand
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '%' || c == '$'))
        .filter(|t| !t.is_empty() && !t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// The space an `ld`/`st`-family instruction addresses: `shared`/`local`/`param` are private to the
/// block (or the launch); anything else (global, generic, const) may be any node's memory.
fn private_space(op: &str) -> bool {
    op.split('.').any(|p| matches!(p, "shared" | "local" | "param"))
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Taint {
    params: BTreeSet<usize>,
    unknown: bool,
}

impl Taint {
    fn join(&mut self, other: &Taint) -> bool {
        let before = (self.params.len(), self.unknown);
        self.params.extend(other.params.iter().copied());
        self.unknown |= other.unknown;
        before != (self.params.len(), self.unknown)
    }
}

/// Certifies `entry` for programmatic edges and reports which of its buffer params (`is_buffer(i)`) it
/// reads before its wait; an `Err` says why it is not PDL-capable. A pre-wait address must derive from
/// at least one buffer param (scalars only offset it); every buffer param it derives from is reported.
pub fn analyze(ptx: &str, entry: &str, is_buffer: impl Fn(usize) -> bool) -> Result<PreWait, String> {
    let (params, items) = entry_body(ptx, entry)?;
    let labels: HashMap<&str, usize> =
        items.iter().enumerate().filter_map(|(i, it)| if let Item::Label(l) = it { Some((l.as_str(), i)) } else { None }).collect();
    // The instructions reachable before the wait.
    let mut pre: Vec<usize> = Vec::new();
    let (mut seen, mut stack) = (HashSet::new(), vec![0usize]);
    while let Some(mut i) = stack.pop() {
        loop {
            if !seen.insert(i) {
                break;
            }
            let Some(item) = items.get(i) else {
                return Err("a path reaches the end of the body without `griddepcontrol.wait`".into());
            };
            let Item::Instr { guarded, op, operands, text } = item else {
                i += 1;
                continue;
            };
            if op.starts_with("griddepcontrol.wait") && !guarded {
                break;
            }
            pre.push(i);
            let head = op.split('.').next().unwrap_or("");
            match head {
                "bra" => {
                    let target = operands.first().map(String::as_str).unwrap_or("");
                    let t = *labels.get(target).ok_or_else(|| format!("`{text}` branches to unknown label `{target}` before `griddepcontrol.wait`"))?;
                    if *guarded {
                        stack.push(t);
                    } else {
                        i = t;
                        continue;
                    }
                }
                "ret" | "exit" | "trap" => return Err(format!("`{text}` may end the block before `griddepcontrol.wait`")),
                "call" | "brx" => return Err(format!("`{text}` comes before `griddepcontrol.wait`")),
                _ => {}
            }
            i += 1;
        }
    }
    if !items.iter().any(|it| matches!(it, Item::Instr { op, guarded: false, .. } if op.starts_with("griddepcontrol.wait"))) {
        return Err("no `griddepcontrol.wait` found".into());
    }
    let param_index: HashMap<&str, usize> = params.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
    let mut taint: HashMap<String, Taint> = HashMap::new();
    let source_taint = |taint: &HashMap<String, Taint>, operand: &str| {
        let mut t = Taint::default();
        for n in names(operand) {
            if let Some(&p) = param_index.get(n) {
                t.params.insert(p);
            } else if let Some(x) = taint.get(n) {
                t.join(x);
            }
        }
        t
    };
    // Fixpoint over the pre-wait instructions (loops before the wait feed values back).
    let mut reads: Vec<(usize, Taint)> = Vec::new();
    for round in 0.. {
        let mut changed = false;
        reads.clear();
        for &i in &pre {
            let Item::Instr { op, operands, text, .. } = &items[i] else { continue };
            let head = op.split('.').next().unwrap_or("");
            let memory = matches!(head, "ld" | "ldu" | "st" | "atom" | "red" | "cp" | "prefetch" | "prefetchu" | "tex" | "tld4" | "suld" | "sust" | "sured");
            if memory && !private_space(op) {
                match head {
                    "ld" | "ldu" | "prefetch" | "prefetchu" => {
                        let addr = operands.iter().find(|o| o.starts_with('[')).ok_or_else(|| format!("`{text}`: no address operand"))?;
                        reads.push((i, source_taint(&taint, addr)));
                    }
                    _ => return Err(format!("`{text}` writes or copies memory before `griddepcontrol.wait`")),
                }
            }
            if matches!(head, "st" | "red" | "bar" | "barrier" | "bra" | "prefetch" | "prefetchu" | "membar" | "fence" | "griddepcontrol")
                || operands.is_empty()
            {
                continue;
            }
            // Destinations: the first operand (a register, a `{...}` vector or a `p|q` pair).
            // A value loaded from memory (but a param) may be any address.
            let loads = matches!(head, "ld" | "ldu" | "atom" | "tex" | "tld4" | "suld");
            let mut t = Taint { unknown: loads && !op.contains(".param"), ..Taint::default() };
            for src in &operands[1..] {
                let s = source_taint(&taint, src);
                t.join(&s);
            }
            for d in names(&operands[0]) {
                changed |= taint.entry(d.to_string()).or_default().join(&t);
            }
        }
        if !changed || round > 10_000 {
            break;
        }
    }
    let mut out = BTreeSet::new();
    for (i, t) in &reads {
        let Item::Instr { text, .. } = &items[*i] else { continue };
        let buffers: Vec<usize> = t.params.iter().copied().filter(|&p| is_buffer(p)).collect();
        if t.unknown || buffers.is_empty() {
            return Err(format!("`{text}` reads memory before `griddepcontrol.wait` through an address not derived from a buffer param alone"));
        }
        out.extend(buffers);
    }
    Ok(PreWait { reads: out.into_iter().collect() })
}

/// What a kernel body fused into a resident block ([`crate::fusion`]) uses, read from its PTX as fused
/// (compiled with `blockIdx` and `gridDim` bound to the one block of a 1-block launch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FusedBody {
    /// The body touches shared memory: the fused kernel puts a barrier between it and its neighbours,
    /// whose shared memory may be the same bytes.
    pub uses_shared: bool,
    /// Bytes of static shared memory the body's code refers to (its `__shared__` variables).
    pub static_shared_bytes: u64,
}

/// A module-scope `.shared` declaration's (name, bytes): `.shared .align 4 .b8 name[128];`.
fn shared_decl(line: &str) -> Option<(&str, u64)> {
    let line = line.trim().trim_end_matches(';');
    if !(line.starts_with(".shared") || line.starts_with(".extern .shared")) {
        return None;
    }
    let last = line.split_whitespace().last()?;
    let (name, count) = match last.split_once('[') {
        Some((n, c)) => (n, c.trim_end_matches(']').parse::<u64>().unwrap_or(0)),
        None => (last, 1),
    };
    let elem = line.split_whitespace().find_map(|t| match t {
        ".b8" | ".u8" | ".s8" => Some(1),
        ".b16" | ".u16" | ".s16" | ".f16" => Some(2),
        ".b32" | ".u32" | ".s32" | ".f32" => Some(4),
        ".b64" | ".u64" | ".s64" | ".f64" => Some(8),
        _ => None,
    })?;
    Some((name, count * elem))
}

/// Special registers that name the grid or the cluster: a body reading one behaves differently in a
/// fused block (which is block `b` of a grid of lanes) than in its own 1-block launch.
const GRID_REGISTERS: &[&str] = &[
    "%ctaid",
    "%nctaid",
    "%clusterid",
    "%nclusterid",
    "%cluster_ctaid",
    "%cluster_nctaid",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%is_explicit_cluster",
    "%gridid",
];

/// Functions a body may still call (the device runtime's printf and assert): they touch no block state.
const HARMLESS_CALLS: &[&str] = &["vprintf", "__assertfail"];

/// Certifies `entry` of `ptx` (the kernel compiled as fused) as a body that may run as a device
/// function inside a fused block: it reads no grid or cluster register, synchronises no block or
/// cluster (a body's barrier would also count the threads that already returned from it and wait at
/// the next one), never exits the block, has no `griddepcontrol` of its own (the fused kernel waits and
/// triggers for all its bodies), and calls nothing but printf and assert. An `Err` names the
/// instruction.
pub fn fused_body(ptx: &str, entry: &str) -> Result<FusedBody, String> {
    let (_, items) = entry_body(ptx, entry)?;
    // Shared-memory symbols of the module (a function's `__shared__` variables are module-scope in PTX).
    let shared_syms: HashMap<&str, u64> = ptx.lines().filter_map(shared_decl).collect();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    let mut body = FusedBody::default();
    for item in &items {
        let Item::Instr { op, operands, text, .. } = item else { continue };
        if let Some(r) = GRID_REGISTERS.iter().find(|r| operands.iter().any(|o| names(o).contains(r))) {
            return Err(format!("`{text}` reads `{r}`: the kernel uses the grid"));
        }
        let head = op.split('.').next().unwrap_or("");
        let refused = match head {
            "bar" => !op.starts_with("bar.warp"),
            "barrier" | "exit" | "griddepcontrol" | "mapa" | "getctarank" => true,
            "call" => !operands.iter().any(|o| HARMLESS_CALLS.contains(&o.as_str())),
            _ => op.contains("shared::cluster"),
        };
        if refused {
            return Err(format!("`{text}`: a fused body may not synchronise the block or cluster, exit, wait on its own grid dependencies, or call"));
        }
        for o in operands {
            referenced.extend(names(o).into_iter().filter(|n| shared_syms.contains_key(n)));
        }
        body.uses_shared |= op.contains("shared");
    }
    body.uses_shared |= !referenced.is_empty();
    body.static_shared_bytes = referenced.iter().map(|n| shared_syms[n]).sum();
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC's PTX for tests/fixtures/prefetch.cu and three Llama kernels (see the file's header).
    const FIXTURE: &str = include_str!("../tests/fixtures/prefetch.ptx");

    const HAND: &str = r#"
.visible .entry add_one(
	.param .u64 add_one_param_0,
	.param .u32 add_one_param_1
)
{
	.reg .b32 	%r<8>;
	ld.param.u64 	%rd3, [add_one_param_0];
	ld.param.u32 	%r2, [add_one_param_1];
	griddepcontrol.launch_dependents;
	griddepcontrol.wait;
	mov.u32 	%r3, %ctaid.x;
	@%p1 bra 	$L__BB0_3;
	ld.global.f32 	%f1, [%rd1];
$L__BB0_3:
	ret;
}
"#;

    #[test]
    fn real_kernels_golden() {
        // Which params are pointers, per fixture entry (as the graph's signatures declare them).
        let pointers = |e: &str| -> Vec<usize> {
            match e {
                "mix" | "weight_prefetch" | "racy_prefetch" => vec![0, 1, 2],
                "llama_o" => vec![0, 1, 2],
                "llama_qkv" => vec![0, 1, 2, 3, 4, 5, 6],
                "llama_attn" => vec![0, 1, 2, 3, 4, 5],
                _ => vec![0, 1],
            }
        };
        let reads = |e: &str| analyze(FIXTURE, e, |p| pointers(e).contains(&p)).map(|p| p.reads);
        assert_eq!(reads("mix"), Ok(vec![]), "waits first");
        assert_eq!(reads("weight_prefetch"), Ok(vec![1]), "prefetches weights only");
        assert_eq!(reads("racy_prefetch"), Ok(vec![1, 2]), "prefetches weights and its input");
        assert_eq!(reads("llama_o"), Ok(vec![1]), "the projection prefetches its weights (param 1 = w)");
        assert_eq!(reads("llama_qkv"), Ok(vec![4, 5]), "norm weights and wqkv (params 4, 5)");
        assert_eq!(reads("llama_attn"), Ok(vec![]), "the KV cache is this step's: read after the wait");
        assert!(reads("pointer_chase").unwrap_err().contains("not derived from a buffer param"), "{:?}", reads("pointer_chase"));
        assert!(reads("early_store").unwrap_err().contains("writes"), "{:?}", reads("early_store"));
        assert!(reads("early_return").unwrap_err().contains("may end the block"), "{:?}", reads("early_return"));
        assert!(reads("nope").unwrap_err().contains("no `.entry nope`"));
    }

    fn ptr0(p: usize) -> bool {
        p == 0
    }

    #[test]
    fn a_hand_written_kernel_and_its_mutations() {
        assert_eq!(analyze(HAND, "add_one", ptr0), Ok(PreWait::default()));
        // A load before the wait through the param's address: reported, not refused.
        let load_first = HAND.replace("griddepcontrol.launch_dependents;", "ld.global.f32 %f9, [%rd3+16];");
        assert_eq!(analyze(&load_first, "add_one", ptr0).map(|p| p.reads), Ok(vec![0]));
        // The loaded value used as an address: unknown origin.
        let chase = HAND.replace("griddepcontrol.launch_dependents;", "ld.global.u64 %rd9, [%rd3];\n\tld.global.f32 %f9, [%rd9];");
        assert!(analyze(&chase, "add_one", ptr0).is_err());
        // A guarded wait may be skipped: the path goes on to `ret`.
        let guarded = HAND.replace("\tgriddepcontrol.wait;", "\t@%p2 griddepcontrol.wait;");
        assert!(analyze(&guarded, "add_one", ptr0).unwrap_err().contains("may end the block"));
        // A branch over the wait.
        let over = HAND.replace("griddepcontrol.launch_dependents;", "@%p3 bra $L__BB0_3;");
        assert!(analyze(&over, "add_one", ptr0).unwrap_err().contains("may end the block"));
        let unknown = HAND.replace("griddepcontrol.launch_dependents;", "@%p3 bra $L__nowhere;");
        assert!(analyze(&unknown, "add_one", ptr0).unwrap_err().contains("unknown label"));
        for early in ["st.global.u32 [%rd3], %r2;", "atom.global.add.u32 %r5, [%rd3], 1;", "call foo, ();", "red.global.add.u32 [%rd3], 1;"] {
            let m = HAND.replace("griddepcontrol.launch_dependents;", early);
            assert!(analyze(&m, "add_one", ptr0).is_err(), "{early}");
        }
        // Shared memory is the block's own.
        let shared = HAND.replace("griddepcontrol.launch_dependents;", "st.shared.u32 [%r2], %r2;");
        assert_eq!(analyze(&shared, "add_one", ptr0), Ok(PreWait::default()));
        assert!(analyze(&HAND.replace("griddepcontrol.wait;", ""), "add_one", ptr0).is_err());
        // An address from a scalar param alone (a pointer smuggled in a u32/u64) is refused.
        let scalar = HAND.replace("griddepcontrol.launch_dependents;", "cvt.u64.u32 %rd8, %r2;\n\tld.global.f32 %f9, [%rd8];");
        assert!(analyze(&scalar, "add_one", ptr0).unwrap_err().contains("buffer param"));
    }

    #[test]
    fn entry_names_must_match_exactly() {
        let two = HAND.replace("add_one(", "add_one_x(") + &HAND.replace("griddepcontrol.wait;", "st.global.f32 [%rd1], %f1;");
        assert!(analyze(&two, "add_one", ptr0).is_err());
        assert!(analyze(&two, "add_one_x", ptr0).is_ok());
    }
}
