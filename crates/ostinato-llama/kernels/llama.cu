// Llama decode kernels (bf16 weights and KV cache, f32 activations and accumulation): the CUDA side of
// the `ostinato-llama` kernel pack, bound through a kernel reference that carries this source and
// llama_stream.cu after it (`ostinato_llama::pack`). OST_ENTRY / OST_EXIT come from Ostinato's kernel
// header; the host twins live in crates/ostinato-llama/src/host.rs with the same signatures and math
// (summation order differs).
//
// Before `griddepcontrol.wait` every kernel requests the bytes no node of the step writes: the small
// projections (QKV, O) load ALL their weights into registers (a warp owns its rows), attention the
// KV-cache rows of its share below the position (plain `ld.global`, which ptxas keeps above the wait, and
// `prefetch.global.L2`); the streaming projections (gate/up, down, LM head) issue bulk copies of their
// first tiles of weights into shared memory. Those are the certified pre-wait reads
// (crates/ostinato-cuda-code/src/ptx/); nothing before the wait writes global memory or takes a ticket.
//
// Shapes (checked by `LlamaConfig::validate`): hidden % 8 == 0 and <= 4096, ffn % 8 == 0 and <= 8192,
// head_dim 64 or 128, grouped-query groups of 1, 2, 3, 4 or 8 with group * head_dim <= 512,
// splits * group <= 128. Every kernel's shared memory is dynamic, sized by the step from the shape
// (`ostinato_llama::step`, the `*_smem` functions there mirror the layouts below).

#include "ostinato.cuh"

#define LL_THREADS 256
#define LL_WARPS (LL_THREADS / 32)
// Blocks per SM attention and the output projection must fit (registers).
#ifndef LL_MIN_BLOCKS
#define LL_MIN_BLOCKS 2
#endif
// Columns per row chunk: a lane loads 8 x 16 bytes of it, each load instruction 512 contiguous bytes.
#define LL_CHUNK 2048
#define LL_ATTN_UNROLL 8
// Most blocks per KV head in attention, and most partial records per KV head (splits x group).
#define LL_MAX_SPLITS 32
#define LL_MAX_RECS 128

typedef unsigned short ll_bf16;
#define LL_FULL 0xffffffffu

// Every kernel's dynamic shared memory (the launch declares its size).
extern __shared__ __align__(128) unsigned char ll_dyn[];

__device__ __forceinline__ float ll_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float ll_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// f32 -> bf16, round to nearest even (finite values; the host twin uses the same rounding).
__device__ __forceinline__ ll_bf16 ll_to_bf(float f) {
  unsigned u = __float_as_uint(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ll_bf16)(u >> 16);
}

// A plain 16-byte load for the pre-wait part: ptxas keeps weak loads above `griddepcontrol.wait`.
__device__ __forceinline__ uint4 ll_ld_early(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned ll_ld_early_u32(const void* p) {
  unsigned v;
  asm volatile("ld.global.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ll_ld_early_v2(const void* p) {
  uint2 v;
  asm volatile("ld.global.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ void ll_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

__device__ __forceinline__ float ll_dot8(uint4 w, const float* x) {
  float4 a = *(const float4*)x, b = *(const float4*)(x + 4);
  float s = ll_lo(w.x) * a.x;
  s = fmaf(ll_hi(w.x), a.y, s);
  s = fmaf(ll_lo(w.y), a.z, s);
  s = fmaf(ll_hi(w.y), a.w, s);
  s = fmaf(ll_lo(w.z), b.x, s);
  s = fmaf(ll_hi(w.z), b.y, s);
  s = fmaf(ll_lo(w.w), b.z, s);
  s = fmaf(ll_hi(w.w), b.w, s);
  return s;
}

__device__ __forceinline__ float ll_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LL_FULL, v, o);
  return v;
}

// A warp's row of k <= 256 J columns, loaded before the wait: lane's J loads at columns (j * 32 + lane) * 8
// (zeros past k).
template <int J>
__device__ __forceinline__ void ll_load_row(uint4 (&w)[J], const ll_bf16* row, unsigned k) {
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < J; j++) {
    unsigned c = (j * 32 + lane) * 8;
    w[j] = c < k ? ll_ld_early(row + c) : make_uint4(0, 0, 0, 0);
  }
}

// The lane's part of a row's dot product with xs (shared memory, zero-padded to 256 J columns).
template <int J>
__device__ __forceinline__ float ll_dot_row(const uint4 (&w)[J], const float* xs) {
  unsigned lane = threadIdx.x & 31;
  float a = 0.0f;
#pragma unroll
  for (int j = 0; j < J; j++) a += ll_dot8(w[j], xs + (j * 32 + lane) * 8);
  return a;
}

// ---- The input vector -----------------------------------------------------------------------------
// An RMS norm's weights for the first 2048 columns, the thread's float4 groups g = tid, tid + T, ...
// (loaded before the wait: no node writes them).
template <int T>
struct LlNormWeights {
  uint2 w[LL_CHUNK / 4 / T];
};
template <int T>
__device__ __forceinline__ LlNormWeights<T> ll_norm_weights(const ll_bf16* ln, unsigned k) {
  LlNormWeights<T> r;
#pragma unroll
  for (int g = 0; g < LL_CHUNK / 4 / T; g++) {
    unsigned i = (threadIdx.x + g * T) * 4;
    if (i < k) {
      asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(r.w[g].x), "=r"(r.w[g].y) : "l"(ln + i));
    } else {
      r.w[g] = make_uint2(0, 0);
    }
  }
  return r;
}

// One float4 group of the normed input: xs[i..i+4) = x ⊙ ln, returning its sum of squares.
__device__ __forceinline__ float ll_norm_group(float* xs, const float* x, unsigned i, unsigned k, uint2 l) {
  float4 v = i < k ? __ldcg((const float4*)(x + i)) : make_float4(0, 0, 0, 0);
  *(float4*)(xs + i) = make_float4(v.x * ll_lo(l.x), v.y * ll_hi(l.x), v.z * ll_lo(l.y), v.w * ll_hi(l.y));
  return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
}

// After the wait: xs = x ⊙ ln (k floats, zero-padded to whole passes of 2048) and the norm's scale
// rsqrt(mean(x²) + eps), which the caller applies to its dot products. The first 2048 columns' norm
// weights came before the wait; the rest (k > 2048) are read here. One barrier.
template <int T>
__device__ __forceinline__ float ll_norm_input(float* xs, float* red, const float* x, const ll_bf16* ln, unsigned k, const LlNormWeights<T>& lw, float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int g = 0; g < LL_CHUNK / 4 / T; g++) ss += ll_norm_group(xs, x, (threadIdx.x + g * T) * 4, k, lw.w[g]);
  for (unsigned i = LL_CHUNK + threadIdx.x * 4; i < (k + LL_CHUNK - 1) / LL_CHUNK * LL_CHUNK; i += T * 4)
    ss += ll_norm_group(xs, x, i, k, i < k ? __ldg((const uint2*)(ln + i)) : make_uint2(0, 0));
  ss = ll_warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < T / 32; w++) s += red[w];
  return rsqrtf(s / (float)k + eps);
}

// ---- The kernels --------------------------------------------------------------------------------------

// llama_embed(x, emb, token, hidden): x = emb[token[0]] as f32.
extern "C" __global__ void llama_embed(float* x, const ll_bf16* emb, const unsigned* token, unsigned hidden) {
  OST_ENTRY();
  unsigned long long row = (unsigned long long)token[0] * hidden;
  OST_GRID_STRIDE(i, hidden) { x[i] = __uint_as_float((unsigned)emb[row + i] << 16); }
  OST_EXIT();
}

// The QKV projection of one block: head blockIdx.y of the fused projection's heads (query heads, then
// K heads, then V heads), RoPE pairs j = blockIdx.x * W + warp (rows j and j + head_dim / 2 of the
// head). A row's first 2048 columns go to registers before the wait, the rest (hidden > 2048) into L2,
// read after it. Shared memory: xs (hidden floats in whole passes of 2048), then W floats of the
// norm's sums.
template <int W>
__device__ __forceinline__ void ll_qkv(float* qkv, const float* x, const ll_bf16* ln, const ll_bf16* wqkv, const float* rope_freq, unsigned pos,
                                       unsigned hidden, unsigned heads, unsigned kv_heads, unsigned head_dim, float eps) {
  constexpr int T = W * 32;
  float* xs = (float*)ll_dyn;
  float* red = xs + (hidden + LL_CHUNK - 1) / LL_CHUNK * LL_CHUNK;
  unsigned half = head_dim / 2, head = blockIdx.y, j = blockIdx.x * W + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  bool live = j < half;
  uint4 wa[8], wb[8];
  float freq = 0.0f;
  const ll_bf16* ra = wqkv + (unsigned long long)(head * head_dim + j) * hidden;
  const ll_bf16* rb = ra + (unsigned long long)half * hidden;
  if (live) {
    ll_load_row<8>(wa, ra, min(hidden, (unsigned)LL_CHUNK));
    ll_load_row<8>(wb, rb, min(hidden, (unsigned)LL_CHUNK));
    for (unsigned c = LL_CHUNK + lane * 64; c < hidden; c += 32 * 64) {  // the rows' tails, 128-byte lines
      ll_prefetch_l2(ra + c);
      ll_prefetch_l2(rb + c);
    }
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(freq) : "l"(rope_freq + j));
  }
  LlNormWeights<T> lw = ll_norm_weights<T>(ln, hidden);
  for (unsigned c = LL_CHUNK + threadIdx.x * 64; c < hidden; c += T * 64) ll_prefetch_l2(ln + c);
  OST_ENTRY();
  float scale = ll_norm_input<T>(xs, red, x, ln, hidden, lw, eps);
  if (live) {
    float a = ll_dot_row<8>(wa, xs), b = ll_dot_row<8>(wb, xs);
    for (unsigned c = LL_CHUNK + lane * 8; c < hidden; c += 256) {
      a += ll_dot8(__ldg((const uint4*)(ra + c)), xs + c);
      b += ll_dot8(__ldg((const uint4*)(rb + c)), xs + c);
    }
    a = ll_warp_sum(a) * scale;
    b = ll_warp_sum(b) * scale;
    if (lane == 0) {
      if (head < heads + kv_heads) {  // q and k heads rotate
        float s, c;
        sincosf((float)pos * freq, &s, &c);
        float ra = a * c - b * s, rb = b * c + a * s;
        a = ra;
        b = rb;
      }
      qkv[head * head_dim + j] = a;
      qkv[head * head_dim + j + half] = b;
    }
  }
}

// llama_qkv(qkv, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps): rmsnorm(x)·ln,
// then the fused q/k/v projection (wqkv: heads*hd + 2*kv_heads*hd rows), RoPE on q and k (the
// rotate-half pairing: dims j and j + hd/2 of a head, angle pos * rope_freq[j]); every row to `qkv`
// (f32, [heads + 2 kv_heads][hd]: the attention reads q there and appends the new K and V rows to the
// cache in bf16). Grid (hd / 2 / W, heads + 2 kv_heads), W = blockDim.x / 32 warps (4 or 8), one RoPE
// pair of rows per warp, requested before the wait.
extern "C" __global__ void __launch_bounds__(256) llama_qkv(float* qkv, const float* x, const ll_bf16* ln, const ll_bf16* wqkv, const float* rope_freq,
                                                           unsigned pos, unsigned hidden, unsigned heads, unsigned kv_heads, unsigned head_dim, float eps) {
  if (blockDim.x == 256) ll_qkv<8>(qkv, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps);
  else ll_qkv<4>(qkv, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps);
  OST_EXIT();
}

// A cache row's share of one lane: D = HD / 32 bf16 dims, as one (HD 64) or two (HD 128) words.
template <int HD>
struct LlRow;
template <>
struct LlRow<64> {
  typedef unsigned T;
  static __device__ __forceinline__ T early(const T* p) { return ll_ld_early_u32(p); }
  static __device__ __forceinline__ T zero() { return 0u; }
  static __device__ __forceinline__ void unpack(T r, float (&f)[2]) {
    f[0] = ll_lo(r);
    f[1] = ll_hi(r);
  }
  // The lane's dims of a new row (f32), rounded to bf16 as the cache keeps them.
  static __device__ __forceinline__ T pack(const float* v) {
    float2 a = __ldcg((const float2*)v);
    return (unsigned)ll_to_bf(a.x) | ((unsigned)ll_to_bf(a.y) << 16);
  }
};
template <>
struct LlRow<128> {
  typedef uint2 T;
  static __device__ __forceinline__ T early(const T* p) { return ll_ld_early_v2(p); }
  static __device__ __forceinline__ T zero() { return make_uint2(0, 0); }
  static __device__ __forceinline__ void unpack(T r, float (&f)[4]) {
    f[0] = ll_lo(r.x);
    f[1] = ll_hi(r.x);
    f[2] = ll_lo(r.y);
    f[3] = ll_hi(r.y);
  }
  static __device__ __forceinline__ T pack(const float* v) {
    float4 a = __ldcg((const float4*)v);
    return make_uint2((unsigned)ll_to_bf(a.x) | ((unsigned)ll_to_bf(a.y) << 16), (unsigned)ll_to_bf(a.z) | ((unsigned)ll_to_bf(a.w) << 16));
  }
};

// D consecutive floats as one vector load (L2) or store.
template <int D>
__device__ __forceinline__ void ll_ld_vec(const float* p, float (&v)[D]) {
  if constexpr (D == 2) {
    float2 a = __ldcg((const float2*)p);
    v[0] = a.x;
    v[1] = a.y;
  } else {
    float4 a = __ldcg((const float4*)p);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
  }
}
template <int D>
__device__ __forceinline__ void ll_st_vec(float* p, const float (&v)[D]) {
  if constexpr (D == 2) {
    *(float2*)p = make_float2(v[0], v[1]);
  } else {
    *(float4*)p = make_float4(v[0], v[1], v[2], v[3]);
  }
}

// 1 / sqrt(head_dim) as f32 (the host twin uses the same constants): exact for 64.
template <int HD>
__device__ __forceinline__ float ll_attn_scale() {
  return HD == 64 ? 0.125f : 0.08838834764831845f;
}

// Attention of the G query heads of KV head blockIdx.y over this block's share of rows 0..=pos; writes
// the block's softmax partial (per head: running max, sum, two pads, HD unnormalised weighted sums:
// REC = 4 + HD floats) for llama_o to merge. Each warp takes every 8th row; a lane holds D = HD / 32
// dims of q, of the K and V rows and of the output, so a row is one coalesced load; eight rows' loads in
// flight per warp, the first eight requested before the wait (cache rows below pos: no node of the step
// writes them). Row pos comes from qkv, rounded to bf16, and the block that owns it appends it to the
// cache. Shared memory (floats): per warp and head the max and the sum, then per warp, head and lane
// the D sums (ostinato_llama::step's attn_smem).
template <int G, int HD>
__device__ __forceinline__ void ll_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* qkv, unsigned pos, unsigned heads, unsigned kv_heads,
                                        unsigned max_seq, unsigned splits) {
  constexpr int D = HD / 32, REC = 4 + HD;
  typedef LlRow<HD> R;
  typedef typename R::T Row;
  float* wm = (float*)ll_dyn;       // [LL_WARPS][G]
  float* wl = wm + LL_WARPS * G;    // [LL_WARPS][G]
  float* wacc = wl + LL_WARPS * G;  // [LL_WARPS][G][32][D]
  const float NEG = -3.402823466e38f;
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned n = min(pos, max_seq - 1) + 1, fresh = pos < max_seq ? pos : 0xffffffffu;
  // Splits that get rows: one per 64 rows, at least min(8, splits) (measured: 16-row shares at position
  // 128, 64 at 1,024, 128 at 4,096 were the fastest); the others write empty partials.
  unsigned live = min(splits, max(min(8u, splits), (n + 63) / 64));
  unsigned chunk = (n + live - 1) / live;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  Row* kh = (Row*)(kcache + (unsigned long long)h * max_seq * HD);
  Row* vh = (Row*)(vcache + (unsigned long long)h * max_seq * HD);
  Row kw[LL_ATTN_UNROLL], vw[LL_ATTN_UNROLL];
#pragma unroll
  for (int u = 0; u < LL_ATTN_UNROLL; u++) {
    unsigned tu = t0 + warp + u * LL_WARPS;
    bool cached = tu < t1 && tu != fresh;
    kw[u] = cached ? R::early(kh + (unsigned long long)tu * 32 + lane) : R::zero();
    vw[u] = cached ? R::early(vh + (unsigned long long)tu * 32 + lane) : R::zero();
  }
  // The later rows into L2: HD / 64 lines of 128 bytes per row, of K and of V.
  constexpr unsigned LINES = HD / 64;
  unsigned first = t0 + LL_WARPS * LL_ATTN_UNROLL;
  for (unsigned i = threadIdx.x; first + i / (2 * LINES) < t1; i += LL_THREADS) {
    unsigned t = first + i / (2 * LINES);
    ll_prefetch_l2((const char*)((((i / LINES) & 1) ? vh : kh) + (unsigned long long)t * 32) + (i % LINES) * 128);
  }
  OST_ENTRY();
  bool owns_fresh = fresh >= t0 && fresh < t1;
  Row knew = R::zero(), vnew = R::zero();
  if (owns_fresh) {
    knew = R::pack(qkv + (heads + h) * HD + lane * D);
    vnew = R::pack(qkv + (heads + kv_heads + h) * HD + lane * D);
    if (warp == 0) {
      kh[(unsigned long long)fresh * 32 + lane] = knew;
      vh[(unsigned long long)fresh * 32 + lane] = vnew;
    }
  }
  float qv[G][D];
#pragma unroll
  for (int g = 0; g < G; g++) {
    ll_ld_vec<D>(qkv + (h * G + g) * HD + lane * D, qv[g]);
#pragma unroll
    for (int d = 0; d < D; d++) qv[g][d] *= ll_attn_scale<HD>();
  }
  float m[G], l[G], a[G][D];
#pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = NEG;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) a[g][d] = 0.0f;
  }
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LL_ATTN_UNROLL) {
    if (t != t0 + warp) {  // later batches: loaded here (the first came before the wait)
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        bool cached = tu < t1 && tu != fresh;
        kw[u] = cached ? kh[(unsigned long long)tu * 32 + lane] : R::zero();
        vw[u] = cached ? vh[(unsigned long long)tu * 32 + lane] : R::zero();
      }
    }
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      if (tu >= t1) break;
      float k[D], v[D];
      R::unpack(tu == fresh ? knew : kw[u], k);
      R::unpack(tu == fresh ? vnew : vw[u], v);
      float sc[G];
#pragma unroll
      for (int g = 0; g < G; g++) {
        sc[g] = qv[g][D - 1] * k[D - 1];
#pragma unroll
        for (int d = D - 2; d >= 0; d--) sc[g] = fmaf(qv[g][d], k[d], sc[g]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < G; g++) sc[g] += __shfl_xor_sync(LL_FULL, sc[g], o);
      }
#pragma unroll
      for (int g = 0; g < G; g++) {
        float mn = fmaxf(m[g], sc[g]);
        float corr = expf(m[g] - mn), p = expf(sc[g] - mn);
        l[g] = fmaf(l[g], corr, p);
#pragma unroll
        for (int d = 0; d < D; d++) a[g][d] = fmaf(a[g][d], corr, p * v[d]);
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
    ll_st_vec<D>(wacc + ((warp * G + g) * 32 + lane) * D, a[g]);
    if (lane == 0) {
      wm[warp * G + g] = m[g];
      wl[warp * G + g] = l[g];
    }
  }
  __syncthreads();
  // The block's partial per head, merged over warps: [m, l, 0, 0, sums...] at ((h * splits + s) * G + g).
  float* mine = part + ((unsigned long long)h * splits + s) * G * REC;
  static_assert(G * 32 <= LL_THREADS, "a thread per (query head, lane) of the group");
  if (threadIdx.x < G * 32) {
    unsigned g = threadIdx.x / 32, ls = threadIdx.x % 32;
    float mx = NEG;
    for (int w = 0; w < LL_WARPS; w++) mx = fmaxf(mx, wm[w * G + g]);
    float lsum = 0.0f, o[D];
#pragma unroll
    for (int d = 0; d < D; d++) o[d] = 0.0f;
    for (int w = 0; w < LL_WARPS; w++) {
      float sc = wl[w * G + g] > 0.0f ? expf(wm[w * G + g] - mx) : 0.0f;
      lsum = fmaf(wl[w * G + g], sc, lsum);
      const float* acc = wacc + ((w * G + g) * 32 + ls) * D;
#pragma unroll
      for (int d = 0; d < D; d++) o[d] = fmaf(acc[d], sc, o[d]);
    }
    ll_st_vec<D>(mine + g * REC + 4 + D * ls, o);
    if (ls == 0) *(float4*)(mine + g * REC) = make_float4(mx, lsum, 0.0f, 0.0f);
  }
}

// llama_attn(part, kcache, vcache, qkv, pos, heads, kv_heads, max_seq, splits, head_dim): attention of
// the query heads over cache rows 0..=pos (grouped-query with heads / kv_heads = 1, 2, 3, 4 or 8 query
// heads per KV head; cache layout [kv_head][max_seq][head_dim], bf16). Grid (splits, kv_heads): block
// (s, h) takes an equal share of the rows for every query head of KV head h, so each KV row is read
// once, and writes its softmax partial to `part` (llama_o merges them). Row pos is qkv's (appended to
// the cache here, when pos < max_seq).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* qkv,
                                                                                unsigned pos, unsigned heads, unsigned kv_heads, unsigned max_seq,
                                                                                unsigned splits, unsigned head_dim) {
#define LL_ATTN(G, HD) ll_attn<G, HD>(part, kcache, vcache, qkv, pos, heads, kv_heads, max_seq, splits)
  bool wide = head_dim == 128;
  switch (heads / kv_heads) {
    case 1: if (wide) LL_ATTN(1, 128); else LL_ATTN(1, 64); break;
    case 2: if (wide) LL_ATTN(2, 128); else LL_ATTN(2, 64); break;
    case 3: if (wide) LL_ATTN(3, 128); else LL_ATTN(3, 64); break;
    case 4: if (wide) LL_ATTN(4, 128); else LL_ATTN(4, 64); break;
    case 8: LL_ATTN(8, 64); break;
    default: OST_ENTRY(); break;  // no other group (LlamaConfig::validate refuses it): the wait, nothing else
  }
#undef LL_ATTN
  OST_EXIT();
}

// The output projection of KV head h's query heads (G of them: columns h*G*HD ..) for 64 rows from
// blockIdx.x * 64, after merging that head's attention partials; adds into x (one add per row and KV
// head). A row of the head's columns is PER_ROW = G HD / 8 16-byte pieces, LPR lanes share it (the
// largest power of two dividing PER_ROW, at most 32), S pieces each; a warp owns 8 rows, 32 / LPR at a
// time; all loaded before the wait. Shared memory (floats): the head's splits * G partial records, then
// its merged attention output (G HD).
template <int G, int HD>
__device__ __forceinline__ void ll_o(float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned splits) {
  constexpr int REC = 4 + HD, PER_ROW = G * HD / 8, LOW = PER_ROW & -PER_ROW, LPR = LOW < 32 ? LOW : 32, S = PER_ROW / LPR, RPP = 32 / LPR,
                PASSES = 8 / RPP;
  float* recs = (float*)ll_dyn;
  float* a = recs + splits * G * REC;
  unsigned h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = heads * HD, sub = lane / LPR, piece = lane % LPR;
  unsigned r0 = blockIdx.x * 64 + warp * 8 + sub;
  uint4 w[PASSES][S];
#pragma unroll
  for (int j = 0; j < PASSES; j++) {
    unsigned r = r0 + j * RPP;
#pragma unroll
    for (int s = 0; s < S; s++)
      w[j][s] = r < m ? ll_ld_early(wo + (unsigned long long)r * k + h * G * HD + (piece + LPR * s) * 8) : make_uint4(0, 0, 0, 0);
  }
  OST_ENTRY();
  // This head's records (splits * G of REC floats), one round trip.
  const float4* src = (const float4*)(part + (unsigned long long)h * splits * G * REC);
  unsigned n4 = splits * G * (REC / 4);
#pragma unroll 4
  for (unsigned i = threadIdx.x; i < n4; i += LL_THREADS) ((float4*)recs)[i] = __ldcg(src + i);
  __syncthreads();
  for (unsigned i = threadIdx.x; i < G * HD; i += LL_THREADS) {
    unsigned g = i / HD, d = i % HD;
    float mx = -3.402823466e38f;
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * REC;
      if (r[1] > 0.0f) mx = fmaxf(mx, r[0]);
    }
    float lsum = 0.0f, o = 0.0f;
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * REC;
      float sc = r[1] > 0.0f ? expf(r[0] - mx) : 0.0f;
      lsum = fmaf(r[1], sc, lsum);
      o = fmaf(r[4 + d], sc, o);
    }
    a[i] = o / lsum;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PASSES; j++) {
    unsigned r = r0 + j * RPP;
    float v = ll_dot8(w[j][0], a + piece * 8);
#pragma unroll
    for (int s = 1; s < S; s++) v += ll_dot8(w[j][s], a + (piece + LPR * s) * 8);
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(LL_FULL, v, o);
    if (piece == 0 && r < m) atomicAdd(x + r, v);
  }
}

// llama_o(x, part, wo, m, heads, kv_heads, splits, head_dim): merges the attention partials of every
// query head and adds Wo·attn to x (the output projection and the residual; Wo is m x heads*head_dim).
// Grid (ceil(m / 64), kv_heads): block (b, h) takes 64 rows of KV head h's columns; x gets one add per
// row per KV head (float atomics: the order of the kv_heads adds varies).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_o(float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads,
                                                                             unsigned kv_heads, unsigned splits, unsigned head_dim) {
#define LL_O(G, HD) ll_o<G, HD>(x, part, wo, m, heads, splits)
  bool wide = head_dim == 128;
  switch (heads / kv_heads) {
    case 1: if (wide) LL_O(1, 128); else LL_O(1, 64); break;
    case 2: if (wide) LL_O(2, 128); else LL_O(2, 64); break;
    case 3: if (wide) LL_O(3, 128); else LL_O(3, 64); break;
    case 4: if (wide) LL_O(4, 128); else LL_O(4, 64); break;
    case 8: LL_O(8, 64); break;
    default: OST_ENTRY(); break;  // no other group (LlamaConfig::validate refuses it): the wait, nothing else
  }
#undef LL_O
  OST_EXIT();
}
