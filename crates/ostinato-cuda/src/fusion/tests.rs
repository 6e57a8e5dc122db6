use std::collections::BTreeSet;

use ostinato::{Access, Arg, Graph, KernelSig, Launch, NodeId, NodeOp, Plan, PlanOptions, Scalar, ScalarType, Slice};
use ostinato_testkit::random_graphs::{random_one_block_program, serial_result, RandomProgram};
use ostinato_testkit::tiled_graphs::launches_fusable;

use super::source::{generate, FusedKernel};
use super::*;

const BLOCK: [u32; 3] = [256, 1, 1];

/// Every kernel node of one block of 256 threads fuses (one source); copies and fills too.
fn all_fusable(plan: &Plan) -> Vec<Option<Fusable>> {
    plan.graph()
        .nodes()
        .iter()
        .map(|n| match &n.op {
            NodeOp::Kernel { launch, .. } if launch.grid != [1, 1, 1] => None,
            NodeOp::Kernel { launch, .. } => {
                Some(Fusable { key: FuseKey { block: launch.block, grid: launch.grid, source: 0 }, uses_shared: false, alone: false })
            }
            _ => Some(Fusable { key: FuseKey { block: BLOCK, grid: [1, 1, 1], source: 0 }, uses_shared: false, alone: false }),
        })
        .collect()
}

fn add_one(g: &mut Graph) -> ostinato::KernelId {
    g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap()
}

/// `lanes` chains of `len` add_one nodes on their own buffers, recorded interleaved.
fn chains(lanes: usize, len: usize, blocks: u32) -> Plan {
    let mut g = Graph::new();
    let bufs: Vec<_> = (0..lanes).map(|l| g.add_buffer(format!("x{l}"), 1024).unwrap()).collect();
    let k = add_one(&mut g);
    for _ in 0..len {
        for &b in &bufs {
            g.add_launch(k, Launch::linear(blocks, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
        }
    }
    Plan::compile(&g).unwrap()
}

fn fused_for(plan: &Plan, groups: &[Group]) -> Vec<FusedKernel> {
    groups
        .iter()
        .enumerate()
        .map(|(i, gr)| {
            let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(plan, l, |_| false)).collect();
            generate(plan, gr, &format!("ostinato_fused_{i}"), "", &bars, &|k| plan.graph().kernel(k).name.clone(), None)
        })
        .collect()
}

#[test]
fn a_serial_chain_is_one_block_and_independent_chains_its_blocks() {
    let plan = chains(1, 941, 1);
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    assert_eq!(gs.len(), 1);
    assert_eq!(gs[0].lanes.len(), 1);
    assert_eq!(gs[0].len(), 941);
    let bars = barriers(&plan, &gs[0].lanes[0], |_| false);
    assert!(!bars[0] && bars[1..].iter().all(|b| *b), "a barrier between every two dependent nodes");
    let plan = chains(4, 941, 1);
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    assert_eq!(gs.len(), 1, "{gs:?}");
    assert_eq!(gs[0].lanes.len(), 4, "the four chains side by side as four blocks");
    assert!(gs[0].lanes.iter().all(|l| l.len() == 941));
    assert!(groups(&plan, &all_fusable(&plan), FusionMode::Off).is_empty());
    let plan = chains(1, 50, 2);
    assert!(groups(&plan, &all_fusable(&plan), FusionMode::On).is_empty(), "2-block nodes never fuse");
}

#[test]
fn auto_keeps_independent_neighbours_apart_and_on_fuses_them() {
    // Eight independent nodes on one lane (max_lanes 1): side by side in the unfused graph.
    let mut g = Graph::new();
    let k = add_one(&mut g);
    for i in 0..8 {
        let b = g.add_buffer(format!("x{i}"), 1024).unwrap();
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    }
    let plan = Plan::compile_with(&g, PlanOptions { max_lanes: 1 }).unwrap();
    let auto = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    assert_eq!(auto.len(), 1);
    assert!(auto[0].lanes.len() == 8 && auto[0].len() == 8, "auto: side by side as eight blocks, not one after the other: {auto:?}");
    let on = groups(&plan, &all_fusable(&plan), FusionMode::On);
    assert_eq!(on.len(), 1);
    assert_eq!(on[0].len(), 8);
    let bars = barriers(&plan, &on[0].lanes[0], |_| false);
    assert!(bars.iter().all(|b| !b), "no edge, no barrier");
    let shared = barriers(&plan, &on[0].lanes[0], |v| v.0 == 3);
    assert_eq!(shared, vec![false, false, false, true, true, false, false, false], "shared memory fences its neighbours");
}

#[test]
fn a_node_that_cannot_fuse_or_a_cross_lane_edge_cuts_the_run() {
    let plan = chains(1, 6, 1);
    let mut f = all_fusable(&plan);
    f[2] = None;
    let gs = groups(&plan, &f, FusionMode::Auto);
    let lens: Vec<usize> = gs.iter().map(Group::len).collect();
    assert_eq!(lens, vec![2, 3], "n0-n1, then n3-n5");
    // A producer feeding two chains: it ends its run (the consumers' lanes must not wait for the rest).
    let mut g = Graph::new();
    let k = add_one(&mut g);
    let mix = g.add_kernel(ostinato_host::builtins::mix_sig()).unwrap();
    let [p, a, b] = ["p", "a", "b"].map(|n| g.add_buffer(n, 1024).unwrap());
    let one = |g: &mut Graph, x| g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    one(&mut g, p);
    one(&mut g, p);
    for x in [a, b] {
        let u = Arg::Scalar(Scalar::u32(256));
        g.add_launch(mix, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Whole(p), u, u, u], &[]).unwrap();
        one(&mut g, x);
        one(&mut g, x);
    }
    let plan = Plan::compile(&g).unwrap();
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    check_invariants(&plan, &gs);
    assert!(gs.iter().all(|gr| gr.lanes.iter().all(|l| !l.contains(&NodeId(1)) || l.last() == Some(&NodeId(1)))), "{gs:?}");
}

#[test]
fn golden_generated_source_of_a_small_plan() {
    let mut g = Graph::new();
    let [x, y] = ["x", "y"].map(|n| g.add_buffer(n, 64).unwrap());
    let k = add_one(&mut g);
    let mix = g.add_kernel(ostinato_host::builtins::mix_sig()).unwrap();
    let salt = g.add_slot("salt", Scalar::u32(5)).unwrap();
    let n16 = Arg::Scalar(Scalar::u32(16));
    for _ in 0..4 {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), n16], &[]).unwrap();
    }
    g.add_launch(mix, Launch::linear(1, 256), &[Arg::Whole(y), Arg::Whole(x), n16, n16, Arg::Slot(salt)], &[]).unwrap();
    g.add_copy(g.whole(y), g.whole(x), &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    assert_eq!(gs.len(), 1);
    let f = &fused_for(&plan, &gs)[0];
    let body = f.source.split("struct ostinato_fused_ptr").nth(1).and_then(|s| s.split_once("};\n")).map(|(_, b)| b).unwrap();
    assert_eq!(
        body,
        "extern \"C\" __global__ void __launch_bounds__(256) ostinato_fused(void* p0, void* p1, unsigned p2) {\n\
         \x20 if (OST_TRIGGER == 1) OSTINATO_FUSED_TRIGGER();\n\
         \x20 OSTINATO_FUSED_WAIT();\n\
         \x20 if (OST_TRIGGER == 3) OSTINATO_FUSED_TRIGGER();\n\
         \x20 add_one(ostinato_fused_ptr{p0}, 16u);\n\
         \x20 #pragma unroll 8\n\
         \x20 for (unsigned r = 0; r < 3u; ++r) { __syncthreads(); add_one(ostinato_fused_ptr{p0}, 16u); }\n\
         \x20 __syncthreads(); mix(ostinato_fused_ptr{p1}, ostinato_fused_ptr{p0}, 16u, 16u, p2);\n\
         \x20 __syncthreads(); ostinato_copy(ostinato_fused_ptr{p0}, ostinato_fused_ptr{p1}, 64ull);\n\
         \x20 if (OST_TRIGGER == 2) OSTINATO_FUSED_TRIGGER();\n\
         }\n"
    );
    assert!(f.source.contains("#define __global__ __device__ __forceinline__") && f.source.contains("#define blockIdx (::uint3{0u, 0u, 0u})"));
    // Params: x read and written, y read and written, the slot patchable in place.
    let kinds: Vec<String> = f.sig.params.iter().map(|p| format!("{}:{:?}", p.name, p.kind)).collect();
    assert_eq!(kinds, vec!["p0:Buffer(ReadWrite)", "p1:Buffer(ReadWrite)", "p2:Scalar(U32)"]);
    assert_eq!(f.args[2], Arg::Slot(salt));
    assert_eq!(f.launch, Launch::linear(1, 256));
}

#[test]
fn scalars_are_written_bit_for_bit() {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64).unwrap();
    let sig = KernelSig::new("k")
        .buffer("x", Access::Write)
        .scalar("a", ScalarType::F32)
        .scalar("b", ScalarType::I64)
        .scalar("c", ScalarType::F64)
        .scalar("d", ScalarType::I32);
    let k = g.add_kernel(sig).unwrap();
    let args = [Arg::Whole(x), Arg::Scalar(Scalar::f32(-0.5)), Arg::Scalar(Scalar::i64(-2)), Arg::Scalar(Scalar::f64(1.0)), Arg::Scalar(Scalar::i32(i32::MIN))];
    g.add_launch(k, Launch::linear(1, 256), &args, &[]).unwrap();
    g.add_launch(k, Launch::linear(1, 256), &args, &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    let f = &fused_for(&plan, &gs)[0];
    assert!(
        f.source.contains("k(ostinato_fused_ptr{p0}, __uint_as_float(3204448256u), (long long)18446744073709551614ull, __longlong_as_double((long long)4607182418800017408ull), (int)2147483648u)"),
        "{}",
        f.source
    );
}

/// Groups are disjoint, of two nodes or more; no edge joins two lanes of a group; each lane is in
/// plan order along one plan lane.
fn check_invariants(plan: &Plan, gs: &[Group]) {
    let mut seen = BTreeSet::new();
    let lanes = plan.lanes();
    for gr in gs {
        assert!(gr.len() >= 2);
        for (b, lane) in gr.lanes.iter().enumerate() {
            assert!(lane.windows(2).all(|w| lanes.lane_of(w[0]) == lanes.lane_of(w[1]) && lanes.index_in_lane(w[0]) < lanes.index_in_lane(w[1])));
            for &v in lane {
                assert!(seen.insert(v), "n{v} in two groups");
                for (c, other) in gr.lanes.iter().enumerate() {
                    if c != b {
                        assert!(other.iter().all(|w| plan.edge(v, *w).is_none()), "an edge from n{v} to another lane of its group");
                    }
                }
            }
        }
    }
}

/// Runs `plan`'s nodes on the host in the order the fused plan runs them — each group where the
/// rewrite put it, its lanes one after the other (forwards or backwards: blocks run in any order) —
/// and returns every root buffer's bytes.
fn run_fused_order(plan: &Plan, prog: &RandomProgram, gs: &[Group], backwards: bool) -> Vec<(ostinato::BufferId, Vec<u8>)> {
    let rw = rewrite::rewrite(plan, gs, &fused_for(plan, gs)).unwrap();
    let mut by_new: Vec<Vec<NodeId>> = vec![Vec::new(); rw.graph.nodes().len()];
    let in_group: BTreeSet<NodeId> = gs.iter().flat_map(Group::nodes).collect();
    for v in 0..plan.node_count() {
        if !in_group.contains(&NodeId(v as u32)) {
            by_new[rw.node_of[v].index()].push(NodeId(v as u32));
        }
    }
    for gr in gs {
        let first = rw.node_of[gr.lanes[0][0].index()];
        let mut lanes: Vec<&Vec<NodeId>> = gr.lanes.iter().collect();
        if backwards {
            lanes.reverse();
        }
        by_new[first.index()] = lanes.into_iter().flatten().copied().collect();
    }
    let g = plan.graph();
    let mut seq = g.without_nodes();
    for v in by_new.into_iter().flatten() {
        match &g.node(v).op {
            NodeOp::Kernel { kernel, launch, args } => seq.add_launch(*kernel, *launch, args, &[]).map(|_| ()),
            NodeOp::Copy { src, dst } => seq.add_copy(*src, *dst, &[]).map(|_| ()),
            NodeOp::Fill { dst, value } => seq.add_fill(*dst, *value, &[]).map(|_| ()),
            NodeOp::Collective { op, dtype, send, recv } => seq.add_collective(*op, *dtype, send, recv, &[]).map(|_| ()),
        }
        .unwrap();
    }
    let p = Plan::compile(&seq).unwrap();
    serial_result(&p, prog, 1).unwrap()
}

#[test]
fn random_programs_fused_give_the_oracle_bits_in_any_block_order() {
    let (mut fused_nodes, mut multi_lane, mut total) = (0, 0, 0);
    for seed in 0..150u64 {
        let prog = random_one_block_program(seed, 6 + (seed as usize * 7) % 50);
        for max_lanes in [1, 2, 4] {
            let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
            let want = serial_result(&plan, &prog, 1).unwrap();
            for mode in [FusionMode::Auto, FusionMode::On] {
                let gs = groups(&plan, &all_fusable(&plan), mode);
                check_invariants(&plan, &gs);
                let rw = rewrite::rewrite(&plan, &gs, &fused_for(&plan, &gs)).unwrap();
                // Every edge between two units is still an ordering of the rewritten plan.
                let fused_plan = Plan::compile_with(&rw.graph, plan.options()).unwrap();
                for e in plan.edges() {
                    let (a, b) = (rw.node_of[e.from.index()], rw.node_of[e.to.index()]);
                    assert!(a == b || reaches(&fused_plan, a, b), "seed {seed}: n{} -> n{} lost in the fused plan", e.from, e.to);
                }
                for backwards in [false, true] {
                    assert_eq!(run_fused_order(&plan, &prog, &gs, backwards), want, "seed {seed}, {max_lanes} lanes, {mode:?}, backwards {backwards}");
                }
                fused_nodes += gs.iter().map(Group::len).sum::<usize>();
                multi_lane += gs.iter().filter(|g| g.lanes.len() > 1).count();
                total += plan.node_count();
            }
        }
    }
    assert!(fused_nodes > total / 3 && multi_lane > 20, "{fused_nodes} of {total} nodes fused, {multi_lane} groups of several lanes");
}

fn reaches(plan: &Plan, from: NodeId, to: NodeId) -> bool {
    let mut stack = vec![from];
    let mut seen = vec![false; plan.node_count()];
    while let Some(u) = stack.pop() {
        if u == to {
            return true;
        }
        for &w in plan.succs(u) {
            if !std::mem::replace(&mut seen[w as usize], true) {
                stack.push(NodeId(w));
            }
        }
    }
    false
}

/// Whether NVRTC is found; where not, `test` is noted as skipped.
fn nvrtc_found(test: &str) -> bool {
    let found = ostinato_cuda_code::nvrtc::version().is_ok();
    if !found {
        ostinato_testkit::skip(&format!("{test}: NVRTC not found (set OSTINATO_NVRTC)"));
    }
    found
}

/// NVRTC's PTX of `source` for sm_90 with `defines`, or `None` (with a note) where NVRTC is missing.
fn nvrtc_ptx(test: &str, source: &str, defines: &[&str]) -> Option<String> {
    if !nvrtc_found(test) {
        return None;
    }
    let mut opts: Vec<String> = vec!["--gpu-architecture=compute_90".into(), "-default-device".into(), "--std=c++17".into()];
    opts.extend(defines.iter().map(|d| d.to_string()));
    Some(ostinato_cuda_code::nvrtc::compile_ptx(source, "fused", &opts).unwrap_or_else(|e| panic!("{e}\n{source}")))
}

/// A kernel that reads the grid through inline PTX (invisible to the `blockIdx` binding), one with a
/// block barrier (a body alone in its block), one with a cluster barrier, one with an early exit, and
/// one that only uses `blockIdx`/`gridDim` from C (a 1-block launch's values, so it fuses).
const PLANTED: &str = r#"
extern "C" __global__ void grid_asm(unsigned* x) { unsigned b; asm("mov.u32 %0, %%ctaid.x;" : "=r"(b)); x[threadIdx.x] = b; }
extern "C" __global__ void barrier(unsigned* x) { __shared__ unsigned s[256]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[255 - threadIdx.x]; }
extern "C" __global__ void cluster_bar(unsigned* x) { x[threadIdx.x] += 1; asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory"); }
extern "C" __global__ void leaves(unsigned* x) { if (x[0] == 7) asm volatile("exit;"); x[threadIdx.x] += 1; }
extern "C" __global__ void grid_c(unsigned* x, unsigned n) { for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += 1; }
extern "C" __global__ void scratch(unsigned* x) { __shared__ unsigned s[64]; s[threadIdx.x & 63] = x[threadIdx.x]; x[threadIdx.x] = s[threadIdx.x & 63] + 1; }
"#;

#[test]
fn bodies_are_certified_from_their_ptx_as_fused() {
    let Some(ptx) = nvrtc_ptx("bodies_are_certified_from_their_ptx_as_fused", &source::check_source(crate::module::BUILTIN_SOURCE), &["-DOST_NO_PDL=1"]) else {
        return;
    };
    for k in ["add_one", "mix", "ostinato_copy", "ostinato_fill", "add", "silu_mul", "rope", "kv_store"] {
        assert_eq!(ostinato_cuda_code::ptx::fused_body(&ptx, k).map(|b| b.uses_shared), Ok(false), "{k}");
    }
    for k in ["add_one", "mix", "add"] {
        assert_eq!(ostinato_cuda_code::ptx::fused_body(&ptx, k).map(|b| b.block_barrier), Ok(None), "{k}");
    }
    for k in ["rmsnorm", "attention"] {
        let body = ostinato_cuda_code::ptx::fused_body(&ptx, k).unwrap();
        assert!(body.block_barrier.is_some_and(|b| b.contains("bar.sync")), "{k}: a block barrier, so a body alone in its block");
    }
    let Some(planted) = nvrtc_ptx("bodies_are_certified_from_their_ptx_as_fused", &source::check_source(PLANTED), &["-DOST_NO_PDL=1"]) else { return };
    let e = |k: &str| ostinato_cuda_code::ptx::fused_body(&planted, k).unwrap_err();
    assert!(e("grid_asm").contains("%ctaid") && e("grid_asm").contains("uses the grid"), "{}", e("grid_asm"));
    let barrier = ostinato_cuda_code::ptx::fused_body(&planted, "barrier").unwrap();
    assert!(barrier.uses_shared && barrier.block_barrier.is_some_and(|b| b.contains("bar.sync")), "a block barrier: a body alone in its block");
    assert!(e("cluster_bar").contains("barrier.cluster"), "{}", e("cluster_bar"));
    assert!(e("leaves").contains("exit"), "{}", e("leaves"));
    assert_eq!(ostinato_cuda_code::ptx::fused_body(&planted, "grid_c").map(|b| b.uses_shared), Ok(false), "C's blockIdx and gridDim are a 1-block launch's");
    assert_eq!(
        ostinato_cuda_code::ptx::fused_body(&planted, "scratch"),
        Ok(ostinato_cuda_code::ptx::FusedBody { uses_shared: true, static_shared_bytes: 256, ..Default::default() })
    );
    assert!(ostinato_cuda_code::ptx::fused_body(&planted, "nope").unwrap_err().contains("no `.entry nope`"));
}

#[test]
fn generated_kernels_compile_and_wait_before_touching_memory() {
    let plan = chains(4, 941, 1);
    let gs = groups(&plan, &all_fusable(&plan), FusionMode::Auto);
    let bars: Vec<Vec<bool>> = gs[0].lanes.iter().map(|l| barriers(&plan, l, |_| false)).collect();
    let f = generate(&plan, &gs[0], "ostinato_fused_0", crate::module::BUILTIN_SOURCE, &bars, &|k| plan.graph().kernel(k).name.clone(), None);
    assert!(
        f.source.contains("#pragma unroll 8\n      for (unsigned r = 0; r < 940u; ++r) { __syncthreads(); add_one(ostinato_fused_ptr{p3}, 256u); }"),
        "{}",
        f.source
    );
    for define in ["-DOST_TRIGGER=3", "-DOST_TRIGGER=1", "-DOST_NO_PDL=1"] {
        let Some(ptx) = nvrtc_ptx("generated_kernels_compile_and_wait_before_touching_memory", &f.source, &[define]) else { return };
        let waits = ptx.contains("griddepcontrol.wait");
        assert_eq!(waits, define != "-DOST_NO_PDL=1", "{define}");
        if waits {
            assert_eq!(ostinato_cuda_code::ptx::pre_wait(&ptx, source::FUSED_ENTRY, |_| true).map(|p| p.reads), Ok(vec![]), "{define}: certified PDL-capable");
        }
        assert!(ptx.contains("%ctaid.x"), "four lanes: the block picks its lane");
        // Each lane's 940 repeated calls are a loop unrolled 8 times, with a remainder of 4 calls: at
        // most 12 barriers a lane, far from 941 copies (NVRTC may also share code between lanes).
        let bars = ptx.lines().filter(|l| l.contains("bar.sync")).count();
        assert!(bars <= 4 * 2 * 8, "the chains are loops, not 941 copies: {bars} barriers");
    }
}

/// `len` add_one nodes of `blocks` blocks over `blocks · 256` floats, each declaring block `b`'s 1 KiB.
fn tiled_chain(len: usize, blocks: u32) -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", u64::from(blocks) * 1024).unwrap();
    let k = add_one(&mut g);
    let row = ostinato::TileMap::linear(1024, 1024).unwrap();
    for _ in 0..len {
        let args = [Arg::Whole(x), Arg::Scalar(Scalar::u32(blocks * 256))];
        g.add_launch_tiled(k, Launch::linear(blocks, 256), &args, &[("x", row.clone())], &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

#[test]
fn a_block_local_chain_of_many_blocks_fuses_into_one_kernel_of_its_grid() {
    let plan = tiled_chain(941, 8192);
    let multi = launches_fusable(&plan);
    let gs = groups(&plan, &multi, FusionMode::Auto);
    assert_eq!(gs.iter().map(|g| (g.lanes.len(), g.len())).collect::<Vec<_>>(), [(1, 941)]);
    let f = &fused_for(&plan, &gs)[0];
    assert_eq!(f.launch.grid, [8192, 1, 1], "the fused kernel has the nodes' grid");
    assert!(!f.source.contains("#define blockIdx"), "bodies see the real grid: {}", f.source);
    assert!(!f.source.contains("switch (blockIdx.x)"));
    let f = generate(
        &plan,
        &gs[0],
        "ostinato_fused_0",
        crate::module::BUILTIN_SOURCE,
        &[barriers(&plan, &gs[0].lanes[0], |_| false)],
        &|k| plan.graph().kernel(k).name.clone(),
        None,
    );
    assert!(f.staged.is_empty() && !f.source.contains("ost_tile"), "no staging asked");
    let Some(ptx) = nvrtc_ptx("a_block_local_chain_of_many_blocks_fuses_into_one_kernel_of_its_grid", &f.source, &["-DOST_TRIGGER=3"]) else { return };
    assert!(ptx.contains("%ctaid.x") && ptx.contains("%nctaid.x"), "the bodies' grid-stride loop reads the real grid");
    assert_eq!(ostinato_cuda_code::ptx::pre_wait(&ptx, source::FUSED_ENTRY, |_| true).map(|p| p.reads), Ok(vec![]));
}

#[test]
fn a_chain_of_add_one_needs_no_barrier_between_its_bodies_and_a_shifted_view_keeps_one() {
    // add_one's thread L takes elements L + k·N of its slice (`ostinato::builtins::thread_footprint`):
    // each body touches only what the same thread touched before.
    let footprint = |plan: &Plan, v: NodeId, p: usize| match &plan.graph().node(v).op {
        NodeOp::Kernel { kernel, .. } => ostinato::builtins::thread_footprint(&plan.graph().kernel(*kernel).name, p),
        _ => None,
    };
    let plan = tiled_chain(941, 8192);
    let run: Vec<NodeId> = plan.order().to_vec();
    let bars = barriers_with(&plan, &run, |_| false, |u, v| ostinato::fusion::thread_local_pair(&plan, u, v, |w, p| footprint(&plan, w, p)));
    assert!(bars.iter().all(|b| !b), "no barrier in a chain of add_one on one slice");
    let group = Group { key: FuseKey { block: [256, 1, 1], grid: [8192, 1, 1], source: 0 }, lanes: vec![run], components: None };
    let f = generate(&plan, &group, "ostinato_fused_0", crate::module::BUILTIN_SOURCE, &[bars], &|k| plan.graph().kernel(k).name.clone(), None);
    let entry = &f.source[f.source.find("void __launch_bounds__(256) ostinato_fused(").expect("the fused entry")..];
    assert!(!entry.contains("__syncthreads"), "{entry}");
    assert!(entry.contains("for (unsigned r = 0; r < 941u; ++r) { add_one("), "{entry}");
    // The same chain with every other body on a view one element further: thread L's element of one
    // body is thread L+1's of the next, so each ordering keeps its barrier.
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4 * 1025).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for i in 0..8u64 {
        let s = Slice { buffer: x, offset: 4 * (i % 2), len: 4 * 1024 };
        g.add_launch(k, Launch::new([4, 1, 1], [256, 1, 1]), &[Arg::Buffer(s), Arg::Scalar(Scalar::u32(1024))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let run: Vec<NodeId> = plan.order().to_vec();
    let bars = barriers_with(&plan, &run, |_| false, |u, v| ostinato::fusion::thread_local_pair(&plan, u, v, |w, p| footprint(&plan, w, p)));
    assert_eq!(bars, [false, true, true, true, true, true, true, true]);
}

/// Staging with every body plain and attributed, and every map verified where `verified` says so.
fn staged_for(plan: &Plan, gr: &Group, verified: &dyn Fn(NodeId, usize) -> bool, budget: u64) -> source::FusedKernel {
    let bodies = super::stage::Bodies { plain: verified, attributed: &|_| true };
    let staging = source::Staging { bodies, budget };
    generate(
        plan,
        gr,
        "ostinato_fused_0",
        crate::module::BUILTIN_SOURCE,
        &[barriers(plan, &gr.lanes[0], |_| false)],
        &|k| plan.graph().kernel(k).name.clone(),
        Some(&staging),
    )
}

#[test]
fn a_block_local_chain_stages_its_tiles_in_shared_memory_where_every_rule_holds() {
    let plan = tiled_chain(941, 8192);
    let multi = launches_fusable(&plan);
    let gs = groups(&plan, &multi, FusionMode::Auto);
    let f = staged_for(&plan, &gs[0], &|_, _| true, 32 * 1024);
    assert_eq!(f.staged, [super::stage::Staged { param: 0, base: 0, stride: [1024, 0, 0], len: 1024, write_back: true }]);
    for line in [
        "__shared__ __align__(16) unsigned char ost_tile0[1024];",
        "const unsigned long long ost_at0 = 0ull + 1024ull * blockIdx.x + 0ull * blockIdx.y + 0ull * blockIdx.z;",
        "ostinato_stage_copy(ost_tile0, (const unsigned char*)p0 + ost_at0, 1024ull);",
        "void* const p0 = (void*)((unsigned long long)ost_tile0 - ost_at0);",
        "ostinato_stage_copy((unsigned char*)p0 + ost_at0, ost_tile0, 1024ull);",
    ] {
        assert!(f.source.contains(line), "{line}\n{}", f.source);
    }
    // Each rule turns it off: a map not verified (or a body not plain), too small a budget.
    assert!(staged_for(&plan, &gs[0], &|v, _| v.0 != 500, 32 * 1024).staged.is_empty(), "one member's map vouched");
    assert!(staged_for(&plan, &gs[0], &|_, _| true, 1023).staged.is_empty(), "over the budget");
    let Some(ptx) = nvrtc_ptx("a_block_local_chain_stages_its_tiles_in_shared_memory_where_every_rule_holds", &f.source, &["-DOST_TRIGGER=3"]) else { return };
    // The copies are the only device-memory accesses; the members read and write through the generic
    // address of the block's copy (no `.global` load or store in the chain's loop).
    let global = ptx.lines().filter(|l| l.contains("ld.global") || l.contains("st.global")).count();
    assert!((1..=4).contains(&global), "{global} global accesses: the two copies\n{ptx}");
    assert!(ptx.lines().any(|l| l.trim_start().starts_with("ld.f32") || l.contains("ld.shared.f32")), "the members' loads: generic or shared\n{ptx}");
    assert_eq!(ostinato_cuda_code::ptx::pre_wait(&ptx, source::FUSED_ENTRY, |_| true).map(|p| p.reads), Ok(vec![]), "the copy in runs after the wait");
}

#[test]
fn misaligned_tiles_are_not_staged() {
    let staged = |stride: u64, len: u64, blocks: u32, offset: u64| {
        let mut g = Graph::new();
        let x = g.add_buffer("x", u64::from(blocks) * 1024 + 4096).unwrap();
        let k = add_one(&mut g);
        let map = ostinato::TileMap::linear(stride, len).unwrap();
        for _ in 0..3 {
            let s = Slice { buffer: x, offset, len: u64::from(blocks) * 1024 };
            let args = [Arg::Buffer(s), Arg::Scalar(Scalar::u32(blocks * 256))];
            g.add_launch_tiled(k, Launch::linear(blocks, 256), &args, &[("x", map.clone())], &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let fusable: Vec<Option<Fusable>> = plan
            .graph()
            .nodes()
            .iter()
            .map(|n| match &n.op {
                NodeOp::Kernel { launch, .. } => {
                    Some(Fusable { key: FuseKey { block: launch.block, grid: launch.grid, source: 0 }, uses_shared: false, alone: false })
                }
                _ => None,
            })
            .collect();
        let gs = groups(&plan, &fusable, FusionMode::On);
        gs.first().map(|gr| staged_for(&plan, gr, &|_, _| true, 32 * 1024).staged.len())
    };
    assert_eq!(staged(1024, 1024, 8, 0), Some(1), "the rule's own case");
    assert_eq!(staged(1024, 1024, 8, 4), Some(0), "a tile 4 bytes off 16");
    assert_eq!(staged(1024, 1008, 8, 0), Some(1), "a shorter tile, still 16-byte multiples");
    assert_eq!(staged(1024, 1000, 8, 0), Some(0), "a length not a multiple of 16");
}

/// A spread over `4 × tiles` blocks of 64 threads and a gather of `tiles` blocks, `rounds` rounds, the
/// spread's salt the round + 1 (the benchmark's sparse row, small).
fn spread_gather(tiles: u32, rounds: u32) -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 256 * 4 * u64::from(tiles)).unwrap();
    let y = g.add_buffer("y", 256 * u64::from(tiles)).unwrap();
    let s = KernelSig::new("spread").buffer("x", Access::ReadWrite).buffer("y", Access::Read).scalar("salt", ScalarType::U32);
    let ks = g.add_kernel(s).unwrap();
    let kg = g.add_kernel(KernelSig::new("gather").buffer("y", Access::ReadWrite).buffer("x", Access::Read)).unwrap();
    let spread = [
        ("x", ostinato::TileMap::new(vec![ostinato::TileRange::span(0, [256, 1024, 0], 256)]).unwrap()),
        ("y", ostinato::TileMap::new(vec![ostinato::TileRange::span(0, [0, 256, 0], 256)]).unwrap()),
    ];
    let gather = [("y", ostinato::TileMap::linear(256, 256).unwrap()), ("x", ostinato::TileMap::linear(1024, 1024).unwrap())];
    for r in 0..rounds {
        let args = [Arg::Whole(x), Arg::Whole(y), Arg::Scalar(Scalar::u32(r + 1))];
        g.add_launch_tiled(ks, Launch::new([4, tiles, 1], [64, 1, 1]), &args, &spread, &[]).unwrap();
        g.add_launch_tiled(kg, Launch::linear(tiles, 64), &[Arg::Whole(y), Arg::Whole(x)], &gather, &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

const SPREAD_GATHER: &str = r#"
extern "C" __global__ void spread(unsigned* x, const unsigned* y, unsigned salt) {
  const unsigned tile = blockIdx.x + gridDim.x * blockIdx.y;
  x[tile * blockDim.x + threadIdx.x] = x[tile * blockDim.x + threadIdx.x] * 3u + y[blockIdx.y * blockDim.x + threadIdx.x] + salt;
}
extern "C" __global__ void gather(unsigned* y, const unsigned* x) {
  unsigned s = 0;
  for (unsigned k = 0; k < 4u; ++k) s += x[(blockIdx.x * 4u + k) * blockDim.x + threadIdx.x];
  y[blockIdx.x * blockDim.x + threadIdx.x] = y[blockIdx.x * blockDim.x + threadIdx.x] * 5u + s;
}
"#;

#[test]
fn a_group_of_components_runs_each_members_blocks_of_its_component_in_a_loop_over_rounds() {
    let plan = spread_gather(8, 50);
    let fusable = launches_fusable(&plan);
    assert!(groups(&plan, &fusable, FusionMode::Auto).is_empty(), "other grids: nothing fuses block by block");
    let gs = component_groups(&plan, &fusable, &vec![false; plan.node_count()], FusionMode::Auto);
    assert_eq!(gs.len(), 1);
    let bars = barriers(&plan, &gs[0].lanes[0], |_| false);
    assert!(!bars[0] && bars[1..].iter().all(|b| *b), "a barrier between every two dependent members");
    let f = components::generate_components(&plan, &gs[0], "ostinato_fused_0", SPREAD_GATHER, &bars, &|_| false, &|k| plan.graph().kernel(k).name.clone());
    let body = f.source.split("const unsigned long long ost_c = blockIdx.x;\n").nth(1).unwrap();
    assert_eq!(
        body,
        "  for (unsigned ost_k = 0; ost_k < 4u; ++ost_k) { ost_view_set(ost_c * 4ull + ost_k * 1ull, 4u, 8u, 1u); spread(ostinato_fused_ptr{p0}, ostinato_fused_ptr{p1}, 1u); }\n\
         \x20 for (unsigned ost_r = 0; ost_r < 49u; ++ost_r) {\n\
         \x20   __syncthreads();\n\
         \x20   ost_view_set(ost_c * 1ull + 0ull * 0ull, 8u, 1u, 1u); gather(ostinato_fused_ptr{p1}, ostinato_fused_ptr{p0});\n\
         \x20   __syncthreads();\n\
         \x20   for (unsigned ost_k = 0; ost_k < 4u; ++ost_k) { ost_view_set(ost_c * 4ull + ost_k * 1ull, 4u, 8u, 1u); spread(ostinato_fused_ptr{p0}, ostinato_fused_ptr{p1}, (2u + 1u * ost_r)); }\n\
         \x20 }\n\
         \x20 __syncthreads();\n\
         \x20 ost_view_set(ost_c * 1ull + 0ull * 0ull, 8u, 1u, 1u); gather(ostinato_fused_ptr{p1}, ostinato_fused_ptr{p0});\n\
         \x20 if (OST_TRIGGER == 2) OSTINATO_FUSED_TRIGGER();\n\
         }\n",
        "{}",
        f.source
    );
    assert_eq!(f.launch, Launch::linear(8, 64));
    for define in ["-DOST_TRIGGER=3", "-DOST_NO_PDL=1"] {
        let Some(ptx) = nvrtc_ptx("a_group_of_components_runs_each_members_blocks_of_its_component_in_a_loop_over_rounds", &f.source, &[define]) else {
            return;
        };
        assert!(ptx.contains(".shared") && ptx.contains("%ctaid.x"), "{define}: the view in shared memory, the component from the block");
    }
}

/// Compiles fused kernel `f` with NVRTC in the three PDL builds and checks each: certified PDL-capable
/// where it waits, and the contract against its fused signature; returns the builds compiled, each
/// failure pushed to `failures` with `what`.
fn compile_and_check(f: &FusedKernel, what: &str, failures: &mut Vec<String>) -> usize {
    use ostinato_cuda_code::contract::{read_ptx, verify};
    use ostinato_cuda_code::{compile, PdlTrigger};
    let mut compiled = 0;
    for trigger in [PdlTrigger::AfterWait, PdlTrigger::AtEntry, PdlTrigger::Disabled] {
        let what = format!("{what}, {}", trigger.as_str());
        let c = match compile::compile(&f.sig.name, &f.source, "compute_90", trigger) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{what}: {e}\n{}", f.source));
                continue;
            }
        };
        compiled += 1;
        if trigger != PdlTrigger::Disabled {
            let reads = ostinato_cuda_code::ptx::pre_wait(&c.ptx, source::FUSED_ENTRY, |_| true).map(|p| p.reads);
            if reads != Ok(vec![]) {
                failures.push(format!("{what}: not certified PDL-capable: {reads:?}"));
            }
        }
        match read_ptx(&c.ptx, &f.sig.name, &[], f.entry, &f.sig) {
            Ok(mut report) => {
                if let Err(e) = verify(&f.sig, &mut report) {
                    failures.push(format!("{what}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    compiled
}

/// The fused kernels of random one-block programs (mix over views and offsets, copies, fills, a slot;
/// grouped as `auto` and `on` over 1 and 4 lanes) compile with NVRTC in the three PDL builds, wait
/// before touching memory where they wait, and pass the kernel contract against their fused signature:
/// what instantiation compiles on a GPU, checked without one (skips where NVRTC is not found).
#[test]
fn random_programs_fused_kernels_compile_and_pass_the_contract() {
    if !nvrtc_found("random_programs_fused_kernels_compile_and_pass_the_contract") {
        return;
    }
    let (mut compiled, mut failures) = (0, Vec::new());
    for seed in 0..12u64 {
        let prog = random_one_block_program(1000 + seed, 8 + (seed as usize * 5) % 30);
        for max_lanes in [1, 4] {
            let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes }).unwrap();
            for mode in [FusionMode::Auto, FusionMode::On] {
                for (i, gr) in groups(&plan, &all_fusable(&plan), mode).iter().enumerate() {
                    let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(&plan, l, |_| false)).collect();
                    let f = generate(
                        &plan,
                        gr,
                        &format!("ostinato_fused_{i}"),
                        crate::module::BUILTIN_SOURCE,
                        &bars,
                        &|k| plan.graph().kernel(k).name.clone(),
                        None,
                    );
                    compiled += compile_and_check(&f, &format!("seed {seed}, {max_lanes} lanes, {mode:?}, group {i}"), &mut failures);
                }
            }
        }
    }
    eprintln!("{compiled} fused builds compiled and checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled > 50, "only {compiled} fused builds: the programs barely fused");
}

/// The same for random tiled programs (`mix` on 1-D and 2-D grids over views at any offset): each
/// block-local group generated with every tile staged that the rules allow (the maps taken as
/// verified) and without staging, and each group of components.
#[test]
fn random_tiled_programs_fused_kernels_compile_and_pass_the_contract() {
    if !nvrtc_found("random_tiled_programs_fused_kernels_compile_and_pass_the_contract") {
        return;
    }
    let (mut compiled, mut staged, mut components, mut failures) = (0, 0, 0, Vec::new());
    for seed in 0..24u64 {
        let prog = ostinato_testkit::tiled_graphs::random_tiled_program(2000 + seed, 6 + (seed as usize * 3) % 12);
        let plan = Plan::compile(&prog.graph).unwrap();
        let fusable = launches_fusable(&plan);
        for mode in [FusionMode::Auto, FusionMode::On] {
            let gs = groups(&plan, &fusable, mode);
            let mut taken = vec![false; plan.node_count()];
            for (i, gr) in gs.iter().enumerate() {
                gr.nodes().for_each(|v| taken[v.index()] = true);
                for budget in [0, 32 * 1024] {
                    let f = staged_for(&plan, gr, &|_, _| true, budget);
                    staged += f.staged.len();
                    compiled += compile_and_check(&f, &format!("seed {seed}, {mode:?}, group {i}, staging budget {budget}"), &mut failures);
                }
            }
            for (i, gr) in component_groups(&plan, &fusable, &taken, mode).iter().enumerate() {
                let bars = barriers(&plan, &gr.lanes[0], |_| false);
                let f = components::generate_components(&plan, gr, "ostinato_fused_0", crate::module::BUILTIN_SOURCE, &bars, &|_| false, &|k| {
                    plan.graph().kernel(k).name.clone()
                });
                components += 1;
                compiled += compile_and_check(&f, &format!("seed {seed}, {mode:?}, components {i}"), &mut failures);
            }
        }
    }
    eprintln!("{compiled} fused builds compiled and checked ({staged} tiles staged, {components} groups of components)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled > 50 && staged > 0, "only {compiled} fused builds, {staged} staged tiles: the programs barely fused");
}

/// Ten independent `add_one` launches of 64 blocks each (own buffers): `auto` and `on` put them side
/// by side in one kernel of `10 × 64` blocks whose block `l · 64 + b` runs launch `l`'s body as its
/// block `b`, worked out from the fused block index in registers. The kernel compiles and passes the
/// contract; random tiled programs' side-by-side groups too, under both modes.
#[test]
fn independent_multi_block_launches_sit_side_by_side_in_one_kernel() {
    let mut g = Graph::new();
    let k = add_one(&mut g);
    for i in 0..10 {
        let x = g.add_buffer(format!("x{i}"), 64 * 1024).unwrap();
        g.add_launch(k, Launch::linear(64, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(64 * 256))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let fusable = launches_fusable(&plan);
    let gs = all_groups(&plan, &fusable, FusionMode::Auto);
    assert_eq!(gs, all_groups(&plan, &fusable, FusionMode::On), "one launch a lane either way");
    assert_eq!(gs.iter().map(|gr| (gr.lanes.len(), gr.len())).collect::<Vec<_>>(), [(10, 10)], "{gs:?}");
    let lanes = gs[0].lanes.len();
    let bars: Vec<Vec<bool>> = gs[0].lanes.iter().map(|l| barriers(&plan, l, |_| false)).collect();
    let f = generate(&plan, &gs[0], "ostinato_fused_0", crate::module::BUILTIN_SOURCE, &bars, &|k| plan.graph().kernel(k).name.clone(), None);
    assert_eq!(f.launch.grid, [64 * lanes as u32, 1, 1]);
    assert!(f.source.contains("return (unsigned)((unsigned long long)blockIdx.x % 64ull);"), "{}", f.source);
    assert!(f.source.contains("#define blockIdx (::make_uint3(ost_side_block() % 64u, 0u, 0u))"), "{}", f.source);
    assert!(f.source.contains("switch ((unsigned)((unsigned long long)blockIdx.x / 64ull))") && !f.source.contains("ost_view"), "{}", f.source);
    if !nvrtc_found("independent_multi_block_launches_sit_side_by_side_in_one_kernel") {
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = compile_and_check(&f, "ten side by side", &mut failures);
    let mut sided = 0;
    for seed in 0..24u64 {
        let prog = ostinato_testkit::tiled_graphs::random_tiled_program(3000 + seed, 6 + (seed as usize * 3) % 12);
        let plan = Plan::compile(&prog.graph).unwrap();
        for mode in [FusionMode::Auto, FusionMode::On] {
            for (i, gr) in all_groups(&plan, &launches_fusable(&plan), mode).iter().enumerate() {
                if !gr.is_side_by_side() {
                    continue;
                }
                sided += 1;
                let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(&plan, l, |_| false)).collect();
                let f = generate(&plan, gr, "ostinato_fused_0", crate::module::BUILTIN_SOURCE, &bars, &|k| plan.graph().kernel(k).name.clone(), None);
                compiled += compile_and_check(&f, &format!("seed {seed}, {mode:?}, group {i} side by side"), &mut failures);
            }
        }
    }
    eprintln!("{compiled} fused builds compiled and checked, {sided} random groups side by side");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(sided >= 5, "only {sided} random groups side by side");
}

/// Bodies with a block barrier (`ostinato_testkit::barrier_bodies`, certified as such from their PTX)
/// fuse only alone in their blocks: ten independent launches of 64 blocks side by side, six one-block
/// launches as six lanes, the dependent pair apart (its first beside the six: one kernel waiting for
/// nothing, as they do, in both modes); each kernel
/// compiles and passes the contract with its barriers.
#[test]
fn bodies_with_a_block_barrier_fuse_only_alone_in_their_blocks() {
    use ostinato_testkit::barrier_bodies::{BarrierProgram, BLOCK_SUM_CU};
    let plan = Plan::compile(&BarrierProgram::new().graph).unwrap();
    let alone: Vec<Option<Fusable>> = launches_fusable(&plan).into_iter().map(|f| f.map(|f| Fusable { alone: true, ..f })).collect();
    let shape = |gs: &[Group]| gs.iter().map(|g| (g.lanes.len(), g.key.grid[0], g.lanes.iter().all(|l| l.len() == 1))).collect::<Vec<_>>();
    let (auto, on) = (all_groups(&plan, &alone, FusionMode::Auto), all_groups(&plan, &alone, FusionMode::On));
    assert_eq!(shape(&auto), [(10, 64, true), (7, 1, true)], "{auto:?}");
    assert_eq!(shape(&on), [(10, 64, true), (7, 1, true)], "{on:?}");
    let Some(ptx) = nvrtc_ptx("bodies_with_a_block_barrier_fuse_only_alone_in_their_blocks", &source::check_source(BLOCK_SUM_CU), &["-DOST_NO_PDL=1"]) else {
        return;
    };
    assert!(ostinato_cuda_code::ptx::fused_body(&ptx, "block_sum").unwrap().block_barrier.is_some_and(|b| b.contains("bar.sync")));
    let mut failures = Vec::new();
    for (i, gr) in auto.iter().chain(&on).enumerate() {
        let bars: Vec<Vec<bool>> = gr.lanes.iter().map(|l| barriers(&plan, l, |_| false)).collect();
        let f = generate(&plan, gr, "ostinato_fused_0", BLOCK_SUM_CU, &bars, &|k| plan.graph().kernel(k).name.clone(), None);
        assert!(!f.source.contains("__syncthreads(); block_sum"), "no barrier between bodies: {}", f.source);
        assert_eq!(compile_and_check(&f, &format!("group {i}"), &mut failures), 3);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
