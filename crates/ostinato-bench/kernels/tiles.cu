// The tiles family of the benchmark's kernel pack (`ostinato_bench::pack`): kernels whose blocks each
// touch a known tile of their buffers, recorded with per-block tile maps (`ostinato::tiles`) so that
// the planner orders blocks, not whole launches.
//
// Row kernels (`rms_norm`, `rms_scale`, `residual_add`, `softmax_scale`, `gemv_u32`) take blocks of
// 32 x R threads: a warp per row (threadIdx.x the lane, threadIdx.y the block's row), rows
// R blockIdx.x + threadIdx.y; lane l takes the row's elements l, l + 32, ... in that order, and a
// row's sum is the lanes' sums added by the butterfly (offsets 16, 8, 4, 2, 1; every lane ends with
// the same bits). No block barrier: each kernel may run block by block inside a fused kernel. Every
// float operation is written `__f*_rn` so that NVRTC contracts none: the host twins
// (`families::tiles`) compute the same operations in the same order. `tl_exp` is the exception, as in
// production softmaxes: the hardware's approximate 2^x of x log2 e, within 2 ulps of the twins' exp2 of
// the same product. The WGSL twins (tiles_*.wgsl) compute the same, but a Vulkan driver may fuse a
// multiply and an add and has its own exp2.
//
// The tile kernels (`tile_spread`, `tile_gather`) are u32 and wrap: a 2-D grid whose block (i, j)
// updates its own tile from tile j of the other buffer, and a 1-D grid whose block j sums `fan` of
// the other's tiles into its own. They are one module (`tiles_spread_gather`), so their chain may fuse.
#include "ostinato.cuh"

#define FULL 0xffffffffu

// The butterfly's sum and maximum of a warp's values (every lane gets the result).
__device__ __forceinline__ float tl_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(FULL, v, o));
  return v;
}
__device__ __forceinline__ float tl_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}
__device__ __forceinline__ unsigned tl_sum_u32(unsigned v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
  return v;
}

// e^x as a production softmax takes it (Triton's `tl.exp`, `__expf`): the product x log2 e, correctly
// rounded, then the hardware's approximate 2^x (`ex2.approx.ftz`, at most 2 ulps off; 0 below 2^-126).
__device__ __forceinline__ float tl_exp(float x) {
  float y = __fmul_rn(x, __int_as_float(0x3fb8aa3b)), e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(y));
  return e;
}

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_tiles_rms)
// One layer of a residual stream: h = rms_norm(x), h *= w, x += h. The three kernels are one code (one
// translation unit), so a chain of them fuses into one kernel.

// h[row] = x[row] / sqrt(mean(x[row]^2) + eps).
extern "C" __global__ void rms_norm(float* h, const float* x, unsigned rows, unsigned n, float eps) {
  OST_ENTRY();
  unsigned row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row < rows) {
    float s = 0.0f;
    for (unsigned c = lane; c < n; c += 32) {
      float v = x[row * n + c];
      s = __fadd_rn(s, __fmul_rn(v, v));
    }
    s = tl_sum(s);
    float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, (float)n), eps)));
    for (unsigned c = lane; c < n; c += 32) h[row * n + c] = __fmul_rn(x[row * n + c], inv);
  }
  OST_EXIT();
}

// h[row][c] *= w[c]: every block reads all of w.
extern "C" __global__ void rms_scale(float* h, const float* w, unsigned rows, unsigned n) {
  OST_ENTRY();
  unsigned row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row < rows) {
    for (unsigned c = lane; c < n; c += 32) h[row * n + c] = __fmul_rn(h[row * n + c], w[c]);
  }
  OST_EXIT();
}

// x[row] += h[row].
extern "C" __global__ void residual_add(float* x, const float* h, unsigned rows, unsigned n) {
  OST_ENTRY();
  unsigned row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row < rows) {
    for (unsigned c = lane; c < n; c += 32) x[row * n + c] = __fadd_rn(x[row * n + c], h[row * n + c]);
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_softmax_scale)
// In place: x[row] = c[row] * softmax(x[row]) (the maximum subtracted first; e^x stored, then scaled
// by c[row] / sum).
extern "C" __global__ void softmax_scale(float* x, const float* c, unsigned rows, unsigned n) {
  OST_ENTRY();
  unsigned row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row < rows) {
    float m = __int_as_float(0xff7fffff);  // the lowest finite float: the maximum of no element
    for (unsigned j = lane; j < n; j += 32) m = fmaxf(m, x[row * n + j]);
    m = tl_max(m);
    float s = 0.0f;
    for (unsigned j = lane; j < n; j += 32) {
      float e = tl_exp(__fsub_rn(x[row * n + j], m));
      x[row * n + j] = e;
      s = __fadd_rn(s, e);
    }
    float f = __fdiv_rn(c[row], tl_sum(s));
    for (unsigned j = lane; j < n; j += 32) x[row * n + j] = __fmul_rn(x[row * n + j], f);
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_gemv_u32)
// y[row] = W[row] . x (wrapping u32): every block reads all of x.
extern "C" __global__ void gemv_u32(unsigned* y, const unsigned* w, const unsigned* x, unsigned rows, unsigned k) {
  OST_ENTRY();
  unsigned row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row < rows) {
    unsigned s = 0;
    for (unsigned j = lane; j < k; j += 32) s += w[row * k + j] * x[j];
    s = tl_sum_u32(s);
    if (lane == 0) y[row] = s;
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_tiles_spread_gather)
// Grid (F, G) of T threads: block (i, j) updates tile i + F j of x (T words) from tile j of y.
extern "C" __global__ void tile_spread(unsigned* x, const unsigned* y, unsigned salt) {
  OST_ENTRY();
  unsigned t = threadIdx.x, tile = blockIdx.x + gridDim.x * blockIdx.y;
  x[blockDim.x * tile + t] = x[blockDim.x * tile + t] * 3u + y[blockDim.x * blockIdx.y + t] + salt;
  OST_EXIT();
}

// Block j of T threads: y's tile j = y * 5 + the sum of x's tiles fan j .. fan j + fan - 1 (fan a
// multiple of 4). Four tiles a step, written out: four loads in flight, and a loop whose trip count the
// tile-map check bounds from `k < fan` (the remainder loop NVRTC adds when it unrolls a `++k` loop of a
// run-time count leaves its counter unbounded, and the map unverified).
extern "C" __global__ void tile_gather(unsigned* y, const unsigned* x, unsigned fan) {
  OST_ENTRY();
  unsigned t = threadIdx.x, j = blockIdx.x, s = 0;
  const unsigned* tiles = x + blockDim.x * fan * j + t;
#pragma unroll 1
  for (unsigned k = 0; k < fan; k += 4) {
    s += tiles[blockDim.x * k] + tiles[blockDim.x * (k + 1)] + tiles[blockDim.x * (k + 2)] + tiles[blockDim.x * (k + 3)];
  }
  y[blockDim.x * j + t] = y[blockDim.x * j + t] * 5u + s;
  OST_EXIT();
}
#endif
