// Study variants of the Llama decode kernels (not part of the pack), for the per-head hand-offs a
// tile-mapped step could make. Included by lab/probes/llama_kernels.cu after the pack's llama.cu and
// llama_stream.cu, whose helpers they use.
//
// A hand-off here is a counter per (layer, KV head) that producer blocks add 1 to when their bytes
// are written (`__threadfence` then a relaxed add: release) and a consumer block polls
// (`ld.acquire.gpu`) until it reaches the count its own run expects: each consumer block keeps its
// runs in a word of its own (`seen`), so run r waits for r x producers; nothing is reset between
// launches. A poll gives up after LV_SPIN_LIMIT rounds and records it in `lv_error` (a probe must not
// hang the machine); the check reports it.
//   llama_attn_flag   llama_attn, then its block counts itself done for KV head h.
//   llama_o_flag      llama_o whose blocks wait for their KV head's splits instead of the whole grid:
//                     W_o in registers before anything, the merge as soon as head h's partials landed,
//                     griddepcontrol.wait only before exit (the chain's invariant).
//   llama_qkv_attn    QKV and attention fused per KV head: grid (S, kv_heads), S = (G + 2) hd / 2 / 8
//                     blocks per KV head, each computing 8 RoPE pairs of the head's query, K and V rows
//                     (one per warp, loaded before the wait), counting itself, waiting for the head's
//                     S blocks, then attention split s of S for that head; counts itself done for the
//                     output projection too where `done` is not null. Needs all its blocks resident at once (the probe checks
//                     the occupancy and refuses otherwise); hidden <= 2048.

#ifndef LV_SPIN_LIMIT
#define LV_SPIN_LIMIT (1u << 26)
#endif

__device__ unsigned lv_error;

__device__ __forceinline__ unsigned lv_ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The block's bytes are written: count it (thread 0, after every thread's stores).
__device__ __forceinline__ void lv_publish(unsigned* counter) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(counter, 1u);
}

// Waits (thread 0 polls, the block follows) until `counter` reaches what this block's runs so far
// expect: `seen` (the block's own word) plus the `per_run` producers of this run.
__device__ __forceinline__ void lv_wait(const unsigned* counter, unsigned* seen, unsigned per_run) {
  if (threadIdx.x == 0) {
    unsigned want = *seen + per_run, spins = 0;
    *seen = want;
    while ((int)(lv_ld_acquire(counter) - want) < 0) {
      if (++spins == LV_SPIN_LIMIT) {
        atomicExch(&lv_error, 1u);
        break;
      }
      __nanosleep(64);
    }
  }
  __syncthreads();
}

// llama_attn_flag(part, kcache, vcache, qkv, done, pos, heads, kv_heads, max_seq, splits, head_dim):
// llama_attn, then done[blockIdx.y] += 1.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn_flag(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* qkv,
                                                                                     unsigned* done, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                                     unsigned max_seq, unsigned splits, unsigned head_dim) {
#define LV_ATTN(G, HD) ll_attn<G, HD>(part, kcache, vcache, qkv, pos, heads, kv_heads, max_seq, splits)
  bool wide = head_dim == 128;
  switch (heads / kv_heads) {
    case 3: if (wide) LV_ATTN(3, 128); else LV_ATTN(3, 64); break;
    case 4: if (wide) LV_ATTN(4, 128); else LV_ATTN(4, 64); break;
    default: LV_ATTN(8, 64); break;
  }
#undef LV_ATTN
  lv_publish(done + blockIdx.y);
  OST_EXIT();
}

// The output projection of ll_o with the partials' wait on KV head h's counter (splits blocks a run)
// in place of the grid's.
template <int G, int HD>
__device__ __forceinline__ void lv_o_flag(float* x, const float* part, const ll_bf16* wo, const unsigned* done, unsigned* seen, unsigned m, unsigned heads,
                                          unsigned splits) {
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
  lv_wait(done + h, seen + blockIdx.y * gridDim.x + blockIdx.x, splits);
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

// llama_o_flag(x, part, wo, done, seen, m, heads, kv_heads, splits, head_dim): llama_o, waiting for
// done[h] (seen: one word per block, its runs).
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_o_flag(float* x, const float* part, const ll_bf16* wo, const unsigned* done,
                                                                                  unsigned* seen, unsigned m, unsigned heads, unsigned kv_heads,
                                                                                  unsigned splits, unsigned head_dim) {
#define LV_O(G, HD) lv_o_flag<G, HD>(x, part, wo, done, seen, m, heads, splits)
  bool wide = head_dim == 128;
  switch (heads / kv_heads) {
    case 3: if (wide) LV_O(3, 128); else LV_O(3, 64); break;
    case 4: if (wide) LV_O(4, 128); else LV_O(4, 64); break;
    default: LV_O(8, 64); break;
  }
#undef LV_O
  OST_ENTRY();  // the chain's invariant: this grid completes after its predecessors
  OST_EXIT();
}

// llama_qkv_attn(part, kcache, vcache, qkv, x, ln, wqkv, rope_freq, arrive, seen, done, pos, hidden,
// heads, kv_heads, max_seq, head_dim, eps): see the header. Block (s, h): pairs p = 8 s + warp of KV
// head h's group (its G query heads, then its K head, then its V head; hd / 2 pairs each).
template <int G>
__device__ __forceinline__ void lv_qkv_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, float* qkv, const float* x, const ll_bf16* ln,
                                            const ll_bf16* wqkv, const float* rope_freq, unsigned* arrive, unsigned* seen, unsigned* done,
                                            unsigned pos, unsigned hidden, unsigned heads, unsigned kv_heads, unsigned max_seq, float eps) {
  constexpr int T = LL_THREADS, HD = 64, HALF = HD / 2;
  float* xs = (float*)ll_dyn;
  float* red = xs + LL_CHUNK;
  unsigned h = blockIdx.y, lane = threadIdx.x & 31, p = blockIdx.x * LL_WARPS + (threadIdx.x >> 5);
  unsigned member = p / HALF, j = p % HALF;  // member < G: query head h G + member; G: K head h; G + 1: V head h
  unsigned head = member < G ? h * G + member : member == G ? heads + h : heads + kv_heads + h;
  uint4 wa[8], wb[8];
  const ll_bf16* ra = wqkv + (unsigned long long)(head * HD + j) * hidden;
  ll_load_row<8>(wa, ra, hidden);
  ll_load_row<8>(wb, ra + (unsigned long long)HALF * hidden, hidden);
  float freq;
  asm volatile("ld.global.f32 %0, [%1];" : "=f"(freq) : "l"(rope_freq + j));
  LlNormWeights<T> lw = ll_norm_weights<T>(ln, hidden);
  OST_ENTRY();
  float scale = ll_norm_input<T>(xs, red, x, ln, hidden, lw, eps);
  float a = ll_warp_sum(ll_dot_row<8>(wa, xs)) * scale, b = ll_warp_sum(ll_dot_row<8>(wb, xs)) * scale;
  if (lane == 0) {
    if (member <= G) {  // q and k heads rotate
      float s, c;
      sincosf((float)pos * freq, &s, &c);
      float r1 = a * c - b * s, r2 = b * c + a * s;
      a = r1;
      b = r2;
    }
    qkv[head * HD + j] = a;
    qkv[head * HD + j + HALF] = b;
  }
  lv_publish(arrive + h);
  lv_wait(arrive + h, seen + h * gridDim.x + blockIdx.x, gridDim.x);
  ll_attn<G, HD>(part, kcache, vcache, qkv, pos, heads, kv_heads, max_seq, gridDim.x);
  if (done) lv_publish(done + h);  // only where llama_o_flag consumes it (a null `done`: llama_o does)
}

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_qkv_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, float* qkv,
                                                                                    const float* x, const ll_bf16* ln, const ll_bf16* wqkv,
                                                                                    const float* rope_freq, unsigned* arrive, unsigned* seen,
                                                                                    unsigned* done, unsigned pos, unsigned hidden, unsigned heads,
                                                                                    unsigned kv_heads, unsigned max_seq, float eps) {
  if (heads / kv_heads == 4) lv_qkv_attn<4>(part, kcache, vcache, qkv, x, ln, wqkv, rope_freq, arrive, seen, done, pos, hidden, heads, kv_heads, max_seq, eps);
  else lv_qkv_attn<8>(part, kcache, vcache, qkv, x, ln, wqkv, rope_freq, arrive, seen, done, pos, hidden, heads, kv_heads, max_seq, eps);
  OST_EXIT();
}
