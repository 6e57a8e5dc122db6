//! Soak: many replays of one exec with a slot patched before every replay leave the process's
//! resident memory flat. `OSTINATO_SOAK_REPLAYS` sets the count (default 100,000, what CI runs; the
//! documented soak used 1,000,000).

use ostinato::{Arg, Backend, Exec, Graph, Launch, Plan, Scalar};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::mix_sig;

#[test]
fn patched_replays_keep_resident_memory_flat() {
    let replays: u64 = std::env::var("OSTINATO_SOAK_REPLAYS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mut g = Graph::new();
    let out = g.add_buffer("out", 1024).unwrap();
    let inp = g.add_buffer("inp", 1024).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let salt = g.add_slot("salt", Scalar::u32(0)).unwrap();
    for _ in 0..4 {
        g.add_launch(
            k,
            Launch::linear(1, 256),
            &[Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(256)), Arg::Scalar(Scalar::u32(256)), Arg::Slot(salt)],
            &[],
        )
        .unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let backend = HostBackend::serial();
    let mut exec = backend.instantiate(&plan, ostinato::bind_builtins(&backend, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    // Warm up, then measure.
    for r in 0..1000u32 {
        exec.set_slot(salt, Scalar::u32(r)).unwrap();
        exec.replay().unwrap();
    }
    let before = ostinato_testkit::resident_bytes();
    let mut want = vec![0u32; 256];
    let mut word = [0u8; 4];
    exec.read_buffer(out, 0, &mut word).unwrap();
    want[0] = u32::from_le_bytes(word);
    for r in 0..replays {
        let s = (r as u32).wrapping_mul(0x9E37_79B9);
        exec.set_slot(salt, Scalar::u32(s)).unwrap();
        exec.replay().unwrap();
        for _ in 0..4 {
            want[0] = want[0].wrapping_mul(3).wrapping_add(0).wrapping_add(s);
        }
    }
    exec.wait().unwrap();
    let after = ostinato_testkit::resident_bytes();
    exec.read_buffer(out, 0, &mut word).unwrap();
    assert_eq!(u32::from_le_bytes(word), want[0], "every patched replay ran with its value");
    if let (Some(b), Some(a)) = (before, after) {
        eprintln!("soak: {replays} patched replays, resident {b} -> {a} bytes");
        assert!(a <= b + (1 << 20), "resident memory grew by {} bytes over {replays} replays", a.saturating_sub(b));
    }
}
