// The reduction families of the benchmark's kernel pack (`ostinato_bench::pack`): a sum of n elements of
// x added into acc[0], in f32 and u32, four ways in one kernel (per-thread atomics, warp shuffles then an
// atomic per warp, a shared-memory tree then an atomic per block, per-block partials and a final sum by
// the last block) and in two kernels (partials, then a one-block final sum). Blocks of RB threads. The
// WGSL twins are reduce_*.wgsl, the host twins `families::reduction` (they add in the kernels' order
// where the order is fixed: the tree, the partials and the final sum).
#include "ostinato.cuh"

#define RB 256
#define FULL 0xffffffffu

__device__ __forceinline__ unsigned rd_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned rd_bits(unsigned v) { return v; }
template <typename T> __device__ __forceinline__ T rd_from(unsigned b);
template <> __device__ __forceinline__ float rd_from<float>(unsigned b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ unsigned rd_from<unsigned>(unsigned b) { return b; }

// The thread's sum of x[g], x[g + G], x[g + 2G], ... in that order (g its index in the grid, G the
// grid's threads).
template <typename T>
__device__ __forceinline__ T rd_local(const T* x, unsigned n) {
  T s = 0;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
  return s;
}

// The block's sum of v in a shared-memory tree (sm[t] += sm[t + o] for o = 128, 64, ..., 1), valid in
// thread 0. Every thread of the block calls it.
template <typename T>
__device__ __forceinline__ T rd_tree(T* sm, T v) {
  unsigned t = threadIdx.x;
  sm[t] = v;
  __syncthreads();
#pragma unroll
  for (unsigned o = RB / 2; o > 0; o >>= 1) {
    if (t < o) sm[t] = sm[t] + sm[t + o];
    __syncthreads();
  }
  return sm[0];
}

template <typename T>
__device__ __forceinline__ void rd_atomic(T* acc, const T* x, unsigned n) {
  OST_ENTRY();
  atomicAdd(acc, rd_local(x, n));
  OST_EXIT();
}

template <typename T>
__device__ __forceinline__ void rd_warp(T* acc, const T* x, unsigned n) {
  OST_ENTRY();
  T s = rd_local(x, n);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = s + __shfl_xor_sync(FULL, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(acc, s);
  OST_EXIT();
}

template <typename T>
__device__ __forceinline__ void rd_block(T* acc, const T* x, unsigned n) {
  OST_ENTRY();
  __shared__ T sm[RB];
  T s = rd_tree(sm, rd_local(x, n));
  if (threadIdx.x == 0) atomicAdd(acc, s);
  OST_EXIT();
}

// Per-block partials in part[0..G), a ticket in part[G]; the block that takes the last ticket sums the
// partials (thread t: part[t], part[t + RB], ...; then the tree), adds the sum into acc[0] and resets the
// ticket for the next launch.
template <typename T>
__device__ __forceinline__ void rd_partials(T* acc, const T* x, unsigned* part, unsigned n) {
  OST_ENTRY();
  __shared__ T sm[RB];
  __shared__ bool last;
  T s = rd_tree(sm, rd_local(x, n));
  if (threadIdx.x == 0) {
    part[blockIdx.x] = rd_bits(s);
    __threadfence();
    last = atomicAdd(&part[gridDim.x], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {
    T v = 0;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += RB) v += rd_from<T>(__ldcg(&part[i]));
    T total = rd_tree(sm, v);
    if (threadIdx.x == 0) {
      acc[0] = acc[0] + total;
      part[gridDim.x] = 0;
    }
  }
  OST_EXIT();
}

// Two-stage: each block's sum into part[block] ...
template <typename T>
__device__ __forceinline__ void rd2_partials(unsigned* part, const T* x, unsigned n) {
  OST_ENTRY();
  __shared__ T sm[RB];
  T s = rd_tree(sm, rd_local(x, n));
  if (threadIdx.x == 0) part[blockIdx.x] = rd_bits(s);
  OST_EXIT();
}

// ... then one block sums the m partials (thread t: part[t], part[t + RB], ...; then the tree) into acc[0].
template <typename T>
__device__ __forceinline__ void rd2_final(T* acc, const unsigned* part, unsigned m) {
  OST_ENTRY();
  __shared__ T sm[RB];
  T v = 0;
  for (unsigned i = threadIdx.x; i < m; i += RB) v += rd_from<T>(part[i]);
  T total = rd_tree(sm, v);
  if (threadIdx.x == 0) acc[0] = acc[0] + total;
  OST_EXIT();
}

// One entry per kernel: RD_<kind>(name, T) defines reduce_<kind>_<name> for element type T.
#define RD_ATOMIC(name, T) extern "C" __global__ void reduce_atomic_##name(T* acc, const T* x, unsigned n) { rd_atomic<T>(acc, x, n); }
#define RD_WARP(name, T) extern "C" __global__ void reduce_warp_##name(T* acc, const T* x, unsigned n) { rd_warp<T>(acc, x, n); }
#define RD_TREE(name, T) extern "C" __global__ void reduce_tree_##name(T* acc, const T* x, unsigned n) { rd_block<T>(acc, x, n); }
#define RD_PARTIALS(name, T) \
  extern "C" __global__ void reduce_partials_##name(T* acc, const T* x, unsigned* part, unsigned n) { rd_partials<T>(acc, x, part, n); }
#define RD2_PARTIALS(name, T) \
  extern "C" __global__ void reduce2_partials_##name(unsigned* part, const T* x, unsigned n) { rd2_partials<T>(part, x, n); }
#define RD2_FINAL(name, T) extern "C" __global__ void reduce2_final_##name(T* acc, const unsigned* part, unsigned m) { rd2_final<T>(acc, part, m); }

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_atomic_f32)
RD_ATOMIC(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_atomic_u32)
RD_ATOMIC(u32, unsigned)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_warp_f32)
RD_WARP(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_warp_u32)
RD_WARP(u32, unsigned)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_tree_f32)
RD_TREE(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_tree_u32)
RD_TREE(u32, unsigned)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_partials_f32)
RD_PARTIALS(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce_partials_u32)
RD_PARTIALS(u32, unsigned)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce2_partials_f32)
RD2_PARTIALS(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce2_partials_u32)
RD2_PARTIALS(u32, unsigned)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce2_final_f32)
RD2_FINAL(f32, float)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_reduce2_final_u32)
RD2_FINAL(u32, unsigned)
#endif
