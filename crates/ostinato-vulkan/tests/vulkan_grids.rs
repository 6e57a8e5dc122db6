//! Built-in kernels launched on 2-D and 3-D grids mean what they mean on the host: each built-in's work
//! is a function of its scalars, never of the grid's shape (the host runs a node once, whatever its
//! launch). Integer kernels are compared bit for bit, floating-point ones within a relative 1e-5 (their
//! reductions and transcendental functions round differently). Skips without a Vulkan device.

mod common;

use ostinato::rng::XorShift64 as Rng;
use ostinato::{Arg, Backend, BufferId, Exec, Graph, Launch, Plan, Scalar};
use ostinato_host::HostBackend;

use common::backend_or_skip;

/// One node of built-in `name` over buffers of `sizes` bytes (random floats in 0..1), with `scalars`.
fn node(name: &str, sizes: &[u64], scalars: &[Scalar], grid: [u32; 3]) -> Plan {
    let sig = ostinato_host::builtins::lookup(name).unwrap().sig;
    let mut g = Graph::new();
    let bufs: Vec<BufferId> = sizes.iter().enumerate().map(|(i, &s)| g.add_buffer(format!("b{i}"), s).unwrap()).collect();
    let k = g.add_kernel(sig).unwrap();
    let args: Vec<Arg> = bufs.iter().map(|&b| Arg::Whole(b)).chain(scalars.iter().map(|&s| Arg::Scalar(s))).collect();
    g.add_launch(k, Launch::new(grid, [256, 1, 1]), &args, &[]).unwrap();
    Plan::compile(&g).unwrap()
}

/// Runs `plan` twice on `exec` from seeded random floats and returns every buffer's bytes.
fn run<E: Exec>(exec: &mut E, plan: &Plan) -> Vec<Vec<u8>>
where
    E::Error: std::fmt::Debug,
{
    let g = plan.graph();
    let ids: Vec<BufferId> = (0..g.buffers().len()).map(|i| BufferId(i as u32)).collect();
    for &b in &ids {
        let mut r = Rng::seeded(7 + b.0 as u64);
        let bytes: Vec<u8> = (0..g.buffer(b).size / 4).flat_map(|_| ((r.below(1 << 20) as f32) / (1 << 20) as f32).to_le_bytes()).collect();
        exec.write_buffer(b, 0, &bytes).unwrap();
    }
    exec.replay().unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
    ids.iter()
        .map(|&b| {
            let mut v = vec![0u8; g.buffer(b).size as usize];
            exec.read_buffer(b, 0, &mut v).unwrap();
            v
        })
        .collect()
}

fn close(want: &[Vec<u8>], got: &[Vec<u8>], exact: bool) -> Result<(), String> {
    for (b, (w, g)) in want.iter().zip(got).enumerate() {
        for (i, (x, y)) in w.chunks_exact(4).zip(g.chunks_exact(4)).enumerate() {
            let (fx, fy) = (f32::from_le_bytes([x[0], x[1], x[2], x[3]]), f32::from_le_bytes([y[0], y[1], y[2], y[3]]));
            let ok = if exact { x == y } else { (fx - fy).abs() <= 1e-5 * fx.abs().max(1.0) };
            if !ok {
                return Err(format!("buffer {b} word {i}: host {fx}, vulkan {fy}"));
            }
        }
    }
    Ok(())
}

#[test]
fn built_ins_on_2d_and_3d_grids_match_the_host() {
    let Some(vk) = backend_or_skip("built_ins_on_2d_and_3d_grids_match_the_host") else { return };
    let host = HostBackend::serial();
    let u = Scalar::u32;
    // (kernel, buffer sizes, scalars, exact)
    let cases: Vec<(&str, Vec<u64>, Vec<Scalar>, bool)> = vec![
        ("add_one", vec![1024], vec![u(256)], true),
        ("add_one", vec![4 * 3000], vec![u(3000)], true),
        ("mix", vec![4 * 1500, 4 * 700], vec![u(1500), u(700), u(12345)], true),
        ("add", vec![4 * 2000, 4 * 2000], vec![u(2000)], true),
        ("kv_store", vec![4 * 64 * 8, 4 * 64 * 8, 4 * 64, 4 * 64], vec![u(5), u(64)], true),
        ("silu_mul", vec![4 * 900, 8 * 900], vec![u(900)], false),
        ("rope", vec![4 * 8 * 64], vec![u(9), u(8), u(64)], false),
        ("gemv", vec![4 * 40, 4 * 40 * 96, 4 * 96], vec![u(40), u(96)], false),
        ("rmsnorm", vec![4 * 700, 4 * 700, 4 * 700], vec![u(700), Scalar::f32(1e-5)], false),
        ("attention", vec![4 * 6 * 32, 4 * 6 * 32, 4 * 16 * 2 * 32, 4 * 16 * 2 * 32], vec![u(11), u(6), u(2), u(32)], false),
    ];
    let grids = [[1, 2, 1], [2, 3, 1], [1, 1, 3], [2, 2, 2]];
    let mut compared = 0;
    for (name, sizes, scalars, exact) in &cases {
        for grid in grids {
            let plan = node(name, sizes, scalars, grid);
            let mut want = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            let mut got = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            close(&run(&mut want, &plan), &run(&mut got, &plan), *exact).unwrap_or_else(|e| panic!("{name} on grid {grid:?}: {e}"));
            compared += 1;
        }
    }
    // The reproducer: add_one on grid [1, 2] over 256 words adds 1 once per replay.
    let plan = node("add_one", &[1024], &[u(256)], [1, 2, 1]);
    let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    exec.write_buffer(BufferId(0), 0, &[0u8; 1024]).unwrap();
    exec.replay().unwrap();
    let mut out = [0u8; 1024];
    exec.read_buffer(BufferId(0), 0, &mut out).unwrap();
    assert!(out.chunks_exact(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 1.0), "every word 1.0 after one replay");
    eprintln!("{compared} built-in launches on 2-D and 3-D grids match the host on {}", vk.context().name);
}
