//! `ostinato`: the command-line shell. It parses arguments and prints; the work is in the library
//! crates (`ostinato` core, backends, `ostinato-bench`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use ostinato::file;
use ostinato::{Plan, PlanOptions};
use ostinato_bench::cli::{named, LAUNCH_ON, MODES, PDL_MODES, PRIORITIES, SHAPES};
use ostinato_bench::run::{self, BackendChoice, RunOptions};
use ostinato_cuda::lower::ShapeMode;
use ostinato_cuda::{CudaOptions, ExecMode, GraphBuild, LaunchOn, PdlMode, PdlPolicy, PdlTrigger, StreamPriority};

#[derive(Parser)]
#[command(name = "ostinato", version, about = "Record a kernel DAG once, replay it as one retained submission.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Host,
    Cuda,
}

// `run` lists the benchmark's names (ostinato_bench::cli) but for two studies' values it leaves out: the
// trigger `disabled` and the graph build `bulk-one-call`.
const RUN_TRIGGERS: &[&str] = &["after-wait", "entry", "after-writes", "never"];
const RUN_GRAPH_BUILDS: &[&str] = &["bulk", "in-order", "capture"];

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
        #[arg(long, default_value = "auto", value_parser = named(PDL_MODES, PdlMode::parse))]
        pdl: PdlMode,
        #[arg(long, default_value = "auto", value_parser = named(SHAPES, ShapeMode::parse))]
        shape: ShapeMode,
        #[arg(long, default_value_t = 4)]
        max_lanes: usize,
    },
    /// Run a graph file on a backend.
    Run {
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = BackendArg::Host)]
        backend: BackendArg,
        #[arg(long, default_value_t = 1)]
        replays: usize,
        /// Host: race checker on; every backend: compare with the host's serial execution, bit for bit.
        #[arg(long)]
        check: bool,
        /// Write each buffer's final bytes to DIR/<name>.bin.
        #[arg(long)]
        dump: Option<PathBuf>,
        /// CUDA graph mode: write the submitted graph as DOT (nodes with launch params; edges with
        /// type and ports) to this file.
        #[arg(long)]
        dot: Option<PathBuf>,
        /// Host worker threads for every replay (0 = serial on the calling thread). Default: one per core,
        /// used where the plan can use them (one lane or tiny nodes replay on the calling thread).
        #[arg(long)]
        threads: Option<usize>,
        #[arg(long, default_value = "graph", value_parser = named(MODES, ExecMode::parse))]
        mode: ExecMode,
        #[arg(long, default_value = "auto", value_parser = named(PDL_MODES, PdlMode::parse))]
        pdl: PdlMode,
        #[arg(long, default_value = "auto", value_parser = named(SHAPES, ShapeMode::parse))]
        shape: ShapeMode,
        /// The main PDL build's trigger for built-in kernels (small nodes trigger at entry regardless).
        #[arg(long, default_value = "after-wait", value_parser = named(RUN_TRIGGERS, PdlTrigger::parse))]
        trigger: PdlTrigger,
        /// CUDA graph mode: bulk (every node, then the edges in one call per edge type), in-order (each
        /// node with its in-edges) or capture (stream capture with the plan's edges).
        #[arg(long, default_value = "bulk", value_parser = named(RUN_GRAPH_BUILDS, GraphBuild::parse))]
        graph_build: GraphBuild,
        /// CUDA: priority of the exec's streams: default, or high (the context's greatest).
        #[arg(long, default_value = "default", value_parser = named(PRIORITIES, StreamPriority::parse))]
        priority: StreamPriority,
        /// CUDA: which thread calls the driver on replay and patch: the caller's, or a launch thread the
        /// exec owns (replay returns once the command is queued; the thread spins 5 ms after each).
        #[arg(long, default_value = "caller", value_parser = named(LAUNCH_ON, LaunchOn::parse))]
        launch: LaunchOn,
        /// CUDA device: ordinal, GPU-UUID or PCI bus id (default: OSTINATO_DEVICE, else 0).
        #[arg(long)]
        device: Option<String>,
        #[arg(long, default_value_t = 4)]
        max_lanes: usize,
    },
    /// Run the dispatch benchmark matrix and write results.json, REPORT.md and a chart.
    Bench(Box<ostinato_bench::cli::BenchArgs>),
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
    use std::fmt::Write;
    match c {
        Command::Devices => emit(&ostinato_bench::devices::describe()),
        Command::Plan { file, json, explain, cuda, pdl, shape, max_lanes } => {
            let f = file::load(&file, run::IMPL_KEYS).map_err(|e| e.to_string())?;
            let plan = Plan::compile_with(&f.graph, PlanOptions { max_lanes }).map_err(|e| format!("{}: {e}", file.display()))?;
            let mut out = String::new();
            if json {
                let _ = writeln!(out, "{}", plan.to_json());
            } else {
                let _ = writeln!(
                    out,
                    "{}: {} nodes, {} edges, {} lanes, fingerprint {:016x}",
                    file.display(),
                    plan.node_count(),
                    plan.edges().len(),
                    plan.lanes().count(),
                    plan.fingerprint()
                );
                for e in plan.edges() {
                    let kinds = if e.hazards.is_empty() { "explicit".to_string() } else { e.hazards.names().join("+") };
                    let _ = writeln!(out, "  {} -> {}  {kinds}{}", e.from, e.to, if e.explicit && !e.hazards.is_empty() { " (explicit)" } else { "" });
                }
            }
            if explain {
                out.push_str(&plan.explain());
            }
            if cuda {
                let capable: Vec<bool> =
                    f.impls.iter().map(|i| i.get("cuda").is_some_and(|s| s.pdl().unwrap_or_else(|| s.source().starts_with("builtin")))).collect();
                let low = ostinato_cuda::lower::lower(&plan, &capable, true, policy(pdl, shape));
                out.push_str(&low.describe(&plan));
            }
            emit(&out)
        }
        Command::Run { file, backend, replays, check, dump, dot, threads, mode, pdl, shape, trigger, graph_build, priority, launch, device, max_lanes } => {
            let backend = match backend {
                BackendArg::Host => BackendChoice::Host { threads },
                BackendArg::Cuda => {
                    BackendChoice::Cuda { options: CudaOptions { mode, pdl: policy(pdl, shape), trigger, build: graph_build, priority, launch }, device }
                }
            };
            let r = run::run_file(&file, &RunOptions { backend, replays, check, dump, dot, max_lanes }).map_err(|e| e.to_string())?;
            let mut out = String::new();
            for n in &r.notes {
                let _ = writeln!(out, "{n}");
            }
            let _ = writeln!(
                out,
                "{}: {} nodes, {} edges, {} replays in {:.3} ms{}",
                file.display(),
                r.nodes,
                r.edges,
                r.replays,
                r.seconds * 1e3,
                if r.checked { ", check passed (bitwise equal to the host serial oracle)" } else { "" }
            );
            emit(&out)
        }
        Command::Bench(args) => ostinato_bench::cli::bench(*args),
    }
}

fn policy(mode: PdlMode, shape: ShapeMode) -> PdlPolicy {
    PdlPolicy { shape, ..PdlPolicy::new(mode) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_own_lists_are_names_the_library_parses() {
        assert!(RUN_TRIGGERS.iter().all(|n| PdlTrigger::parse(n).is_some() && ostinato_bench::cli::TRIGGERS.contains(n)));
        assert!(RUN_GRAPH_BUILDS.iter().all(|n| GraphBuild::parse(n).is_some() && ostinato_bench::cli::GRAPH_BUILDS.contains(n)));
    }

    #[test]
    fn run_takes_the_librarys_values_and_refuses_unlisted_names() {
        let cli = Cli::try_parse_from([
            "ostinato",
            "run",
            "g.toml",
            "--mode",
            "eager",
            "--pdl",
            "off",
            "--trigger",
            "entry",
            "--graph-build",
            "in-order",
            "--priority",
            "high",
        ]);
        let Ok(Cli { command: Command::Run { mode, pdl, trigger, graph_build, priority, shape, .. } }) = cli else { panic!("parses") };
        assert_eq!(
            (mode, pdl, trigger, graph_build, priority, shape),
            (ExecMode::Eager, PdlMode::Off, PdlTrigger::AtEntry, GraphBuild::InOrder, StreamPriority::High, ShapeMode::Auto)
        );
        // An investigation-only build the library parses but `run` does not list.
        let err = Cli::try_parse_from(["ostinato", "run", "g.toml", "--graph-build", "bulk-one-call"]).err().expect("refused").to_string();
        assert!(err.contains("bulk-one-call") && err.contains("in-order"), "{err}");
    }
}
