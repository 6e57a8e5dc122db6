// The quantized-GEMV family of the benchmark's kernel pack (`ostinato_bench::pack`): y[row] += W[row] . x
// for weights in block formats real engines use, activations quantized to int8 in blocks of 32 with an f16
// scale (q8_0-like), both dequantised in registers:
//   q8_0  32 int8 weights per block, one f16 scale d:                       w = d * q
//   q4_0  32 4-bit weights per block, one f16 scale d:                      w = d * (q - 8)
//   q4_k  256 4-bit weights per super-block, f16 d and dmin, per-32 6-bit scale s and min m:
//                                                                           w = d * s * q - dmin * m
//   q6_k  256 6-bit weights per super-block, f16 d, per-32 int8 scale s:   w = d * s * (q - 32)
// Layouts (u32 words, little-endian bytes): quants `wq` row-major by blocks of 32 (int8: 32 bytes; 4-bit:
// 16 bytes, byte i holding weight i in its low nibble and weight i + 16 in its high; 6-bit: the low 4 bits
// so, and after every row's nibbles, 8 bytes per block of the high 2 bits, byte i holding weight i + 8 c in
// bits 2c..2c+1); scales `ws` (q8_0, q4_0: one f16 per block, two per word; q4_k: per super-block d | dmin,
// 8 scale bytes, 8 min bytes; q6_k: per super-block d, 8 int8 scale bytes); activations `xq` (int8) and
// `xs` (f16 per block).
//
// A warp owns a row (blocks of 256 threads: 8 rows); lane l takes blocks l, l + 32, ... Per block the
// integer dot of quants and activations is exact (`__dp4a`); its float part is (d_w * d_x) * dot (the f16
// product is exact in f32), added to the lane's sum, the lanes then summed by a butterfly (16, 8, 4, 2, 1)
// and added into y[row]. Every float operation is written `__f*_rn` so that NVRTC contracts none: the
// host twins (`families::gemv`) compute the same operations in the same order. The WGSL twins (gemv_*.wgsl)
// do too, but a Vulkan driver may fuse a multiply and an add: the rows' check bounds that.
#include "ostinato.cuh"

#define GV_ROWS 8
#define FULL 0xffffffffu

__device__ __forceinline__ float gv_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
// The i-th f16 of an array of them, two per word.
__device__ __forceinline__ float gv_half(const unsigned* p, unsigned long long i) {
  unsigned w = p[i >> 1];
  return gv_h2f((unsigned short)((i & 1) ? (w >> 16) : (w & 0xffffu)));
}
__device__ __forceinline__ void gv_load4(unsigned (&w)[4], const unsigned* p) {
  uint4 a = *(const uint4*)p;
  w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
}
__device__ __forceinline__ void gv_load8(unsigned (&w)[8], const unsigned* p) {
  uint4 a = ((const uint4*)p)[0], b = ((const uint4*)p)[1];
  w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
  w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
}
// The sum of a block's 32 activations.
__device__ __forceinline__ int gv_xsum(const unsigned (&x)[8]) {
  int s = 0;
#pragma unroll
  for (int m = 0; m < 8; m++) s = __dp4a(0x01010101, (int)x[m], s);
  return s;
}
// The dot of a block's 4-bit quants (its 4 words) and activations.
__device__ __forceinline__ int gv_dot_q4(const unsigned (&w)[4], const unsigned (&x)[8]) {
  int s = 0;
#pragma unroll
  for (int m = 0; m < 4; m++) {
    s = __dp4a((int)(w[m] & 0x0f0f0f0fu), (int)x[m], s);
    s = __dp4a((int)((w[m] >> 4) & 0x0f0f0f0fu), (int)x[m + 4], s);
  }
  return s;
}
// The lanes' sums by the butterfly, added into y[row] by lane 0.
__device__ __forceinline__ void gv_finish(float* y, unsigned row, unsigned lane, float acc) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(FULL, acc, o));
  if (lane == 0) y[row] = __fadd_rn(y[row], acc);
}

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_gemv_q8_0)
extern "C" __global__ void gemv_q8_0(float* y, const unsigned* wq, const unsigned* ws, const unsigned* xq, const unsigned* xs, unsigned rows, unsigned k) {
  OST_ENTRY();
  unsigned row = blockIdx.x * GV_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31, nb = k / 32;
  if (row < rows) {
    float acc = 0.0f;
    for (unsigned j = lane; j < nb; j += 32) {
      unsigned long long b = (unsigned long long)row * nb + j;
      unsigned w[8], x[8];
      gv_load8(w, wq + b * 8);
      gv_load8(x, xq + j * 8);
      int dot = 0;
#pragma unroll
      for (int m = 0; m < 8; m++) dot = __dp4a((int)w[m], (int)x[m], dot);
      acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(gv_half(ws, b), gv_half(xs, j)), (float)dot));
    }
    gv_finish(y, row, lane, acc);
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_gemv_q4_0)
extern "C" __global__ void gemv_q4_0(float* y, const unsigned* wq, const unsigned* ws, const unsigned* xq, const unsigned* xs, unsigned rows, unsigned k) {
  OST_ENTRY();
  unsigned row = blockIdx.x * GV_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31, nb = k / 32;
  if (row < rows) {
    float acc = 0.0f;
    for (unsigned j = lane; j < nb; j += 32) {
      unsigned long long b = (unsigned long long)row * nb + j;
      unsigned w[4], x[8];
      gv_load4(w, wq + b * 4);
      gv_load8(x, xq + j * 8);
      int dot = gv_dot_q4(w, x) - 8 * gv_xsum(x);
      acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(gv_half(ws, b), gv_half(xs, j)), (float)dot));
    }
    gv_finish(y, row, lane, acc);
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_gemv_q4_k)
extern "C" __global__ void gemv_q4_k(float* y, const unsigned* wq, const unsigned* ws, const unsigned* xq, const unsigned* xs, unsigned rows, unsigned k) {
  OST_ENTRY();
  unsigned row = blockIdx.x * GV_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31, nb = k / 32, nsb = k / 256;
  if (row < rows) {
    float acc = 0.0f;
    for (unsigned j = lane; j < nb; j += 32) {
      unsigned long long b = (unsigned long long)row * nb + j;
      unsigned w[4], x[8];
      gv_load4(w, wq + b * 4);
      gv_load8(x, xq + j * 8);
      const unsigned* s = ws + ((unsigned long long)row * nsb + j / 8) * 5;
      unsigned sub = j % 8, shift = 8 * (sub % 4);
      int sc = (s[1 + sub / 4] >> shift) & 0xff, mn = (s[3 + sub / 4] >> shift) & 0xff;
      float dx = gv_half(xs, j);
      float d = gv_h2f((unsigned short)(s[0] & 0xffffu)), dmin = gv_h2f((unsigned short)(s[0] >> 16));
      float t = __fsub_rn(__fmul_rn(__fmul_rn(d, dx), (float)(sc * gv_dot_q4(w, x))), __fmul_rn(__fmul_rn(dmin, dx), (float)(mn * gv_xsum(x))));
      acc = __fadd_rn(acc, t);
    }
    gv_finish(y, row, lane, acc);
  }
  OST_EXIT();
}
#endif

#if defined(OST_BENCH_ALL) || defined(OST_BENCH_gemv_q6_k)
extern "C" __global__ void gemv_q6_k(float* y, const unsigned* wq, const unsigned* ws, const unsigned* xq, const unsigned* xs, unsigned rows, unsigned k) {
  OST_ENTRY();
  unsigned row = blockIdx.x * GV_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31, nb = k / 32, nsb = k / 256;
  if (row < rows) {
    float acc = 0.0f;
    const unsigned* qh = wq + (unsigned long long)rows * nb * 4;
    for (unsigned j = lane; j < nb; j += 32) {
      unsigned long long b = (unsigned long long)row * nb + j;
      unsigned lo[4], x[8];
      gv_load4(lo, wq + b * 4);
      gv_load8(x, xq + j * 8);
      unsigned hi0 = qh[b * 2], hi1 = qh[b * 2 + 1];
      int dot = 0;
#pragma unroll
      for (int a = 0; a < 8; a++) {
        unsigned q = a < 4 ? (lo[a] & 0x0f0f0f0fu) : ((lo[a - 4] >> 4) & 0x0f0f0f0fu);
        q |= (((a % 2) ? hi1 : hi0) >> (2 * (a / 2)) & 0x03030303u) << 4;
        dot = __dp4a((int)q, (int)x[a], dot);
      }
      dot -= 32 * gv_xsum(x);
      const unsigned* s = ws + ((unsigned long long)row * nsb + j / 8) * 3;
      unsigned sub = j % 8;
      int sc = (int)(s[1 + sub / 4] << (24 - 8 * (sub % 4))) >> 24;
      float d = gv_h2f((unsigned short)(s[0] & 0xffffu));
      acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(d, gv_half(xs, j)), (float)(sc * dot)));
    }
    gv_finish(y, row, lane, acc);
  }
  OST_EXIT();
}
#endif
