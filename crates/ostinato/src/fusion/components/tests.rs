use super::*;
use crate::fusion::tests::keyed;
use crate::{Access, Graph, KernelSig, Launch, TileMap, TileRange};

/// A spread over `fan × tiles` blocks of 64 threads (block `(i, j)` updates tile `i + fan·j` of x from
/// tile `j` of y) and a gather of `tiles` blocks (block `j` updates tile `j` of y from x's tiles
/// `fan·j ..`), as the benchmark's sparse row records them, launched in any order.
struct SpreadGather {
    g: Graph,
    x: crate::BufferId,
    y: crate::BufferId,
    ks: crate::KernelId,
    kg: crate::KernelId,
    fan: u32,
    tiles: u32,
}

const TILE: u64 = 256;

impl SpreadGather {
    fn new(fan: u32, tiles: u32) -> Self {
        let mut g = Graph::new();
        let x = g.add_buffer("x", TILE * u64::from(fan * tiles)).unwrap();
        let y = g.add_buffer("y", TILE * u64::from(tiles)).unwrap();
        let ks = g.add_kernel(KernelSig::new("spread").buffer("x", Access::ReadWrite).buffer("y", Access::Read)).unwrap();
        let kg = g.add_kernel(KernelSig::new("gather").buffer("y", Access::ReadWrite).buffer("x", Access::Read)).unwrap();
        SpreadGather { g, x, y, ks, kg, fan, tiles }
    }
    fn spread(&mut self) {
        let maps = [
            ("x", TileMap::new(vec![TileRange::span(0, [TILE, TILE * u64::from(self.fan), 0], TILE)]).unwrap()),
            ("y", TileMap::new(vec![TileRange::span(0, [0, TILE, 0], TILE)]).unwrap()),
        ];
        let launch = Launch::new([self.fan, self.tiles, 1], [64, 1, 1]);
        self.g.add_launch_tiled(self.ks, launch, &[Arg::Whole(self.x), Arg::Whole(self.y)], &maps, &[]).unwrap();
    }
    /// A gather; `whole`: each block declares all of x (a whole-node relation with the spread).
    fn gather(&mut self, whole: bool) {
        let x_map = match whole {
            true => TileMap::new(vec![TileRange::span(0, [0, 0, 0], TILE * u64::from(self.fan * self.tiles))]).unwrap(),
            false => TileMap::linear(TILE * u64::from(self.fan), TILE * u64::from(self.fan)).unwrap(),
        };
        let maps = [("y", TileMap::linear(TILE, TILE).unwrap()), ("x", x_map)];
        self.g.add_launch_tiled(self.kg, Launch::linear(self.tiles, 64), &[Arg::Whole(self.y), Arg::Whole(self.x)], &maps, &[]).unwrap();
    }
    fn plan(&self) -> Plan {
        Plan::compile(&self.g).unwrap()
    }
}

/// `rounds` rounds of a spread and a gather.
fn spread_gather(fan: u32, tiles: u32, rounds: u32) -> Plan {
    let mut sg = SpreadGather::new(fan, tiles);
    for _ in 0..rounds {
        sg.spread();
        sg.gather(false);
    }
    sg.plan()
}

#[test]
fn a_spread_gather_chain_is_one_kernel_of_a_block_per_gather_block() {
    let plan = spread_gather(16, 8, 5);
    let none = vec![false; plan.node_count()];
    let gs = component_groups(&plan, &keyed(&plan), &none, FusionMode::Auto);
    assert_eq!(gs.len(), 1, "{gs:?}");
    let c = gs[0].components.as_ref().unwrap();
    assert_eq!((c.count, gs[0].lanes[0].len(), gs[0].key.grid), (8, 10, [8, 1, 1]));
    assert_eq!(c.members[0], MemberBlocks { grid: [16, 8, 1], per: 16, step: 16, stride: 1 });
    assert_eq!(c.members[1], MemberBlocks { grid: [8, 1, 1], per: 1, step: 1, stride: 0 });
    // Fusion off: nothing; nodes another group took: not these.
    assert!(component_groups(&plan, &keyed(&plan), &none, FusionMode::Off).is_empty());
    assert!(component_groups(&plan, &keyed(&plan), &vec![true; plan.node_count()], FusionMode::Auto).is_empty());
    // A body that needs its block alone (a block barrier on CUDA) is in no group of components.
    let alone = |f: Option<Fusable>| f.map(|f| Fusable { alone: true, ..f });
    assert!(component_groups(&plan, &keyed(&plan).into_iter().map(alone).collect::<Vec<_>>(), &none, FusionMode::On).is_empty());
    let mut one = keyed(&plan);
    one[4] = alone(one[4]);
    let gs = component_groups(&plan, &one, &none, FusionMode::On);
    assert!(!gs.is_empty() && gs.iter().all(|g| g.nodes().all(|v| v.index() != 4)), "{gs:?}");
}

#[test]
fn auto_keeps_each_fused_block_short_and_on_does_not() {
    // 32 spread blocks a component: past MAX_SERIAL_BLOCKS.
    let plan = spread_gather(32, 4, 3);
    let none = vec![false; plan.node_count()];
    assert!(component_groups(&plan, &keyed(&plan), &none, FusionMode::Auto).is_empty());
    let on = component_groups(&plan, &keyed(&plan), &none, FusionMode::On);
    assert_eq!(on.iter().map(|g| g.components.as_ref().unwrap().count).collect::<Vec<_>>(), [4]);
}

#[test]
fn a_dense_relation_cuts_the_run() {
    // The third gather reads all of x: a whole-node relation (more than 64 producer blocks).
    let mut sg = SpreadGather::new(16, 8);
    for r in 0..4 {
        sg.spread();
        sg.gather(r == 2);
    }
    let plan = sg.plan();
    let gs = component_groups(&plan, &keyed(&plan), &vec![false; plan.node_count()], FusionMode::Auto);
    let sizes: Vec<usize> = gs.iter().map(Group::len).collect();
    // n5 depends on every block of n4 (cut); with n5, n6 and n7 are one component of 128 + 8 + 8
    // blocks (past `auto`'s serial bound), so n5 runs alone and n6, n7 fuse.
    assert_eq!(sizes, [5, 2], "{gs:?}");
}

#[test]
fn a_members_blocks_are_named_only_where_they_are_affine() {
    assert_eq!(chunks(&[0, 0, 1, 1], 2, [4, 1, 1]), Some(MemberBlocks { grid: [4, 1, 1], per: 2, step: 2, stride: 1 }));
    assert_eq!(chunks(&[0, 1, 0, 1], 2, [4, 1, 1]), Some(MemberBlocks { grid: [4, 1, 1], per: 2, step: 1, stride: 2 }));
    assert_eq!(chunks(&[0, 1, 2], 3, [3, 1, 1]), Some(MemberBlocks { grid: [3, 1, 1], per: 1, step: 1, stride: 0 }));
    assert_eq!(chunks(&[1, 0], 2, [2, 1, 1]), None, "component 0 must start at block 0");
    assert_eq!(chunks(&[0, 1, 1, 0], 2, [4, 1, 1]), None);
    assert_eq!(chunks(&[0, 0, 1], 2, [3, 1, 1]), None, "uneven components");
    assert_eq!(chunks(&[0, 0, 0, 1, 1, 2], 3, [6, 1, 1]), None);
}

#[test]
fn a_block_local_pair_inside_a_sparse_chain_fuses_with_it_and_a_block_local_chain_is_left_to_groups() {
    // spread, spread (block-local with the first), gather, twice: one group of components.
    let mut sg = SpreadGather::new(16, 8);
    for _ in 0..2 {
        sg.spread();
        sg.spread();
        sg.gather(false);
    }
    let plan = sg.plan();
    let all = crate::fusion::all_groups(&plan, &keyed(&plan), FusionMode::Auto);
    assert_eq!(all.iter().map(|gr| (gr.len(), gr.components.as_ref().map(|c| c.count))).collect::<Vec<_>>(), [(6, Some(8))], "{all:?}");
    // A chain related block by block throughout: the block-local fusion's, no components analysed.
    let mut g = Graph::new();
    let x = g.add_buffer("x", 256 * 128).unwrap();
    let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
    for _ in 0..6 {
        g.add_launch_tiled(k, Launch::linear(128, 64), &[Arg::Whole(x)], &[("x", TileMap::linear(256, 256).unwrap())], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    assert!(component_groups(&plan, &keyed(&plan), &vec![false; plan.node_count()], FusionMode::On).is_empty());
    let all = crate::fusion::all_groups(&plan, &keyed(&plan), FusionMode::Auto);
    assert_eq!(all.iter().map(|gr| (gr.len(), gr.components.is_some())).collect::<Vec<_>>(), [(6, false)]);
}
