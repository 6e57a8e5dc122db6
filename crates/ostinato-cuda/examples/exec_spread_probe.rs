//! Probe (GPU): on the benchmark's tiny rows (one dispatch; four single dispatches side by side),
//! identical graphs measured several percent apart in one process (docs/fences.md §6). Is that a
//! property of each instantiated exec, or of the moment it was measured? Eight Ostinato execs of each
//! graph, all bound to the same device buffers (as the benchmark's arms are), and for the one-node
//! graph eight more Ostinato execs built by stream capture (`GraphBuild::Capture`) and eight
//! stream-captured graphs of the same launch, each timed on its own stream and on one stream they
//! share (is the difference the graph's or its stream's?); `ROUNDS` rounds, each graph in turn (the
//! start rotating per round): GPU µs of one replay between two events, the benchmark's sample. Prints
//! each graph's median over all rounds and over each half of them: a difference that belongs to the
//! exec keeps its order from one half to the other. Run: `cargo run --release -p ostinato-cuda
//! --example exec_spread_probe` (the GPU machine runs the copy in `.devbin/`).

#[path = "common/chain.rs"]
mod chain;

use std::rc::Rc;

use ostinato::{Backend, BufferBinding, Exec};
use ostinato_cuda::raw::{Buffer, CapturedGraph, Event, Stream};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaExec, CudaOptions, Device, DeviceMemory, DeviceSelector, GraphBuild, PdlTrigger};

const COPIES: usize = 8;
const ROUNDS: usize = 60;

fn e(x: ostinato_cuda::CudaError) -> String {
    x.to_string()
}

enum Timed {
    Ostinato(Box<CudaExec>),
    Captured { graph: Rc<CapturedGraph>, stream: Rc<Stream>, start: Event, stop: Event },
}

impl Timed {
    /// GPU µs of one replay.
    fn sample(&mut self) -> Result<f64, String> {
        match self {
            Timed::Ostinato(x) => {
                x.timer_start().map_err(e)?;
                x.replay().map_err(e)?;
                Ok(x.timer_stop_ms().map_err(e)? * 1e3)
            }
            Timed::Captured { graph, stream, start, stop } => {
                stream.record(start).map_err(e)?;
                graph.launch(stream).map_err(e)?;
                stream.record(stop).map_err(e)?;
                stop.synchronize().map_err(e)?;
                Ok(stop.elapsed_ms_since(start).map_err(e)? * 1e3)
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Ranks of `v` (0 = smallest).
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    for (rank, &i) in idx.iter().enumerate() {
        r[i] = rank as f64;
    }
    r
}

/// Spearman's rank correlation of two equally long lists.
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let d2: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - y) * (x - y)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

fn main() -> Result<(), String> {
    let device = Device::open(&DeviceSelector::from_env().map_err(e)?).map_err(e)?;
    let sig = chain::add_one_sig();
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).map_err(e)?;
    let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions::default()).map_err(e)?;
    let by_capture = CudaBackend::with_builtins(&device, &modules, CudaOptions { build: GraphBuild::Capture, ..CudaOptions::default() }).map_err(e)?;
    let plain = modules.plain_kernel("add_one", &sig).map_err(e)?;
    let buffers = (0..4).map(|_| Buffer::new(&device, 1024).map_err(e)).collect::<Result<Vec<_>, _>>()?;
    println!("device {} {}; GPU µs of one replay, {ROUNDS} rounds, {COPIES} copies of each graph, one process", device.info().name, device.info().uuid);
    // The stream the one-node captures also share, made before any of the graphs (and their streams).
    let shared = Rc::new(Stream::new(&device).map_err(e)?);
    let timer = || -> Result<(Event, Event), String> { Ok((Event::new(true).map_err(e)?, Event::new(true).map_err(e)?)) };
    for lanes in [1, 4] {
        let plan = chain::lanes_plan(lanes, 1)?;
        let mut graphs: Vec<(String, Timed)> = Vec::new();
        for i in 0..COPIES {
            let bindings = || buffers[..lanes].iter().map(|b| BufferBinding::External(DeviceMemory { ptr: b.ptr(), len: b.len() as u64 })).collect();
            let exec = backend.instantiate(&plan, vec![modules.kernel("add_one", &sig).map_err(e)?], bindings()).map_err(e)?;
            graphs.push((format!("ostinato {i}"), Timed::Ostinato(Box::new(exec))));
            if lanes == 1 {
                let exec = by_capture.instantiate(&plan, vec![modules.kernel("add_one", &sig).map_err(e)?], bindings()).map_err(e)?;
                graphs.push((format!("ostinato, capture build {i}"), Timed::Ostinato(Box::new(exec))));
                let stream = Rc::new(Stream::new(&device).map_err(e)?);
                let graph = Rc::new(chain::capture_launches(&plain, buffers[0].ptr(), &stream, false, 1)?);
                let (start, stop) = timer()?;
                graphs.push((format!("captured {i}"), Timed::Captured { graph: graph.clone(), stream, start, stop }));
                let (start, stop) = timer()?;
                graphs.push((format!("captured, shared stream {i}"), Timed::Captured { graph, stream: shared.clone(), start, stop }));
            }
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); graphs.len()];
        for round in 0..ROUNDS + 3 {
            for j in 0..graphs.len() {
                let i = (j + round) % graphs.len();
                let us = graphs[i].1.sample()?;
                if round >= 3 {
                    times[i].push(us);
                }
            }
        }
        println!("\n{lanes} × 1 dispatch ({} nodes, no edges)\n", plan.node_count());
        println!("| graph | median | first half | second half | min | max |");
        println!("|---|---|---|---|---|---|");
        let (mut first, mut second, mut all) = (Vec::new(), Vec::new(), Vec::new());
        for ((name, _), t) in graphs.iter().zip(&times) {
            let h = t.len() / 2;
            let (f, s) = (median(&mut t[..h].to_vec()), median(&mut t[h..].to_vec()));
            let mut sorted = t.clone();
            let m = median(&mut sorted);
            println!("| {name} | {m:.3} | {f:.3} | {s:.3} | {:.3} | {:.3} |", sorted[0], sorted[sorted.len() - 1]);
            first.push(f);
            second.push(s);
            all.push(m);
        }
        for kind in ["ostinato ", "ostinato, capture build ", "captured ", "captured, shared stream "] {
            let mut m: Vec<f64> =
                graphs.iter().zip(&all).filter(|((n, _), _)| n.strip_prefix(kind).is_some_and(|r| r.parse::<usize>().is_ok())).map(|(_, m)| *m).collect();
            if !m.is_empty() {
                println!("{}: median of the graphs' medians {:.3}", kind.trim_end(), median(&mut m));
            }
        }
        let lo = all.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = all.iter().cloned().fold(0.0, f64::max);
        println!(
            "\nmedians {lo:.3}–{hi:.3} µs ({:.1}% apart); rank correlation of the two halves' medians {:.2} (1: every graph keeps its place)",
            (hi / lo - 1.0) * 100.0,
            spearman(&first, &second)
        );
    }
    Ok(())
}
