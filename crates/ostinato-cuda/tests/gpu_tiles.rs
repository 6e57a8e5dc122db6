//! On the GPU: tile-level ordering. Random programs whose launches declare per-block tile maps (1-D
//! and 2-D grids and blocks, views at any offset) run bitwise equal to the host oracle in every fusion,
//! submission and PDL mode; a block-local chain of many blocks runs as one kernel of its grid.

mod common;

use ostinato::{read_roots, write_inits, Access, Arg, Backend, Exec, Graph, KernelSig, Launch, Plan, PlanOptions, Scalar, ScalarType, TileMap, TileRange};
use ostinato_cuda::lower::PdlPolicy;
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, ExecMode, FusionMode, HandoffMode, PdlMode, PdlTrigger, TileStaging};
use ostinato_testkit::random_graphs::host_kernels;
use ostinato_testkit::tiled_graphs::random_tiled_program;

#[test]
fn random_tiled_programs_match_the_host_oracle() {
    let Some(device) = common::device_or_skip("random_tiled_programs_match_the_host_oracle") else { return };
    let configs = [
        (FusionMode::Auto, HandoffMode::Auto, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::On, HandoffMode::On, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::Off, HandoffMode::On, ExecMode::Graph, PdlMode::On),
        (FusionMode::Off, HandoffMode::Off, ExecMode::Graph, PdlMode::On),
        (FusionMode::Auto, HandoffMode::On, ExecMode::Graph, PdlMode::Off),
        (FusionMode::Off, HandoffMode::On, ExecMode::Eager, PdlMode::Auto),
    ];
    // Every configuration stages what it may (the default), and once more fused on without staging.
    let configs =
        configs.map(|c| (c, TileStaging::Auto)).into_iter().chain([((FusionMode::On, HandoffMode::Off, ExecMode::Graph, PdlMode::Auto), TileStaging::Off)]);
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let (mut compared, mut fused, mut nodes, mut handoffs, mut staged) = (0, 0, 0, 0, 0);
    for seed in 0..60u64 {
        let prog = random_tiled_program(seed, 6 + (seed as usize * 11) % 40);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 3;
        let mut host = ostinato_host::HostBackend::serial().instantiate(&plan, host_kernels(&plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        write_inits(&mut host, &prog.inits).unwrap();
        for r in 0..replays {
            host.set_slot(prog.salt_slot, Scalar::u32(5 * r as u32 + seed as u32)).unwrap();
            host.replay().unwrap();
        }
        let want = read_roots(&mut host).unwrap();
        for ((fusion, handoff, mode, pdl), tile_staging) in configs.clone() {
            let options = CudaOptions { fusion, handoff, mode, pdl: PdlPolicy::new(pdl), tile_staging, ..CudaOptions::default() };
            let backend = CudaBackend::with_builtins(&device, &modules, options).unwrap();
            let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name, k).unwrap()).collect();
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            write_inits(&mut exec, &prog.inits).unwrap();
            for r in 0..replays {
                exec.set_slot(prog.salt_slot, Scalar::u32(5 * r as u32 + seed as u32)).unwrap();
                exec.replay().unwrap();
            }
            exec.wait().unwrap();
            assert_eq!(
                read_roots(&mut exec).unwrap(),
                want,
                "seed {seed}: fusion {fusion:?} hand-off {handoff:?} {mode:?} pdl {pdl:?} staging {tile_staging:?} differs from the host oracle"
            );
            staged += exec.staged_tiles().0;
            fused += exec.fused_nodes();
            handoffs += exec.handoffs();
            nodes += plan.node_count();
            compared += 1;
        }
    }
    // Half the configurations fuse nothing (fusion off); the generator's programs fuse 889 of the
    // 9,060 node runs of this loop under the policy itself (`ostinato::fusion::groups`, every kernel
    // fusable: 292 + 305 + 292 in the three fusing configurations), so a twentieth is the floor.
    assert!(fused > nodes / 20, "only {fused} of {nodes} nodes ran fused");
    assert!(handoffs > nodes / 20, "only {handoffs} of {nodes} nodes waited for their producers' tiles");
    eprintln!(
        "compared {compared} tiled CUDA runs bitwise with the host oracle ({fused} of {nodes} nodes fused block by block, {handoffs} handed off tile by tile, {staged} tiles staged in shared memory)"
    );
}

#[test]
fn a_block_local_chain_of_8192_blocks_runs_as_one_kernel_of_its_grid() {
    let Some(device) = common::device_or_skip("a_block_local_chain_of_8192_blocks_runs_as_one_kernel_of_its_grid") else { return };
    for blocks in [128u32, 1024, 8192] {
        let mut g = Graph::new();
        let x = g.add_buffer("x", u64::from(blocks) * 1024).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let row = TileMap::linear(1024, 1024).unwrap();
        for _ in 0..941 {
            g.add_launch_tiled(k, Launch::linear(blocks, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(blocks * 256))], &[("x", row.clone())], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        // Staged (each block's 1 KiB in shared memory for the whole chain) and not: the same bits.
        for (staging, staged) in [(TileStaging::Auto, (1, 1024)), (TileStaging::Off, (0, 0))] {
            let backend = CudaBackend::new(&device, CudaOptions { tile_staging: staging, ..CudaOptions::default() }).unwrap();
            let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (941, 1), "{blocks} blocks: one fused launch");
            assert_eq!(exec.lowering().launches[0].dims.grid, [blocks, 1, 1]);
            assert_eq!(exec.staged_tiles(), staged, "{blocks} blocks, staging {staging:?}");
            // Each element starts at its own index: a block that staged another block's tile, or wrote
            // back to the wrong place, moves some element off its value.
            let init: Vec<u8> = (0..blocks * 256).flat_map(|i| (i as f32).to_le_bytes()).collect();
            exec.write_buffer(x, 0, &init).unwrap();
            for _ in 0..2 {
                exec.replay().unwrap();
            }
            exec.wait().unwrap();
            let mut out = vec![0u8; blocks as usize * 1024];
            exec.read_buffer(x, 0, &mut out).unwrap();
            let wrong = out.chunks(4).enumerate().filter(|(i, c)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) != *i as f32 + 2.0 * 941.0).count();
            assert_eq!(wrong, 0, "{blocks} blocks, staging {staging:?}: every element 941 more per replay");
        }
    }
}

/// A tile-sparse chain of a user's kernels: `spread` (grid 16 × 64: block (x, y) updates its 256 words
/// of `x` from the 256 words of `y`'s tile y) and `gather` (64 blocks: block j updates its 256 words of
/// `y` from the 16 tiles of `x` that blocks (0..16, j) wrote), each with a per-block host twin.
const SPARSE: &str = r#"
#include "ostinato.cuh"
extern "C" __global__ void spread(unsigned* x, const unsigned* y, unsigned salt) {
  OST_ENTRY();
  unsigned b = blockIdx.x + 16u * blockIdx.y, t = threadIdx.x;
  x[256u * b + t] = x[256u * b + t] * 3u + y[256u * blockIdx.y + t] + salt;
  OST_EXIT();
}
extern "C" __global__ void gather(unsigned* y, const unsigned* x) {
  OST_ENTRY();
  unsigned j = blockIdx.x, t = threadIdx.x, s = 0;
  for (unsigned k = 0; k < 16u; ++k) s += x[256u * (16u * j + k) + t];
  y[256u * j + t] = y[256u * j + t] * 5u + s;
  OST_EXIT();
}
"#;

fn sparse_sigs() -> (KernelSig, KernelSig) {
    (
        KernelSig::new("spread").buffer("x", Access::ReadWrite).buffer("y", Access::Read).scalar("salt", ScalarType::U32),
        KernelSig::new("gather").buffer("y", Access::ReadWrite).buffer("x", Access::Read),
    )
}

fn sparse_host() -> Vec<ostinato_host::HostKernel> {
    let (s, g) = sparse_sigs();
    let spread = ostinato_host::HostKernel::per_block(s, |cx| {
        let [bx, by, _] = cx.block();
        let b = (bx + 16 * by) as usize;
        let (x, y, salt) = (cx.buffer(0)?, cx.buffer(1)?, cx.u32(2)?);
        let (x, y) = (x.words_range(256 * b, 256, true)?, y.words_range(256 * by as usize, 256, false)?);
        for t in 0..256 {
            x.set_u32(t, x.u32(t).wrapping_mul(3).wrapping_add(y.u32(t)).wrapping_add(salt));
        }
        Ok(())
    });
    let gather = ostinato_host::HostKernel::per_block(g, |cx| {
        let j = cx.block()[0] as usize;
        let (y, x) = (cx.buffer(0)?, cx.buffer(1)?);
        let (y, x) = (y.words_range(256 * j, 256, true)?, x.words_range(256 * 16 * j, 256 * 16, false)?);
        for t in 0..256 {
            let s = (0..16).fold(0u32, |s, k| s.wrapping_add(x.u32(256 * k + t)));
            y.set_u32(t, y.u32(t).wrapping_mul(5).wrapping_add(s));
        }
        Ok(())
    });
    vec![spread, gather]
}

/// `depth` rounds of spread → gather.
fn sparse_chain(depth: usize) -> Plan {
    let (s, gsig) = sparse_sigs();
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024 * 1024).unwrap();
    let y = g.add_buffer("y", 64 * 1024).unwrap();
    let (ks, kg) = (g.add_kernel(s).unwrap(), g.add_kernel(gsig).unwrap());
    let spread_tiles = [
        ("x", TileMap::new(vec![TileRange::span(0, [1024, 16384, 0], 1024)]).unwrap()),
        ("y", TileMap::new(vec![TileRange::span(0, [0, 1024, 0], 1024)]).unwrap()),
    ];
    let gather_tiles = [("y", TileMap::linear(1024, 1024).unwrap()), ("x", TileMap::linear(16384, 16384).unwrap())];
    for r in 0..depth {
        g.add_launch_tiled(ks, Launch::new([16, 64, 1], [256, 1, 1]), &[Arg::Whole(x), Arg::Whole(y), Arg::Scalar(Scalar::u32(r as u32))], &spread_tiles, &[])
            .unwrap();
        g.add_launch_tiled(kg, Launch::linear(64, 256), &[Arg::Whole(y), Arg::Whole(x)], &gather_tiles, &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

/// A trace of the chain draws each tile hand-off as an edge of its own kind: with PDL on, every edge
/// into a consumer that waits tile by tile is a `handoff` (the consumer may start before its producer
/// ends), and the trace passes its check; without PDL or without hand-offs there is none.
/// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`: another client (a profiler, compute-sanitizer)
/// has CUPTI.
const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS: i32 = 39;

fn trace_names_the_handoffs(exec: &mut ostinato_cuda::CudaExec, plan: &Plan, handoff: HandoffMode, pdl: PdlMode) {
    let t = match exec.trace(1) {
        Ok(t) => t,
        // Another CUPTI client holds the process (compute-sanitizer runs this test): no trace.
        Err(ostinato_cuda::CudaError::Cupti { code: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS, .. }) => {
            eprintln!("trace ({handoff:?}, pdl {pdl:?}): CUPTI is another tool's here; not traced");
            return;
        }
        Err(e) => panic!("trace ({handoff:?}, pdl {pdl:?}): {e}"),
    };
    t.check(plan).unwrap_or_else(|e| panic!("trace ({handoff:?}, pdl {pdl:?}): {e}"));
    let handed = t.edges.iter().filter(|e| e.kind == ostinato::EdgeKind::Handoff).count();
    match (handoff, pdl) {
        (HandoffMode::Off, _) | (_, PdlMode::Off) => assert_eq!(handed, 0, "{handoff:?} pdl {pdl:?}: no hand-off edge"),
        (HandoffMode::On, PdlMode::On) => assert_eq!(handed, exec.handoffs(), "every consumer's one producer edge is a hand-off"),
        _ => eprintln!("{handoff:?} pdl {pdl:?}: {handed} hand-off edges of {} consumers", exec.handoffs()),
    }
}

#[test]
fn a_tile_sparse_chain_hands_off_tile_by_tile_and_matches_the_host() {
    let Some(device) = common::device_or_skip("a_tile_sparse_chain_hands_off_tile_by_tile_and_matches_the_host") else { return };
    let dir = std::env::temp_dir().join(format!("ostinato-sparse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sparse.cu");
    std::fs::write(&path, SPARSE).unwrap();
    let plan = sparse_chain(20);
    let inits = vec![Some(ostinato::file::BufferInit::Random(3)), Some(ostinato::file::BufferInit::Random(4))];
    let mut host = ostinato_host::HostBackend::serial().instantiate(&plan, sparse_host(), ostinato::allocate_all(&plan)).unwrap();
    write_inits(&mut host, &inits).unwrap();
    for _ in 0..3 {
        host.replay().unwrap();
    }
    let want = read_roots(&mut host).unwrap();
    // Fusion by components (the default) makes the chain one kernel of a block per gather block; with
    // fusion off, the hand-off modes.
    for (handoff, mode, pdl, fusion) in [
        (HandoffMode::Auto, ExecMode::Graph, PdlMode::Auto, FusionMode::Auto),
        (HandoffMode::Auto, ExecMode::Graph, PdlMode::On, FusionMode::Auto),
        (HandoffMode::Auto, ExecMode::Eager, PdlMode::Auto, FusionMode::Auto),
        (HandoffMode::Auto, ExecMode::Graph, PdlMode::Auto, FusionMode::Off),
        (HandoffMode::On, ExecMode::Graph, PdlMode::Auto, FusionMode::Off),
        (HandoffMode::On, ExecMode::Graph, PdlMode::On, FusionMode::Off),
        (HandoffMode::On, ExecMode::Graph, PdlMode::Off, FusionMode::Off),
        (HandoffMode::On, ExecMode::Eager, PdlMode::Auto, FusionMode::Off),
        (HandoffMode::Off, ExecMode::Graph, PdlMode::Auto, FusionMode::Off),
    ] {
        let options = CudaOptions { handoff, mode, fusion, pdl: PdlPolicy::new(pdl), ..CudaOptions::default() };
        let backend = CudaBackend::new(&device, options).unwrap();
        let kernels = plan
            .graph()
            .kernels()
            .iter()
            .map(|k| {
                backend.bind_kernel(k, &ostinato::KernelRef::file(&path).with_entry(&k.name).with_option("fusable", ostinato::RefOption::Bool(true))).unwrap()
            })
            .collect();
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        let expected = match handoff {
            HandoffMode::Off => 0,
            // `auto` hands off nowhere (measured: docs/fences.md); `on` every gather and every
            // spread but the first (which waits for nothing).
            HandoffMode::Auto => 0,
            HandoffMode::On => 2 * 20 - 1,
        };
        assert_eq!(exec.handoffs(), expected, "{handoff:?}: consumers waiting tile by tile");
        let fused = if fusion == FusionMode::Auto { 2 * 20 } else { 0 };
        assert_eq!(exec.fused_nodes(), fused, "{fusion:?}: every node in the kernel of components");
        write_inits(&mut exec, &inits).unwrap();
        for _ in 0..3 {
            exec.replay().unwrap();
        }
        exec.wait().unwrap();
        assert_eq!(read_roots(&mut exec).unwrap(), want, "hand-off {handoff:?} {mode:?} pdl {pdl:?} fusion {fusion:?} differs from the host oracle");
        trace_names_the_handoffs(&mut exec, &plan, handoff, pdl);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tile-map check of `plan` on the PTX NVRTC makes of `source` for sm_90, as instantiate runs it;
/// `None` (with a message) without NVRTC.
fn check_offline(test: &str, plan: &Plan, source: &str) -> Option<Result<ostinato_cuda_code::tilemaps::TileChecks, ostinato_cuda_code::tilemaps::TileError>> {
    let compiled = match ostinato_cuda_code::compile::compile("kernels.cu", source, "sm_90", PdlTrigger::AfterWait) {
        Ok(c) => c,
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            return None;
        }
    };
    let module = ostinato_cuda_code::contract::module_info(&compiled.ptx, &[]);
    let code: Vec<_> = plan
        .graph()
        .kernels()
        .iter()
        .map(|k| ostinato_cuda_code::tilemaps::KernelCode::Ptx { module: &module, ptx: &compiled.ptx, entry: &k.name, name: "kernels.cu" })
        .collect();
    Some(ostinato_cuda_code::tilemaps::TileChecks::check_graph(plan.graph(), &code))
}

/// Without a device (NVRTC only): the sparse chain's maps are what its kernels' PTX does — the check
/// at instantiate verifies every one of them from the code — and the refusals the device test below
/// expects are what the check gives.
#[test]
fn the_sparse_chains_tile_maps_are_verified_from_its_ptx() {
    let test = "the_sparse_chains_tile_maps_are_verified_from_its_ptx";
    let Some(checked) = check_offline(test, &sparse_chain(3), SPARSE) else { return };
    let checks = checked.unwrap();
    assert_eq!(checks.accepted.len(), 2 * 2 * 3);
    assert!(checks.accepted.iter().all(|a| a.vouched.is_none()), "{:?}", checks.accepted);
    let e = check_offline(test, &half_gather(), SPARSE).unwrap().err().unwrap().to_string();
    assert!(e.starts_with("node 1 (gather), param `x`: kernel `gather`'s code") && e.contains("contradicts the tile map: `ld.global.u32"), "{e}");
    let (plan, s) = shift_plan();
    let mut checks = check_offline(test, &plan, SHIFT).unwrap().unwrap();
    assert!(checks.check_patch(plan.graph(), s, Scalar::u32(1)).unwrap_err().to_string().contains("param `x`"));
    checks.check_patch(plan.graph(), s, Scalar::u32(0)).unwrap();
}

/// spread, then a gather that declares half of its 16 tiles of `x` (its code reads all 16).
fn half_gather() -> Plan {
    let (s, gsig) = sparse_sigs();
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024 * 1024).unwrap();
    let y = g.add_buffer("y", 64 * 1024).unwrap();
    let (ks, kg) = (g.add_kernel(s).unwrap(), g.add_kernel(gsig).unwrap());
    let spread_tiles = [
        ("x", TileMap::new(vec![TileRange::span(0, [1024, 16384, 0], 1024)]).unwrap()),
        ("y", TileMap::new(vec![TileRange::span(0, [0, 1024, 0], 1024)]).unwrap()),
    ];
    g.add_launch_tiled(ks, Launch::new([16, 64, 1], [256, 1, 1]), &[Arg::Whole(x), Arg::Whole(y), Arg::Scalar(Scalar::u32(1))], &spread_tiles, &[]).unwrap();
    let half = [("y", TileMap::linear(1024, 1024).unwrap()), ("x", TileMap::linear(16384, 8192).unwrap())];
    g.add_launch_tiled(kg, Launch::linear(64, 256), &[Arg::Whole(y), Arg::Whole(x)], &half, &[]).unwrap();
    Plan::compile(&g).unwrap()
}

/// One `shift` launch of 8 blocks over 9 rows, each block's map its own row, `s` a slot at 0.
fn shift_plan() -> (Plan, ostinato::SlotId) {
    let sig = KernelSig::new("shift").buffer("x", Access::ReadWrite).scalar("s", ScalarType::U32);
    let mut g = Graph::new();
    let x = g.add_buffer("x", 9 * 1024).unwrap();
    let k = g.add_kernel(sig).unwrap();
    let s = g.add_slot("s", Scalar::u32(0)).unwrap();
    g.add_launch_tiled(k, Launch::linear(8, 256), &[Arg::Whole(x), Arg::Slot(s)], &[("x", TileMap::linear(1024, 1024).unwrap())], &[]).unwrap();
    (Plan::compile(&g).unwrap(), s)
}

/// `shift`: block b adds 1 to row b + s of `x` (256 words a row): with `s` a slot.
const SHIFT: &str = r#"
extern "C" __global__ void shift(unsigned* x, unsigned s) {
  x[256u * (blockIdx.x + s) + threadIdx.x] += 1u;
}
"#;

#[test]
fn a_tile_map_the_code_contradicts_is_refused_at_instantiate_and_so_is_a_patch_that_would_break_one() {
    let Some(device) = common::device_or_skip("a_tile_map_the_code_contradicts_is_refused_at_instantiate_and_so_is_a_patch_that_would_break_one") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("ostinato-tilecheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sparse, shift) = (dir.join("sparse.cu"), dir.join("shift.cu"));
    std::fs::write(&sparse, SPARSE).unwrap();
    std::fs::write(&shift, SHIFT).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    // gather declares half of its 16 tiles of `x`: its code reads all 16.
    let plan = half_gather();
    let kernels = plan.graph().kernels().iter().map(|k| backend.bind_kernel(k, &ostinato::KernelRef::file(&sparse).with_entry(&k.name)).unwrap()).collect();
    let err = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).err().unwrap();
    let msg = err.to_string();
    assert!(matches!(err, ostinato_cuda::CudaError::TileMap(_)), "{msg}");
    assert!(msg.starts_with("node 1 (gather), param `x`: kernel `gather`'s code") && msg.contains("contradicts the tile map: `ld.global.u32"), "{msg}");
    assert_eq!(err.kind(), ostinato::ErrorKind::Bind);
    // shift with s = 0 keeps to its rows; patched to 1 it would not, and is refused; the exec keeps
    // running with s = 0.
    let (plan, s) = shift_plan();
    let x = ostinato::BufferId(0);
    let kernels = plan.graph().kernels().iter().map(|k| backend.bind_kernel(k, &ostinato::KernelRef::file(&shift).with_entry("shift")).unwrap()).collect();
    let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    assert!(exec.tile_maps().iter().all(|a| a.vouched.is_none()) && exec.tile_maps().len() == 1);
    let err = exec.set_slot(s, Scalar::u32(1)).unwrap_err();
    assert!(matches!(err, ostinato_cuda::CudaError::TileMap(_)) && err.to_string().contains("param `x`"), "{err}");
    exec.write_buffer(x, 0, &[0u8; 9 * 1024]).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let mut out = vec![0u8; 9 * 1024];
    exec.read_buffer(x, 0, &mut out).unwrap();
    let words: Vec<u32> = out.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert!(words[..8 * 256].iter().all(|&w| w == 1) && words[8 * 256..].iter().all(|&w| w == 0), "rows 0..8 once, row 8 untouched");
    let _ = std::fs::remove_dir_all(&dir);
}
