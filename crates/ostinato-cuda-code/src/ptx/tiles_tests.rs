//! The tile-map check on NVRTC's PTX of planted kernels (tests/fixtures/tiles.cu) and of the
//! built-ins (kernels/ostinato.cu): what it verifies, what it refuses and why.

use ostinato::{TileMap, TileRange};

use super::parse::{entry, ModuleInfo};
use super::spec::Node;
use super::tiles::{analyse, Case, Unverified, Verdict, IGNORE_STRIDES};

const TILES: &str = include_str!("../../tests/fixtures/tiles.ptx");
const BUILTINS: &str = include_str!("../../tests/fixtures/tiles_builtins.ptx");

/// The verdicts for `kernel` of `ptx` launched on (`grid`, `block`) with `args` (`None`: a buffer,
/// at slice offset 0) and `maps` per param.
pub(crate) fn verdicts(ptx: &str, kernel: &str, grid: [u32; 3], block: [u32; 3], args: &[Option<u64>], maps: &[Option<TileMap>]) -> Vec<(usize, Verdict)> {
    let module = ModuleInfo::read(ptx);
    let e = entry(ptx, kernel).unwrap();
    let t = analyse(&module, &e, &|p| args.get(p).is_some_and(|a| a.is_none()));
    assert!(t.forms_failed().is_none(), "{kernel}: {:?}", t.forms_failed());
    let maps: Vec<Option<&TileMap>> = maps.iter().map(Option::as_ref).collect();
    let align = vec![0u64; args.len()];
    t.check(&Case { node: Node { grid, block, scalars: args }, maps: &maps, align: &align })
}

fn one(ptx: &str, kernel: &str, grid: [u32; 3], block: [u32; 3], args: &[Option<u64>], maps: &[Option<TileMap>]) -> Verdict {
    let v = verdicts(ptx, kernel, grid, block, args, maps);
    assert_eq!(v.len(), 1, "{v:?}");
    v[0].1.clone()
}

fn lin(stride: u64, len: u64) -> Option<TileMap> {
    Some(TileMap::linear(stride, len).unwrap())
}

fn g1(n: u32) -> [u32; 3] {
    [n, 1, 1]
}

#[test]
fn a_row_kernel_is_verified_and_a_map_of_another_row_contradicted() {
    // 8 blocks of 128 threads over rows of 100 floats: threads 100.. are masked off.
    let v = one(TILES, "row", g1(8), g1(128), &[None, Some(100)], &[lin(400, 400), None]);
    assert_eq!(v, Verdict::Verified);
    // The map of half a row: a thread is seen to leave it.
    let v = one(TILES, "row", g1(8), g1(128), &[None, Some(100)], &[lin(400, 200), None]);
    assert!(matches!(v, Verdict::Contradicted { block: [0, 0, 0], .. }), "{v:?}");
    // row_next writes row b + 1.
    let v = one(TILES, "row_next", g1(8), g1(128), &[None, Some(100)], &[lin(400, 400), None]);
    let Verdict::Contradicted { block, bytes, .. } = v else { panic!("{v:?}") };
    assert_eq!(block, [0, 0, 0]);
    assert!(bytes.0 >= 400, "{bytes:?}");
    // Its true map: row b + 1.
    let shifted = Some(TileMap::new(vec![TileRange::span(400, [400, 0, 0], 400)]).unwrap());
    assert_eq!(one(TILES, "row_next", g1(8), g1(128), &[None, Some(100)], &[shifted, None]), Verdict::Verified);
}

#[test]
fn a_2d_tile_kernel_is_verified() {
    // A 64 x 96 matrix (pitch 96 floats) in 16 x 32 tiles: grid 3 x 4, blocks of 32 x 16 threads.
    let tile = TileMap::new(vec![TileRange::span(0, [32 * 4, 16 * 96 * 4, 0], 32 * 4).with_rows(16, 96 * 4)]).unwrap();
    let v = verdicts(TILES, "tile2d", [3, 4, 1], [32, 16, 1], &[None, None, Some(96)], &[Some(tile.clone()), Some(tile.clone()), None]);
    assert_eq!(v, vec![(0, Verdict::Verified), (1, Verdict::Verified)]);
    // Rows one float too short: contradicted (the last column of each row).
    let short = TileMap::new(vec![TileRange::span(0, [32 * 4, 16 * 96 * 4, 0], 31 * 4).with_rows(16, 96 * 4)]).unwrap();
    let v = verdicts(TILES, "tile2d", [3, 4, 1], [32, 16, 1], &[None, None, Some(96)], &[Some(short), None, None]);
    assert!(matches!(v[0].1, Verdict::Contradicted { thread: [31, _, _], .. }), "{v:?}");
}

#[test]
fn a_loop_over_a_row_is_verified_through_its_induction() {
    // Rows of 1000 floats, 256 threads: each thread reads 3 or 4 of its row.
    let v = verdicts(TILES, "row_sum", g1(6), g1(256), &[None, None, Some(1000)], &[lin(1024, 1024), lin(4000, 4000), None]);
    assert_eq!(v, vec![(0, Verdict::Verified), (1, Verdict::Verified)]);
    let v = verdicts(TILES, "row_sum", g1(6), g1(256), &[None, None, Some(1000)], &[None, lin(4000, 3996), None]);
    assert!(matches!(v[0].1, Verdict::Contradicted { .. }), "{v:?}");
    // Counting down from the end of the row, signed.
    let v = one(TILES, "row_reverse", g1(5), g1(64), &[None, Some(300)], &[lin(1200, 1200), None]);
    assert_eq!(v, Verdict::Verified);
}

#[test]
fn an_address_from_loaded_data_is_unknown() {
    let v = verdicts(TILES, "chase", g1(4), g1(64), &[None, None, None], &[lin(256, 256), lin(256, 256), None]);
    assert_eq!(v[0], (0, Verdict::Verified));
    let Verdict::Unknown { why: Unverified::Not(w), .. } = &v[1].1 else { panic!("{v:?}") };
    assert!(matches!(w, super::spec::WhyNot::Opaque(super::affine::Why::Loaded, _)), "{w:?}");
}

#[test]
fn a_scalar_stride_is_read_from_the_node() {
    let row = |s: u64| one(TILES, "strided", g1(8), g1(32), &[None, None, Some(s)], &[None, lin(4 * s, 4), None]);
    assert_eq!(row(16), Verdict::Verified);
    assert_eq!(row(1), Verdict::Verified);
    // Every block reads element 0 (stride 0): a map of each block's own element 0 at 4·b is broken.
    let v = one(TILES, "strided", g1(8), g1(32), &[None, None, Some(0)], &[None, lin(4, 4), None]);
    assert!(matches!(v, Verdict::Contradicted { block: [1, 0, 0], .. }), "{v:?}");
    let all = Some(TileMap::new(vec![TileRange::span(0, [0, 0, 0], 4)]).unwrap());
    assert_eq!(one(TILES, "strided", g1(8), g1(32), &[None, None, Some(0)], &[None, all, None]), Verdict::Verified);
}

/// The built-ins' grid-stride loop: block b of G blocks of T threads touches b·T + k·G·T .. + T.
#[test]
fn the_built_ins_grid_stride_footprints_are_verified() {
    for (grid, block) in [(g1(8), g1(64)), ([2, 3, 1], [16, 2, 1]), ([2, 2, 2], [8, 2, 2])] {
        let (g, t) = (grid.iter().product::<u32>() as u64, block.iter().product::<u32>() as u64);
        let per_block = TileMap::new(vec![TileRange::span(0, [4 * t, 4 * t * u64::from(grid[0]), 4 * t * u64::from(grid[0] * grid[1])], 4 * t)]).unwrap();
        for n in [g * t, g * t - 3, 1] {
            let v = one(BUILTINS, "add_one", grid, block, &[None, Some(n)], &[Some(per_block.clone()), None]);
            assert_eq!(v, Verdict::Verified, "add_one {grid:?} {block:?} n {n}");
            let v = verdicts(
                BUILTINS,
                "mix",
                grid,
                block,
                &[None, None, Some(n), Some(n), Some(7)],
                &[Some(per_block.clone()), Some(per_block.clone()), None, None, None],
            );
            assert_eq!(v, vec![(0, Verdict::Verified), (1, Verdict::Verified)], "mix {grid:?} {block:?} n {n}");
        }
        // n past G·T: a second pass of the loop leaves a map of one chunk per block.
        let v = one(BUILTINS, "add_one", grid, block, &[None, Some(2 * g * t)], &[Some(per_block.clone()), None]);
        assert!(matches!(v, Verdict::Contradicted { .. }), "{v:?}");
        // With a second row per block, G·T elements on, it holds.
        let two = TileMap::new(vec![per_block.ranges()[0].with_rows(2, 4 * g * t)]).unwrap();
        assert_eq!(one(BUILTINS, "add_one", grid, block, &[None, Some(2 * g * t)], &[Some(two), None]), Verdict::Verified);
        // A map too small: contradicted.
        let small = TileMap::new(vec![TileRange::span(0, per_block.ranges()[0].stride, 4 * t - 4)]).unwrap();
        let v = one(BUILTINS, "add_one", grid, block, &[None, Some(g * t)], &[Some(small), None]);
        assert!(matches!(v, Verdict::Contradicted { .. }), "{v:?}");
    }
    // A short input read whole by every block (n_in < T): `i % n_in` is bounded by n_in.
    let whole = TileMap::new(vec![TileRange::span(0, [0, 0, 0], 4 * 10)]).unwrap();
    let v = verdicts(BUILTINS, "mix", g1(4), g1(32), &[None, None, Some(128), Some(10), Some(0)], &[lin(128, 128), Some(whole), None, None, None]);
    assert_eq!(v, vec![(0, Verdict::Verified), (1, Verdict::Verified)]);
}

#[test]
fn a_mutation_that_trusts_block_zero_for_every_block_is_caught() {
    // Block b reads element b·16 when stride is 16; a map of 4·b (block b's own float at b) is wrong
    // for every block but 0. Trusting block 0 alone would verify it.
    let wrong = || one(TILES, "strided", g1(8), g1(32), &[None, None, Some(16)], &[None, lin(4, 4), None]);
    assert!(matches!(wrong(), Verdict::Contradicted { .. }), "{:?}", wrong());
    IGNORE_STRIDES.with(|c| c.set(true));
    let mutated = wrong();
    IGNORE_STRIDES.with(|c| c.set(false));
    assert_eq!(mutated, Verdict::Verified, "the mutation is what the stride check prevents");
}

/// Loops whose carried values feed each other (the inner step is an outer register that the inner
/// loop's exit value updates): not inductions, followed no further, never looping for ever.
#[test]
fn loops_whose_carried_values_feed_each_other_are_unknown() {
    let ptx = r#"
.visible .entry nest(
	.param .u64 nest_param_0,
	.param .u32 nest_param_1
)
{
	ld.param.u64 	%rd1, [nest_param_0];
	ld.param.u32 	%r1, [nest_param_1];
	mov.u32 	%r2, 0;
	mov.u32 	%r3, 1;
$L_outer:
	mov.u32 	%r4, %r2;
$L_inner:
	mul.wide.u32 	%rd2, %r4, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r4;
	add.s32 	%r4, %r4, %r3;
	setp.lt.u32 	%p1, %r4, %r1;
	@%p1 bra 	$L_inner;
	add.s32 	%r3, %r3, %r4;
	mov.u32 	%r2, %r4;
	setp.lt.u32 	%p2, %r2, %r1;
	@%p2 bra 	$L_outer;
	ret;
}
"#;
    let v = one(ptx, "nest", g1(2), g1(32), &[None, Some(100)], &[lin(0, 400), None]);
    assert!(matches!(v, Verdict::Unknown { why: Unverified::Not(super::spec::WhyNot::Carried(_)), .. }), "{v:?}");
}

#[test]
fn an_access_guarded_by_data_is_unknown_never_contradicted() {
    let v = verdicts(TILES, "maybe_next", g1(4), g1(256), &[None, None], &[lin(1024, 1024), None]);
    assert!(matches!(v[0].1, Verdict::Unknown { why: Unverified::Uncovered { block: [0, 0, 0], .. }, .. }), "{v:?}");
    let shifted = Some(TileMap::new(vec![TileRange::span(1024, [1024, 0, 0], 1024)]).unwrap());
    assert_eq!(verdicts(TILES, "maybe_next", g1(4), g1(256), &[None, None], &[shifted, None])[0].1, Verdict::Verified);
}

#[test]
fn a_32_bit_index_that_may_wrap_is_not_verified() {
    let map = || Some(TileMap::new(vec![TileRange::span(0, [1 << 30, 0, 0], 4 * 64)]).unwrap());
    assert_eq!(one(TILES, "wrapping", g1(4), g1(64), &[None], &[map()]), Verdict::Verified);
    // Block 16's index is 2^32: it wraps to 0 in its register, and block 16 writes block 0's bytes.
    let v = one(TILES, "wrapping", g1(17), g1(64), &[None], &[map()]);
    assert!(matches!(v, Verdict::Contradicted { block: [16, 0, 0], thread: [0, 0, 0], bytes: (0, 4), .. }), "{v:?}");
}

/// PTX whose stored address is `%tid.x` plus one `links` times over, each add its own instruction.
fn chained(links: usize) -> String {
    let mut p = format!(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{{\n.reg .b32 %r<{}>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r0, %tid.x;\n", links + 2);
    for i in 1..=links {
        p += &format!("add.s32 %r{i}, %r{}, 1;\n", i - 1);
    }
    p + &format!("mul.wide.u32 %rd3, %r{links}, 4;\nadd.s64 %rd3, %rd2, %rd3;\nst.global.u32 [%rd3], %r0;\nret;\n}}\n")
}

#[test]
fn a_chain_too_long_to_follow_is_unknown_not_a_stack_overflow() {
    // Every block's thread t stores at word t + links: the map of those 256 bytes holds.
    let at = |links: u64| Some(TileMap::new(vec![TileRange::span(4 * links, [0, 0, 0], 256)]).unwrap());
    // 20,000 dependent adds, unbounded, overflow an 8 MiB stack of a release build; the chain is opaque
    // past 512 (and fits that stack in a debug build too). A chain within the limit is followed and
    // verified.
    let (deep, short) = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || (one(&chained(20_000), "k", g1(4), g1(64), &[None], &[at(20_000)]), one(&chained(400), "k", g1(4), g1(64), &[None], &[at(400)])))
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert!(matches!(deep, Verdict::Unknown { why: Unverified::Not(super::spec::WhyNot::Opaque(super::affine::Why::TooDeep, _)), .. }), "{deep:?}");
    assert_eq!(short, Verdict::Verified);
}
