//! A user's WGSL kernel of many workgroups, with a workgroup reduction behind barriers, fused block by
//! block on Vulkan from the tile maps its code is shown to keep (`ostinato_vulkan`'s tile check), and
//! against an oracle computed here: the chain becomes one dispatch and gives the oracle's bits. A map
//! the code breaks (each workgroup reading its neighbour's row) is not kept, so the chain runs a
//! dispatch per node and stays right; vouched for anyway, the fused chain gives other bits — the check
//! is what keeps such a map from being used. A scalar an index reads from a slot (patchable after the
//! check) leaves the map unverified; one no index reads does not. Random programs of such kernels
//! (rows and 2-D tiles, slices at word offsets, several kernels, some nodes without maps) fused where
//! their maps allow give the host backend's bits (its twins checking every map at run time) and the
//! test's own. Skips without a Vulkan device.

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

/// A user kernel of the random programs: its name, its WGSL and its workgroup (what a node of it does
/// in the oracle: `oracle_node`).
struct UserKernel {
    name: &'static str,
    wgsl: fn() -> String,
    block: [u32; 3],
}

const ROWS_ADD: UserKernel = UserKernel {
    name: "rows_add",
    wgsl: || {
        "struct Params { n: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<immediate> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    for (var c = l.x; c < p.n; c = c + 64u) {
        let i = wid.x * p.n + c;
        dst[i] = dst[i] * 3u + src[i] + p.salt;
    }
}"
        .to_string()
    },
    block: [64, 1, 1],
};

/// The row chain's kernel above: a row's sum (a reduction behind barriers) added to every word of it.
const ROWS_SUM: UserKernel = UserKernel { name: "rows_sum", wgsl: || ROW_STEP.replace("SRC", "row"), block: [64, 1, 1] };

const TILE_XOR: UserKernel = UserKernel {
    name: "tile_xor",
    wgsl: || {
        "struct Params { w: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<immediate> p: Params;
@compute @workgroup_size(8, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let i = (wid.y * 8u + l.y) * p.w + wid.x * 8u + l.x;
    dst[i] = (dst[i] ^ (src[i] + p.salt)) * 5u;
}"
        .to_string()
    },
    block: [8, 8, 1],
};

/// One node of a random program: its kernel, buffers (index into the program's three), the word
/// offset of each slice, its salt, and whether it declares maps.
struct RandomNode {
    kernel: usize,
    dst: usize,
    src: usize,
    offsets: [u32; 2],
    salt: u32,
    mapped: bool,
}

fn rng_next(s: &mut ostinato::rng::XorShift64, n: u32) -> u32 {
    s.below(u64::from(n)) as u32
}

/// The host twin of a user kernel, block by block: the host backend checks every access of block `b`
/// against `b`'s tile, so the oracle run also checks each declared map at run time.
fn host_twin(name: &'static str, sig: KernelSig) -> ostinato_host::HostKernel {
    ostinato_host::HostKernel::per_block(sig, move |cx| {
        let (dst, src, b) = (cx.buffer(0)?, cx.buffer(1)?, cx.block());
        match name {
            "tile_xor" => {
                let (w, salt) = (cx.u32(2)? as usize, cx.u32(3)?);
                for ly in 0..8 {
                    for lx in 0..8 {
                        let i = (b[1] as usize * 8 + ly) * w + b[0] as usize * 8 + lx;
                        dst.store_u32(i, (dst.load_u32(i)? ^ src.load_u32(i)?.wrapping_add(salt)).wrapping_mul(5))?;
                    }
                }
            }
            _ => {
                let summed = name == "rows_sum";
                let (n, salt) = if summed { (cx.u32(3)? as usize, cx.u32(4)?) } else { (cx.u32(2)? as usize, cx.u32(3)?) };
                let row = b[0] as usize * n;
                let mut total = 0u32;
                if summed {
                    for c in 0..n {
                        total = total.wrapping_add(src.load_u32(row + c)?);
                    }
                }
                for c in 0..n {
                    let add = if summed { total } else { src.load_u32(row + c)? };
                    dst.store_u32(row + c, dst.load_u32(row + c)?.wrapping_mul(3).wrapping_add(add).wrapping_add(salt))?;
                }
            }
        }
        Ok(())
    })
}

/// What `node` does to the program's buffers: over `grid` workgroups, each slice a `grid[0]`-row block
/// of `n` words (`rows_add`, `rows_sum`) or an image `8·grid[0]` words wide (`tile_xor`).
fn oracle_node(node: &RandomNode, bufs: &mut [Vec<u32>; 3], two_d: bool, grid: [u32; 2], n: u32) {
    let cells = if two_d { 64 * grid[0] * grid[1] } else { grid[0] * n } as usize;
    let src: Vec<u32> = bufs[node.src][node.offsets[1] as usize..][..cells].to_vec();
    let dst = &mut bufs[node.dst][node.offsets[0] as usize..][..cells];
    match (two_d, node.kernel) {
        (true, _) => dst.iter_mut().zip(&src).for_each(|(d, s)| *d = (*d ^ s.wrapping_add(node.salt)).wrapping_mul(5)),
        (false, 0) => dst.iter_mut().zip(&src).for_each(|(d, s)| *d = d.wrapping_mul(3).wrapping_add(*s).wrapping_add(node.salt)),
        (false, _) => {
            for (d, s) in dst.chunks_mut(n as usize).zip(src.chunks(n as usize)) {
                let total = s.iter().fold(0u32, |t, &v| t.wrapping_add(v));
                d.iter_mut().for_each(|x| *x = x.wrapping_mul(3).wrapping_add(total).wrapping_add(node.salt));
            }
        }
    }
}

#[test]
fn random_programs_of_user_kernels_with_tile_maps_fused_equal_the_host() {
    let Some(vk) = backend_or_skip("random_programs_of_user_kernels_with_tile_maps_fused_equal_the_host") else { return };
    let (mut fused, mut total) = (0, 0);
    for seed in 1..=40u64 {
        let mut s = ostinato::rng::XorShift64::seeded(seed);
        let two_d = rng_next(&mut s, 3) == 0;
        let grid = if two_d { [1 + rng_next(&mut s, 4), 1 + rng_next(&mut s, 3)] } else { [1 + rng_next(&mut s, 12), 1] };
        let n = 64 + 32 * rng_next(&mut s, 4);
        let cells = if two_d { 64 * grid[0] * grid[1] } else { grid[0] * n };
        let len = 4 + rng_next(&mut s, 12) as usize;
        let nodes: Vec<RandomNode> = (0..len)
            .map(|_| {
                let dst = rng_next(&mut s, 3) as usize;
                let src = (dst + 1 + rng_next(&mut s, 2) as usize) % 3;
                // Mostly one view per buffer (slices that line up block by block), sometimes shifted.
                let offsets = [dst, src].map(|b| if rng_next(&mut s, 5) == 0 { rng_next(&mut s, 4) } else { b as u32 });
                RandomNode { kernel: rng_next(&mut s, 2) as usize, dst, src, offsets, salt: rng_next(&mut s, 1000), mapped: rng_next(&mut s, 5) != 0 }
            })
            .collect();
        // The graph.
        let mut g = Graph::new();
        let words = cells + 4;
        let roots: Vec<BufferId> = (0..3).map(|i| g.add_buffer(format!("b{i}"), 4 * u64::from(words)).unwrap()).collect();
        let kinds: Vec<&UserKernel> = if two_d { vec![&TILE_XOR] } else { vec![&ROWS_ADD, &ROWS_SUM] };
        let sigs: Vec<KernelSig> = kinds
            .iter()
            .map(|k| {
                let sig = KernelSig::new(k.name).buffer("dst", Access::ReadWrite).buffer("src", Access::Read);
                if k.name == "rows_sum" {
                    sig.scalar("rows", ScalarType::U32).scalar("n", ScalarType::U32).scalar("salt", ScalarType::U32)
                } else {
                    sig.scalar(if two_d { "w" } else { "n" }, ScalarType::U32).scalar("salt", ScalarType::U32)
                }
            })
            .collect();
        let ids: Vec<_> = sigs.iter().map(|sg| g.add_kernel(sg.clone()).unwrap()).collect();
        let map = if two_d {
            let w = 8 * u64::from(grid[0]);
            TileMap::new(vec![ostinato::TileRange::span(0, [32, 32 * w, 0], 32).with_rows(8, 4 * w)]).unwrap()
        } else {
            TileMap::linear(4 * u64::from(n), 4 * u64::from(n)).unwrap()
        };
        for node in &nodes {
            let k = node.kernel.min(ids.len() - 1);
            let slice = |b: usize, off: u32| Arg::Buffer(ostinato::Slice { buffer: roots[b], offset: 4 * u64::from(off), len: 4 * u64::from(cells) });
            let mut args = vec![slice(node.dst, node.offsets[0]), slice(node.src, node.offsets[1])];
            if kinds[k].name == "rows_sum" {
                args.push(Arg::Scalar(Scalar::u32(grid[0])));
            }
            args.push(Arg::Scalar(Scalar::u32(if two_d { 8 * grid[0] } else { n })));
            args.push(Arg::Scalar(Scalar::u32(node.salt)));
            let maps: Vec<(&str, TileMap)> = if node.mapped { vec![("dst", map.clone()), ("src", map.clone())] } else { Vec::new() };
            g.add_launch_tiled(ids[k], Launch::new([grid[0], grid[1], 1], kinds[k].block), &args, &maps, &[]).unwrap();
        }
        let plan = Plan::compile(&g).unwrap();
        let kernels = kinds
            .iter()
            .zip(&sigs)
            .map(|(k, sg)| vk.bind_kernel(sg, &KernelRef::code(&format!("{}.wgsl", k.name), (k.wgsl)()).with_entry("main")).unwrap())
            .collect();
        let mut exec = vk.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert!(exec.tile_maps().iter().all(|m| m.kept.is_ok()), "seed {seed}: {:?}", exec.tile_maps());
        // Inputs, the oracle, the run.
        let mut want: [Vec<u32>; 3] = std::array::from_fn(|i| (0..words).map(|j| (j + 1).wrapping_mul(0x2545_F491 + i as u32) >> 5).collect());
        for (b, v) in roots.iter().zip(&want) {
            exec.write_buffer(*b, 0, &v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        }
        // The host backend, serially, its twins checking every map at run time.
        let twins = kinds.iter().zip(&sigs).map(|(k, sg)| host_twin(k.name, sg.clone())).collect();
        let mut host = ostinato_host::HostBackend::serial().instantiate(&plan, twins, ostinato::allocate_all(&plan)).unwrap();
        for (b, v) in roots.iter().zip(&want) {
            host.write_buffer(*b, 0, &v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        }
        for node in &nodes {
            let node = RandomNode { kernel: node.kernel.min(kinds.len() - 1), ..*node };
            oracle_node(&node, &mut want, two_d, grid, n);
        }
        exec.replay().unwrap();
        exec.wait().unwrap();
        host.replay().unwrap();
        host.wait().unwrap();
        let words_of = |bytes: Vec<u8>| bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<u32>>();
        for (i, b) in roots.iter().enumerate() {
            let (mut got, mut oracle) = (vec![0u8; 4 * words as usize], vec![0u8; 4 * words as usize]);
            exec.read_buffer(*b, 0, &mut got).unwrap();
            host.read_buffer(*b, 0, &mut oracle).unwrap();
            let what = format!("seed {seed}: buffer {i} ({} nodes, grid {grid:?}, 2-D {two_d})", nodes.len());
            assert_eq!(words_of(oracle), want[i], "the host against the test's own oracle, {what}");
            assert_eq!(words_of(got), want[i], "Vulkan against the host, {what}");
        }
        fused += exec.fused_nodes();
        total += nodes.len();
    }
    assert!(fused > total / 4, "{fused} of {total} nodes fused");
    eprintln!("{fused} of {total} nodes of 40 random programs ran fused block by block on maps verified from their WGSL, bitwise equal to the host");
}
