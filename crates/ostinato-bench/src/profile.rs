//! The decode rows' kernel table: each kernel of the step timed alone and inside an eager chain, its
//! bandwidth against the 4.8 TB/s of the H200's HBM3e, and the sum of the kernels alone — the part of
//! a step no dispatch scheme can remove; the step minus that sum is what dispatch costs.

use std::sync::Arc;

use serde::Serialize;

use super::arms::{baseline_kernels, ArmKind, RowMemory};
use super::baseline::Baseline;
use super::workload::Workload;

/// The HBM bandwidth the decode rows are measured against (H200: 4.8 TB/s nominal).
pub const HBM_TB_S: f64 = 4.8;

/// One kernel of the step (all its launches).
#[derive(Serialize, Clone, Debug)]
pub struct KernelTime {
    pub kernel: String,
    pub launches: usize,
    /// Bytes one launch reads from weights and cache.
    pub bytes: u64,
    /// Median over its launches of each launch's median time alone, less the launch floor.
    pub alone_us: f64,
    /// The same, inside the eager chain.
    pub chained_us: f64,
    /// `bytes / alone_us`, in TB/s, and as a fraction of [`HBM_TB_S`].
    pub alone_tb_s: f64,
    pub alone_of_peak: f64,
    pub chained_tb_s: f64,
}

/// What a decode row reports beside its arms.
#[derive(Serialize, Clone, Debug, Default)]
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
    let mut out = DecodeProfile {
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
            alone_of_peak: tb(a) / HBM_TB_S,
            chained_tb_s: tb(c),
        });
    }
    Ok(out)
}

/// The decode rows' section of `REPORT.md`: per arm µs per step, effective bandwidth, the share of the
/// 4.8 TB/s floor and the dispatch overhead (step − Σ kernels alone); then each row's kernel table.
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
        let floor_us = p.bytes_per_step as f64 / (HBM_TB_S * 1e12) * 1e6;
        let _ = writeln!(
            s,
            "{:.3} GB per step (weights with the LM head, KV cache rows 0..=pos; a greedy run's mean over its positions, its kernels timed at the first): {floor_us:.0} µs at {HBM_TB_S} TB/s. Kernels alone sum to {:.1} µs (each launched by itself between two events, less the {:.2} µs an empty kernel takes so); {:.1} µs in an eager chain.\n",
            p.bytes_per_step as f64 / 1e9,
            p.sum_alone_us,
            p.launch_floor_us,
            p.sum_chained_us
        );
        let _ = writeln!(s, "| arm | µs per step | TB/s | of {HBM_TB_S} TB/s | step − Σ alone | share of step |\n|---|---|---|---|---|---|");
        for a in &r.arms {
            if let Some(m) = a.metric() {
                let step = m.median * r.dispatches_per_replay as f64;
                let tb = p.bytes_per_step as f64 / (step * 1e-6) / 1e12;
                let over = step - p.sum_alone_us;
                let _ = writeln!(s, "| {} | {step:.1} | {tb:.2} | {:.0}% | {over:.1} µs | {:.1}% |", a.arm, 100.0 * tb / HBM_TB_S, 100.0 * over / step);
            }
        }
        let _ = writeln!(
            s,
            "\n| kernel | launches | MB per launch | µs alone | TB/s alone | of {HBM_TB_S} | µs in chain | TB/s in chain |\n|---|---|---|---|---|---|---|---|"
        );
        for k in &p.kernels {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.0}% | {:.2} | {:.2} |",
                k.kernel,
                k.launches,
                k.bytes as f64 / 1e6,
                k.alone_us,
                k.alone_tb_s,
                100.0 * k.alone_of_peak,
                k.chained_us,
                k.chained_tb_s
            );
        }
    }
    s
}
