//! User memory on Vulkan (`VulkanMemory`): random programs with some roots bound to buffers the test
//! owns give the host oracle's bits, also fused and on the plan's lanes; two execs share a buffer (one
//! writes what the other reads); `rebind` moves a root to other memory (re-recording the exec), leaves
//! the old memory alone and is refused while a replay is in flight; a `VkBuffer` the test creates
//! itself through ash runs as `Buffer::borrowed`; memory of the wrong size, of another device, bound
//! to a view or to two roots is refused, naming the buffers. Skips without a Vulkan device.

mod common;

use std::sync::Arc;

use ostinato::{Arg, Backend, BufferBinding, BufferId, ErrorKind, Exec, Graph, Launch, Plan, PlanOptions, Scalar};
use ostinato_host::HostBackend;
use ostinato_testkit::random_graphs::{mix_sig, random_one_block_program, RandomProgram};
use ostinato_vulkan::{Buffer, Context, FusionMode, QueueMode, VulkanBackend, VulkanMemory, VulkanOptions};

use common::context_or_skip;

/// Writes the program's inits, replays 3 times with the salt patched, reads every root.
fn run<E: Exec>(exec: &mut E, prog: &RandomProgram) -> Vec<(BufferId, Vec<u8>)>
where
    E::Error: std::fmt::Debug,
{
    ostinato::write_inits(exec, &prog.inits).unwrap();
    for r in 0..3u32 {
        exec.set_slot(prog.salt_slot, Scalar::u32(r.wrapping_mul(0x9E37_79B9) ^ 7)).unwrap();
        exec.replay().unwrap();
    }
    ostinato::read_roots(exec).unwrap()
}

/// Every other root bound to a fresh device buffer of the test's (the rest the exec's own).
fn some_external(ctx: &Arc<Context>, plan: &Plan) -> Vec<BufferBinding<VulkanMemory>> {
    let g = plan.graph();
    g.buffers()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if b.root.index() == i && i % 2 == 0 {
                BufferBinding::External(VulkanMemory(Arc::new(Buffer::new(ctx, b.size, false).unwrap())))
            } else {
                BufferBinding::Allocate
            }
        })
        .collect()
}

#[test]
fn random_programs_on_user_memory_match_the_host_oracle() {
    let Some(ctx) = context_or_skip("random_programs_on_user_memory_match_the_host_oracle") else { return };
    let host = HostBackend::serial();
    for seed in 0..12u64 {
        let prog = random_one_block_program(seed, 5 + seed as usize * 3);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 4 }).unwrap();
        let mut oracle = host.instantiate(&plan, ostinato::bind_builtins(&host, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
        let want = run(&mut oracle, &prog);
        for (fusion, queues) in [(FusionMode::Off, QueueMode::One), (FusionMode::Auto, QueueMode::One), (FusionMode::Off, QueueMode::Lanes)] {
            let vk = VulkanBackend::with_context(ctx.clone())
                .with_options(VulkanOptions { fusion, queues, ..VulkanOptions::default() })
                .with_lane_queues(ctx.queue_count());
            let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), some_external(&ctx, &plan)).unwrap();
            assert_eq!(run(&mut exec, &prog), want, "seed {seed}, fusion {fusion:?}, queues {queues:?}");
        }
    }
}

/// One `mix` node: `out = out*3 + inp + salt` over `n` words.
fn one_mix(n: u64) -> (Plan, BufferId, BufferId) {
    let mut g = Graph::new();
    let (out, inp) = (g.add_buffer("out", 4 * n).unwrap(), g.add_buffer("inp", 4 * n).unwrap());
    let k = g.add_kernel(mix_sig()).unwrap();
    let u = |v: u64| Arg::Scalar(Scalar::u32(v as u32));
    g.add_launch(k, Launch::linear(n.div_ceil(256) as u32, 256), &[Arg::Whole(out), Arg::Whole(inp), u(n), u(n), u(5)], &[]).unwrap();
    (Plan::compile(&g).unwrap(), out, inp)
}

fn words(exec: &mut impl Exec<Error = ostinato_vulkan::VkError>, b: BufferId, n: usize) -> Vec<u32> {
    let mut v = vec![0u8; 4 * n];
    exec.read_buffer(b, 0, &mut v).unwrap();
    v.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn execs_share_memory_and_rebind_moves_a_root() {
    let Some(ctx) = context_or_skip("execs_share_memory_and_rebind_moves_a_root") else { return };
    let vk = VulkanBackend::with_context(ctx.clone());
    let n = 1000usize;
    let (plan, out, inp) = one_mix(n as u64);
    let shared = VulkanMemory(Arc::new(Buffer::new(&ctx, 4 * n as u64, false).unwrap()));
    // Exec a writes the shared buffer as its `out`; exec b reads it as its `inp`.
    let bind = |on: BufferId| -> Vec<BufferBinding<VulkanMemory>> {
        (0..2).map(|i| if BufferId(i) == on { BufferBinding::External(shared.clone()) } else { BufferBinding::Allocate }).collect()
    };
    let mut a = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), bind(out)).unwrap();
    let mut b = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), bind(inp)).unwrap();
    let start: Vec<u32> = (0..n as u32).collect();
    a.write_buffer(out, 0, &bytes(&start)).unwrap();
    a.write_buffer(inp, 0, &bytes(&vec![1; n])).unwrap();
    a.replay().unwrap();
    a.wait().unwrap();
    let after_a: Vec<u32> = start.iter().map(|x| x.wrapping_mul(3).wrapping_add(1 + 5)).collect();
    assert!(words(&mut b, inp, n) == after_a, "b sees what a wrote");
    b.write_buffer(out, 0, &bytes(&vec![0; n])).unwrap();
    b.replay().unwrap();
    b.wait().unwrap();
    assert_eq!(words(&mut b, out, n), after_a.iter().map(|x| x.wrapping_add(5)).collect::<Vec<_>>());

    // Rebind a's `out` to its own buffer: a's replays now change only that one.
    let other = VulkanMemory(Arc::new(Buffer::new(&ctx, 4 * n as u64, false).unwrap()));
    a.trace(1).unwrap(); // a traced recording exists (and ran once more): rebind must record it again too
    let before = words(&mut b, inp, n);
    assert!(before == after_a.iter().map(|x| x.wrapping_mul(3).wrapping_add(6)).collect::<Vec<_>>(), "the traced replay ran on the shared buffer");
    a.rebind(out, other.clone()).unwrap();
    a.write_buffer(out, 0, &bytes(&vec![2; n])).unwrap();
    a.replay().unwrap();
    a.wait().unwrap();
    assert_eq!(words(&mut a, out, n), vec![2 * 3 + 1 + 5; n]);
    assert!(words(&mut b, inp, n) == before, "the old memory is left alone");
    let t = a.trace(1).unwrap();
    assert_eq!(words(&mut a, out, n), vec![(2 * 3 + 1 + 5) * 3 + 1 + 5; n], "the traced replay ran on the new memory ({} bars)", t.replays.len());
}

#[test]
fn a_buffer_made_by_the_user_through_ash_runs_borrowed() {
    use ash::vk;
    let Some(ctx) = context_or_skip("a_buffer_made_by_the_user_through_ash_runs_borrowed") else { return };
    let n = 300u64;
    let (plan, out, _) = one_mix(n);
    let d = ctx.device();
    let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    // SAFETY: a buffer of ctx's device, bound to fresh device memory, destroyed after every exec
    // using it is dropped (below).
    let (handle, memory) = unsafe {
        let handle = d.create_buffer(&vk::BufferCreateInfo::default().size(4 * n).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE), None).unwrap();
        let req = d.get_buffer_memory_requirements(handle);
        let mem = d
            .allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(req.memory_type_bits.trailing_zeros()), None)
            .unwrap();
        d.bind_buffer_memory(handle, mem, 0).unwrap();
        (handle, mem)
    };
    {
        // SAFETY: as above: the handle is live, bound, sized and with the usages `borrowed` needs.
        let user = VulkanMemory(Arc::new(unsafe { Buffer::borrowed(&ctx, handle, 4 * n) }));
        let vk = VulkanBackend::with_context(ctx.clone());
        let mut exec =
            vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), vec![BufferBinding::External(user.clone()), BufferBinding::Allocate]).unwrap();
        ostinato::write_inits(&mut exec, &[None, None]).unwrap();
        exec.write_buffer(out, 0, &bytes(&vec![10; n as usize])).unwrap();
        exec.write_buffer(BufferId(1), 0, &bytes(&vec![0; n as usize])).unwrap();
        exec.replay().unwrap();
        assert_eq!(words(&mut exec, out, n as usize), vec![35; n as usize]);
        // Another exec on the same handle reads what the first wrote there.
        let mut reader =
            vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), vec![BufferBinding::External(user), BufferBinding::Allocate]).unwrap();
        assert_eq!(words(&mut reader, out, n as usize), vec![35; n as usize]);
    }
    // SAFETY: the exec and the borrowed Buffer are dropped; nothing uses the handle any more.
    unsafe {
        d.destroy_buffer(handle, None);
        d.free_memory(memory, None);
    }
}

#[test]
fn memory_an_exec_cannot_bind_is_refused_by_name() {
    let Some(ctx) = context_or_skip("memory_an_exec_cannot_bind_is_refused_by_name") else { return };
    let vk = VulkanBackend::with_context(ctx.clone());
    let (plan, out, _) = one_mix(64);
    let kernels = || ostinato::bind_builtins(&vk, &plan).unwrap();
    let external = |m: VulkanMemory| vec![BufferBinding::External(m), BufferBinding::Allocate];
    // The wrong size.
    let small = VulkanMemory(Arc::new(Buffer::new(&ctx, 128, false).unwrap()));
    let e = vk.instantiate(&plan, kernels(), external(small.clone())).err().expect("a buffer of the wrong size");
    assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
    assert!(e.to_string().contains("`out`") && e.to_string().contains("256"), "{e}");
    // Another device context.
    let other_ctx = Context::open().unwrap();
    let foreign = VulkanMemory(Arc::new(Buffer::new(&other_ctx, 256, false).unwrap()));
    let e = vk.instantiate(&plan, kernels(), external(foreign.clone())).err().expect("a buffer of another device");
    assert!(e.to_string().contains("`out`") && e.to_string().contains("another Vulkan device"), "{e}");
    // The same through rebind: refused, and the exec keeps running on its memory.
    let mut exec = vk.instantiate(&plan, kernels(), ostinato::allocate_all(&plan)).unwrap();
    assert!(exec.rebind(out, small).is_err());
    assert!(exec.rebind(out, foreign).is_err());
    // Two roots on one buffer: refused at instantiate and at rebind, naming both.
    let whole = VulkanMemory(Arc::new(Buffer::new(&ctx, 256, false).unwrap()));
    let e = vk
        .instantiate(&plan, kernels(), vec![BufferBinding::External(whole.clone()), BufferBinding::External(whole.clone())])
        .err()
        .expect("one buffer, two roots");
    assert!(e.to_string().contains("`out` and `inp` are bound to overlapping memory"), "{e}");
    let mut two = vk.instantiate(&plan, kernels(), vec![BufferBinding::External(whole.clone()), BufferBinding::Allocate]).unwrap();
    let e = two.rebind(ostinato::BufferId(1), whole).expect_err("rebound onto the other root's buffer");
    assert!(e.to_string().contains("overlapping memory"), "{e}");
    // In flight: refused (not waited for), then accepted once waited.
    let fits = VulkanMemory(Arc::new(Buffer::new(&ctx, 256, false).unwrap()));
    let mut refused = false;
    for _ in 0..200 {
        exec.replay().unwrap();
        exec.replay().unwrap();
        if let Err(e) = exec.rebind(out, fits.clone()) {
            assert_eq!(e.kind(), ErrorKind::State, "{e}");
            refused = true;
            break;
        }
    }
    assert!(refused, "two replays just submitted never counted as in flight");
    exec.wait().unwrap();
    exec.rebind(out, fits).unwrap();
    // A view cannot be bound on its own.
    let mut g = Graph::new();
    let root = g.add_buffer("root", 1024).unwrap();
    let view = g.add_view("half", root, 512, 512).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let u = |v: u32| Arg::Scalar(Scalar::u32(v));
    g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(view), Arg::Buffer(ostinato::Slice { buffer: root, offset: 0, len: 512 }), u(128), u(128), u(1)], &[])
        .unwrap();
    let vplan = Plan::compile(&g).unwrap();
    let half = VulkanMemory(Arc::new(Buffer::new(&ctx, 512, false).unwrap()));
    let e = vk
        .instantiate(&vplan, ostinato::bind_builtins(&vk, &vplan).unwrap(), vec![BufferBinding::Allocate, BufferBinding::External(half.clone())])
        .err()
        .expect("a view bound on its own");
    assert!(e.to_string().contains("half") && e.to_string().contains("root"), "{e}");
    let mut vexec = vk.instantiate(&vplan, ostinato::bind_builtins(&vk, &vplan).unwrap(), ostinato::allocate_all(&vplan)).unwrap();
    assert!(vexec.rebind(view, half).is_err());
    exec.write_buffer(out, 0, &[0u8; 256]).unwrap();
    exec.replay().unwrap();
    exec.wait().unwrap();
}
