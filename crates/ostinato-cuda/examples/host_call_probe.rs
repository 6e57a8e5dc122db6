//! Probe (GPU): is the host cost of one replay call a property of the instantiated graph, of the
//! process, or of the moment? Six Ostinato execs and six stream-captured graphs of the same 941-node
//! `add_one` chain (1 block), one process; `ROUNDS` rounds, each graph in turn (the start rotating per
//! round): wait until the GPU is idle, then time a burst of `BURST` back-to-back replay calls. Prints
//! each graph's median, min and max µs per call over the rounds, and, before and after the rounds, the
//! process's CPU speed on the same thread: a dependent multiply-xor chain and pointer chases through
//! 256 KiB, 32 MiB and 128 MiB (does a process whose calls are dear run its CPU or memory slower?).
//! With the argument `pdl`: three graphs each of Ostinato `auto` (940 programmatic edges), Ostinato
//! with PDL off, the plain capture and the capture with the PDL launch attribute, the same rounds: do
//! programmatic edges cost the host's launch? With the argument `streams`: two
//! captured graphs, each launched on each of eight streams in turn (the same rounds and bursts): is the
//! cost the graph's or the stream's? With the argument `shapes`: Ostinato execs of
//! `add_one` graphs of other shapes in one process (chains of 1 to 2,000 nodes, 2 to 16 independent
//! nodes, 2 and 4 chains side by side, PDL auto and off), the same rounds: what in a graph sets the
//! cost of its launch? With the argument `thread`: three Ostinato execs each replayed from the caller's
//! thread, through a launch thread that spins (the default) and through one that sleeps at once, and
//! three plain captures, interleaved: what does the caller pay per call (bursts, and one call on an
//! idle GPU), and what does a 1-node graph's replay-to-completion cost each way? Run: `cargo run
//! --release -p ostinato-cuda --example host_call_probe [streams|shapes|pdl|thread]` (the GPU machine
//! runs the copy in `.devbin/`).

use std::time::Instant;

#[path = "common/chain.rs"]
mod chain;

use chain::NODES;
use ostinato::{Backend, BufferBinding, Exec};
use ostinato_cuda::raw::{Buffer, CapturedGraph, Stream};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaExec, CudaOptions, Device, DeviceSelector, LaunchOn, PdlMode, PdlPolicy, PdlTrigger};

const GRAPHS: usize = 6;
const ROUNDS: usize = 15;
const BURST: usize = 20;

enum Replayable {
    Ostinato(Box<CudaExec>),
    Captured(CapturedGraph, Stream),
}

impl Replayable {
    fn replay(&mut self) -> Result<(), String> {
        match self {
            Replayable::Ostinato(e) => e.replay().map_err(|x| x.to_string()),
            Replayable::Captured(g, s) => g.launch(s).map_err(|x| x.to_string()),
        }
    }
    fn wait(&mut self) -> Result<(), String> {
        match self {
            Replayable::Ostinato(e) => e.wait().map_err(|x| x.to_string()),
            Replayable::Captured(_, s) => s.synchronize().map_err(|x| x.to_string()),
        }
    }
}

fn main() -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let device = Device::open(&DeviceSelector::from_env().map_err(e)?).map_err(e)?;
    let sig = chain::add_one_sig();
    let (plan, _) = chain::chain_plan()?;
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).map_err(e)?;
    let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions::default()).map_err(e)?;
    let plain = modules.plain_kernel("add_one", &sig).map_err(e)?;
    let buffer = Buffer::new(&device, 1024).map_err(e)?;
    let arg = std::env::args().nth(1);
    if arg.as_deref() == Some("streams") {
        return graphs_by_stream(&device, &plain, &buffer);
    }
    if arg.as_deref() == Some("shapes") {
        return graphs_by_shape(&device, &modules);
    }
    if arg.as_deref() == Some("pdl") {
        return graphs_by_pdl(&device, &modules, &plain, &buffer);
    }
    if arg.as_deref() == Some("thread") {
        return graphs_by_launch_thread(&device, &modules, &plain, &buffer);
    }
    let mut graphs: Vec<(String, Replayable)> = Vec::new();
    for i in 0..GRAPHS {
        let kernels = vec![modules.kernel("add_one", &sig).map_err(e)?];
        let exec = backend.instantiate(&plan, kernels, vec![BufferBinding::Allocate]).map_err(e)?;
        graphs.push((format!("ostinato-{i}"), Replayable::Ostinato(Box::new(exec))));
        let stream = Stream::new(&device).map_err(e)?;
        let captured = chain::capture_chain(&plain, buffer.ptr(), &stream, false)?;
        graphs.push((format!("captured-{i}"), Replayable::Captured(captured, stream)));
    }
    let before = cpu_speed();
    let mut times = time_bursts(&mut graphs)?;
    let after = cpu_speed();
    println!("process CPU speed before the rounds: {before}; after: {after}");
    println!(
        "device {} {}; {NODES}-node chain; µs per replay call in bursts of {BURST} after an idle GPU, {ROUNDS} rounds",
        device.info().name,
        device.info().uuid
    );
    println!("| graph | median | min | max | rounds under 3 µs |");
    println!("|---|---|---|---|---|");
    for ((name, _), t) in graphs.iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        let fast = t.iter().filter(|v| **v < 3.0).count();
        println!("| {name} | {:.2} | {:.2} | {:.2} | {fast} of {} |", t[t.len() / 2], t[0], t[t.len() - 1], t.len());
    }
    Ok(())
}

/// The calling thread's CPU and memory speed: ns per step of a dependent 64-bit multiply-xor chain and
/// of dependent pointer chases through one random cycle over 256 KiB, 32 MiB and 128 MiB.
fn cpu_speed() -> String {
    const STEPS: usize = 2_000_000;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let t = Instant::now();
    for _ in 0..50_000_000 {
        x = x.wrapping_mul(x | 1) ^ (x >> 7); // nonlinear: no closed form for the compiler to use
    }
    let mul_ns = t.elapsed().as_secs_f64() * 1e9 / 50e6;
    std::hint::black_box(x);
    let chase = |bytes: usize| {
        // Sattolo's shuffle: `next` is one cycle through every index, in random order.
        let n = bytes / 4;
        let mut next: Vec<u32> = (0..n as u32).collect();
        let mut r = 0x2545_F491_4F6C_DD1Du64;
        for i in (1..n).rev() {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            next.swap(i, (r % i as u64) as usize);
        }
        let mut p = 0u32;
        for _ in 0..n.min(STEPS) {
            p = next[p as usize];
        }
        let t = Instant::now();
        for _ in 0..STEPS {
            p = next[p as usize];
        }
        std::hint::black_box(p);
        t.elapsed().as_secs_f64() * 1e9 / STEPS as f64
    };
    format!("mul-xor {mul_ns:.3} ns, chase 256 KiB {:.2} ns, 32 MiB {:.2} ns, 128 MiB {:.1} ns", chase(256 << 10), chase(32 << 20), chase(128 << 20))
}

/// One measurement per graph per round: `ROUNDS` rounds (after one that warms every graph up), each
/// graph in turn with the start rotating per round.
fn per_round(graphs: &mut [(String, Replayable)], mut measure: impl FnMut(&mut Replayable) -> Result<f64, String>) -> Result<Vec<Vec<f64>>, String> {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); graphs.len()];
    for round in 0..ROUNDS + 1 {
        for j in 0..graphs.len() {
            let i = (j + round) % graphs.len();
            let us = measure(&mut graphs[i].1)?;
            if round > 0 {
                times[i].push(us);
            }
        }
    }
    Ok(times)
}

/// µs per replay call of each graph, one entry per round: a burst of `BURST` back-to-back calls after
/// an idle GPU.
fn time_bursts(graphs: &mut [(String, Replayable)]) -> Result<Vec<Vec<f64>>, String> {
    per_round(graphs, |r| {
        r.wait()?;
        let t = Instant::now();
        for _ in 0..BURST {
            r.replay()?;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / BURST as f64;
        r.wait()?;
        Ok(us)
    })
}

/// Ostinato execs of graphs of several shapes in one process: the median, min and max µs per replay
/// call of each over the rounds.
fn graphs_by_shape(device: &Device, modules: &BuiltinModules) -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let sig = chain::add_one_sig();
    let off = CudaOptions { pdl: PdlPolicy::new(PdlMode::Off), ..CudaOptions::default() };
    let auto = CudaBackend::with_builtins(device, modules, CudaOptions::default()).map_err(e)?;
    let plain = CudaBackend::with_builtins(device, modules, off).map_err(e)?;
    let mut shapes: Vec<(usize, usize, bool)> = [1, 25, 50, 100, 200, 300, 400, 512, 600, 800, 941, 1500, 2000].iter().map(|&n| (1, n, true)).collect();
    shapes.extend([(1, 200, false), (1, 941, false), (2, 1, true), (4, 1, true), (8, 1, true), (16, 1, true), (2, 470, true), (4, 235, true), (4, 941, true)]);
    let mut graphs: Vec<(String, Replayable)> = Vec::new();
    let mut facts = Vec::new();
    for &(lanes, len, pdl) in &shapes {
        let plan = chain::lanes_plan(lanes, len)?;
        let kernels = vec![modules.kernel("add_one", &sig).map_err(e)?];
        let exec = if pdl { &auto } else { &plain }.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).map_err(e)?;
        let name = format!("{lanes} × {len}{}", if pdl { "" } else { ", PDL off" });
        facts.push((plan.node_count(), plan.lanes().count(), exec.programmatic_edges(), plan.edges().len()));
        graphs.push((name, Replayable::Ostinato(Box::new(exec))));
    }
    let mut times = time_bursts(&mut graphs)?;
    println!("device {} {}; µs per replay call in bursts of {BURST} after an idle GPU, {ROUNDS} rounds, one process", device.info().name, device.info().uuid);
    println!("| chains × nodes | nodes | lanes | edges (programmatic) | median | min | max |");
    println!("|---|---|---|---|---|---|---|");
    for (((name, _), t), (nodes, lanes, prog, edges)) in graphs.iter().zip(&mut times).zip(facts) {
        t.sort_by(f64::total_cmp);
        println!("| {name} | {nodes} | {lanes} | {edges} ({prog}) | {:.2} | {:.2} | {:.2} |", t[t.len() / 2], t[0], t[t.len() - 1]);
    }
    Ok(())
}

/// Three graphs each of four kinds, with and without programmatic edges: the median µs per replay call
/// of each graph over the rounds, and of each kind (the median of its three).
fn graphs_by_pdl(device: &Device, modules: &BuiltinModules, plain: &ostinato_cuda::CudaKernel, buffer: &Buffer) -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let sig = chain::add_one_sig();
    let (plan, _) = chain::chain_plan()?;
    let auto = CudaBackend::with_builtins(device, modules, CudaOptions::default()).map_err(e)?;
    let off = CudaBackend::with_builtins(device, modules, CudaOptions { pdl: PdlPolicy::new(PdlMode::Off), ..CudaOptions::default() }).map_err(e)?;
    let waiting = modules.kernel("add_one", &sig).map_err(e)?;
    const KINDS: [&str; 4] = ["ostinato auto", "ostinato pdl-off", "captured", "captured-pdl"];
    let mut graphs: Vec<(String, Replayable)> = Vec::new();
    for i in 0..3 {
        for (k, kind) in KINDS.iter().enumerate() {
            let r = match k {
                0 | 1 => {
                    let exec =
                        [&auto, &off][k].instantiate(&plan, vec![modules.kernel("add_one", &sig).map_err(e)?], vec![BufferBinding::Allocate]).map_err(e)?;
                    Replayable::Ostinato(Box::new(exec))
                }
                _ => {
                    let stream = Stream::new(device).map_err(e)?;
                    let g = chain::capture_chain(if k == 2 { plain } else { &waiting }, buffer.ptr(), &stream, k == 3)?;
                    Replayable::Captured(g, stream)
                }
            };
            graphs.push((format!("{kind} {i}"), r));
        }
    }
    let mut times = time_bursts(&mut graphs)?;
    println!(
        "device {} {}; {NODES}-node chain; µs per replay call in bursts of {BURST} after an idle GPU, {ROUNDS} rounds, one process",
        device.info().name,
        device.info().uuid
    );
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect();
    println!("| kind | graphs' medians | median |");
    println!("|---|---|---|");
    for (k, kind) in KINDS.iter().enumerate() {
        let mut m: Vec<f64> = (0..3).map(|i| medians[i * KINDS.len() + k]).collect();
        let cells = m.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(", ");
        m.sort_by(f64::total_cmp);
        println!("| {kind} | {cells} | {:.2} |", m[1]);
    }
    Ok(())
}

/// Two captured graphs of the chain, each launched on each of eight streams: the median µs per call of
/// every (graph, stream) pair over `ROUNDS` rounds of `BURST` calls after an idle GPU.
fn graphs_by_stream(device: &Device, plain: &ostinato_cuda::CudaKernel, buffer: &Buffer) -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    const STREAMS: usize = 8;
    let streams = (0..STREAMS).map(|_| Stream::new(device).map_err(e)).collect::<Result<Vec<_>, _>>()?;
    let graphs = (0..2).map(|i| chain::capture_chain(plain, buffer.ptr(), &streams[i], false)).collect::<Result<Vec<_>, _>>()?;
    let mut times = vec![vec![Vec::new(); STREAMS]; graphs.len()];
    for round in 0..ROUNDS + 1 {
        for j in 0..graphs.len() * STREAMS {
            let k = (j + round) % (graphs.len() * STREAMS);
            let (g, s) = (k / STREAMS, k % STREAMS);
            streams[s].synchronize().map_err(e)?;
            let t = Instant::now();
            for _ in 0..BURST {
                graphs[g].launch(&streams[s]).map_err(e)?;
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / BURST as f64;
            streams[s].synchronize().map_err(e)?;
            if round > 0 {
                times[g][s].push(us);
            }
        }
    }
    println!(
        "device {} {}; {NODES}-node chain; median µs per replay call, bursts of {BURST} after an idle GPU, {ROUNDS} rounds",
        device.info().name,
        device.info().uuid
    );
    println!("| graph | {} |", (0..STREAMS).map(|s| format!("stream {s}")).collect::<Vec<_>>().join(" | "));
    println!("|---|{}", "---|".repeat(STREAMS));
    for (g, row) in times.iter_mut().enumerate() {
        let cells: Vec<String> = row
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                format!("{:.2}", t[t.len() / 2])
            })
            .collect();
        println!("| captured-{g} | {} |", cells.join(" | "));
    }
    Ok(())
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One entry per graph per round: the median of five replay calls, each after an idle GPU, timed to
/// the call's return (what the caller spends in it) or, `to_completion`, to the end of the `wait` after
/// it (the replay done on the GPU).
fn time_calls(graphs: &mut [(String, Replayable)], to_completion: bool) -> Result<Vec<Vec<f64>>, String> {
    per_round(graphs, |r| {
        let mut calls = [0.0; 5];
        for c in &mut calls {
            r.wait()?;
            let t = Instant::now();
            r.replay()?;
            if to_completion {
                r.wait()?;
            }
            *c = t.elapsed().as_secs_f64() * 1e6;
        }
        r.wait()?;
        Ok(median(&mut calls))
    })
}

/// Three of each kind, interleaved, on the 941-node chain (bursts and single calls) and on a 1-node
/// graph (replay to completion): the caller's thread, a spinning launch thread, a launch thread that
/// sleeps after every command, and the plain capture.
fn graphs_by_launch_thread(device: &Device, modules: &BuiltinModules, plain: &ostinato_cuda::CudaKernel, buffer: &Buffer) -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let sig = chain::add_one_sig();
    const KINDS: [&str; 4] = ["ostinato, caller's thread", "ostinato, launch thread (spins 5 ms)", "ostinato, launch thread (sleeps)", "captured"];
    let launches = [LaunchOn::Caller, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }, LaunchOn::Thread { spin: std::time::Duration::ZERO }];
    let backends = launches
        .iter()
        .map(|&launch| CudaBackend::with_builtins(device, modules, CudaOptions { launch, ..CudaOptions::default() }).map_err(e))
        .collect::<Result<Vec<_>, _>>()?;
    let one = chain::lanes_plan(1, 1)?;
    let (chain_plan, _) = chain::chain_plan()?;
    let mut results: Vec<Vec<Vec<f64>>> = Vec::new();
    for (plan, captured_len) in [(&chain_plan, NODES), (&one, 1)] {
        let mut graphs: Vec<(String, Replayable)> = Vec::new();
        for i in 0..3 {
            for (k, kind) in KINDS.iter().enumerate() {
                let r = match backends.get(k) {
                    Some(b) => {
                        let exec = b.instantiate(plan, vec![modules.kernel("add_one", &sig).map_err(e)?], ostinato::allocate_all(plan)).map_err(e)?;
                        if exec.launch_on_thread() != (k > 0) {
                            return Err(format!("{kind}: the exec's launch placement is not the one asked for"));
                        }
                        Replayable::Ostinato(Box::new(exec))
                    }
                    None => {
                        let stream = Stream::new(device).map_err(e)?;
                        let g = chain::capture_launches(plain, buffer.ptr(), &stream, false, captured_len)?;
                        Replayable::Captured(g, stream)
                    }
                };
                graphs.push((format!("{kind} {i}"), r));
            }
        }
        if captured_len == NODES {
            results.push(time_bursts(&mut graphs)?);
            results.push(time_calls(&mut graphs, false)?);
        } else {
            results.push(time_calls(&mut graphs, true)?);
        }
    }
    println!(
        "device {} {}; µs, medians over {ROUNDS} rounds of each graph, then the median of the kind's three graphs (each graph's median in brackets); one process",
        device.info().name,
        device.info().uuid
    );
    println!("| kind | {NODES}-node chain: per call in bursts of {BURST} | {NODES}-node chain: one call on an idle GPU | 1-node graph: call to completion |");
    println!("|---|---|---|---|");
    for (k, kind) in KINDS.iter().enumerate() {
        let cells: Vec<String> = results
            .iter_mut()
            .map(|per_graph| {
                let mut m: Vec<f64> = (0..3).map(|i| median(&mut per_graph[i * KINDS.len() + k])).collect();
                let each = m.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(", ");
                format!("{:.2} ({each})", median(&mut m))
            })
            .collect();
        println!("| {kind} | {} |", cells.join(" | "));
    }
    Ok(())
}
