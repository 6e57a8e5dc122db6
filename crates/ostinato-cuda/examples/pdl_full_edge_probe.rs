//! Probe (GPU): does a kernel that lets its dependents launch early (`griddepcontrol.launch_dependents`)
//! also release a dependent joined to it by a FULL edge — one that never executes `griddepcontrol.wait`?
//!
//! Three kernels: `w` (small), `u` (one block writing 2^18 words, milliseconds) and `v` (reads the last
//! 64 words `u` writes). `u` is the built-in `mix` in the build named by the row's trigger; `v` is the
//! plain build (no `griddepcontrol`) unless the scenario says it waits. Each cell counts the runs (of
//! `REPS`) in which `v` read stale data. Run: `cargo run --release -p ostinato-cuda --example
//! pdl_full_edge_probe` (the GPU machine runs the copy in `.devbin/`).

use ostinato_cuda::raw::{Args, Buffer, Stream};
use ostinato_cuda::{BuiltinModules, CudaKernel, Device, DeviceSelector, Dims, PdlTrigger};
use ostinato_host::random_graphs::mix_sig;

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
    let mut w_args = mix_args(bufs.d.ptr(), bufs.b.ptr(), IN, IN, 1);
    let mut u_args = mix_args(bufs.a.ptr(), bufs.b.ptr(), N, IN, salt);
    let mut v_args = mix_args(bufs.c.ptr(), bufs.a.ptr() + ((N - TAIL) * 4) as u64, TAIL, TAIL, 0);
    let v_kernel = if matches!(s, Scenario::GraphWaitingConsumer) { trig } else { plain };
    let u_pdl = !matches!(s, Scenario::GraphNoProgrammatic);
    let v_pdl = matches!(s, Scenario::ControlProgrammaticIntoPlain);
    let enqueue = |w: &mut Args, u: &mut Args, v: &mut Args| -> Result<(), String> {
        stream.launch(trig, one_block(), w, false).map_err(e)?;
        stream.launch(trig, one_block(), u, u_pdl).map_err(e)?;
        stream.launch(v_kernel, one_block(), v, v_pdl).map_err(e)
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
    Ok(())
}
