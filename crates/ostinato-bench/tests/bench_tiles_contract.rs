//! The matrix's tiled rows without a GPU (NVRTC only; skipped with a message where it is not found):
//!
//! - every tile map a row declares on a bench-pack kernel is *verified* from the kernel's PTX (the
//!   check the CUDA backend runs at instantiate: `ostinato_cuda_code::tilemaps`), none merely vouched;
//!   the dispatch-grid rows' maps on the built-in `add_one` hold against its stated footprint (the
//!   core's check at instantiate);
//! - what the CUDA lowering does with each row, from the same certificates and policies the backend
//!   uses (`ostinato::fusion::groups` over bodies certified from the PTX, `ostinato_cuda::handoff::choose`
//!   over certified hand-off bodies): the block-local chains fuse into one kernel of their grid, the
//!   sparse chain's gathers wait tile by tile, the dense control row changes nothing; and each fused
//!   kernel compiles in the backend's three builds and passes the kernel contract against its fused
//!   signature. Prints each row's decisions (`-- --nocapture`).

use std::collections::BTreeMap;

use ostinato::fusion::{all_groups, barriers, Fusable, FuseKey, FusionMode};
use ostinato::{NodeId, NodeOp, Plan, PlanOptions};
use ostinato_bench::workload::{Kernels, Workload};
use ostinato_bench::BenchBackend;
use ostinato_cuda::fusion::components::generate_components;
use ostinato_cuda::handoff::{choose, HandoffMode};
use ostinato_cuda_code::compile;
use ostinato_cuda_code::contract::{module_info, read_ptx, verify};
use ostinato_cuda_code::ptx::{fused_body, handoff_body};
use ostinato_cuda_code::tilemaps::{KernelCode, TileChecks};
use ostinato_cuda_code::PdlTrigger;

/// The GPU matrix's rows whose launches declare tile maps (the Llama rows' are the Llama pack's to
/// check, in `ostinato-llama`'s tests).
fn tiled_rows() -> Vec<Workload> {
    ostinato_bench::matrix::matrix(BenchBackend::Cuda, false, None, None, None)
        .into_iter()
        .filter(|w| w.graph.nodes().iter().any(|n| !n.tiles.is_empty()))
        .collect()
}

fn nvrtc_or_skip(test: &str) -> bool {
    match ostinato_cuda_code::nvrtc::version() {
        Ok(_) => true,
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            false
        }
    }
}

#[test]
fn every_tile_map_of_the_gpu_matrix_is_verified_from_the_code() {
    if !nvrtc_or_skip("every_tile_map_of_the_gpu_matrix_is_verified_from_the_code") {
        return;
    }
    let rows = tiled_rows();
    let ids: Vec<&str> = rows.iter().map(|w| w.id.as_str()).collect();
    for want in ["grid/serial/n941/b128", "grid/indep/n941/b8192", "tiles/rms/", "tiles/softmax/", "tiles/sparse/", "tiles/dense/"] {
        assert!(ids.iter().any(|id| id.starts_with(want)), "no tiled row {want} in {ids:?}");
    }
    let mut verified = 0;
    for w in &rows {
        let plan = Plan::compile(&w.graph).unwrap();
        let g = plan.graph();
        match &w.kernels {
            Kernels::Builtins => {
                for v in 0..g.nodes().len() {
                    let v = NodeId(v as u32);
                    let NodeOp::Kernel { kernel, .. } = &g.node(v).op else { continue };
                    let name = g.kernel(*kernel).name.clone();
                    ostinato::builtins::check_launch(g, v, &name, &|s| g.slots()[s.index()].initial).unwrap_or_else(|e| panic!("{}: {e}", w.id));
                }
            }
            Kernels::Pack(pack) => {
                let compiled: Vec<_> = pack
                    .iter()
                    .map(|k| compile::compile(&k.cuda.source, k.cuda.code.as_deref().unwrap_or_default(), "sm_90", PdlTrigger::AfterWait).unwrap())
                    .collect();
                let modules: Vec<_> = compiled.iter().map(|c| module_info(&c.ptx, &[])).collect();
                let code: Vec<KernelCode> = pack
                    .iter()
                    .zip(&compiled)
                    .zip(&modules)
                    .map(|((k, c), m)| KernelCode::Ptx { module: m, ptx: &c.ptx, entry: &k.sig.name, name: &k.cuda.source })
                    .collect();
                let checks = TileChecks::check_graph(g, &code).unwrap_or_else(|e| panic!("{}: {e}", w.id));
                let maps: usize = g.nodes().iter().map(|n| n.tiles.len()).sum();
                assert_eq!(checks.accepted.len(), maps, "{}: every map accepted", w.id);
                let vouched: Vec<_> = checks.accepted.iter().filter(|a| a.vouched.is_some()).collect();
                assert!(vouched.is_empty(), "{}: maps accepted only as vouched: {vouched:?}", w.id);
                verified += maps;
            }
            // The Llama pack's maps are checked by its own tests (`ostinato-llama`).
            Kernels::Llama => {}
        }
    }
    eprintln!("{verified} tile maps of {} tiled rows verified from their PTX", rows.len());
}

/// Per distinct CUDA code of a row's pack: its PTX as bodies see it.
fn body_ptx(pack: &[ostinato_bench::pack::PackKernel]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for k in pack {
        let code = k.cuda.code.as_deref().unwrap_or_default().to_string();
        if let std::collections::btree_map::Entry::Vacant(e) = out.entry(code) {
            let c = compile::compile("fused-bodies", &ostinato_cuda::fusion::source::check_source(e.key()), "compute_90", PdlTrigger::Disabled).unwrap();
            e.insert(c.ptx);
        }
    }
    out
}

#[test]
fn the_tiled_rows_fuse_hand_off_or_stay_whole_nodes_as_their_relations_say() {
    if !nvrtc_or_skip("the_tiled_rows_fuse_hand_off_or_stay_whole_nodes_as_their_relations_say") {
        return;
    }
    let (mut fused_builds, mut failures) = (0, Vec::new());
    for w in tiled_rows() {
        let Kernels::Pack(pack) = &w.kernels else { continue };
        let plan = Plan::compile_with(&w.graph, PlanOptions { max_lanes: 4 }).unwrap();
        let g = plan.graph();
        let ptx = body_ptx(pack);
        let codes: Vec<&String> = ptx.keys().collect();
        let code_of = |v: usize| match &g.nodes()[v].op {
            NodeOp::Kernel { kernel, launch, .. } => {
                let k = &pack[kernel.index()];
                let code = k.cuda.code.as_deref().unwrap_or_default().to_string();
                Some((k, code, *launch))
            }
            _ => None,
        };
        // Fusion, as the backend keys its bodies: block shape, grid, and the module (one per code).
        let fusable: Vec<Option<Fusable>> = (0..g.nodes().len())
            .map(|v| {
                let (k, code, launch) = code_of(v)?;
                let body = fused_body(&ptx[&code], &k.sig.name).ok()?;
                let source = codes.iter().position(|c| **c == code)?;
                Some(Fusable {
                    key: FuseKey { block: launch.block, grid: launch.grid, source },
                    uses_shared: body.uses_shared,
                    alone: body.block_barrier.is_some(),
                })
            })
            .collect();
        // As the backend takes them: groups of components first, then the block-local ones.
        let (components, fused): (Vec<_>, Vec<_>) = all_groups(&plan, &fusable, FusionMode::Auto).into_iter().partition(|gr| gr.components.is_some());
        // Hand-offs, on the plan as it runs unfused (the rows that fuse leave one node).
        let bodies: Vec<Option<bool>> = (0..g.nodes().len())
            .map(|v| code_of(v).and_then(|(k, code, _)| handoff_body(&ptx[&code], &k.sig.name).ok()).map(|b| b.noncoherent.is_empty()))
            .collect();
        let wrappable: Vec<bool> = bodies.iter().map(Option::is_some).collect();
        let consumable: Vec<bool> = bodies.iter().map(|b| *b == Some(true)).collect();
        let auto = choose(&plan, &wrappable, &consumable, HandoffMode::Auto).consumers();
        let on = choose(&plan, &wrappable, &consumable, HandoffMode::On).consumers();
        let n = g.nodes().len();
        let sizes: Vec<usize> = fused.iter().map(|gr| gr.len()).collect();
        let by_components: Vec<(usize, u32)> = components.iter().map(|gr| (gr.len(), gr.components.as_ref().map_or(0, |c| c.count))).collect();
        eprintln!(
            "{}: {n} nodes; fusion auto: groups of {sizes:?}, (nodes, blocks) by components {by_components:?}; hand-off consumers unfused: auto {auto}, on {on}",
            w.id
        );
        let kind = w.id.split('/').nth(1).unwrap_or_default();
        match kind {
            "rms" | "softmax" => {
                assert_eq!(sizes, vec![n], "{}: one fused kernel of its grid", w.id);
                assert_eq!(fused[0].lanes.len(), 1, "{}: a multi-block group is one run", w.id);
                assert!(by_components.is_empty(), "{}", w.id);
            }
            "sparse" => {
                assert!(fused.is_empty(), "{}: the spread and the gather have other grids", w.id);
                // One kernel of a block per gather block, each running its 16 spread blocks and its
                // gather block round by round.
                assert_eq!(by_components, [(n, 64)], "{}", w.id);
                // `auto` hands off nowhere (measured on this row: docs/fences.md); under `on` every
                // node but the first waits tile by tile.
                assert_eq!((auto, on), (0, n - 1), "{}", w.id);
            }
            "dense" => assert_eq!((sizes.len(), by_components.len(), auto, on), (0, 0, 0, 0), "{}: nothing changes", w.id),
            other => panic!("{}: an unexpected tiles row kind {other}", w.id),
        }
        // Each kernel of components as the backend generates it: compiled in its three builds, and its
        // contract.
        for (gi, gr) in components.iter().enumerate() {
            let Some((k, code, _)) = code_of(gr.lanes[0][0].index()) else { continue };
            let uses_shared = |v: NodeId| fusable[v.index()].is_some_and(|f| f.uses_shared);
            let bars = barriers(&plan, &gr.lanes[0], uses_shared);
            let f = generate_components(&plan, gr, &format!("ostinato_fused_c{gi}"), &code, &bars, &uses_shared, &|id| g.kernel(id).name.clone());
            assert_eq!(f.launch.grid, gr.key.grid, "{}: a block per component", w.id);
            assert!(f.source.len() < 16 * 1024, "{}: the rounds compile to a loop ({} bytes of source)", w.id, f.source.len());
            failures.extend(compile_and_check(&f, &w.id, &k.sig.name));
            fused_builds += 3;
        }
        // Each fused kernel as the backend generates it: compiled in its three builds, and its contract.
        for (gi, gr) in fused.iter().enumerate() {
            let first = gr.lanes[0][0].index();
            let Some((k, code, _)) = code_of(first) else { continue };
            let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(&plan, l, |v| fusable[v.index()].is_some_and(|f| f.uses_shared))).collect();
            // Unstaged, and staged as if every map were verified and every access plain (the rows'
            // maps are verified on the GPU: `gpu_tiles`).
            let staging = ostinato_cuda::fusion::source::Staging {
                bodies: ostinato_cuda::fusion::stage::Bodies { plain: &|_, _| true, attributed: &|_| true },
                budget: ostinato_cuda::fusion::stage::STAGE_BUDGET_BYTES,
            };
            let generate =
                |st| ostinato_cuda::fusion::source::generate(&plan, gr, &format!("ostinato_fused_{gi}"), &code, &bars, &|id| g.kernel(id).name.clone(), st);
            let (f, staged) = (generate(None), generate(Some(&staging)));
            // The softmax row's 32 KiB of rows a block fit the staging budget; the RMS row's 64 KiB
            // of x (and of h) a block do not.
            let want: &[(usize, u64)] = if kind == "softmax" { &[(0, 32 * 1024)] } else { &[] };
            assert_eq!(staged.staged.iter().map(|t| (t.param, t.len)).collect::<Vec<_>>(), want, "{}", w.id);
            assert_eq!(f.launch.grid, gr.key.grid, "{}: the fused kernel has its nodes' grid", w.id);
            for f in [&f, &staged] {
                failures.extend(compile_and_check(f, &w.id, &k.sig.name));
                fused_builds += 3;
            }
        }
    }
    assert!(fused_builds >= 9, "{fused_builds} fused builds");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A generated kernel compiled in the backend's three builds, each passing the kernel contract
/// against its fused signature: what failed.
fn compile_and_check(f: &ostinato_cuda::fusion::source::FusedKernel, row: &str, kernel: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry, PdlTrigger::Disabled] {
        let c = match compile::compile(&f.sig.name, &f.source, "sm_90", trigger) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{row} ({kernel}, {}): {e}", trigger.as_str()));
                continue;
            }
        };
        match read_ptx(&c.ptx, &f.sig.name, &[], f.entry, &f.sig) {
            Ok(mut report) => {
                if let Err(e) = verify(&f.sig, &mut report) {
                    failures.push(format!("{row}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{row}: {e}")),
        }
    }
    failures
}
