//! The decode rows' kernel table: each kernel of the step timed alone and inside an eager chain, its
//! bandwidth against the device's peak memory bandwidth (its memory clock times its bus width, as the
//! driver reports them), and the sum of the kernels alone — the part of a step no dispatch scheme can
//! remove; the step minus that sum is what dispatch costs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::arms::{baseline_kernels, ArmKind, RowMemory};
use super::baseline::Baseline;
use super::workload::Workload;

/// One kernel of the step (all its launches).
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct KernelTime {
    pub kernel: String,
    pub launches: usize,
    /// Bytes one launch reads from weights and cache.
    pub bytes: u64,
    /// Median over its launches of each launch's median time alone, less the launch floor.
    pub alone_us: f64,
    /// The same, inside the eager chain.
    pub chained_us: f64,
    /// `bytes / alone_us`, in TB/s, and as a fraction of [`DecodeProfile::peak_tb_s`] (none where the
    /// peak is not known).
    pub alone_tb_s: f64,
    pub alone_of_peak: Option<f64>,
    pub chained_tb_s: f64,
}

/// What a decode row reports beside its arms.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct DecodeProfile {
    /// Bytes of weights and KV cache one step reads.
    pub bytes_per_step: u64,
    pub kernels: Vec<KernelTime>,
    /// Every launch's time alone, summed: the step's kernel time without any dispatch cost.
    pub sum_alone_us: f64,
    /// An empty kernel's time measured the same way (two events around one launch on an idle GPU),
    /// taken off every `alone` time.
    pub launch_floor_us: f64,
    /// Every launch's time in the eager chain, summed.
    pub sum_chained_us: f64,
    /// The device's peak memory bandwidth (TB/s) the rows are measured against, and how it was derived;
    /// none where the driver reports no memory clock or bus width.
    pub peak_tb_s: Option<f64>,
    pub peak_source: String,
}

/// Times every kernel of `w` (a decode row) on the row's memory, `rounds` times.
pub fn profile(
    device: &ostinato_cuda::Device,
    modules: &ostinato_cuda::BuiltinModules,
    backend: &ostinato_cuda::CudaBackend,
    w: &Workload,
    memory: &Arc<RowMemory>,
    init: &[Option<Vec<u8>>],
    rounds: usize,
) -> Result<DecodeProfile, String> {
    let (config, pos) = w.model.ok_or("not a decode row")?;
    let mut base = Baseline::new(device, w, baseline_kernels(modules, backend, w, ArmKind::Eager)?, ArmKind::Eager, memory, init)?;
    let fill = ostinato::KernelSig::new("ostinato_fill")
        .buffer("dst", ostinato::Access::Write)
        .scalar("value", ostinato::ScalarType::U32)
        .scalar("n_words", ostinato::ScalarType::U64);
    let empty = modules.plain_kernel("ostinato_fill", &fill).map_err(|e| e.to_string())?;
    let (alone, chained, launch_floor_us) = base.time_nodes(w, rounds, &empty)?;
    let g = &w.graph;
    let info = device.info();
    let peak_tb_s = info.memory_peak_bytes_per_s().map(|b| b / 1e12);
    let mut out = DecodeProfile {
        peak_tb_s,
        peak_source: format!("{} MHz memory clock × {}-bit bus, two transfers a clock", info.mem_clock_khz / 1000, info.mem_bus_bits),
        bytes_per_step: w.bytes_per_replay.unwrap_or(0),
        sum_alone_us: alone.iter().sum(),
        sum_chained_us: chained.iter().sum(),
        launch_floor_us,
        ..Default::default()
    };
    for (ki, sig) in g.kernels().iter().enumerate() {
        let nodes: Vec<usize> =
            (0..g.nodes().len()).filter(|&i| matches!(&g.nodes()[i].op, ostinato::NodeOp::Kernel { kernel, .. } if kernel.index() == ki)).collect();
        if nodes.is_empty() {
            continue;
        }
        let median = |v: &[f64]| {
            let mut m: Vec<f64> = nodes.iter().map(|&i| v[i]).collect();
            m.sort_by(f64::total_cmp);
            m[m.len() / 2]
        };
        let (a, c) = (median(&alone), median(&chained));
        let bytes = config.kernel_bytes(&sig.name, pos).unwrap_or(0);
        let tb = |us: f64| bytes as f64 / (us * 1e-6) / 1e12;
        out.kernels.push(KernelTime {
            kernel: sig.name.clone(),
            launches: nodes.len(),
            bytes,
            alone_us: a,
            chained_us: c,
            alone_tb_s: tb(a),
            alone_of_peak: peak_tb_s.map(|p| tb(a) / p),
            chained_tb_s: tb(c),
        });
    }
    Ok(out)
}

/// The decode rows' section of `REPORT.md`: per arm µs per step, effective bandwidth, the share of the
/// device's bandwidth floor and the dispatch overhead (step − Σ kernels alone); then each row's kernel table.
pub fn markdown(rows: &[crate::RowResult]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in rows {
        let Some(decode) = &r.decode else { continue };
        let _ = writeln!(s, "\n## {}: µs per step, bandwidth, dispatch overhead\n", r.id);
        let p = match decode {
            Ok(p) => p,
            Err(e) => {
                let _ = writeln!(s, "kernel table failed: {e}");
                continue;
            }
        };
        let (peak_head, floor) = match p.peak_tb_s {
            Some(peak) => (
                format!("of {peak:.2} TB/s"),
                format!("{:.0} µs at the device's {peak:.2} TB/s ({})", p.bytes_per_step as f64 / (peak * 1e12) * 1e6, p.peak_source),
            ),
            None => ("of peak".to_string(), "the device's peak bandwidth is not known (its driver reports no memory clock or bus width)".to_string()),
        };
        let share = |tb: f64| p.peak_tb_s.map_or("—".to_string(), |peak| format!("{:.0}%", 100.0 * tb / peak));
        let _ = writeln!(
            s,
            "{:.3} GB per step (weights with the LM head, KV cache rows 0..=pos; a greedy run's mean over its positions, its kernels timed at the first): {floor}. Kernels alone sum to {:.1} µs (each launched by itself between two events, less the {:.2} µs an empty kernel takes so); {:.1} µs in an eager chain.\n",
            p.bytes_per_step as f64 / 1e9,
            p.sum_alone_us,
            p.launch_floor_us,
            p.sum_chained_us
        );
        let _ = writeln!(s, "| arm | µs per step | TB/s | {peak_head} | step − Σ alone | share of step |\n|---|---|---|---|---|---|");
        for a in &r.arms {
            if let Some(m) = a.metric() {
                let step = m.median * r.dispatches_per_replay as f64;
                let tb = p.bytes_per_step as f64 / (step * 1e-6) / 1e12;
                let over = step - p.sum_alone_us;
                let _ = writeln!(s, "| {} | {step:.1} | {tb:.2} | {} | {over:.1} µs | {:.1}% |", a.arm, share(tb), 100.0 * over / step);
            }
        }
        let _ = writeln!(
            s,
            "\n| kernel | launches | MB per launch | µs alone | TB/s alone | {peak_head} | µs in chain | TB/s in chain |\n|---|---|---|---|---|---|---|---|"
        );
        for k in &p.kernels {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} | {:.2} |",
                k.kernel,
                k.launches,
                k.bytes as f64 / 1e6,
                k.alone_us,
                k.alone_tb_s,
                share(k.alone_tb_s),
                k.chained_us,
                k.chained_tb_s
            );
        }
    }
    s
}
