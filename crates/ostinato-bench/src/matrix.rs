//! The matrix run: the rows, the three passes of arms over them (a pass's arms sampled in rounds,
//! [`crate::rounds`]), every sample checked by the host oracle, medians with bootstrap intervals, a tie
//! band, arm order rotated per row, provenance measured at run time, and three outputs: `results.json`,
//! `REPORT.md`, `chart.svg`.

use std::path::Path;

use crate::arms::{self, Arm, ArmKind, HostArm, OstinatoCuda};
use crate::baseline::{self, Baseline};
pub use crate::config::{BenchBackend, Regime, MAX_TIMED_SAMPLES};
use crate::config::{BenchConfig, BenchError};
use crate::families;
pub(crate) use crate::results::stat_grouped;
pub use crate::results::{ArmResult, InstanceResult, RowResult, SampleResult, Stat};
use crate::workload::{Check, Workload};
use crate::{manifests, profile, provenance, report, rounds, timeline, vulkan};
use indicatif::{ProgressBar, ProgressStyle};

/// The three passes of a run, in order: the graph arms (rotated per row), then the arms that launch
/// kernels directly (plain launches on a second stream slow every later graph: docs/fences.md decision 7),
/// then the Vulkan arm (no CUDA arm is measured right after a switch of API).
pub fn passes(arms: &[ArmKind]) -> [Vec<ArmKind>; 3] {
    let pick = |f: &dyn Fn(ArmKind) -> bool| arms.iter().copied().filter(|&a| f(a)).collect::<Vec<_>>();
    [pick(&|a| !a.is_vulkan() && !a.launches_directly()), pick(&|a| a.launches_directly()), pick(&|a| a.is_vulkan())]
}

/// The matrix for a backend: every family's rows ([`crate::families::FAMILIES`]).
/// `grid_blocks` replaces the block counts of the 941-dispatch grid rows, `fan_widths` the consumer
/// counts of the fan rows, `replays` every row's replays per sample.
pub fn matrix(backend: BenchBackend, quick: bool, grid_blocks: Option<&[u32]>, fan_widths: Option<&[usize]>, replays: Option<usize>) -> Vec<Workload> {
    families::matrix(&families::Scope { backend, quick, grid_blocks, fan_widths, replays })
}

pub use crate::families::llama::LLAMA_MAX_SEQ;

/// Compares an arm's outputs with the oracle's under the row's check; a greedy run has no oracle
/// outputs and is checked against the reference from the row's initial bytes `init`.
pub fn compare(check: &Check, init: &[Option<Vec<u8>>], want: &[Vec<u8>], got: &[Vec<u8>]) -> Result<(), String> {
    if let Check::GreedyRun(run) = check {
        return run.check(init, got);
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        match check {
            Check::Exact => {
                if let Some(at) = w.iter().zip(g).position(|(a, b)| a != b) {
                    return Err(format!("checked buffer #{i} differs first at byte {at}"));
                }
            }
            Check::Logits(tol) => {
                let f = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<f32>>();
                return match (want.first(), got.first(), want.get(1), got.get(1)) {
                    (Some(wl), Some(gl), Some(_), Some(gt)) => {
                        let (wl, gl) = (f(wl), f(gl));
                        ostinato_llama::agree(&wl, &gl, *tol)?;
                        // The token written is the logits' argmax (ties to the lower index).
                        let argmax = ostinato_llama::greedy_token(&gl);
                        let token = |b: &[u8]| b.get(..4).map(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]));
                        if token(gt) != Some(argmax as u32) {
                            return Err(format!("token {:?} is not the argmax {argmax} of the logits", token(gt)));
                        }
                        Ok(())
                    }
                    _ => Err("a decode row checks logits and token".into()),
                };
            }
            Check::RelL2(tol) => {
                let f = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect::<Vec<f64>>();
                let (wv, gv) = (f(w), f(g));
                if gv.iter().any(|x| !x.is_finite()) {
                    return Err(format!("checked buffer #{i} has a NaN or infinity"));
                }
                let num: f64 = wv.iter().zip(&gv).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
                let den: f64 = wv.iter().map(|a| a * a).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
                if num / den > *tol {
                    return Err(format!("checked buffer #{i}: relative L2 error {:.3e} > {tol:.0e}", num / den));
                }
            }
            // Handled before the loop (a greedy run has no oracle outputs); never reached.
            Check::GreedyRun(_) => return Err("a greedy run is checked against its reference, not oracle outputs".into()),
            Check::Within(bounds) => {
                let bound = bounds.get().get(i).ok_or_else(|| format!("checked buffer #{i} has no bounds"))?;
                let f = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<f32>>();
                let (wv, gv) = (f(w), f(g));
                if wv.len() != bound.len() || gv.len() != bound.len() {
                    return Err(format!("checked buffer #{i}: {} elements, {} bounds", gv.len(), bound.len()));
                }
                for (j, ((a, b), t)) in wv.iter().zip(&gv).zip(bound).enumerate() {
                    if !b.is_finite() || (*a as f64 - *b as f64).abs() > *t as f64 {
                        return Err(format!(
                            "checked buffer #{i} element {j}: {b} against the oracle's {a}, |diff| {:.3e} > its bound {t:.3e}",
                            (*a as f64 - *b as f64).abs()
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every buffer's initial bytes (`None` for views): its pattern, or its `data` where the workload has some.
pub fn init_bytes(w: &Workload) -> Vec<Option<Vec<u8>>> {
    let mut out: Vec<Option<Vec<u8>>> = w
        .graph
        .buffers()
        .iter()
        .zip(&w.inits)
        .map(|(b, i)| {
            i.map(|init| {
                let mut v = vec![0u8; b.size as usize];
                init.fill(&mut v);
                v
            })
        })
        .collect();
    for (id, make) in &w.data {
        out[id.index()] = Some(make());
    }
    out
}

struct CudaCtx {
    device: ostinato_cuda::Device,
    modules: ostinato_cuda::BuiltinModules,
    /// One backend per Ostinato arm, made once for the whole matrix.
    backends: Vec<(ArmKind, ostinato_cuda::CudaBackend)>,
}

/// Why an arm could not be set up: it does not apply to the workload, or it failed.
enum SetupError {
    Skip(String),
    Fail(String),
}

impl From<String> for SetupError {
    fn from(s: String) -> Self {
        SetupError::Fail(s)
    }
}

/// The CUDA arms' shared device memory of a row (None where no CUDA context is open), or why it could not be allocated.
type SharedMemory = Result<Option<std::sync::Arc<arms::RowMemory>>, String>;

fn make_arm(kind: ArmKind, w: &Workload, cx: &Contexts, memory: &SharedMemory, row: &RowInputs<'_>) -> Result<Box<dyn Arm>, SetupError> {
    let init = row.init;
    if matches!(kind, ArmKind::HostSerial | ArmKind::OstinatoHost) {
        return Ok(Box::new(HostArm::new(w, kind, init)?));
    }
    if kind.is_vulkan() {
        let vk = cx.vulkan.as_ref().ok_or_else(|| SetupError::Skip("no Vulkan device".into()))?;
        let roots = match row.vulkan {
            Some(vulkan::VulkanRow::Memory(m)) => m,
            Some(vulkan::VulkanRow::NotApplicable(why)) => return Err(SetupError::Skip(why.clone())),
            Some(vulkan::VulkanRow::Failed(e)) => return Err(SetupError::Fail(e.clone())),
            None => return Err(SetupError::Fail("no Vulkan buffers for the row".into())),
        };
        let arm: Result<Box<dyn Arm>, _> = match kind.vulkan_options() {
            None => vulkan::VulkanArm::new(vk, w, roots, init).map(|a| Box::new(a) as Box<dyn Arm>),
            Some(options) => vulkan::OstinatoVulkan::new(vk, w, roots, init, options).map(|a| Box::new(a) as Box<dyn Arm>),
        };
        return match arm {
            Ok(a) => Ok(a),
            Err(ostinato_vulkan::VkError::NotApplicable(m)) => Err(SetupError::Skip(m)),
            Err(e) => Err(SetupError::Fail(e.to_string())),
        };
    }
    let cuda = cx.cuda.as_ref();
    let cx = cuda.ok_or_else(|| SetupError::Fail("no CUDA device".into()))?;
    let memory = memory.clone()?.ok_or_else(|| "no shared device memory for the row".to_string())?;
    Ok(match kind {
        ArmKind::Eager | ArmKind::Captured | ArmKind::CapturedPdl => {
            let backend = cx.backends.first().map(|(_, b)| b).ok_or_else(|| "no CUDA backend".to_string())?;
            Box::new(Baseline::new(&cx.device, w, arms::baseline_kernels(&cx.modules, backend, w, kind)?, kind, &memory, init)?)
        }
        _ => {
            let backend = cx.backends.iter().find(|(k, _)| *k == kind).map(|(_, b)| b).ok_or_else(|| format!("no CUDA backend for arm {}", kind.name()))?;
            // Ostinato binds as a user does: each kernel through the backend, from its reference.
            let plan = ostinato::Plan::compile(&w.graph).map_err(|e| e.to_string())?;
            let kernels = arms::bind_cuda(backend, w, &plan)?;
            Box::new(OstinatoCuda::new(backend, w, kernels, &memory, init)?)
        }
    })
}

/// The configured arms among `all`, in that order; `main` must be among them.
fn select_arms(config: &BenchConfig, all: &[ArmKind], main: ArmKind) -> Result<Vec<ArmKind>, BenchError> {
    let names: Vec<&str> = all.iter().map(|a| a.name()).collect();
    let chosen = config.arms_among(&names, main.name())?;
    Ok(all.iter().copied().filter(|a| chosen.contains(&a.name())).collect())
}

/// `arms` rotated left by `by` places (modulo their number).
fn rotated(arms: &[ArmKind], by: usize) -> Vec<ArmKind> {
    let mut v = arms.to_vec();
    if !v.is_empty() {
        let n = v.len();
        v.rotate_left(by % n);
    }
    v
}

/// The devices the arms run on.
struct Contexts {
    cuda: Option<CudaCtx>,
    vulkan: Option<std::sync::Arc<ostinato_vulkan::Context>>,
}

/// How each row's arms are run: the sampling budget, where (if anywhere) graph descriptions go, and
/// when no further row starts (`--time-limit`, from the run's start).
struct Protocol<'a> {
    budget: rounds::Budget,
    dot_dir: Option<&'a Path>,
    stop_at: Option<std::time::Instant>,
}

/// A workload's buffers' initial bytes and the oracle's outputs: computed once, shared by every
/// placement of the workload.
struct RowOracle {
    init: Vec<Option<Vec<u8>>>,
    want: Result<Vec<Vec<u8>>, String>,
}

/// One row's inputs, oracle and results, in the order its arms ran.
struct RowRun {
    /// The row's id in the report (with `@<offset>` in a placement study).
    id: String,
    oracle: std::rc::Rc<RowOracle>,
    order: Vec<ArmKind>,
    results: Vec<ArmResult>,
    /// The CUDA arms' shared buffers, `name=0x…` per root (empty without CUDA).
    addresses: Vec<String>,
    /// Those buffers, kept from the row's graph arms to its direct-launch arms (so with direct-launch
    /// arms selected, every row's buffers are alive at once until the second pass).
    memory: SharedMemory,
    /// The Vulkan arms' shared buffers, made for the row's Vulkan pass and dropped after it.
    vulkan: Option<vulkan::VulkanRow>,
    decode: Option<Result<profile::DecodeProfile, String>>,
    timeline: Option<Result<timeline::StepTimeline, String>>,
}

impl RowRun {
    /// A row the time limit kept from starting: every arm skipped with the limit named.
    fn not_run(id: &str, kinds: &[ArmKind], limit_s: f64) -> RowRun {
        let why = format!("{} ({limit_s} s) was reached before the row began", crate::report::NOT_RUN);
        let results = kinds.iter().map(|&k| ArmResult { ok: true, skipped: Some(why.clone()), ..ArmResult::new(k) }).collect();
        let oracle = std::rc::Rc::new(RowOracle { init: Vec::new(), want: Err(why) });
        RowRun { id: id.into(), oracle, order: Vec::new(), results, addresses: Vec::new(), memory: Ok(None), vulkan: None, decode: None, timeline: None }
    }
    /// Makes `kinds` in that order and samples them in rounds ([`rounds`]); an arm that could not be
    /// made (or the row's oracle) keeps its place with its error. One step of the progress bar an arm.
    fn arms(&mut self, kinds: &[ArmKind], w: &Workload, cx: &Contexts, p: &Protocol, pb: &ProgressBar) {
        let want = match &self.oracle.want {
            Ok(want) => want,
            Err(e) => {
                for &kind in kinds {
                    self.results.push(ArmResult { error: Some(format!("oracle failed: {e}")), ..ArmResult::new(kind) });
                    self.order.push(kind);
                    pb.inc(1);
                }
                return;
            }
        };
        let mut made = Vec::new();
        let mut unmade: Vec<(usize, Box<ArmResult>)> = Vec::new();
        for (at, &kind) in kinds.iter().enumerate() {
            pb.set_message(format!("{} {} (made)", self.id, kind.name()));
            match make_for_row(kind, w, RowInputs { id: &self.id, init: &self.oracle.init, vulkan: self.vulkan.as_ref() }, cx, &self.memory, p) {
                Ok(m) => made.push(m),
                Err(r) => unmade.push((at, r)),
            }
        }
        pb.set_message(format!("{} ({} arms in rounds)", self.id, made.len()));
        let budget = match w.protocol {
            // A row with a protocol of its own (the kernel families) takes the smaller of each minimum time.
            Some(r) => rounds::Budget {
                warmup: p.budget.warmup.min(std::time::Duration::from_millis(r.warmup_ms)),
                timed: p.budget.timed.min(std::time::Duration::from_millis(r.timed_ms)),
                ..p.budget
            },
            None => p.budget,
        };
        let mut results = rounds::sample_in_rounds(made, w, &self.oracle.init, want, budget);
        for (at, r) in unmade {
            results.insert(at, *r);
        }
        self.results.extend(results);
        self.order.extend_from_slice(kinds);
        pb.inc(kinds.len() as u64);
    }
}

/// What making an arm needs of its row: the id it is reported under, the buffers' initial bytes and,
/// in the Vulkan pass, the Vulkan arms' shared buffers.
struct RowInputs<'a> {
    id: &'a str,
    init: &'a [Option<Vec<u8>>],
    vulkan: Option<&'a vulkan::VulkanRow>,
}

/// Makes arm `kind` for the row, `p.budget.instances` times (its manifest noted, the first
/// instance's graph written as DOT where asked), or the arm's result if it does not apply or an
/// instance could not be made (named where there are several).
fn make_for_row(kind: ArmKind, w: &Workload, row: RowInputs<'_>, cx: &Contexts, memory: &SharedMemory, p: &Protocol) -> Result<rounds::Made, Box<ArmResult>> {
    let mut out = ArmResult::new(kind);
    let k = p.budget.instances.max(1);
    let mut instances = Vec::with_capacity(k);
    for i in 0..k {
        let begun = std::time::Instant::now();
        match make_arm(kind, w, cx, memory, &row) {
            Ok(a) => {
                out.setup_ms.push(begun.elapsed().as_secs_f64() * 1e3);
                instances.push(a);
            }
            Err(SetupError::Skip(why)) => {
                out.ok = true;
                out.skipped = Some(why);
                return Err(Box::new(out));
            }
            Err(SetupError::Fail(e)) => {
                out.error = Some(if k > 1 { format!("making instance {i}: {e}") } else { e });
                return Err(Box::new(out));
            }
        }
    }
    out.manifest = cx.cuda.as_ref().and_then(|c| manifests::arm_manifest(kind, w, &c.modules, &c.backends.first()?.1));
    if let (Some(dir), Some(first)) = (p.dot_dir, instances.first()) {
        let path = dir.join(format!("{}--{}.dot", row.id.replace('/', "_"), kind.name()));
        if let Some(Err(e)) = first.write_dot(&path) {
            out.error = Some(format!("writing {}: {e}", path.display()));
            return Err(Box::new(out));
        }
    }
    Ok(rounds::Made { instances, out })
}

/// Runs the matrix and writes the three outputs under `args.out`. Returns the rows.
pub fn run(args: &BenchConfig) -> Result<Vec<RowResult>, BenchError> {
    args.validate()?;
    let begun = std::time::Instant::now();
    // The rest of an earlier run: its rows left not run, its arms and backend, checked to merge with it.
    let rest = args.rest_of.as_deref().map(crate::rest::read).transpose()?;
    let rested = rest.as_ref().map(|r| r.config(args)).transpose()?;
    let args = rested.as_ref().unwrap_or(args);
    let backend = choose_backend(args)?;
    let arms = match backend {
        BenchBackend::Cuda => select_arms(args, &ArmKind::CUDA, ArmKind::Ostinato)?,
        // The Vulkan arms run in the host matrix only when asked for (`--arms`), on whatever Vulkan
        // device is found.
        BenchBackend::Host if args.arms.is_some() => select_arms(args, &ArmKind::HOST_SELECTABLE, ArmKind::OstinatoHost)?,
        BenchBackend::Host => select_arms(args, &ArmKind::HOST, ArmKind::OstinatoHost)?,
    };
    let (contexts, vulkan_device) = open_contexts(args, backend, &arms)?;
    let regime_chain_us = enter_regime(&contexts, args.study.regime)?;
    if let Some(dir) = &args.study.dot {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::Io { path: dir.display().to_string(), message: e.to_string() })?;
    }
    let protocol = Protocol {
        budget: rounds::Budget {
            warmups: args.warmups,
            warmup: std::time::Duration::from_millis(args.warmup_ms),
            samples: args.samples,
            timed: std::time::Duration::from_millis(args.timed_ms),
            instances: args.instances,
        },
        dot_dir: args.study.dot.as_deref(),
        stop_at: args.time_limit_s.map(|s| begun + std::time::Duration::from_secs_f64(s)),
    };
    let clock_before = contexts.cuda.as_ref().and_then(|c| provenance::sm_clock_mhz(&c.device.info().uuid));
    let rows_in = selected_rows(args, backend, rest.as_ref())?;
    let rows = run_rows(args, &rows_in, &arms, &contexts, &protocol)?;
    let mut prov = provenance::collect(backend, contexts.cuda.as_ref().map(|c| c.device.info()), vulkan_device, clock_before, args);
    prov.regime_chain_us = regime_chain_us;
    report::write_all(Path::new(&args.out), backend, &prov, args, &rows)?;
    println!("{}", report::headline(backend, &rows));
    println!("wrote {}/results.json, REPORT.md, chart.svg", args.out.display());
    Ok(rows)
}

/// The backend the matrix runs on: the configured one, else CUDA where a device is found, else the
/// host (labelled as such); the study settings that need CUDA are refused elsewhere.
fn choose_backend(args: &BenchConfig) -> Result<BenchBackend, BenchError> {
    let backend = match args.backend {
        Some(b) => b,
        None if ostinato_cuda::driver_available() && ostinato_cuda::device::list().is_ok_and(|l| !l.is_empty()) => BenchBackend::Cuda,
        None => {
            eprintln!("no CUDA device found: running the HOST-BACKEND matrix (labelled as such in the report)");
            BenchBackend::Host
        }
    };
    let cfg = |setting, reason: &str| BenchError::Config { setting, reason: reason.to_string() };
    if args.study.regime != Regime::Fresh && backend != BenchBackend::Cuda {
        return Err(cfg("regime", "multi-stream is a state of the CUDA driver; the host backend has none"));
    }
    if args.study.tune_edge_types != ostinato_cuda::EdgeTypesRule::default() && backend != BenchBackend::Cuda {
        return Err(cfg("tune-edge-types", "a rule of the CUDA exec's measurement of its submissions; the host backend measures none"));
    }
    if args.study.offsets.is_some() && backend != BenchBackend::Cuda {
        return Err(cfg("offsets", "places CUDA device buffers; the host backend's rows have none to place"));
    }
    Ok(backend)
}

/// The CUDA device, its built-in modules and one backend per Ostinato arm (CUDA matrix only), and the
/// Vulkan device (opened in every matrix so the report names it; kept only where a Vulkan arm runs).
fn open_contexts(args: &BenchConfig, backend: BenchBackend, arms: &[ArmKind]) -> Result<(Contexts, Option<String>), BenchError> {
    let study = &args.study;
    let base = ostinato_cuda::CudaOptions {
        pdl: args.auto_policy(),
        trigger: study.trigger,
        build: study.graph_build,
        priority: study.priority,
        tune_edge_types: study.tune_edge_types,
        ..Default::default()
    };
    let cuda = if backend == BenchBackend::Cuda {
        let dev = |e: ostinato_cuda::CudaError| BenchError::Device(e.to_string());
        let device = ostinato_cuda::Device::open(&ostinato_cuda::DeviceSelector::from_env().map_err(dev)?).map_err(dev)?;
        let modules = ostinato_cuda::BuiltinModules::load(&device, study.trigger).map_err(dev)?;
        let mut backends = Vec::new();
        for kind in ArmKind::CUDA {
            if let Some(options) = OstinatoCuda::options(kind, base) {
                backends.push((kind, ostinato_cuda::CudaBackend::with_builtins(&device, &modules, options).map_err(dev)?));
            }
        }
        Some(CudaCtx { device, modules, backends })
    } else {
        None
    };
    let vulkan = match ostinato_vulkan::Context::open() {
        Ok(c) => Some(c),
        Err(e) => {
            if arms.iter().any(|a| a.is_vulkan()) {
                eprintln!("vulkan arm: {e}");
            }
            None
        }
    };
    // Without a Vulkan arm the device is only named: it is closed before any arm runs.
    let vulkan_device = vulkan.as_ref().map(|c| c.name.clone());
    let vulkan = vulkan.filter(|_| arms.iter().any(|a| a.is_vulkan()));
    Ok((Contexts { cuda, vulkan }, vulkan_device))
}

/// Puts the driver in the regime the study asks for (the multi-stream one: `baseline::enter_multi_stream_regime`);
/// its 941-node chain's µs per dispatch before and after.
fn enter_regime(contexts: &Contexts, regime: Regime) -> Result<Option<[f64; 2]>, BenchError> {
    match (&contexts.cuda, regime) {
        (Some(c), Regime::MultiStream) => {
            let backend = c
                .backends
                .iter()
                .find(|(k, _)| *k == ArmKind::Ostinato)
                .map(|(_, b)| b)
                .ok_or_else(|| BenchError::Run("no CUDA backend for the Ostinato arm".into()))?;
            Ok(Some(baseline::enter_multi_stream_regime(&c.device, &c.modules, backend)?))
        }
        _ => Ok(None),
    }
}

/// The matrix's rows the filter keeps (an error when it keeps none), or those `rest`'s run left not run.
fn selected_rows(args: &BenchConfig, backend: BenchBackend, rest: Option<&crate::rest::Rest>) -> Result<Vec<Workload>, BenchError> {
    let mut rows = matrix(backend, args.quick, args.study.blocks.as_deref(), args.study.fans.as_deref(), args.replays);
    if let Some(rest) = rest {
        rest.check_rows(rows.iter().map(|w| w.id.as_str()))?;
        rows.retain(|w| rest.left(&w.id));
        return Ok(rows);
    }
    if !args.filter.is_empty() {
        rows.retain(|w| args.filter.iter().any(|p| w.id.contains(p.trim())));
        if rows.is_empty() {
            return Err(BenchError::Config { setting: "filter", reason: format!("{} matches no row of the {backend:?} matrix", args.filter.join(",")) });
        }
    }
    Ok(rows)
}

/// A line for the log after each row of each pass ([`crate::report::progress_line`]; the progress
/// bar draws only on a terminal).
fn progress(pb: &ProgressBar, pass: &str, row: usize, rows: usize, id: &str, started: std::time::Instant, arms: &[ArmResult]) {
    pb.suspend(|| eprintln!("{}", crate::report::progress_line(pass, row, rows, id, started.elapsed().as_secs_f64(), arms)));
}

/// Every row's arms in three passes (see [`passes`]), each row once per placement, and the rows'
/// results with their arms in a fixed order.
fn run_rows(args: &BenchConfig, rows_in: &[Workload], arms: &[ArmKind], contexts: &Contexts, protocol: &Protocol) -> Result<Vec<RowResult>, BenchError> {
    let study = &args.study;
    let placements = args.placements();
    // Each row once per placement (buffer offset); ids carry the offset only in a placement study.
    let row_list: Vec<(&Workload, u64, String)> = rows_in
        .iter()
        .flat_map(|w| placements.iter().map(move |&o| (w, o, if study.offsets.is_some() { format!("{}@{o}", w.id) } else { w.id.clone() })))
        .collect();
    let pb = ProgressBar::new((row_list.len() * arms.len()) as u64);
    pb.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}").map_err(|e| BenchError::Run(e.to_string()))?);
    // Three passes (see `passes`): the graph arms rotate per row; the arms that launch kernels directly
    // run after every row's graph arms, since plain launches on a second stream slow every graph the
    // process runs afterwards (docs/fences.md decision 7); an arm of another API (the Vulkan arm) runs last, so
    // no CUDA arm is measured right after a switch of API (that biased the next arm on tiny rows, by
    // the same measurement).
    let [graph_arms, direct, later] = passes(arms);
    let mut runs = graph_pass(args, &row_list, &graph_arms, !direct.is_empty(), contexts, protocol, &pb);
    for (ri, (&(w, _, ref id), run)) in row_list.iter().zip(&mut runs).enumerate().filter(|_| !direct.is_empty()) {
        let (started, before) = (std::time::Instant::now(), run.results.len());
        run.arms(&rotated(&direct, ri + study.rotate), w, contexts, protocol, &pb);
        if !timeline::traced_row(w) {
            run.memory = Ok(None);
        }
        progress(&pb, "direct launches", ri, row_list.len(), id, started, &run.results[before..]);
    }
    for (ri, (&(w, _, ref id), run)) in row_list.iter().zip(&mut runs).enumerate().filter(|_| !later.is_empty()) {
        let (started, before) = (std::time::Instant::now(), run.results.len());
        // One set of Vulkan buffers per row, bound by every Vulkan arm.
        run.vulkan = contexts.vulkan.as_ref().map(|vk| vulkan::VulkanRow::new(vk, w, &run.oracle.init));
        run.arms(&later, w, contexts, protocol, &pb);
        run.vulkan = None;
        progress(&pb, "vulkan arms", ri, row_list.len(), id, started, &run.results[before..]);
    }
    trace_pass(args, &row_list, &mut runs, contexts, &pb);
    // Rows the time limit kept from starting: every arm skipped, saying why (never silently dropped).
    let (limit, runs_len) = (args.time_limit_s.unwrap_or(0.0), runs.len());
    let not_run = |(_, _, id): &(&Workload, u64, String)| RowRun::not_run(id, arms, limit);
    let runs: Vec<RowRun> = runs.into_iter().chain(row_list[runs_len..].iter().map(not_run)).collect();
    pb.finish_and_clear();
    Ok(row_results(&row_list, runs, arms))
}

/// The first pass: per row (until the time limit) its oracle, its device memory and its graph arms,
/// rotated per row; a decode row's kernel table. The memory stays for the direct-launch pass where
/// one follows (`direct_follows`) and for the traced row.
fn graph_pass(
    args: &BenchConfig,
    row_list: &[(&Workload, u64, String)],
    graph_arms: &[ArmKind],
    direct_follows: bool,
    contexts: &Contexts,
    protocol: &Protocol,
    pb: &ProgressBar,
) -> Vec<RowRun> {
    let study = &args.study;
    let mut runs: Vec<RowRun> = Vec::new();
    // The oracle runs once per workload; its placements follow each other in `row_list`.
    let mut last_oracle: Option<(&Workload, std::rc::Rc<RowOracle>)> = None;
    for (ri, &(w, offset, ref id)) in row_list.iter().enumerate() {
        if protocol.stop_at.is_some_and(|at| std::time::Instant::now() >= at) {
            pb.suspend(|| eprintln!("time limit: {ri} of {} rows begun; the others are reported as not run", row_list.len()));
            break;
        }
        let oracle = match &last_oracle {
            Some((prev, o)) if std::ptr::eq(*prev, w) => o.clone(),
            _ => {
                pb.set_message(format!("{id} (oracle)"));
                let init = init_bytes(w);
                let o = std::rc::Rc::new(RowOracle { want: arms::oracle(w, &init), init });
                last_oracle = Some((w, o.clone()));
                o
            }
        };
        // One set of device buffers per row, bound by every CUDA arm at the same addresses.
        let memory: SharedMemory = contexts.cuda.as_ref().map(|c| arms::RowMemory::new(&c.device, w, offset, &oracle.init)).transpose();
        let addresses = match &memory {
            Ok(Some(m)) => m.addresses(w),
            _ => Vec::new(),
        };
        let mut run = RowRun { id: id.clone(), oracle, order: Vec::new(), results: Vec::new(), addresses, memory, vulkan: None, decode: None, timeline: None };
        let started = std::time::Instant::now();
        run.arms(&rotated(graph_arms, ri + study.rotate), w, contexts, protocol, pb);
        progress(pb, "graph arms", ri, row_list.len(), id, started, &run.results);
        // A decode row's kernel table, on the row's memory, after its graph arms (it launches directly).
        if let (Some(c), Ok(Some(m)), Some(_)) = (&contexts.cuda, &run.memory, w.model) {
            pb.set_message(format!("{id} (kernel table)"));
            run.decode = Some(match c.backends.first() {
                Some((_, backend)) => profile::profile(&c.device, &c.modules, backend, w, m, &run.oracle.init, if args.quick { 3 } else { 9 }),
                None => Err("no CUDA backend".into()),
            });
        }
        // The traced row keeps its memory for the trace, which runs after every measurement.
        if !direct_follows && !timeline::traced_row(w) {
            run.memory = Ok(None);
        }
        runs.push(run);
    }
    runs
}

/// Each row's results as the report keeps them, its arms in the order of `arms`.
fn row_results(row_list: &[(&Workload, u64, String)], runs: Vec<RowRun>, arms: &[ArmKind]) -> Vec<RowResult> {
    let mut rows = Vec::new();
    for (&(w, _, ref id), RowRun { mut results, order, addresses, decode, timeline, .. }) in row_list.iter().zip(runs) {
        // Report arms in a fixed order; the run order is kept in `arm_order`.
        results.sort_by_key(|r| arms.iter().position(|a| a.name() == r.arm));
        rows.push(RowResult {
            id: id.clone(),
            family: w.family.to_string(),
            dispatches_per_replay: w.dispatches,
            replays_per_sample: w.replays,
            check: w.check.describe(),
            ok: results.iter().all(|r| r.ok),
            arm_order: order.iter().map(|a| a.name()).collect(),
            buffer_addresses: addresses,
            protocol: w.protocol,
            arms: results,
            decode,
            timeline,
        });
    }
    rows
}

/// Traces the Llama step at position 1,024 node by node on its row's memory (the report's picture),
/// after every measurement: a CUPTI trace leaves the process's later launches slower (on an H200,
/// after the traced step every row's host µs per replay call went from 1.2 to 3.8 and its GPU µs per
/// dispatch up 7-25%, for every arm). Every row's device memory is dropped after it.
fn trace_pass(args: &BenchConfig, row_list: &[(&Workload, u64, String)], runs: &mut [RowRun], contexts: &Contexts, pb: &ProgressBar) {
    for (&(w, _, ref id), run) in row_list.iter().zip(runs.iter_mut()) {
        if let (Some(c), Ok(Some(m)), true) = (&contexts.cuda, &run.memory, timeline::traced_row(w)) {
            pb.set_message(format!("{id} (trace)"));
            run.timeline = Some(match c.backends.iter().find(|(k, _)| *k == ArmKind::Ostinato) {
                Some((_, backend)) => timeline::trace_step(backend, w, m, &run.oracle.init, &args.out),
                None => Err("the Ostinato arm is not among the arms run".into()),
            });
        }
        run.memory = Ok(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_graph_arm_runs_after_an_arm_that_launches_directly() {
        let [graph, direct, later] = passes(&ArmKind::CUDA);
        assert_eq!(direct, [ArmKind::Eager, ArmKind::OstinatoEager]);
        assert_eq!(later, ArmKind::VULKAN);
        assert_eq!(
            graph,
            [
                ArmKind::Captured,
                ArmKind::CapturedPdl,
                ArmKind::Ostinato,
                ArmKind::OstinatoUnfused,
                ArmKind::OstinatoFusionOn,
                ArmKind::OstinatoUnstaged,
                ArmKind::OstinatoUntuned,
                ArmKind::OstinatoEdgesMedian,
                ArmKind::OstinatoPdlOff,
                ArmKind::OstinatoPdlOn,
                ArmKind::OstinatoThread
            ]
        );
        let [graph, direct, later] = passes(&[ArmKind::Eager, ArmKind::Ostinato]);
        assert_eq!((graph, direct, later), (vec![ArmKind::Ostinato], vec![ArmKind::Eager], vec![]));
        assert_eq!(rotated(&[ArmKind::Eager, ArmKind::OstinatoEager], 3), [ArmKind::OstinatoEager, ArmKind::Eager]);
        assert!(rotated(&[], 5).is_empty());
    }

    #[test]
    fn the_decode_check_takes_logits_within_tolerance_and_the_greedy_token_beyond_the_margin() {
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let token = |t: u32| t.to_le_bytes().to_vec();
        let want = vec![bytes(&[1.0, 5.0, 2.0, 4.99]), token(1)];
        let ok = |got: &[f32], t: u32| compare(&Check::Logits(1e-2), &[], &want, &[bytes(got), token(t)]);
        assert!(ok(&[1.0, 5.0, 2.0, 4.99], 1).is_ok());
        assert!(ok(&[1.0, 5.001, 2.0, 4.99], 1).is_ok(), "within 1e-2 of the largest |logit|");
        assert!(ok(&[1.0, 5.0, 2.2, 4.99], 1).unwrap_err().contains("differ"), "a logit off by 4% of the scale");
        assert!(ok(&[1.0, 4.99, 2.0, 5.0], 3).is_ok(), "a near-tie (margin 0.2% of the scale) may flip");
        assert!(ok(&[1.0, 5.0, 2.0, 4.99], 3).unwrap_err().contains("argmax"), "the token written is not the logits' argmax");
        let clear = vec![bytes(&[1.0, 5.0, 2.0, 4.0]), token(1)];
        let flipped = compare(&Check::Logits(0.15), &[], &clear, &[bytes(&[1.0, 4.6, 2.0, 4.7]), token(3)]);
        assert!(flipped.unwrap_err().contains("margin"), "a flip where the reference's margin (20% of the scale) exceeds the tolerance (15%)");
        assert!(compare(&Check::Logits(1e-2), &[], &want, &[bytes(&[f32::NAN, 5.0, 2.0, 4.99]), token(1)]).is_err());
    }

    #[test]
    fn the_bounded_check_takes_each_element_within_its_own_bound_and_no_nan() {
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let check = Check::Within(crate::workload::Bounds::new(|| vec![vec![0.0, 1e-3, 0.5]]));
        let want = vec![bytes(&[1.0, 2.0, 3.0])];
        assert!(compare(&check, &[], &want, &[bytes(&[1.0, 2.0009, 2.6])]).is_ok());
        let e = compare(&check, &[], &want, &[bytes(&[1.0, 2.0011, 3.0])]).unwrap_err();
        assert!(e.contains("element 1") && e.contains("bound"), "{e}");
        assert!(compare(&check, &[], &want, &[bytes(&[1.0000001, 2.0, 3.0])]).unwrap_err().contains("element 0"), "a zero bound is exact");
        assert!(compare(&check, &[], &want, &[bytes(&[1.0, 2.0, f32::NAN])]).is_err());
        assert!(compare(&check, &[], &want, &[bytes(&[1.0, 2.0])]).unwrap_err().contains("2 elements, 3 bounds"));
    }

    #[test]
    fn matrix_row_ids_are_unique_whatever_the_lists() {
        for backend in [BenchBackend::Cuda, BenchBackend::Host] {
            for quick in [false, true] {
                let rows = matrix(backend, quick, Some(&[1, 128, 128, 1]), Some(&[4, 4, 16]), None);
                let mut ids: Vec<&str> = rows.iter().map(|w| w.id.as_str()).collect();
                assert!(ids.contains(&"grid/serial/n941/b1") && ids.contains(&"grid/indep/n941/b128") && ids.contains(&"fan/k16/w1024"), "{ids:?}");
                let n = ids.len();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), n, "{backend:?} quick={quick}: a row id repeats");
            }
        }
    }
}
