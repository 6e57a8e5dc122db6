//! Ostinato's host-CPU backend: executes a [`Plan`] on a pool of worker threads, honouring exactly the
//! plan's edges through dependency counters. It is the test oracle (serial mode runs the plan's order on
//! the caller's thread), the fallback device, and it carries a race checker that fails a replay when
//! two nodes that touch overlapping bytes, one of them writing, were not ordered.

#![deny(unsafe_code)]

pub mod builtins;
mod checker;
mod collective;
pub mod decode;
pub mod kernel;
pub mod memory;
mod pool;
pub mod schedule;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use ostinato::{
    check_bindings, check_range, check_rebind, check_slot, Arg, Backend, BindError, BufferBinding, BufferId, Exec, KernelRef, KernelSig, NodeOp, ParamKind,
    Plan, Scalar, SlotError, SlotId,
};

pub use kernel::{BufView, CallArg, HostKernel, KernelCtx, Words};
pub use memory::HostMemory;

use kernel::PreparedArg;
use pool::{Pool, PreparedOp, Shared};
pub use schedule::Schedule;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Slot(#[from] SlotError),
    #[error("race: {first} and {second} (param `{second_param}`) touch `{buffer}` bytes [{lo}, {hi}) with a write but no ordering between them")]
    Race { first: String, second: String, second_param: String, buffer: String, lo: u64, hi: u64 },
    #[error("{node}: kernel fault: {message}")]
    Kernel { node: String, message: String },
    /// An argument out of its domain (more threads than the backend takes, say).
    #[error("{operation}: {reason}")]
    Usage { operation: &'static str, reason: String },
    /// A call on a buffer or range the plan does not allow.
    #[error("{operation}: {source}")]
    Range { operation: &'static str, source: ostinato::UsageError },
    /// A call not allowed now: a replay is in flight.
    #[error("{operation}: {reason}")]
    State { operation: &'static str, reason: String },
    /// Host memory could not be had.
    #[error("{operation}: {reason}")]
    OutOfMemory { operation: &'static str, reason: String },
    #[error("cannot start a worker thread: {0}")]
    Thread(String),
    /// The graph asks for what the host backend cannot check or run (a tile map on a kernel whose host
    /// body runs the whole launch).
    #[error("{operation}: {reason}")]
    Unsupported { operation: &'static str, reason: String },
}

impl HostError {
    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ostinato::ErrorKind {
        use ostinato::ErrorKind as K;
        match self {
            HostError::Bind(e) => e.kind(),
            HostError::Slot(e) => e.kind(),
            HostError::Race { .. } | HostError::Kernel { .. } => K::Fault,
            HostError::Usage { .. } => K::Argument,
            HostError::Range { source, .. } => source.kind(),
            HostError::State { .. } => K::State,
            HostError::OutOfMemory { .. } => K::Io,
            HostError::Thread(_) => K::Runtime,
            HostError::Unsupported { .. } => K::Unsupported,
        }
    }
}

/// The most blocks a launch of a per-block host kernel may have (2^26: a few seconds of calls on one
/// core, past every grid the tests and the bench run on the host).
pub const MAX_PER_BLOCK_BLOCKS: u64 = 1 << 26;

/// The most worker threads a host backend takes.
pub const MAX_THREADS: usize = 1024;

/// The host backend. `threads == 0` runs each replay serially, in plan order, on the calling thread.
#[derive(Clone, Copy, Debug)]
pub struct HostBackend {
    pub threads: usize,
    /// Turns on the happens-before race checker (costs a lock per node).
    pub check_races: bool,
    /// With worker threads: always the pool, or only where the plan can use it.
    pub schedule: Schedule,
}

impl HostBackend {
    /// `threads` workers, used for every replay.
    pub fn new(threads: usize) -> Self {
        HostBackend { threads, check_races: false, schedule: Schedule::Pool }
    }
    /// `threads` workers where the plan can use them: a plan with one lane, or with too little work per
    /// node, replays inline on the calling thread ([`schedule::inline_reason`]).
    pub fn auto(threads: usize) -> Self {
        HostBackend { threads, check_races: false, schedule: Schedule::Auto }
    }
    /// The serial reference executor (the oracle).
    pub fn serial() -> Self {
        HostBackend { threads: 0, check_races: false, schedule: Schedule::Pool }
    }
    pub fn with_race_checker(mut self, on: bool) -> Self {
        self.check_races = on;
        self
    }
    /// One worker per available core.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

impl Backend for HostBackend {
    type Kernel = HostKernel;
    type Memory = Arc<HostMemory>;
    type Exec = HostExec;
    type Error = HostError;

    fn name(&self) -> &'static str {
        "host"
    }

    /// `builtin:NAME` from [`builtins`]; a user's own host kernel is passed to `instantiate` directly
    /// (a [`HostKernel`] wraps any Rust function). Host references take no options.
    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<HostKernel, HostError> {
        let refuse = |reason: String| HostError::Bind(BindError::Signature { kernel: sig.name.clone(), reason });
        reference.check_options("host", &[]).map_err(refuse)?;
        let name = reference.builtin_name().ok_or_else(|| {
            refuse(format!("`{}`: the host backend binds `builtin:NAME` references (its built-ins: {})", reference.source, builtins::names().join(", ")))
        })?;
        let name = reference.entry_for(if name.is_empty() { &sig.name } else { name });
        let k = builtins::lookup(name).ok_or_else(|| refuse(format!("no host kernel `{name}` (its built-ins: {})", builtins::names().join(", "))))?;
        k.check_signature(sig).map_err(refuse)?;
        Ok(k)
    }

    fn instantiate(&self, plan: &Plan, kernels: Vec<HostKernel>, buffers: Vec<BufferBinding<Arc<HostMemory>>>) -> Result<HostExec, HostError> {
        let g = plan.graph();
        check_bindings(plan, kernels.len(), &buffers, |m| m.len())?;
        let user: Vec<_> = buffers.iter().map(|b| if let BufferBinding::External(m) = b { Some(m.extent()) } else { None }).collect();
        ostinato::check_disjoint_roots(plan, &user)?;
        if self.threads > MAX_THREADS {
            return Err(HostError::Usage { operation: "instantiate", reason: format!("{} worker threads asked, at most {MAX_THREADS}", self.threads) });
        }
        check_instantiable(g, &kernels, &buffers)?;
        let memory = allocate(g, buffers)?;
        let ops = prepare_ops(g);
        let slots = g.slots().iter().map(|s| AtomicU64::new(s.initial.bits)).collect();
        let checker = if self.check_races { Some(checker::RaceChecker::new(plan)?) } else { None };
        let shared = Arc::new(Shared::new(Arc::new(plan.clone()), ops, kernels, memory, slots, checker));
        let inline = match (self.threads, self.schedule) {
            (0, _) => Some("no worker threads".to_string()),
            (_, Schedule::Pool) => None,
            (_, Schedule::Auto) => schedule::inline_reason(plan),
        };
        let pool = if inline.is_some() { None } else { Some(Pool::spawn(shared.clone(), self.threads)?) };
        let workers = if pool.is_some() { self.threads } else { 0 };
        Ok(HostExec { shared, pool, in_flight: false, inline, workers })
    }
}

/// What `instantiate` refuses before it allocates anything: buffers past the host's free memory, a
/// kernel whose signature differs from the graph's, a tile map on a body of the whole launch, a
/// per-block body over more blocks than the host runs one by one.
fn check_instantiable(g: &ostinato::Graph, kernels: &[HostKernel], buffers: &[BufferBinding<Arc<HostMemory>>]) -> Result<(), HostError> {
    // Everything the exec would allocate, checked before anything is.
    let owned: u64 = g
        .buffers()
        .iter()
        .zip(buffers)
        .enumerate()
        .filter(|(i, (d, b))| d.root.index() == *i && matches!(b, BufferBinding::Allocate))
        .map(|(_, (d, _))| d.size)
        .sum();
    if let Some(free) = memory::available_bytes() {
        if owned > free {
            let largest = g.buffers().iter().max_by_key(|d| d.size).map_or(String::new(), |d| format!(" (the largest, `{}`, {} bytes)", d.name, d.size));
            return Err(HostError::OutOfMemory {
                operation: "instantiate",
                reason: format!("the buffers need {owned} bytes of host memory{largest}, {free} available"),
            });
        }
    }
    for (sig, k) in g.kernels().iter().zip(kernels) {
        k.check_signature(sig).map_err(|reason| BindError::Signature { kernel: sig.name.clone(), reason })?;
    }
    for (v, n) in g.nodes().iter().enumerate() {
        let NodeOp::Kernel { kernel, launch, .. } = &n.op else { continue };
        let v = ostinato::NodeId(v as u32);
        let unsupported = |reason: String| Err(HostError::Unsupported { operation: "instantiate", reason: format!("{}: {reason}", g.describe_node(v)) });
        let blocks = ostinato::tiles::block_count(launch.grid);
        if kernels[kernel.index()].per_block {
            // A per-block body is called once per block: a grid past what the host runs one by one is
            // refused here rather than left to run for hours (65,536³ blocks would be 2^48 calls).
            if blocks > MAX_PER_BLOCK_BLOCKS {
                return unsupported(format!(
                    "its host kernel runs block by block, and the grid has {blocks} blocks, more than the {MAX_PER_BLOCK_BLOCKS} the host runs one by one"
                ));
            }
        } else if let Some(t) = n.tiles.first() {
            // A tile map is checked access by access, block by block: a body of the whole launch cannot be.
            return unsupported(format!(
                "param `{}` declares a tile map, but its host kernel runs the whole launch in one call; a per-block body (HostKernel::per_block) lets the host check each block against its tile",
                g.param_name(v, t.param)
            ));
        }
    }
    Ok(())
}

/// Memory per root allocation: the caller's where bound, else zeroed; views resolve to their root and
/// get an empty placeholder (a view at offset 0 used to get a full-size copy nobody read).
fn allocate(g: &ostinato::Graph, buffers: Vec<BufferBinding<Arc<HostMemory>>>) -> Result<Vec<Arc<HostMemory>>, HostError> {
    g.buffers()
        .iter()
        .zip(buffers)
        .enumerate()
        .map(|(i, (decl, b))| match b {
            BufferBinding::External(m) => Ok(m),
            BufferBinding::Allocate => HostMemory::try_zeroed(if decl.root.index() == i { decl.size } else { 0 })
                .map(Arc::new)
                .map_err(|reason| HostError::OutOfMemory { operation: "instantiate", reason: format!("buffer `{}`: {reason}", decl.name) }),
        })
        .collect()
}

/// Each node of `g` with its arguments resolved to root buffers and offsets, as the workers run it.
fn prepare_ops(g: &ostinato::Graph) -> Vec<PreparedOp> {
    let root_of = |s: &ostinato::Slice| {
        let (root, start, _) = g.root_extent(*s);
        (root.index(), start)
    };
    let mut ops = Vec::with_capacity(g.nodes().len());
    for node in g.nodes() {
        ops.push(match &node.op {
            NodeOp::Kernel { kernel, launch, args } => {
                let sig = g.kernel(*kernel);
                let args = sig
                    .params
                    .iter()
                    .zip(args)
                    .map(|(p, a)| match (&p.kind, a) {
                        (ParamKind::Buffer(access), Arg::Buffer(s)) => {
                            let (root, start) = root_of(s);
                            PreparedArg::Buffer { root, start, len: s.len, access: *access }
                        }
                        (_, Arg::Scalar(v)) => PreparedArg::Scalar(*v),
                        (ParamKind::Scalar(ty), Arg::Slot(s)) => PreparedArg::Slot { index: s.index(), ty: *ty },
                        _ => unreachable!("the graph resolved and type-checked every arg when recording"),
                    })
                    .collect();
                let tiles = if node.tiles.is_empty() {
                    Vec::new()
                } else {
                    (0..sig.params.len()).map(|p| node.tiles.iter().find(|t| t.param == p).map(|t| t.map.clone())).collect()
                };
                PreparedOp::Kernel { kernel: kernel.index(), args, launch: *launch, tiles }
            }
            NodeOp::Copy { src, dst } => PreparedOp::Copy { src: root_of(src), dst: root_of(dst), len: src.len },
            NodeOp::Fill { dst, value } => PreparedOp::Fill { dst: root_of(dst), len: dst.len, value: *value },
            NodeOp::Collective { op, dtype, send, recv } => {
                let extent = |s: &ostinato::Slice| {
                    let (root, start) = root_of(s);
                    (root, start, s.len)
                };
                PreparedOp::Collective { op: *op, ty: *dtype, send: send.iter().map(extent).collect(), recv: recv.iter().map(extent).collect() }
            }
        });
    }
    ops
}

/// A retained host instantiation of a plan.
pub struct HostExec {
    shared: Arc<Shared>,
    pool: Option<Pool>,
    in_flight: bool,
    inline: Option<String>,
    /// Worker threads of the pool (0: replays run on the calling thread).
    workers: usize,
}

impl HostExec {
    /// Why replays run inline on the calling thread, or `None` when they run on the worker pool.
    pub fn inline_reason(&self) -> Option<&str> {
        self.inline.as_deref()
    }

    /// The memory behind a buffer (its root allocation) and the buffer's offset in it.
    pub fn memory(&self, buffer: BufferId) -> Option<(Arc<HostMemory>, u64)> {
        let g = self.shared.plan.graph();
        let decl = g.buffers().get(buffer.index())?;
        let memory = self.shared.memory.read().unwrap_or_else(|p| p.into_inner());
        Some((memory[decl.root.index()].clone(), decl.root_offset))
    }

    fn idle(&self, operation: &'static str) -> Result<(), HostError> {
        if self.in_flight {
            return Err(HostError::State { operation, reason: "a replay is in flight; call wait() first".into() });
        }
        Ok(())
    }
}

impl Exec for HostExec {
    type Error = HostError;
    type Memory = Arc<HostMemory>;

    fn plan(&self) -> &Plan {
        &self.shared.plan
    }

    fn replay(&mut self) -> Result<(), HostError> {
        if self.in_flight {
            self.wait()?;
        }
        match &self.pool {
            None => {
                if let Some(c) = &self.shared.checker {
                    c.reset();
                }
                for &v in self.shared.plan.order() {
                    self.shared.run_node(v, 0)?;
                }
                Ok(())
            }
            Some(_) => {
                self.shared.start();
                self.in_flight = true;
                Ok(())
            }
        }
    }

    fn wait(&mut self) -> Result<(), HostError> {
        if !self.in_flight {
            return Ok(());
        }
        self.shared.help_until_idle();
        self.in_flight = false;
        match self.shared.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn set_slot(&mut self, slot: SlotId, value: Scalar) -> Result<(), HostError> {
        self.idle("set_slot")?;
        check_slot(&self.shared.plan, slot, value)?;
        self.shared.slots[slot.index()].store(value.bits, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn write_buffer(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<(), HostError> {
        self.idle("write_buffer")?;
        check_range(&self.shared.plan, buffer, offset, data.len() as u64).map_err(|source| HostError::Range { operation: "write_buffer", source })?;
        let (m, base) =
            self.memory(buffer).ok_or(HostError::Range { operation: "write_buffer", source: ostinato::UsageError::UnknownBuffer { id: buffer.0 } })?;
        m.write(base + offset, data);
        Ok(())
    }

    fn read_buffer(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<(), HostError> {
        self.idle("read_buffer")?;
        check_range(&self.shared.plan, buffer, offset, out.len() as u64).map_err(|source| HostError::Range { operation: "read_buffer", source })?;
        let (m, base) =
            self.memory(buffer).ok_or(HostError::Range { operation: "read_buffer", source: ostinato::UsageError::UnknownBuffer { id: buffer.0 } })?;
        m.read(base + offset, out);
        Ok(())
    }

    fn rebind(&mut self, buffer: BufferId, memory: Arc<HostMemory>) -> Result<(), HostError> {
        self.idle("rebind")?;
        check_rebind(&self.shared.plan, buffer, memory.len())?;
        {
            let g = self.shared.plan.graph();
            let now = self.shared.memory.read().unwrap_or_else(|p| p.into_inner());
            let mut extents: Vec<_> =
                now.iter().enumerate().map(|(i, m)| (g.buffer(ostinato::BufferId(i as u32)).root.index() == i).then(|| m.extent())).collect();
            extents[buffer.index()] = Some(memory.extent());
            ostinato::check_disjoint_roots(&self.shared.plan, &extents)?;
        }
        self.shared.memory.write().unwrap_or_else(|p| p.into_inner())[buffer.index()] = memory;
        Ok(())
    }

    /// Every node stamped by the thread that runs it, on the host's monotonic clock.
    fn trace(&mut self, replays: usize) -> Result<ostinato::Trace, HostError> {
        self.wait()?;
        let n = self.shared.plan.node_count();
        let mut spans: Vec<Vec<ostinato::Span>> = Vec::new();
        spans.try_reserve_exact(replays).map_err(|e| HostError::OutOfMemory { operation: "trace", reason: format!("{replays} replays' bars: {e}") })?;
        self.shared.stamps.on.store(true, std::sync::atomic::Ordering::Relaxed);
        let ran: Result<(), HostError> = (0..replays).try_for_each(|_| {
            self.replay()?;
            self.wait()?;
            let mut bars = Vec::new();
            bars.try_reserve_exact(n).map_err(|e| HostError::OutOfMemory { operation: "trace", reason: format!("{n} bars: {e}") })?;
            bars.extend((0..n).map(|v| {
                let (start_ns, end_ns, place) = self.shared.stamps.get(v);
                ostinato::Span { unit: v as u32, place, start_ns, end_ns }
            }));
            spans.push(bars);
            Ok(())
        });
        self.shared.stamps.on.store(false, std::sync::atomic::Ordering::Relaxed);
        ran?;
        let plan = &self.shared.plan;
        let unit_of: Vec<usize> = (0..n).collect();
        Ok(ostinato::Trace {
            backend: "host".into(),
            clock: "the host's monotonic clock, ns since the exec was made".into(),
            places: std::iter::once("caller thread".to_string()).chain((1..=self.workers).map(|i| format!("worker {i}"))).collect(),
            units: ostinato::trace::unit_per_node(n),
            edges: ostinato::trace::edges_of(plan, &unit_of, |_| ostinato::EdgeKind::Full),
            replays: spans,
            slots: self
                .shared
                .slots
                .iter()
                .zip(plan.graph().slots())
                .map(|(bits, s)| ostinato::Scalar { ty: s.ty, bits: bits.load(std::sync::atomic::Ordering::Relaxed) })
                .collect(),
            notes: match &self.inline {
                Some(why) => vec![format!("replays run on the calling thread ({why})")],
                None => Vec::new(),
            },
            // One monotonic clock, read the same way on every thread.
            order_slack_ns: 0,
        })
    }
}

impl Drop for HostExec {
    fn drop(&mut self) {
        self.shared.wait_idle();
    }
}
