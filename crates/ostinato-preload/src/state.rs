//! The interposer's process-wide state: the settings, the log, the kept images, cached code analyses
//! and the executable graphs seen instantiated. It exists only while observing
//! (`OSTINATO_PRELOAD_LOG` set); without it every hook forwards and does nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::code::{self, CodeStatus};
use crate::decide::{decide, Decision};
use crate::log::{self, Call, Config, Sink};
use crate::model::GraphModel;
use crate::readback::{self, Code, Driver};
use crate::store::{Handle, Held, Image, ImageId, Origin, Store};

/// The most code analyses cached (the cache is emptied when full) and executable graphs tracked.
const MAX_ANALYSES: usize = 4096;
const MAX_EXECS: usize = 1 << 20;

type AnalysisKey = (ImageId, String, u32, Vec<bool>);

/// An executable graph seen instantiated.
#[derive(Clone, Copy, Debug)]
struct Exec {
    seq: u64,
    adoptable: bool,
    launches: u64,
}

/// The state while observing.
pub struct State {
    sink: Sink,
    store: Mutex<Store>,
    analyses: Mutex<HashMap<AnalysisKey, CodeStatus>>,
    execs: Mutex<HashMap<u64, Exec>>,
    seq: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static STATE: OnceLock<Option<State>> = OnceLock::new();

/// The state, when observing (built on first use from the environment).
pub fn observing() -> Option<&'static State> {
    STATE.get_or_init(|| State::from_config(&Config::from_vars(|k| std::env::var(k).ok()))).as_ref()
}

impl State {
    /// The state for `config`, or `None` when it asks for no log (or the log cannot be opened: then
    /// one line on stderr says so).
    pub fn from_config(config: &Config) -> Option<State> {
        let target = config.log.as_ref()?;
        match Sink::open(target) {
            Ok(sink) => Some(State {
                sink,
                store: Mutex::new(Store::new(config.budget)),
                analyses: Mutex::new(HashMap::new()),
                execs: Mutex::new(HashMap::new()),
                seq: AtomicU64::new(0),
            }),
            Err(e) => {
                eprintln!("ostinato-preload: cannot open the log {target:?}: {e}; observing nothing");
                None
            }
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

    /// Logs one instantiate call and tracks the executable graph it made.
    pub fn record(&self, call: &Call, model: &GraphModel, decision: &Decision) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.sink.line(&log::instantiate_line(seq, call, model, decision));
        if call.result == 0 && call.exec != 0 {
            let mut execs = lock(&self.execs);
            if execs.len() < MAX_EXECS {
                execs.insert(call.exec, Exec { seq, adoptable: decision.adoptable(), launches: 0 });
            }
        }
    }

    /// Counts a launch of `exec`.
    pub fn launched(&self, exec: u64) {
        if let Some(e) = lock(&self.execs).get_mut(&exec) {
            e.launches += 1;
        }
    }

    /// Logs and forgets a destroyed executable graph.
    pub fn destroyed(&self, exec: u64) {
        let gone = lock(&self.execs).remove(&exec);
        if let Some(e) = gone {
            self.sink.line(&log::destroy_line(e.seq, exec, e.launches, e.adoptable));
        }
    }
}
