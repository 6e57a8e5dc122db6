//! The CUDA C of a group of components (`ostinato::fusion::component_groups`): one block per
//! component, block `c` running each member's blocks `c·step + k·stride` in plan order. A member's
//! body sees the block it runs as its own: `blockIdx` and `gridDim` read a per-thread view in shared
//! memory that the fused kernel sets before each call (every thread its own slot, so setting it
//! needs no barrier; the compiler forwards the stores to the body's loads where it can). Repeated
//! periods of calls become loops, with constant `unsigned` arguments that advance by a fixed step
//! (a round counter, a salt) as affine functions of the loop counter, so a chain of hundreds of
//! rounds compiles to a few calls.

use std::fmt::Write as _;

use ostinato::fusion::MemberBlocks;
use ostinato::{NodeOp, Plan, Scalar};

use super::source::{literal, Call, CallArg, Calls, FusedKernel, FUSED_ENTRY, FUSED_EPILOGUE, PDL_PRELUDE};
use super::Group;

/// The per-thread view of the block a body runs as (blocks and grids as `uint3`, one slot a thread).
fn view_prelude(threads: u32) -> String {
    format!(
        r#"__shared__ ::uint3 ost_view_block[{threads}];
__shared__ ::uint3 ost_view_grid[{threads}];
__device__ __forceinline__ unsigned ost_view_thread() {{ return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }}
__device__ __forceinline__ void ost_view_set(unsigned long long i, unsigned gx, unsigned gy, unsigned gz) {{
  const unsigned t = ost_view_thread();
  ost_view_block[t] = ::make_uint3((unsigned)(i % gx), (unsigned)((i / gx) % gy), (unsigned)(i / ((unsigned long long)gx * gy)));
  ost_view_grid[t] = ::make_uint3(gx, gy, gz);
}}
#define blockIdx (ost_view_block[ost_view_thread()])
#define gridDim (::dim3(ost_view_grid[ost_view_thread()].x, ost_view_grid[ost_view_thread()].y, ost_view_grid[ost_view_thread()].z))
"#
    )
}

/// Shared memory the view takes per thread of the block.
pub const VIEW_BYTES_PER_THREAD: u64 = 24;

/// One member's step in a fused block: the barrier before it, its blocks, whether its blocks need a
/// barrier between them (its body uses shared memory), and its call.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Step {
    before: bool,
    blocks: MemberBlocks,
    shared: bool,
    call: Call,
}

/// The most calls one period of a loop holds.
const MAX_PERIOD: usize = 8;

/// Whether steps `a` and `b` (`r` periods later) are one step of a loop: everything equal but the
/// `unsigned` constants, which advance by `delta` per period (wrapping). `delta` is set from the
/// first repetition.
fn repeats(a: &Step, b: &Step, r: u32, delta: &mut [Option<u32>]) -> bool {
    if (a.before, a.blocks, a.shared, &a.call.entry, a.call.args.len()) != (b.before, b.blocks, b.shared, &b.call.entry, b.call.args.len()) {
        return false;
    }
    for (i, (x, y)) in a.call.args.iter().zip(&b.call.args).enumerate() {
        match (x, y) {
            (CallArg::Text(x), CallArg::Text(y)) if x == y => {}
            (CallArg::U32(x), CallArg::U32(y)) => {
                let d = y.wrapping_sub(*x);
                match delta[i] {
                    None if r == 1 => delta[i] = Some(d),
                    Some(step) if step.wrapping_mul(r) == d => {}
                    _ => return false,
                }
            }
            _ => return false,
        }
    }
    true
}

/// A loop over repeated periods of steps: its period, its repetitions, and per position of the period
/// the step per repetition of each `unsigned` argument (`None`: not one, or constant).
struct Loop {
    period: usize,
    reps: usize,
    deltas: Vec<Vec<Option<u32>>>,
}

/// The longest loop starting at `steps[at]`, or `None` where no period repeats.
fn best_loop(steps: &[Step], at: usize) -> Option<Loop> {
    let mut best: Option<Loop> = None;
    for p in 1..=MAX_PERIOD.min((steps.len() - at) / 2) {
        let mut deltas: Vec<Vec<Option<u32>>> = (0..p).map(|q| vec![None; steps[at + q].call.args.len()]).collect();
        let mut reps = 1;
        'more: while at + (reps + 1) * p <= steps.len() {
            let mut trial = deltas.clone();
            for q in 0..p {
                if !repeats(&steps[at + q], &steps[at + reps * p + q], reps as u32, &mut trial[q]) {
                    break 'more;
                }
            }
            deltas = trial;
            reps += 1;
        }
        if reps >= 2 && best.as_ref().is_none_or(|b| p * reps > b.period * b.reps) {
            best = Some(Loop { period: p, reps, deltas });
        }
    }
    best
}

/// One step's code: its barrier, its view of each of its blocks, its call (`u32(i, v)` writes its
/// `i`-th `unsigned` argument).
fn write_step(out: &mut String, indent: &str, s: &Step, u32: impl Fn(usize, u32) -> String) {
    let m = s.blocks;
    let call = s.call.text(u32);
    if s.before {
        let _ = writeln!(out, "{indent}__syncthreads();");
    }
    let set = |k: &str| format!("ost_view_set(ost_c * {}ull + {k} * {}ull, {}u, {}u, {}u);", m.step, m.stride, m.grid[0], m.grid[1], m.grid[2]);
    if m.per == 1 {
        let _ = writeln!(out, "{indent}{} {call};", set("0ull"));
    } else {
        let sync = if s.shared { "if (ost_k) __syncthreads(); " } else { "" };
        let _ = writeln!(out, "{indent}for (unsigned ost_k = 0; ost_k < {}u; ++ost_k) {{ {sync}{} {call}; }}", m.per, set("ost_k"));
    }
}

/// The fused kernel `name` of a group of components: `body_source` holds every member's code,
/// `barriers[i]` whether member `i` needs a barrier before it, `shared(v)` whether node `v`'s body uses
/// shared memory, `entry(k)` kernel `k`'s name in the source.
pub fn generate_components(
    plan: &Plan,
    group: &Group,
    name: &str,
    body_source: &str,
    barriers: &[bool],
    shared: &dyn Fn(ostinato::NodeId) -> bool,
    entry: &dyn Fn(ostinato::KernelId) -> String,
) -> FusedKernel {
    let g = plan.graph();
    let comps = group.components.as_ref().expect("a group of components");
    let mut calls = Calls::new(plan);
    let steps: Vec<Step> = group.lanes[0]
        .iter()
        .zip(&comps.members)
        .zip(barriers)
        .map(|((&v, &blocks), &before)| {
            let e = if let NodeOp::Kernel { kernel, .. } = &g.node(v).op { entry(*kernel) } else { String::new() };
            Step { before, blocks, shared: shared(v), call: calls.call_of(v, &e) }
        })
        .collect();
    let constant = |_: usize, v: u32| literal(Scalar::u32(v));
    let mut body = String::new();
    let mut at = 0;
    while at < steps.len() {
        match best_loop(&steps, at) {
            Some(Loop { period: p, reps, deltas }) => {
                let _ = writeln!(body, "  for (unsigned ost_r = 0; ost_r < {reps}u; ++ost_r) {{");
                for (q, d) in deltas.iter().enumerate() {
                    let affine = |i: usize, v: u32| match d.get(i).copied().flatten() {
                        Some(0) | None => literal(Scalar::u32(v)),
                        Some(step) => format!("({} + {} * ost_r)", literal(Scalar::u32(v)), literal(Scalar::u32(step))),
                    };
                    write_step(&mut body, "    ", &steps[at + q], affine);
                }
                body.push_str("  }\n");
                at += p * reps;
            }
            None => {
                write_step(&mut body, "  ", &steps[at], constant);
                at += 1;
            }
        }
    }
    let threads: u32 = group.key.block.iter().product();
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// Generated by Ostinato: fused kernel `{name}`, {} nodes in {} components, block c running each one's blocks of component c.",
        group.len(),
        comps.count
    );
    src.push_str(PDL_PRELUDE);
    src.push_str(&view_prelude(threads));
    src.push_str("#define __global__ __device__ __forceinline__\n");
    src.push_str(body_source);
    src.push('\n');
    src.push_str(FUSED_EPILOGUE);
    let _ = writeln!(src, "extern \"C\" __global__ void __launch_bounds__({threads}) {FUSED_ENTRY}({}) {{", calls.decls().join(", "));
    src.push_str("  if (OST_TRIGGER == 1) OSTINATO_FUSED_TRIGGER();\n  OSTINATO_FUSED_WAIT();\n  if (OST_TRIGGER == 3) OSTINATO_FUSED_TRIGGER();\n");
    src.push_str("  const unsigned long long ost_c = blockIdx.x;\n");
    src.push_str(&body);
    src.push_str("  if (OST_TRIGGER == 2) OSTINATO_FUSED_TRIGGER();\n}\n");
    let (sig, args) = calls.signature(name);
    let dynamic = group.nodes().map(|v| if let NodeOp::Kernel { launch, .. } = &g.node(v).op { launch.shared_bytes } else { 0 }).max().unwrap_or(0);
    let launch = ostinato::Launch::new([comps.count, 1, 1], group.key.block).shared(dynamic);
    FusedKernel { entry: FUSED_ENTRY, source: src, sig, args, launch, staged: Vec::new() }
}
