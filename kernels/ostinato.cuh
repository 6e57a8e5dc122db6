// Ostinato's kernel header: the macros with which a kernel places its `griddepcontrol` so that
// Ostinato can build it in each trigger variant and certify it for programmatic (PDL) edges. Every
// NVRTC compile by Ostinato can `#include "ostinato.cuh"`; a kernel written with OST_ENTRY() before its
// first global-memory access and OST_EXIT() after its last write is built three times (the main
// trigger, triggering at entry, and with no griddepcontrol at all) and each node runs the build its
// edges call for (docs/fences.md).
//
// OST_TRIGGER picks where a kernel lets its dependents launch: 0 never (they launch at its completion),
// 1 at entry (before its own wait: dependents can cascade down a chain), 2 after its last write,
// 3 right after its own wait (one kernel ahead at most). OST_NO_PDL builds without griddepcontrol.
#ifndef OSTINATO_CUH
#define OSTINATO_CUH

#ifndef OST_TRIGGER
#define OST_TRIGGER 1
#endif

#if defined(OST_HANDOFF_WAIT)
// A tile hand-off build (Ostinato's generated wrapper): the wait is for exactly the producer blocks
// this block needs, and the wrapper triggers.
#define OST_WAIT() OST_HANDOFF_WAIT()
#define OST_LAUNCH_DEPENDENTS() do {} while (0)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(OST_NO_PDL)
#define OST_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define OST_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" :::)
#else
#define OST_WAIT() do {} while (0)
#define OST_LAUNCH_DEPENDENTS() do {} while (0)
#endif

#define OST_ENTRY() do { if (OST_TRIGGER == 1) OST_LAUNCH_DEPENDENTS(); OST_WAIT(); if (OST_TRIGGER == 3) OST_LAUNCH_DEPENDENTS(); } while (0)
#define OST_EXIT() do { if (OST_TRIGGER == 2) OST_LAUNCH_DEPENDENTS(); } while (0)

// A grid-stride loop over the launch's linear thread index (blocks and threads in x, y, z, x fastest):
// thread t of block b (of G blocks of T threads) takes elements b*T + t + k*G*T, so every element below
// n is taken exactly once on any grid and block shape, and block b touches b*T + k*G*T .. + T (the
// per-block footprint the host twins compute and tile maps declare).
__device__ __forceinline__ unsigned long long ost_linear_thread() {
  unsigned long long b = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned long long t = ((unsigned long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  return b * ((unsigned long long)blockDim.x * blockDim.y * blockDim.z) + t;
}
__device__ __forceinline__ unsigned long long ost_grid_threads() {
  return (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
}
//
// The loop takes a thread's first element apart from the rest: the body is compiled twice, by an outer
// loop of two passes the compiler unrolls, once for the first element and once as the loop over the
// others from `first + stride`, which the outer loop enters only where the first pass took its element
// and finished it (`ost_more`, set by the first pass's step). The compiler then sees `if (first < n) {
// body; for (i = first + stride; i < n; ...) body; }`, so in a fused chain of calls a body that takes
// one element costs its load, work, store and two tests. On an H200 (lab/probes/fused_loop_forms.cu,
// 941 add_one bodies fused per block, µs per body), 128 / 1,024 / 8,192 blocks of 256 threads ran
// 0.049 / 0.158 / 1.107 with the one-loop form, 0.044 / 0.120 / 0.783 with this one (the same as
// peeled by hand; gating the inner loop's test instead of the outer loop's ran 0.050 / 0.142 / 1.036).
// The elements and their order are the one loop's (the body must not assign `i`): `continue` goes to
// the next element, `break` ends the whole loop, `n` is evaluated at every test as in a `for` loop
// (the probe checks `continue` and `break` against the one loop over 240 grids, counts and stops).
#define OST_GRID_STRIDE(i, n)                                                                              \
  _Pragma("unroll") for (unsigned long long ost_first_##i = ost_linear_thread(), ost_stride_##i = ost_grid_threads(), \
                         ost_pass_##i = 0, ost_more_##i = 0;                                                 \
                         ost_pass_##i < 2 && (ost_pass_##i == 0 || ost_more_##i); ++ost_pass_##i)             \
    for (unsigned long long i = ost_pass_##i == 0 ? ost_first_##i : ost_first_##i + ost_stride_##i; i < (n); \
         i = ost_pass_##i ? i + ost_stride_##i : (ost_more_##i = 1, ~0ull))

#endif  // OSTINATO_CUH
