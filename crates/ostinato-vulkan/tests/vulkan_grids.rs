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

/// Runs the built-ins' grid arithmetic (`kernels/wgsl/grid.wgsl`, as naga and the driver compile
/// it) on `cases` of (workgroup id, grid): per case the workgroup's linear index, the grid's
/// workgroups, the first element of its last invocation, and the stride of a 256-wide kernel.
fn grid_arithmetic(vk: &ostinato_vulkan::VulkanBackend, cases: &[[u32; 6]]) -> Vec<[u32; 4]> {
    use ostinato::{Access, KernelRef, KernelSig};
    let probe = format!(
        "@group(0) @binding(0) var<storage, read> cases: array<u32>;\n@group(0) @binding(1) var<storage, read_write> out_: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n    let i = gid.x;\n    if (i >= arrayLength(&cases) / 6u) {{ return; }}\n    let wid = vec3<u32>(cases[6u * i], cases[6u * i + 1u], cases[6u * i + 2u]);\n    let groups = vec3<u32>(cases[6u * i + 3u], cases[6u * i + 4u], cases[6u * i + 5u]);\n    out_[4u * i] = ost_group(wid, groups);\n    out_[4u * i + 1u] = ost_groups(groups);\n    out_[4u * i + 2u] = ost_add(ost_mul(ost_group(wid, groups), 256u), 255u);\n    out_[4u * i + 3u] = ost_mul(ost_groups(groups), 256u);\n}}\n{}",
        ostinato_vulkan::shaders::GRID
    );
    let dir = std::env::temp_dir().join(format!("ostinato-vk-grids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("grid_probe.wgsl");
    std::fs::write(&path, probe).unwrap();
    let sig = KernelSig::new("grid_probe").buffer("cases", Access::Read).buffer("out", Access::ReadWrite);
    let kernel = vk.bind_kernel(&sig, &KernelRef::file(&path).with_entry("main")).unwrap();
    let mut g = Graph::new();
    let input = g.add_buffer("cases", 24 * cases.len() as u64).unwrap();
    let output = g.add_buffer("out", 16 * cases.len() as u64).unwrap();
    let k = g.add_kernel(sig).unwrap();
    g.add_launch(k, Launch::linear((cases.len() as u32).div_ceil(64), 64), &[Arg::Whole(input), Arg::Whole(output)], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let mut exec = vk.instantiate(&plan, vec![kernel], ostinato::allocate_all(&plan)).unwrap();
    exec.write_buffer(input, 0, &cases.iter().flatten().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    exec.replay().unwrap();
    let mut bytes = vec![0u8; 16 * cases.len()];
    exec.read_buffer(output, 0, &mut bytes).unwrap();
    let words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    words.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect()
}

#[test]
fn the_grid_arithmetic_saturates_where_u32_would_wrap() {
    let Some(vk) = backend_or_skip("the_grid_arithmetic_saturates_where_u32_would_wrap") else { return };
    // The oracle: exact in u64, then saturated at u32::MAX (which no u32 element count reaches).
    let sat = |v: u128| v.min(u32::MAX as u128) as u32;
    let edges = [0u32, 1, 2, 255, 256, 257, 4095, 4096, 0xffff, 0x1_0000, 0x1_0001, 1 << 24, (1 << 24) - 1, 1 << 31, u32::MAX - 1, u32::MAX];
    let mut rng = Rng::seeded(42);
    let mut cases: Vec<[u32; 6]> = vec![
        // The two grids that went wrong: [65535, 257, 1] (workgroups past 2^24 wrapped onto the first
        // ones) and [4096, 4096, 1] (a stride of 0), at their last workgroup and around 2^24.
        [65534, 256, 0, 65535, 257, 1],
        [0, 256, 0, 65535, 257, 1],
        [4095, 4095, 0, 4096, 4096, 1],
        [65535, 65535, 1, 65535, 65535, 2],
    ];
    for _ in 0..2000 {
        let pick = |r: &mut Rng| if r.below(2) == 0 { edges[r.below(edges.len() as u64) as usize] } else { r.below(1 << 32) as u32 };
        let groups = [pick(&mut rng).max(1), pick(&mut rng).max(1), pick(&mut rng).max(1)];
        let wid = [0, 1, 2].map(|d| (rng.below(groups[d] as u64)) as u32);
        cases.push([wid[0], wid[1], wid[2], groups[0], groups[1], groups[2]]);
    }
    let got = grid_arithmetic(&vk, &cases);
    for (c, g) in cases.iter().zip(&got) {
        let [wx, wy, wz, gx, gy, gz] = c.map(u128::from);
        let group = wx + gx * (wy + gy * wz);
        let want = [sat(group), sat(gx * gy * gz), sat(group * 256 + 255), sat(gx * gy * gz * 256)];
        assert_eq!(*g, want, "workgroup {:?} of grid {:?}", &c[..3], &c[3..]);
    }
    eprintln!("{} cases of the built-ins' grid arithmetic saturate exactly where u32 would wrap on {}", cases.len(), vk.context().name);
}

#[test]
fn grids_of_2_to_the_24_workgroups_and_more_give_each_element_once() {
    let Some(vk) = backend_or_skip("grids_of_2_to_the_24_workgroups_and_more_give_each_element_once") else { return };
    let vk = vk.with_options(ostinato_vulkan::VulkanOptions { wait_timeout: Some(std::time::Duration::from_secs(600)), ..Default::default() });
    // Lavapipe runs a 256-wide workgroup in about 3 µs (one with a workgroup barrier, as gemv,
    // rmsnorm and attention have, many times that), so one dispatch of 2^24 workgroups takes a
    // minute or more there: on a CPU device only where asked (the arithmetic itself is checked on
    // every device above). `OSTINATO_VK_BIG_GRIDS`: `1` for every kernel, or a comma-separated list
    // of kernels (`add_one,mix` takes about four minutes on lavapipe).
    let asked = std::env::var("OSTINATO_VK_BIG_GRIDS").ok();
    let cpu = vk.context().name.contains("llvmpipe");
    if cpu && asked.is_none() {
        ostinato_testkit::skip(&format!("{}: grids of 2^24 workgroups take minutes on a CPU device; OSTINATO_VK_BIG_GRIDS=1 runs them", vk.context().name));
        return;
    }
    let wanted = |name: &str| asked.as_deref().is_none_or(|a| a == "1" || a.split(',').any(|k| k == name));
    let host = HostBackend::serial();
    let u = Scalar::u32;
    // (kernel, buffer sizes, scalars, exact): sizes small, so almost every workgroup has no work.
    let cases: Vec<(&str, Vec<u64>, Vec<Scalar>, bool)> = vec![
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
    let limits = vk.context().limits.workgroup_count;
    let mut ran = 0;
    let grids: &[[u32; 3]] = if cpu { &[[65535, 257, 1]] } else { &[[65535, 257, 1], [4096, 4096, 1], [257, 256, 256]] };
    for &grid in grids {
        if (0..3).any(|d| grid[d] > limits[d]) {
            continue;
        }
        for (name, sizes, scalars, exact) in cases.iter().filter(|c| wanted(c.0)) {
            let plan = node(name, sizes, scalars, grid);
            let mut want = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            let mut got = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
            close(&run(&mut want, &plan), &run(&mut got, &plan), *exact).unwrap_or_else(|e| panic!("{name} on grid {grid:?}: {e}"));
            ran += 1;
        }
    }
    assert!(ran > 0, "the device takes none of the grids");
    eprintln!("{ran} built-in launches on grids of 2^24 workgroups and more match the host on {}", vk.context().name);
}
