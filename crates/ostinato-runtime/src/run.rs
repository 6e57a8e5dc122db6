//! Running a graph file: what `ostinato run` does. Load → plan → open the backend → bind each kernel
//! from the file's reference → instantiate → initialise → replay → (check against the host oracle)
//! → (dump).

use std::path::{Path, PathBuf};
use std::time::Instant;

use ostinato::{Plan, PlanOptions};

use crate::error::RuntimeError;
use crate::exec::ExecHandle;
use crate::exec::NamedBuffers;
use crate::kind::BackendKind;
use crate::options::ExecOptions;
use crate::oracle::host_serial_exec;
use crate::session::{BackendSpec, Session};

/// How to run a graph file.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub backend: BackendKind,
    /// How the exec runs (the host's race checker is turned on by `check` too).
    pub exec: ExecOptions,
    pub replays: usize,
    /// Compare every root buffer with the host's serial order, bit for bit (and, on the host, turn
    /// the race checker on).
    pub check: bool,
    /// Write each root buffer's final bytes to `DIR/<name>.bin`.
    pub dump: Option<PathBuf>,
    /// CUDA graph mode: write the submitted graph as DOT here.
    pub dot: Option<PathBuf>,
    pub max_lanes: usize,
    /// Run the replays traced (every node timed) and write the trace-event JSON here.
    pub trace: Option<PathBuf>,
    /// Run the replays traced and draw the SVG timeline here.
    pub trace_svg: Option<PathBuf>,
}

/// What a run reports.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub nodes: usize,
    pub edges: usize,
    pub replays: usize,
    /// Wall time of the replays, until the last one finished.
    pub seconds: f64,
    pub checked: bool,
    /// Bytes of the root buffers (what `--check` compared and `--dump` wrote).
    pub bytes: u64,
    /// What was opened and what the backend chose.
    pub notes: Vec<String>,
}

/// Runs a graph file.
pub fn run_file(path: &Path, o: &RunOptions) -> Result<RunReport, RuntimeError> {
    let (f, _) = crate::kernels::load_file(path)?;
    check_outputs(path, &f, o)?;
    let plan = Plan::compile_with(&f.graph, PlanOptions { max_lanes: o.max_lanes }).map_err(|e| RuntimeError::File(f.plan_error(&e)))?;
    let mut exec_options = o.exec.clone();
    exec_options.check_races |= o.check;
    let spec = exec_options.spec(o.backend)?;
    if o.dot.is_some() && !is_cuda_graph(&spec) {
        return Err(RuntimeError::Usage("--dot writes a CUDA graph: it needs --backend cuda in graph mode".into()));
    }
    let session = Session::open(&spec)?;
    let mut notes = vec![session.describe().to_string()];
    let mut exec = session.instantiate_file(&f, &plan)?;
    notes.extend(exec.notes().iter().cloned());
    if let Some(dot) = &o.dot {
        write_dot(exec.backend_exec(), dot)?;
        notes.push(format!("graph written to {}", dot.display()));
    }
    exec.write_inits(&f.inits)?;
    let t0 = Instant::now();
    if o.trace.is_some() || o.trace_svg.is_some() {
        // The replays themselves are traced: `--check` then compares what traced replays computed.
        let t = exec.trace(o.replays)?;
        notes.extend(trace_notes(&t));
        crate::trace::write(&t, &plan, o.trace.as_deref(), o.trace_svg.as_deref())?;
        notes.extend(o.trace.iter().chain(&o.trace_svg).map(|p| format!("trace written to {}", p.display())));
    } else {
        for _ in 0..o.replays {
            exec.replay()?;
        }
        exec.wait()?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    notes.extend(measured_note(exec.backend_exec(), o.replays));
    // The check and the dump go piece by piece: besides the exec (and the oracle's exec) nothing
    // holds more than a piece of a buffer.
    if o.check {
        let host_ref = |k: usize| Ok(f.kernel_ref(k, "host")?.clone());
        let mut oracle = host_serial_exec(&plan, &host_ref, &f.inits, o.replays)?;
        compare_execs(&mut *oracle, &mut *exec)?;
    }
    if let Some(dir) = &o.dump {
        dump_exec(dir, &mut *exec)?;
    }
    let bytes = plan.graph().buffers().iter().enumerate().filter(|(i, b)| b.root.index() == *i).map(|(_, b)| b.size).sum();
    Ok(RunReport { nodes: plan.node_count(), edges: plan.edges().len(), replays: o.replays, seconds, checked: o.check, bytes, notes })
}

/// Refuses, before anything runs or is written, two of the run's outputs on one file and an output on
/// a file the run reads (the graph file, each kernel file it names).
fn check_outputs(path: &Path, f: &ostinato::file::GraphFile, o: &RunOptions) -> Result<(), RuntimeError> {
    use crate::outputs::Named;
    let named = |what: &str, p: &Option<PathBuf>| p.as_ref().map(|p| Named { what: what.to_string(), path: p.clone() });
    let mut outputs: Vec<Named> = [named("--trace", &o.trace), named("--trace-svg", &o.trace_svg), named("--dot", &o.dot)].into_iter().flatten().collect();
    if let Some(dir) = &o.dump {
        for name in root_names(&f.graph) {
            let p = dir.join(format!("{name}.bin"));
            // Before the run, not only before the write: a link in the way costs no replay.
            crate::outputs::check_dump_target(&p)?;
            outputs.push(Named { what: format!("--dump's {name}.bin"), path: p });
        }
    }
    let mut inputs = vec![Named { what: "the graph file".into(), path: path.to_path_buf() }];
    for (k, impls) in f.impls.iter().enumerate() {
        for (backend, r) in impls {
            if r.builtin_name().is_none() && r.code.is_none() && r.binary.is_none() {
                inputs.push(Named { what: format!("kernel `{}`'s {backend} implementation", f.graph.kernels()[k].name), path: r.path() });
            }
        }
    }
    crate::outputs::check(&outputs, &inputs)
}

/// The names of `g`'s root buffers (each a buffer of its own, not a view).
fn root_names(g: &ostinato::Graph) -> impl Iterator<Item = &str> {
    g.buffers().iter().enumerate().filter(|(i, b)| b.root.index() == *i).map(|(_, b)| b.name.as_str())
}

/// One line per replay of a trace: its time on the device, the nodes' time added up, the idle time.
fn trace_notes(t: &ostinato::Trace) -> Vec<String> {
    let us = |ns: u64| ns as f64 / 1e3;
    // The first replays and the last (a long run would print a line per replay otherwise).
    let n = t.replays.len();
    let shown = (0..n).filter(|&r| r < 3 || r + 1 == n);
    let mut out: Vec<String> = shown
        .filter_map(|r| t.summary(r).map(|s| (r, s)))
        .map(|(r, s)| {
            format!(
                "trace: replay {r}: {:.2} µs on the device; nodes {:.2} µs added up, busy {:.2} µs, idle {:.2} µs in {} gaps",
                us(s.step_ns),
                us(s.sum_ns),
                us(s.busy_ns),
                us(s.idle_ns),
                s.gaps.len()
            )
        })
        .collect();
    if n > 4 {
        out.insert(3, format!("trace: … {} more replays (the JSON has them all)", n - 4));
    }
    out.extend(edge_gap_notes(t, n.saturating_sub(1)));
    out.extend(t.notes.iter().map(|n| format!("trace: {n}")));
    out
}

/// One line per kind of edge between two bars in replay `r`: how many, the median, least and most time
/// from the producer's end to the consumer's start ([`ostinato::Trace::edge_gaps`]), and how many
/// consumers began before their producer ended.
fn edge_gap_notes(t: &ostinato::Trace, r: usize) -> Vec<String> {
    let gaps = t.edge_gaps(r);
    let mut kinds: Vec<ostinato::EdgeKind> = Vec::new();
    for (e, _) in &gaps {
        if !kinds.contains(&e.kind) {
            kinds.push(e.kind);
        }
    }
    kinds
        .into_iter()
        .filter_map(|kind| {
            let v: Vec<i64> = gaps.iter().filter(|(e, _)| e.kind == kind).map(|(_, g)| *g).collect();
            let s = ostinato::GapSummary::of(&v)?;
            let us = |ns: i64| ns as f64 / 1e3;
            Some(format!(
                "trace: replay {r}: {} {} edges between bars, consumer start − producer end median {:.2} µs (least {:.2}, most {:.2}); {} consumers began before their producer ended",
                s.edges,
                kind.as_str(),
                s.median_ns / 1e3,
                us(s.least_ns),
                us(s.most_ns),
                s.early,
            ))
        })
        .collect()
}

/// Compares every root buffer of `got` with `want`'s, piece by piece; the first differing byte is
/// the error.
fn compare_execs(want: &mut (dyn ExecHandle + 'static), got: &mut (dyn ExecHandle + 'static)) -> Result<(), RuntimeError> {
    let mut theirs = Vec::new();
    want.for_each_root_piece(|name, offset, mine| {
        let id = got.buffer_id(name)?;
        theirs.resize(mine.len(), 0);
        got.read_buffer(id, offset, &mut theirs)?;
        match mine.iter().zip(&theirs).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(RuntimeError::Mismatch { buffer: name.to_string(), byte: offset as usize + i, want: mine[i], got: theirs[i] }),
        }
    })
}

#[cfg(feature = "cuda")]
fn is_cuda_graph(spec: &BackendSpec) -> bool {
    matches!(spec, BackendSpec::Cuda { options, .. } if options.mode == ostinato_cuda::ExecMode::Graph)
}
#[cfg(not(feature = "cuda"))]
fn is_cuda_graph(_: &BackendSpec) -> bool {
    false
}

/// What a CUDA graph exec measured over the replays and chose (`ostinato_cuda::Tune`), or that it
/// had not finished; nothing where it had nothing to measure.
#[cfg(feature = "cuda")]
fn measured_note(exec: &mut dyn std::any::Any, replays: usize) -> Option<String> {
    let d = exec.downcast_mut::<ostinato_cuda::CudaExec>()?.decisions();
    let Some(t) = d.tuned else {
        return (d.candidates > 1).then(|| {
            format!(
                "{} submissions to measure, not chosen in {replays} replays (the measurement takes at most the first {}, the choice a replay after they complete)",
                d.candidates,
                ostinato_cuda::tuning_replays(d.candidates)
            )
        });
    };
    let times: Vec<String> = t.candidates.iter().map(|(label, us)| format!("{label} {us:.1}")).collect();
    let again = match t.confirmation {
        Some((c, [auto, pick])) => format!("; `{}` measured again beside auto's alone: {pick:.1} against {auto:.1}", t.candidates[c].0),
        None => String::new(),
    };
    Some(format!("measured {} submissions (median µs per replay: {}{again}), kept `{}`", t.candidates.len(), times.join(", "), t.candidates[t.chosen].0))
}
#[cfg(not(feature = "cuda"))]
fn measured_note(_: &mut dyn std::any::Any, _: usize) -> Option<String> {
    None
}

#[cfg(feature = "cuda")]
fn write_dot(exec: &mut dyn std::any::Any, path: &Path) -> Result<(), RuntimeError> {
    match exec.downcast_mut::<ostinato_cuda::CudaExec>() {
        Some(e) => Ok(e.write_dot(path)?),
        None => Err(RuntimeError::Usage("--dot writes a CUDA graph: it needs --backend cuda in graph mode".into())),
    }
}
#[cfg(not(feature = "cuda"))]
fn write_dot(_: &mut dyn std::any::Any, _: &Path) -> Result<(), RuntimeError> {
    Err(RuntimeError::Usage("--dot writes a CUDA graph: this build has no CUDA backend".into()))
}

/// Refuses a name that is not a plain file name (a path separator, `..`, a leading dot, a control
/// character), so nothing is written outside the dump folder. Graph names are identifiers already
/// (`ostinato::graph::check_name`); this holds for any name given here.
fn check_dump_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), RuntimeError> {
    for name in names {
        let plain = !name.is_empty() && !name.starts_with('.') && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control());
        if !plain {
            return Err(RuntimeError::Usage(format!("--dump: buffer name {name:?} is not a plain file name; nothing was written")));
        }
    }
    Ok(())
}

/// Writes each root buffer of `exec` to `dir/<name>.bin`, piece by piece (a symbolic link or another
/// special file in the way is refused, never followed).
fn dump_exec(dir: &Path, exec: &mut (dyn ExecHandle + 'static)) -> Result<(), RuntimeError> {
    use std::io::Write;
    check_dump_names(root_names(exec.plan().graph()))?;
    let io = |p: &Path, e: std::io::Error| RuntimeError::Io { path: p.display().to_string(), message: e.to_string() };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for name in root_names(exec.plan().graph()) {
        crate::outputs::check_dump_target(&dir.join(format!("{name}.bin")))?;
    }
    let mut open: Option<(String, std::fs::File)> = None;
    exec.for_each_root_piece(|name, _, bytes| {
        let p = dir.join(format!("{name}.bin"));
        if open.as_ref().is_none_or(|(n, _)| n != name) {
            open = Some((name.to_string(), crate::outputs::create_dump_file(&p)?));
        }
        match &mut open {
            Some((_, file)) => file.write_all(bytes).map_err(|e| io(&p, e)),
            None => Ok(()),
        }
    })
}

/// Writes each buffer's bytes to `dir/<name>.bin` (names checked as for [`run_file`]'s dump; a
/// symbolic link or another special file in the way is refused, never followed).
pub fn dump(dir: &Path, buffers: &NamedBuffers) -> Result<(), RuntimeError> {
    use std::io::Write;
    check_dump_names(buffers.iter().map(|(n, _)| n.as_str()))?;
    let io = |p: &Path, e: std::io::Error| RuntimeError::Io { path: p.display().to_string(), message: e.to_string() };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for (name, _) in buffers {
        crate::outputs::check_dump_target(&dir.join(format!("{name}.bin")))?;
    }
    for (name, bytes) in buffers {
        let p = dir.join(format!("{name}.bin"));
        crate::outputs::create_dump_file(&p)?.write_all(bytes).map_err(|e| io(&p, e))?;
    }
    Ok(())
}
