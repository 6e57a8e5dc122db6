//! The launch thread: an exec option that moves the driver's launch and patch calls off the caller's
//! thread. The caller's `replay` and `set_slot` post a command into a bounded queue (no allocation, no
//! system call while the thread is awake) and return; one thread owned by the exec runs the commands in
//! the order they were posted. Graph execs are not safe to use from two threads at once, so every call
//! that touches the exec (patch and launch) runs on the launch thread; the caller's side waits for the
//! queue to drain before anything that must see the replays' effect (wait, buffer reads and writes,
//! timing events).
//!
//! The thread spins for a while after its last command, so that the next call finds it awake; after
//! that it sleeps in the queue and the next call pays the wake-up. A command that fails stores its
//! error; the caller gets it from its next call (or `wait`), and every later command is skipped: the
//! exec fails closed, as an asynchronous CUDA error would leave it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ostinato::SlotId;

/// Commands the queue holds before `post` blocks (the thread is behind by that many).
pub(crate) const QUEUE_COMMANDS: usize = 1024;

/// What a launch thread runs, in the order the commands were posted.
pub(crate) trait Submitter: Send + 'static {
    type Error: Send + 'static;
    /// Runs once on the launch thread before any command (makes the CUDA context current there).
    fn start(&mut self) -> Result<(), Self::Error>;
    fn set_slot(&mut self, slot: SlotId, bits: u64) -> Result<(), Self::Error>;
    fn launch(&mut self) -> Result<(), Self::Error>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Command {
    SetSlot(SlotId, u64),
    Launch,
}

/// Why a command posted to the launch thread did not run.
#[derive(Debug)]
pub(crate) enum LaunchFault<E> {
    /// A command failed on the launch thread (this is its error, reported once).
    Failed(E),
    /// A command failed earlier (its error was reported then); every later one was skipped.
    AfterFailure,
    /// The launch thread is gone (it panicked, or could not be started).
    Ended(String),
}

struct Shared<E> {
    /// Commands the thread has finished (run, or skipped after a failure).
    done: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<E>>,
}

impl<E> Shared<E> {
    fn fail(&self, e: E) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        self.failed.store(true, Ordering::Release);
    }
}

/// The caller's side of a launch thread.
pub(crate) struct LaunchThread<S: Submitter> {
    queue: Option<SyncSender<Command>>,
    shared: Arc<Shared<S::Error>>,
    posted: u64,
    worker: Option<JoinHandle<S>>,
}

impl<S: Submitter> LaunchThread<S> {
    /// Moves `submitter` to a new thread that spins for `spin` after each command before it sleeps.
    /// If the thread cannot be started the submitter is dropped with the error.
    pub(crate) fn start(submitter: S, spin: Duration) -> Result<LaunchThread<S>, String> {
        let (queue, commands) = mpsc::sync_channel(QUEUE_COMMANDS);
        let shared = Arc::new(Shared { done: AtomicU64::new(0), failed: AtomicBool::new(false), error: Mutex::new(None) });
        let theirs = shared.clone();
        let worker = std::thread::Builder::new()
            .name("ostinato-launch".into())
            .spawn(move || run(submitter, commands, &theirs, spin))
            .map_err(|e| format!("could not start the launch thread: {e}"))?;
        Ok(LaunchThread { queue: Some(queue), shared, posted: 0, worker: Some(worker) })
    }

    /// Posts a patch: from the next launch on, `slot` holds `bits`.
    pub(crate) fn set_slot(&mut self, slot: SlotId, bits: u64) -> Result<(), LaunchFault<S::Error>> {
        self.post(Command::SetSlot(slot, bits))
    }

    /// Posts one launch.
    #[inline]
    pub(crate) fn launch(&mut self) -> Result<(), LaunchFault<S::Error>> {
        self.post(Command::Launch)
    }

    fn post(&mut self, command: Command) -> Result<(), LaunchFault<S::Error>> {
        self.failure()?;
        let queue = self.queue.as_ref().ok_or_else(|| LaunchFault::Ended("the launch thread was stopped".into()))?;
        // Blocks only while the queue is full; fails only if the thread is gone.
        queue.send(command).map_err(|_| LaunchFault::Ended("the launch thread ended unexpectedly".into()))?;
        self.posted += 1;
        Ok(())
    }

    /// Returns once the thread has run (or skipped) every command posted so far: after it, the driver
    /// has been given every launch, so stream-ordered work the caller adds comes after them.
    pub(crate) fn drain(&self) -> Result<(), LaunchFault<S::Error>> {
        let mut spins = 0u32;
        while self.shared.done.load(Ordering::Acquire) < self.posted {
            if self.worker.as_ref().is_none_or(|w| w.is_finished()) {
                return Err(LaunchFault::Ended("the launch thread ended with commands unrun".into()));
            }
            if spins < 4096 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        self.failure()
    }

    /// The stored error, once; afterwards `AfterFailure`.
    fn failure(&self) -> Result<(), LaunchFault<S::Error>> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.shared.error.lock().map(|mut e| e.take()) {
            Ok(Some(e)) => Err(LaunchFault::Failed(e)),
            _ => Err(LaunchFault::AfterFailure),
        }
    }

    /// Runs every posted command, ends the thread and returns the submitter (with the first unreported
    /// error, if a command failed).
    pub(crate) fn stop(mut self) -> (Option<S>, Result<(), LaunchFault<S::Error>>) {
        let submitter = self.join();
        let status = if submitter.is_none() { Err(LaunchFault::Ended("the launch thread panicked".into())) } else { self.failure() };
        (submitter, status)
    }

    fn join(&mut self) -> Option<S> {
        // Closing the queue ends the thread once it has run what the queue still holds.
        self.queue = None;
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl<S: Submitter> Drop for LaunchThread<S> {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The launch thread's loop: run each command in order; spin while idle for up to `spin`, then sleep
/// in the queue; end when the caller closes the queue and it is empty.
fn run<S: Submitter>(mut submitter: S, commands: Receiver<Command>, shared: &Shared<S::Error>, spin: Duration) -> S {
    if let Err(e) = submitter.start() {
        shared.fail(e);
    }
    let mut idle_since = Instant::now();
    loop {
        let command = match commands.try_recv() {
            Ok(c) => c,
            Err(TryRecvError::Disconnected) => return submitter,
            Err(TryRecvError::Empty) if idle_since.elapsed() < spin => {
                std::hint::spin_loop();
                continue;
            }
            Err(TryRecvError::Empty) => match commands.recv() {
                Ok(c) => c,
                Err(_) => return submitter,
            },
        };
        if !shared.failed.load(Ordering::Relaxed) {
            let result = match command {
                Command::SetSlot(slot, bits) => submitter.set_slot(slot, bits),
                Command::Launch => submitter.launch(),
            };
            if let Err(e) = result {
                shared.fail(e);
            }
        }
        shared.done.fetch_add(1, Ordering::Release);
        idle_since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Records what ran and on which thread; fails the `fail_at`-th command (0-based) if set.
    struct Recorder {
        log: Log,
        thread: RanOn,
        fail_at: Option<usize>,
        ran: usize,
        started: Arc<AtomicUsize>,
    }

    impl Recorder {
        fn step(&mut self, c: Command) -> Result<(), String> {
            let i = self.ran;
            self.ran += 1;
            if self.fail_at == Some(i) {
                return Err(format!("command {i} failed"));
            }
            self.log.lock().unwrap().push(c);
            Ok(())
        }
    }

    impl Submitter for Recorder {
        type Error = String;
        fn start(&mut self) -> Result<(), String> {
            self.started.fetch_add(1, Ordering::SeqCst);
            *self.thread.lock().unwrap() = Some(std::thread::current().id());
            Ok(())
        }
        fn set_slot(&mut self, slot: SlotId, bits: u64) -> Result<(), String> {
            self.step(Command::SetSlot(slot, bits))
        }
        fn launch(&mut self) -> Result<(), String> {
            self.step(Command::Launch)
        }
    }

    type Log = Arc<Mutex<Vec<Command>>>;
    type RanOn = Arc<Mutex<Option<std::thread::ThreadId>>>;

    fn recorder(fail_at: Option<usize>) -> (Recorder, Log, RanOn) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let thread = Arc::new(Mutex::new(None));
        let r = Recorder { log: log.clone(), thread: thread.clone(), fail_at, ran: 0, started: Arc::new(AtomicUsize::new(0)) };
        (r, log, thread)
    }

    #[test]
    fn commands_run_in_posted_order_on_another_thread_and_drain_waits_for_all() {
        for spin in [Duration::ZERO, Duration::from_millis(50)] {
            let (r, log, thread) = recorder(None);
            let mut t = LaunchThread::start(r, spin).unwrap();
            let mut want = Vec::new();
            // More than the queue holds, so `post` also blocks on a full queue and resumes.
            for i in 0..(3 * QUEUE_COMMANDS as u64) {
                if i % 3 == 0 {
                    t.set_slot(SlotId((i % 5) as u32), i).unwrap();
                    want.push(Command::SetSlot(SlotId((i % 5) as u32), i));
                }
                t.launch().unwrap();
                want.push(Command::Launch);
            }
            t.drain().unwrap();
            assert_eq!(*log.lock().unwrap(), want, "spin {spin:?}: every command, in order, before drain returns");
            assert_ne!(*thread.lock().unwrap(), Some(std::thread::current().id()), "the commands ran on the caller's thread");
            let (back, status) = t.stop();
            assert!(back.is_some() && status.is_ok());
        }
    }

    #[test]
    fn a_failed_command_is_reported_once_and_every_later_command_is_skipped() {
        let (r, log, _) = recorder(Some(2));
        let mut t = LaunchThread::start(r, Duration::from_millis(10)).unwrap();
        t.launch().unwrap();
        t.set_slot(SlotId(0), 7).unwrap();
        t.launch().unwrap(); // the third command fails on the thread
                             // Posting goes on until the caller learns of the failure; the skipped commands still drain.
        let mut reported = None;
        for _ in 0..1000 {
            if let Err(e) = t.launch() {
                reported = Some(e);
                break;
            }
        }
        let reported = match reported {
            Some(e) => e,
            None => t.drain().unwrap_err(),
        };
        assert!(matches!(&reported, LaunchFault::Failed(m) if m == "command 2 failed"), "{reported:?}");
        assert!(matches!(t.drain(), Err(LaunchFault::AfterFailure)), "the error is reported once, then the exec stays failed");
        assert!(matches!(t.launch(), Err(LaunchFault::AfterFailure)));
        assert_eq!(*log.lock().unwrap(), vec![Command::Launch, Command::SetSlot(SlotId(0), 7)], "nothing ran after the failure");
    }

    #[test]
    fn stop_runs_what_was_posted_and_hands_the_submitter_back() {
        let (r, log, _) = recorder(None);
        let started = r.started.clone();
        let mut t = LaunchThread::start(r, Duration::ZERO).unwrap();
        for _ in 0..100 {
            t.launch().unwrap();
        }
        let (back, status) = t.stop();
        assert!(status.is_ok());
        assert_eq!(back.map(|r| r.ran), Some(100), "stop returned before the queue was empty");
        assert_eq!(log.lock().unwrap().len(), 100);
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_start_fails_every_command() {
        struct NoContext;
        impl Submitter for NoContext {
            type Error = &'static str;
            fn start(&mut self) -> Result<(), &'static str> {
                Err("no context")
            }
            fn set_slot(&mut self, _: SlotId, _: u64) -> Result<(), &'static str> {
                panic!("ran after a failed start")
            }
            fn launch(&mut self) -> Result<(), &'static str> {
                panic!("ran after a failed start")
            }
        }
        let mut t = LaunchThread::start(NoContext, Duration::ZERO).unwrap();
        let first = t.launch().err().or_else(|| t.drain().err());
        assert!(matches!(first, Some(LaunchFault::Failed("no context"))), "{first:?}");
        assert!(matches!(t.drain(), Err(LaunchFault::AfterFailure)));
        let (back, status) = t.stop();
        assert!(back.is_some(), "the thread did not panic: the commands were skipped");
        assert!(matches!(status, Err(LaunchFault::AfterFailure)));
    }

    #[test]
    fn a_panicking_submitter_ends_the_thread_and_the_caller_is_told() {
        struct Panics;
        impl Submitter for Panics {
            type Error = ();
            fn start(&mut self) -> Result<(), ()> {
                Ok(())
            }
            fn set_slot(&mut self, _: SlotId, _: u64) -> Result<(), ()> {
                Ok(())
            }
            fn launch(&mut self) -> Result<(), ()> {
                panic!("driver binding panicked")
            }
        }
        let mut t = LaunchThread::start(Panics, Duration::ZERO).unwrap();
        t.launch().unwrap();
        assert!(matches!(t.drain(), Err(LaunchFault::Ended(_))), "drain must not wait forever for a dead thread");
        let (back, status) = t.stop();
        assert!(back.is_none() && matches!(status, Err(LaunchFault::Ended(_))));
    }
}
