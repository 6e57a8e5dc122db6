use ostinato::{Access, Arg, Graph, KernelSig, Launch, NodeId, Plan, Scalar, ScalarType, TileMap, TileRange};

use super::source::{generate, wrapper_sig, Wrapper};
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
    let h = choose(&plan, &[true; 4], HandoffMode::Auto);
    assert_eq!(h.roles[0], Role::Publish);
    let Role::Consume(t) = &h.roles[1] else { panic!("{:?}", h.roles[1]) };
    assert_eq!(t.producers, vec![NodeId(0)]);
    assert_eq!(t.of(3).collect::<Vec<_>>(), (48..64).map(|b| (NodeId(0), b)).collect::<Vec<_>>());
    // Node 2 overwrites x (WAW with node 0, WAR with node 1): it has 1,024 blocks, above auto's limit.
    assert!(h.roles[2] == Role::Publish, "node 2 is above auto's limit");
    let on = choose(&plan, &[true; 4], HandoffMode::On);
    let Role::Consume(t) = &on.roles[2] else { panic!("{:?}", on.roles[2]) };
    assert_eq!(t.producers, vec![NodeId(0), NodeId(1)]);
    // Block 17 of node 2 waits for block 17 of node 0 (block-local) and block 1 of node 1 (its reader).
    assert_eq!(t.of(17).collect::<Vec<_>>(), vec![(NodeId(0), 17), (NodeId(1), 1)]);
    assert!(choose(&plan, &[true; 4], HandoffMode::Off).is_empty());
    // A producer that cannot be wrapped: no hand-off into its consumer.
    let h = choose(&plan, &[false, true, true, true], HandoffMode::On);
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
extern "C" __global__ void produce(float* x, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; x[i] = (float)(i * n);
}
extern "C" __global__ void consume(float* y, const float* x) {
  unsigned j = blockIdx.x * blockDim.x + threadIdx.x; float s = 0.f;
  for (unsigned k = 0; k < 16; ++k) s += x[(j / 256) * 4096 + k * 256 + (j % 256)];
  y[j] = s;
}
"#;

#[test]
fn wrappers_compile_wait_for_their_tiles_and_publish_with_release() {
    let consume = KernelSig::new("consume").buffer("y", Access::Write).buffer("x", Access::Read);
    let produce = KernelSig::new("produce").buffer("x", Access::Write).scalar("n", ScalarType::U32);
    let ws = [Wrapper { entry: "produce".into(), sig: produce.clone(), producers: 0 }, Wrapper { entry: "consume".into(), sig: consume.clone(), producers: 2 }];
    let src = generate(BODIES, &ws);
    assert!(src.contains("extern \"C\" __global__ void ostinato_handoff_2_consume(void* a0, void* a1, unsigned* ost_self, const unsigned* ost_waits, const unsigned* ost_p0, const unsigned* ost_p1)"), "{src}");
    assert_eq!(wrapper_sig(&consume, 2).params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["y", "x", "ost_self", "ost_waits", "ost_p0", "ost_p1"]);
    if ostinato_cuda_code::nvrtc::version().is_err() {
        ostinato_testkit::skip("wrappers_compile_wait_for_their_tiles_and_publish_with_release: NVRTC not found (set OSTINATO_NVRTC)");
        return;
    }
    let opts: Vec<String> = vec!["--gpu-architecture=compute_90".into(), "-default-device".into(), "--std=c++17".into()];
    let ptx = ostinato_cuda_code::nvrtc::compile_ptx(&src, "handoff", &opts).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let entry = |name: &str| {
        let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no {name}"));
        let end = ptx[start..].find("\n}").map_or(ptx.len(), |e| start + e);
        ptx[start..end].to_string()
    };
    let c = entry("ostinato_handoff_2_consume");
    assert!(c.contains("ld.acquire.gpu.global.u32") && c.contains("st.release.gpu.global.u32"), "{c}");
    assert!(c.contains("griddepcontrol.launch_dependents") && c.contains("griddepcontrol.wait"));
    assert!(c.find("griddepcontrol.wait") > c.rfind("st.release.gpu"), "a consumer waits for its grid at its end");
    let p = entry("ostinato_handoff_0_produce");
    assert!(!p.contains("ld.acquire") && p.contains("st.release.gpu.global.u32"));
    assert!(p.find("griddepcontrol.wait") < p.find("st.global.f32"), "a publisher waits for its grid before its body");
    // The kernel contract reads the wrappers as it reads any kernel: the body's declared modes hold,
    // the flags and tables are touched as their vouched modes say.
    for (entry, sig) in [("ostinato_handoff_2_consume", wrapper_sig(&consume, 2)), ("ostinato_handoff_0_produce", wrapper_sig(&produce, 0))] {
        let mut report = ostinato_cuda_code::contract::read_ptx(&ptx, "handoff", &[], entry, &sig).unwrap();
        ostinato_cuda_code::contract::verify(&sig, &mut report).unwrap_or_else(|e| panic!("{entry}: {e}"));
    }
    let _ = TileRange::span(0, [0, 0, 0], 1);
}
