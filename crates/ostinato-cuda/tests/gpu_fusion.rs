//! On the GPU: chain fusion. Random programs of 1-block nodes (order-sensitive `mix`, copies, fills,
//! views, explicit edges, a slot patched every replay) run fused bitwise equal to the host oracle in
//! every mode; a serial chain and independent chains become one launch; a user's kernel declared
//! fusable fuses, and a false declaration (a kernel that reads the grid) is refused naming it; kernels
//! with a block barrier run alone in their blocks, side by side.

mod common;

use ostinato::{read_roots, write_inits, Access, Arg, Backend, Exec, Graph, KernelRef, KernelSig, Launch, Plan, PlanOptions, RefOption, Scalar, ScalarType};
use ostinato_cuda::lower::PdlPolicy;
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaError, CudaOptions, ExecMode, FusionMode, PdlMode, PdlTrigger};
use ostinato_testkit::barrier_bodies::{block_sum_sig, BarrierProgram, BLOCK_SUM_CU};
use ostinato_testkit::random_graphs::random_one_block_program;

#[test]
fn random_one_block_programs_fused_match_the_host_oracle() {
    let Some(device) = common::device_or_skip("random_one_block_programs_fused_match_the_host_oracle") else { return };
    let configs = [
        (FusionMode::On, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::Auto, ExecMode::Graph, PdlMode::Auto),
        (FusionMode::On, ExecMode::Graph, PdlMode::On),
        (FusionMode::On, ExecMode::Graph, PdlMode::Off),
        (FusionMode::On, ExecMode::Eager, PdlMode::Auto),
    ];
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let (mut compared, mut fused, mut nodes) = (0, 0, 0);
    for seed in 0..40u64 {
        let prog = random_one_block_program(seed, 10 + (seed as usize * 13) % 90);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        let replays = 3;
        // The host oracle with the slot patched before every replay, as the GPU exec is.
        let mut host = ostinato_host::HostBackend::serial()
            .instantiate(&plan, ostinato_testkit::random_graphs::host_kernels(&plan).unwrap(), ostinato::allocate_all(&plan))
            .unwrap();
        write_inits(&mut host, &prog.inits).unwrap();
        for r in 0..replays {
            host.set_slot(prog.salt_slot, Scalar::u32(7 * r as u32 + seed as u32)).unwrap();
            host.replay().unwrap();
        }
        let want = read_roots(&mut host).unwrap();
        for (fusion, mode, pdl) in configs {
            let backend =
                CudaBackend::with_builtins(&device, &modules, CudaOptions { fusion, mode, pdl: PdlPolicy::new(pdl), ..CudaOptions::default() }).unwrap();
            let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name, k).unwrap()).collect();
            let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
            write_inits(&mut exec, &prog.inits).unwrap();
            for r in 0..replays {
                exec.set_slot(prog.salt_slot, Scalar::u32(7 * r as u32 + seed as u32)).unwrap();
                exec.replay().unwrap();
            }
            exec.wait().unwrap();
            assert_eq!(read_roots(&mut exec).unwrap(), want, "seed {seed}: fusion {fusion:?} {mode:?} pdl {pdl:?} differs from the host oracle");
            fused += exec.fused_nodes();
            nodes += plan.node_count();
            compared += 1;
        }
    }
    assert!(fused > nodes / 3, "only {fused} of {nodes} nodes ran fused");
    eprintln!("compared {compared} fused CUDA runs bitwise with the host oracle ({fused} of {nodes} nodes fused)");
}

fn add_one_chains(lanes: usize, len: usize) -> (Graph, Vec<ostinato::BufferId>) {
    let mut g = Graph::new();
    let bufs: Vec<_> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 1024).unwrap()).collect();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for _ in 0..len {
        for &b in &bufs {
            g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        }
    }
    (g, bufs)
}

#[test]
fn chains_of_941_run_as_one_launch() {
    let Some(device) = common::device_or_skip("chains_of_941_run_as_one_launch") else { return };
    for lanes in [1, 4] {
        let (g, bufs) = add_one_chains(lanes, 941);
        let plan = Plan::compile(&g).unwrap();
        let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
        let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert_eq!(exec.fused_nodes(), 941 * lanes);
        assert_eq!(exec.run_plan().node_count(), 1, "{lanes} chain(s): one fused launch");
        assert_eq!(exec.lowering().launches[0].dims.grid, [lanes as u32, 1, 1]);
        for _ in 0..3 {
            exec.replay().unwrap();
        }
        for b in bufs {
            let mut out = vec![0u8; 1024];
            exec.read_buffer(b, 0, &mut out).unwrap();
            let v: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert!(v.iter().all(|x| *x == 3.0 * 941.0), "every element incremented 941 times per replay: {:?}", &v[..4]);
        }
    }
}

/// `text` written to `NAME.cu` in a folder of its own: (the folder, the file).
fn source_file(name: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("ostinato-fusion-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.cu"));
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

const USER: &str = r#"
extern "C" __global__ void scale(float* x, float a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = x[i] * a + 1.0f;
}
extern "C" __global__ void by_block(float* x, float a, unsigned n) {
  unsigned b; asm("mov.u32 %0, %%ctaid.x;" : "=r"(b));
  if (threadIdx.x < n) x[threadIdx.x] = x[threadIdx.x] * a + (float)b;
}
"#;

#[test]
fn a_users_kernel_declared_fusable_fuses_and_a_false_declaration_is_refused() {
    let Some(device) = common::device_or_skip("a_users_kernel_declared_fusable_fuses_and_a_false_declaration_is_refused") else { return };
    let (dir, path) = source_file("user", USER);
    let sig = |name: &str| KernelSig::new(name).buffer("x", Access::ReadWrite).scalar("a", ScalarType::F32).scalar("n", ScalarType::U32);
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let reference = |entry: &str, fusable: bool| KernelRef::file(&path).with_entry(entry).with_option("fusable", RefOption::Bool(fusable));
    let refused = backend.bind_kernel(&sig("by_block"), &reference("by_block", true)).unwrap_err();
    assert!(
        matches!(&refused, CudaError::Kernel { kernel, reason } if kernel == "by_block" && reason.contains("declared fusable") && reason.contains("%ctaid")),
        "{refused}"
    );
    let undeclared = backend.bind_kernel(&sig("by_block"), &reference("by_block", false)).unwrap();
    assert!(undeclared.fusion.is_none(), "undeclared: never fused");
    let k = backend.bind_kernel(&sig("scale"), &reference("scale", true)).unwrap();
    assert!(k.fusion.is_some());
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * 200).unwrap();
    let kid = g.add_kernel(sig("scale")).unwrap();
    for i in 0..10 {
        g.add_launch(kid, Launch::linear(1, 128), &[Arg::Whole(x), Arg::Scalar(Scalar::f32(1.0 + i as f32 / 4.0)), Arg::Scalar(Scalar::u32(200))], &[])
            .unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let mut exec = backend.instantiate(&plan, vec![k], ostinato::allocate_all(&plan)).unwrap();
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (10, 1));
    exec.replay().unwrap();
    let mut out = vec![0u8; 800];
    exec.read_buffer(x, 0, &mut out).unwrap();
    let mut want = 0.0f32;
    for i in 0..10 {
        want = want * (1.0 + i as f32 / 4.0) + 1.0;
    }
    let got = f32::from_le_bytes([out[796], out[797], out[798], out[799]]);
    assert_eq!(got, want, "the ten scales in order");
    // A PTX module cannot be fused (its source is not there to include).
    let ptx = dir.join("user.ptx");
    std::fs::write(&ptx, ostinato_cuda_code::nvrtc::compile_ptx(USER, "user.cu", &["--gpu-architecture=compute_90".into()]).unwrap()).unwrap();
    let e = backend.bind_kernel(&sig("scale"), &KernelRef::file(&ptx).with_entry("scale").with_option("fusable", RefOption::Bool(true))).unwrap_err();
    assert!(e.to_string().contains("not CUDA C"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two kernels of 32 KiB of static shared memory each (a block reverses through it): fused, one
/// block would need 64 KiB, more than the 48 a block gets.
const SHARED: &str = r#"
extern "C" __global__ void rev_a(unsigned* x) {
  __shared__ unsigned s[8192];
  for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) s[i] = x[i];
  for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) x[i] = s[i] + 1;
}
extern "C" __global__ void rev_b(unsigned* x) {
  __shared__ unsigned t[8192];
  for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) t[i] = x[i] * 3;
  for (unsigned i = threadIdx.x; i < 8192; i += blockDim.x) x[i] = t[i];
}
"#;

#[test]
fn shared_memory_past_the_blocks_limit_stays_unfused_under_auto_and_is_refused_under_on() {
    let Some(device) = common::device_or_skip("shared_memory_past_the_blocks_limit_stays_unfused_under_auto_and_is_refused_under_on") else { return };
    let (dir, path) = source_file("shared", SHARED);
    let sig = |name: &str| KernelSig::new(name).buffer("x", Access::ReadWrite);
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * 8192).unwrap();
    let (a, b) = (g.add_kernel(sig("rev_a")).unwrap(), g.add_kernel(sig("rev_b")).unwrap());
    for k in [a, b, a, b] {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    for fusion in [FusionMode::Auto, FusionMode::On] {
        let backend = CudaBackend::new(&device, CudaOptions { fusion, ..CudaOptions::default() }).unwrap();
        let kernels: Vec<_> = ["rev_a", "rev_b"]
            .iter()
            .map(|e| backend.bind_kernel(&sig(e), &KernelRef::file(&path).with_entry(e).with_option("fusable", RefOption::Bool(true))).unwrap())
            .collect();
        assert!(kernels.iter().all(|k| k.fusion.as_ref().is_some_and(|f| f.body.uses_shared && f.body.static_shared_bytes == 32768)), "{kernels:?}");
        match backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)) {
            Ok(mut exec) => {
                assert_eq!(fusion, FusionMode::Auto, "on must refuse");
                assert_eq!(exec.fused_nodes(), 0, "auto leaves the group unfused");
                exec.replay().unwrap();
                let mut out = vec![0u8; 4 * 8192];
                exec.read_buffer(x, 0, &mut out).unwrap();
                assert_eq!(u32::from_le_bytes([out[0], out[1], out[2], out[3]]), 12, "((0 + 1) * 3 + 1) * 3");
            }
            Err(e) => {
                assert_eq!(fusion, FusionMode::On, "{e}");
                assert!(e.to_string().contains("65536 bytes of shared memory") && e.to_string().contains("rev_a, rev_b"), "{e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A block of 1,024 threads reversing its own 32 KiB tile through shared memory, the tile named by the
/// block's linear index in a 3-D grid (so the body reads `blockIdx` and `gridDim` in all three axes).
const REV_TILE: &str = r#"
extern "C" __global__ void rev_tile(unsigned* x, unsigned salt) {
  __shared__ unsigned s[8192];
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned* t = x + 8192u * b;
  for (unsigned i = threadIdx.x; i < 8192u; i += blockDim.x) s[i] = t[i];
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 8192u; i += blockDim.x) t[i] = s[8191u - i] * 3u + b + salt;
}
"#;

/// Ten independent launches of `rev_tile` on 2×2×2 grids of 1,024 threads: side by side they take no
/// shared memory beyond the body's 32 KiB (each body works out its block in registers; a per-thread
/// view would add 24 KiB, past the 48 a block gets), so `auto` and `on` make them one launch of 80
/// blocks, and every tile comes out as the unfused launches leave it.
#[test]
fn lanes_side_by_side_take_no_shared_memory_beyond_their_bodies() {
    let Some(device) = common::device_or_skip("lanes_side_by_side_take_no_shared_memory_beyond_their_bodies") else { return };
    let (dir, path) = source_file("rev_tile", REV_TILE);
    let sig = KernelSig::new("rev_tile").buffer("x", Access::ReadWrite).scalar("salt", ScalarType::U32);
    let mut g = Graph::new();
    let k = g.add_kernel(sig.clone()).unwrap();
    let bufs: Vec<_> = (0..10).map(|i| g.add_buffer(format!("x{i}"), 8 * 8192 * 4).unwrap()).collect();
    let launch = Launch { grid: [2, 2, 2], block: [1024, 1, 1], shared_bytes: 0 };
    for (i, &b) in bufs.iter().enumerate() {
        g.add_launch(k, launch, &[Arg::Whole(b), Arg::Scalar(Scalar::u32(100 * i as u32))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let init = |i: usize| -> Vec<u32> { (0..8 * 8192u32).map(|k| k.wrapping_mul(2_654_435_761) ^ (i as u32)).collect() };
    for (fusion, nodes) in [(FusionMode::On, 1), (FusionMode::Auto, 1), (FusionMode::Off, 10)] {
        let backend = CudaBackend::new(&device, CudaOptions { fusion, ..CudaOptions::default() }).unwrap();
        let kernel = backend.bind_kernel(&sig, &KernelRef::file(&path).with_entry("rev_tile").with_option("fusable", RefOption::Bool(true))).unwrap();
        assert!(kernel.fusion.as_ref().is_some_and(|f| f.body.uses_shared && f.body.static_shared_bytes == 32768), "{kernel:?}");
        let mut exec = backend.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap_or_else(|e| panic!("{fusion:?}: {e}"));
        assert_eq!(exec.run_plan().node_count(), nodes, "{fusion:?}");
        if fusion != FusionMode::Off {
            assert_eq!(exec.fused_nodes(), 10);
            assert_eq!(exec.lowering().launches[0].dims.grid, [80, 1, 1], "ten ranges of 8 blocks");
        }
        for (i, &b) in bufs.iter().enumerate() {
            let bytes: Vec<u8> = init(i).iter().flat_map(|v| v.to_le_bytes()).collect();
            exec.write_buffer(b, 0, &bytes).unwrap();
        }
        exec.replay().unwrap();
        for (i, &b) in bufs.iter().enumerate() {
            let mut out = vec![0u8; 8 * 8192 * 4];
            exec.read_buffer(b, 0, &mut out).unwrap();
            let got: Vec<u32> = out.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            let x = init(i);
            for (at, v) in got.iter().enumerate() {
                let (blk, j) = (at / 8192, at % 8192);
                let want = x[blk * 8192 + 8191 - j].wrapping_mul(3).wrapping_add(blk as u32 + 100 * i as u32);
                assert_eq!(*v, want, "{fusion:?}: launch {i}, block {blk}, element {j}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_ldg_read_of_what_an_earlier_body_wrote_stays_unfused_under_auto_and_is_refused_under_on() {
    let Some(device) = common::device_or_skip("an_ldg_read_of_what_an_earlier_body_wrote_stays_unfused_under_auto_and_is_refused_under_on") else { return };
    let (dir, path) = source_file("fusion_ldg", include_str!("../../ostinato-cuda-code/tests/fixtures/fusion_ldg.cu"));
    let bump_sig = KernelSig::new("bump").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let read_sig = |name: &str| KernelSig::new(name).buffer("out", Access::Write).buffer("in", Access::Read).scalar("n", ScalarType::U32);
    for (reader, noncoherent) in [("ldg_scale", true), ("plain_scale", false)] {
        let mut g = Graph::new();
        let (x, y) = (g.add_buffer("x", 4 * 256).unwrap(), g.add_buffer("y", 4 * 256).unwrap());
        let (bump, read) = (g.add_kernel(bump_sig.clone()).unwrap(), g.add_kernel(read_sig(reader)).unwrap());
        let n = Arg::Scalar(Scalar::u32(256));
        // x += 1 four times, each followed by y = 2 * x: every read follows a write of its bytes.
        for _ in 0..4 {
            g.add_launch(bump, Launch::linear(1, 256), &[Arg::Whole(x), n], &[]).unwrap();
            g.add_launch(read, Launch::linear(1, 256), &[Arg::Whole(y), Arg::Whole(x), n], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        for fusion in [FusionMode::Auto, FusionMode::On] {
            let backend = CudaBackend::new(&device, CudaOptions { fusion, ..CudaOptions::default() }).unwrap();
            let bind =
                |s: &KernelSig| backend.bind_kernel(s, &KernelRef::file(&path).with_entry(&s.name).with_option("fusable", RefOption::Bool(true))).unwrap();
            let kernels = vec![bind(&bump_sig), bind(&read_sig(reader))];
            assert_eq!(kernels[1].fusion.as_ref().map(|f| !f.body.noncoherent.is_empty()), Some(noncoherent), "{reader}");
            match backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)) {
                Ok(mut exec) => {
                    assert!(!(noncoherent && fusion == FusionMode::On), "on must refuse the __ldg body");
                    if noncoherent {
                        assert!(exec.fused_nodes() < 8, "auto leaves the __ldg readers unfused");
                    } else {
                        assert_eq!(exec.fused_nodes(), 8, "plain loads fuse");
                    }
                    exec.replay().unwrap();
                    let mut out = vec![0u8; 4 * 256];
                    exec.read_buffer(y, 0, &mut out).unwrap();
                    assert_eq!(f32::from_le_bytes([out[0], out[1], out[2], out[3]]), 8.0, "{reader} {fusion:?}: y = 2 * (0 + 4)");
                }
                Err(e) => {
                    assert!(noncoherent && fusion == FusionMode::On, "{reader} {fusion:?}: {e}");
                    let msg = e.to_string();
                    assert!(msg.contains("node 1 (ldg_scale)") && msg.contains("node 0 (bump)") && msg.contains("non-coherent"), "{msg}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ten independent `add_one` launches of 64 blocks each on their own buffers: under `auto` and `on` one
/// launch of 640 blocks, each launch's blocks on a range of its own (side by side), every element right
/// after three replays; with fusion off ten launches.
#[test]
fn independent_multi_block_launches_run_side_by_side_as_one_launch() {
    let Some(device) = common::device_or_skip("independent_multi_block_launches_run_side_by_side_as_one_launch") else { return };
    let mut g = Graph::new();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let bufs: Vec<_> = (0..10).map(|i| g.add_buffer(format!("x{i}"), 64 * 1024).unwrap()).collect();
    for &b in &bufs {
        g.add_launch(k, Launch::linear(64, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(64 * 256))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    for (fusion, launches) in [(FusionMode::On, 1), (FusionMode::Auto, 1), (FusionMode::Off, 10)] {
        let backend = CudaBackend::new(&device, CudaOptions { fusion, ..CudaOptions::default() }).unwrap();
        let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert_eq!(exec.run_plan().node_count(), launches, "{fusion:?}");
        if fusion != FusionMode::Off {
            assert_eq!(exec.fused_nodes(), 10);
            assert_eq!(exec.lowering().launches[0].dims.grid, [640, 1, 1], "ten ranges of 64 blocks");
        }
        for _ in 0..3 {
            exec.replay().unwrap();
        }
        for &b in &bufs {
            let mut out = vec![0u8; 64 * 1024];
            exec.read_buffer(b, 0, &mut out).unwrap();
            let v: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert!(v.iter().all(|x| *x == 3.0), "{fusion:?}: every element incremented once per replay: {:?}", &v[..4]);
        }
    }
}

/// Kernels with a block barrier fuse only as the one body of a block
/// (`ostinato_testkit::barrier_bodies`): ten independent launches of 64 blocks sit side by side in one
/// launch and six independent one-block launches in another (one block each), while a dependent pair
/// never shares a block; every output equals the host's sums, fused or not.
#[test]
fn bodies_with_a_block_barrier_run_alone_in_their_blocks_side_by_side() {
    let Some(device) = common::device_or_skip("bodies_with_a_block_barrier_run_alone_in_their_blocks_side_by_side") else { return };
    let (dir, path) = source_file("block_sum", BLOCK_SUM_CU);
    let prog = BarrierProgram::new();
    let plan = Plan::compile(&prog.graph).unwrap();
    let (inputs, want) = (prog.inputs(), prog.outputs());
    // Both put the pair's first launch beside the six (one kernel, waiting for nothing, as they do).
    for (fusion, nodes, fused) in [(FusionMode::Auto, 3, 17), (FusionMode::On, 3, 17), (FusionMode::Off, 18, 0)] {
        let backend = CudaBackend::new(&device, CudaOptions { fusion, ..CudaOptions::default() }).unwrap();
        let reference = KernelRef::file(&path).with_entry("block_sum").with_option("fusable", RefOption::Bool(true));
        let kernel = backend.bind_kernel(&block_sum_sig(), &reference).unwrap();
        assert!(kernel.fusion.as_ref().is_some_and(|b| b.body.block_barrier.is_some()), "certified, with its block barrier");
        let mut exec = backend.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
        assert_eq!((exec.run_plan().node_count(), exec.fused_nodes()), (nodes, fused), "{fusion:?}");
        for (l, data) in prog.independent.iter().zip(&inputs) {
            exec.write_buffer(l.x, 0, &data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        }
        for _ in 0..2 {
            exec.replay().unwrap();
        }
        for (i, (l, w)) in prog.independent.iter().chain(&prog.pair).zip(&want).enumerate() {
            let mut out = vec![0u8; 4 * l.blocks as usize];
            exec.read_buffer(l.out, 0, &mut out).unwrap();
            let got: Vec<u32> = out.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert_eq!(&got, w, "{fusion:?}: launch {i}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
