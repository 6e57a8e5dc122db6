//! The raw Vulkan baseline on whatever Vulkan device is found (Mesa's lavapipe in CI, the GPU's driver on the
//! device machine): random dependent `mix` programs and `add_one` chains, recorded with one barrier per
//! dependency level, must equal the host oracle bit for bit. Skips with a message where no Vulkan
//! loader or device is found.

use ostinato::rng::XorShift64 as Rng;
use std::sync::Arc;

use ostinato::file::BufferInit;
use ostinato::{read_roots, write_inits, Arg, Backend, BufferId, Exec, Graph, KernelSig, Launch, Plan, Scalar, Slice};
use ostinato_bench::vulkan::VulkanRowMemory;
use ostinato_bench::vulkan_raw::{builtin_shaders, levels, VulkanRun};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::mix_sig;
use ostinato_vulkan::Context;

fn context_or_skip(test: &str) -> Option<Arc<Context>> {
    match Context::open() {
        Ok(c) => Some(c),
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            None
        }
    }
}

fn oracle(plan: &Plan, inits: &[Option<BufferInit>], replays: usize) -> Vec<(BufferId, Vec<u8>)> {
    let kernels = ostinato::bind_builtins(&ostinato_host::HostBackend::serial(), plan).unwrap();
    let mut exec = HostBackend::serial().instantiate(plan, kernels, ostinato::allocate_all(plan)).unwrap();
    write_inits(&mut exec, inits).unwrap();
    for _ in 0..replays {
        exec.replay().unwrap();
    }
    read_roots(&mut exec).unwrap()
}

fn vulkan(ctx: &Arc<Context>, plan: &Plan, inits: &[Option<BufferInit>], replays: usize) -> Vec<(BufferId, Vec<u8>)> {
    let memory = VulkanRowMemory::new(ctx, plan.graph()).unwrap();
    let mut run = VulkanRun::new(ctx, plan, memory.roots(), &[], &builtin_shaders(plan).unwrap()).unwrap();
    for (i, init) in inits.iter().enumerate() {
        if let Some(init) = init {
            let mut b = vec![0u8; plan.graph().buffers()[i].size as usize];
            init.fill(&mut b);
            run.write(plan, BufferId(i as u32), &b).unwrap();
        }
    }
    for _ in 0..replays {
        run.run(0).unwrap();
    }
    let mut out = Vec::new();
    for (i, b) in plan.graph().buffers().iter().enumerate() {
        let mut v = vec![0u8; b.size as usize];
        run.read(plan, BufferId(i as u32), &mut v).unwrap();
        out.push((BufferId(i as u32), v));
    }
    out
}

/// Random `mix` programs over 2–3 buffers; slices start on 256-byte boundaries (storage-buffer offset
/// alignment); `out` and `inp` of one node never overlap.
fn random_mix(seed: u64, nodes: usize) -> (Plan, Vec<Option<BufferInit>>) {
    let mut r = Rng::seeded(seed);
    let mut g = Graph::new();
    let nb = 2 + r.below(2);
    let bufs: Vec<BufferId> = (0..nb).map(|b| g.add_buffer(format!("b{b}"), 4096).unwrap()).collect();
    let k = g.add_kernel(mix_sig()).unwrap();
    while g.nodes().len() < nodes {
        let pick = |r: &mut Rng| {
            let b = bufs[r.below(nb) as usize];
            let off = 256 * r.below(14);
            Slice { buffer: b, offset: off, len: 4 * (1 + r.below((4096 - off) / 4 - 1).min(200)) }
        };
        let (out, inp) = (pick(&mut r), pick(&mut r));
        if out.buffer == inp.buffer && out.offset < inp.offset + inp.len && inp.offset < out.offset + out.len {
            continue;
        }
        let u = |v: u64| Arg::Scalar(Scalar::u32(v as u32));
        let args = [Arg::Buffer(out), Arg::Buffer(inp), u(out.len / 4), u(inp.len / 4), u(r.below(1 << 30))];
        g.add_launch(k, Launch::linear(1 + r.below(3) as u32, 256), &args, &[]).unwrap();
    }
    let inits = (0..nb).map(|b| Some(BufferInit::Random(seed ^ b))).collect();
    (Plan::compile(&g).unwrap(), inits)
}

#[test]
fn random_mix_programs_match_the_host_oracle() {
    let Some(ctx) = context_or_skip("random_mix_programs_match_the_host_oracle") else { return };
    eprintln!("vulkan device: {}", ctx.name);
    for seed in 0..40 {
        let (plan, inits) = random_mix(seed, 5 + seed as usize % 30);
        assert_eq!(vulkan(&ctx, &plan, &inits, 2), oracle(&plan, &inits, 2), "seed {seed}");
    }
}

#[test]
fn add_one_chains_and_levels() {
    let Some(ctx) = context_or_skip("add_one_chains_and_levels") else { return };
    let mut g = Graph::new();
    let xs: Vec<BufferId> = (0..4).map(|i| g.add_buffer(format!("x{i}"), 4 * 1024).unwrap()).collect();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", ostinato::Access::ReadWrite).scalar("n", ostinato::ScalarType::U32)).unwrap();
    for _ in 0..50 {
        for &x in &xs {
            g.add_launch(k, Launch::linear(4, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(1024))], &[]).unwrap();
        }
    }
    let plan = Plan::compile(&g).unwrap();
    assert_eq!(levels(&plan).len(), 50, "4 independent chains: one barrier per round");
    let inits = vec![Some(BufferInit::ConstF32(0.0)); 4];
    let got = vulkan(&ctx, &plan, &inits, 3);
    assert_eq!(got, oracle(&plan, &inits, 3));
    let v = f32::from_le_bytes(got[0].1[..4].try_into().unwrap());
    assert_eq!(v, 150.0);
}

#[test]
fn unsupported_work_is_not_applicable_not_wrong() {
    let Some(ctx) = context_or_skip("unsupported_work_is_not_applicable_not_wrong") else { return };
    let mut g = Graph::new();
    let a = g.add_buffer("a", 64).unwrap();
    let b = g.add_buffer("b", 64).unwrap();
    g.add_copy(g.whole(a), g.whole(b), &[]).unwrap();
    let memory = VulkanRowMemory::new(&ctx, &g).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let err = VulkanRun::new(&ctx, &plan, memory.roots(), &[], &builtin_shaders(&plan).unwrap()).err().unwrap();
    assert!(matches!(err, ostinato_vulkan::VkError::NotApplicable(_)), "{err}");
}
