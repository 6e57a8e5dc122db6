use ostinato::{Access, Arg, Graph, KernelSig, Launch, NodeId, Plan, Scalar, ScalarType, TileMap, TileRange};

use super::source::{generate, wrapper_sig, Placement, Wrapper};
use super::*;

/// A 1,024-block producer (block b writes floats 256b..256b+255), a 64-block consumer whose block j
/// reads producer blocks 16j..16j+15, then the producer again (overwriting what the consumer read).
fn sparse_chain() -> Plan {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024 * 1024).unwrap();
    let y = g.add_buffer("y", 64 * 1024).unwrap();
    let produce = g.add_kernel(KernelSig::new("produce").buffer("x", Access::Write).scalar("n", ScalarType::U32)).unwrap();
    let consume = g.add_kernel(KernelSig::new("consume").buffer("y", Access::Write).buffer("x", Access::Read)).unwrap();
    let p_tiles = [("x", TileMap::linear(1024, 1024).unwrap())];
    let c_tiles = [("y", TileMap::linear(1024, 1024).unwrap()), ("x", TileMap::linear(16 * 1024, 16 * 1024).unwrap())];
    for _ in 0..2 {
        g.add_launch_tiled(produce, Launch::linear(1024, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(7))], &p_tiles, &[]).unwrap();
        g.add_launch_tiled(consume, Launch::linear(64, 256), &[Arg::Whole(y), Arg::Whole(x)], &c_tiles, &[]).unwrap();
    }
    Plan::compile(&g).unwrap()
}

#[test]
fn a_sparse_consumer_waits_for_its_sixteen_producer_blocks_and_the_next_producer_for_one_reader() {
    let plan = sparse_chain();
    // `auto` hands off nowhere (measured: docs/fences.md).
    assert!(choose(&plan, &[true; 4], &[true; 4], HandoffMode::Auto).is_empty());
    let h = choose(&plan, &[true; 4], &[true; 4], HandoffMode::On);
    assert_eq!(h.roles[0], Role::Publish);
    let Role::Consume(t) = &h.roles[1] else { panic!("{:?}", h.roles[1]) };
    assert_eq!(t.producers, vec![NodeId(0)]);
    assert_eq!(t.of(3).collect::<Vec<_>>(), (48..64).map(|b| (NodeId(0), b)).collect::<Vec<_>>());
    // Node 2 overwrites x (WAW with node 0, WAR with node 1): it waits for both.
    let on = choose(&plan, &[true; 4], &[true; 4], HandoffMode::On);
    let Role::Consume(t) = &on.roles[2] else { panic!("{:?}", on.roles[2]) };
    assert_eq!(t.producers, vec![NodeId(0), NodeId(1)]);
    // Block 17 of node 2 waits for block 17 of node 0 (block-local) and block 1 of node 1 (its reader).
    assert_eq!(t.of(17).collect::<Vec<_>>(), vec![(NodeId(0), 17), (NodeId(1), 1)]);
    assert!(choose(&plan, &[true; 4], &[true; 4], HandoffMode::Off).is_empty());
    // A producer that cannot be wrapped: no hand-off into its consumer.
    let h = choose(&plan, &[false, true, true, true], &[true; 4], HandoffMode::On);
    assert!(!matches!(h.roles[1], Role::Consume(_)), "its producer cannot publish");
}

#[test]
fn the_wait_table_is_offsets_then_entries() {
    let t = WaitTable { producers: vec![NodeId(4), NodeId(2)], offsets: vec![0, 2, 3], entries: vec![5, (1 << 24) | 7, 9] };
    let words: Vec<u32> = t.bytes().chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(words, vec![0, 2, 3, 5, (1 << 24) | 7, 9]);
    assert_eq!(t.of(0).collect::<Vec<_>>(), vec![(NodeId(4), 5), (NodeId(2), 7)]);
}

const BODIES: &str = r#"
#include "ostinato.cuh"
extern "C" __global__ void produce(float* x, unsigned n) {
  OST_ENTRY();
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; x[i] = (float)(i * n);
  OST_EXIT();
}
/* A block reduction with a barrier, an early return, and a weight read before its wait. */
extern "C" __global__ void __launch_bounds__(256, 2) consume(float* y, const float* x, const float* w) {
  __shared__ float part[256];
  float wt = w[threadIdx.x];
  OST_ENTRY();
  unsigned j = blockIdx.x * blockDim.x + threadIdx.x; float s = 0.f;
  for (unsigned k = 0; k < 16; ++k) s += x[(j / 256) * 4096 + k * 256 + (j % 256)];
  part[threadIdx.x] = s * wt;
  __syncthreads();
  if (threadIdx.x >= 128) return;
  y[j] = part[threadIdx.x] + part[threadIdx.x + 128];
  OST_EXIT();
}
"#;

fn compile(test: &str, src: &str) -> Option<String> {
    if ostinato_cuda_code::nvrtc::version().is_err() {
        ostinato_testkit::skip(&format!("{test}: NVRTC not found (set OSTINATO_NVRTC)"));
        return None;
    }
    let opts: Vec<String> = vec!["--gpu-architecture=compute_90".into(), "-default-device".into(), "--std=c++17".into()];
    let with_header = src.replace("#include \"ostinato.cuh\"", ostinato_cuda_code::compile::KERNEL_HEADER);
    Some(ostinato_cuda_code::nvrtc::compile_ptx(&with_header, "handoff", &opts).unwrap_or_else(|e| panic!("{e}\n{src}")))
}

fn entry_text(ptx: &str, name: &str) -> String {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no {name}"));
    let end = ptx[start..].find("\n}").map_or(ptx.len(), |e| start + e);
    ptx[start..end].to_string()
}

#[test]
fn wrappers_compile_wait_for_their_tiles_and_publish_with_release() {
    let consume = KernelSig::new("consume").buffer("y", Access::Write).buffer("x", Access::Read).buffer("w", Access::Read);
    let produce = KernelSig::new("produce").buffer("x", Access::Write).scalar("n", ScalarType::U32);
    let ws = [
        Wrapper { entry: "produce".into(), sig: produce.clone(), producers: 0, placement: Placement::BeforeBody, bounds: (None, None) },
        Wrapper { entry: "consume".into(), sig: consume.clone(), producers: 2, placement: Placement::AtEntry, bounds: (Some(256), Some(2)) },
        Wrapper { entry: "consume".into(), sig: consume.clone(), producers: 1, placement: Placement::BeforeBody, bounds: (Some(256), Some(2)) },
    ];
    let src = generate(BODIES, &ws);
    assert!(
        src.contains("extern \"C\" __global__ void __launch_bounds__(256, 2) ostinato_handoff_2_e_consume(void* a0, void* a1, void* a2, unsigned* ost_self, const unsigned* ost_waits, const unsigned* ost_p0, const unsigned* ost_p1)"),
        "{src}"
    );
    assert_eq!(
        wrapper_sig(&consume, 2, Placement::AtEntry).params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["y", "x", "w", "ost_self", "ost_waits", "ost_p0", "ost_p1"]
    );
    let Some(ptx) = compile("wrappers_compile_wait_for_their_tiles_and_publish_with_release", &src) else { return };
    let at_entry = entry_text(&ptx, "ostinato_handoff_2_e_consume");
    assert!(at_entry.contains(".maxntid 256, 1, 1") && at_entry.contains(".minnctapersm 2"), "the body's launch bounds carried to the wrapper");
    assert!(at_entry.contains("ld.acquire.gpu.global.u32") && at_entry.contains("st.release.gpu.global.u32"), "{at_entry}");
    assert!(at_entry.contains("griddepcontrol.launch_dependents") && at_entry.contains("griddepcontrol.wait"));
    assert!(at_entry.rfind("griddepcontrol.wait") > at_entry.rfind("st.release.gpu"), "a consumer waits for its grid at its end");
    // At OST_ENTRY: the weight read (the certified prefetch) stays before the tile wait (below).
    let before = entry_text(&ptx, "ostinato_handoff_1_w_consume");
    let first_data_read = before.lines().position(|l| l.contains("ld.global") && l.contains(".f32")).unwrap();
    let first_acquire = before.lines().position(|l| l.contains("ld.acquire.gpu")).unwrap();
    assert!(first_acquire < first_data_read, "waits before the body reads anything");
    let at_entry_data = at_entry.lines().position(|l| l.contains("ld.global") && l.contains(".f32")).unwrap();
    assert!(at_entry_data < at_entry.lines().position(|l| l.contains("ld.acquire.gpu")).unwrap());
    let p = entry_text(&ptx, "ostinato_handoff_0_w_produce");
    assert!(p.contains("st.release.gpu.global.u32"), "a publisher publishes");
    assert!(p.find("griddepcontrol.wait") < p.find("st.global.f32"), "a publisher waits for its grid before its body");
    // The kernel contract reads the wrappers as it reads any kernel: the body's declared modes hold,
    // the flags and tables are touched as their vouched modes say.
    for (entry, sig) in [
        ("ostinato_handoff_2_e_consume", wrapper_sig(&consume, 2, Placement::AtEntry)),
        ("ostinato_handoff_1_w_consume", wrapper_sig(&consume, 1, Placement::BeforeBody)),
        ("ostinato_handoff_0_w_produce", wrapper_sig(&produce, 0, Placement::BeforeBody)),
    ] {
        let mut report = ostinato_cuda_code::contract::read_ptx(&ptx, "handoff", &[], entry, &sig).unwrap();
        ostinato_cuda_code::contract::verify(&sig, &mut report).unwrap_or_else(|e| panic!("{entry}: {e}"));
    }
}

#[test]
fn a_body_with_a_barrier_is_a_hand_off_body_and_an_exit_is_refused() {
    let planted = format!("{BODIES}\nextern \"C\" __global__ void leaves(float* x) {{ if (x[0] == 7.f) asm volatile(\"exit;\"); x[threadIdx.x] += 1.f; }}\n");
    let Some(ptx) = compile("a_body_with_a_barrier_is_a_hand_off_body_and_an_exit_is_refused", &crate::fusion::source::check_source(&planted)) else { return };
    let b = ostinato_cuda_code::ptx::handoff_body(&ptx, "consume").unwrap();
    assert_eq!((b.max_threads, b.min_blocks), (Some([256, 1, 1]), Some(2)));
    let fused = ostinato_cuda_code::ptx::fused_body(&ptx, "consume").unwrap();
    assert!(fused.block_barrier.is_some_and(|b| b.contains("bar.sync")), "a fused body only alone in its block: it has a block barrier");
    assert!(ostinato_cuda_code::ptx::handoff_body(&ptx, "leaves").unwrap_err().contains("exit"));
    let _ = TileRange::span(0, [0, 0, 0], 1);
}
