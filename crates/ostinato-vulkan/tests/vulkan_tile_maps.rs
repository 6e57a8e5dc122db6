//! A user's WGSL kernel of many workgroups, with a workgroup reduction behind barriers, fused block by
//! block on Vulkan from the tile maps its code is shown to keep (`ostinato_vulkan`'s tile check), and
//! against an oracle computed here: the chain becomes one dispatch and gives the oracle's bits. A map
//! the code breaks (each workgroup reading its neighbour's row) is not kept, so the chain runs a
//! dispatch per node and stays right; vouched for anyway, the fused chain gives other bits — the check
//! is what keeps such a map from being used. A scalar an index reads from a slot (patchable after the
//! check) leaves the map unverified; one no index reads does not. Skips without a Vulkan device.

mod common;

use ostinato::{Access, Arg, Backend, BufferId, Exec, Graph, KernelRef, KernelSig, Launch, Plan, Scalar, ScalarType, TileMap};
use ostinato_vulkan::{FusionMode, MapKept, VulkanBackend, VulkanOptions};

use common::backend_or_skip;

const ROWS: u32 = 32;
const N: u32 = 256;
const LAYERS: u32 = 12;

/// `dst[row] = dst[row] · 3 + Σ src[SRC] + salt`, a workgroup of 64 per row; SRC is the row read.
const ROW_STEP: &str = "struct Params { rows: u32, n: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<immediate> p: Params;
var<workgroup> part: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let row = wid.x;
    var s = 0u;
    for (var c = l.x; c < p.n; c = c + 64u) {
        s = s + src[SRC * p.n + c];
    }
    part[l.x] = s;
    for (var o = 32u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (l.x < o) { part[l.x] = part[l.x] + part[l.x + o]; }
    }
    workgroupBarrier();
    let total = part[0];
    for (var c = l.x; c < p.n; c = c + 64u) {
        dst[row * p.n + c] = dst[row * p.n + c] * 3u + total + p.salt;
    }
}";

fn sig(vouched: bool) -> KernelSig {
    let s = KernelSig::new("row_step").buffer("dst", Access::ReadWrite);
    let s = if vouched { s.buffer_vouched("src", Access::Read) } else { s.buffer("src", Access::Read) };
    s.scalar("rows", ScalarType::U32).scalar("n", ScalarType::U32).scalar("salt", ScalarType::U32)
}

/// Which scalars of the chain are slots.
#[derive(Clone, Copy, PartialEq)]
enum Slots {
    None,
    Salt,
    N,
}

/// The chain `a ← b`, `b ← a`, … of `LAYERS` launches, each map one row of each buffer; the exec bound
/// with `src_row` as the row each workgroup reads.
fn chain(vk: &VulkanBackend, src_row: &str, vouched: bool, slots: Slots) -> (ostinato_vulkan::VulkanExec, [BufferId; 2]) {
    let mut g = Graph::new();
    let bytes = 4 * u64::from(ROWS * N);
    let a = g.add_buffer("a", bytes).unwrap();
    let b = g.add_buffer("b", bytes).unwrap();
    let k = g.add_kernel(sig(vouched)).unwrap();
    let row = TileMap::linear(4 * u64::from(N), 4 * u64::from(N)).unwrap();
    let n = match slots {
        Slots::N => Arg::Slot(g.add_slot("n", Scalar::u32(N)).unwrap()),
        _ => Arg::Scalar(Scalar::u32(N)),
    };
    let salt_slot = (slots == Slots::Salt).then(|| g.add_slot("salt", Scalar::u32(0)).unwrap());
    for layer in 0..LAYERS {
        let (dst, src) = if layer % 2 == 0 { (a, b) } else { (b, a) };
        let salt = salt_slot.map_or(Arg::Scalar(Scalar::u32(layer)), Arg::Slot);
        let args = [Arg::Whole(dst), Arg::Whole(src), Arg::Scalar(Scalar::u32(ROWS)), n, salt];
        g.add_launch_tiled(k, Launch::linear(ROWS, 64), &args, &[("dst", row.clone()), ("src", row.clone())], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let kernel = vk.bind_kernel(&sig(vouched), &KernelRef::code("row_step.wgsl", ROW_STEP.replace("SRC", src_row)).with_entry("main")).unwrap();
    let exec = vk.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
    (exec, [a, b])
}

fn inputs() -> [Vec<u32>; 2] {
    let a = (0..ROWS * N).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    let b = (0..ROWS * N).map(|i| i.wrapping_mul(40_503) ^ 0x5bd1).collect();
    [a, b]
}

/// The chain computed here, layer by layer, each workgroup reading row `src_row(row)`; a slot salt
/// stays 0.
fn oracle(src_row: impl Fn(u32) -> u32, salt_slot: bool) -> [Vec<u32>; 2] {
    let [mut a, mut b] = inputs();
    for layer in 0..LAYERS {
        let (dst, src) = if layer % 2 == 0 { (&mut a, &b) } else { (&mut b, &a) };
        let salt = if salt_slot { 0 } else { layer };
        for row in 0..ROWS {
            let s = src_row(row) as usize * N as usize;
            let total = src[s..s + N as usize].iter().fold(0u32, |t, &v| t.wrapping_add(v));
            for c in 0..N as usize {
                let i = (row * N) as usize + c;
                dst[i] = dst[i].wrapping_mul(3).wrapping_add(total).wrapping_add(salt);
            }
        }
    }
    [a, b]
}

fn run(exec: &mut ostinato_vulkan::VulkanExec, bufs: [BufferId; 2]) -> [Vec<u32>; 2] {
    for (b, v) in bufs.iter().zip(inputs()) {
        let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
        exec.write_buffer(*b, 0, &bytes).unwrap();
    }
    exec.replay().unwrap();
    exec.wait().unwrap();
    bufs.map(|b| {
        let mut bytes = vec![0u8; 4 * (ROWS * N) as usize];
        exec.read_buffer(b, 0, &mut bytes).unwrap();
        bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    })
}

#[test]
fn a_user_kernel_with_barriers_fuses_block_by_block_on_maps_its_code_keeps() {
    let Some(vk) = backend_or_skip("a_user_kernel_with_barriers_fuses_block_by_block_on_maps_its_code_keeps") else { return };
    let want = oracle(|r| r, false);
    let (mut exec, bufs) = chain(&vk, "row", false, Slots::None);
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (LAYERS as usize, 1), "the chain is one dispatch of its grid");
    assert_eq!(exec.tile_maps().len(), 2 * LAYERS as usize);
    assert!(exec.tile_maps().iter().all(|m| m.kept == Ok(MapKept::Verified)), "{:?}", exec.tile_maps());
    assert_eq!(run(&mut exec, bufs), want);
    let off = vk.clone().with_options(VulkanOptions { fusion: FusionMode::Off, ..VulkanOptions::default() });
    let (mut exec, bufs) = chain(&off, "row", false, Slots::None);
    assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (0, LAYERS as usize));
    assert_eq!(run(&mut exec, bufs), want);
    // A slot no index reads keeps the maps verified; one an index reads does not.
    let (mut exec, bufs) = chain(&vk, "row", false, Slots::Salt);
    assert_eq!(exec.fused_nodes(), LAYERS as usize);
    assert_eq!(run(&mut exec, bufs), oracle(|r| r, true));
    let (mut exec, bufs) = chain(&vk, "row", false, Slots::N);
    assert_eq!(exec.fused_nodes(), 0, "`n` is a slot: the maps are not taken as verified");
    for m in exec.tile_maps() {
        let line = if m.param == "dst" { "line 22" } else { "line 12" };
        assert!(m.kept.as_ref().is_err_and(|e| e.contains(line) && e.contains("slot")), "{m:?}");
    }
    assert_eq!(run(&mut exec, bufs), want);
}

#[test]
fn a_map_the_code_breaks_is_not_kept_and_vouching_for_it_gives_other_bits() {
    let Some(vk) = backend_or_skip("a_map_the_code_breaks_is_not_kept_and_vouching_for_it_gives_other_bits") else { return };
    let next = "((row + 1u) % p.rows)";
    let want = oracle(|r| (r + 1) % ROWS, false);
    let (mut exec, bufs) = chain(&vk, next, false, Slots::None);
    assert_eq!(exec.fused_nodes(), 0, "each workgroup reads its neighbour's row: the map on `src` is not kept");
    for m in exec.tile_maps() {
        match m.param.as_str() {
            "dst" => assert_eq!(m.kept, Ok(MapKept::Verified)),
            _ => assert!(m.kept.as_ref().is_err_and(|e| e.contains("line 12") && e.contains("outside its tile")), "{m:?}"),
        }
    }
    assert_eq!(run(&mut exec, bufs), want);
    // Vouched for, the broken map is used: the neighbour's row is read before (or while) its
    // workgroup writes the layer the oracle reads.
    let (mut exec, bufs) = chain(&vk, next, true, Slots::None);
    assert_eq!(exec.fused_nodes(), LAYERS as usize);
    assert!(exec.tile_maps().iter().any(|m| m.kept == Ok(MapKept::Vouched)));
    assert_ne!(run(&mut exec, bufs), want, "a dropped tile dependency changes the bits");
}
