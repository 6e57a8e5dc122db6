// Llama decode kernels (bf16 weights and KV cache, f32 activations and accumulation): the CUDA side of
// the `ostinato-llama` kernel pack, bound through a kernel reference that carries this source
// (`ostinato_llama::pack`). OST_ENTRY / OST_EXIT come from Ostinato's kernel header; the host twins live
// in crates/ostinato-llama/src/host.rs with the same signatures and math (summation order differs).
//
// Every projection streams its weight rows warp by warp: warp w of the grid takes rows (or row pairs)
// w, w + W, ... (W: the grid's warps) in chunks of 2048 columns — a lane loads 8 × 16 bytes of a chunk,
// each load instruction 512 contiguous bytes of the row — and issues the next chunk's loads before it
// consumes the current one, so no block-wide step stands between loads. The input vector sits in shared
// memory (RMS-normalised there where a norm precedes the projection). Before `griddepcontrol.wait` each
// warp loads its first chunk into registers and asks L2 for more of its rows (`prefetch.global.L2`):
// the certified pre-wait prefetch (crates/ostinato-cuda/src/ptx.rs), safe because no node of the step
// writes weights. Preconditions (checked by the graph builder): k % 8 == 0, k <= the kernel's KMAX.

#include "ostinato.cuh"

#define LL_THREADS 256
#define LL_WARPS (LL_THREADS / 32)
// Blocks per SM every kernel must fit (registers): room for the next kernel's blocks beside this one's.
#ifndef LL_MIN_BLOCKS
#define LL_MIN_BLOCKS 2
#endif
#define LL_CHUNK 2048
// L2 prefetch before the wait, per warp, past its first chunk.
#define LL_PREFETCH_BYTES 8192

typedef unsigned short ll_bf16;

__device__ __forceinline__ float ll_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float ll_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ float ll_bf(ll_bf16 b) { return __uint_as_float((unsigned)b << 16); }

// f32 -> bf16, round to nearest even (finite values; the host twin uses the same rounding).
__device__ __forceinline__ ll_bf16 ll_to_bf(float f) {
  unsigned u = __float_as_uint(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ll_bf16)(u >> 16);
}

// A streaming 16-byte load of read-only data: no L1 allocation, 256-byte L2 sector promotion.
__device__ __forceinline__ uint4 ll_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

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
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum (every thread gets it). `red` holds LL_WARPS floats.
__device__ __forceinline__ float ll_block_sum(float v, float* red) {
  v = ll_warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < LL_WARPS; w++) s += red[w];
  return s;
}

// A warp's chunk of a row: lane's 8 loads at columns base + (j * 32 + lane) * 8 (zeros past k).
__device__ __forceinline__ void ll_load_chunk(uint4 (&w)[8], const ll_bf16* row, unsigned base, unsigned k) {
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    unsigned c = base + (j * 32 + lane) * 8;
    w[j] = c < k ? ll_stream(row + c) : make_uint4(0, 0, 0, 0);
  }
}

// The lane's part of a chunk's dot product with xs (shared memory, zero-padded to whole chunks).
__device__ __forceinline__ float ll_dot_chunk(const uint4 (&w)[8], const float* xs, unsigned base) {
  unsigned lane = threadIdx.x & 31;
  float a = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; j++) a += ll_dot8(w[j], xs + base + (j * 32 + lane) * 8);
  return a;
}

// Loads v (k floats) into xs, zero-padded to whole chunks; with `ln`, RMS-normalised:
// xs = v * rsqrt(mean(v^2) + eps) * ln. Ends with a barrier.
__device__ __forceinline__ void ll_input(float* xs, const float* v, unsigned k, const ll_bf16* ln, float eps, float* red) {
  unsigned padded = (k + LL_CHUNK - 1) / LL_CHUNK * LL_CHUNK;
  float ss = 0.0f;
  for (unsigned j = threadIdx.x * 4; j < padded; j += LL_THREADS * 4) {
    float4 a = j < k ? *(const float4*)(v + j) : make_float4(0, 0, 0, 0);
    *(float4*)(xs + j) = a;
    ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  }
  if (ln == nullptr) {
    __syncthreads();
    return;
  }
  float scale = rsqrtf(ll_block_sum(ss, red) / (float)k + eps);
  for (unsigned j = threadIdx.x; j < k; j += LL_THREADS) xs[j] = xs[j] * scale * ll_bf(ln[j]);
  __syncthreads();
}

// Before the wait: the warp's first chunk into `cur`, and up to LL_PREFETCH_BYTES more of its rows
// into L2. `units` units of U rows each; rows(u, i) is row i of unit u.
template <int U, class Rows>
__device__ __forceinline__ void ll_prefetch(uint4 (&cur)[8], const ll_bf16* W, unsigned k, unsigned units, Rows rows) {
  unsigned tw = gridDim.x * LL_WARPS, unit = blockIdx.x * LL_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (unit >= units) return;
  ll_load_chunk(cur, W + (unsigned long long)rows(unit, 0) * k, 0, k);
  // The bytes after the first chunk, row after row of this warp's units, 128-byte lines.
  unsigned row_bytes = k * 2, first = min(row_bytes, (unsigned)LL_CHUNK * 2), budget = LL_PREFETCH_BYTES;
  for (unsigned u = unit; u < units && budget > 0; u += tw) {
#pragma unroll
    for (int i = 0; i < U; i++) {
      const char* r = (const char*)(W + (unsigned long long)rows(u, i) * k);
      unsigned from = (u == unit && i == 0) ? first : 0;
      unsigned take = min(row_bytes - from, budget);
      for (unsigned off = from + lane * 128; off < from + take; off += 32 * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(r + off));
      budget -= take;
      if (budget == 0) break;
    }
  }
}

// After the wait: the warp streams its units; `epi(u, acc)` gets unit u's U dot products (every lane).
// `cur` holds the first chunk (ll_prefetch).
template <int U, class Rows, class Epi>
__device__ __forceinline__ void ll_stream_rows(uint4 (&cur)[8], const ll_bf16* W, unsigned k, const float* xs, unsigned units, Rows rows, Epi epi) {
  unsigned tw = gridDim.x * LL_WARPS, unit = blockIdx.x * LL_WARPS + (threadIdx.x >> 5);
  unsigned kcn = (k + LL_CHUNK - 1) / LL_CHUNK, kc = 0;
  int i = 0;
  float acc[U];
#pragma unroll
  for (int r = 0; r < U; r++) acc[r] = 0.0f;
  while (unit < units) {
    unsigned nu = unit, nk = kc;
    int ni = i + 1;
    if (ni == U) {
      ni = 0;
      if (++nk == kcn) {
        nk = 0;
        nu += tw;
      }
    }
    uint4 nxt[8];
    if (nu < units) ll_load_chunk(nxt, W + (unsigned long long)rows(nu, ni) * k, nk * LL_CHUNK, k);
    float d = ll_dot_chunk(cur, xs, kc * LL_CHUNK);
#pragma unroll
    for (int r = 0; r < U; r++) acc[r] += r == i ? d : 0.0f;
    if (nu != unit) {
#pragma unroll
      for (int r = 0; r < U; r++) acc[r] = ll_warp_sum(acc[r]);
      epi(unit, acc);
#pragma unroll
      for (int r = 0; r < U; r++) acc[r] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) cur[j] = nxt[j];
    unit = nu;
    kc = nk;
    i = ni;
  }
}

// llama_embed(x, emb, token, hidden): x = emb[token[0]] as f32.
extern "C" __global__ void llama_embed(float* x, const ll_bf16* emb, const unsigned* token, unsigned hidden) {
  OST_ENTRY();
  unsigned long long row = (unsigned long long)token[0] * hidden;
  OST_GRID_STRIDE(i, hidden) { x[i] = ll_bf(emb[row + i]); }
  OST_EXIT();
}

// llama_qkv(q, kcache, vcache, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, max_seq, eps):
// rmsnorm(x)·ln, then the fused q/k/v projection (wqkv: heads*hd + 2*kv_heads*hd rows), RoPE on q and k
// (the rotate-half pairing: dims j and j + hd/2 of a head, angle pos * rope_freq[j]), q to `q` (f32),
// k and v appended to the caches at `pos` (bf16; layout [kv_head][max_seq][hd]). A unit is one pair.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_qkv(float* q, ll_bf16* kcache, ll_bf16* vcache, const float* x, const ll_bf16* ln,
                                                                 const ll_bf16* wqkv, const float* rope_freq, unsigned pos, unsigned hidden,
                                                                 unsigned heads, unsigned kv_heads, unsigned head_dim, unsigned max_seq, float eps) {
  __shared__ __align__(16) float xs[2048];
  __shared__ float red[LL_WARPS];
  unsigned half = head_dim / 2, pairs = (heads + 2 * kv_heads) * half;
  auto rows = [=](unsigned p, int i) { return (p / half) * head_dim + p % half + i * half; };
  uint4 cur[8];
  ll_prefetch<2>(cur, wqkv, hidden, pairs, rows);
  OST_ENTRY();
  ll_input(xs, x, hidden, ln, eps, red);
  auto epi = [&](unsigned p, const float (&acc)[2]) {
    if ((threadIdx.x & 31) != 0) return;
    unsigned head = p / half, j = p % half;
    float a = acc[0], b = acc[1];
    if (head < heads + kv_heads) {  // q and k heads rotate
      float s, c;
      sincosf((float)pos * rope_freq[j], &s, &c);
      float ra = a * c - b * s, rb = b * c + a * s;
      a = ra;
      b = rb;
    }
    if (head < heads) {
      q[head * head_dim + j] = a;
      q[head * head_dim + j + half] = b;
    } else if (pos < max_seq) {
      bool is_k = head < heads + kv_heads;
      unsigned kvh = is_k ? head - heads : head - heads - kv_heads;
      ll_bf16* cache = is_k ? kcache : vcache;
      unsigned long long at = ((unsigned long long)kvh * max_seq + pos) * head_dim + j;
      cache[at] = ll_to_bf(a);
      cache[at + half] = ll_to_bf(b);
    }
  };
  ll_stream_rows<2>(cur, wqkv, hidden, xs, pairs, rows, epi);
  OST_EXIT();
}

// Projection + residual: x[row] += W[row]·v.
template <int KMAX>
__device__ __forceinline__ void ll_gemv_residual(float* x, const ll_bf16* W, const float* v, unsigned m, unsigned k) {
  __shared__ __align__(16) float xs[KMAX];
  auto rows = [](unsigned r, int) { return r; };
  uint4 cur[8];
  ll_prefetch<1>(cur, W, k, m, rows);
  OST_ENTRY();
  ll_input(xs, v, k, nullptr, 0.0f, nullptr);
  auto epi = [&](unsigned r, const float (&acc)[1]) {
    if ((threadIdx.x & 31) == 0) x[r] += acc[0];
  };
  ll_stream_rows<1>(cur, W, k, xs, m, rows, epi);
  OST_EXIT();
}

// llama_o(x, wo, attn, m, k): x += Wo·attn (attention output projection + residual; k up to 2048).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_o(float* x, const ll_bf16* wo, const float* attn, unsigned m, unsigned k) {
  ll_gemv_residual<2048>(x, wo, attn, m, k);
}

// llama_down(x, wd, act, m, k): x += Wd·act (FFN down projection + residual; k up to 8192).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_down(float* x, const ll_bf16* wd, const float* act, unsigned m, unsigned k) {
  ll_gemv_residual<8192>(x, wd, act, m, k);
}

// llama_ffn_in(act, x, ln, wgu, ffn, hidden, eps): rmsnorm(x)·ln, gate = Wg·xn, up = Wu·xn (wgu: the ffn
// gate rows, then the ffn up rows), act = silu(gate) * up. A unit is one (gate, up) pair.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_ffn_in(float* act, const float* x, const ll_bf16* ln, const ll_bf16* wgu, unsigned ffn,
                                                                    unsigned hidden, float eps) {
  __shared__ __align__(16) float xs[2048];
  __shared__ float red[LL_WARPS];
  auto rows = [=](unsigned r, int i) { return r + i * ffn; };
  uint4 cur[8];
  ll_prefetch<2>(cur, wgu, hidden, ffn, rows);
  OST_ENTRY();
  ll_input(xs, x, hidden, ln, eps, red);
  auto epi = [&](unsigned r, const float (&acc)[2]) {
    if ((threadIdx.x & 31) == 0) act[r] = acc[0] / (1.0f + expf(-acc[0])) * acc[1];
  };
  ll_stream_rows<2>(cur, wgu, hidden, xs, ffn, rows, epi);
  OST_EXIT();
}

// llama_lm_head(logits, part, counter, token, x, ln, emb, vocab, hidden, eps): final rmsnorm, logits =
// emb·xn (tied embeddings), and the greedy token: each block writes the best (value, index) of its rows
// to `part`; the last block to finish (counted in counter[0], which it resets) reduces them into
// token[0]. Ties go to the lower index.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_lm_head(float* logits, float* part, unsigned* counter, unsigned* token, const float* x,
                                                                     const ll_bf16* ln, const ll_bf16* emb, unsigned vocab, unsigned hidden, float eps) {
  __shared__ __align__(16) float xs[2048];
  __shared__ float red[LL_WARPS];
  __shared__ float best_v[LL_THREADS];
  __shared__ unsigned best_i[LL_THREADS];
  __shared__ bool last;
  const unsigned NONE = 0xffffffffu;
  auto rows = [](unsigned r, int) { return r; };
  uint4 cur[8];
  ll_prefetch<1>(cur, emb, hidden, vocab, rows);
  OST_ENTRY();
  ll_input(xs, x, hidden, ln, eps, red);
  float bv = -3.402823466e38f;
  unsigned bi = NONE;
  auto epi = [&](unsigned r, const float (&acc)[1]) {
    if ((threadIdx.x & 31) == 0) logits[r] = acc[0];
    if (bi == NONE || acc[0] > bv) {  // a warp's rows ascend: the first maximum stays
      bv = acc[0];
      bi = r;
    }
  };
  ll_stream_rows<1>(cur, emb, hidden, xs, vocab, rows, epi);
  // The block's best, then the grid's (ties to the lower index).
  auto better = [](float v, unsigned i, float bv, unsigned bi) { return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi)); };
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < LL_WARPS; w++) {
      if (better(best_v[w * 32], best_i[w * 32], bv, bi)) { bv = best_v[w * 32]; bi = best_i[w * 32]; }
    }
    part[2 * blockIdx.x] = bv;
    part[2 * blockIdx.x + 1] = __uint_as_float(bi);
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {
    __threadfence();
    bv = -3.402823466e38f;
    bi = NONE;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += LL_THREADS) {
      float v = __ldcg(part + 2 * b);
      unsigned i = __float_as_uint(__ldcg(part + 2 * b + 1));
      if (better(v, i, bv, bi)) { bv = v; bi = i; }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned s = LL_THREADS / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s && better(best_v[threadIdx.x + s], best_i[threadIdx.x + s], best_v[threadIdx.x], best_i[threadIdx.x])) {
        best_v[threadIdx.x] = best_v[threadIdx.x + s];
        best_i[threadIdx.x] = best_i[threadIdx.x + s];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      token[0] = best_i[0];
      counter[0] = 0;
    }
  }
  OST_EXIT();
}

#define LL_HD 64
#define LL_ATTN_UNROLL 8
// Most blocks per KV head (the graph builder checks attn_splits).
#define LL_MAX_SPLITS 32
// Attention of the G query heads of KV head blockIdx.y over this block's share of rows 0..=pos (see
// llama_attn). Each warp takes every 8th row; a lane holds dims (2 lane, 2 lane + 1) of q, of the K and
// V rows and of the output, so a row is one coalesced 128-byte load; softmax runs online (running max,
// sum and weighted sum per head), eight rows' loads in flight per warp.
template <int G>
__device__ __forceinline__ void ll_attn(float* out, float* part, unsigned* counter, const float* q, const ll_bf16* kcache, const ll_bf16* vcache,
                                        unsigned pos, unsigned max_seq, unsigned splits) {
  __shared__ float wm[LL_WARPS][G], wl[LL_WARPS][G];
  __shared__ float2 wacc[LL_WARPS][G][32];
  __shared__ float cm[LL_MAX_SPLITS][G], cl[LL_MAX_SPLITS][G];
  __shared__ bool last;
  const float NEG = -3.402823466e38f;
  OST_ENTRY();
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned n = min(pos, max_seq - 1) + 1;
  unsigned chunk = (n + splits - 1) / splits;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  float2 qv[G];
#pragma unroll
  for (int g = 0; g < G; g++) {
    float2 v = ((const float2*)(q + (h * G + g) * LL_HD))[lane];
    qv[g] = make_float2(v.x * 0.125f, v.y * 0.125f);  // 1 / sqrt(64), exact
  }
  const unsigned* kh = (const unsigned*)(kcache + (unsigned long long)h * max_seq * LL_HD);
  const unsigned* vh = (const unsigned*)(vcache + (unsigned long long)h * max_seq * LL_HD);
  float m[G], l[G], a0[G], a1[G];
#pragma unroll
  for (int g = 0; g < G; g++) { m[g] = NEG; l[g] = 0.0f; a0[g] = 0.0f; a1[g] = 0.0f; }
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LL_ATTN_UNROLL) {
    unsigned kw[LL_ATTN_UNROLL], vw[LL_ATTN_UNROLL];
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      kw[u] = tu < t1 ? kh[(unsigned long long)tu * 32 + lane] : 0u;
      vw[u] = tu < t1 ? vh[(unsigned long long)tu * 32 + lane] : 0u;
    }
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      if (t + u * LL_WARPS >= t1) break;
      float k0 = ll_lo(kw[u]), k1 = ll_hi(kw[u]), v0 = ll_lo(vw[u]), v1 = ll_hi(vw[u]);
      float sc[G];
#pragma unroll
      for (int g = 0; g < G; g++) sc[g] = fmaf(qv[g].x, k0, qv[g].y * k1);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < G; g++) sc[g] += __shfl_xor_sync(0xffffffffu, sc[g], o);
      }
#pragma unroll
      for (int g = 0; g < G; g++) {
        float mn = fmaxf(m[g], sc[g]);
        float corr = expf(m[g] - mn), p = expf(sc[g] - mn);
        l[g] = fmaf(l[g], corr, p);
        a0[g] = fmaf(a0[g], corr, p * v0);
        a1[g] = fmaf(a1[g], corr, p * v1);
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
    wacc[warp][g][lane] = make_float2(a0[g], a1[g]);
    if (lane == 0) { wm[warp][g] = m[g]; wl[warp][g] = l[g]; }
  }
  __syncthreads();
  // The block's partial per head: max, sum and the (unnormalised) weighted sums, merged over warps.
  // Layout per (h, s): G * (2 + 64) floats.
  float* mine = part + ((unsigned long long)h * splits + s) * G * (2 + LL_HD);
  for (unsigned i = threadIdx.x; i < G * (LL_HD / 2); i += LL_THREADS) {
    unsigned g = i / (LL_HD / 2), d2 = i % (LL_HD / 2);
    float mx = NEG;
    for (int w = 0; w < LL_WARPS; w++) mx = fmaxf(mx, wm[w][g]);
    float lsum = 0.0f, o0 = 0.0f, o1 = 0.0f;
    for (int w = 0; w < LL_WARPS; w++) {
      float sc = expf(wm[w][g] - mx);
      lsum = fmaf(wl[w][g], sc, lsum);
      o0 = fmaf(wacc[w][g][d2].x, sc, o0);
      o1 = fmaf(wacc[w][g][d2].y, sc, o1);
    }
    mine[g * (2 + LL_HD) + 2 + 2 * d2] = o0;
    mine[g * (2 + LL_HD) + 3 + 2 * d2] = o1;
    if (d2 == 0) { mine[g * (2 + LL_HD)] = mx; mine[g * (2 + LL_HD) + 1] = lsum; }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter + h, 1u) == splits - 1;
  __syncthreads();
  if (last) {
    __threadfence();
    // Every block's max and sum into shared memory first (one round trip), then the weighted sums.
    const float* all = part + (unsigned long long)h * splits * G * (2 + LL_HD);
    for (unsigned i = threadIdx.x; i < splits * G; i += LL_THREADS) {
      cm[i / G][i % G] = __ldcg(all + i * (2 + LL_HD));
      cl[i / G][i % G] = __ldcg(all + i * (2 + LL_HD) + 1);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < G * LL_HD; i += LL_THREADS) {
      unsigned g = i / LL_HD, dd = i % LL_HD;
      float mx = NEG;
      for (unsigned k = 0; k < splits; k++) mx = fmaxf(mx, cm[k][g]);
      float lsum = 0.0f, o = 0.0f;
#pragma unroll 8
      for (unsigned k = 0; k < splits; k++) {
        float sc = cl[k][g] > 0.0f ? expf(cm[k][g] - mx) : 0.0f;
        lsum = fmaf(cl[k][g], sc, lsum);
        o = fmaf(__ldcg(all + (k * G + g) * (2 + LL_HD) + 2 + dd), sc, o);
      }
      out[(h * G + g) * LL_HD + dd] = o / lsum;
    }
    if (threadIdx.x == 0) counter[h] = 0;
  }
  OST_EXIT();
}

// llama_attn(out, part, counter, q, kcache, vcache, pos, heads, kv_heads, max_seq, splits): attention of
// the query heads over cache rows 0..=pos (head dim 64; grouped-query with heads / kv_heads = 1, 2, 4
// or 8 query heads per KV head). Grid (splits, kv_heads): block (s, h) takes an equal share of the rows
// for every query head of KV head h, so each KV row is read once; it writes its softmax partial to
// `part`, and the last block of KV head h (counted in counter[h], which it resets) merges the partials
// into out.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn(float* out, float* part, unsigned* counter, const float* q, const ll_bf16* kcache,
                                                                  const ll_bf16* vcache, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                  unsigned max_seq, unsigned splits) {
  switch (heads / kv_heads) {
    case 1: ll_attn<1>(out, part, counter, q, kcache, vcache, pos, max_seq, splits); break;
    case 2: ll_attn<2>(out, part, counter, q, kcache, vcache, pos, max_seq, splits); break;
    case 4: ll_attn<4>(out, part, counter, q, kcache, vcache, pos, max_seq, splits); break;
    default: ll_attn<8>(out, part, counter, q, kcache, vcache, pos, max_seq, splits); break;
  }
}
