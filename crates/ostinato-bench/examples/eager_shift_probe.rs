//! Probe (GPU): why does the 941-node 1-block chain slow down in a benchmark process once the eager
//! baseline has run on two rows (docs/fences.md §8)? It replays the benchmark's own arms (the code
//! `ostinato bench` runs) on the serial 941 × 1 workload, step by step. Step 0 measures Ostinato's arm on
//! a first row's memory (M1); each later step does what the benchmark does on a row, then measures:
//!   (a) the first arm again (its exec and memory unchanged since step 0),
//!   (b) a new arm (new exec) on M1,
//!   (c) a new arm on the step's own new memory, which the step's other arm ran on, as a row's arms do.
//! What a step does is the mode (first argument):
//!   eager    the eager baseline on the step's memory: created, 24 samples, dropped (a row's eager arm);
//!   create   the eager baseline created and dropped, no sample run;
//!   captured the expert's capture + PDL baseline, 24 samples (the control: the benchmark never slows
//!            after it);
//! and, to take the eager baseline's sample apart, plain `add_one` launches 941 at a time (24 times) on
//! a 1 KiB buffer of the step's own:
//!   streams  on a new stream per step, a stream synchronize after each 941;
//!   one-stream  the same on ONE stream made before step 1 and kept;
//!   timed    on a new stream per step, each 941 between two timing events, the second synchronized;
//!   copies   on a new stream per step, each 941 after a host write of the buffer and before a read back;
//!   kept     on a new stream per step, every stream kept alive to the end;
//!   one-launch  ONE plain launch on a new stream per step;
//!   pdl      on a new stream per step, the PDL build launched with programmatic stream serialization
//!            (`cuLaunchKernelEx`), as Ostinato's eager mode launches a chain;
//!   ostinato-eager  Ostinato's eager-mode arm on the step's memory, 24 samples (the benchmark's
//!            `ostinato-eager` arm);
//!   ostinato-eager-fan  Ostinato's eager-mode arm on the fan row (one producer, 16 consumers, one
//!            reducer: four lanes, plain launches where a node waits on another lane), as a benchmark
//!            row runs it (50 ms of samples, then 7);
//!   eager-fan  the eager baseline on the same fan row (one stream), the same way.
//! GPU µs per dispatch, median of 7 samples after 3, each sample one replay between two events
//! (the benchmark's `Arm::sample`). Run: `cargo run --release -p ostinato-bench --example eager_shift_probe -- eager`.

use std::sync::Arc;

use ostinato_bench::bench::arms::{arm_kernels, median_gpu_us, Arm, ArmKind, Baseline, OstinatoCuda, RowMemory};
use ostinato_bench::bench::{init_bytes, workload};
use ostinato_cuda::raw::{Args, Buffer, Event, Stream};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaKernel, CudaOptions, Device, DeviceSelector, Dims, PdlTrigger};

const STEPS: usize = 6;
const SAMPLES_PER_ROW: usize = 24;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// 24 times 941 launches of `add_one` (1 × 256) on `s` (once in mode one-launch), on a fresh 1 KiB
/// buffer, the way `mode` says (see the file's header); `k` is the build the mode launches.
fn launches(device: &Device, k: &CudaKernel, s: &Stream, mode: &str) -> Result<(), String> {
    let (rounds, per) = if mode == "one-launch" { (1, 1) } else { (SAMPLES_PER_ROW, 941) };
    let buf = Buffer::new(device, 1024).map_err(e)?;
    let mut args = Args::new(&[buf.ptr(), 256]);
    let dims = Dims { grid: [1, 1, 1], block: [256, 1, 1], shared: 0 };
    let (a, b) = (Event::new(true).map_err(e)?, Event::new(true).map_err(e)?);
    let mut bytes = [0u8; 1024];
    for _ in 0..rounds {
        match mode {
            "timed" => s.record(&a).map_err(e)?,
            "copies" => buf.write(0, &bytes).map_err(e)?,
            _ => {}
        }
        (0..per).try_for_each(|_| s.launch(k, dims, &mut args, mode == "pdl")).map_err(e)?;
        match mode {
            "timed" => {
                s.record(&b).map_err(e)?;
                b.synchronize().map_err(e)?;
            }
            "copies" => {
                s.synchronize().map_err(e)?;
                buf.read(0, &mut bytes).map_err(e)?;
            }
            _ => s.synchronize().map_err(e)?,
        }
    }
    Ok(())
}

fn main() -> Result<(), String> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "eager".into());
    const MODES: [&str; 13] = [
        "eager",
        "create",
        "captured",
        "streams",
        "one-stream",
        "timed",
        "copies",
        "kept",
        "one-launch",
        "pdl",
        "ostinato-eager",
        "ostinato-eager-fan",
        "eager-fan",
    ];
    if !MODES.contains(&mode.as_str()) {
        return Err(format!("unknown mode `{mode}` ({})", MODES.join(", ")));
    }
    let device = Device::open(&DeviceSelector::from_env().map_err(e)?).map_err(e)?;
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).map_err(e)?;
    let options = OstinatoCuda::options(ArmKind::Ostinato, CudaOptions::default()).ok_or("no options for the Ostinato arm")?;
    let backend = CudaBackend::with_builtins(&device, &modules, options).map_err(e)?;
    let w = workload::dispatch_grid(941, 1, false, 1);
    let init = init_bytes(&w);
    let ostinato = |m: &Arc<RowMemory>| OstinatoCuda::new(&backend, &w, arm_kernels(&modules, &w, ArmKind::Ostinato)?, m, &init);
    println!("device {} {}; mode {mode}; Ostinato's arm, GPU µs per dispatch of serial 941 × 1", device.info().name, device.info().uuid);
    let m1 = RowMemory::new(&device, &w, 0)?;
    let mut first = ostinato(&m1)?;
    println!("step 0: M1 {}: {:.3}", m1.addresses(&w).join(" "), median_gpu_us(&mut first, &w, &init, 7)?);
    let eager_options = OstinatoCuda::options(ArmKind::OstinatoEager, CudaOptions::default()).ok_or("no options for the eager arm")?;
    let eager_backend = CudaBackend::with_builtins(&device, &modules, eager_options).map_err(e)?;
    let one = Stream::new(&device).map_err(e)?;
    let mut kept = Vec::new();
    let build = if mode == "pdl" { ArmKind::Ostinato } else { ArmKind::Eager };
    let k = arm_kernels(&modules, &w, build)?.into_iter().next().ok_or("the workload has no kernel")?;
    for step in 1..=STEPS {
        let row = RowMemory::new(&device, &w, 0)?;
        match mode.as_str() {
            "eager" | "captured" => {
                let kind = if mode == "eager" { ArmKind::Eager } else { ArmKind::CapturedPdl };
                let mut other = Baseline::new(&device, &w, arm_kernels(&modules, &w, kind)?, kind, &row, &init)?;
                for _ in 0..SAMPLES_PER_ROW {
                    other.sample(&w, &init)?;
                }
            }
            "create" => drop(Baseline::new(&device, &w, arm_kernels(&modules, &w, ArmKind::Eager)?, ArmKind::Eager, &row, &init)?),
            "ostinato-eager" => {
                let mut arm = OstinatoCuda::new(&eager_backend, &w, arm_kernels(&modules, &w, ArmKind::OstinatoEager)?, &row, &init)?;
                for _ in 0..SAMPLES_PER_ROW {
                    arm.sample(&w, &init)?;
                }
            }
            "ostinato-eager-fan" | "eager-fan" => {
                let fan = workload::fan(16, 1024, 1);
                let fan_init = init_bytes(&fan);
                let fan_memory = RowMemory::new(&device, &fan, 0)?;
                let mut arm: Box<dyn Arm> = if mode == "eager-fan" {
                    Box::new(Baseline::new(&device, &fan, arm_kernels(&modules, &fan, ArmKind::Eager)?, ArmKind::Eager, &fan_memory, &fan_init)?)
                } else {
                    Box::new(OstinatoCuda::new(&eager_backend, &fan, arm_kernels(&modules, &fan, ArmKind::OstinatoEager)?, &fan_memory, &fan_init)?)
                };
                // As a benchmark row does: at least 50 ms of warm-up samples, then 7 (a fan sample is
                // short, so this is hundreds of samples).
                let started = std::time::Instant::now();
                while started.elapsed() < std::time::Duration::from_millis(50) {
                    arm.sample(&fan, &fan_init)?;
                }
                for _ in 0..7 {
                    arm.sample(&fan, &fan_init)?;
                }
            }
            "one-stream" => launches(&device, &k, &one, &mode)?,
            _ => {
                let own = Stream::new(&device).map_err(e)?;
                launches(&device, &k, &own, &mode)?;
                if mode == "kept" {
                    kept.push(own);
                }
            }
        }
        let a = median_gpu_us(&mut first, &w, &init, 7)?;
        let b = median_gpu_us(&mut ostinato(&m1)?, &w, &init, 7)?;
        let c = median_gpu_us(&mut ostinato(&row)?, &w, &init, 7)?;
        println!("step {step}: (a) first arm {a:.3}  (b) new arm on M1 {b:.3}  (c) new arm on the step's memory {} {c:.3}", row.addresses(&w).join(" "));
    }
    Ok(())
}
