//! Tile maps on the host backend: per-block bodies run block by block, each access checked against the
//! block's declared tile; a body that leaves its tile fails the replay naming node, param and block; a
//! whole-launch body on a tiled node is refused at instantiate.

use std::sync::Arc;

use ostinato::{Access, Arg, Backend, BufferBinding, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType, TileMap, TileRange};
use ostinato_host::{builtins, HostBackend, HostError, HostKernel, HostMemory};

fn alloc_all(g: &Graph) -> Vec<BufferBinding<Arc<HostMemory>>> {
    g.buffers().iter().map(|_| BufferBinding::Allocate).collect()
}

/// `len` add_one nodes of `blocks` blocks of 64 threads over `blocks · 64` floats, each with `map`.
fn chain(blocks: u32, len: usize, map: &TileMap) -> Graph {
    let mut g = Graph::new();
    let x = g.add_buffer("x", u64::from(blocks) * 256).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for _ in 0..len {
        let args = [Arg::Whole(x), Arg::Scalar(Scalar::u32(blocks * 64))];
        g.add_launch_tiled(k, Launch::linear(blocks, 64), &args, &[("x", map.clone())], &[]).unwrap();
    }
    g
}

#[test]
fn a_chain_with_true_tile_maps_runs_and_gives_the_serial_result() {
    let g = chain(8, 5, &TileMap::linear(256, 256).unwrap());
    let plan = Plan::compile(&g).unwrap();
    for threads in [0, 2] {
        let mut exec = HostBackend::new(threads).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut out = vec![0u8; 8 * 256];
        exec.read_buffer(ostinato::BufferId(0), 0, &mut out).unwrap();
        assert!(out.chunks(4).all(|w| f32::from_le_bytes(w.try_into().unwrap()) == 5.0));
    }
}

#[test]
fn a_block_that_leaves_its_tile_fails_the_replay_naming_node_param_and_block() {
    // Each block declares only the first half of its 256 bytes: its threads touch all of them.
    let g = chain(8, 1, &TileMap::linear(256, 128).unwrap());
    let plan = Plan::compile(&g).unwrap();
    let mut exec = HostBackend::new(0).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
    let err = exec.replay().and_then(|_| exec.wait()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, HostError::Kernel { .. }), "{msg}");
    assert!(msg.starts_with("node 0 (add_one): kernel fault: block [0, 0, 0]: param `x`"), "{msg}");
    assert!(msg.contains("outside block [0, 0, 0]'s tile"), "{msg}");
    // Shifted by one block: block 1 touches block 2's bytes.
    let shifted = TileMap::new(vec![TileRange::span(256, [256, 0, 0], 256)]).unwrap();
    let mut g = Graph::new();
    let x = g.add_buffer("x", 9 * 256).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    g.add_launch_tiled(k, Launch::linear(8, 64), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(512))], &[("x", shifted)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let mut exec = HostBackend::new(0).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
    assert!(exec.replay().and_then(|_| exec.wait()).unwrap_err().to_string().contains("block [0, 0, 0]"));
}

#[test]
fn a_whole_launch_body_on_a_tiled_node_is_refused_at_instantiate() {
    let g = chain(4, 1, &TileMap::linear(256, 256).unwrap());
    let plan = Plan::compile(&g).unwrap();
    let whole = HostKernel::new(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32), |_| Ok(()));
    let err = HostBackend::new(0).instantiate(&plan, vec![whole], alloc_all(&g)).err().unwrap();
    assert!(matches!(err, HostError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("node 0 (add_one): param `x` declares a tile map"), "{err}");
}

#[test]
fn per_block_bodies_cover_every_element_once_on_any_grid() {
    // 3-D grids and 2-D blocks, element counts below, at and above the threads of the launch.
    for (grid, block, n) in [([3u32, 2, 2], [8u32, 2, 1], 100u32), ([1, 1, 1], [32, 1, 1], 1000), ([5, 1, 3], [4, 4, 2], 480), ([7, 3, 1], [1, 1, 1], 20)] {
        let mut g = Graph::new();
        let x = g.add_buffer("x", u64::from(n) * 4).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        g.add_launch(k, Launch::new(grid, block), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(n))], &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        let mut exec = HostBackend::new(0).instantiate(&plan, vec![builtins::add_one()], alloc_all(&g)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut out = vec![0u8; n as usize * 4];
        exec.read_buffer(x, 0, &mut out).unwrap();
        assert!(out.chunks(4).all(|w| f32::from_le_bytes(w.try_into().unwrap()) == 1.0), "{grid:?} {block:?} {n}");
    }
}
