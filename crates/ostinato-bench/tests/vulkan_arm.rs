//! The benchmark's Vulkan arms on whatever Vulkan device is found (lavapipe in CI): every family's
//! workload — add_one chains, independent chains, fan-out/fan-in, the decode stack with its position
//! slot, the chain-fusion rows, and every kernel family of the bench pack (geometry in 1-, 2- and 3-D
//! shapes, the four reductions and the two-stage one in f32 and u32, memory latency, the packed dots,
//! the quantized GEMVs), serial and independent, and the tiles family's chains (block-local, sparse and
//! dense tile relations) — passes the same oracle check the benchmark applies to
//! every sample, on the raw baseline and on every Ostinato Vulkan arm (the replay orderings, lanes,
//! fusion off; where the workload applies to it). Skips without Vulkan.

use ostinato_bench::arms::{self, Arm, ArmKind};
use ostinato_bench::families::decode::{decode, DecodeShape};
use ostinato_bench::families::{dot, fan, fusion, gemv, geometry, grid, memory, quant, reduction, tiles, two_stage};
use ostinato_bench::matrix::{compare, init_bytes};
use ostinato_bench::pack::PackKernel;
use ostinato_bench::vulkan::{OstinatoVulkan, VulkanArm, VulkanRowMemory};
use ostinato_bench::workload::{Kernels, Mode, Workload};

#[test]
fn every_family_matches_the_oracle_on_vulkan() {
    let ctx = match ostinato_vulkan::Context::open() {
        Ok(c) => c,
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP every_family_matches_the_oracle_on_vulkan: {e}"));
            return;
        }
    };
    let mut rows = vec![
        grid::dispatch_grid(50, 1, false, 1),
        grid::dispatch_grid(20, 4, true, 1),
        fan::fan(4, 1024, 1),
        fan::fan(16, 1024, 1),
        decode(DecodeShape { layers: 2, ..DecodeShape::HOST_SMALL }, 3),
        fusion::fusion(64, 256, 256, false, 2),
        fusion::fusion(16, 256, 256, true, 2),
        // Tiled rows: rows whose length is no multiple of the 32 lanes, and a short sparse and dense chain.
        tiles::rms_chain(64, 96, 2, 2),
        tiles::softmax_chain(32, 100, 3, 2),
        tiles::sparse_chain(4, 8, 64, 3, 2),
        tiles::dense_chain(64, 4, 2),
    ];
    rows.extend(kernel_family_rows());
    eprintln!("vulkan device {}: packed integer dot product {}, f32 atomic add {}", ctx.name, ctx.integer_dot_product(), ctx.float32_atomic_add());
    for w in &rows {
        eprintln!("{}", w.id);
        let init = init_bytes(w);
        let want = arms::oracle(w, &init).unwrap();
        // Every arm on the row's one set of buffers, as the benchmark runs them.
        let memory = VulkanRowMemory::with_inputs(&ctx, &w.graph, &init).unwrap();
        let raw: Box<dyn Arm> = Box::new(VulkanArm::new(&ctx, w, &memory, &init).unwrap_or_else(|e| panic!("{}: {e}", w.id)));
        let mut arms: Vec<(&str, Box<dyn Arm>)> = vec![("raw", raw)];
        for kind in ArmKind::VULKAN {
            let Some(options) = kind.vulkan_options() else { continue };
            match OstinatoVulkan::new(&ctx, w, &memory, &init, options) {
                Ok(a) => arms.push((kind.name(), Box::new(a))),
                // The decode stack launches its norm with 1,024 threads; the WGSL twin's workgroup is 256.
                Err(ostinato_vulkan::VkError::NotApplicable(m)) if w.id.starts_with("decode") => assert!(m.contains("workgroup"), "{m}"),
                Err(e) => panic!("{} {}: {e}", w.id, kind.name()),
            }
        }
        // Samples alternate between the arms: each starts from what the previous arm left in the
        // shared buffers, and must reset what it reads.
        for sample in 0..2 {
            for (name, arm) in &mut arms {
                let s = arm.sample(w, &init).unwrap();
                compare(&w.check, &init, &want, &s.outputs).unwrap_or_else(|e| panic!("{} {name} sample {sample} on {}: {e}", w.id, ctx.name));
            }
        }
    }
}

/// The bench pack's families at sizes lavapipe runs in seconds, serial and independent: every kernel,
/// the shapes that take a kernel's one-block and multi-block paths.
fn kernel_family_rows() -> Vec<Workload> {
    let mut rows = Vec::new();
    for mode in Mode::BOTH {
        for shape in [
            geometry::Shape::linear(64, 1),
            geometry::Shape::linear(256, 7),
            geometry::Shape { block: [16, 4, 1], grid: [3, 2, 1] },
            geometry::Shape { block: [8, 8, 4], grid: [4, 4, 4] },
            geometry::Shape { block: [4, 4, 4], grid: [1, 1, 1] },
        ] {
            rows.push(geometry::row(shape, mode, 1));
        }
        for variant in reduction::Variant::ALL {
            for elem in reduction::Elem::BOTH {
                for n in [256, 10_000] {
                    rows.push(reduction::row(variant, elem, n, mode, 1));
                }
            }
        }
        for elem in reduction::Elem::BOTH {
            rows.push(two_stage::row(elem, 20_000, mode, 2));
        }
        // One block (the fused chains') and several.
        for (loads, blocks) in [(1, 2), (16, 2), (16, 1)] {
            rows.push(memory::row(loads, blocks, 1 << 16, mode, 1));
        }
        for t in dot::Packed::ALL {
            for n in [256, 300] {
                rows.push(dot::row(t, n, mode, 1));
            }
        }
        for f in quant::Format::ALL {
            for r in [8, 16] {
                rows.push(gemv::row(f, r, 512, mode, 1));
            }
        }
    }
    // The WGSL without `dot4I8Packed` and without f32 atomic adds (what a device without the packed
    // integer dot product or f32 atomics runs), on this device too.
    let plain_dot = [dot::row(dot::Packed::I8, 300, Mode::Serial, 1), gemv::row(quant::Format::Q6K, 16, 512, Mode::Independent, 1)];
    let plain_atomics = [reduction::Variant::Atomic, reduction::Variant::Warp, reduction::Variant::Tree]
        .map(|v| reduction::row(v, reduction::Elem::F32, 10_000, Mode::Independent, 1));
    for (w, without) in plain_dot.into_iter().map(|w| (w, "dot4I8Packed")).chain(plain_atomics.into_iter().map(|w| (w, "atomic<f32>"))) {
        rows.push(as_plain(w, without));
    }
    rows
}

/// `w` with its pack's WGSL as written for a device without `without` (`dot4I8Packed`, `atomic<f32>`).
fn as_plain(mut w: Workload, without: &str) -> Workload {
    if let Kernels::Pack(p) = &w.kernels {
        let plain: Vec<PackKernel> = p
            .iter()
            .cloned()
            .map(|mut k| {
                k.wgsl.packed_dot = None;
                k.wgsl.float_atomic_add = None;
                k
            })
            .collect();
        w.kernels = Kernels::Pack(plain.into());
    }
    w.id += &format!(" (without {without})");
    w
}

/// On Vulkan the dispatch-grid rows' maps are `add_one`'s own footprint, so a multi-block chain runs as
/// one dispatch of its grid (four, one per chain, for the independent rows); the tiles family's row
/// chains, whose WGSL reduces a row in workgroup memory behind barriers, fuse the same way on maps
/// verified from that WGSL; the sparse chain's maps are verified too, but Vulkan has no hand-offs, so
/// its nodes run one dispatch each. Skips without Vulkan.
#[test]
fn the_tiled_grid_and_row_chains_fuse_on_vulkan_and_the_sparse_chain_runs_node_by_node() {
    use ostinato::{Backend, Plan};
    let test = "the_tiled_grid_and_row_chains_fuse_on_vulkan_and_the_sparse_chain_runs_node_by_node";
    let ctx = match ostinato_vulkan::Context::open() {
        Ok(c) => c,
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            return;
        }
    };
    for (w, fused, dispatches) in [
        (grid::dispatch_grid(50, 4, false, 1), 50, 1),
        (grid::dispatch_grid(20, 4, true, 1), 80, 4),
        (tiles::rms_chain(64, 96, 2, 1), 6, 1),
        (tiles::softmax_chain(64, 96, 3, 1), 3, 1),
        (tiles::sparse_chain(4, 8, 64, 3, 1), 0, 6),
    ] {
        let plan = Plan::compile(&w.graph).unwrap();
        let backend = ostinato_vulkan::VulkanBackend::with_context(ctx.clone());
        let kernels = ostinato_bench::vulkan::bind_vulkan(&backend, &w, &plan).unwrap();
        let exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (fused, dispatches), "{}", w.id);
        assert!(exec.tile_maps().iter().all(|m| m.kept.is_ok()), "{}: {:?}", w.id, exec.tile_maps());
    }
}
