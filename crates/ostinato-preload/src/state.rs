//! The interposer's process-wide state: the settings, the log, the kept images, cached code analyses
//! and the executable graphs seen instantiated, with the adopted graph beside each one adopted. It
//! exists only while adopting or logging; without it every hook forwards and does nothing else.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::adopt::Orderings;
use crate::code::{self, CodeStatus};
use crate::decide::{decide, Decision};
use crate::log::{self, AdoptionLog, Call, Config, Sink};
use crate::model::GraphModel;
use crate::readback::{self, Code, Driver};
use crate::store::{Handle, Held, Image, ImageId, Origin, Store};

/// The most code analyses cached (the cache is emptied when full) and executable graphs tracked.
const MAX_ANALYSES: usize = 4096;
const MAX_EXECS: usize = 1 << 20;
/// The most bytes of explanations kept for live executable graphs; past it, an explanation keeps the
/// decision and the adoption only ([`log::explanation`]'s `brief`).
pub const EXPLANATION_BUDGET: usize = 64 << 20;

type AnalysisKey = (ImageId, String, u32, Vec<bool>);

/// An executable graph seen instantiated.
#[derive(Clone, Debug)]
struct Exec {
    seq: u64,
    adoptable: bool,
    launches: u64,
    /// The flags the application instantiated it with (an adopted graph made again is instantiated
    /// with them).
    flags: u64,
    adopted: Option<Adopted>,
    /// The application's graph as its executable graph now is (kept for an adoptable graph until a
    /// change in place is not made on it too).
    replica: Option<Arc<Replica>>,
    /// The stream of the last launch that ran the application's own graph.
    last_own: Option<Stream>,
    /// What [`State::explain`] returns ([`log::explanation`]).
    explanation: Arc<str>,
}

/// What a node param change on an adopted executable graph is adopted from: a clone of the graph
/// the application instantiated it from (or last updated it from) — the captured edges — with every
/// param change since made on it too; the application's node handles mapped to the clone's; the
/// adopted executable graph's nodes by the clone's; the adopted edges by the clone's nodes. A change
/// that leaves the adopted edges as they are is made on the adopted executable graph in place, any
/// other makes the adopted graph again from the clone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replica {
    pub graph: u64,
    /// Application node → the clone's node.
    pub nodes: HashMap<u64, u64>,
    /// The clone's node → the adopted graph's node.
    pub adopted_nodes: HashMap<u64, u64>,
    /// The adopted edges (from, to, programmatic) by the clone's nodes.
    pub edges: HashSet<(u64, u64, bool)>,
}

/// Extents finer than the driver's allocation segments, as an application's allocator knows them
/// (each the union of the allocations that ever held its bytes): disjoint, sorted by base.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extents(Vec<(u64, u64)>);

impl Extents {
    /// From (base, size) pairs in any order; an empty, wrapping or overlapping one is an error naming
    /// it (overlapping allocations are one extent: the caller merges them).
    pub fn new(mut pairs: Vec<(u64, u64)>) -> Result<Extents, String> {
        pairs.sort_unstable();
        for (i, &(base, size)) in pairs.iter().enumerate() {
            if size == 0 || base.checked_add(size).is_none() {
                return Err(format!("extent {i} ({base:#x}, {size} bytes) is empty or wraps"));
            }
            if let Some(&(next, _)) = pairs.get(i + 1) {
                if next < base + size {
                    return Err(format!("extents {base:#x} (+{size}) and {next:#x} overlap"));
                }
            }
        }
        Ok(Extents(pairs))
    }

    /// The extent holding `address`, if any.
    pub fn holding(&self, address: u64) -> Option<(u64, u64)> {
        let i = self.0.partition_point(|&(base, _)| base <= address).checked_sub(1)?;
        let (base, size) = self.0[i];
        (address - base < size).then_some((base, size))
    }
}

/// A stream a launch went to: its handle, and whether the per-thread-stream entry point was used
/// (then handle 0 is the per-thread default stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub handle: u64,
    pub per_thread: bool,
}

/// The adopted graph beside an application's executable graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// The adopted graph (a clone of the application's, rewired) and its executable graph.
    pub graph: u64,
    pub exec: u64,
    /// Launches run the adopted graph (false once revoked).
    pub active: bool,
    pub launches: u64,
    /// The stream of the adopted graph's last launch, until the application's own graph is launched
    /// after a revocation.
    pub last_stream: Option<Stream>,
    /// The stream of the last launch of the adopted graph this one replaced (an update made it
    /// again): its first launch on another stream waits for that one.
    pub follows: Option<Stream>,
}

/// What a launch of an application's executable graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchAs {
    /// The application's own executable graph.
    Own,
    /// The adopted graph's executable graph.
    Adopted(u64),
    /// The application's own, after what was queued on this stream (the adopted graph's last launch).
    OwnAfter(Stream),
    /// The adopted graph's executable graph, after what was queued on this stream (the last launch of
    /// the adopted graph it replaced).
    AdoptedAfter(u64, Stream),
}

/// The state while observing or adopting.
pub struct State {
    sink: Option<Sink>,
    adopt: AtomicBool,
    orderings: Orderings,
    store: Mutex<Store>,
    analyses: Mutex<HashMap<AnalysisKey, CodeStatus>>,
    execs: Mutex<HashMap<u64, Exec>>,
    /// Bytes of the explanations in `execs`, and the most kept in full ([`EXPLANATION_BUDGET`]).
    explained: AtomicUsize,
    explanation_budget: usize,
    seq: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static STATE: OnceLock<Option<State>> = OnceLock::new();

/// The state, when observing or adopting (built on first use from the environment).
pub fn observing() -> Option<&'static State> {
    STATE.get_or_init(|| State::from_config(&Config::from_vars(|k| std::env::var(k).ok()))).as_ref()
}

impl State {
    /// The state for `config`, or `None` when it asks for neither adoption nor a log (a log that
    /// cannot be opened is one line on stderr, and no log).
    pub fn from_config(config: &Config) -> Option<State> {
        let sink = config.log.as_ref().and_then(|target| match Sink::open(target) {
            Ok(sink) => Some(sink),
            Err(e) => {
                eprintln!("ostinato-preload: cannot open the log {target:?}: {e}; no log");
                None
            }
        });
        (sink.is_some() || config.adopt).then(|| State {
            sink,
            adopt: AtomicBool::new(config.adopt),
            orderings: config.orderings,
            store: Mutex::new(Store::new(config.budget)),
            analyses: Mutex::new(HashMap::new()),
            execs: Mutex::new(HashMap::new()),
            explained: AtomicUsize::new(0),
            explanation_budget: EXPLANATION_BUDGET,
            seq: AtomicU64::new(0),
        })
    }

    /// Whether graphs instantiated now are adopted.
    pub fn adopting(&self) -> bool {
        self.adopt.load(Ordering::Relaxed)
    }

    /// Which orderings adopted graphs submit.
    pub fn orderings(&self) -> Orderings {
        self.orderings
    }

    /// Switches adoption for graphs instantiated later; returns the previous setting.
    pub fn set_adopting(&self, on: bool) -> bool {
        self.adopt.swap(on, Ordering::Relaxed)
    }

    fn log(&self, line: impl FnOnce() -> String) {
        if let Some(sink) = &self.sink {
            sink.line(&line());
        }
    }

    /// Keeps a loaded image (or notes why not).
    pub fn keep(&self, bytes: &[u8], origin: Origin) -> Held {
        lock(&self.store).keep(bytes, origin)
    }

    pub fn bind(&self, handle: Handle, held: Held) {
        lock(&self.store).bind(handle, held);
    }

    pub fn unbind(&self, handle: Handle) {
        lock(&self.store).unbind(handle);
    }

    /// Reads `graph` back and decides; returns the model, the decision and the microseconds spent.
    pub fn read(&self, driver: &dyn Driver, graph: u64, flags: u64) -> (GraphModel, Decision, u64) {
        self.read_with(driver, graph, flags, &Extents::default())
    }

    /// [`State::read`], each device address's extent taken from `extents` where one holds it (else
    /// the driver's allocation segment).
    pub fn read_with(&self, driver: &dyn Driver, graph: u64, flags: u64, extents: &Extents) -> (GraphModel, Decision, u64) {
        let start = Instant::now();
        let image = |h: Handle| lock(&self.store).lookup(h).cloned();
        let analyse = |img: &Arc<Image>, entry: &str, arch: u32, pointer: &[bool]| self.analyse(img, entry, arch, pointer);
        let extent = |a: u64| extents.holding(a);
        let model = readback::read_graph(driver, &Code { image: &image, analyse: &analyse, extent: &extent }, graph, flags);
        let decision = decide(&model);
        (model, decision, start.elapsed().as_micros() as u64)
    }

    fn analyse(&self, image: &Arc<Image>, entry: &str, arch: u32, pointer: &[bool]) -> CodeStatus {
        let key = (image.id, entry.to_string(), arch, pointer.to_vec());
        if let Some(s) = lock(&self.analyses).get(&key) {
            return s.clone();
        }
        let status = code::analyse(image, entry, arch, pointer);
        let mut cache = lock(&self.analyses);
        if cache.len() >= MAX_ANALYSES {
            cache.clear();
        }
        cache.insert(key, status.clone());
        status
    }

    /// Logs one instantiate call and tracks the executable graph it made, with its adopted graph.
    pub fn record(&self, call: &Call, flags: u64, model: &GraphModel, decision: &Decision, adoption: &AdoptionLog, adopted: Option<(u64, u64)>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.log(|| log::instantiate_line(seq, call, model, decision, adoption));
        if call.result == 0 && call.exec != 0 {
            let mut execs = lock(&self.execs);
            if execs.len() < MAX_EXECS || adopted.is_some() {
                let adopted = adopted.map(|(graph, exec)| Adopted { graph, exec, active: true, launches: 0, last_stream: None, follows: None });
                let explanation = self.explanation(seq, call, model, decision, adoption);
                let exec = Exec { seq, adoptable: decision.adoptable(), launches: 0, flags, adopted, replica: None, last_own: None, explanation };
                if let Some(old) = execs.insert(call.exec, exec) {
                    self.explained.fetch_sub(old.explanation.len(), Ordering::Relaxed);
                }
            }
        }
    }

    /// What [`State::explain`] will return for the graph of `call` (instantiated, or updated in place):
    /// in full where it fits the budget, else brief; its bytes counted.
    fn explanation(&self, seq: u64, call: &Call, model: &GraphModel, decision: &Decision, adoption: &AdoptionLog) -> Arc<str> {
        let full = log::explanation(seq, call, model, decision, adoption, false);
        let explanation: Arc<str> = if self.explained.load(Ordering::Relaxed) + full.len() <= self.explanation_budget {
            full.into()
        } else {
            log::explanation(seq, call, model, decision, adoption, true).into()
        };
        self.explained.fetch_add(explanation.len(), Ordering::Relaxed);
        explanation
    }

    /// What a launch of `exec` on `stream` runs (counted). `revoke`: give the adoption up first (an
    /// entry point that changes executable graphs in place was handed out unwrapped).
    pub fn launch(&self, exec: u64, stream: Stream, revoke: Option<&'static str>) -> LaunchAs {
        let mut execs = lock(&self.execs);
        let Some(e) = execs.get_mut(&exec) else { return LaunchAs::Own };
        e.launches += 1;
        let seq = e.seq;
        if !e.adopted.is_some_and(|a| a.active && revoke.is_none()) {
            e.last_own = Some(stream);
        }
        let Some(a) = e.adopted.as_mut() else { return LaunchAs::Own };
        if a.active {
            match revoke {
                None => {
                    a.launches += 1;
                    a.last_stream = Some(stream);
                    return match a.follows.take().filter(|last| *last != stream) {
                        Some(last) => LaunchAs::AdoptedAfter(a.exec, last),
                        None => LaunchAs::Adopted(a.exec),
                    };
                }
                Some(api) => {
                    a.active = false;
                    self.log(|| log::revoke_line(seq, exec, api));
                }
            }
        }
        match a.last_stream.take() {
            Some(last) if last != stream => LaunchAs::OwnAfter(last),
            _ => LaunchAs::Own,
        }
    }

    /// What became of executable graph `exec` ([`log::explanation`]; whether it runs adopted now is
    /// `"active"`), or `None` where it was not seen instantiated (or is destroyed).
    pub fn explain(&self, exec: u64) -> Option<String> {
        let execs = lock(&self.execs);
        let e = execs.get(&exec)?;
        let active = e.adopted.is_some_and(|a| a.active);
        // The stored object, with one more member: `{…}` becomes `{…,"active":true}`.
        let body = e.explanation.strip_suffix('}')?;
        Some(format!("{body},\"active\":{active}}}"))
    }

    /// The executable graph an upload of `exec` uploads (the adopted one while active).
    pub fn upload_target(&self, exec: u64) -> u64 {
        match lock(&self.execs).get(&exec).and_then(|e| e.adopted) {
            Some(a) if a.active => a.exec,
            _ => exec,
        }
    }

    /// Gives up the adoption of `exec` (`api` changed the application's executable graph in place
    /// without the change made on its replica): its next launch runs the application's own graph,
    /// after the adopted graph's last launch. Returns the replica, now stale, to destroy.
    pub fn revoke(&self, exec: u64, api: &'static str) -> Option<Arc<Replica>> {
        let mut execs = lock(&self.execs);
        let e = execs.get_mut(&exec)?;
        let seq = e.seq;
        if let Some(a) = e.adopted.as_mut().filter(|a| a.active) {
            a.active = false;
            self.log(|| log::revoke_line(seq, exec, api));
        }
        e.replica.take()
    }

    /// The instantiate flags of `exec` where it runs adopted now (an update may make its adopted graph
    /// again), else `None`.
    pub fn adopted_flags(&self, exec: u64) -> Option<u64> {
        let execs = lock(&self.execs);
        let e = execs.get(&exec)?;
        e.adopted.is_some_and(|a| a.active).then_some(e.flags)
    }

    /// After `api` updated `exec` in place from `graph`: logs what the adoption made of `graph`
    /// (`adoption`, from reading it back as `model` and deciding `decision`) and, with `adopted`
    /// (the adopted graph made again and its executable graph), puts it in the place of the one `exec`
    /// ran, which is returned to destroy (the driver frees it after its launches in flight; the new
    /// one's first launch on another stream waits for the last of them). Without `adopted`, or where
    /// `exec` no longer runs adopted, nothing changes (`adopted`, if any, is returned to destroy, and
    /// the caller revokes).
    pub fn update(&self, call: &Call, model: &GraphModel, decision: &Decision, adoption: &AdoptionLog, adopted: Option<(u64, u64)>) -> (bool, Option<Adopted>) {
        let mut execs = lock(&self.execs);
        let Some(e) = execs.get_mut(&call.exec) else { return (false, adopted.map(Self::orphan)) };
        self.log(|| log::update_line(e.seq, call, adoption));
        let (Some((graph, exec)), Some(old)) = (adopted, e.adopted.filter(|a| a.active)) else { return (false, adopted.map(Self::orphan)) };
        let new = Adopted { graph, exec, active: true, launches: old.launches, last_stream: old.last_stream, follows: old.last_stream };
        e.adopted = Some(new);
        self.explained.fetch_sub(e.explanation.len(), Ordering::Relaxed);
        e.explanation = self.explanation(e.seq, call, model, decision, adoption);
        (true, Some(old))
    }

    /// Keeps `replica` for `exec` where it is tracked and not revoked; returns the one it replaces, or
    /// `replica` itself where it is not kept (the caller destroys a returned clone unless it is the
    /// one kept).
    pub fn set_replica(&self, exec: u64, replica: Replica) -> Option<Arc<Replica>> {
        let mut execs = lock(&self.execs);
        match execs.get_mut(&exec) {
            Some(e) if e.adopted.is_none_or(|a| a.active) => e.replica.replace(Arc::new(replica)),
            _ => Some(Arc::new(replica)),
        }
    }

    /// Where `exec` has a replica: its instantiate flags, whether it runs adopted, and the replica.
    pub fn replica_any(&self, exec: u64) -> Option<(u64, bool, Arc<Replica>)> {
        let execs = lock(&self.execs);
        let e = execs.get(&exec)?;
        Some((e.flags, e.adopted.is_some_and(|a| a.active), e.replica.clone()?))
    }

    /// For `exec`, never adopted, adopted now (`call`: the request, `adopted`: the adopted graph made
    /// from its replica, or none): logged as an update; the adopted graph's first launch on another
    /// stream waits for the application graph's last launch. Returns whether it runs adopted, and an
    /// adopted graph not kept, to destroy.
    pub fn adopt_late(
        &self,
        call: &Call,
        model: &GraphModel,
        decision: &Decision,
        adoption: &AdoptionLog,
        adopted: Option<(u64, u64)>,
    ) -> (bool, Option<Adopted>) {
        let mut execs = lock(&self.execs);
        let Some(e) = execs.get_mut(&call.exec) else { return (false, adopted.map(Self::orphan)) };
        self.log(|| log::update_line(e.seq, call, adoption));
        let (Some((graph, exec)), None) = (adopted, e.adopted) else { return (false, adopted.map(Self::orphan)) };
        e.adopted = Some(Adopted { graph, exec, active: true, launches: 0, last_stream: None, follows: e.last_own });
        self.explained.fetch_sub(e.explanation.len(), Ordering::Relaxed);
        e.explanation = self.explanation(e.seq, call, model, decision, adoption);
        (true, None)
    }

    /// Where `exec` runs adopted and has a replica: its instantiate flags, the adopted executable
    /// graph and the replica.
    pub fn replica(&self, exec: u64) -> Option<(u64, u64, Arc<Replica>)> {
        let execs = lock(&self.execs);
        let e = execs.get(&exec)?;
        let a = e.adopted.filter(|a| a.active)?;
        Some((e.flags, a.exec, e.replica.clone()?))
    }

    /// Logs a node param change `api` made on `exec`'s adopted executable graph in place (its
    /// adopted edges unchanged; `read_us` spent reading the replica back).
    pub fn patched(&self, exec: u64, api: &'static str, read_us: u64) {
        let execs = lock(&self.execs);
        if let Some(e) = execs.get(&exec) {
            self.log(|| log::patch_line(e.seq, exec, api, read_us));
        }
    }

    /// An adopted graph made for no tracked executable graph, to destroy.
    fn orphan((graph, exec): (u64, u64)) -> Adopted {
        Adopted { graph, exec, active: false, launches: 0, last_stream: None, follows: None }
    }

    /// Logs and forgets a destroyed executable graph; returns its adopted graph and its replica, to
    /// destroy.
    pub fn destroyed(&self, exec: u64) -> Option<(Option<Adopted>, Option<Arc<Replica>>)> {
        let e = lock(&self.execs).remove(&exec)?;
        self.explained.fetch_sub(e.explanation.len(), Ordering::Relaxed);
        self.log(|| log::destroy_line(e.seq, exec, e.launches, e.adoptable, e.adopted.map_or(0, |a| a.launches)));
        Some((e.adopted, e.replica))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Node, NodeBody};

    fn state(budget: usize) -> State {
        let config = Config { log: None, budget: 1 << 20, adopt: true, orderings: Orderings::Captured };
        let mut s = State::from_config(&config).unwrap();
        s.explanation_budget = budget;
        s
    }

    fn record(s: &State, exec: u64) {
        let g = GraphModel { nodes: vec![Node { index: 0, body: NodeBody::Other { code: 3, name: "host" } }], ..GraphModel::default() };
        let call = Call { api: "cuGraphInstantiateWithFlags", graph: 1, exec, result: 0, read_us: 0 };
        s.record(&call, 0, &g, &decide(&g), &AdoptionLog::not("not_adopted", "falls through"), None);
    }

    #[test]
    fn explanations_past_the_budget_are_brief_and_destroying_gives_their_bytes_back() {
        let s = state(600);
        record(&s, 10);
        let full = s.explain(10).unwrap();
        assert!(full.contains("\"nodes\":[\"host\"]") && full.ends_with(",\"active\":false}"), "{full}");
        record(&s, 11);
        let brief = s.explain(11).unwrap();
        assert!(brief.contains("\"brief\":true") && brief.contains("\"nodes\":[]"), "{brief}");
        assert_eq!(s.explained.load(Ordering::Relaxed), full.len() - ",\"active\":false".len() + brief.len() - ",\"active\":false".len());
        s.destroyed(10);
        s.destroyed(11);
        assert_eq!(s.explained.load(Ordering::Relaxed), 0);
        assert_eq!(s.explain(10), None);
        record(&s, 12);
        assert!(!s.explain(12).unwrap().contains("brief"), "the budget is free again");
    }

    #[test]
    fn extents_hold_their_own_bytes_only_and_refuse_overlaps() {
        let e = Extents::new(vec![(0x2000, 0x100), (0x1000, 0x800), (0x1800, 0x10)]).unwrap();
        assert_eq!(e.holding(0x1000), Some((0x1000, 0x800)));
        assert_eq!(e.holding(0x17ff), Some((0x1000, 0x800)));
        assert_eq!(e.holding(0x1800), Some((0x1800, 0x10)), "touching extents are two");
        assert_eq!(e.holding(0x1810), None, "between extents: the driver's segment");
        assert_eq!((e.holding(0xfff), e.holding(0x20ff), e.holding(0x2100)), (None, Some((0x2000, 0x100)), None));
        assert_eq!(Extents::default().holding(0x1000), None);
        assert!(Extents::new(vec![(0x1000, 0x100), (0x10ff, 0x10)]).unwrap_err().contains("overlap"));
        assert!(Extents::new(vec![(0x1000, 0)]).unwrap_err().contains("empty"));
        assert!(Extents::new(vec![(u64::MAX - 1, 4)]).unwrap_err().contains("wraps"));
    }

    #[test]
    fn a_replica_is_kept_while_adopted_and_comes_back_to_destroy() {
        let s = state(1 << 20);
        let g = GraphModel { nodes: vec![Node { index: 0, body: NodeBody::Other { code: 3, name: "host" } }], ..GraphModel::default() };
        let call = Call { api: "cuGraphInstantiateWithFlags", graph: 1, exec: 30, result: 0, read_us: 0 };
        s.record(&call, 5, &g, &decide(&g), &AdoptionLog { status: "adopted", ..AdoptionLog::default() }, Some((100, 300)));
        let replica = |graph: u64| Replica { graph, nodes: HashMap::from([(7, 70)]), adopted_nodes: HashMap::from([(70, 700)]), edges: HashSet::new() };
        assert_eq!(s.set_replica(30, replica(40)), None, "the first replica replaces none");
        let (flags, exec, r) = s.replica(30).unwrap();
        assert_eq!((flags, exec, r.graph, r.nodes[&7], r.adopted_nodes[&70]), (5, 300, 40, 70, 700));
        assert_eq!(s.set_replica(30, replica(41)).map(|r| r.graph), Some(40), "the one replaced, to destroy");
        // Kept for a graph never adopted too (it may be adopted later); not for an unknown one.
        record(&s, 31);
        assert_eq!(s.set_replica(31, replica(42)), None);
        assert_eq!(s.replica_any(31).map(|(_, active, r)| (active, r.graph)), Some((false, 42)));
        assert!(s.replica(31).is_none(), "a node param change is adopted only for an adopted graph");
        assert_eq!(s.set_replica(99, replica(43)).map(|r| r.graph), Some(43));
        // Revoked: the replica (stale now) comes back to destroy, and none is kept again.
        assert_eq!(s.revoke(30, "cuGraphNodeSetEnabled").map(|r| r.graph), Some(41));
        assert!(s.replica(30).is_none() && s.replica_any(30).is_none());
        assert_eq!(s.set_replica(30, replica(44)).map(|r| r.graph), Some(44), "not kept for a revoked adoption");
        let (adopted, replica) = s.destroyed(30).unwrap();
        assert_eq!((adopted.map(|a| a.exec), replica), (Some(300), None));
    }

    #[test]
    fn an_update_swaps_the_adopted_graph_and_its_first_launch_elsewhere_follows_the_old_one() {
        let s = state(1 << 20);
        let g = GraphModel { nodes: vec![Node { index: 0, body: NodeBody::Other { code: 3, name: "host" } }], ..GraphModel::default() };
        let call = Call { api: "cuGraphInstantiateWithFlags", graph: 1, exec: 20, result: 0, read_us: 0 };
        let adopted = AdoptionLog { status: "adopted", ..AdoptionLog::default() };
        s.record(&call, 7, &g, &decide(&g), &adopted, Some((100, 200)));
        let (a, b) = (Stream { handle: 1, per_thread: false }, Stream { handle: 2, per_thread: false });
        assert_eq!(s.launch(20, a, None), LaunchAs::Adopted(200));
        assert_eq!(s.adopted_flags(20), Some(7), "the instantiate's flags, for the graph made again");
        let update = Call { api: "cuGraphExecUpdate_v2", graph: 2, exec: 20, result: 0, read_us: 0 };
        let (kept, old) = s.update(&update, &g, &decide(&g), &adopted, Some((101, 201)));
        assert!(kept);
        assert_eq!(old.map(|o| (o.graph, o.exec, o.launches)), Some((100, 200, 1)), "the old adopted graph, to destroy");
        // The new adopted graph's first launch on another stream waits for the old one's last.
        assert_eq!(s.launch(20, b, None), LaunchAs::AdoptedAfter(201, a));
        assert_eq!(s.launch(20, a, None), LaunchAs::Adopted(201));
        // Not adopted again: nothing changes here (the caller revokes), and a graph made for an
        // executable graph no longer tracked comes back to destroy.
        assert_eq!(s.update(&update, &g, &decide(&g), &AdoptionLog::not("not_adopted", "nothing to gain"), None), (false, None));
        s.revoke(20, "cuGraphExecUpdate_v2");
        assert_eq!(s.adopted_flags(20), None);
        let (kept, orphan) = s.update(&update, &g, &decide(&g), &adopted, Some((102, 202)));
        assert!(!kept && orphan.is_some_and(|o| o.exec == 202 && !o.active), "a revoked adoption is not made again");
        let unknown = Call { exec: 99, ..update };
        assert!(s.update(&unknown, &g, &decide(&g), &adopted, Some((103, 203))).1.is_some_and(|o| o.exec == 203));
        // The explanation made again at the update is counted in place of the old one.
        s.destroyed(20);
        assert_eq!(s.explained.load(Ordering::Relaxed), 0);
    }
}
