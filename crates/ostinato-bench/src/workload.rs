//! What a row of the matrix is (`docs/reproduce.md` lists the rows; [`crate::families`] makes them): a
//! recorded graph plus what every arm needs to run and check it the same way — initial contents,
//! replays per sample, a slot schedule, which buffers the oracle checks and how, where each kernel's
//! implementation comes from on each backend, and the stream schedule a skilled CUDA user would write
//! by hand for the baselines.

use std::sync::Arc;

use ostinato::file::BufferInit;
use ostinato::{Arg, BufferId, Graph, KernelId, Launch, NodeId, Scalar, SlotId};

use crate::pack::PackKernel;

/// A row's initial bytes of a buffer, made when the row runs (every matrix builds all its rows, and a
/// filter may then drop most: generated data is made only for the rows that run).
pub type Generate = Arc<dyn Fn() -> Vec<u8> + Send + Sync>;

/// Per-element bounds of a [`Check::Within`], derived on first use and kept (the check runs on every
/// sample).
pub struct Bounds {
    make: Box<dyn Fn() -> Vec<Vec<f32>> + Send + Sync>,
    value: std::sync::OnceLock<Vec<Vec<f32>>>,
}

impl Bounds {
    /// The bounds `make` derives, one list per checked buffer.
    pub fn new(make: impl Fn() -> Vec<Vec<f32>> + Send + Sync + 'static) -> Arc<Bounds> {
        Arc::new(Bounds { make: Box::new(make), value: std::sync::OnceLock::new() })
    }
    pub fn get(&self) -> &[Vec<f32>] {
        self.value.get_or_init(|| (self.make)())
    }
}

impl std::fmt::Debug for Bounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bounds({})", if self.value.get().is_some() { "derived" } else { "not yet derived" })
    }
}

/// How outputs are compared with the host oracle.
#[derive(Clone, Debug)]
pub enum Check {
    /// Bit for bit.
    Exact,
    /// f32 buffers: relative L2 error ‖got − want‖ / ‖want‖ at most this (and no NaN).
    RelL2(f64),
    /// Decode: checked buffer 0 holds logits, within this of the oracle's relative to their largest
    /// magnitude; buffer 1 the greedy token, equal to the oracle's wherever the oracle's top-1 margin
    /// exceeds that tolerance ([`ostinato_llama::agree`]).
    Logits(f32),
    /// f32 buffers: every element within its own absolute bound of the oracle's (and finite). The
    /// bounds (one list per checked buffer) are derived from the arithmetic by the row that sets them
    /// (the quantized GEMV rows: `families::gemv`), never fitted to measurements.
    Within(Arc<Bounds>),
    /// A run of dependent Llama steps, checked against the f32 reference fed the run's own tokens
    /// ([`crate::families::llama::GreedyRun`]); the host oracle's outputs are not used.
    GreedyRun(Arc<crate::families::llama::GreedyRun>),
}

impl Check {
    /// How the report names the check.
    pub fn describe(&self) -> String {
        match self {
            Check::Exact => "exact".into(),
            Check::RelL2(t) => format!("f32 relative L2 <= {t:.0e}"),
            Check::Logits(t) => format!("logits |diff| <= {t:.0e}, greedy token equal beyond that margin"),
            Check::Within(b) => {
                let largest = b.get().iter().flatten().fold(0f32, |m, &x| m.max(x));
                format!("f32 |diff| within a bound per element derived from the arithmetic (largest {largest:.2e})")
            }
            Check::GreedyRun(g) => g.describe(),
        }
    }
}

/// One launch of the hand-written baseline: on which stream, after which nodes' events.
#[derive(Clone, Debug)]
pub struct UserLaunch {
    pub stream: usize,
    pub waits: Vec<NodeId>,
}

/// Where a row's kernels come from, per backend.
#[derive(Clone)]
pub enum Kernels {
    /// The backends' generic built-ins, by kernel name.
    Builtins,
    /// The Llama pack (`ostinato-llama`).
    Llama,
    /// The benchmark's kernel pack ([`crate::pack`]): one implementation per kernel of the graph, in
    /// kernel-id order.
    Pack(Arc<[PackKernel]>),
}

impl Kernels {
    /// The pack kernel bound for `kernel` (`None` unless the row's kernels come from the bench pack).
    pub fn pack(&self, kernel: KernelId) -> Option<&PackKernel> {
        match self {
            Kernels::Pack(p) => p.get(kernel.index()),
            _ => None,
        }
    }
}

/// A row's own protocol minimums, where it runs shorter than the configured ones (each is the smaller of
/// the two): the kernel-family rows, each of ten small ops, whose arms follow one another with the GPU
/// busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowProtocol {
    pub warmup_ms: u64,
    pub timed_ms: u64,
}

pub struct Workload {
    /// Stable row id, e.g. `grid/serial/n941/b1`.
    pub id: String,
    pub family: &'static str,
    pub graph: Graph,
    pub inits: Vec<Option<BufferInit>>,
    /// Buffers whose initial bytes are data rather than a pattern (they replace the pattern's), made
    /// when the row runs.
    pub data: Vec<(BufferId, Generate)>,
    /// Bytes of weights and cache one replay reads (decode rows: the memory floor's numerator).
    pub bytes_per_replay: Option<u64>,
    /// Decode rows: the model and the position every replay runs at.
    pub model: Option<(ostinato_llama::LlamaConfig, u32)>,
    /// Replays of the whole graph per timed sample.
    pub replays: usize,
    /// A slot patched before every replay, with its value for replay r.
    pub slot_schedule: Option<(SlotId, Vec<Scalar>)>,
    pub checked: Vec<BufferId>,
    pub check: Check,
    /// Kernel dispatches per replay (the divisor of "time per dispatch").
    pub dispatches: usize,
    /// The baseline's stream assignment, in recording order; `streams` streams in all.
    pub user: Vec<UserLaunch>,
    pub streams: usize,
    /// The workload is independent chains (baselines fork/join over `streams` streams).
    pub independent: bool,
    /// Where its kernels' implementations come from.
    pub kernels: Kernels,
    /// Its own, shorter protocol minimums (`None`: the configured ones).
    pub protocol: Option<RowProtocol>,
}

impl Workload {
    /// A row of `graph` whose checked buffers are compared exactly, one replay's dispatches counted
    /// from the graph, built-in kernels, recorded on one stream: the fields every family shares, for
    /// it to change what differs.
    pub fn new(id: String, family: &'static str, graph: Graph, replays: usize) -> Workload {
        let n = graph.nodes().len();
        Workload {
            id,
            family,
            inits: vec![None; graph.buffers().len()],
            graph,
            data: Vec::new(),
            bytes_per_replay: None,
            model: None,
            replays,
            slot_schedule: None,
            checked: Vec::new(),
            check: Check::Exact,
            dispatches: n,
            user: (0..n).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect(),
            streams: 1,
            independent: false,
            kernels: Kernels::Builtins,
            protocol: None,
        }
    }
}

/// Ops per row of the kernel families, as the system Ostinato re-imagines measures them: ten ops, each
/// a read-modify-write of one output (serial) or of its own disjoint slice of it (independent).
pub const OPS: usize = 10;

/// How the ten ops of a kernel-family row depend on each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every op reads and writes the same output: a chain of ten.
    Serial,
    /// Op `i` reads and writes slice `i` of the output: ten ops with no ordering between them.
    Independent,
}

impl Mode {
    pub const BOTH: [Mode; 2] = [Mode::Serial, Mode::Independent];
    /// The mode in row ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Serial => "serial",
            Mode::Independent => "indep",
        }
    }
    /// The family name of rows of `kind` in this mode (`reduction serial`, `reduction independent`).
    pub fn family(self, serial: &'static str, independent: &'static str) -> &'static str {
        match self {
            Mode::Serial => serial,
            Mode::Independent => independent,
        }
    }
    /// Output slices the ops write: one shared (serial) or one each (independent).
    pub fn slices(self) -> usize {
        match self {
            Mode::Serial => 1,
            Mode::Independent => OPS,
        }
    }
}

/// Bytes a slice of `bytes` takes in a buffer of slices: rounded up to 256, so that every slice starts
/// where a Vulkan storage binding may (the largest `minStorageBufferOffsetAlignment` allowed).
pub fn slice_stride(bytes: u64) -> u64 {
    bytes.div_ceil(256) * 256
}

/// The slice an op of `mode` writes: op `op`'s own slice of `stride` bytes (its first `len`), or the
/// one slice every op shares.
pub fn op_slice(buffer: BufferId, mode: Mode, op: usize, stride: u64, len: u64) -> ostinato::Slice {
    let i = if mode == Mode::Serial { 0 } else { op as u64 };
    ostinato::Slice { buffer, offset: i * stride, len }
}

/// Records the ten ops of a kernel-family row: for each op, `steps(op)` gives its launches in order
/// (kernel, grid, args); the baseline puts op `i` on stream `i % 4` in independent mode (as a skilled
/// user spreads independent work over streams), every op on one stream in serial mode.
pub fn record_ops(g: &mut Graph, mode: Mode, mut steps: impl FnMut(usize) -> Vec<(KernelId, Launch, Vec<Arg>)>) -> Vec<UserLaunch> {
    let mut user = Vec::new();
    for op in 0..OPS {
        for (kernel, launch, args) in steps(op) {
            g.add_launch(kernel, launch, &args, &[]).expect("a family's launches are valid by construction");
            user.push(UserLaunch { stream: if mode == Mode::Serial { 0 } else { op % 4 }, waits: vec![] });
        }
    }
    user
}

/// The shorter protocol of the kernel-family rows (see [`RowProtocol`]): at least 5 ms of warm-up and
/// 5 ms of timed samples per arm (still at least the configured sample counts).
pub const FAMILY_PROTOCOL: RowProtocol = RowProtocol { warmup_ms: 5, timed_ms: 5 };

/// A kernel-family row: its graph with the ten ops recorded, the stream schedule of `mode`, the bench
/// pack's `kernels`, the family protocol; the caller sets inits, data and what is checked.
pub fn family_row(id: String, family: &'static str, graph: Graph, mode: Mode, user: Vec<UserLaunch>, kernels: Vec<PackKernel>, replays: usize) -> Workload {
    let independent = mode == Mode::Independent;
    Workload {
        dispatches: user.len(),
        user,
        streams: if independent { 4 } else { 1 },
        independent,
        kernels: Kernels::Pack(kernels.into()),
        protocol: Some(FAMILY_PROTOCOL),
        ..Workload::new(id, family, graph, replays)
    }
}

/// A whole buffer as an argument.
pub fn whole(b: BufferId) -> Arg {
    Arg::Whole(b)
}

/// A u32 scalar argument.
pub fn u32_arg(v: u32) -> Arg {
    Arg::Scalar(Scalar::u32(v))
}

/// Data given as bytes already made, as a [`Generate`].
pub fn bytes(data: Vec<u8>) -> Generate {
    let data = Arc::new(data);
    Arc::new(move || data.as_ref().clone())
}
