// The packed-dot family of the benchmark's kernel pack (`ostinato_bench::pack`): each thread adds into
// out[t] the dot product of its DOT_K words of a and b, as packed int8 quads (`__dp4a`, IDP4A), f16 pairs
// or bf16 pairs (each pair's products accumulated in f32 with FMA, in word order, low half first). The
// f16 and bf16 products are exact in f32, so FMA or not, every implementation adding in this order gets
// the same f32: the WGSL twins (dot_*.wgsl) and the host twins (`families::dot`) do. Blocks of 256.
#include "ostinato.cuh"

#define DOT_K 8

__device__ __forceinline__ float dt_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// The thread's DOT_K words of p (32 contiguous bytes: two 16-byte loads).
__device__ __forceinline__ void dt_load(unsigned (&w)[DOT_K], const unsigned* p, unsigned t) {
  const uint4* q = (const uint4*)(p + (unsigned long long)t * DOT_K);
  uint4 a = q[0], b = q[1];
  w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
  w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
}

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_dot_i8)
extern "C" __global__ void dot_i8(unsigned* out, const unsigned* a, const unsigned* b, unsigned n) {
  OST_ENTRY();
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    unsigned wa[DOT_K], wb[DOT_K];
    dt_load(wa, a, t);
    dt_load(wb, b, t);
    int s = 0;
#pragma unroll
    for (int j = 0; j < DOT_K; j++) s = __dp4a((int)wa[j], (int)wb[j], s);
    out[t] = out[t] + (unsigned)s;
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_dot_f16)
extern "C" __global__ void dot_f16(float* out, const unsigned* a, const unsigned* b, unsigned n) {
  OST_ENTRY();
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    unsigned wa[DOT_K], wb[DOT_K];
    dt_load(wa, a, t);
    dt_load(wb, b, t);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < DOT_K; j++) {
      s = fmaf(dt_h2f((unsigned short)(wa[j] & 0xffffu)), dt_h2f((unsigned short)(wb[j] & 0xffffu)), s);
      s = fmaf(dt_h2f((unsigned short)(wa[j] >> 16)), dt_h2f((unsigned short)(wb[j] >> 16)), s);
    }
    out[t] = out[t] + s;
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_dot_bf16)
extern "C" __global__ void dot_bf16(float* out, const unsigned* a, const unsigned* b, unsigned n) {
  OST_ENTRY();
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    unsigned wa[DOT_K], wb[DOT_K];
    dt_load(wa, a, t);
    dt_load(wb, b, t);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < DOT_K; j++) {
      s = fmaf(__uint_as_float(wa[j] << 16), __uint_as_float(wb[j] << 16), s);
      s = fmaf(__uint_as_float(wa[j] & 0xffff0000u), __uint_as_float(wb[j] & 0xffff0000u), s);
    }
    out[t] = out[t] + s;
  }
  OST_EXIT();
}
#endif
