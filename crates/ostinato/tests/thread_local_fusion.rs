//! Barriers between fused bodies against the serial oracle, at thread granularity: random programs of
//! the element-wise built-ins (`add_one`, `mix`) over views of two buffers at any element offset, one
//! block each, run as a fused block runs them — the bodies between two barriers ([`barriers_with`] with
//! [`thread_local_pair`] and the built-ins' stated per-thread footprints) with the threads in the most
//! adversarial orders (each thread runs all its bodies of the segment before the next thread starts,
//! forwards and backwards). The bytes must be the serial program's. Two mutations must change some
//! program's bytes: `mix`'s `inp` claimed thread-local (it reads another thread's element), and every
//! ordering taken as thread-local.
//!
//! The simulator below is a test tool: it runs each built-in's per-element rule the way the CUDA C's
//! grid-stride loop shares elements out (thread `L` of `N` takes `L + k·N`).

use ostinato::builtins::thread_footprint;
use ostinato::fusion::{barriers_with, thread_local_pair};
use ostinato::{Access, Arg, BufferId, Graph, KernelSig, Launch, NodeId, NodeOp, Plan, Scalar, ScalarType, Slice};

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

const ROOT_BYTES: u64 = 512;

/// A random program of `nodes` launches of one block of `threads` threads on two root buffers.
fn program(seed: u64, nodes: usize, threads: u32) -> Graph {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut g = Graph::new();
    let roots = [g.add_buffer("a", ROOT_BYTES).unwrap(), g.add_buffer("b", ROOT_BYTES).unwrap()];
    let add_one = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let mix = g
        .add_kernel(
            KernelSig::new("mix")
                .buffer("out", Access::ReadWrite)
                .buffer("inp", Access::Read)
                .scalar("n_out", ScalarType::U32)
                .scalar("n_in", ScalarType::U32)
                .scalar("salt", ScalarType::U32),
        )
        .unwrap();
    // A few element offsets, so that bodies often share their first byte (thread-local) and sometimes not.
    let offsets = [0u64, 0, 0, 4, 64];
    let slice = |r: &mut Rng, root: BufferId| {
        let offset = offsets[r.below(offsets.len() as u64) as usize];
        let len = 4 * (1 + r.below((ROOT_BYTES - offset) / 4));
        Slice { buffer: root, offset, len }
    };
    let launch = Launch::new([1, 1, 1], [threads, 1, 1]);
    for _ in 0..nodes {
        let root = roots[r.below(2) as usize];
        if r.below(3) == 0 {
            let x = slice(&mut r, root);
            let n = (x.len / 4) as u32;
            g.add_launch(add_one, launch, &[Arg::Buffer(x), Arg::Scalar(Scalar::u32(n))], &[]).unwrap();
        } else {
            let out = slice(&mut r, root);
            // `inp` on the other buffer (a node never reads what it writes).
            let inp = slice(&mut r, roots[usize::from(root == roots[0])]);
            let (n_out, n_in) = ((out.len / 4) as u32, (inp.len / 4) as u32);
            let salt = r.below(1000) as u32;
            let args = [Arg::Buffer(out), Arg::Buffer(inp), Arg::Scalar(Scalar::u32(n_out)), Arg::Scalar(Scalar::u32(n_in)), Arg::Scalar(Scalar::u32(salt))];
            g.add_launch(mix, launch, &args, &[]).unwrap();
        }
    }
    g
}

fn word(mem: &[Vec<u8>], root: usize, at: u64) -> u32 {
    let a = at as usize;
    u32::from_le_bytes(mem[root][a..a + 4].try_into().unwrap())
}

fn set_word(mem: &mut [Vec<u8>], root: usize, at: u64, v: u32) {
    let a = at as usize;
    mem[root][a..a + 4].copy_from_slice(&v.to_le_bytes());
}

/// Element `i` of node `v`.
fn element(g: &Graph, v: NodeId, i: u64, mem: &mut [Vec<u8>]) {
    let NodeOp::Kernel { kernel, args, .. } = &g.node(v).op else { unreachable!() };
    let s = |k: usize| if let Arg::Buffer(s) = args[k] { g.root_extent(s) } else { unreachable!() };
    let u = |k: usize| if let Arg::Scalar(x) = args[k] { x.as_u32() } else { unreachable!() };
    match g.kernel(*kernel).name.as_str() {
        "add_one" => {
            let (root, start, _) = s(0);
            let x = f32::from_bits(word(mem, root.index(), start + 4 * i)) + 1.0;
            set_word(mem, root.index(), start + 4 * i, x.to_bits());
        }
        _ => {
            let ((out, o, _), (inp, p, _)) = (s(0), s(1));
            let x = word(mem, inp.index(), p + 4 * (i % u64::from(u(3))));
            let y = word(mem, out.index(), o + 4 * i).wrapping_mul(3).wrapping_add(x).wrapping_add(u(4));
            set_word(mem, out.index(), o + 4 * i, y);
        }
    }
}

fn count(g: &Graph, v: NodeId) -> u64 {
    let NodeOp::Kernel { args, .. } = &g.node(v).op else { unreachable!() };
    if let Arg::Scalar(x) = args[1] {
        u64::from(x.as_u32())
    } else if let Arg::Scalar(x) = args[2] {
        u64::from(x.as_u32())
    } else {
        unreachable!()
    }
}

fn initial() -> Vec<Vec<u8>> {
    (0..2).map(|b| (0..ROOT_BYTES).map(|i| (i * 7 + b * 13) as u8).collect()).collect()
}

fn serial(plan: &Plan) -> Vec<Vec<u8>> {
    let mut mem = initial();
    for &v in plan.order() {
        for i in 0..count(plan.graph(), v) {
            element(plan.graph(), v, i, &mut mem);
        }
    }
    mem
}

/// The run fused into one block of `threads` threads with barriers where `bars` says, each segment's
/// threads in `order`, each thread running its elements of every body of the segment in turn.
fn fused(plan: &Plan, bars: &[bool], threads: u64, backwards: bool) -> Vec<Vec<u8>> {
    let mut mem = initial();
    let order = plan.order();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && !bars[end] {
            end += 1;
        }
        let ts: Vec<u64> = if backwards { (0..threads).rev().collect() } else { (0..threads).collect() };
        for t in ts {
            for &v in &order[start..end] {
                let n = count(plan.graph(), v);
                let mut i = t;
                while i < n {
                    element(plan.graph(), v, i, &mut mem);
                    i += threads;
                }
            }
        }
        start = end;
    }
    mem
}

fn stated(plan: &Plan, v: NodeId, p: usize) -> Option<u64> {
    let NodeOp::Kernel { kernel, .. } = &plan.graph().node(v).op else { return None };
    thread_footprint(&plan.graph().kernel(*kernel).name, p)
}

#[test]
fn bodies_without_barriers_between_thread_local_orderings_give_the_oracle_bits() {
    let (mut kept, mut dropped) = (0, 0);
    for seed in 0..400u64 {
        let threads = [32u32, 64][seed as usize % 2];
        let plan = Plan::compile(&program(seed, 3 + seed as usize % 14, threads)).unwrap();
        let order = plan.order().to_vec();
        let tl = |u, v| thread_local_pair(&plan, u, v, |w, p| stated(&plan, w, p));
        let bars = barriers_with(&plan, &order, |_| false, tl);
        let all = barriers_with(&plan, &order, |_| false, |_, _| false);
        kept += bars.iter().filter(|b| **b).count();
        dropped += all.iter().zip(&bars).filter(|(a, b)| **a && !**b).count();
        let want = serial(&plan);
        for backwards in [false, true] {
            assert_eq!(fused(&plan, &bars, u64::from(threads), backwards), want, "seed {seed}, backwards {backwards}: barriers {bars:?}");
        }
    }
    eprintln!("{dropped} barriers dropped as thread-local, {kept} kept");
    assert!(dropped > 100 && kept > 100, "{dropped} dropped, {kept} kept");
}

#[test]
fn a_thread_local_claim_the_code_does_not_keep_changes_some_program() {
    let (mut inp_caught, mut all_caught) = (0, 0);
    for seed in 0..400u64 {
        let threads = [32u32, 64][seed as usize % 2];
        let plan = Plan::compile(&program(seed, 3 + seed as usize % 14, threads)).unwrap();
        let order = plan.order().to_vec();
        let want = serial(&plan);
        // `mix`'s `inp` claimed to follow the grid-stride loop: it reads element `i % n_in`.
        let inp_claimed = |w: NodeId, p: usize| if p == 1 { Some(4) } else { stated(&plan, w, p) };
        let bars = barriers_with(&plan, &order, |_| false, |u, v| thread_local_pair(&plan, u, v, inp_claimed));
        inp_caught += usize::from(fused(&plan, &bars, u64::from(threads), true) != want);
        let bars = barriers_with(&plan, &order, |_| false, |_, _| true);
        all_caught += usize::from(fused(&plan, &bars, u64::from(threads), true) != want);
    }
    eprintln!("mutations caught: mix inp {inp_caught}, every ordering {all_caught} of 400");
    assert!(inp_caught > 10, "claiming mix's inp thread-local changed {inp_caught} programs");
    assert!(all_caught > 100, "taking every ordering as thread-local changed {all_caught} programs");
}

#[test]
fn an_explicit_edge_keeps_its_barrier() {
    let mut g = Graph::new();
    let a = g.add_buffer("a", 1024).unwrap();
    let b = g.add_buffer("b", 1024).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let launch = Launch::new([1, 1, 1], [64, 1, 1]);
    let x = |buffer| [Arg::Buffer(Slice { buffer, offset: 0, len: 1024 }), Arg::Scalar(Scalar::u32(256))];
    g.add_launch(k, launch, &x(a), &[]).unwrap();
    let n1 = g.add_launch(k, launch, &x(a), &[]).unwrap();
    g.add_launch(k, launch, &x(b), &[n1]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let order = plan.order().to_vec();
    let bars = barriers_with(&plan, &order, |_| false, |u, v| thread_local_pair(&plan, u, v, |w, p| stated(&plan, w, p)));
    assert_eq!(bars, [false, false, true], "n0 -> n1 is thread-local; n1 -> n2 is explicit");
}
