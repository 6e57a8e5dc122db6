//! The host backend's contract: bind errors, kernel faults, slot patching and in-flight refusals.

use std::sync::Arc;

use ostinato::{Access, Arg, Backend, BindError, BufferBinding, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType, Slice};
use ostinato_host::{builtins, HostBackend, HostError, HostKernel, HostMemory};

fn add_one_graph(n_arg: u32, extent: u64) -> (Graph, ostinato::SlotId) {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 64).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let s = g.add_slot("n", Scalar::u32(n_arg)).unwrap();
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Buffer(Slice { buffer: x, offset: 0, len: extent }), Arg::Slot(s)], &[]).unwrap();
    (g, s)
}

fn alloc_all(g: &Graph) -> Vec<BufferBinding<Arc<HostMemory>>> {
    g.buffers().iter().map(|_| BufferBinding::Allocate).collect() // no plan yet: built from the graph
}

#[test]
fn a_kernel_bound_with_a_mismatching_signature_is_refused() {
    let (g, _) = add_one_graph(4, 64);
    let plan = Plan::compile(&g).unwrap();
    let err = HostBackend::new(1).instantiate(&plan, vec![builtins::mix()], alloc_all(&g)).err().unwrap();
    let HostError::Bind(BindError::Signature { kernel, reason }) = &err else { panic!("{err}") };
    assert_eq!(kernel, "add_one");
    assert!(reason.contains("2 params") && reason.contains("5"), "{reason}");
    // same count, wrong mode
    let wrong = HostKernel::new(KernelSig::new("add_one").buffer("x", Access::Read).scalar("n", ScalarType::U32), |_| Ok(()));
    let err = HostBackend::new(1).instantiate(&plan, vec![wrong], alloc_all(&g)).err().unwrap();
    assert!(err.to_string().contains("param `x` is a read_write buffer in the graph but a read buffer"), "{err}");
}

#[test]
fn external_memory_of_the_wrong_length_is_refused() {
    let (g, _) = add_one_graph(4, 64);
    let plan = Plan::compile(&g).unwrap();
    let err = HostBackend::new(1).instantiate(&plan, vec![builtins::add_one()], vec![BufferBinding::External(Arc::new(HostMemory::zeroed(32)))]).err().unwrap();
    assert!(matches!(err, HostError::Bind(BindError::BufferSize { expected: 64, got: 32, .. })), "{err}");
}

#[test]
fn a_kernel_that_leaves_its_declared_extent_fails_the_replay_by_name() {
    // n = 16 elements but only 32 bytes (8 elements) declared
    let (g, _) = add_one_graph(16, 32);
    let plan = Plan::compile(&g).unwrap();
    for threads in [0, 2] {
        let mut exec = HostBackend::new(threads).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
        let err = exec.replay().and_then(|_| exec.wait()).unwrap_err();
        assert_eq!(err.to_string(), "node 0 (add_one): kernel fault: param 0 elements 0..16 lies outside its declared extent of 32 bytes");
    }
}

#[test]
fn slots_patch_between_replays_and_are_refused_in_flight() {
    let (g, s) = add_one_graph(4, 64);
    let plan = Plan::compile(&g).unwrap();
    let mut exec = HostBackend::new(2).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
    for n in [4u32, 8, 16] {
        exec.set_slot(s, Scalar::u32(n)).unwrap();
        exec.replay().unwrap();
        assert!(matches!(exec.set_slot(s, Scalar::u32(1)), Err(HostError::State { operation: "set_slot", .. })));
        exec.wait().unwrap();
    }
    let mut out = vec![0u8; 64];
    exec.read_buffer(ostinato::BufferId(0), 0, &mut out).unwrap();
    let v: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_eq!(&v[..4], &[3.0; 4]);
    assert_eq!(&v[4..8], &[2.0; 4]);
    assert_eq!(&v[8..16], &[1.0; 8]);
    assert!(matches!(exec.set_slot(s, Scalar::f32(1.0)), Err(HostError::Slot(_))));
}

#[test]
fn views_share_their_root_allocation() {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 64).unwrap();
    let hi = g.add_view("hi", a, 32, 32).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(hi), Arg::Scalar(Scalar::u32(8))], &[]).unwrap();
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Scalar(Scalar::u32(16))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    assert_eq!(plan.edges().len(), 1, "the view and its root overlap");
    let mut exec = HostBackend::new(2).with_race_checker(true).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let mut out = vec![0u8; 64];
    exec.read_buffer(a, 0, &mut out).unwrap();
    let v: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_eq!(&v[..8], &[1.0; 8]);
    assert_eq!(&v[8..], &[2.0; 8]);
    let err = HostBackend::new(1)
        .instantiate(&plan, vec![builtins::add_one()], vec![BufferBinding::Allocate, BufferBinding::External(Arc::new(HostMemory::zeroed(32)))])
        .err()
        .unwrap();
    assert!(matches!(err, HostError::Bind(BindError::BindView { .. })), "{err}");
}

/// `HostBackend::auto` uses its workers only where the plan can: four independent chains of 64 KiB
/// nodes go to the pool, the same chains over 1 KiB buffers and a single chain replay inline; every
/// schedule gives the serial result.
#[test]
fn auto_schedules_on_the_pool_only_where_nodes_can_run_side_by_side_with_enough_work() {
    let build = |chains: usize, bytes: u64| {
        let mut g = Graph::new();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let bufs: Vec<_> = (0..chains).map(|c| g.add_buffer(format!("b{c}"), bytes).unwrap()).collect();
        for _ in 0..6 {
            for b in &bufs {
                g.add_launch(k, Launch::linear(2, 64), &[Arg::Whole(*b), Arg::Scalar(Scalar::u32((bytes / 4) as u32))], &[]).unwrap();
            }
        }
        g
    };
    for (chains, bytes, pooled) in [(4, 64 * 1024, true), (4, 1024, false), (1, 64 * 1024, false)] {
        let g = build(chains, bytes);
        let plan = Plan::compile(&g).unwrap();
        let result = |backend: HostBackend| {
            let mut exec = backend.instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
            let inline = exec.inline_reason().map(str::to_string);
            exec.replay().unwrap();
            exec.wait().unwrap();
            (ostinato::read_roots(&mut exec).unwrap(), inline)
        };
        let (want, _) = result(HostBackend::serial());
        let (got, inline) = result(HostBackend::auto(2).with_race_checker(true));
        assert_eq!(inline.is_none(), pooled, "{chains} chains of {bytes} bytes: {inline:?}");
        assert_eq!(got, want, "{chains} chains of {bytes} bytes");
        assert_eq!(result(HostBackend::new(2)).1, None, "`new` always uses its workers");
    }
}

/// A NaN result is stored as the canonical NaN NVIDIA GPUs produce (0x7FFF_FFFF), whatever the input
/// NaN's sign and payload: the host oracle must equal the GPU bit for bit on float kernels that see NaNs
/// (`examples/own_kernel.toml`, which mixes u32 `mix` and f32 `add_one` on one buffer, differed at its
/// first NaN before). Numbers and infinities keep their bits.
#[test]
fn float_kernels_store_nan_as_the_gpus_canonical_nan() {
    let (g, _) = add_one_graph(16, 64);
    let plan = Plan::compile(&g).unwrap();
    let mut exec = HostBackend::new(0).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
    let input: [u32; 16] = [
        0x7FC0_0000,
        0xFFC0_0000,
        0x7F80_0001,
        0xFF81_2345,
        0x7FAB_CDEF,
        0x7FFF_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x3F80_0000,
        0,
        0x8000_0000,
        1,
        0x4B80_0000,
        0xBF80_0000,
        0x7F7F_FFFF,
        0x0080_0000,
    ];
    exec.write_buffer(ostinato::BufferId(0), 0, &input.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    let mut out = [0u8; 64];
    exec.read_buffer(ostinato::BufferId(0), 0, &mut out).unwrap();
    let got: Vec<u32> = out.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for (i, (&x, &y)) in input.iter().zip(&got).enumerate() {
        let want = if f32::from_bits(x).is_nan() { 0x7FFF_FFFF } else { (f32::from_bits(x) + 1.0).to_bits() };
        assert_eq!(y, want, "element {i}: add_one({x:#010x})");
    }
    assert_eq!(&got[..6], &[0x7FFF_FFFF; 6], "every NaN input gives the canonical NaN");
    assert_eq!(got[6], 0x7F80_0000, "+inf + 1 stays +inf");
    assert_eq!(got[13], 0, "-1 + 1 is +0");
}

/// A position far past the KV cache is refused by the kernel's extent check before it sizes anything
/// by it (it once allocated 16 GiB of scores for `pos = 4294967295`).
#[test]
fn attention_at_a_position_past_its_cache_fails_the_replay_without_allocating_by_it() {
    let mut g = Graph::new();
    let (out, q, kc, vc) =
        (g.add_buffer("out", 256).unwrap(), g.add_buffer("q", 256).unwrap(), g.add_buffer("kc", 1024).unwrap(), g.add_buffer("vc", 1024).unwrap());
    let k = g.add_kernel(ostinato_host::decode::attention().sig.clone()).unwrap();
    let args = [
        Arg::Whole(out),
        Arg::Whole(q),
        Arg::Whole(kc),
        Arg::Whole(vc),
        Arg::Scalar(Scalar::u32(u32::MAX)),
        Arg::Scalar(Scalar::u32(1)),
        Arg::Scalar(Scalar::u32(1)),
        Arg::Scalar(Scalar::u32(64)),
    ];
    g.add_launch(k, Launch::linear(1, 64), &args, &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let backend = HostBackend::serial();
    let mut exec = backend.instantiate(&plan, ostinato::bind_builtins(&backend, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    let before = ostinato_testkit::resident_bytes();
    let err = exec.replay().unwrap_err().to_string();
    assert!(err.contains("node 0 (attention)") && err.contains("outside its declared extent"), "{err}");
    if let (Some(b), Some(a)) = (before, ostinato_testkit::resident_bytes()) {
        assert!(a < b + (64 << 20), "the refused replay grew resident memory by {} bytes", a - b);
    }
}

#[test]
fn two_roots_on_one_memory_are_refused_where_one_is_written() {
    use ostinato::ErrorKind;
    let mut g = Graph::new();
    let (a, b) = (g.add_buffer("a", 64).unwrap(), g.add_buffer("b", 64).unwrap());
    let k = g.add_kernel(builtins::mix_sig()).unwrap();
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    g.add_launch(k, Launch::linear(1, 32), &[Arg::Whole(a), Arg::Whole(b), u(16), u(16), u(1)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let host = HostBackend::serial();
    let kernels = || ostinato::bind_builtins(&host, &plan).unwrap();
    let (m1, m2) = (Arc::new(HostMemory::zeroed(64)), Arc::new(HostMemory::zeroed(64)));
    let err = host
        .instantiate(&plan, kernels(), vec![BufferBinding::External(m1.clone()), BufferBinding::External(m1.clone())])
        .err()
        .expect("one memory, two roots");
    assert_eq!(err.kind(), ErrorKind::Argument);
    assert!(err.to_string().contains("`a` and `b` are bound to overlapping memory"), "{err}");
    let mut exec = host.instantiate(&plan, kernels(), vec![BufferBinding::External(m1.clone()), BufferBinding::External(m2.clone())]).unwrap();
    let err = exec.rebind(b, m1.clone()).unwrap_err();
    assert!(err.to_string().contains("overlapping memory"), "{err}");
    exec.rebind(b, m2).unwrap(); // its own memory again
    exec.rebind(a, Arc::new(HostMemory::zeroed(64))).unwrap();
    exec.replay().unwrap();
    // Roots no node writes may share memory (tied weights): both read, copied elsewhere.
    let mut g = Graph::new();
    let (w1, w2) = (g.add_buffer("embed", 64).unwrap(), g.add_buffer("lm_head", 64).unwrap());
    let (o1, o2) = (g.add_buffer("o1", 64).unwrap(), g.add_buffer("o2", 64).unwrap());
    g.add_copy(g.whole(w1), g.whole(o1), &[]).unwrap();
    g.add_copy(g.whole(w2), g.whole(o2), &[]).unwrap();
    let tied = Plan::compile(&g).unwrap();
    let shared = Arc::new(HostMemory::zeroed(64));
    let bind = vec![BufferBinding::External(shared.clone()), BufferBinding::External(shared), BufferBinding::Allocate, BufferBinding::Allocate];
    host.instantiate(&tied, vec![], bind).unwrap().replay().unwrap();
}
