// Llama decode kernels (bf16 weights and KV cache, f32 activations and accumulation): the CUDA side of
// the `ostinato-llama` kernel pack, bound through a kernel reference that carries this source
// (`ostinato_llama::pack`). OST_ENTRY / OST_EXIT come from Ostinato's kernel header; the host twins live
// in crates/ostinato-llama/src/host.rs with the same signatures and math (summation order differs).
//
// Before `griddepcontrol.wait` every kernel requests the bytes no node of the step writes: the small
// projections (QKV, O) load ALL their weights into registers (a warp owns its rows), the streaming ones
// (gate/up, down, LM head) the first row chunk of each warp's first tile into registers and the rest of
// that tile into L2, attention the KV-cache rows of its share below the position. Those loads are plain
// `ld.global` (ptxas keeps them above the wait; an `ld.global.nc` it may sink below it) and
// `prefetch.global.L2`: the certified pre-wait reads (crates/ostinato-cuda/src/ptx.rs). Nothing before
// the wait writes memory or takes a ticket.
//
// The streaming projections hand out 7/8 of their work statically (warp w: units w, w + W, ...) and the
// rest by ticket (`atomicAdd` on a counter, drawn ahead), so a warp that started late behind the
// previous kernel takes less of the tail. The warp that draws the last ticket resets the counter to zero
// for the next launch. Preconditions (checked by the graph builder): k % 8 == 0, k <= the kernel's
// KMAX, head_dim 64, grouped-query groups of 1, 2, 4 or 8, splits * group <= 128.

#include "ostinato.cuh"

#define LL_THREADS 256
#define LL_WARPS (LL_THREADS / 32)
// Blocks per SM every streaming kernel must fit (registers).
#ifndef LL_MIN_BLOCKS
#define LL_MIN_BLOCKS 2
#endif
// Columns per row chunk: a lane loads 8 x 16 bytes of it, each load instruction 512 contiguous bytes.
#define LL_CHUNK 2048
// Bytes of weights per ticket of the streaming projections.
#ifndef LL_TILE_BYTES
#define LL_TILE_BYTES 8192
#endif
// Eighths of a streaming projection's units handed out statically (in rounds); the rest by ticket.
#ifndef LL_STATIC_EIGHTHS
#define LL_STATIC_EIGHTHS 7
#endif
// L2 prefetch before the wait, per warp, past its first chunk.
#define LL_PREFETCH_BYTES 8192
// The LM head's tile.
#ifndef LL_HEAD_TILE_BYTES
#define LL_HEAD_TILE_BYTES 32768
#endif
// Warps (one RoPE pair each) per block of the QKV projection.
#ifndef LL_QKV_WARPS
#define LL_QKV_WARPS 4
#endif
#define LL_HD 64
#define LL_ATTN_UNROLL 8
// Most blocks per KV head in attention; a partial record is m, l, two pads and 64 sums.
#define LL_MAX_SPLITS 32
#define LL_REC 68
#define LL_MAX_RECS 128

typedef unsigned short ll_bf16;
#define LL_FULL 0xffffffffu

__device__ __forceinline__ float ll_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float ll_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// f32 -> bf16, round to nearest even (finite values; the host twin uses the same rounding).
__device__ __forceinline__ ll_bf16 ll_to_bf(float f) {
  unsigned u = __float_as_uint(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ll_bf16)(u >> 16);
}
__device__ __forceinline__ unsigned ll_pack(float a, float b) { return (unsigned)ll_to_bf(a) | ((unsigned)ll_to_bf(b) << 16); }

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
__device__ __forceinline__ void ll_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// A streaming 16-byte load of read-only data after the wait: no L1 allocation, 256-byte L2 promotion.
__device__ __forceinline__ uint4 ll_ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
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
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LL_FULL, v, o);
  return v;
}

// A warp's chunk of a row: lane's 8 loads at columns base + (j * 32 + lane) * 8 (zeros past k).
template <bool EARLY>
__device__ __forceinline__ void ll_load_chunk(uint4 (&w)[8], const ll_bf16* row, unsigned base, unsigned k) {
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    unsigned c = base + (j * 32 + lane) * 8;
    w[j] = c < k ? (EARLY ? ll_ld_early(row + c) : ll_ld_stream(row + c)) : make_uint4(0, 0, 0, 0);
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

// ---- The input vector -----------------------------------------------------------------------------
// An RMS norm's weights, the thread's float4 groups g = tid, tid + T, ... of a vector of k <= 2048
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

// After the wait: xs = x ⊙ ln (k <= 2048 floats, zero-padded to LL_CHUNK) and the norm's scale
// rsqrt(mean(x²) + eps), which the caller applies to its dot products. One barrier.
template <int T>
__device__ __forceinline__ float ll_norm_input(float* xs, float* red, const float* x, unsigned k, const LlNormWeights<T>& ln, float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int g = 0; g < LL_CHUNK / 4 / T; g++) {
    unsigned i = (threadIdx.x + g * T) * 4;
    float4 v = i < k ? __ldcg((const float4*)(x + i)) : make_float4(0, 0, 0, 0);
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    uint2 l = ln.w[g];
    *(float4*)(xs + i) = make_float4(v.x * ll_lo(l.x), v.y * ll_hi(l.x), v.z * ll_lo(l.y), v.w * ll_hi(l.y));
  }
  ss = ll_warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < T / 32; w++) s += red[w];
  return rsqrtf(s / (float)k + eps);
}

// After the wait: xs = v (k floats), zero-padded to whole chunks. Ends with a barrier.
__device__ __forceinline__ void ll_plain_input(float* xs, const float* v, unsigned k) {
  unsigned padded = (k + LL_CHUNK - 1) / LL_CHUNK * LL_CHUNK;
  for (unsigned j = threadIdx.x * 4; j < padded; j += LL_THREADS * 4)
    *(float4*)(xs + j) = j < k ? __ldcg((const float4*)(v + j)) : make_float4(0, 0, 0, 0);
  __syncthreads();
}

// ---- Streaming projections: static rounds, then tiles by ticket -----------------------------------------
// n_units units of U row chunks each: unit u's row i is rows(u, i), its columns start at col(u). Warp gw
// (of W) takes units gw, gw + W, ... for `rounds` rounds (7/8 of the work, interleaved as one launch
// wave), then tiles of `tile` consecutive units of the rest by ticket: tile index = atomicAdd(ticket, 1),
// drawn two units (or one tile) ahead so the atomic's latency hides behind the work. Exactly one draw
// per warp fails (the tile past the end), so the draws number tiles + W, and the warp whose draw returns
// the last value resets the counter for the next launch. (Tickets from the first unit on, every warp
// drawing at once, measured slower: 2,112 draws on one address queue behind each other.)
struct LlWork {
  unsigned n_units, tile, rounds, base, n_tiles, warps, gw;
};
__device__ __forceinline__ LlWork ll_work(unsigned n_units, unsigned unit_bytes, unsigned tile_bytes = LL_TILE_BYTES) {
  LlWork w;
  w.n_units = n_units;
  w.tile = max(1u, tile_bytes / unit_bytes);
  w.warps = gridDim.x * LL_WARPS;
  w.gw = blockIdx.x * LL_WARPS + (threadIdx.x >> 5);
  w.rounds = (unsigned)((unsigned long long)n_units * LL_STATIC_EIGHTHS / 8 / w.warps);
  w.base = w.rounds * w.warps;
  w.n_tiles = (n_units - w.base + w.tile - 1) / w.tile;
  return w;
}

// Before the wait: the first row chunk of the warp's first unit into `cur`, up to LL_PREFETCH_BYTES of
// its next static units into L2.
template <int U, class Rows, class Col>
__device__ __forceinline__ void ll_stream_prefetch(uint4 (&cur)[8], const LlWork& w, const ll_bf16* W, unsigned k, Rows rows, Col col) {
  if (w.rounds == 0) return;
  unsigned lane = threadIdx.x & 31, budget = LL_PREFETCH_BYTES;
  ll_load_chunk<true>(cur, W + (unsigned long long)rows(w.gw, 0) * k, col(w.gw), k);
  for (unsigned r = 0; r < w.rounds && budget > 0; r++) {
    unsigned u = w.gw + r * w.warps;
#pragma unroll
    for (int i = 0; i < U; i++) {
      if (r == 0 && i == 0) continue;
      unsigned c = col(u), bytes = min(min(k - c, (unsigned)LL_CHUNK) * 2, budget);
      const char* p = (const char*)(W + (unsigned long long)rows(u, i) * k + c);
      for (unsigned off = lane * 128; off < bytes; off += 32 * 128) ll_prefetch_l2(p + off);
      budget -= bytes;
      if (budget == 0) break;
    }
  }
}

// A ticket (lane 0's raw counter value; the other lanes' is unused).
__device__ __forceinline__ unsigned ll_draw(unsigned* ticket) { return (threadIdx.x & 31) == 0 ? atomicAdd(ticket, 1u) : 0u; }

// Redeems a drawn ticket: its tile's first unit into u and end into end, and draws the next; false past
// the last tile. Lane 0 resets the counter if its draw was the last of the launch.
__device__ __forceinline__ bool ll_take(unsigned& raw, const LlWork& w, unsigned* ticket, unsigned& u, unsigned& end) {
  unsigned v = __shfl_sync(LL_FULL, raw, 0);
  if ((threadIdx.x & 31) == 0 && v == w.n_tiles + w.warps - 1) atomicExch(ticket, 0u);
  if (v >= w.n_tiles) return false;
  u = w.base + v * w.tile;
  end = min(w.n_units, u + w.tile);
  raw = ll_draw(ticket);
  return true;
}

// After the wait: the warp streams its units; epi(u, acc) gets unit u's U dot products (every lane).
// `cur` holds the first unit's first chunk when there are static rounds (ll_stream_prefetch).
template <int U, class Rows, class Col, class Epi>
__device__ __forceinline__ void ll_stream(uint4 (&cur)[8], const LlWork& w, unsigned* ticket, const ll_bf16* W, unsigned k, const float* xs, Rows rows,
                                          Col col, Epi epi) {
  unsigned raw = 0, u = w.gw, r = 0, end = 0;  // r: static round of u; end: one past its tile's units (0: static)
  if (w.rounds <= 2) raw = ll_draw(ticket);
  if (w.rounds == 0) {
    if (!ll_take(raw, w, ticket, u, end)) return;
    ll_load_chunk<false>(cur, W + (unsigned long long)rows(u, 0) * k, col(u), k);
  }
  int i = 0;
  float acc[U];
#pragma unroll
  for (int q = 0; q < U; q++) acc[q] = 0.0f;
  while (true) {
    // The step after (u, i): the unit's next row, the next static unit, or the next tile's.
    unsigned nu = u, nr = r, n_end = end;
    int ni = i + 1;
    bool more = true;
    if (ni == U) {
      ni = 0;
      if (end == 0 && r + 1 < w.rounds) {
        nr = r + 1;
        nu = w.gw + nr * w.warps;
        if (nr + 2 == w.rounds) raw = ll_draw(ticket);
      } else if (end != 0 && u + 1 < end) {
        nu = u + 1;
      } else {
        more = ll_take(raw, w, ticket, nu, n_end);
      }
    }
    uint4 nxt[8];
    if (more) ll_load_chunk<false>(nxt, W + (unsigned long long)rows(nu, ni) * k, col(nu), k);
    float d = ll_dot_chunk(cur, xs, col(u));
#pragma unroll
    for (int q = 0; q < U; q++) acc[q] += q == i ? d : 0.0f;
    if (i == U - 1) {
#pragma unroll
      for (int q = 0; q < U; q++) acc[q] = ll_warp_sum(acc[q]);
      epi(u, acc);
#pragma unroll
      for (int q = 0; q < U; q++) acc[q] = 0.0f;
    }
    if (!more) break;
#pragma unroll
    for (int j = 0; j < 8; j++) cur[j] = nxt[j];
    u = nu;
    r = nr;
    end = n_end;
    i = ni;
  }
}

// ---- The kernels --------------------------------------------------------------------------------------

// llama_embed(x, emb, token, hidden): x = emb[token[0]] as f32.
extern "C" __global__ void llama_embed(float* x, const ll_bf16* emb, const unsigned* token, unsigned hidden) {
  OST_ENTRY();
  unsigned long long row = (unsigned long long)token[0] * hidden;
  OST_GRID_STRIDE(i, hidden) { x[i] = __uint_as_float((unsigned)emb[row + i] << 16); }
  OST_EXIT();
}

// llama_qkv(q, kv_new, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps): rmsnorm(x)·ln,
// then the fused q/k/v projection (wqkv: heads*hd + 2*kv_heads*hd rows), RoPE on q and k (the
// rotate-half pairing: dims j and j + hd/2 of a head, angle pos * rope_freq[j]); q to `q` (f32), the new
// K and V rows to `kv_new` (bf16, [2][kv_heads][hd]: the attention appends them to the cache). One warp
// per pair of rows, both loaded before the wait.
extern "C" __global__ void __launch_bounds__(LL_QKV_WARPS * 32) llama_qkv(float* q, ll_bf16* kv_new, const float* x, const ll_bf16* ln, const ll_bf16* wqkv,
                                                                       const float* rope_freq, unsigned pos, unsigned hidden, unsigned heads,
                                                                       unsigned kv_heads, unsigned head_dim, float eps) {
  constexpr int T = LL_QKV_WARPS * 32;
  __shared__ __align__(16) float xs[LL_CHUNK];
  __shared__ float red[LL_QKV_WARPS];
  unsigned half = head_dim / 2, pairs = (heads + 2 * kv_heads) * half;
  unsigned p = blockIdx.x * LL_QKV_WARPS + (threadIdx.x >> 5), head = p / half, j = p % half;
  uint4 wa[8], wb[8];
  float freq = 0.0f;
  if (p < pairs) {
    const ll_bf16* ra = wqkv + (unsigned long long)(head * head_dim + j) * hidden;
    ll_load_chunk<true>(wa, ra, 0, hidden);
    ll_load_chunk<true>(wb, ra + (unsigned long long)half * hidden, 0, hidden);
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(freq) : "l"(rope_freq + j));
  }
  LlNormWeights<T> lw = ll_norm_weights<T>(ln, hidden);
  OST_ENTRY();
  float scale = ll_norm_input<T>(xs, red, x, hidden, lw, eps);
  if (p < pairs) {
    float a = ll_warp_sum(ll_dot_chunk(wa, xs, 0)) * scale, b = ll_warp_sum(ll_dot_chunk(wb, xs, 0)) * scale;
    if ((threadIdx.x & 31) == 0) {
      if (head < heads + kv_heads) {  // q and k heads rotate
        float s, c;
        sincosf((float)pos * freq, &s, &c);
        float ra = a * c - b * s, rb = b * c + a * s;
        a = ra;
        b = rb;
      }
      if (head < heads) {
        q[head * head_dim + j] = a;
        q[head * head_dim + j + half] = b;
      } else {
        unsigned at = (head - heads) * head_dim + j;  // K heads, then V heads
        kv_new[at] = ll_to_bf(a);
        kv_new[at + half] = ll_to_bf(b);
      }
    }
  }
  OST_EXIT();
}

// Attention of the G query heads of KV head blockIdx.y over this block's share of rows 0..=pos; writes
// the block's softmax partial (per head: running max, sum, unnormalised weighted sums; LL_REC floats)
// for llama_o to merge. Each warp takes every 8th row; a lane holds dims (2 lane, 2 lane + 1) of q, of
// the K and V rows and of the output, so a row is one coalesced 128-byte load; eight rows' loads in
// flight per warp, the first eight requested before the wait (cache rows below pos: no node of the
// step writes them). Row pos comes from kv_new, and the block that owns it appends it to the cache.
// The kernel's shared memory, sized for the largest group.
struct LlAttnShared {
  float wm[LL_WARPS][8], wl[LL_WARPS][8];
  float2 wacc[LL_WARPS][8][32];
};
template <int G>
__device__ __forceinline__ void ll_attn(LlAttnShared& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new,
                                        unsigned pos, unsigned kv_heads, unsigned max_seq, unsigned splits) {
  auto& wm = sh.wm;
  auto& wl = sh.wl;
  auto& wacc = sh.wacc;
  const float NEG = -3.402823466e38f;
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned n = min(pos, max_seq - 1) + 1, fresh = pos < max_seq ? pos : 0xffffffffu;
  // Splits that get rows: one per 64 rows, at least min(8, splits) (measured: 16-row shares at position
  // 128, 64 at 1,024, 128 at 4,096 were the fastest); the others write empty partials.
  unsigned live = min(splits, max(min(8u, splits), (n + 63) / 64));
  unsigned chunk = (n + live - 1) / live;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  unsigned* kh = (unsigned*)(kcache + (unsigned long long)h * max_seq * LL_HD);
  unsigned* vh = (unsigned*)(vcache + (unsigned long long)h * max_seq * LL_HD);
  unsigned kw[LL_ATTN_UNROLL], vw[LL_ATTN_UNROLL];
#pragma unroll
  for (int u = 0; u < LL_ATTN_UNROLL; u++) {
    unsigned tu = t0 + warp + u * LL_WARPS;
    bool cached = tu < t1 && tu != fresh;
    kw[u] = cached ? ll_ld_early_u32(kh + (unsigned long long)tu * 32 + lane) : 0u;
    vw[u] = cached ? ll_ld_early_u32(vh + (unsigned long long)tu * 32 + lane) : 0u;
  }
  for (unsigned t = t0 + LL_WARPS * LL_ATTN_UNROLL + threadIdx.x / 2; t < t1; t += LL_THREADS / 2)
    ll_prefetch_l2(((threadIdx.x & 1) ? vh : kh) + (unsigned long long)t * 32);
  OST_ENTRY();
  bool owns_fresh = fresh >= t0 && fresh < t1;
  unsigned knew = 0, vnew = 0;
  if (owns_fresh) {
    knew = __ldcg((const unsigned*)(kv_new + h * LL_HD) + lane);
    vnew = __ldcg((const unsigned*)(kv_new + (kv_heads + h) * LL_HD) + lane);
    if (warp == 0) {
      kh[(unsigned long long)fresh * 32 + lane] = knew;
      vh[(unsigned long long)fresh * 32 + lane] = vnew;
    }
  }
  float2 qv[G];
#pragma unroll
  for (int g = 0; g < G; g++) {
    float2 v = __ldcg((const float2*)(q + (h * G + g) * LL_HD) + lane);
    qv[g] = make_float2(v.x * 0.125f, v.y * 0.125f);  // 1 / sqrt(64), exact
  }
  float m[G], l[G], a0[G], a1[G];
#pragma unroll
  for (int g = 0; g < G; g++) { m[g] = NEG; l[g] = 0.0f; a0[g] = 0.0f; a1[g] = 0.0f; }
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LL_ATTN_UNROLL) {
    if (t != t0 + warp) {  // later batches: loaded here (the first came before the wait)
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        bool cached = tu < t1 && tu != fresh;
        kw[u] = cached ? kh[(unsigned long long)tu * 32 + lane] : 0u;
        vw[u] = cached ? vh[(unsigned long long)tu * 32 + lane] : 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      if (tu >= t1) break;
      unsigned kk = tu == fresh ? knew : kw[u], vv = tu == fresh ? vnew : vw[u];
      float k0 = ll_lo(kk), k1 = ll_hi(kk), v0 = ll_lo(vv), v1 = ll_hi(vv);
      float sc[G];
#pragma unroll
      for (int g = 0; g < G; g++) sc[g] = fmaf(qv[g].x, k0, qv[g].y * k1);
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
  // The block's partial per head, merged over warps: [m, l, 0, 0, sums...] at ((h * splits + s) * G + g).
  float* mine = part + ((unsigned long long)h * splits + s) * G * LL_REC;
  for (unsigned i = threadIdx.x; i < G * (LL_HD / 2); i += LL_THREADS) {
    unsigned g = i / (LL_HD / 2), d2 = i % (LL_HD / 2);
    float mx = NEG;
    for (int w = 0; w < LL_WARPS; w++) mx = fmaxf(mx, wm[w][g]);
    float lsum = 0.0f, o0 = 0.0f, o1 = 0.0f;
    for (int w = 0; w < LL_WARPS; w++) {
      float sc = wl[w][g] > 0.0f ? expf(wm[w][g] - mx) : 0.0f;
      lsum = fmaf(wl[w][g], sc, lsum);
      o0 = fmaf(wacc[w][g][d2].x, sc, o0);
      o1 = fmaf(wacc[w][g][d2].y, sc, o1);
    }
    *(float2*)(mine + g * LL_REC + 4 + 2 * d2) = make_float2(o0, o1);
    if (d2 == 0) *(float4*)(mine + g * LL_REC) = make_float4(mx, lsum, 0.0f, 0.0f);
  }
}

// llama_attn(part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits): attention of the
// query heads over cache rows 0..=pos (head dim 64; grouped-query with heads / kv_heads = 1, 2, 4 or 8
// query heads per KV head; cache layout [kv_head][max_seq][64], bf16). Grid (splits, kv_heads): block
// (s, h) takes an equal share of the rows for every query head of KV head h, so each KV row is read
// once, and writes its softmax partial to `part` (llama_o merges them). Row pos is kv_new's (appended to
// the cache here, when pos < max_seq).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q,
                                                                                const ll_bf16* kv_new, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                                unsigned max_seq, unsigned splits) {
  __shared__ LlAttnShared sh;
  switch (heads / kv_heads) {
    case 1: ll_attn<1>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 2: ll_attn<2>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 4: ll_attn<4>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    default: ll_attn<8>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
  }
  OST_EXIT();
}

// The output projection of KV head h's query heads (G of them: columns h*G*64 ..) for 64 rows from
// blockIdx.x * 64, after merging that head's attention partials; adds into x (one add per row and KV
// head). A warp owns 8 rows: lane's element e = lane + 32 j (j < 2G) is row e / (8G), 16-byte column
// e % (8G), all loaded before the wait.
// The kernel's shared memory: a head's partial records, then its merged attention output.
struct __align__(16) LlOShared {
  float recs[LL_MAX_RECS * LL_REC];
  float a[8 * LL_HD];
};
template <int G>
__device__ __forceinline__ void ll_o(LlOShared& sh, float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned splits) {
  constexpr int E = 2 * G, PER_ROW = 8 * G, LPR = PER_ROW < 32 ? PER_ROW : 32;
  float* recs = sh.recs;
  float* a = sh.a;
  unsigned h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = heads * LL_HD;
  unsigned r0 = blockIdx.x * 64 + warp * 8;
  uint4 w[E];
#pragma unroll
  for (int j = 0; j < E; j++) {
    unsigned e = lane + 32 * j, r = r0 + e / PER_ROW;
    w[j] = r < m ? ll_ld_early(wo + (unsigned long long)r * k + h * G * LL_HD + (e % PER_ROW) * 8) : make_uint4(0, 0, 0, 0);
  }
  OST_ENTRY();
  // This head's records (splits * G of LL_REC floats), one round trip.
  const float4* src = (const float4*)(part + (unsigned long long)h * splits * G * LL_REC);
  unsigned n4 = splits * G * (LL_REC / 4);
#pragma unroll 4
  for (unsigned i = threadIdx.x; i < n4; i += LL_THREADS) ((float4*)recs)[i] = __ldcg(src + i);
  __syncthreads();
  for (unsigned i = threadIdx.x; i < G * LL_HD; i += LL_THREADS) {
    unsigned g = i / LL_HD, d = i % LL_HD;
    float mx = -3.402823466e38f;
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * LL_REC;
      if (r[1] > 0.0f) mx = fmaxf(mx, r[0]);
    }
    float lsum = 0.0f, o = 0.0f;
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * LL_REC;
      float sc = r[1] > 0.0f ? expf(r[0] - mx) : 0.0f;
      lsum = fmaf(r[1], sc, lsum);
      o = fmaf(r[4 + d], sc, o);
    }
    a[i] = o / lsum;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < E; j++) {
    unsigned e = lane + 32 * j, r = r0 + e / PER_ROW;
    float v = ll_dot8(w[j], a + (e % PER_ROW) * 8);
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(LL_FULL, v, o);
    if (lane % LPR == 0 && r < m) atomicAdd(x + r, v);
  }
}

// llama_o(x, part, wo, m, heads, kv_heads, splits): merges the attention partials of every query head
// and adds Wo·attn to x (the output projection and the residual; Wo is m x heads*64). Grid
// (ceil(m / 64), kv_heads): block (b, h) takes 64 rows of KV head h's columns; x gets one add per row
// per KV head (float atomics: the order of the kv_heads adds varies).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_o(float* x, const float* part, const ll_bf16* wo, unsigned m,
                                                                             unsigned heads, unsigned kv_heads, unsigned splits) {
  __shared__ LlOShared sh;
  switch (heads / kv_heads) {
    case 1: ll_o<1>(sh, x, part, wo, m, heads, splits); break;
    case 2: ll_o<2>(sh, x, part, wo, m, heads, splits); break;
    case 4: ll_o<4>(sh, x, part, wo, m, heads, splits); break;
    default: ll_o<8>(sh, x, part, wo, m, heads, splits); break;
  }
  OST_EXIT();
}

// llama_ffn_in(act, ticket, x, ln, wgu, ffn, hidden, eps): rmsnorm(x)·ln, gate = Wg·xn, up = Wu·xn (wgu:
// the ffn gate rows, then the ffn up rows), act = silu(gate) * up. A unit is one (gate, up) pair.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_ffn_in(float* act, unsigned* ticket, const float* x, const ll_bf16* ln,
                                                                                  const ll_bf16* wgu, unsigned ffn, unsigned hidden, float eps) {
  __shared__ __align__(16) float xs[LL_CHUNK];
  __shared__ float red[LL_WARPS];
  auto rows = [=](unsigned u, int i) { return u + i * ffn; };
  auto col = [](unsigned) { return 0u; };
  LlWork t = ll_work(ffn, 2 * hidden * 2);
  uint4 cur[8];
  ll_stream_prefetch<2>(cur, t, wgu, hidden, rows, col);
  LlNormWeights<LL_THREADS> lw = ll_norm_weights<LL_THREADS>(ln, hidden);
  OST_ENTRY();
  float scale = ll_norm_input<LL_THREADS>(xs, red, x, hidden, lw, eps);
  auto epi = [&](unsigned u, const float (&acc)[2]) {
    float g = acc[0] * scale, up = acc[1] * scale;
    if ((threadIdx.x & 31) == 0) act[u] = g / (1.0f + expf(-g)) * up;
  };
  ll_stream<2>(cur, t, ticket, wgu, hidden, xs, rows, col, epi);
  OST_EXIT();
}

// llama_down(x, ticket, wd, act, m, k): x += Wd·act (FFN down projection + residual; k up to 8192). A
// unit is one 2048-column chunk of a row; its partial dot product is added into x (float atomics).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_down(float* x, unsigned* ticket, const ll_bf16* wd, const float* act, unsigned m,
                                                                                unsigned k) {
  __shared__ __align__(16) float xs[4 * LL_CHUNK];
  unsigned kcn = (k + LL_CHUNK - 1) / LL_CHUNK;
  auto rows = [=](unsigned u, int) { return u / kcn; };
  auto col = [=](unsigned u) { return (u % kcn) * LL_CHUNK; };
  LlWork t = ll_work(m * kcn, min(k, (unsigned)LL_CHUNK) * 2);
  uint4 cur[8];
  ll_stream_prefetch<1>(cur, t, wd, k, rows, col);
  OST_ENTRY();
  ll_plain_input(xs, act, k);
  auto epi = [&](unsigned u, const float (&acc)[1]) {
    if ((threadIdx.x & 31) == 0) atomicAdd(x + u / kcn, acc[0]);
  };
  ll_stream<1>(cur, t, ticket, wd, k, xs, rows, col, epi);
  OST_EXIT();
}

// (value, index) a beats (value, index) b: larger value, ties to the lower index; index ~0 is none.
__device__ __forceinline__ bool ll_better(float v, unsigned i, float bv, unsigned bi) {
  return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}

// llama_lm_head(logits, part, counter, ticket, token, x, ln, emb, vocab, hidden, eps): final rmsnorm,
// logits = emb·xn (tied embeddings), and the greedy token: each block writes the best (value, index) of
// its rows to `part`; the last block to finish (counted in counter[0], which it resets) reduces them
// into token[0]. Ties go to the lower index.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_lm_head(float* logits, float* part, unsigned* counter, unsigned* ticket,
                                                                                   unsigned* token, const float* x, const ll_bf16* ln, const ll_bf16* emb,
                                                                                   unsigned vocab, unsigned hidden, float eps) {
  __shared__ __align__(16) float xs[LL_CHUNK];
  __shared__ float red[LL_WARPS];
  __shared__ float best_v[LL_THREADS];
  __shared__ unsigned best_i[LL_THREADS];
  __shared__ bool last;
  const unsigned NONE = 0xffffffffu;
  auto rows = [](unsigned u, int) { return u; };
  auto col = [](unsigned) { return 0u; };
  LlWork t = ll_work(vocab, hidden * 2, LL_HEAD_TILE_BYTES);
  uint4 cur[8];
  ll_stream_prefetch<1>(cur, t, emb, hidden, rows, col);
  LlNormWeights<LL_THREADS> lw = ll_norm_weights<LL_THREADS>(ln, hidden);
  OST_ENTRY();
  float scale = ll_norm_input<LL_THREADS>(xs, red, x, hidden, lw, eps);
  float bv = -3.402823466e38f;
  unsigned bi = NONE;
  auto epi = [&](unsigned u, const float (&acc)[1]) {
    float v = acc[0] * scale;
    if ((threadIdx.x & 31) == 0) logits[u] = v;
    if (ll_better(v, u, bv, bi)) { bv = v; bi = u; }
  };
  ll_stream<1>(cur, t, ticket, emb, hidden, xs, rows, col, epi);
  // The block's best, then the grid's.
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < LL_WARPS; w++) {
      if (ll_better(best_v[w * 32], best_i[w * 32], bv, bi)) { bv = best_v[w * 32]; bi = best_i[w * 32]; }
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
      if (ll_better(v, i, bv, bi)) { bv = v; bi = i; }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned s = LL_THREADS / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s && ll_better(best_v[threadIdx.x + s], best_i[threadIdx.x + s], best_v[threadIdx.x], best_i[threadIdx.x])) {
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
