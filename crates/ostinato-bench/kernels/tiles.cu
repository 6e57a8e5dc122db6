// The tiles family of the benchmark's kernel pack (`ostinato_bench::pack`): kernels whose blocks each
// touch a known tile of their buffers, recorded with per-block tile maps (`ostinato::tiles`) so that
// the planner orders blocks, not whole launches.
//
// Row kernels (`rms_norm`, `rms_scale`, `residual_add`, `softmax_scale`, `gemv_u32`) take blocks of
// 32 x R threads: a warp per row (threadIdx.x the lane, threadIdx.y the block's row), rows
// R blockIdx.x + threadIdx.y; lane l takes the row's elements l, l + 32, ... in that order, and a
// row's sum is the lanes' sums added by the butterfly (offsets 16, 8, 4, 2, 1; every lane ends with
// the same bits). No block barrier: each kernel may run block by block inside a fused kernel. Every
// float operation is written `__f*_rn` so that NVRTC contracts none, and `tl_exp` is built of them:
// the host twins (`families::tiles`) compute the same operations in the same order. The WGSL twins
// (tiles_*.wgsl) do too, but a Vulkan driver may fuse a multiply and an add.
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

// e^x for x <= 0 (0 below -87): k = rint(x log2 e), r = x - k ln2 (ln2 in two parts, the first exact
// in a product with k), e^r by its degree-7 Taylor polynomial (Horner), times 2^k by the exponent
// bits. Only correctly rounded operations, each written out: the host twin computes the same bits.
__device__ __forceinline__ float tl_exp(float x) {
  if (x < -87.0f) return 0.0f;
  float k = rintf(__fmul_rn(x, __int_as_float(0x3fb8aa3b)));
  float r = __fsub_rn(__fsub_rn(x, __fmul_rn(k, __int_as_float(0x3f317200))), __fmul_rn(k, __int_as_float(0x35bfbe8e)));
  float p = __int_as_float(0x39500d01);                         // 1/5040
  p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3ab60b61));  // 1/720
  p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3c088889));  // 1/120
  p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3d2aaaab));  // 1/24
  p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3e2aaaab));  // 1/6
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  return __fmul_rn(p, __int_as_float(((int)k + 127) << 23));
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
