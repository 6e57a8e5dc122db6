//! The fused kernel's CUDA C, generated from a group: the bodies' source with every `__global__` made
//! a `__device__` function and `blockIdx` / `gridDim` bound to those of a 1-block launch (each body
//! runs as if launched alone), then one `ostinato_fused` entry whose block `b` calls lane `b`'s bodies
//! in order with the nodes' arguments. Pointer and slot arguments become the fused kernel's params
//! (one per distinct pointer; slots stay patchable in place), constant scalars are written into the
//! source bit for bit. Repeated identical calls become a loop, so a chain of 941 equal nodes compiles
//! to a few instructions and stays in the instruction cache.

use std::fmt::Write as _;

use ostinato::{Access, Arg, BufferId, KernelSig, Launch, NodeOp, ParamKind, Plan, Scalar, ScalarType, Slice, SlotId};

use super::stage::{self, Bodies, ParamUse, PointerParam, Staged};
use super::Group;

/// Prepended to a body source in every compile: PDL is the fused kernel's (the bodies' own
/// `OST_WAIT`/`OST_TRIGGER` macros compile to nothing).
pub(super) const PDL_PRELUDE: &str = r#"#ifdef OST_NO_PDL
#define OSTINATO_FUSED_PDL 0
#else
#define OSTINATO_FUSED_PDL 1
#endif
#undef OST_NO_PDL
#define OST_NO_PDL 1
"#;

/// Then, where a fused block runs one-block nodes: each body sees a grid of one block. (A multi-block
/// group's bodies see the real grid: the fused kernel has their grid, and its block `b` runs their
/// block `b`.)
const ONE_BLOCK_VIEW: &str = r#"#define blockIdx (::uint3{0u, 0u, 0u})
#define gridDim (::dim3(1u, 1u, 1u))
"#;

/// Where multi-block lanes sit side by side (fused block `l · blocks + b` runs lane `l`'s block `b`):
/// each body sees block `b` of the lanes' common grid, worked out from the fused kernel's own block
/// index. The view is the same for every thread of the block and every member, so it stays in
/// registers: no shared memory, no stores before each call (the per-thread view a group of
/// components needs, `super::components`, costs 24 bytes a thread and six shared stores at entry).
fn side_by_side_view(grid: [u32; 3]) -> String {
    let [gx, gy, gz] = grid;
    // Lanes of one grid side by side fit a grid along x (`ostinato::fusion::MAX_SIDE_BY_SIDE_BLOCKS`),
    // so every product below fits 32 bits.
    let blocks = ostinato::tiles::block_count(grid);
    let (y, z) = match (gy, gz) {
        (1, 1) => ("0u".to_string(), "0u".to_string()),
        _ => (format!("ost_side_block() / {gx}u % {gy}u"), format!("ost_side_block() / {}u", u64::from(gx) * u64::from(gy))),
    };
    format!(
        r#"__device__ __forceinline__ unsigned ost_side_block() {{ return (unsigned)((unsigned long long)blockIdx.x % {blocks}ull); }}
#define blockIdx (::make_uint3(ost_side_block() % {gx}u, {y}, {z}))
#define gridDim (::dim3({gx}u, {gy}u, {gz}u))
"#
    )
}

/// Calls a loop of repeated calls runs per iteration (`#pragma unroll`): NVRTC leaves the loop rolled
/// by itself, and its counter, compare and branch are three of the 19 instructions a staged `add_one`
/// body takes per call (H200 SASS of the 941 × 8,192-block chain), whose issue bounds the chain. On an
/// H200 (2026-12-04, two alternating runs of each build, µs per dispatch, not unrolled / 4 / 8): 941-deep
/// chains of 1 block 0.062 / 0.055 / 0.053, 128 blocks 0.061 / 0.048 / 0.048, 1,024 blocks 0.207 /
/// 0.178 / 0.178, 8,192 blocks 1.43 / 1.22 / 1.21 (docs/tiles.md).
const REPEAT_UNROLL: u32 = 8;

/// After the bodies: the real `blockIdx`/`gridDim` again, and the fused kernel's PDL entry and exit.
pub(super) const FUSED_EPILOGUE: &str = r#"#undef blockIdx
#undef gridDim
#undef __global__
#define __global__ __attribute__((global))
#ifndef OST_TRIGGER
#define OST_TRIGGER 3
#endif
#if OSTINATO_FUSED_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define OSTINATO_FUSED_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define OSTINATO_FUSED_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" :::)
#else
#define OSTINATO_FUSED_WAIT() do {} while (0)
#define OSTINATO_FUSED_TRIGGER() do {} while (0)
#endif
/* A staged tile's copy, 16 bytes a thread (tiles are 16-byte aligned in address and length). */
__device__ __forceinline__ void ostinato_stage_copy(void* dst, const void* src, unsigned long long bytes) {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  for (unsigned long long k = t; k < bytes / 16; k += n) static_cast<uint4*>(dst)[k] = static_cast<const uint4*>(src)[k];
}
/* A pointer param handed to a body whatever pointer type it takes. */
struct ostinato_fused_ptr {
  void* p;
  template <class T> __device__ __forceinline__ operator T*() const { return static_cast<T*>(p); }
};
"#;

/// The source compiled to certify bodies: each kernel stays an entry (its PTX is what it will run as),
/// with the fused view of the grid.
pub fn check_source(body_source: &str) -> String {
    format!("{PDL_PRELUDE}{ONE_BLOCK_VIEW}{body_source}\n")
}

/// The generated kernel of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedKernel {
    /// Name of the entry in `source`.
    pub entry: &'static str,
    pub source: String,
    /// The signature the rewritten plan declares (its accesses: the union of the members').
    pub sig: KernelSig,
    pub args: Vec<Arg>,
    pub launch: Launch,
    /// The tiles staged in shared memory ([`super::stage`]).
    pub staged: Vec<Staged>,
}

/// The entry every generated module defines.
pub const FUSED_ENTRY: &str = "ostinato_fused";

/// One param of the fused kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Param {
    /// `start..end` bytes of root `root`, accessed as `access` by some member.
    Pointer {
        root: BufferId,
        start: u64,
        end: u64,
        access: Access,
    },
    Slot {
        slot: SlotId,
        ty: ScalarType,
    },
}

fn c_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::U32 => "unsigned",
        ScalarType::I32 => "int",
        ScalarType::F32 => "float",
        ScalarType::U64 => "unsigned long long",
        ScalarType::I64 => "long long",
        ScalarType::F64 => "double",
    }
}

/// A constant scalar as a C expression of its type, bit for bit.
pub(super) fn literal(v: Scalar) -> String {
    let b = v.bits;
    match v.ty {
        ScalarType::U32 => format!("{}u", b as u32),
        ScalarType::I32 => format!("(int){}u", b as u32),
        ScalarType::F32 => format!("__uint_as_float({}u)", b as u32),
        ScalarType::U64 => format!("{b}ull"),
        ScalarType::I64 => format!("(long long){b}ull"),
        ScalarType::F64 => format!("__longlong_as_double((long long){b}ull)"),
    }
}

fn join(a: Access, b: Access) -> Access {
    if a == b {
        a
    } else {
        Access::ReadWrite
    }
}

/// One argument of a member's call: C text, or a constant `unsigned` (which a loop over repeated
/// calls may give as an affine function of its counter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum CallArg {
    Text(String),
    U32(u32),
}

/// A member's call: its entry and arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Call {
    pub entry: String,
    pub args: Vec<CallArg>,
}

impl Call {
    /// `entry(args...)`, each `unsigned` argument `u32(i, value)`.
    pub fn text(&self, u32: impl Fn(usize, u32) -> String) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                CallArg::Text(t) => t.clone(),
                CallArg::U32(v) => u32(i, *v),
            })
            .collect();
        format!("{}({})", self.entry, args.join(", "))
    }
}

/// Collects the fused kernel's params and writes each member's call.
pub(super) struct Calls<'a> {
    plan: &'a Plan,
    params: Vec<Param>,
    /// Which member passes which fused pointer param, as which of its kernel params.
    uses: Vec<ParamUse>,
}

impl<'a> Calls<'a> {
    pub fn new(plan: &'a Plan) -> Self {
        Calls { plan, params: Vec::new(), uses: Vec::new() }
    }
    fn pointer(&mut self, v: ostinato::NodeId, kernel_param: Option<usize>, s: Slice, access: Access) -> String {
        let (root, start, end) = self.plan.graph().root_extent(s);
        let i = match self.params.iter().position(|p| matches!(p, Param::Pointer { root: r, start: st, .. } if *r == root && *st == start)) {
            Some(i) => {
                if let Param::Pointer { end: e, access: a, .. } = &mut self.params[i] {
                    *e = (*e).max(end);
                    *a = join(*a, access);
                }
                i
            }
            None => {
                self.params.push(Param::Pointer { root, start, end, access });
                self.params.len() - 1
            }
        };
        self.uses.push(ParamUse { node: v, kernel_param, fused_param: i });
        format!("ostinato_fused_ptr{{p{i}}}")
    }
    fn slot(&mut self, slot: SlotId, ty: ScalarType) -> String {
        let i = match self.params.iter().position(|p| matches!(p, Param::Slot { slot: s, .. } if *s == slot)) {
            Some(i) => i,
            None => {
                self.params.push(Param::Slot { slot, ty });
                self.params.len() - 1
            }
        };
        format!("p{i}")
    }
    /// The call node `v` makes: `entry(args...)` (`entry`: the kernel's name in its source).
    fn call(&mut self, v: ostinato::NodeId, entry: &str) -> String {
        self.call_of(v, entry).text(|_, x| literal(Scalar::u32(x)))
    }
    /// [`Calls::call`], its arguments apart.
    pub fn call_of(&mut self, v: ostinato::NodeId, entry: &str) -> Call {
        let g = self.plan.graph();
        let text = CallArg::Text;
        match &g.node(v).op {
            NodeOp::Kernel { kernel, args, .. } => {
                let sig = g.kernel(*kernel);
                let mut out = Vec::with_capacity(args.len());
                for (k, (p, a)) in sig.params.iter().zip(args).enumerate() {
                    out.push(match (&p.kind, a) {
                        (ParamKind::Buffer(m), Arg::Buffer(s)) => text(self.pointer(v, Some(k), *s, *m)),
                        (_, Arg::Scalar(x)) if x.ty == ScalarType::U32 => CallArg::U32(x.bits as u32),
                        (_, Arg::Scalar(x)) => text(literal(*x)),
                        (ParamKind::Scalar(t), Arg::Slot(s)) => text(self.slot(*s, *t)),
                        _ => unreachable!("a recorded node's args match its signature"),
                    });
                }
                Call { entry: entry.to_string(), args: out }
            }
            NodeOp::Copy { src, dst } => {
                let (d, s) = (self.pointer(v, None, *dst, Access::Write), self.pointer(v, None, *src, Access::Read));
                Call { entry: "ostinato_copy".into(), args: vec![text(d), text(s), text(format!("{}ull", src.len))] }
            }
            NodeOp::Fill { dst, value } => {
                let d = self.pointer(v, None, *dst, Access::Write);
                Call { entry: "ostinato_fill".into(), args: vec![text(d), text(format!("{value}u")), text(format!("{}ull", dst.len / 4))] }
            }
            NodeOp::Collective { .. } => unreachable!("a collective is never fusable (`build::body_of`)"),
        }
    }
    /// The fused kernel's parameter list in C.
    pub fn decls(&self) -> Vec<String> {
        self.params
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Param::Pointer { .. } => format!("void* p{i}"),
                Param::Slot { ty, .. } => format!("{} p{i}", c_type(*ty)),
            })
            .collect()
    }
    /// The fused kernel's signature `name` and arguments: a pointer param per distinct pointer (its
    /// access the union of the members'), a slot param per slot.
    pub fn signature(&self, name: &str) -> (KernelSig, Vec<Arg>) {
        let mut sig = KernelSig::new(name);
        let mut args = Vec::with_capacity(self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            match *p {
                Param::Pointer { root, start, end, access } => {
                    // Each body's access was checked against its own code when it bound: the union
                    // stands on theirs where the analysis of the fused code cannot tell.
                    sig = sig.buffer_vouched(format!("p{i}"), access);
                    args.push(Arg::Buffer(Slice { buffer: root, offset: start, len: end - start }));
                }
                Param::Slot { slot, ty } => {
                    sig = sig.scalar(format!("p{i}"), ty);
                    args.push(Arg::Slot(slot));
                }
            }
        }
        (sig, args)
    }
}

/// What a group may stage in shared memory ([`super::stage`]): what its bodies allow, and the bytes
/// left for it.
pub struct Staging<'a> {
    pub bodies: Bodies<'a>,
    pub budget: u64,
}

/// The fused kernel `name` of `group`: `body_source` holds every member's code, `barriers[b][i]` says
/// whether lane `b`'s `i`-th member needs a barrier before it ([`super::barriers`]), and `entry(k)` is
/// kernel `k`'s name in the source (copies and fills call the internal kernels). With `staging`, the
/// tiles [`super::stage::choose`] picks live in the block's shared memory for the whole kernel.
pub fn generate(
    plan: &Plan,
    group: &Group,
    name: &str,
    body_source: &str,
    barriers: &[Vec<bool>],
    entry: &dyn Fn(ostinato::KernelId) -> String,
    staging: Option<&Staging>,
) -> FusedKernel {
    let g = plan.graph();
    let mut calls = Calls::new(plan);
    let mut body = String::new();
    let lanes = group.lanes.len();
    for (b, (lane, bar)) in group.lanes.iter().zip(barriers).enumerate() {
        // (barrier before, call) per member, then runs of equal steps as loops.
        let steps: Vec<(bool, String)> = lane
            .iter()
            .zip(bar)
            .map(|(&v, &before)| {
                let e = if let NodeOp::Kernel { kernel, .. } = &g.node(v).op { entry(*kernel) } else { String::new() };
                (before, calls.call(v, &e))
            })
            .collect();
        let indent = if lanes > 1 { "      " } else { "  " };
        if lanes > 1 {
            let _ = writeln!(body, "    case {b}: {{");
        }
        let mut i = 0;
        while i < steps.len() {
            let mut j = i + 1;
            while j < steps.len() && steps[j] == steps[i] {
                j += 1;
            }
            let (before, call) = &steps[i];
            let sync = if *before { "__syncthreads(); " } else { "" };
            if j - i > 2 {
                let _ = writeln!(body, "{indent}#pragma unroll {REPEAT_UNROLL}\n{indent}for (unsigned r = 0; r < {}u; ++r) {{ {sync}{call}; }}", j - i);
            } else {
                for _ in i..j {
                    let _ = writeln!(body, "{indent}{sync}{call};");
                }
            }
            i = j;
        }
        if lanes > 1 {
            let _ = writeln!(body, "      break;\n    }}");
        }
    }
    let decls = calls.decls();
    let threads: u32 = group.key.block.iter().product();
    let multi_block = group.key.grid != [1, 1, 1];
    // Multi-block lanes side by side: fused block `l · blocks + b` runs lane `l`'s bodies as their
    // block `b`, each body seeing it through `side_by_side_view`. Their tiles are not staged (a
    // staged tile's place follows the fused kernel's own block index).
    let side_by_side = group.is_side_by_side();
    let staged = match staging {
        Some(st) if multi_block && !side_by_side => {
            let pointers: Vec<PointerParam> = calls
                .params
                .iter()
                .enumerate()
                .filter_map(|(index, p)| match *p {
                    Param::Pointer { root, start, access, .. } => Some(PointerParam { index, root, start, access }),
                    Param::Slot { .. } => None,
                })
                .collect();
            stage::choose(plan, group.key.grid, &pointers, &calls.uses, &st.bodies, st.budget)
        }
        _ => Vec::new(),
    };
    let mut src = String::new();
    if side_by_side {
        let _ = writeln!(
            src,
            "// Generated by Ostinato: fused kernel `{name}`, {} nodes of grid {:?} in {lanes} lanes side by side, block l*blocks+b running lane l's block b.",
            group.len(),
            group.key.grid
        );
        src.push_str(PDL_PRELUDE);
        src.push_str(&side_by_side_view(group.key.grid));
    } else if multi_block {
        let _ = writeln!(
            src,
            "// Generated by Ostinato: fused kernel `{name}`, {} nodes of grid {:?}, block b running each one's block b.",
            group.len(),
            group.key.grid
        );
        src.push_str(PDL_PRELUDE);
    } else {
        let _ = writeln!(src, "// Generated by Ostinato: fused kernel `{name}`, {} nodes in {lanes} lane(s) of one block each.", group.len());
        src.push_str(PDL_PRELUDE);
        src.push_str(ONE_BLOCK_VIEW);
    }
    src.push_str("#define __global__ __device__ __forceinline__\n");
    src.push_str(body_source);
    src.push('\n');
    src.push_str(FUSED_EPILOGUE);
    let _ = writeln!(src, "extern \"C\" __global__ void __launch_bounds__({threads}) {FUSED_ENTRY}({}) {{", decls.join(", "));
    src.push_str("  if (OST_TRIGGER == 1) OSTINATO_FUSED_TRIGGER();\n  OSTINATO_FUSED_WAIT();\n  if (OST_TRIGGER == 3) OSTINATO_FUSED_TRIGGER();\n");
    let blocks = ostinato::tiles::block_count(group.key.grid);
    if side_by_side {
        let _ = writeln!(src, "  switch ((unsigned)((unsigned long long)blockIdx.x / {blocks}ull)) {{");
        src.push_str(&body);
        src.push_str("  }\n");
    } else if lanes > 1 {
        src.push_str("  switch (blockIdx.x) {\n");
        src.push_str(&body);
        src.push_str("  }\n");
    } else if staged.is_empty() {
        src.push_str(&body);
    } else {
        src.push_str(&staged_body(&staged, &body));
    }
    src.push_str("  if (OST_TRIGGER == 2) OSTINATO_FUSED_TRIGGER();\n}\n");
    let (sig, args) = calls.signature(name);
    let shared = group.nodes().map(|v| if let NodeOp::Kernel { launch, .. } = &g.node(v).op { launch.shared_bytes } else { 0 }).max().unwrap_or(0);
    // (A side-by-side group's blocks fit a grid along x: `ostinato::fusion::MAX_SIDE_BY_SIDE_BLOCKS`.)
    let grid = if side_by_side {
        [u32::try_from(lanes as u64 * blocks).unwrap_or(u32::MAX), 1, 1]
    } else if multi_block {
        group.key.grid
    } else {
        [lanes as u32, 1, 1]
    };
    let launch = Launch::new(grid, group.key.block).shared(shared);
    FusedKernel { entry: FUSED_ENTRY, source: src, sig, args, launch, staged }
}

/// The members' calls `body` with the `staged` tiles copied into shared memory before them and back
/// after: inside the block that runs the calls, each staged param's name is a generic pointer placed
/// so that the member's own offsets land in the block's copy of its tile.
fn staged_body(staged: &[Staged], body: &str) -> String {
    let mut s = String::new();
    for t in staged {
        let i = t.param;
        let _ = writeln!(s, "  __shared__ __align__(16) unsigned char ost_tile{i}[{}];", t.len);
        let _ = writeln!(
            s,
            "  const unsigned long long ost_at{i} = {}ull + {}ull * blockIdx.x + {}ull * blockIdx.y + {}ull * blockIdx.z;",
            t.base, t.stride[0], t.stride[1], t.stride[2]
        );
        let _ = writeln!(s, "  ostinato_stage_copy(ost_tile{i}, (const unsigned char*)p{i} + ost_at{i}, {}ull);", t.len);
    }
    s.push_str("  __syncthreads();\n  {\n");
    for t in staged {
        let i = t.param;
        let _ = writeln!(s, "  void* const p{i} = (void*)((unsigned long long)ost_tile{i} - ost_at{i});");
    }
    s.push_str(body);
    s.push_str("  }\n  __syncthreads();\n");
    for t in staged.iter().filter(|t| t.write_back) {
        let i = t.param;
        let _ = writeln!(s, "  ostinato_stage_copy((unsigned char*)p{i} + ost_at{i}, ost_tile{i}, {}ull);", t.len);
    }
    s
}
