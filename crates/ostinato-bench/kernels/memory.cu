// The memory-latency family of the benchmark's kernel pack (`ostinato_bench::pack`): every thread issues
// L independent loads at hashed places of a table larger than L2 (so each misses), then adds them:
// L = 1 is one load's latency per thread, L = 64 sixty-four loads in flight per thread. The WGSL twin is
// memory.wgsl, the host twin `families::memory`.
#include "ostinato.cuh"

// A 32-bit mix (lowbias32): consecutive inputs land far apart.
__device__ __forceinline__ unsigned ml_hash(unsigned v) {
  v ^= v >> 16;
  v *= 0x7feb352du;
  v ^= v >> 15;
  v *= 0x846ca68bu;
  v ^= v >> 16;
  return v;
}

// out[t] = out[t] * 3 + sum over j < L of table[hash(t * L + j + salt) & mask] (wrapping u32), one
// thread per element of out. The loads are issued before any add (`ld.global.cg`: they are served from
// L2 or memory, not L1).
template <int L>
__device__ __forceinline__ void ml_loads(unsigned* out, const unsigned* table, unsigned mask, unsigned salt) {
  OST_ENTRY();
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v[L];
#pragma unroll
  for (int j = 0; j < L; j++) v[j] = __ldcg(&table[ml_hash(t * L + j + salt) & mask]);
  unsigned s = 0;
#pragma unroll
  for (int j = 0; j < L; j++) s += v[j];
  out[t] = out[t] * 3u + s;
  OST_EXIT();
}

#define ML_ENTRY(L) \
  extern "C" __global__ void mem_l##L(unsigned* out, const unsigned* table, unsigned mask, unsigned salt) { ml_loads<L>(out, table, mask, salt); }

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l1)
ML_ENTRY(1)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l2)
ML_ENTRY(2)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l4)
ML_ENTRY(4)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l8)
ML_ENTRY(8)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l16)
ML_ENTRY(16)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l32)
ML_ENTRY(32)
#endif
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_mem_l64)
ML_ENTRY(64)
#endif
