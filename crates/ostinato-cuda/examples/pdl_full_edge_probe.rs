//! Probe (GPU): does a kernel that lets its dependents launch early (`griddepcontrol.launch_dependents`)
//! also release a dependent joined to it by a FULL edge — one that never executes `griddepcontrol.wait`?
//!
//! Three kernels: `w` (small), `u` (one block writing 2^18 words, milliseconds) and `v` (reads the last
//! 64 words `u` writes). `u` is the built-in `mix` in the build named by the row's trigger; `v` is the
//! plain build (no `griddepcontrol`) unless the scenario says it waits. Each cell counts the runs (of
//! `REPS`) in which `v` read stale data (part 1: graphs made by stream capture; only a programmatic
//! edge into `v` releases it early). Part 2 replays random two-kernel programs, part 3 the same three
//! kernels, built by the exec with the edges in one mixed `cuGraphAddDependencies_v2` call and in one
//! call per edge type: the mixed call gave every edge the first edge's type, turning full edges
//! programmatic (docs/fences.md §4). Run: `cargo run --release -p ostinato-cuda --example
//! pdl_full_edge_probe` (the GPU machine runs the copy in `.devbin/`).

use ostinato::{read_roots, write_inits, Backend, Exec, Plan, PlanOptions};
use ostinato_cuda::lower::ShapeMode;
use ostinato_cuda::raw::{Args, Buffer, Event, Stream};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaKernel, CudaOptions, Device, DeviceSelector, Dims, ExecMode, PdlMode, PdlPolicy, PdlTrigger};
use ostinato_host::random_graphs::{mix_sig, random_two_kernel_program, serial_result};

const N: usize = 1 << 18;
const TAIL: usize = 64;
const IN: usize = 16;
const REPS: u32 = 20;

#[derive(Clone, Copy, Debug)]
enum Scenario {
    /// Graph: w -> u programmatic, u -> v full, v plain.
    GraphProgrammaticIn,
    /// Graph: u -> v full, v plain, no programmatic edge at all.
    GraphNoProgrammatic,
    /// Stream: w, u (programmatic serialization), v plain launched normally.
    Stream,
    /// Graph: w -> u programmatic, u -> v full, v waits (the trigger's own build).
    GraphWaitingConsumer,
    /// Graph on two streams: w -> u programmatic on stream 0; v plain on stream 1 after an event
    /// recorded behind u (a full edge to another branch).
    GraphOtherBranch,
    /// As `GraphOtherBranch`, and stream 0 goes on with y (programmatic after u): u's branch continues
    /// with an early-launched successor.
    GraphOtherBranchPdlNext,
    /// Positive control: graph, u -> v PROGRAMMATIC into the plain v (known unsafe).
    ControlProgrammaticIntoPlain,
}

struct Buffers {
    a: Buffer,
    b: Buffer,
    c: Buffer,
    d: Buffer,
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn mix_args(out: u64, inp: u64, n_out: usize, n_in: usize, salt: u32) -> Args {
    Args::new(&[out, inp, n_out as u64, n_in as u64, salt as u64])
}

fn one_block() -> Dims {
    Dims { grid: [1, 1, 1], block: [32, 1, 1], shared: 0 }
}

/// One run; true when `v` read what `u` wrote.
fn run(device: &Device, s: Scenario, trig: &CudaKernel, plain: &CudaKernel, bufs: &Buffers, salt: u32) -> Result<bool, String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    bufs.a.write(0, &vec![0u8; N * 4]).map_err(e)?;
    bufs.c.write(0, &vec![0u8; TAIL * 4]).map_err(e)?;
    let stream = Stream::new(device).map_err(e)?;
    let side = Stream::new(device).map_err(e)?;
    let (after_u, joined) = (Event::new(false).map_err(e)?, Event::new(false).map_err(e)?);
    let mut y_args = mix_args(bufs.d.ptr(), bufs.b.ptr(), IN, IN, 2);
    let mut w_args = mix_args(bufs.d.ptr(), bufs.b.ptr(), IN, IN, 1);
    let mut u_args = mix_args(bufs.a.ptr(), bufs.b.ptr(), N, IN, salt);
    let mut v_args = mix_args(bufs.c.ptr(), bufs.a.ptr() + ((N - TAIL) * 4) as u64, TAIL, TAIL, 0);
    let v_kernel = if matches!(s, Scenario::GraphWaitingConsumer) { trig } else { plain };
    let u_pdl = !matches!(s, Scenario::GraphNoProgrammatic);
    let v_pdl = matches!(s, Scenario::ControlProgrammaticIntoPlain);
    let branch = matches!(s, Scenario::GraphOtherBranch | Scenario::GraphOtherBranchPdlNext);
    let mut enqueue = |w: &mut Args, u: &mut Args, v: &mut Args| -> Result<(), String> {
        stream.launch(trig, one_block(), w, false).map_err(e)?;
        stream.launch(trig, one_block(), u, u_pdl).map_err(e)?;
        if !branch {
            return stream.launch(v_kernel, one_block(), v, v_pdl).map_err(e);
        }
        stream.record(&after_u).map_err(e)?;
        side.wait(&after_u).map_err(e)?;
        side.launch(v_kernel, one_block(), v, false).map_err(e)?;
        if matches!(s, Scenario::GraphOtherBranchPdlNext) {
            stream.launch(trig, one_block(), &mut y_args, true).map_err(e)?;
        }
        side.record(&joined).map_err(e)?;
        stream.wait(&joined).map_err(e)
    };
    if matches!(s, Scenario::Stream) {
        enqueue(&mut w_args, &mut u_args, &mut v_args)?;
    } else {
        stream.begin_capture().map_err(e)?;
        let r = enqueue(&mut w_args, &mut u_args, &mut v_args);
        let graph = stream.end_capture().map_err(e)?;
        r?;
        graph.launch(&stream).map_err(e)?;
    }
    stream.synchronize().map_err(e)?;
    let mut got = vec![0u8; TAIL * 4];
    bufs.c.read(0, &mut got).map_err(e)?;
    let want: Vec<u32> = (0..TAIL).map(|i| (((N - TAIL + i) % IN) as u32 + 1).wrapping_add(salt)).collect();
    Ok(got == words(&want))
}

fn main() -> Result<(), String> {
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let device = Device::open(&DeviceSelector::from_env().map_err(e)?).map_err(e)?;
    let sig = mix_sig();
    let bufs = Buffers {
        a: Buffer::new(&device, N * 4).map_err(e)?,
        b: Buffer::new(&device, IN * 4).map_err(e)?,
        c: Buffer::new(&device, TAIL * 4).map_err(e)?,
        d: Buffer::new(&device, IN * 4).map_err(e)?,
    };
    bufs.b.write(0, &words(&(1..=IN as u32).collect::<Vec<_>>())).map_err(e)?;
    let scenarios = [
        Scenario::GraphProgrammaticIn,
        Scenario::GraphNoProgrammatic,
        Scenario::Stream,
        Scenario::GraphWaitingConsumer,
        Scenario::GraphOtherBranch,
        Scenario::GraphOtherBranchPdlNext,
        Scenario::ControlProgrammaticIntoPlain,
    ];
    println!("device {}; u writes {N} words in one block; stale reads by v out of {REPS} runs", device.info().name);
    println!("| u's trigger | {} |", scenarios.map(|s| format!("{s:?}")).join(" | "));
    println!("|---|{}", "---|".repeat(scenarios.len()));
    for trigger in [PdlTrigger::AtEntry, PdlTrigger::AfterWait, PdlTrigger::AfterWrites, PdlTrigger::Never] {
        let m = BuiltinModules::load(&device, trigger).map_err(e)?;
        let trig = m.main_kernel("mix", &sig).map_err(e)?;
        let plain = m.plain_kernel("mix", &sig).map_err(e)?;
        let mut cells = Vec::new();
        for s in scenarios {
            let mut stale = 0;
            for rep in 0..REPS {
                if !run(&device, s, &trig, &plain, &bufs, 1000 + rep)? {
                    stale += 1;
                }
            }
            cells.push(stale.to_string());
        }
        println!("| {} | {} |", trigger.as_str(), cells.join(" | "));
    }
    random_graphs_by_edge_call(&device)?;
    exec_built_full_edge(&device)
}

/// The CUDA kernels of a two-kernel program: `mix` in the modules' PDL builds, `mix_alt` as the plain
/// build (it never waits).
fn two_kernel_bindings(m: &BuiltinModules, plan: &Plan) -> ostinato_cuda::Result<Vec<CudaKernel>> {
    plan.graph().kernels().iter().map(|k| if k.name == "mix" { m.kernel("mix", k) } else { m.plain_kernel("mix", k) }).collect()
}

/// Part 2: the random two-kernel programs of the GPU differential test (`mix` in PDL builds, `mix_alt`
/// plain), PDL on with the entry trigger, each run `RUNS` times with the edges added in one mixed call
/// (`bulk-one-call`, how graphs were built before 5053dae) and in one call per edge type (`bulk`);
/// counts runs that differ from the host oracle.
fn random_graphs_by_edge_call(device: &Device) -> Result<(), String> {
    use ostinato_cuda::GraphBuild;
    const SEEDS: u64 = 120;
    const RUNS: usize = 25;
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let m = BuiltinModules::load(device, PdlTrigger::AtEntry).map_err(e)?;
    let cases = [GraphBuild::BulkOneCall, GraphBuild::Bulk];
    let mut wrong = [0usize; 2];
    let mut seeds: [Vec<u64>; 2] = [vec![], vec![]];
    for seed in 0..SEEDS {
        let prog = random_two_kernel_program(seed, 20 + (seed as usize * 11) % 100);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).map_err(|x| x.to_string())?;
        let replays = 1 + (seed as usize % 2);
        let host = serial_result(&plan, &prog, replays).map_err(|x| x.to_string())?;
        for (slot, build) in cases.into_iter().enumerate() {
            let pdl = PdlPolicy { shape: ShapeMode::Plan, ..PdlPolicy::new(PdlMode::On) };
            let options = CudaOptions { mode: ExecMode::Graph, pdl, trigger: PdlTrigger::AtEntry, build, ..CudaOptions::default() };
            let backend = CudaBackend::with_builtins(device, &m, options).map_err(e)?;
            for _ in 0..RUNS {
                let kernels = two_kernel_bindings(&m, &plan).map_err(e)?;
                let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).map_err(e)?;
                write_inits(&mut exec, &prog.inits).map_err(e)?;
                for _ in 0..replays {
                    exec.replay().map_err(e)?;
                }
                exec.wait().map_err(e)?;
                if read_roots(&mut exec).map_err(e)? != host {
                    wrong[slot] += 1;
                    seeds[slot].push(seed);
                }
            }
        }
    }
    let runs = SEEDS as usize * RUNS;
    println!("random two-kernel graphs, pdl on, entry trigger: runs (of {runs}) that differ from the host oracle");
    for (i, build) in cases.iter().enumerate() {
        seeds[i].dedup();
        println!("  build {}: {} (seeds {:?})", build.as_str(), wrong[i], seeds[i]);
    }
    Ok(())
}

/// Part 3: `w -> u -> v` of part 1 recorded as a plan and built by the exec (`u` runs its entry-trigger
/// build): the lowering makes `w -> u` programmatic and `u -> v` full (`v` is the
/// plain build). For each way of building the graph: the edge types the driver holds, and the runs (of
/// `REPS`) in which `v` read stale data. A full edge that the driver turned programmatic shows as stale
/// reads here, as in part 1's control.
fn exec_built_full_edge(device: &Device) -> Result<(), String> {
    use ostinato::file::BufferInit;
    use ostinato::{Arg, Graph, KernelSig, Launch, Scalar, Slice};
    use ostinato_cuda::GraphBuild;
    use ostinato_host::random_graphs::RandomProgram;
    let e = |x: ostinato_cuda::CudaError| x.to_string();
    let g_err = |x: ostinato::GraphError| x.to_string();
    let mut g = Graph::new();
    let a = g.add_buffer("a", (N * 4) as u64).map_err(g_err)?;
    let b = g.add_buffer("b", (IN * 4) as u64).map_err(g_err)?;
    let c = g.add_buffer("c", (TAIL * 4) as u64).map_err(g_err)?;
    let d = g.add_buffer("d", (IN * 4) as u64).map_err(g_err)?;
    let mix = g.add_kernel(mix_sig()).map_err(g_err)?;
    let alt = g.add_kernel(KernelSig { name: "mix_alt".into(), ..mix_sig() }).map_err(g_err)?;
    let salt = g.add_slot("salt", Scalar::u32(7)).map_err(g_err)?;
    let u32s = |v: usize| Arg::Scalar(Scalar::u32(v as u32));
    let one = Launch::linear(1, 32);
    g.add_launch(mix, one, &[Arg::Whole(b), Arg::Whole(d), u32s(IN), u32s(IN), u32s(1)], &[]).map_err(g_err)?;
    g.add_launch(mix, one, &[Arg::Whole(a), Arg::Whole(b), u32s(N), u32s(IN), Arg::Slot(salt)], &[]).map_err(g_err)?;
    let tail = Slice { buffer: a, offset: ((N - TAIL) * 4) as u64, len: (TAIL * 4) as u64 };
    g.add_launch(alt, one, &[Arg::Whole(c), Arg::Buffer(tail), u32s(TAIL), u32s(TAIL), u32s(0)], &[]).map_err(g_err)?;
    let inits = vec![Some(BufferInit::Zero), Some(BufferInit::Iota), Some(BufferInit::Zero), Some(BufferInit::Random(3))];
    let prog = RandomProgram { graph: g, inits, salt_slot: salt };
    let plan = Plan::compile(&prog.graph).map_err(|x| x.to_string())?;
    let host = serial_result(&plan, &prog, 1).map_err(|x| x.to_string())?;
    let m = BuiltinModules::load(device, PdlTrigger::AtEntry).map_err(e)?;
    println!("exec-built w -> u -> v (u: 1 block writing {N} words, entry trigger); stale reads by v out of {REPS} runs");
    println!("| build | lowering's edges (from, to, programmatic) | edges the driver holds | stale |");
    println!("|---|---|---|---|");
    for build in [GraphBuild::BulkOneCall, GraphBuild::Bulk, GraphBuild::InOrder, GraphBuild::Capture] {
        let pdl = PdlPolicy { shape: ShapeMode::Plan, ..PdlPolicy::new(PdlMode::On) };
        let backend = CudaBackend::with_builtins(device, &m, CudaOptions { pdl, trigger: PdlTrigger::AtEntry, build, ..CudaOptions::default() }).map_err(e)?;
        let (mut stale, mut lowered, mut held) = (0, String::new(), String::new());
        for _ in 0..REPS {
            let kernels = two_kernel_bindings(&m, &plan).map_err(e)?;
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).map_err(e)?;
            lowered = format!("{:?}", exec.lowering().edges.iter().map(|x| (x.from.index(), x.to.index(), x.programmatic)).collect::<Vec<_>>());
            held = format!("{:?}", exec.submitted_edges().map_err(e)?);
            write_inits(&mut exec, &prog.inits).map_err(e)?;
            exec.replay().map_err(e)?;
            exec.wait().map_err(e)?;
            if read_roots(&mut exec).map_err(e)? != host {
                stale += 1;
            }
        }
        println!("| {} | {lowered} | {held} | {stale} |", build.as_str());
    }
    Ok(())
}
