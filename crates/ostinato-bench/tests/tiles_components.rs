//! Fusion by connected components (`ostinato::fusion::component_groups`) against the host oracle, on
//! the benchmark's own sparse kernels (`tile_spread`, `tile_gather`, run block by block by their
//! host twins, every access checked against the block's tile): random chains of spreads and gathers
//! (fans, tile counts, block sizes, depths, views at any tile-aligned offset, a second chain beside
//! the first) fused by components, the fused blocks in any order, each running its members' blocks of
//! its component in turn, must give the serial program's bytes; a fused block that runs its members
//! out of order must not.

use ostinato::file::BufferInit;
use ostinato::fusion::{all_groups, component_groups, FusionMode, Group};
use ostinato::rng::XorShift64 as Rng;
use ostinato::{Arg, Backend, BufferId, Exec, Graph, Launch, Plan, Scalar, TileMap, TileRange};
use ostinato_bench::families::tiles_twins::{gather_kernel, spread_kernel};
use ostinato_host::{HostBackend, HostKernel};
use ostinato_testkit::tiled_graphs::{launches_fusable, run_blockwise_with, BlockOrder};

struct Program {
    plan: Plan,
    kernels: Vec<HostKernel>,
    inits: Vec<Option<BufferInit>>,
}

/// One or two chains of `rounds` spread/gather rounds, each on its own x and y (views of larger
/// buffers at a whole number of tiles in).
fn random_program(seed: u64) -> Program {
    let mut r = Rng::seeded(seed ^ 0xc0a7_9011);
    let threads = [32u32, 64][r.below(2) as usize];
    let (spread, gather) = (spread_kernel(threads), gather_kernel(threads));
    let mut g = Graph::new();
    let (ks, kg) = (g.add_kernel(spread.sig.clone()).unwrap(), g.add_kernel(gather.sig.clone()).unwrap());
    let tile = 4 * u64::from(threads);
    let mut inits = Vec::new();
    let mut chains = Vec::new();
    for c in 0..1 + r.below(2) {
        let fan = [4u32, 8][r.below(2) as usize];
        let tiles = 2 + r.below(7) as u32;
        let (xo, yo) = (r.below(3), r.below(3));
        let xb = g.add_buffer(format!("xb{c}"), tile * (u64::from(fan * tiles) + xo)).unwrap();
        let yb = g.add_buffer(format!("yb{c}"), tile * (u64::from(tiles) + yo)).unwrap();
        inits.extend([Some(BufferInit::Random(seed * 4 + 2 * c + 1)), Some(BufferInit::Random(seed * 4 + 2 * c + 2))]);
        let x = g.add_view(format!("x{c}"), xb, tile * xo, tile * u64::from(fan * tiles)).unwrap();
        let y = g.add_view(format!("y{c}"), yb, tile * yo, tile * u64::from(tiles)).unwrap();
        inits.extend([None, None]);
        chains.push((fan, tiles, x, y, 1 + r.below(6) as u32));
    }
    let most = chains.iter().map(|c| c.4).max().unwrap_or(0);
    for round in 0..most {
        for &(fan, tiles, x, y, _) in chains.iter().filter(|c| round < c.4) {
            let spread_maps = [
                ("x", TileMap::new(vec![TileRange::span(0, [tile, tile * u64::from(fan), 0], tile)]).unwrap()),
                ("y", TileMap::new(vec![TileRange::span(0, [0, tile, 0], tile)]).unwrap()),
            ];
            let gather_maps = [("y", TileMap::linear(tile, tile).unwrap()), ("x", TileMap::linear(tile * u64::from(fan), tile * u64::from(fan)).unwrap())];
            let salt = Arg::Scalar(Scalar::u32(r.next_u64() as u32));
            g.add_launch_tiled(ks, Launch::new([fan, tiles, 1], [threads, 1, 1]), &[Arg::Whole(x), Arg::Whole(y), salt], &spread_maps, &[]).unwrap();
            let fan_arg = Arg::Scalar(Scalar::u32(fan));
            g.add_launch_tiled(kg, Launch::linear(tiles, threads), &[Arg::Whole(y), Arg::Whole(x), fan_arg], &gather_maps, &[]).unwrap();
        }
    }
    Program { plan: Plan::compile(&g).unwrap(), kernels: vec![spread.host, gather.host], inits }
}

fn serial(p: &Program) -> Vec<(BufferId, Vec<u8>)> {
    let mut exec = HostBackend::serial().instantiate(&p.plan, p.kernels.clone(), ostinato::allocate_all(&p.plan)).unwrap();
    ostinato::write_inits(&mut exec, &p.inits).unwrap();
    exec.replay().unwrap();
    ostinato::read_roots(&mut exec).unwrap()
}

const ORDERS: [BlockOrder; 3] = [BlockOrder::Forward, BlockOrder::Backward, BlockOrder::Shuffled(7)];

#[test]
fn spread_gather_chains_fused_by_components_give_the_oracle_bits_in_any_block_order() {
    let (mut fused, mut total) = (0, 0);
    for seed in 0..120u64 {
        let p = random_program(seed);
        let want = serial(&p);
        for mode in [FusionMode::Auto, FusionMode::On] {
            // As the CUDA backend takes them: components first, then the other groups.
            let gs = all_groups(&p.plan, &launches_fusable(&p.plan), mode);
            fused += gs.iter().filter(|g| g.components.is_some()).map(Group::len).sum::<usize>();
            total += p.plan.node_count();
            for order in ORDERS {
                let got = run_blockwise_with(&p.plan, &p.kernels, &p.inits, &gs, order).unwrap();
                assert_eq!(got, want, "seed {seed}, {mode:?}, {order:?}: {gs:?}");
            }
        }
    }
    eprintln!("{fused} of {total} nodes fused by components");
    assert!(fused * 2 > total, "{fused} of {total} nodes fused by components");
}

#[test]
fn a_fused_block_that_runs_a_gather_before_its_spread_changes_the_bytes() {
    // The mutation: in every group of components, the last two members swapped, so each fused block
    // runs a gather before the spread whose tiles it reads (one lost ordering inside a component).
    let (mut caught, mut tried) = (0, 0);
    for seed in 0..120u64 {
        let p = random_program(seed);
        let none = vec![false; p.plan.node_count()];
        let mut gs = component_groups(&p.plan, &launches_fusable(&p.plan), &none, FusionMode::On);
        if gs.is_empty() {
            continue;
        }
        for gr in &mut gs {
            let (lane, c) = (&mut gr.lanes[0], gr.components.as_mut().expect("groups of components"));
            let n = lane.len();
            lane.swap(n - 2, n - 1);
            c.members.swap(n - 2, n - 1);
        }
        tried += 1;
        let want = serial(&p);
        caught += ORDERS.into_iter().any(|o| run_blockwise_with(&p.plan, &p.kernels, &p.inits, &gs, o).map_or(true, |got| got != want)) as usize;
    }
    eprintln!("the lost ordering showed in {caught} of {tried} programs");
    assert!(tried >= 100 && caught == tried, "the lost ordering showed in {caught} of {tried} programs");
}
