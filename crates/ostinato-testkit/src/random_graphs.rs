//! Random order-sensitive programs for differential tests (host vs host, host vs GPU): `mix` nodes
//! (`out = out*3 + inp + salt`, wrapping u32), copies, fills, views, explicit edges and slots. Any
//! missing ordering changes the result. Within one `mix` node `out` and `inp` never overlap, so a GPU
//! (whose threads run in any order) computes the same bits as the host.

use ostinato::file::BufferInit;
use ostinato::rng::XorShift64 as Rng;
use ostinato::{Arg, BufferId, Graph, KernelSig, Launch, NodeId, Scalar, Slice, SlotId};

/// A generated program: the graph and each buffer's initial contents.
pub struct RandomProgram {
    pub graph: Graph,
    pub inits: Vec<Option<BufferInit>>,
    /// The slot every `salt` may read (patched between replays by tests).
    pub salt_slot: SlotId,
}

pub use ostinato_host::builtins::mix_sig;

/// The host kernels of a generated program's plan: the built-ins, `mix_alt` bound to `mix`.
pub fn host_kernels(plan: &ostinato::Plan) -> Result<Vec<ostinato_host::HostKernel>, ostinato_host::HostError> {
    let name = |i: usize| plan.graph().kernels()[i].name.replace("mix_alt", "mix");
    ostinato::bind_all(&ostinato_host::HostBackend::serial(), plan, |k| ostinato::KernelRef::builtin(&name(k)))
}

/// The oracle result of a generated program: `replays` serial replays on the host backend (`mix_alt`
/// bound to `mix`), then every root buffer's bytes.
pub fn serial_result(plan: &ostinato::Plan, prog: &RandomProgram, replays: usize) -> Result<Vec<(BufferId, Vec<u8>)>, ostinato_host::HostError> {
    use ostinato::{Backend, Exec};
    let mut exec = ostinato_host::HostBackend::serial().instantiate(plan, host_kernels(plan)?, ostinato::allocate_all(plan))?;
    ostinato::write_inits(&mut exec, &prog.inits)?;
    for _ in 0..replays {
        exec.replay()?;
    }
    ostinato::read_roots(&mut exec)
}

/// Generates a program of `nodes` nodes from `seed`.
pub fn random_mix_program(seed: u64, nodes: usize) -> RandomProgram {
    generate(seed, nodes, Shape::Mix)
}

/// Like [`random_mix_program`], every launch one block of 256 threads (copies and fills stay within
/// one block of the internal kernels): programs whose every node a backend may fuse.
pub fn random_one_block_program(seed: u64, nodes: usize) -> RandomProgram {
    generate(seed, nodes, Shape::OneBlock)
}

/// Like [`random_mix_program`], every `mix` node touching exactly its declared extents (its `inp` is
/// no longer than its `out`, so `out[i] = out[i]*3 + inp[i % n_in] + salt` reads all of it): a missing
/// ordering between two nodes that share a declared byte shows in the bytes, so mutation tests can
/// ask that every synchronization a backend emits is caught when lost.
pub fn random_exact_program(seed: u64, nodes: usize) -> RandomProgram {
    generate(seed, nodes, Shape::Exact)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `mix` launches whose `inp` is no longer than their `out`.
    Exact,
    /// `mix` launches of 1 to 3 blocks of 32 to 128 threads.
    Mix,
    /// `mix` or `mix_alt`, 1 to 16 blocks.
    TwoKernels,
    /// `mix` launches of one block of 256 threads.
    OneBlock,
}

/// Like [`random_mix_program`], with a second kernel `mix_alt` of the same signature and semantics (a
/// backend binds it to another implementation of `mix`, e.g. one that is not PDL-capable) and grids of
/// 1 to 16 blocks; each launch picks either kernel. The host binds both to `mix`.
pub fn random_two_kernel_program(seed: u64, nodes: usize) -> RandomProgram {
    generate(seed, nodes, Shape::TwoKernels)
}

fn generate(seed: u64, nodes: usize, shape: Shape) -> RandomProgram {
    let two_kernels = shape == Shape::TwoKernels;
    let mut r = Rng::seeded(seed);
    let mut g = Graph::new();
    let mut inits = Vec::new();
    let nbuf = 1 + r.below(4);
    for b in 0..nbuf {
        let words = 8 + r.below(120);
        let id = g.add_buffer(format!("b{b}"), 4 * words).expect("fresh name, non-zero size");
        inits.push(Some(BufferInit::Random(seed ^ (b + 1))));
        if r.below(3) == 0 {
            let off = 4 * r.below(words / 2);
            let len = 4 * (1 + r.below(words - off / 4));
            let _ = g.add_view(format!("v{b}"), id, off, len).map(|_| inits.push(None));
        }
    }
    let mix = g.add_kernel(mix_sig()).expect("fresh kernel");
    let alt = if two_kernels { Some(g.add_kernel(KernelSig { name: "mix_alt".into(), ..mix_sig() }).expect("fresh kernel")) } else { None };
    let salt_slot = g.add_slot("salt", Scalar::u32(r.below(1000) as u32)).expect("fresh slot");
    let nb = g.buffers().len() as u64;
    let slice = |r: &mut Rng, g: &Graph| {
        let b = BufferId(r.below(nb) as u32);
        let words = g.buffer(b).size / 4;
        let off = r.below(words);
        let len = 1 + r.below((words - off).min(24));
        Slice { buffer: b, offset: 4 * off, len: 4 * len }
    };
    let overlaps = |g: &Graph, a: Slice, b: Slice| {
        let (ra, sa, ea) = g.root_extent(a);
        let (rb, sb, eb) = g.root_extent(b);
        ra == rb && sa < eb && sb < ea
    };
    while g.nodes().len() < nodes {
        let i = g.nodes().len();
        let after: Vec<NodeId> = if i > 0 && r.below(8) == 0 { vec![NodeId(r.below(i as u64) as u32)] } else { vec![] };
        match r.below(12) {
            0 => {
                let (s, d) = (slice(&mut r, &g), slice(&mut r, &g));
                let len = s.len.min(d.len);
                let _ = g.add_copy(Slice { len, ..s }, Slice { len, ..d }, &after);
            }
            1 => {
                let _ = g.add_fill(slice(&mut r, &g), r.next_u64() as u32, &after);
            }
            _ => {
                let out = slice(&mut r, &g);
                let mut inp = slice(&mut r, &g);
                if shape == Shape::Exact {
                    inp.len = inp.len.min(out.len);
                }
                if overlaps(&g, out, inp) {
                    continue;
                }
                let salt = if r.below(3) == 0 { Arg::Slot(salt_slot) } else { Arg::Scalar(Scalar::u32(r.next_u64() as u32)) };
                let (kernel, blocks) = match alt {
                    Some(alt) => (if r.below(2) == 0 { mix } else { alt }, [1, 2, 3, 8, 16][r.below(5) as usize]),
                    None => (mix, 1 + r.below(3) as u32),
                };
                let launch = if shape == Shape::OneBlock { Launch::linear(1, 256) } else { Launch::linear(blocks, 32 << r.below(3)) };
                let args =
                    [Arg::Buffer(out), Arg::Buffer(inp), Arg::Scalar(Scalar::u32((out.len / 4) as u32)), Arg::Scalar(Scalar::u32((inp.len / 4) as u32)), salt];
                g.add_launch(kernel, launch, &args, &after).expect("valid by construction");
            }
        }
    }
    RandomProgram { graph: g, inits, salt_slot }
}
