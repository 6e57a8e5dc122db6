//! The replay engine: persistent worker threads that run a plan's nodes as their dependency counters
//! reach zero. No per-level barrier: a node starts the moment its last predecessor finishes. A worker
//! that makes exactly one successor ready runs it itself (no queue round trip). Nothing is allocated
//! per replay: counters are reset in place and the ready queue has its full capacity from the start.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use ostinato::{NodeId, Plan};

use crate::checker::RaceChecker;
use crate::kernel::{HostKernel, KernelCtx, PreparedArg};
use crate::memory::HostMemory;
use crate::HostError;

/// A node resolved for execution.
pub(crate) enum PreparedOp {
    /// `tiles`: per param, the node's tile map (empty where the node has none).
    Kernel {
        kernel: usize,
        args: Vec<PreparedArg>,
        launch: ostinato::Launch,
        tiles: Vec<Option<ostinato::TileMap>>,
    },
    Copy {
        src: (usize, u64),
        dst: (usize, u64),
        len: u64,
    },
    Fill {
        dst: (usize, u64),
        len: u64,
        value: u32,
    },
    Collective {
        op: ostinato::collective::CollectiveOp,
        ty: ostinato::ScalarType,
        send: Vec<crate::collective::Extent>,
        recv: Vec<crate::collective::Extent>,
    },
}

/// Everything the workers share with the exec.
pub(crate) struct Shared {
    pub plan: Arc<Plan>,
    pub ops: Vec<PreparedOp>,
    pub kernels: Vec<HostKernel>,
    /// Per buffer: its root allocation (views: a placeholder). Written only by `rebind`, while no
    /// replay runs; a node takes the (uncontended) read lock once.
    pub memory: RwLock<Vec<Arc<HostMemory>>>,
    pub slots: Vec<AtomicU64>,
    pub checker: Option<RaceChecker>,
    /// Each node's start and end while a traced replay runs (checked once per node otherwise).
    pub stamps: Stamps,
    pending: Vec<AtomicU32>,
    remaining: AtomicUsize,
    failed: AtomicBool,
    error: Mutex<Option<HostError>>,
    queue: Mutex<Queue>,
    work: Condvar,
    done: Condvar,
}

struct Queue {
    ready: VecDeque<u32>,
    shutdown: bool,
    running: bool,
}

impl Shared {
    pub(crate) fn new(
        plan: Arc<Plan>,
        ops: Vec<PreparedOp>,
        kernels: Vec<HostKernel>,
        memory: Vec<Arc<HostMemory>>,
        slots: Vec<AtomicU64>,
        checker: Option<RaceChecker>,
    ) -> Self {
        let n = plan.node_count();
        Shared {
            plan,
            ops,
            kernels,
            memory: RwLock::new(memory),
            slots,
            checker,
            stamps: Stamps::new(n),
            pending: (0..n).map(|_| AtomicU32::new(0)).collect(),
            remaining: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            queue: Mutex::new(Queue { ready: VecDeque::with_capacity(n), shutdown: false, running: false }),
            work: Condvar::new(),
            done: Condvar::new(),
        }
    }

    /// Runs one node's work (checker first, if on).
    pub(crate) fn execute(&self, v: NodeId) -> Result<(), HostError> {
        if let Some(c) = &self.checker {
            c.on_start(self.plan.graph(), v)?;
        }
        let g = self.plan.graph();
        let memory = self.memory.read().unwrap_or_else(|p| p.into_inner());
        match &self.ops[v.index()] {
            PreparedOp::Kernel { kernel, args, launch, tiles } => {
                let k = &self.kernels[*kernel];
                let cx = KernelCtx { args, memory: &memory, slots: &self.slots, launch: *launch, block: None, tiles, names: Some(&k.sig) };
                let fault = |message: String| HostError::Kernel { node: g.describe_node(v), message };
                match catch_unwind(AssertUnwindSafe(|| k.run(&cx))) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(m)) => Err(fault(m)),
                    Err(p) => Err(fault(format!("panicked: {}", panic_message(&p)))),
                }
            }
            PreparedOp::Copy { src, dst, len } => {
                let (s, d) = (&memory[src.0], &memory[dst.0]);
                if (src.1 | dst.1 | len) % 4 == 0 {
                    for off in (0..*len).step_by(4) {
                        d.store_u32(dst.1 + off, s.load_u32(src.1 + off));
                    }
                } else {
                    for off in 0..*len {
                        d.store_u8(dst.1 + off, s.load_u8(src.1 + off));
                    }
                }
                Ok(())
            }
            PreparedOp::Fill { dst, len, value } => {
                let m = &memory[dst.0];
                for i in 0..len / 4 {
                    m.store_u32(dst.1 + 4 * i, *value);
                }
                Ok(())
            }
            PreparedOp::Collective { op, ty, send, recv } => {
                crate::collective::run(*op, *ty, send, recv, &memory).map_err(|message| HostError::Kernel { node: g.describe_node(v), message })
            }
        }
    }

    fn record_error(&self, e: HostError) {
        self.failed.store(true, Ordering::Release);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    pub(crate) fn take_error(&self) -> Option<HostError> {
        self.failed.store(false, Ordering::Relaxed);
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Runs node `v` on thread `thread` (0: the caller's, `i + 1`: worker `i`), its start and end
    /// stamped where a traced replay runs.
    pub(crate) fn run_node(&self, v: NodeId, thread: u32) -> Result<(), HostError> {
        if !self.stamps.on.load(Ordering::Relaxed) {
            return self.execute(v);
        }
        self.stamps.start(v, thread);
        let r = self.execute(v);
        self.stamps.end(v);
        r
    }

    /// Runs `v` on thread `thread`, then releases its successors; returns one successor to run next
    /// on this thread.
    fn run_and_release(&self, v: u32, thread: u32) -> Option<u32> {
        // After a failure the remaining nodes are released without running, so the replay ends.
        if !self.failed.load(Ordering::Acquire) {
            if let Err(e) = self.run_node(NodeId(v), thread) {
                self.record_error(e);
            }
        }
        let mut next = None;
        for &s in self.plan.succs(NodeId(v)) {
            // AcqRel: the successor's reads see this node's writes (and all its other predecessors').
            if self.pending[s as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                match next {
                    None => next = Some(s),
                    Some(_) => {
                        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                        q.ready.push_back(s);
                        self.work.notify_one();
                    }
                }
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.running = false;
            self.done.notify_all();
        }
        next
    }

    /// Starts a replay: resets counters in place and queues the roots.
    pub(crate) fn start(&self) {
        let n = self.plan.node_count();
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if n == 0 {
            return;
        }
        if let Some(c) = &self.checker {
            c.reset();
        }
        for (i, p) in self.pending.iter().enumerate() {
            p.store(self.plan.preds(NodeId(i as u32)).len() as u32, Ordering::Relaxed);
        }
        self.remaining.store(n, Ordering::Release);
        q.running = true;
        for i in 0..n as u32 {
            if self.plan.preds(NodeId(i)).is_empty() {
                q.ready.push_back(i);
            }
        }
        self.work.notify_all();
    }

    /// Runs ready nodes on the calling thread until the replay in flight finished: the waiting thread
    /// works instead of sleeping, so a chain runs without any thread hand-off.
    pub(crate) fn help_until_idle(&self) {
        loop {
            let v = {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                match q.ready.pop_front() {
                    Some(v) => v,
                    None if !q.running => return,
                    None => {
                        drop(q);
                        return self.wait_idle();
                    }
                }
            };
            let mut next = Some(v);
            while let Some(v) = next {
                next = self.run_and_release(v, 0);
            }
        }
    }

    /// Blocks until the replay in flight (if any) finished.
    pub(crate) fn wait_idle(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        while q.running {
            q = self.done.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn worker(&self, thread: u32) {
        loop {
            let v = {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(v) = q.ready.pop_front() {
                        break v;
                    }
                    if q.shutdown {
                        return;
                    }
                    q = self.work.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            let mut next = Some(v);
            while let Some(v) = next {
                next = self.run_and_release(v, thread);
            }
        }
    }
}

/// Each node's start and end (ns since the exec was made) and the thread that ran it, written by the
/// threads that run the nodes while `on`; sized once, when the exec is made, so tracing allocates
/// nothing per replay and an untraced node pays one relaxed load.
pub(crate) struct Stamps {
    pub on: AtomicBool,
    epoch: Instant,
    start: Vec<AtomicU64>,
    end: Vec<AtomicU64>,
    thread: Vec<AtomicU32>,
}

impl Stamps {
    fn new(n: usize) -> Stamps {
        let zeros = || (0..n).map(|_| AtomicU64::new(0)).collect();
        Stamps { on: AtomicBool::new(false), epoch: Instant::now(), start: zeros(), end: zeros(), thread: (0..n).map(|_| AtomicU32::new(0)).collect() }
    }
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn start(&self, v: NodeId, thread: u32) {
        self.thread[v.index()].store(thread, Ordering::Relaxed);
        self.start[v.index()].store(self.now(), Ordering::Relaxed);
    }
    fn end(&self, v: NodeId) {
        self.end[v.index()].store(self.now(), Ordering::Relaxed);
    }
    /// Node `v`'s (start, end, thread) of the replay that finished last (read after its wait, which
    /// orders every node's stores before it).
    pub(crate) fn get(&self, v: usize) -> (u64, u64, u32) {
        (self.start[v].load(Ordering::Relaxed), self.end[v].load(Ordering::Relaxed), self.thread[v].load(Ordering::Relaxed))
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into())
}

/// The worker threads of one exec.
pub(crate) struct Pool {
    pub shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts `threads` workers and returns once every one of them is running, so that no thread
    /// start-up work (which allocates) overlaps the first replays.
    pub(crate) fn spawn(shared: Arc<Shared>, threads: usize) -> Result<Pool, HostError> {
        let mut handles = Vec::with_capacity(threads);
        let started = Arc::new(AtomicUsize::new(0));
        for i in 0..threads {
            let (s, up) = (shared.clone(), started.clone());
            let h = std::thread::Builder::new().name(format!("ostinato-host-{i}")).spawn(move || {
                up.fetch_add(1, Ordering::Release);
                s.worker(i as u32 + 1)
            });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let mut pool = Pool { shared, threads: handles };
                    pool.shutdown();
                    return Err(HostError::Thread(e.to_string()));
                }
            }
        }
        while started.load(Ordering::Acquire) < threads {
            std::thread::yield_now();
        }
        Ok(Pool { shared, threads: handles })
    }

    fn shutdown(&mut self) {
        {
            let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.shutdown = true;
            self.shared.work.notify_all();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.wait_idle();
        self.shutdown();
    }
}
