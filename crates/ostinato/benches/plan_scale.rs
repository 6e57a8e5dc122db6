//! Planning benchmark: `cargo bench -p ostinato --bench plan_scale`.
//! Random graphs (random extents and modes over many buffers, decode-like locality) and plain chains
//! of 10⁴ to 10⁶ nodes are planned on one thread; prints the median time, the planner's peak heap
//! memory (an allocator that tracks it) and the edge count, or the planner's refusal past its budget.
//! Then the tile relations a backend derives at `instantiate` along chains of 941 tiled launches of
//! 128 to 8,192 blocks: each block its own row (the same disjoint map every node, block-local in
//! closed form), its row plus its neighbour's first word (a halo: the same offsets at every block,
//! found once), and rows against pairs of rows on half the grid (solved block by block). Last, the
//! built-in `add_one`'s footprint checked against the tile maps of four such chains of 8,192 blocks
//! (`ostinato::builtins`): node by node, block by block, and once per launch alike (`LaunchChecks`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The system allocator, tracking the bytes in use and their peak.
struct Peak;
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        IN_USE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Peak = Peak;

use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, Plan, PlanOptions, Scalar, ScalarType, Slice, TileMap, TileRange};

fn build(nodes: usize, buffers: usize, seed: u64) -> Graph {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut g = Graph::new();
    for b in 0..buffers {
        g.add_buffer(format!("b{b}"), 1 << 16).unwrap();
    }
    let k = g
        .add_kernel(KernelSig::new("k").buffer("out", Access::ReadWrite).buffer("a", Access::Read).buffer("b", Access::Read).scalar("n", ScalarType::U32))
        .unwrap();
    for i in 0..nodes {
        // Mostly-local buffer choice (like a layer stack), sometimes far away.
        let mut pick = || {
            let r = next();
            let base = (i * buffers / nodes) as u64;
            let b = if r % 8 == 0 { (r >> 8) % buffers as u64 } else { (base + (r >> 8) % 8) % buffers as u64 };
            let off = ((r >> 20) % 16) * 4096;
            Slice { buffer: BufferId(b as u32), offset: off, len: 4096 * (1 + (r >> 40) % 4).min(16 - off / 4096) }
        };
        // A launch whose written slice overlaps another of its params is refused (aliasing): drawn
        // again, as a user would pass other slices.
        loop {
            let args = [Arg::Buffer(pick()), Arg::Buffer(pick()), Arg::Buffer(pick()), Arg::Scalar(Scalar::u32(1024))];
            if g.add_launch(k, Launch::linear(1, 256), &args, &[]).is_ok() {
                break;
            }
        }
    }
    g
}

/// A chain of `nodes` launches read-modify-writing one buffer.
fn chain(nodes: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4096).unwrap();
    let k = g.add_kernel(KernelSig::new("k").buffer("x", Access::ReadWrite)).unwrap();
    for _ in 0..nodes {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x)], &[]).unwrap();
    }
    g
}

/// What each block of a [`tiled_chain`] declares.
#[derive(Clone, Copy)]
enum Tiles {
    /// Its row.
    Row,
    /// Its row and the next row's first word (one block fewer than rows).
    Halo,
    /// Every other launch takes two rows a block on half the grid (grids that differ: the relation is
    /// solved block by block).
    Pairs,
}

/// A chain of 941 launches of `blocks` blocks over one buffer of rows (1 KiB a block), each declaring
/// `tiles`.
fn tiled_chain(blocks: u32, tiles: Tiles) -> Graph {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024 * u64::from(blocks)).unwrap();
    let k = g.add_kernel(KernelSig::new("row").buffer("x", Access::ReadWrite)).unwrap();
    let row = (blocks, TileMap::linear(1024, 1024).unwrap());
    let pair = (blocks / 2, TileMap::linear(2048, 2048).unwrap());
    let halo = (blocks - 1, TileMap::new(vec![TileRange::span(0, [1024, 0, 0], 1024), TileRange::span(1024, [1024, 0, 0], 4)]).unwrap());
    for i in 0..941 {
        let (grid, map) = match tiles {
            Tiles::Row => &row,
            Tiles::Halo => &halo,
            Tiles::Pairs if i % 2 == 1 => &pair,
            Tiles::Pairs => &row,
        };
        g.add_launch_tiled(k, Launch::linear(*grid, 256), &[Arg::Whole(x)], &[("x", map.clone())], &[]).unwrap();
    }
    g
}

/// The time of every edge's tile relation of `g`'s plan (`Plan::tile_relation`), once each.
fn measure_relations(label: &str, g: &Graph) {
    let plan = Plan::compile(g).unwrap();
    let t = Instant::now();
    let mut block_local = 0;
    for e in plan.edges() {
        block_local += usize::from(plan.tile_relation(e.from, e.to).is_block_local());
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let edges = plan.edges().len().max(1);
    println!("tile relations {label}: {ms:9.2} ms for {edges} edges ({:.2} µs each), {block_local} block-local", ms * 1e3 / edges as f64);
}

fn measure(label: &str, g: &Graph, runs: usize) {
    let mut times = Vec::new();
    let mut outcome = String::new();
    let base = IN_USE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    for _ in 0..runs {
        let t = Instant::now();
        let p = Plan::compile_with(g, PlanOptions { max_lanes: 4 });
        times.push(t.elapsed().as_secs_f64() * 1e3);
        outcome = match p {
            Ok(p) => format!("{} edges", p.edges().len()),
            Err(e) => format!("refused: {e}"),
        };
    }
    times.sort_by(f64::total_cmp);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base) as f64 / (1 << 20) as f64;
    println!("plan {label}: median {:9.2} ms (min {:.2}, max {:.2}), peak {peak:8.1} MiB, {outcome}", times[runs / 2], times[0], times[runs - 1]);
}

/// Four chains of 941 launches of the built-in `add_one` over 8,192 blocks, each declaring its rows
/// (the bench's `grid/indep/n941/b8192`), checked against its stated footprint both ways.
fn measure_builtin_checks() {
    use ostinato::builtins::{check_launch, LaunchChecks};
    use ostinato::NodeId;
    let mut g = Graph::new();
    let n = 8192u32 * 256;
    let xs: Vec<_> = (0..4).map(|i| g.add_buffer(format!("x{i}"), 4 * u64::from(n)).unwrap()).collect();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let row = TileMap::linear(1024, 1024).unwrap();
    for _ in 0..941 {
        for &x in &xs {
            g.add_launch_tiled(k, Launch::linear(8192, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(n))], &[("x", row.clone())], &[]).unwrap();
        }
    }
    let nodes = (0..g.nodes().len() as u32).map(NodeId);
    let t = Instant::now();
    let each = nodes.clone().all(|v| check_launch(&g, v, "add_one", &|_| Scalar::u32(0)).is_ok());
    let by_node = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut checks = LaunchChecks::default();
    let alike = nodes.clone().all(|v| checks.check(&g, v, "add_one", &|_| Scalar::u32(0)).is_ok());
    let once = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "built-in checks, 4 × 941 launches of 8,192 blocks: node by node {by_node:.2} ms, once per launch alike {once:.3} ms (all passed: {})",
        each && alike
    );
}

fn main() {
    for (nodes, buffers, runs) in [(1_000, 100, 7), (10_000, 1_000, 7), (20_000, 1_000, 7), (100_000, 10_000, 3), (200_000, 20_000, 1)] {
        measure(&format!("{nodes:>7} random nodes / {buffers:>6} buffers"), &build(nodes, buffers, 0x5eed), runs);
    }
    for (nodes, runs) in [(10_000, 7), (100_000, 3), (1_000_000, 1)] {
        measure(&format!("{nodes:>7}-node chain                 "), &chain(nodes), runs);
    }
    for blocks in [128, 1024, 8192] {
        for (tiles, what) in [(Tiles::Row, "row         "), (Tiles::Halo, "row + halo  "), (Tiles::Pairs, "rows / pairs")] {
            measure_relations(&format!("941 × {blocks:>4} blocks, {what}"), &tiled_chain(blocks, tiles));
        }
    }
    measure_builtin_checks();
}
