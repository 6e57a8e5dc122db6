//! What a kernel body fused into a resident block (the CUDA backend's chain fusion) uses, read from its
//! PTX as fused (compiled with `blockIdx` and `gridDim` bound to the one block of a 1-block launch).

use std::collections::{BTreeSet, HashMap};

use super::access::{entry_access, HARMLESS_CALLS};
use super::parse::{names, ModuleInfo, Space};

/// A certified body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FusedBody {
    /// The body touches shared memory: the fused kernel puts a barrier between it and its neighbours,
    /// whose shared memory may be the same bytes.
    pub uses_shared: bool,
    /// Bytes of static shared memory the body's code refers to (its `__shared__` variables).
    pub static_shared_bytes: u64,
    /// The body's first block barrier (`bar.sync`, `barrier.sync`, `bar.red`, ...), where it has one.
    /// Such a body runs only as the one body of its fused block, with all the block's threads: its
    /// barrier then counts the threads it counts in its own launch. Beside another body in one block, a
    /// thread that returned from it early would wait at the next barrier of the block instead.
    pub block_barrier: Option<String>,
    /// Params the body reads through the non-coherent path (`ld.global.nc` — `__ldg` —, `ldu`,
    /// texture and surface reads), each with the first such instruction. The ISA allows that path
    /// only on memory read-only for the whole kernel: such a body may not follow, in one fused
    /// kernel, a body that writes those bytes.
    pub noncoherent: Vec<(usize, String)>,
    /// A non-coherent read whose address the analysis cannot attribute to a param (it may read any
    /// buffer): the body may not follow any body that writes.
    pub noncoherent_unknown: Option<String>,
    /// Params the body reaches other than by plain weak loads and stores (`access::is_plain_access`),
    /// each with the first such instruction: their tiles may not be staged in shared memory (an
    /// atomic, a cache qualifier or a `.global` asm names global memory, not the generic address).
    pub unplain: Vec<(usize, String)>,
    /// An access (or call) whose address the analysis cannot attribute to a param: it may touch any
    /// tile, so none of its group's tiles may be staged.
    pub unattributed: Option<String>,
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

/// Certifies `entry` of `ptx` (the kernel compiled as fused) as a body that may run as a device
/// function inside a fused block: it reads no grid or cluster register, synchronises no cluster,
/// never exits the block, has no `griddepcontrol` of its own (the fused kernel waits and triggers for
/// all its bodies), and calls nothing but printf and assert. An `Err` names the instruction. A block
/// barrier is allowed and reported ([`FusedBody::block_barrier`]: such a body fuses only as the one
/// body of its block), as are its non-coherent reads, for the fusion to check against the group.
pub fn fused_body(ptx: &str, entry: &str) -> Result<FusedBody, String> {
    let module = ModuleInfo::read(ptx);
    let entry = super::parse::entry(ptx, entry)?;
    let shared_syms: HashMap<&str, u64> = module.symbols.iter().filter(|(_, (s, _))| *s == Space::Shared).map(|(n, (_, b))| (n.as_str(), *b)).collect();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    let mut body = FusedBody::default();
    for ins in entry.instrs() {
        if let Some(r) = GRID_REGISTERS.iter().find(|r| ins.operands.iter().any(|o| names(o).contains(r))) {
            return Err(format!("`{}` reads `{r}`: the kernel uses the grid", ins.text));
        }
        let refused = match ins.head() {
            "bar" | "barrier" if ins.op.contains("cluster") => true,
            "bar" | "barrier" => {
                if !ins.op.starts_with("bar.warp") && body.block_barrier.is_none() {
                    body.block_barrier = Some(ins.text.clone());
                }
                false
            }
            "exit" | "griddepcontrol" | "mapa" | "getctarank" => true,
            "call" => !ins.operands.iter().any(|o| HARMLESS_CALLS.contains(&o.as_str())),
            _ => ins.op.contains("shared::cluster"),
        };
        if refused {
            return Err(format!("`{}`: a fused body may not synchronise its cluster, exit, wait on its own grid dependencies, or call", ins.text));
        }
        for o in &ins.operands {
            referenced.extend(names(o).into_iter().filter(|n| shared_syms.contains_key(n)));
        }
        body.uses_shared |= ins.op.contains("shared");
    }
    body.uses_shared |= !referenced.is_empty();
    body.static_shared_bytes = referenced.iter().map(|n| shared_syms[n]).sum();
    // Every param of a body is a pointer or a scalar; a non-coherent read is attributed to whichever
    // params its address derives from (a scalar among them only offsets it).
    let access = entry_access(&module, &entry, "fused body", &|_| true);
    body.noncoherent = access.noncoherent.into_iter().map(|(p, e)| (p, e.instruction)).collect();
    body.noncoherent_unknown = access.unknown_noncoherent.map(|e| e.instruction);
    body.unplain = access.unplain.into_iter().map(|(p, e)| (p, e.instruction)).collect();
    body.unattributed = access.unattributed.map(|e| e.instruction);
    Ok(body)
}

/// A kernel certified as the body of a tile hand-off wrapper (`ostinato-cuda`'s `handoff`): it runs
/// once per block with the real grid, so unlike a fused body it may synchronise its block; what it may
/// not do is leave the block early by `exit` (the wrapper counts every thread's return before it
/// publishes the block), wait on or trigger grid dependencies itself, call unknown code, or touch its
/// cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandoffBody {
    /// `.maxntid` of the entry (its `__launch_bounds__` threads), to carry to the wrapper.
    pub max_threads: Option<[u32; 3]>,
    /// `.minnctapersm` of the entry (its `__launch_bounds__` blocks per SM).
    pub min_blocks: Option<u32>,
    /// Params it reads through the non-coherent path (with the instruction): a hand-off consumer may
    /// not read what a running producer writes through it.
    pub noncoherent: Vec<(usize, String)>,
    pub noncoherent_unknown: Option<String>,
}

/// Certifies `entry` of `ptx` (compiled as fused bodies are, `OST_NO_PDL`) as a hand-off body, or says
/// which instruction refuses it.
pub fn handoff_body(ptx: &str, entry: &str) -> Result<HandoffBody, String> {
    let module = ModuleInfo::read(ptx);
    let parsed = super::parse::entry(ptx, entry)?;
    for ins in parsed.instrs() {
        let refused = match ins.head() {
            "exit" | "griddepcontrol" | "mapa" | "getctarank" => true,
            "call" => !ins.operands.iter().any(|o| HARMLESS_CALLS.contains(&o.as_str())),
            "barrier" | "bar" => ins.op.contains("cluster"),
            _ => ins.op.contains("shared::cluster") || ins.operands.iter().any(|o| names(o).iter().any(|n| n.starts_with("%cluster"))),
        };
        if refused {
            return Err(format!("`{}`: a hand-off body may not exit early, wait on or trigger its own grid dependencies, call, or use its cluster", ins.text));
        }
    }
    let access = entry_access(&module, &parsed, "hand-off body", &|_| true);
    let (max_threads, min_blocks) = launch_bounds(ptx, entry);
    Ok(HandoffBody {
        max_threads,
        min_blocks,
        noncoherent: access.noncoherent.into_iter().map(|(p, e)| (p, e.instruction)).collect(),
        noncoherent_unknown: access.unknown_noncoherent.map(|e| e.instruction),
    })
}

/// The `.maxntid` and `.minnctapersm` directives of `entry` (between its parameter list and its body).
pub fn launch_bounds(ptx: &str, entry: &str) -> (Option<[u32; 3]>, Option<u32>) {
    let Some(at) = ptx.find(&format!(".entry {entry}(")) else { return (None, None) };
    let head = &ptx[at..ptx[at..].find('{').map_or(ptx.len(), |b| at + b)];
    let after = |key: &str| head.lines().find_map(|l| l.trim().strip_prefix(key).map(|r| r.trim().trim_end_matches(';').to_string()));
    let max = after(".maxntid").and_then(|r| {
        let v: Vec<u32> = r.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        (!v.is_empty()).then(|| [v[0], v.get(1).copied().unwrap_or(1), v.get(2).copied().unwrap_or(1)])
    });
    (max, after(".minnctapersm").and_then(|r| r.parse().ok()))
}
