//! The matrix's families, one module each, and the one list that registers them ([`FAMILIES`]): a new
//! family is a module with a `rows(&Scope)` function and a line in that list.
//!
//! The dispatch families (grid, chain fusion, fan-out/fan-in, decode-shaped, Llama) run the backends'
//! built-ins or the Llama pack; the kernel families (geometry, reduction, two-stage reduction, memory
//! latency, packed dot, quantized GEMV) run the benchmark's own pack (`crate::pack`) in rows of ten ops,
//! serial (each op a read-modify-write of one output) and independent (each op its own slice). The
//! tiles family runs the pack's row and tile kernels in chains whose launches declare per-block tile
//! maps (block-local, sparse and whole-node relations).

pub mod decode;
pub mod dot;
pub mod fan;
pub mod fusion;
pub mod gemv;
pub mod geometry;
pub mod grid;
pub mod llama;
pub mod memory;
pub mod quant;
pub mod reduction;
pub mod tiles;
pub mod tiles_twins;
pub mod two_stage;

use crate::workload::Workload;
use crate::BenchBackend;

/// What a family's rows depend on: the backend the matrix runs on, `--quick`, and the study options
/// that change rows.
#[derive(Clone, Debug)]
pub struct Scope<'a> {
    pub backend: BenchBackend,
    pub quick: bool,
    /// Replaces the block counts of the 941-dispatch grid rows.
    pub grid_blocks: Option<&'a [u32]>,
    /// Replaces the consumer counts of the fan rows.
    pub fan_widths: Option<&'a [usize]>,
    /// Replaces every row's replays per sample.
    pub replays: Option<usize>,
}

impl Scope<'_> {
    /// A row's replays per sample: the configured count, else `default`.
    pub fn replays(&self, default: usize) -> usize {
        self.replays.unwrap_or(default)
    }
}

/// A family: its name in messages and the rows it makes for a scope (possibly none).
pub struct Family {
    pub name: &'static str,
    pub rows: fn(&Scope) -> Vec<Workload>,
}

/// Every family of the matrix, in the order their rows run.
pub const FAMILIES: &[Family] = &[
    Family { name: "dispatch-grid", rows: grid::rows },
    Family { name: "chain fusion", rows: fusion::rows },
    Family { name: "fan-out/fan-in", rows: fan::rows },
    Family { name: "decode-shaped", rows: decode::rows },
    Family { name: "llama decode", rows: llama::rows },
    Family { name: "geometry", rows: geometry::rows },
    Family { name: "reduction", rows: reduction::rows },
    Family { name: "two-stage reduction", rows: two_stage::rows },
    Family { name: "memory latency", rows: memory::rows },
    Family { name: "packed dot", rows: dot::rows },
    Family { name: "quantized gemv", rows: gemv::rows },
    Family { name: "tiles", rows: tiles::rows },
];

/// The matrix: every family's rows for `scope`, in [`FAMILIES`] order.
pub fn matrix(scope: &Scope) -> Vec<Workload> {
    FAMILIES.iter().flat_map(|f| (f.rows)(scope)).collect()
}

/// Every kernel of the bench pack, once each (geometry for one 1-D workgroup shape; its WGSL differs
/// per shape only in the workgroup size): what the pack's contract test compiles and checks.
pub fn pack_kernels() -> Vec<crate::pack::PackKernel> {
    let mut out = vec![geometry::kernel([256, 1, 1])];
    for v in reduction::Variant::ALL {
        for e in reduction::Elem::BOTH {
            out.push(reduction::kernel(v, e));
        }
    }
    for e in reduction::Elem::BOTH {
        out.push(two_stage::partials(e));
        out.push(two_stage::final_kernel(e));
    }
    out.extend(memory::LOADS.iter().map(|&l| memory::kernel(l)));
    out.extend(dot::Packed::ALL.iter().map(|&t| dot::kernel(t)));
    out.extend(quant::Format::ALL.iter().map(|&f| gemv::kernel(f)));
    out.extend(tiles_twins::rms_kernels());
    out.extend([tiles_twins::softmax_kernel(), tiles_twins::gemv_kernel(), tiles_twins::spread_kernel(256), tiles_twins::gather_kernel(256)]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(backend: BenchBackend, quick: bool) -> Scope<'static> {
        Scope { backend, quick, grid_blocks: None, fan_widths: None, replays: None }
    }

    #[test]
    fn the_gpu_matrix_has_200_rows_and_every_matrix_every_kernel_family_in_both_modes() {
        let full = matrix(&scope(BenchBackend::Cuda, false));
        assert!(full.len() >= 200, "{} rows", full.len());
        for f in FAMILIES {
            assert!(!(f.rows)(&scope(BenchBackend::Cuda, false)).is_empty(), "{} has no GPU row", f.name);
        }
        for (backend, quick) in [(BenchBackend::Cuda, true), (BenchBackend::Host, true), (BenchBackend::Host, false)] {
            let rows = matrix(&scope(backend, quick));
            for kind in ["geometry", "reduction", "two-stage reduction", "memory latency", "packed dot", "quantized gemv"] {
                for mode in ["serial", "independent"] {
                    let fam = format!("{kind} {mode}");
                    assert!(rows.iter().any(|w| w.family == fam), "{backend:?} quick={quick}: no {fam} row");
                }
            }
        }
        // Ten ops per kernel-family row: one dispatch each (two for the two-stage reduction).
        for w in full.iter().filter(|w| w.protocol.is_some()) {
            let per_op = if w.family.starts_with("two-stage") { 2 } else { 1 };
            assert_eq!(w.dispatches, crate::workload::OPS * per_op, "{}", w.id);
            assert_eq!(w.independent, w.family.ends_with("independent"), "{}", w.id);
        }
    }
}
