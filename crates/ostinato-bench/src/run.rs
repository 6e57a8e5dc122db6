//! Running graph files on a backend: what `ostinato run` does. Load → plan → bind each kernel's
//! implementation for the backend → instantiate → initialise → replay → (check) → dump.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ostinato::file::{self, GraphFile};
use ostinato::{read_roots, write_inits, Backend, BufferId, Exec, Plan, PlanOptions};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaKernel, CudaOptions, Device, DeviceSelector, LaunchOn, LoadedModule};
use ostinato_host::{builtins, HostBackend};

/// Backend names a graph file may name implementations for.
pub const IMPL_KEYS: &[&str] = &["host", "cuda"];

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    File(#[from] file::FileError),
    #[error(transparent)]
    Plan(#[from] ostinato::PlanError),
    #[error("host backend: {0}")]
    Host(#[from] ostinato_host::HostError),
    #[error("cuda backend: {0}")]
    Cuda(#[from] ostinato_cuda::CudaError),
    #[error("check failed: {0}")]
    Mismatch(String),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{0}")]
    Usage(String),
}

#[derive(Clone, Debug)]
pub enum BackendChoice {
    /// `threads: None`: one worker per core where the plan can use them (`HostBackend::auto`);
    /// `Some(n)`: exactly `n` workers for every replay (0 = serial on the calling thread).
    Host {
        threads: Option<usize>,
    },
    Cuda {
        options: CudaOptions,
        device: Option<String>,
    },
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub backend: BackendChoice,
    pub replays: usize,
    pub check: bool,
    pub dump: Option<PathBuf>,
    /// CUDA graph mode: write the submitted graph as DOT (with each edge's type and ports) here.
    pub dot: Option<PathBuf>,
    pub max_lanes: usize,
}

/// What a run reports.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub nodes: usize,
    pub edges: usize,
    pub replays: usize,
    pub seconds: f64,
    pub checked: bool,
    pub buffers: Vec<(String, Vec<u8>)>,
    pub notes: Vec<String>,
}

/// Host kernels for a graph file's kernels (`host = "builtin:…"`).
pub fn host_kernels(f: &GraphFile, plan: &Plan) -> Result<Vec<ostinato_host::HostKernel>, RunError> {
    let mut out = Vec::new();
    for (k, sig) in plan.graph().kernels().iter().enumerate() {
        let spec = f.impls[k].get("host").ok_or_else(|| f.kernel_error(k, format!("kernel `{}` has no `host` implementation", sig.name)))?;
        let hk = builtins::lookup(spec.source()).ok_or_else(|| f.kernel_error(k, format!("kernel `{}`: no host kernel `{}`", sig.name, spec.source())))?;
        hk.check_signature(sig).map_err(|r| f.kernel_error(k, format!("kernel `{}`: {r}", sig.name)))?;
        out.push(hk);
    }
    Ok(out)
}

/// CUDA kernels for a graph file's kernels (`cuda = "builtin:mix"`, `"kernels/x.cu"`, or a table).
/// `builtins` serve `builtin:` references; other sources are compiled with the same main trigger.
pub fn cuda_kernels(f: &GraphFile, plan: &Plan, device: &Device, builtins: &BuiltinModules) -> Result<Vec<CudaKernel>, RunError> {
    let trigger = builtins.trigger();
    let mut out = Vec::new();
    let mut modules: Vec<(String, LoadedModule)> = Vec::new();
    for (k, sig) in plan.graph().kernels().iter().enumerate() {
        let spec = f.impls[k].get("cuda").ok_or_else(|| f.kernel_error(k, format!("kernel `{}` has no `cuda` implementation", sig.name)))?;
        let src_ref = spec.source();
        let entry = spec.entry().map(str::to_string).unwrap_or_else(|| src_ref.strip_prefix("builtin:").unwrap_or(&sig.name).to_string());
        if src_ref.starts_with("builtin") {
            out.push(builtins.kernel(&entry, sig).map_err(|e| f.kernel_error(k, e.to_string()))?);
            continue;
        }
        let key = src_ref.to_string();
        if !modules.iter().any(|(n, _)| *n == key) {
            let source = ostinato_cuda::module::resolve_source(src_ref, f.base_dir()).map_err(|e| f.kernel_error(k, e.to_string()))?;
            modules.push((key.clone(), LoadedModule::load(device, &source, trigger).map_err(|e| f.kernel_error(k, e.to_string()))?));
        }
        let m = &modules.iter().find(|(n, _)| *n == key).expect("loaded above").1;
        out.push(m.kernel(&entry, sig, spec.pdl()).map_err(|e| f.kernel_error(k, e.to_string()))?);
    }
    Ok(out)
}

fn named(plan: &Plan, roots: Vec<(BufferId, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    roots.into_iter().map(|(id, b)| (plan.graph().buffer(id).name.clone(), b)).collect()
}

/// The host oracle: serial plan order, race checker on.
pub fn host_serial(f: &GraphFile, plan: &Plan, replays: usize) -> Result<Vec<(String, Vec<u8>)>, RunError> {
    let mut exec = HostBackend::serial().with_race_checker(true).instantiate(plan, host_kernels(f, plan)?, ostinato::allocate_all(plan))?;
    write_inits(&mut exec, &f.inits)?;
    for _ in 0..replays {
        exec.replay()?;
    }
    Ok(named(plan, read_roots(&mut exec)?))
}

fn compare(want: &[(String, Vec<u8>)], got: &[(String, Vec<u8>)]) -> Result<(), RunError> {
    for ((name, w), (_, g)) in want.iter().zip(got) {
        if let Some(i) = w.iter().zip(g).position(|(a, b)| a != b) {
            return Err(RunError::Mismatch(format!("buffer `{name}` differs from the host oracle first at byte {i} (want {:#04x}, got {:#04x})", w[i], g[i])));
        }
    }
    Ok(())
}

/// Buffers by name, with their bytes.
pub type NamedBuffers = Vec<(String, Vec<u8>)>;

/// Initialises, replays `replays` times (timed, until the last one finished) and reads every root.
fn init_replay_read<E: Exec>(exec: &mut E, f: &GraphFile, replays: usize) -> Result<(NamedBuffers, f64), E::Error> {
    write_inits(exec, &f.inits)?;
    let t0 = Instant::now();
    for _ in 0..replays {
        exec.replay()?;
    }
    exec.wait()?;
    let seconds = t0.elapsed().as_secs_f64();
    let roots = read_roots(exec)?;
    Ok((roots.into_iter().map(|(id, b)| (exec.plan().graph().buffer(id).name.clone(), b)).collect(), seconds))
}

/// Runs a graph file.
pub fn run_file(path: &Path, o: &RunOptions) -> Result<RunReport, RunError> {
    let f = file::load(path, IMPL_KEYS)?;
    let plan = Plan::compile_with(&f.graph, PlanOptions { max_lanes: o.max_lanes })?;
    let graph_mode = matches!(&o.backend, BackendChoice::Cuda { options, .. } if options.mode == ostinato_cuda::ExecMode::Graph);
    if o.dot.is_some() && !graph_mode {
        return Err(RunError::Usage("--dot writes a CUDA graph: it needs --backend cuda in graph mode".into()));
    }
    let mut notes = Vec::new();
    let (buffers, seconds) = match &o.backend {
        BackendChoice::Host { threads } => {
            let backend = threads.map_or_else(|| HostBackend::auto(HostBackend::default_threads()), HostBackend::new);
            let mut exec = backend.with_race_checker(o.check).instantiate(&plan, host_kernels(&f, &plan)?, ostinato::allocate_all(&plan))?;
            if let Some(why) = exec.inline_reason() {
                notes.push(format!("host: replays run on the calling thread ({why})"));
            }
            init_replay_read(&mut exec, &f, o.replays)?
        }
        BackendChoice::Cuda { options, device } => {
            let sel = match device {
                Some(d) => DeviceSelector::parse(d)?,
                None => DeviceSelector::from_env()?,
            };
            let dev = Device::open(&sel)?;
            notes.push(format!(
                "device {} ({}), mode {}, pdl {}, launch from the {}",
                dev.info().name,
                dev.info().uuid,
                options.mode.as_str(),
                options.pdl.mode.as_str(),
                match options.launch {
                    LaunchOn::Caller => "caller's thread".to_string(),
                    LaunchOn::Thread { spin } => format!("exec's launch thread (spins {} µs, then parks)", spin.as_micros()),
                }
            ));
            let builtins = BuiltinModules::load(&dev, options.trigger)?;
            let kernels = cuda_kernels(&f, &plan, &dev, &builtins)?;
            let backend = CudaBackend::with_builtins(&dev, &builtins, *options)?;
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan))?;
            notes.push(format!("{} programmatic edges", exec.programmatic_edges()));
            if let Some(path) = &o.dot {
                exec.write_dot(path)?;
                notes.push(format!("graph written to {}", path.display()));
            }
            init_replay_read(&mut exec, &f, o.replays)?
        }
    };
    if o.check {
        compare(&host_serial(&f, &plan, o.replays)?, &buffers)?;
    }
    if let Some(dir) = &o.dump {
        std::fs::create_dir_all(dir).map_err(|e| RunError::Io { path: dir.display().to_string(), message: e.to_string() })?;
        for (name, bytes) in &buffers {
            let p = dir.join(format!("{name}.bin"));
            std::fs::write(&p, bytes).map_err(|e| RunError::Io { path: p.display().to_string(), message: e.to_string() })?;
        }
    }
    Ok(RunReport { nodes: plan.node_count(), edges: plan.edges().len(), replays: o.replays, seconds, checked: o.check, buffers, notes })
}
