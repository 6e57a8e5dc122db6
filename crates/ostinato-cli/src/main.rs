//! `ostinato`: the command-line shell. It parses arguments and prints; the work is in the runtime
//! (`ostinato-runtime`) and the benchmark (`ostinato-bench`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use ostinato::Named;
use ostinato_bench::study::{EdgeTypesRule, GraphBuild, MixedBuilds, PdlTrigger, ShapeMode, StreamPriority};
use ostinato_bench::{BenchBackend, Regime};
use ostinato_bench::{BenchConfig, StudyConfig};
use ostinato_runtime::options::CHOICES;
use ostinato_runtime::{BackendKind, ExecOptions, PlanReport, RunOptions, WaitTimeout};

#[derive(Parser)]
#[command(name = "ostinato", version, about = "Record a kernel DAG once, replay it as one retained submission.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A value parser for a library option: its values' names, listed in `--help` and in the error.
fn choice<T: Named + Send + Sync>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::names()).try_map(|s: String| T::from_name(&s).ok_or_else(|| format!("`{s}` is not a value")))
}

/// A value parser for the exec option `key` (the runtime's choices: their values listed in `--help`
/// and in the error).
fn exec_choice(key: &str) -> PossibleValuesParser {
    PossibleValuesParser::new(CHOICES.iter().find(|c| c.key == key).map_or_else(Vec::new, |c| (c.values)()))
}

#[derive(Subcommand)]
enum Command {
    /// List what each backend finds.
    Devices,
    /// Plan a graph file and print its edges.
    Plan {
        file: PathBuf,
        /// One JSON object: nodes, edges, hazards, lanes, waits, fingerprint.
        #[arg(long)]
        json: bool,
        /// Explain every edge: which params conflict on which bytes.
        #[arg(long)]
        explain: bool,
        /// Print what the CUDA backend would submit (kernel nodes, builds, programmatic edges) under
        /// `--pdl`; needs no GPU. Built-in kernels count as PDL-capable (their PTX certifies at load).
        #[arg(long)]
        cuda: bool,
        #[arg(long, default_value = "auto", value_parser = exec_choice("pdl"))]
        pdl: String,
        #[arg(long, default_value = "auto", value_parser = exec_choice("shape"), hide = true)]
        shape: String,
        #[arg(long, default_value_t = 4)]
        max_lanes: usize,
    },
    /// Run a graph file on a backend.
    Run(Box<RunArgs>),
    /// Print the build manifest of every kernel of a graph file: source, compiler and options, PTX/cubin
    /// or SPIR-V hashes, resources, and what the contract analysis read from the code.
    Kernels {
        file: PathBuf,
        /// Whose manifests (default: cuda where NVRTC or a CUDA driver is found, else the first of
        /// vulkan, hsa and host that the file implements; none of them needs a GPU but cuda).
        #[arg(long, value_parser = choice::<BackendKind>())]
        backend: Option<BackendKind>,
        /// One JSON array, each manifest with its hash.
        #[arg(long)]
        json: bool,
    },
    /// Run the dispatch benchmark matrix and write results.json, REPORT.md and a chart.
    Bench(Box<BenchArgs>),
}

#[derive(Args)]
struct RunArgs {
    file: PathBuf,
    /// The backend (hsa: add --simulate to run on the simulated AQL packet processor, no AMD GPU).
    #[arg(long, default_value = "host", value_parser = choice::<BackendKind>())]
    backend: BackendKind,
    /// With --backend hsa: run on the simulated AQL packet processor, no AMD GPU needed (a test tool:
    /// every result is a simulated one), with this scheduler seed (default 1).
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_name = "SEED")]
    simulate: Option<u64>,
    #[arg(long, default_value_t = 1)]
    replays: usize,
    /// Host: race checker on; every backend: compare with the host's serial execution, bit for bit.
    #[arg(long)]
    check: bool,
    /// Write each buffer's final bytes to DIR/NAME.bin.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// CUDA graph mode: write the submitted graph as DOT (nodes with launch params; edges with type
    /// and ports) to this file. (A debugging aid, kept out of the default help.)
    #[arg(long, hide = true)]
    dot: Option<PathBuf>,
    /// Run the replays traced, every node timed (CUPTI on CUDA, timestamp queries on Vulkan, worker
    /// clocks on the host), and write Chrome/Perfetto trace-event JSON to this file.
    #[arg(long, value_name = "OUT.json")]
    trace: Option<PathBuf>,
    /// Run the replays traced and draw the SVG timeline to this file (rows per thread, stream or
    /// queue; idle gaps; the critical path in red).
    #[arg(long, value_name = "OUT.svg")]
    trace_svg: Option<PathBuf>,
    /// Host worker threads for every replay (0 = serial on the calling thread). Default: one per core,
    /// used where the plan can use them (one lane or tiny nodes replay on the calling thread). Kept out
    /// of the default help.
    #[arg(long, hide = true)]
    threads: Option<usize>,
    /// CUDA: one retained graph, or eager per-lane streams.
    #[arg(long, default_value = "graph", value_parser = exec_choice("mode"))]
    mode: String,
    /// CUDA: programmatic (PDL) edges where the measured policy says they pay, always, or never.
    #[arg(long, default_value = "auto", value_parser = exec_choice("pdl"))]
    pdl: String,
    /// CUDA graph mode under --pdl auto: measure the other submissions auto could have made (PDL on,
    /// off, lane or plan shape) over the first replays and keep the fastest (auto), or trust auto's
    /// thresholds alone (off). Kept out of the default help.
    #[arg(long, default_value = "auto", value_parser = exec_choice("tune"), hide = true)]
    tune: String,
    /// CUDA and Vulkan: chain fusion — runs of dependent 1-block nodes replayed as one resident block
    /// (one workgroup), and chains whose tile maps relate block b only to block b as one kernel of their
    /// grid; on CUDA also chains whose blocks depend on a few blocks of each other, as one kernel of a
    /// block per connected component, and independent launches of many blocks side by side as one
    /// kernel: where it cannot lose or costs little (auto; side by side: single launches of at most
    /// 2^19 threads, 2^14 for a kernel with a block barrier, that wait for and feed the same nodes, or
    /// launches of one kernel that wait for the same nodes),
    /// wherever the nodes may fuse (on), or never (off).
    #[arg(long, default_value = "auto", value_parser = exec_choice("fusion"))]
    fusion: String,
    /// CUDA: tile hand-offs — a consumer block waits for exactly the producer blocks its tile maps
    /// need instead of the whole producer: where measured to pay (auto: nowhere yet, docs/fences.md
    /// decision 13), wherever the maps allow (on), or never (off).
    #[arg(long, default_value = "auto", value_parser = exec_choice("handoff"))]
    handoff: String,
    /// CUDA: block-local fused chains keep their verified tiles in shared memory for the whole chain
    /// (auto), or read and write device memory (off). Kept out of the default help.
    #[arg(long, default_value = "auto", value_parser = exec_choice("tile-staging"), hide = true)]
    tile_staging: String,
    /// CUDA: which thread calls the driver on replay and patch: the caller's, or a launch thread the
    /// exec owns (replay returns once the command is queued; the thread spins 5 ms after each). Kept
    /// out of the default help.
    #[arg(long, default_value = "caller", value_parser = exec_choice("launch"), hide = true)]
    launch: String,
    /// Vulkan: how a replay is ordered after the previous one (docs/fences-vulkan.md; default: skip — no
    /// ordering where the exec knows the previous replay completed).
    #[arg(long, value_parser = exec_choice("ordering"), hide = true)]
    ordering: Option<String>,
    /// Vulkan: one queue, or each plan lane on a queue of its own.
    #[arg(long, value_parser = exec_choice("queues"), hide = true)]
    queues: Option<String>,
    /// The device. CUDA: ordinal, GPU-UUID or PCI bus id (default: OSTINATO_DEVICE, else 0).
    /// Vulkan: index, UUID or part of the name (default: OSTINATO_VK_DEVICE, else the best). HSA:
    /// index, UUID, PCI bus id or ISA name (default: OSTINATO_HSA_DEVICE, else the first agent).
    #[arg(long)]
    device: Option<String>,
    /// Seconds a wait for the replays may take before it fails and the exec is faulted (0: wait for
    /// ever; default: the backend's, 60 s). Kept out of the default help.
    #[arg(long, value_parser = non_negative_seconds, hide = true)]
    wait_timeout_s: Option<f64>,
    #[arg(long, default_value_t = 4, hide = true)]
    max_lanes: usize,
    #[arg(long, default_value = "auto", value_parser = exec_choice("shape"), hide = true)]
    shape: String,
    /// The main PDL build's trigger for built-in kernels (small nodes trigger at entry regardless).
    #[arg(long, default_value = "after-wait", value_parser = exec_choice("trigger"), hide = true)]
    trigger: String,
    /// CUDA graph mode: bulk (every node, then the edges in one call per edge type), in-order (each
    /// node with its in-edges) or capture (stream capture with the plan's edges).
    #[arg(long, default_value = "bulk", value_parser = exec_choice("graph-build"), hide = true)]
    graph_build: String,
    #[arg(long, default_value = "default", value_parser = exec_choice("priority"), hide = true)]
    priority: String,
}

impl RunArgs {
    /// The exec's options these flags set.
    fn exec_options(&self) -> Result<ExecOptions, String> {
        let mut o = ExecOptions::default();
        o.device = self.device.clone();
        o.threads = self.threads;
        o.simulate = self.simulate;
        o.wait_timeout = match self.wait_timeout_s {
            None => WaitTimeout::Default,
            Some(0.0) => WaitTimeout::Never,
            Some(s) => WaitTimeout::After(std::time::Duration::from_secs_f64(s)),
        };
        for (key, value) in [
            ("mode", &self.mode),
            ("pdl", &self.pdl),
            ("tune", &self.tune),
            ("fusion", &self.fusion),
            ("handoff", &self.handoff),
            ("tile-staging", &self.tile_staging),
            ("launch", &self.launch),
            ("shape", &self.shape),
            ("trigger", &self.trigger),
            ("graph-build", &self.graph_build),
            ("priority", &self.priority),
        ] {
            o.set(key, value).map_err(|e| e.to_string())?;
        }
        for (key, value) in [("ordering", &self.ordering), ("queues", &self.queues)] {
            if let Some(value) = value {
                o.set(key, value).map_err(|e| e.to_string())?;
            }
        }
        Ok(o)
    }
}

#[derive(Args)]
struct BenchArgs {
    /// cuda (default where a CUDA device is found) or host.
    #[arg(long, value_parser = choice::<BenchBackend>())]
    backend: Option<BenchBackend>,
    /// A shorter matrix.
    #[arg(long)]
    quick: bool,
    /// Only rows whose id contains one of these comma-separated texts.
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Timed samples per arm, at least.
    #[arg(long, default_value_t = 7)]
    samples: usize,
    /// Keep taking timed samples (beyond --samples, up to 63) until this many milliseconds of them.
    #[arg(long, default_value_t = 10)]
    timed_ms: u64,
    /// Warm-up samples of each instance, at least (hidden: --warmup-ms is the one to set).
    #[arg(long, default_value_t = 3, hide = true)]
    warmups: usize,
    /// Keep warming each arm up until this many milliseconds have passed.
    #[arg(long, default_value_t = 50)]
    warmup_ms: u64,
    /// Instances made of every arm of a row (1 to 16): the timed rounds rotate among them and a win
    /// or a loss must hold across them (identical graphs made twice land apart on small rows).
    #[arg(long, default_value_t = ostinato_bench::config::DEFAULT_INSTANCES)]
    instances: usize,
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// Measure nothing: write one report into --out of the runs whose results these comma-separated
    /// folders (or results.json files) hold, a matrix run in parts (one build, backend, device model
    /// and protocol; a row one part left not run under its time limit is taken from the part that ran it).
    #[arg(long, value_delimiter = ',', value_name = "RUNS", conflicts_with_all = ["backend", "quick", "filter", "samples", "timed_ms", "warmups", "warmup_ms", "instances", "time_limit", "arms", "replays"])]
    merge: Vec<PathBuf>,
    /// Start no further row after this many seconds: the rows begun finish, the others are reported
    /// as not run, and the report is written (for runs under a time limit).
    #[arg(long, value_name = "SECONDS")]
    time_limit: Option<f64>,
    /// Only the rows an earlier run under --time-limit left not run (its folder or results.json), with
    /// its arms unless --arms names others; refused where the two would not merge into one matrix
    /// (another build, backend, --quick or protocol). Then --merge EARLIER,THIS.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["filter", "merge"])]
    rest_of: Option<PathBuf>,
    #[arg(long, value_delimiter = ',', help = arms_help())]
    arms: Option<Vec<String>>,
    /// Replays between the two timing events of every sample (default 1; the decode stack 4; hidden:
    /// a protocol study setting, and --help keeps to twelve options).
    #[arg(long, hide = true)]
    replays: Option<usize>,
    // Fence-policy studies (docs/fences.md); hidden from --help.
    #[arg(long, default_value = "after-wait", value_parser = choice::<PdlTrigger>(), hide = true)]
    trigger: PdlTrigger,
    #[arg(long, hide = true)]
    pdl_max_blocks: Option<u64>,
    #[arg(long, hide = true)]
    pdl_max_side_by_side_blocks: Option<u64>,
    #[arg(long, hide = true)]
    pdl_max_fanout: Option<usize>,
    #[arg(long, default_value = "auto", value_parser = choice::<ShapeMode>(), hide = true)]
    graph_shape: ShapeMode,
    #[arg(long, default_value = "bulk", value_parser = choice::<GraphBuild>(), hide = true)]
    graph_build: GraphBuild,
    #[arg(long, default_value = "default", value_parser = choice::<StreamPriority>(), hide = true)]
    priority: StreamPriority,
    #[arg(long, default_value = "off", num_args = 0..=1, default_missing_value = "all", value_parser = choice::<MixedBuilds>(), hide = true)]
    pdl_mixed_builds: MixedBuilds,
    #[arg(long, default_value = "quartiles", value_parser = choice::<EdgeTypesRule>(), hide = true)]
    tune_edge_types: EdgeTypesRule,
    #[arg(long, value_delimiter = ',', hide = true)]
    blocks: Option<Vec<u32>>,
    #[arg(long, value_delimiter = ',', hide = true)]
    fans: Option<Vec<usize>>,
    #[arg(long, hide = true)]
    dot: Option<PathBuf>,
    #[arg(long, default_value_t = 0, hide = true)]
    rotate: usize,
    #[arg(long, value_delimiter = ',', hide = true)]
    offsets: Option<Vec<u64>>,
    #[arg(long, default_value = "fresh", value_parser = choice::<Regime>(), hide = true)]
    regime: Regime,
}

/// `--arms`' help: every arm's name, per backend (the benchmark's own lists).
fn arms_help() -> String {
    use ostinato_bench::arms::ArmKind;
    let names = |arms: &[ArmKind]| arms.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ");
    format!(
        "Only these arms (comma-separated; the main Ostinato arm must be among them). cuda: {} (main: ostinato). host: {} (main: ostinato-host; the Vulkan arms run on any Vulkan device found)",
        names(&ArmKind::CUDA),
        names(&ArmKind::HOST_SELECTABLE)
    )
}

impl BenchArgs {
    fn config(self) -> BenchConfig {
        BenchConfig {
            backend: self.backend,
            quick: self.quick,
            filter: self.filter,
            samples: self.samples,
            timed_ms: self.timed_ms,
            warmups: self.warmups,
            warmup_ms: self.warmup_ms,
            instances: self.instances,
            out: self.out,
            arms: self.arms,
            replays: self.replays,
            time_limit_s: self.time_limit,
            rest_of: self.rest_of,
            study: StudyConfig {
                trigger: self.trigger,
                pdl_max_blocks: self.pdl_max_blocks,
                pdl_max_side_by_side_blocks: self.pdl_max_side_by_side_blocks,
                pdl_max_fanout: self.pdl_max_fanout,
                graph_shape: self.graph_shape,
                graph_build: self.graph_build,
                priority: self.priority,
                mixed_builds: self.pdl_mixed_builds,
                tune_edge_types: self.tune_edge_types,
                blocks: self.blocks,
                fans: self.fans,
                dot: self.dot,
                rotate: self.rotate,
                offsets: self.offsets,
                regime: self.regime,
            },
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the command's output; a reader that closed the pipe early (`| head`) is not an error.
fn emit(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing the output: {e}")),
        _ => Ok(()),
    }
}

fn dispatch(c: Command) -> Result<(), String> {
    match c {
        Command::Devices => emit(&ostinato_runtime::devices::describe()),
        Command::Plan { file, json, explain, cuda, pdl, shape, max_lanes } => {
            let cuda = if cuda {
                let mut o = ExecOptions::default();
                o.set("pdl", &pdl).and_then(|o| o.set("shape", &shape)).map_err(|e| e.to_string())?;
                Some(o)
            } else {
                None
            };
            emit(&ostinato_runtime::plan_report(&file, &PlanReport { json, explain, cuda, max_lanes }).map_err(|e| e.to_string())?)
        }
        Command::Run(a) => run(*a),
        Command::Kernels { file, backend, json } => kernels(&file, backend, json),
        Command::Bench(args) if !args.merge.is_empty() => ostinato_bench::merge::merge(&args.merge, &args.out).map(|_| ()).map_err(|e| e.to_string()),
        Command::Bench(args) => ostinato_bench::bench(&args.config()).map(|_| ()).map_err(|e| e.to_string()),
    }
}

fn kernels(path: &std::path::Path, backend: Option<BackendKind>, json: bool) -> Result<(), String> {
    let (f, _) = ostinato_runtime::kernels::load_file(path).map_err(|e| e.to_string())?;
    let backend = backend.unwrap_or_else(|| {
        let (chosen, why) = ostinato_runtime::kernels::default_backend(&f);
        if let Some(why) = why {
            // On stderr: `--json` keeps stdout one JSON array.
            eprintln!("note: no --backend given, so {why}");
        }
        chosen
    });
    let manifests = ostinato_runtime::kernels::manifests(&f, backend).map_err(|e| e.to_string())?;
    if json {
        let all: Vec<serde_json::Value> = manifests.iter().map(|m| m.to_json()).collect();
        emit(&format!("{}\n", serde_json::Value::Array(all)))
    } else {
        emit(&manifests.iter().map(|m| m.describe()).collect::<String>())
    }
}

fn run(a: RunArgs) -> Result<(), String> {
    use std::fmt::Write;
    if a.simulate.is_some() && a.backend != BackendKind::Hsa {
        return Err(format!("--simulate runs the HSA backend on the simulated packet processor: it needs --backend hsa, not {}", a.backend));
    }
    let o = RunOptions {
        backend: a.backend,
        exec: a.exec_options()?,
        replays: a.replays,
        check: a.check,
        dump: a.dump,
        dot: a.dot,
        max_lanes: a.max_lanes,
        trace: a.trace,
        trace_svg: a.trace_svg,
    };
    let r = ostinato_runtime::run_file(&a.file, &o).map_err(|e| {
        if a.backend == BackendKind::Hsa && a.simulate.is_none() && e.kind() == ostinato::ErrorKind::BackendMissing {
            format!("{e}\n(without an AMD GPU, `--simulate` runs the same AQL lowering on the simulated packet processor)")
        } else {
            e.to_string()
        }
    })?;
    let mut out = String::new();
    for n in &r.notes {
        let _ = writeln!(out, "{n}");
    }
    if let Some(seed) = a.simulate {
        let _ = writeln!(
            out,
            "{}: simulated on the AQL packet processor model, seed {seed} (no AMD GPU ran): {} nodes, {} edges, {} replays{}",
            a.file.display(),
            r.nodes,
            r.edges,
            r.replays,
            if r.checked { ", check passed (the simulated result is bitwise equal to the host serial oracle)" } else { "" }
        );
        return emit(&out);
    }
    let _ = writeln!(
        out,
        "{}: {} nodes, {} edges, {} replays in {:.3} ms{}",
        a.file.display(),
        r.nodes,
        r.edges,
        r.replays,
        r.seconds * 1e3,
        if r.checked { ", check passed (bitwise equal to the host serial oracle)" } else { "" }
    );
    emit(&out)
}

fn non_negative_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds from 0 to 1e9")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_takes_the_librarys_values_and_refuses_other_names() {
        let cli = Cli::try_parse_from(["ostinato", "run", "g.toml", "--mode", "eager", "--pdl", "off", "--trigger", "entry", "--graph-build", "in-order"]);
        let Ok(Cli { command: Command::Run(a) }) = cli else { panic!("parses") };
        let o = a.exec_options().unwrap();
        assert_eq!([o.get("mode"), o.get("pdl"), o.get("trigger"), o.get("graph-build")], [Some("eager"), Some("off"), Some("entry"), Some("in-order")]);
        let err = Cli::try_parse_from(["ostinato", "run", "g.toml", "--graph-build", "tree"]).err().expect("refused").to_string();
        assert!(err.contains("tree") && err.contains("in-order"), "{err}");
    }

    #[test]
    fn bench_flags_land_in_the_config() {
        let Ok(Cli { command: Command::Bench(a) }) =
            Cli::try_parse_from(["ostinato", "bench", "--backend", "host", "--filter", "grid,fan", "--blocks", "1,128", "--regime", "multi-stream"])
        else {
            panic!("parses")
        };
        let c = a.config();
        assert_eq!(c.filter, ["grid", "fan"]);
        assert_eq!(c.study.blocks, Some(vec![1, 128]));
        assert_eq!(c.study.regime, Regime::MultiStream);
    }

    #[test]
    fn bench_rest_of_takes_an_earlier_run_and_refuses_a_filter_or_a_merge_beside_it() {
        let Ok(Cli { command: Command::Bench(a) }) = Cli::try_parse_from(["ostinato", "bench", "--rest-of", "part-a", "--time-limit", "60"]) else {
            panic!("parses")
        };
        let c = a.config();
        assert_eq!((c.rest_of, c.time_limit_s), (Some(PathBuf::from("part-a")), Some(60.0)));
        for extra in [["--filter", "grid"], ["--merge", "a,b"]] {
            let args = ["ostinato", "bench", "--rest-of", "part-a"].into_iter().chain(extra);
            assert!(Cli::try_parse_from(args).is_err(), "--rest-of picks its rows: {extra:?} beside it is refused");
        }
    }

    #[test]
    fn bench_merge_takes_runs_and_refuses_the_options_of_a_measurement() {
        let Ok(Cli { command: Command::Bench(a) }) = Cli::try_parse_from(["ostinato", "bench", "--merge", "a,b/results.json", "--out", "whole"]) else {
            panic!("parses")
        };
        assert_eq!(a.merge, [PathBuf::from("a"), PathBuf::from("b/results.json")]);
        for extra in [["--filter", "grid"], ["--time-limit", "60"], ["--instances", "5"]] {
            let args = ["ostinato", "bench", "--merge", "a,b"].into_iter().chain(extra);
            assert!(Cli::try_parse_from(args).is_err(), "--merge with {extra:?} measures nothing: refused");
        }
    }

    #[test]
    fn default_help_shows_at_most_twelve_options_per_command() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        for name in ["run", "bench", "plan", "kernels"] {
            let sub = cmd.find_subcommand(name).expect("subcommand");
            let shown = sub.get_arguments().filter(|a| !a.is_hide_set() && !a.is_positional()).count();
            assert!(shown <= 12, "`{name}` shows {shown} options");
        }
    }
}
