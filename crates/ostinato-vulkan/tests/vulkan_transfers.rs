//! `write_buffer` and `read_buffer` of any size and byte offset, through the staging buffer an exec
//! keeps: bytes at odd offsets of a root and of a view, a transfer larger than the staging buffer
//! holds (so it goes in pieces), and small transfers after large ones, each checked byte for byte
//! against what was written and against the bytes around it. Skips without a Vulkan device.

mod common;

use ostinato::{Arg, Backend, Exec, Graph, Launch, Plan, Scalar};
use ostinato_testkit::random_graphs::mix_sig;
use ostinato_vulkan::VulkanBackend;

/// Bytes past the exec's staging cap (16 MiB): a transfer of the whole buffer takes three pieces.
const BIG: u64 = (32 << 20) + 4100;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 16) as u8).collect()
}

#[test]
fn transfers_of_any_size_and_offset_round_trip() {
    let Some(ctx) = common::context_or_skip("transfers_of_any_size_and_offset_round_trip") else { return };
    let vk = VulkanBackend::with_context(ctx);
    let mut g = Graph::new();
    let big = g.add_buffer("big", BIG).unwrap();
    let view = g.add_view("view", big, 20_000_003, 5_000_001).unwrap();
    let (a, b) = (g.add_buffer("a", 1024).unwrap(), g.add_buffer("b", 1024).unwrap());
    let k = g.add_kernel(mix_sig()).unwrap();
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(a), Arg::Whole(b), u(256), u(256), u(1)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();

    // The whole buffer: three pieces each way.
    let mut expect = pattern(BIG as usize, 7);
    exec.write_buffer(big, 0, &expect).unwrap();
    let mut got = vec![0u8; BIG as usize];
    exec.read_buffer(big, 0, &mut got).unwrap();
    assert!(got == expect, "the whole buffer differs after a write and a read of {BIG} bytes");

    // Small and large writes at odd offsets, of the root and of the view; each read back with the
    // bytes around it.
    let view_at = 20_000_003;
    let cases = [
        (big, 1, 3),
        (big, (16 << 20) - 5, 11), // across the first piece's end of a whole-buffer transfer
        (view, 7, 1_700_000),
        (big, 3, (16 << 20) + 9),
        (view, 0, 5_000_001),
        (big, BIG - 13, 13),
    ];
    for (i, &(buffer, offset, len)) in cases.iter().enumerate() {
        let data = pattern(len, 100 + i as u8);
        exec.write_buffer(buffer, offset, &data).unwrap();
        let at = (offset + if buffer == view { view_at } else { 0 }) as usize;
        expect[at..at + len].copy_from_slice(&data);
        let mut back = vec![0u8; len];
        exec.read_buffer(buffer, offset, &mut back).unwrap();
        assert!(back == data, "case {i}: {len} bytes at {offset} read back differently");
    }
    exec.read_buffer(big, 0, &mut got).unwrap();
    let first = got.iter().zip(&expect).position(|(x, y)| x != y);
    assert!(first.is_none(), "bytes around the written ranges changed: first at byte {first:?}");

    // The exec still replays after its transfers, and empty transfers are no-ops.
    exec.write_buffer(a, 1024, &[]).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
}
