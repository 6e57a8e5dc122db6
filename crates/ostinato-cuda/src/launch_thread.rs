//! The launch thread: an exec option that moves the driver's launch and patch calls off the caller's
//! thread. The caller's `replay` and `set_slot` post a command into a bounded queue and return; one
//! thread owned by the exec runs the commands in the order they were posted. Graph execs are not safe to
//! use from two threads at once, so every call that touches the exec (patch and launch) runs on the
//! launch thread, and so does every other call on the exec's stream (timing events, the wait for
//! completion): the driver's state for that stream stays with one thread. The caller's side waits for
//! the queue to drain before anything that must see the replays' effect (wait, buffer reads and writes,
//! timings).
//!
//! The thread spins for a while after its last command, so that the next call finds it awake; after
//! that it parks, and the next call unparks it (a system call, and the thread's wake-up before the
//! launch). Neither side allocates after start: the queue is a fixed array, only ever used with
//! `try_send`/`try_recv` (the blocking calls of `std::sync::mpsc` set up per-thread state on first use),
//! and sleeping is `park`/`unpark` on a handle taken at start. A command that fails stores its error;
//! the caller gets it from its next call (or `wait`), and every later command is skipped: the exec fails
//! closed, as an asynchronous CUDA error would leave it.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use ostinato::{BufferId, SlotId};

/// Commands the queue holds before `post` waits (the thread is behind by that many).
pub(crate) const QUEUE_COMMANDS: usize = 1024;

/// What a launch thread runs, in the order the commands were posted.
pub(crate) trait Submitter: Send + 'static {
    type Error: Send + 'static;
    /// Runs once on the launch thread before any command (makes the CUDA context current there).
    fn start(&mut self) -> Result<(), Self::Error>;
    /// Runs one command.
    fn run(&mut self, command: Command) -> Result<(), Self::Error>;
}

/// What the caller asks of the launch thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// From the next launch on, `slot` holds the bits.
    SetSlot(SlotId, u64),
    /// From the next launch on, root buffer `BufferId` lies at the device address.
    Rebind(BufferId, u64),
    /// One replay.
    Launch,
    /// Record timing event 0 (start) or 1 (stop) on the stream.
    Record(usize),
    /// Wait until the stream has run everything submitted so far.
    Synchronize,
    /// Give the traced graph exec every kernel node's present params (graph mode).
    TraceParams,
    /// One traced replay (`replay` counts from 0), its calls tagged for CUPTI.
    TracedLaunch(u32),
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

/// A value on a cache line of its own: the counter the thread bumps after every command must not
/// share a line with the flags the caller reads on every post.
#[repr(align(128))]
struct Line<T>(T);

struct Shared<E> {
    /// Commands the thread has finished (run, or skipped after a failure).
    done: Line<AtomicU64>,
    /// Set once, when a command fails.
    failed: Line<AtomicBool>,
    /// True while the thread is parked or about to park: the next post must unpark it.
    parked: Line<AtomicBool>,
    error: Mutex<Option<E>>,
}

impl<E> Shared<E> {
    fn fail(&self, e: E) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        self.failed.0.store(true, Ordering::Release);
    }
}

/// The caller's side of a launch thread.
pub(crate) struct LaunchThread<S: Submitter> {
    queue: Option<SyncSender<Command>>,
    shared: Arc<Shared<S::Error>>,
    posted: u64,
    worker: Option<JoinHandle<S>>,
    /// The worker's handle, for `unpark`.
    thread: Thread,
}

impl<S: Submitter> LaunchThread<S> {
    /// Moves `submitter` to a new thread that spins for `spin` after each command before it parks.
    /// If the thread cannot be started the submitter is dropped with the error.
    pub(crate) fn start(submitter: S, spin: Duration) -> Result<LaunchThread<S>, String> {
        let (queue, commands) = mpsc::sync_channel(QUEUE_COMMANDS);
        let shared = Arc::new(Shared {
            done: Line(AtomicU64::new(0)),
            failed: Line(AtomicBool::new(false)),
            parked: Line(AtomicBool::new(false)),
            error: Mutex::new(None),
        });
        let theirs = shared.clone();
        let worker = std::thread::Builder::new()
            .name("ostinato-launch".into())
            .spawn(move || run(submitter, commands, &theirs, spin))
            .map_err(|e| format!("could not start the launch thread: {e}"))?;
        let thread = worker.thread().clone();
        Ok(LaunchThread { queue: Some(queue), shared, posted: 0, worker: Some(worker), thread })
    }

    /// Queues `command` for the thread and returns (waits only while the queue is full).
    pub(crate) fn post(&mut self, mut command: Command) -> Result<(), LaunchFault<S::Error>> {
        self.failure()?;
        let queue = self.queue.as_ref().ok_or_else(|| LaunchFault::Ended("the launch thread was stopped".into()))?;
        loop {
            match queue.try_send(command) {
                Ok(()) => break,
                // The thread is a full queue behind: let it run (it may be parked), then try again.
                Err(TrySendError::Full(c)) => {
                    command = c;
                    self.thread.unpark();
                    std::thread::yield_now();
                }
                Err(TrySendError::Disconnected(_)) => return Err(LaunchFault::Ended("the launch thread ended unexpectedly".into())),
            }
        }
        self.posted += 1;
        // Pairs with the fence in `run`: either the thread sees this command before it parks, or this
        // sees `parked` and wakes it.
        fence(Ordering::SeqCst);
        if self.shared.parked.0.load(Ordering::Relaxed) {
            self.thread.unpark();
        }
        Ok(())
    }

    /// Returns once the thread has run (or skipped) every command posted so far: after it, the driver
    /// has been given every launch, so stream-ordered work the caller adds comes after them.
    pub(crate) fn drain(&self) -> Result<(), LaunchFault<S::Error>> {
        let mut spins = 0u32;
        while self.shared.done.0.load(Ordering::Acquire) < self.posted {
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
        if !self.shared.failed.0.load(Ordering::Acquire) {
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
        self.thread.unpark();
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl<S: Submitter> Drop for LaunchThread<S> {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The launch thread's loop: run each command in order; while idle, spin for up to `spin`, then park
/// until a post unparks it; end when the caller closes the queue and it is empty.
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
            Err(TryRecvError::Empty) => {
                shared.parked.0.store(true, Ordering::Relaxed);
                // Pairs with the fence in `post` (see there).
                fence(Ordering::SeqCst);
                let next = commands.try_recv();
                if matches!(next, Err(TryRecvError::Empty)) {
                    // A post between the check and here left an unpark token: park returns at once.
                    std::thread::park();
                }
                shared.parked.0.store(false, Ordering::Relaxed);
                match next {
                    Ok(c) => c,
                    Err(TryRecvError::Disconnected) => return submitter,
                    Err(TryRecvError::Empty) => continue,
                }
            }
        };
        if !shared.failed.0.load(Ordering::Relaxed) {
            if let Err(e) = submitter.run(command) {
                shared.fail(e);
            }
        }
        shared.done.0.fetch_add(1, Ordering::Release);
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
        fn run(&mut self, c: Command) -> Result<(), String> {
            self.step(c)
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
                    t.post(Command::SetSlot(SlotId((i % 5) as u32), i)).unwrap();
                    want.push(Command::SetSlot(SlotId((i % 5) as u32), i));
                }
                t.post(Command::Launch).unwrap();
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
    fn a_parked_thread_wakes_for_the_next_command() {
        // A lost wake-up would hang `drain`; run on a helper thread and fail after a deadline instead.
        let (report, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let (r, log, _) = recorder(None);
            let mut t = LaunchThread::start(r, Duration::ZERO).unwrap();
            for i in 0..300u64 {
                // Idle gaps of 0, 50 and 2,000 µs: the post lands before, while and after the thread parks.
                std::thread::sleep(Duration::from_micros([0, 50, 2000][(i % 3) as usize]));
                t.post(Command::SetSlot(SlotId(1), i)).unwrap();
                t.post(Command::Launch).unwrap();
                t.drain().unwrap();
            }
            let _ = report.send(log.lock().unwrap().len());
        });
        assert_eq!(outcome.recv_timeout(Duration::from_secs(20)), Ok(600), "a post did not wake the parked thread (or a command was lost)");
    }

    #[test]
    fn a_failed_command_is_reported_once_and_every_later_command_is_skipped() {
        let (r, log, _) = recorder(Some(2));
        let mut t = LaunchThread::start(r, Duration::from_millis(10)).unwrap();
        t.post(Command::Launch).unwrap();
        t.post(Command::SetSlot(SlotId(0), 7)).unwrap();
        // The third command fails on the thread.
        t.post(Command::Launch).unwrap();
        // Posting goes on until the caller learns of the failure; the skipped commands still drain.
        let mut reported = None;
        for _ in 0..1000 {
            if let Err(e) = t.post(Command::Launch) {
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
        assert!(matches!(t.post(Command::Launch), Err(LaunchFault::AfterFailure)));
        assert_eq!(*log.lock().unwrap(), vec![Command::Launch, Command::SetSlot(SlotId(0), 7)], "nothing ran after the failure");
    }

    #[test]
    fn stop_runs_what_was_posted_and_hands_the_submitter_back() {
        let (r, log, _) = recorder(None);
        let started = r.started.clone();
        let mut t = LaunchThread::start(r, Duration::ZERO).unwrap();
        for _ in 0..100 {
            t.post(Command::Launch).unwrap();
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
            fn run(&mut self, _: Command) -> Result<(), &'static str> {
                panic!("ran after a failed start")
            }
        }
        let mut t = LaunchThread::start(NoContext, Duration::ZERO).unwrap();
        let first = t.post(Command::Launch).err().or_else(|| t.drain().err());
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
            fn run(&mut self, _: Command) -> Result<(), ()> {
                panic!("driver binding panicked")
            }
        }
        let mut t = LaunchThread::start(Panics, Duration::ZERO).unwrap();
        t.post(Command::Launch).unwrap();
        assert!(matches!(t.drain(), Err(LaunchFault::Ended(_))), "drain must not wait forever for a dead thread");
        let (back, status) = t.stop();
        assert!(back.is_none() && matches!(status, Err(LaunchFault::Ended(_))));
    }
}
