//! The hand-off wrappers' CUDA C: the body's source with every `__global__` made a `__device__`
//! function (its `__launch_bounds__` carried to the wrapper instead), then one entry per (kernel,
//! producer count, wait placement) that waits, runs the body with the real grid, and publishes.
//!
//! A wrapper `ostinato_handoff_<K>_<e|w>_<entry>` takes the body's params, then `ost_self` (its blocks'
//! flags), and for a consumer (`K > 0`) `ost_waits` (its [`super::WaitTable`]) and `ost_p0..` (the
//! producers' flags). Thread 0 of block `j` stashes them in shared memory with `gen` (its own flag + 1:
//! the run this replay is). Then the waits, in one of two places ([`Placement`]):
//!
//! - `w` (before the body): thread 0 waits until each listed producer flag reaches `gen`
//!   (`ld.acquire.gpu`, wrapping compare), and the block barrier hands that to every thread;
//! - `e` (at the body's `OST_ENTRY`, for a kernel certified to wait there before touching what a
//!   producer writes): the body's `OST_WAIT` becomes the tile wait, done by the leader of each warp that
//!   reaches it (`__syncwarp` hands it to the warp), so the reads the body makes before it — its
//!   certified pre-wait prefetch — still overlap the producers.
//!
//! A publisher without waits (`K = 0`) waits for its grid dependencies with `griddepcontrol.wait`, at
//! the body's `OST_ENTRY` or before the body. After the body each thread fences and counts itself in;
//! the last one fences again and stores `gen` to its block's flag (`st.release.gpu`): no barrier after
//! the body, so a body may synchronise its block and threads may return from it early. Every wrapper
//! triggers its dependents at entry, and a consumer executes `griddepcontrol.wait` before it exits.

use std::fmt::Write as _;

use ostinato::{KernelSig, ParamKind, ScalarType};

use super::MAX_PRODUCERS;

/// Before the bodies: no PDL of their own, their `OST_WAIT` hooked, launch bounds dropped (the
/// wrapper carries them), and the shared state the hook reads.
const PRELUDE: &str = r#"#ifdef OST_NO_PDL
#define OSTINATO_FUSED_PDL 0
#else
#define OSTINATO_FUSED_PDL 1
#endif
#undef OST_NO_PDL
#define OST_NO_PDL 1
#if OSTINATO_FUSED_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define OSTINATO_HANDOFF_WAIT_GRID() asm volatile("griddepcontrol.wait;" ::: "memory")
#define OSTINATO_HANDOFF_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" :::)
#else
#define OSTINATO_HANDOFF_WAIT_GRID() do {} while (0)
#define OSTINATO_HANDOFF_TRIGGER() do {} while (0)
#endif
/* What the wrapper hands its body's OST_ENTRY: 0 nothing to wait for (done before the body), 1 the
   tiles of ost_h_waits, 2 the grid dependencies. */
static __shared__ unsigned ost_h_mode;
static __shared__ unsigned ost_h_gen;
static __shared__ unsigned ost_h_arrived;
static __shared__ const unsigned* ost_h_waits;
static __shared__ const unsigned* ost_h_p[OSTINATO_HANDOFF_MAX_PRODUCERS];
__device__ __forceinline__ unsigned ostinato_block_linear() { return (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x; }
__device__ __forceinline__ bool ostinato_thread0() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }
__device__ __forceinline__ unsigned ostinato_flag_relaxed(const unsigned* f) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
  return v;
}
/* Waits until flag `f` reached run `gen` (wrapping: runs count up for ever). */
__device__ __forceinline__ void ostinato_flag_wait(const unsigned* f, unsigned gen) {
  for (;;) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
    if ((int)(v - gen) >= 0) return;
    __nanosleep(32);
  }
}
/* Every producer block this block's table lists. */
__device__ __forceinline__ void ostinato_handoff_tiles() {
  const unsigned b = ostinato_block_linear(), n = gridDim.x * gridDim.y * gridDim.z;
  for (unsigned i = ost_h_waits[b]; i < ost_h_waits[b + 1u]; ++i) {
    const unsigned e = ost_h_waits[n + 1u + i];
    ostinato_flag_wait(ost_h_p[e >> 24] + (e & 0xFFFFFFu), ost_h_gen);
  }
}
/* The body's OST_WAIT: the leader of each warp that reaches it waits, the warp follows. */
__device__ __forceinline__ void ostinato_handoff_entry() {
  const unsigned mode = ost_h_mode;
  if (mode == 2u) { OSTINATO_HANDOFF_WAIT_GRID(); return; }
  if (mode != 1u) return;
  const unsigned active = __activemask();
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane == (unsigned)(__ffs(active) - 1)) ostinato_handoff_tiles();
  __syncwarp(active);
}
#define OST_HANDOFF_WAIT() ostinato_handoff_entry()
#undef __launch_bounds__
#define __launch_bounds__(...)
#define __global__ __device__ __forceinline__
"#;

/// After the bodies: the real `__global__` and `__launch_bounds__`, the pointer cast, the arrival.
const EPILOGUE: &str = r#"#undef __global__
#define __global__ __attribute__((global))
#undef __launch_bounds__
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
/* A pointer param handed to a body whatever pointer type it takes. */
struct ostinato_fused_ptr {
  void* p;
  template <class T> __device__ __forceinline__ operator T*() const { return static_cast<T*>(p); }
};
/* Each thread after the body: its writes fenced, counted in; the last one publishes the block. */
__device__ __forceinline__ void ostinato_handoff_arrive(unsigned* self) {
  __threadfence();
  if (atomicAdd(&ost_h_arrived, 1u) == blockDim.x * blockDim.y * blockDim.z - 1u) {
    __threadfence();
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(self), "r"(ost_h_gen) : "memory");
  }
}
"#;

/// Where a consumer waits for its tiles (a publisher, for its grid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placement {
    /// At the body's `OST_ENTRY`: the kernel is certified to wait there before touching what a
    /// producer writes, and its pre-wait reads are known.
    AtEntry,
    /// Before the body.
    BeforeBody,
}

/// The C type of a scalar param.
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

/// The entry name of `entry`'s wrapper for `producers` producers, waiting at `placement`.
pub fn wrapper_entry(entry: &str, producers: usize, placement: Placement) -> String {
    format!("ostinato_handoff_{producers}_{}_{entry}", if placement == Placement::AtEntry { "e" } else { "w" })
}

/// One wrapper to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapper {
    /// The body's entry in the source.
    pub entry: String,
    /// The body's signature (the graph's; the wrapper appends its own params).
    pub sig: KernelSig,
    pub producers: usize,
    pub placement: Placement,
    /// The body's `__launch_bounds__`, as its PTX declares them: threads (x·y·z) and blocks per SM.
    pub bounds: (Option<u32>, Option<u32>),
}

/// The module of `wrappers` around kernels of `body_source` (one source: one module).
pub fn generate(body_source: &str, wrappers: &[Wrapper]) -> String {
    let mut src = String::new();
    let _ = writeln!(src, "// Generated by Ostinato: tile hand-off wrappers of {} kernel(s).", wrappers.len());
    let _ = writeln!(src, "#define OSTINATO_HANDOFF_MAX_PRODUCERS {MAX_PRODUCERS}");
    src.push_str(PRELUDE);
    src.push_str(body_source);
    src.push('\n');
    src.push_str(EPILOGUE);
    for w in wrappers {
        write_wrapper(&mut src, w);
    }
    src
}

fn write_wrapper(src: &mut String, w: &Wrapper) {
    let mut decls = Vec::new();
    let mut call = Vec::new();
    for (i, p) in w.sig.params.iter().enumerate() {
        match &p.kind {
            ParamKind::Buffer(_) => {
                decls.push(format!("void* a{i}"));
                call.push(format!("ostinato_fused_ptr{{a{i}}}"));
            }
            ParamKind::Scalar(t) => {
                decls.push(format!("{} a{i}", c_type(*t)));
                call.push(format!("a{i}"));
            }
        }
    }
    decls.push("unsigned* ost_self".into());
    if w.producers > 0 {
        decls.push("const unsigned* ost_waits".into());
        decls.extend((0..w.producers).map(|p| format!("const unsigned* ost_p{p}")));
    }
    let bounds = match w.bounds {
        (Some(t), Some(b)) => format!(" __launch_bounds__({t}, {b})"),
        (Some(t), None) => format!(" __launch_bounds__({t})"),
        _ => String::new(),
    };
    let at_entry = w.placement == Placement::AtEntry;
    let _ = writeln!(src, "extern \"C\" __global__ void{bounds} {}({}) {{", wrapper_entry(&w.entry, w.producers, w.placement), decls.join(", "));
    src.push_str("  OSTINATO_HANDOFF_TRIGGER();\n  if (ostinato_thread0()) {\n    ost_h_gen = ostinato_flag_relaxed(ost_self + ostinato_block_linear()) + 1u;\n    ost_h_arrived = 0u;\n");
    // Every slot of the stash holds one of this wrapper's params (unused ones too, though nothing
    // reads them): what the body's hook reads through them is attributable to a param.
    if w.producers > 0 {
        src.push_str("    ost_h_waits = ost_waits;\n");
        for p in 0..MAX_PRODUCERS {
            let _ = writeln!(src, "    ost_h_p[{p}] = ost_p{};", p.min(w.producers - 1));
        }
        let _ = writeln!(src, "    ost_h_mode = {}u;", if at_entry { 1 } else { 0 });
        if !at_entry {
            src.push_str("    ostinato_handoff_tiles();\n");
        }
        src.push_str("  }\n");
    } else {
        src.push_str("    ost_h_waits = ost_self;\n");
        for p in 0..MAX_PRODUCERS {
            let _ = writeln!(src, "    ost_h_p[{p}] = ost_self;");
        }
        let _ = writeln!(src, "    ost_h_mode = {}u;\n  }}", if at_entry { 2 } else { 0 });
        if !at_entry {
            src.push_str("  OSTINATO_HANDOFF_WAIT_GRID();\n");
        }
    }
    src.push_str("  __syncthreads();\n");
    let _ = writeln!(src, "  {}({});", w.entry, call.join(", "));
    src.push_str("  ostinato_handoff_arrive(ost_self + ostinato_block_linear());\n");
    if w.producers > 0 {
        src.push_str("  OSTINATO_HANDOFF_WAIT_GRID();\n");
    }
    src.push_str("}\n");
}

/// The wrapper's signature: the body's params (same modes, same declarations), then the flags and
/// tables as vouched buffers (the engine's own memory, read and written only as the protocol says).
pub fn wrapper_sig(body: &KernelSig, producers: usize, placement: Placement) -> KernelSig {
    let mut sig = KernelSig { name: wrapper_entry(&body.name, producers, placement), ..body.clone() };
    sig = sig.buffer_vouched("ost_self", ostinato::Access::ReadWrite);
    if producers > 0 {
        sig = sig.buffer_vouched("ost_waits", ostinato::Access::Read);
        for p in 0..producers {
            sig = sig.buffer_vouched(format!("ost_p{p}"), ostinato::Access::Read);
        }
    }
    sig
}
