//! The interposer's process-wide state: the settings, the log, the kept images, cached code analyses
//! and the executable graphs seen instantiated, with the adopted graph beside each one adopted. It
//! exists only while adopting or logging; without it every hook forwards and does nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

type AnalysisKey = (ImageId, String, u32, Vec<bool>);

/// An executable graph seen instantiated.
#[derive(Clone, Debug)]
struct Exec {
    seq: u64,
    adoptable: bool,
    launches: u64,
    adopted: Option<Adopted>,
    /// What [`State::explain`] returns ([`log::explanation`]).
    explanation: Arc<str>,
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
}

/// The state while observing or adopting.
pub struct State {
    sink: Option<Sink>,
    adopt: AtomicBool,
    orderings: Orderings,
    store: Mutex<Store>,
    analyses: Mutex<HashMap<AnalysisKey, CodeStatus>>,
    execs: Mutex<HashMap<u64, Exec>>,
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
        let start = Instant::now();
        let image = |h: Handle| lock(&self.store).lookup(h).cloned();
        let analyse = |img: &Arc<Image>, entry: &str, arch: u32, pointer: &[bool]| self.analyse(img, entry, arch, pointer);
        let model = readback::read_graph(driver, &Code { image: &image, analyse: &analyse }, graph, flags);
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
    pub fn record(&self, call: &Call, model: &GraphModel, decision: &Decision, adoption: &AdoptionLog, adopted: Option<(u64, u64)>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.log(|| log::instantiate_line(seq, call, model, decision, adoption));
        if call.result == 0 && call.exec != 0 {
            let mut execs = lock(&self.execs);
            if execs.len() < MAX_EXECS || adopted.is_some() {
                let adopted = adopted.map(|(graph, exec)| Adopted { graph, exec, active: true, launches: 0, last_stream: None });
                let explanation = log::explanation(seq, call, model, decision, adoption).into();
                execs.insert(call.exec, Exec { seq, adoptable: decision.adoptable(), launches: 0, adopted, explanation });
            }
        }
    }

    /// What a launch of `exec` on `stream` runs (counted). `revoke`: give the adoption up first (an
    /// entry point that changes executable graphs in place was handed out unwrapped).
    pub fn launch(&self, exec: u64, stream: Stream, revoke: Option<&'static str>) -> LaunchAs {
        let mut execs = lock(&self.execs);
        let Some(e) = execs.get_mut(&exec) else { return LaunchAs::Own };
        e.launches += 1;
        let seq = e.seq;
        let Some(a) = e.adopted.as_mut() else { return LaunchAs::Own };
        if a.active {
            match revoke {
                None => {
                    a.launches += 1;
                    a.last_stream = Some(stream);
                    return LaunchAs::Adopted(a.exec);
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

    /// Gives up the adoption of `exec` (`api` changed the application's executable graph in place):
    /// its next launch runs the application's own graph, after the adopted graph's last launch.
    pub fn revoke(&self, exec: u64, api: &'static str) {
        let mut execs = lock(&self.execs);
        let Some(e) = execs.get_mut(&exec) else { return };
        let seq = e.seq;
        if let Some(a) = e.adopted.as_mut().filter(|a| a.active) {
            a.active = false;
            self.log(|| log::revoke_line(seq, exec, api));
        }
    }

    /// Logs and forgets a destroyed executable graph; returns its adopted graph, to destroy.
    pub fn destroyed(&self, exec: u64) -> Option<Adopted> {
        let e = lock(&self.execs).remove(&exec)?;
        self.log(|| log::destroy_line(e.seq, exec, e.launches, e.adoptable, e.adopted.map_or(0, |a| a.launches)));
        e.adopted
    }
}
