//! Random programs whose launches declare per-block tile maps, and a runner that executes a plan the
//! way a fused plan would: each fused group's blocks in an order of the caller's (blocks of one kernel
//! run in any order), every block running its members' block in turn.
//!
//! The programs are `mix` launches (`out = out*3 + inp[i % n_in] + salt`, wrapping u32: any lost
//! ordering changes bytes) on 1-D and 2-D grids and blocks over views at any 4-byte offset. Each map is
//! the block's true footprint (the host checks every access against it): `out` and a full-length `inp`
//! take block `b`'s `T` elements (`b` the linear block index, `T` the block's threads); a short `inp`
//! (fewer words than a block has threads) is read whole by every block. Because slices start at any
//! element, a consumer's blocks meet its producer's blocks in place, shifted, or all at once: the
//! relations come out block-local, sparse and dense.

use std::sync::Arc;

use ostinato::file::BufferInit;
use ostinato::fusion::{Fusable, FuseKey, Group};
use ostinato::rng::XorShift64 as Rng;
use ostinato::{Arg, BufferId, Graph, Launch, NodeId, NodeOp, ParamKind, Plan, Scalar, Slice, TileMap, TileRange};
use ostinato_host::kernel::CallArg;
use ostinato_host::{HostKernel, HostMemory};

use crate::random_graphs::{mix_sig, RandomProgram};

/// Generates a tiled program of `nodes` launches from `seed`.
pub fn random_tiled_program(seed: u64, nodes: usize) -> RandomProgram {
    let mut r = Rng::seeded(seed ^ 0x711e_d000);
    let mut g = Graph::new();
    // One or two launch shapes per program, so that neighbours often share a grid.
    let shapes: Vec<([u32; 3], [u32; 3])> = (0..1 + r.below(2))
        .map(|_| {
            let grid = [[2, 1, 1], [4, 1, 1], [8, 1, 1], [16, 1, 1], [2, 2, 1], [4, 2, 1], [3, 3, 1], [2, 2, 2]][r.below(8) as usize];
            // 256 threads in x: the WGSL built-ins' workgroup, so Vulkan fuses such launches too.
            let block = [[32, 1, 1], [64, 1, 1], [16, 2, 1], [128, 1, 1], [256, 1, 1]][r.below(5) as usize];
            (grid, block)
        })
        .collect();
    let most = shapes.iter().map(|(gr, b)| gr.iter().chain(b).map(|&d| u64::from(d)).product::<u64>()).max().unwrap_or(1);
    let mut inits = Vec::new();
    for b in 0..1 + r.below(3) {
        let words = most * (2 + r.below(3)) + r.below(64);
        let id = g.add_buffer(format!("b{b}"), 4 * words).expect("fresh name, non-zero size");
        inits.push(Some(BufferInit::Random(seed ^ (b + 1))));
        if r.below(2) == 0 {
            let off = r.below(words / 2);
            let _ = g.add_view(format!("v{b}"), id, 4 * off, 4 * (words - off)).map(|_| inits.push(None));
        }
    }
    let mix = g.add_kernel(mix_sig()).expect("fresh kernel");
    let salt_slot = g.add_slot("salt", Scalar::u32(r.below(1000) as u32)).expect("fresh slot");
    let nb = g.buffers().len() as u64;
    let mut tries = 0;
    // Slices placed so far, by length in words: a later node often takes one again, so that its blocks
    // meet a producer's blocks in place (block-local) rather than shifted.
    let mut placed: Vec<Slice> = Vec::new();
    while g.nodes().len() < nodes && tries < 50 * nodes {
        tries += 1;
        let (grid, block) = shapes[r.below(shapes.len() as u64) as usize];
        let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
        let n = threads * grid.iter().map(|&d| u64::from(d)).product::<u64>();
        // Block b's T elements: stride T·4 bytes per linear block index (x, then y at gx blocks).
        let per_block =
            TileMap::new(vec![TileRange::span(0, [4 * threads, 4 * threads * u64::from(grid[0]), 4 * threads * u64::from(grid[0] * grid[1])], 4 * threads)])
                .expect("a valid range");
        let place = |r: &mut Rng, words: u64| -> Option<Slice> {
            let again: Vec<&Slice> = placed.iter().filter(|s| s.len == 4 * words).collect();
            if !again.is_empty() && r.below(3) != 0 {
                return Some(*again[r.below(again.len() as u64) as usize]);
            }
            let b = BufferId(r.below(nb) as u32);
            let have = g.buffer(b).size / 4;
            (have >= words).then(|| Slice { buffer: b, offset: 4 * r.below(have - words + 1), len: 4 * words })
        };
        let Some(out) = place(&mut r, n) else { continue };
        let short = r.below(4) == 0;
        let n_in = if short { 1 + r.below(threads - 1) } else { n };
        let Some(inp) = place(&mut r, n_in) else { continue };
        let mut tiles: Vec<(&str, TileMap)> = Vec::new();
        if r.below(8) != 0 {
            tiles.push(("out", per_block.clone()));
        }
        if r.below(8) != 0 {
            let map = if short { TileMap::new(vec![TileRange::span(0, [0, 0, 0], 4 * n_in)]).expect("a valid range") } else { per_block.clone() };
            tiles.push(("inp", map));
        }
        let salt = if r.below(3) == 0 { Arg::Slot(salt_slot) } else { Arg::Scalar(Scalar::u32(r.next_u64() as u32)) };
        let args = [Arg::Buffer(out), Arg::Buffer(inp), Arg::Scalar(Scalar::u32(n as u32)), Arg::Scalar(Scalar::u32(n_in as u32)), salt];
        // Refused where out and inp overlap (one launch's threads run in no order): draw again.
        if g.add_launch_tiled(mix, Launch::new(grid, block), &args, &tiles, &[]).is_ok() {
            placed.extend([out, inp]);
        }
    }
    RandomProgram { graph: g, inits, salt_slot }
}

/// Every kernel launch of `plan` may fuse, keyed by its own block shape and grid and one source (as
/// a backend keys the launches of one module whose bodies are all certified).
pub fn launches_fusable(plan: &Plan) -> Vec<Option<Fusable>> {
    plan.graph()
        .nodes()
        .iter()
        .map(|n| match &n.op {
            NodeOp::Kernel { launch, .. } => {
                Some(Fusable { key: FuseKey { block: launch.block, grid: launch.grid, source: 0 }, uses_shared: false, alone: false })
            }
            _ => None,
        })
        .collect()
}

/// The order a fused group's blocks run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockOrder {
    Forward,
    Backward,
    /// A permutation drawn from the seed.
    Shuffled(u64),
}

/// Runs `plan` (a program of kernel launches whose host kernels run per block, e.g. a
/// [`random_tiled_program`]) on host memory the way the plan fused into `groups` runs: units in a
/// topological order of the contracted plan; a node alone, all its blocks; a group, for each fused
/// block in `order` — a lane's block `b` (of a multi-block group, its lanes side by side) or a lane
/// (of a group of one-block nodes) — its members in turn.
/// Returns every root buffer's bytes, as `random_graphs::serial_result` does, or the first kernel
/// fault.
pub fn run_blockwise(plan: &Plan, prog: &RandomProgram, groups: &[Group], order: BlockOrder) -> Result<Vec<(BufferId, Vec<u8>)>, String> {
    let kernels = crate::random_graphs::host_kernels(plan).map_err(|e| e.to_string())?;
    run_blockwise_with(plan, &kernels, &prog.inits, groups, order)
}

/// [`run_blockwise`] of any plan whose launches have per-block host twins (`kernels`, in kernel-id
/// order), its buffers started from `inits` (by buffer id; the rest zero). A group of components runs
/// its fused blocks in `order`, each running every member's blocks of its component in turn.
pub fn run_blockwise_with(
    plan: &Plan,
    kernels: &[HostKernel],
    inits: &[Option<BufferInit>],
    groups: &[Group],
    order: BlockOrder,
) -> Result<Vec<(BufferId, Vec<u8>)>, String> {
    let g = plan.graph();
    let memory: Vec<Arc<HostMemory>> =
        g.buffers().iter().enumerate().map(|(i, b)| Arc::new(HostMemory::zeroed(if b.root.index() == i { b.size } else { 0 }))).collect();
    for (i, init) in inits.iter().enumerate() {
        if let Some(init) = init {
            let mut bytes = vec![0u8; g.buffers()[i].size as usize];
            init.fill(&mut bytes);
            memory[i].write(0, &bytes);
        }
    }
    let run_block = |v: NodeId, block: [u32; 3]| -> Result<(), String> {
        let NodeOp::Kernel { kernel, launch, args } = &g.node(v).op else { return Err(format!("n{v}: only kernel launches run block by block")) };
        let sig = g.kernel(*kernel);
        let call: Vec<CallArg> = sig
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| match (&p.kind, a) {
                (ParamKind::Buffer(access), Arg::Buffer(s)) => {
                    let (root, start, _) = g.root_extent(*s);
                    CallArg::Buffer { memory: root.index(), start, len: s.len, access: *access }
                }
                (_, Arg::Scalar(x)) => CallArg::Scalar(*x),
                (_, Arg::Slot(s)) => CallArg::Scalar(g.slots()[s.index()].initial),
                _ => CallArg::Scalar(Scalar::u32(0)),
            })
            .collect();
        let tiles: Vec<Option<TileMap>> = (0..sig.params.len()).map(|p| g.tile_map(v, p).cloned()).collect();
        kernels[kernel.index()].call_block(&call, &memory, *launch, block, &tiles).map_err(|e| format!("{}: {e}", g.describe_node(v)))
    };
    let blocks_of = |v: NodeId| -> Vec<[u32; 3]> {
        let NodeOp::Kernel { launch, .. } = &g.node(v).op else { return Vec::new() };
        (0..ostinato::tiles::block_count(launch.grid)).map(|i| ostinato::tiles::block_at(launch.grid, i)).collect()
    };
    let arrange = |mut items: Vec<usize>| -> Vec<usize> {
        match order {
            BlockOrder::Forward => {}
            BlockOrder::Backward => items.reverse(),
            BlockOrder::Shuffled(seed) => {
                let mut r = Rng::seeded(seed);
                for i in (1..items.len()).rev() {
                    items.swap(i, r.below(i as u64 + 1) as usize);
                }
            }
        }
        items
    };
    for unit in unit_order(plan, groups) {
        match unit {
            Unit::Node(v) => {
                for b in blocks_of(v) {
                    run_block(v, b)?;
                }
            }
            Unit::Group(gi) => {
                let gr = &groups[gi];
                if let Some(c) = &gr.components {
                    // Fused block `c` runs each member's blocks of component `c`, in plan order.
                    for ci in arrange((0..c.count as usize).collect()) {
                        for (&v, m) in gr.lanes[0].iter().zip(&c.members) {
                            for k in 0..m.per {
                                run_block(v, ostinato::tiles::block_at(m.grid, m.block(ci as u64, k)))?;
                            }
                        }
                    }
                } else if blocks_of(gr.lanes[0][0]).len() > 1 {
                    // Fused block `l · blocks + b` runs lane `l`'s members' block `b` in turn.
                    let blocks = blocks_of(gr.lanes[0][0]);
                    for i in arrange((0..gr.lanes.len() * blocks.len()).collect()) {
                        for &v in &gr.lanes[i / blocks.len()] {
                            run_block(v, blocks[i % blocks.len()])?;
                        }
                    }
                } else {
                    for li in arrange((0..gr.lanes.len()).collect()) {
                        for &v in &gr.lanes[li] {
                            for b in blocks_of(v) {
                                run_block(v, b)?;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok((0..g.buffers().len())
        .filter(|&i| g.buffers()[i].root.index() == i)
        .map(|i| {
            let mut bytes = vec![0u8; g.buffers()[i].size as usize];
            memory[i].read(0, &mut bytes);
            (BufferId(i as u32), bytes)
        })
        .collect())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Node(NodeId),
    Group(usize),
}

/// The plan's nodes with each group contracted, in a topological order (Kahn, earliest first).
fn unit_order(plan: &Plan, groups: &[Group]) -> Vec<Unit> {
    let n = plan.node_count();
    let mut unit_of: Vec<usize> = (0..n).collect();
    for (i, gr) in groups.iter().enumerate() {
        for v in gr.nodes() {
            unit_of[v.index()] = n + i;
        }
    }
    let units = n + groups.len();
    let live: Vec<bool> = (0..units).map(|u| if u < n { unit_of[u] == u } else { true }).collect();
    let mut indeg = vec![0usize; units];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); units];
    for e in plan.edges() {
        let (a, b) = (unit_of[e.from.index()], unit_of[e.to.index()]);
        if a != b && !succ[a].contains(&b) {
            succ[a].push(b);
            indeg[b] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..units).filter(|&u| live[u] && indeg[u] == 0).collect();
    let mut out = Vec::new();
    while let Some(u) = ready.pop_first() {
        out.push(if u < n { Unit::Node(NodeId(u as u32)) } else { Unit::Group(u - n) });
        for &w in &succ[u] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.insert(w);
            }
        }
    }
    out
}
