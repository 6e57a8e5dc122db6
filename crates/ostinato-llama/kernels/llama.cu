// The Llama pack's kernels. Compiled after llama_common.cu (the defines, helpers and streaming pipeline
// they use) as one source: `ostinato_llama::pack::CUDA_SOURCE`.

// ---- The kernels --------------------------------------------------------------------------------------

// llama_embed(x, emb, token, hidden): x = emb[token[0]] as f32.
extern "C" __global__ void llama_embed(float* x, const ll_bf16* emb, const unsigned* token, unsigned hidden) {
  OST_ENTRY();
  unsigned long long row = (unsigned long long)token[0] * hidden;
  OST_GRID_STRIDE(i, hidden) { x[i] = __uint_as_float((unsigned)emb[row + i] << 16); }
  OST_EXIT();
}

// A warp's pair of outputs, dims j and j + hd/2 of head `head` (query heads, then K heads, then V heads):
// RoPE at angle pos * freq on query and K heads, then into q (f32) or kv_new (bf16). Lane 0 calls it.
__device__ __forceinline__ void ll_qkv_pair_out(float* q, ll_bf16* kv_new, float a, float b, unsigned head, unsigned j, unsigned pos, float freq,
                                                unsigned heads, unsigned kv_heads, unsigned head_dim) {
  unsigned half = head_dim / 2;
  if (head < heads + kv_heads) {
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

// llama_qkv(q, kv_new, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps): rmsnorm(x)·ln,
// then the fused q/k/v projection (wqkv: heads*hd + 2*kv_heads*hd rows), RoPE on q and k (the
// rotate-half pairing: dims j and j + hd/2 of a head, angle pos * rope_freq[j]); q to `q` (f32), the new
// K and V rows to `kv_new` (bf16, [2][kv_heads][hd]: the attention appends them to the cache). One warp
// per pair of rows, both loaded before the wait: N x 256 columns each (hidden <= N x 256).
template <int N>
__device__ __forceinline__ void ll_qkv(float* xs, float* red, float* q, ll_bf16* kv_new, const float* x, const ll_bf16* ln, const ll_bf16* wqkv,
                                       const float* rope_freq, unsigned pos, unsigned hidden, unsigned heads, unsigned kv_heads, unsigned head_dim,
                                       float eps) {
  constexpr int T = LL_QKV_WARPS * 32, K = N * 256;
  unsigned half = head_dim / 2, pairs = (heads + 2 * kv_heads) * half;
  unsigned p = blockIdx.x * LL_QKV_WARPS + (threadIdx.x >> 5), head = p / half, j = p % half;
  uint4 wa[N], wb[N];
  float freq = 0.0f;
  if (p < pairs) {
    const ll_bf16* ra = wqkv + (unsigned long long)(head * head_dim + j) * hidden;
    ll_load_chunk<N>(wa, ra, 0, hidden);
    ll_load_chunk<N>(wb, ra + (unsigned long long)half * hidden, 0, hidden);
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(freq) : "l"(rope_freq + j));
  }
  LlNormWeights<T, K> lw = ll_norm_weights<T, K>(ln, hidden);
  OST_ENTRY();
  float scale = ll_norm_input<T, K>(xs, red, x, hidden, lw, eps);
  if (p < pairs) {
    float a = ll_warp_sum(ll_dot_chunk<N>(wa, xs, 0)) * scale, b = ll_warp_sum(ll_dot_chunk<N>(wb, xs, 0)) * scale;
    if ((threadIdx.x & 31) == 0) ll_qkv_pair_out(q, kv_new, a, b, head, j, pos, freq, heads, kv_heads, head_dim);
  }
}
// One entry per width class, each with the registers and shared memory of its own width (a kernel's
// resources are those of its largest path): llama_qkv for hidden <= 2048, llama_qkv_h3072 for <= 3072.
#define LL_QKV_ENTRY(NAME, N)                                                                                                           \
  extern "C" __global__ void __launch_bounds__(LL_QKV_WARPS * 32)                                                                      \
      NAME(float* q, ll_bf16* kv_new, const float* x, const ll_bf16* ln, const ll_bf16* wqkv, const float* rope_freq, unsigned pos,     \
           unsigned hidden, unsigned heads, unsigned kv_heads, unsigned head_dim, float eps) {                                          \
    __shared__ __align__(16) float xs[N * 256];                                                                                         \
    __shared__ float red[LL_QKV_WARPS];                                                                                                 \
    ll_qkv<N>(xs, red, q, kv_new, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, eps);                                \
    OST_EXIT();                                                                                                                         \
  }
LL_QKV_ENTRY(llama_qkv, 8)
LL_QKV_ENTRY(llama_qkv_h3072, 12)

// Attention of the G query heads of KV head blockIdx.y over this block's share of rows 0..=pos; writes
// the block's softmax partial (per head: running max, sum, unnormalised weighted sums; ll_rec(HD)
// floats) for llama_o to merge. Each warp takes every 8th row; a lane holds D2 = HD / 64 bf16 pairs of
// q, of the K and V rows and of the output (dims 2 (D2 lane + d), + 1), so a row is one coalesced load;
// eight rows' loads in flight per warp, the first eight requested before the wait (cache rows below pos:
// no node of the step writes them). Row pos comes from kv_new, and the block that owns it appends it to
// the cache.
// The splits of `splits` that get rows when attention covers rows 0..n-1.
__device__ __forceinline__ unsigned ll_live_splits(unsigned n, unsigned splits) {
  return min(splits, max(min((unsigned)LL_MIN_LIVE, splits), (n + LL_SPLIT_ROWS - 1) / LL_SPLIT_ROWS));
}
// The kernel's shared memory, for groups up to 8.
template <int HD>
struct LlAttnShared {
  float wm[LL_WARPS][8], wl[LL_WARPS][8];
  float2 wacc[LL_WARPS][8][HD / 2];
};
// The lane's D2 words of a cache row (u32 = a bf16 pair), a plain load before the wait.
template <int D2>
__device__ __forceinline__ void ll_row_early(unsigned (&w)[D2], const unsigned* p) {
  if constexpr (D2 == 1) {
    w[0] = ll_ld_early_u32(p);
  } else {
    asm volatile("ld.global.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[D2 - 1]) : "l"(p));
  }
}
// What runs right after attention's wait: nothing in the pack; a variant's own work in the decode probe
// (lab/probes/llama_variants.cu).
struct LlNoHook {
  __device__ __forceinline__ void operator()() const {}
};
template <int G, int HD, class AfterWait = LlNoHook>
__device__ __forceinline__ void ll_attn(LlAttnShared<HD>& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new,
                                        unsigned pos, unsigned kv_heads, unsigned max_seq, unsigned splits, AfterWait after_wait = AfterWait()) {
  constexpr int D2 = HD / 64, W = HD / 2, REC = ll_rec(HD);  // words per lane, words per row
  auto& wm = sh.wm;
  auto& wl = sh.wl;
  auto& wacc = sh.wacc;
  const float NEG = -3.402823466e38f;
  // 1 / sqrt(HD), rounded to f32 (exact for 64).
  const float QSCALE = HD == 64 ? 0.125f : 0.0883883476483184405f;
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned n = min(pos, max_seq - 1) + 1, fresh = pos < max_seq ? pos : 0xffffffffu;
  unsigned live = ll_live_splits(n, splits);  // the others write empty partials
  unsigned chunk = (n + live - 1) / live;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  unsigned* kh = (unsigned*)(kcache + (unsigned long long)h * max_seq * HD);
  unsigned* vh = (unsigned*)(vcache + (unsigned long long)h * max_seq * HD);
  unsigned kw[LL_ATTN_UNROLL][D2], vw[LL_ATTN_UNROLL][D2];
#pragma unroll
  for (int u = 0; u < LL_ATTN_UNROLL; u++) {
    unsigned tu = t0 + warp + u * LL_WARPS;
    if (tu < t1 && tu != fresh) {
      ll_row_early<D2>(kw[u], kh + (unsigned long long)tu * W + lane * D2);
      ll_row_early<D2>(vw[u], vh + (unsigned long long)tu * W + lane * D2);
    } else {
#pragma unroll
      for (int d = 0; d < D2; d++) kw[u][d] = vw[u][d] = 0u;
    }
  }
  // The rest of the share into L2: each row's K and V, D2 128-byte lines each.
  for (unsigned i = (t0 + LL_WARPS * LL_ATTN_UNROLL) * 2 * D2 + threadIdx.x; i < t1 * 2 * D2; i += LL_THREADS) {
    unsigned t = i / (2 * D2), r = i % (2 * D2);
    ll_prefetch_l2(((r & 1) ? vh : kh) + (unsigned long long)t * W + (r >> 1) * 32);
  }
  OST_ENTRY();
  after_wait();
  bool owns_fresh = fresh >= t0 && fresh < t1;
  unsigned knew[D2], vnew[D2];
#pragma unroll
  for (int d = 0; d < D2; d++) knew[d] = vnew[d] = 0u;
  if (owns_fresh) {
#pragma unroll
    for (int d = 0; d < D2; d++) {
      knew[d] = __ldcg((const unsigned*)(kv_new + h * HD) + lane * D2 + d);
      vnew[d] = __ldcg((const unsigned*)(kv_new + (kv_heads + h) * HD) + lane * D2 + d);
    }
    if (warp == 0) {
#pragma unroll
      for (int d = 0; d < D2; d++) {
        kh[(unsigned long long)fresh * W + lane * D2 + d] = knew[d];
        vh[(unsigned long long)fresh * W + lane * D2 + d] = vnew[d];
      }
    }
  }
  float2 qv[G][D2];
#pragma unroll
  for (int g = 0; g < G; g++) {
#pragma unroll
    for (int d = 0; d < D2; d++) {
      float2 v = __ldcg((const float2*)(q + (h * G + g) * HD) + lane * D2 + d);
      qv[g][d] = make_float2(v.x * QSCALE, v.y * QSCALE);
    }
  }
  float m[G], l[G], a0[G][D2], a1[G][D2];
#pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = NEG;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D2; d++) a0[g][d] = a1[g][d] = 0.0f;
  }
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LL_ATTN_UNROLL) {
    if (t != t0 + warp) {  // later batches: loaded here (the first came before the wait)
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        bool cached = tu < t1 && tu != fresh;
#pragma unroll
        for (int d = 0; d < D2; d++) {
          kw[u][d] = cached ? kh[(unsigned long long)tu * W + lane * D2 + d] : 0u;
          vw[u][d] = cached ? vh[(unsigned long long)tu * W + lane * D2 + d] : 0u;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      if (tu >= t1) break;
      float k0[D2], k1[D2], v0[D2], v1[D2];
#pragma unroll
      for (int d = 0; d < D2; d++) {
        unsigned kk = tu == fresh ? knew[d] : kw[u][d], vv = tu == fresh ? vnew[d] : vw[u][d];
        k0[d] = ll_lo(kk);
        k1[d] = ll_hi(kk);
        v0[d] = ll_lo(vv);
        v1[d] = ll_hi(vv);
      }
      float sc[G];
#pragma unroll
      for (int g = 0; g < G; g++) {
        sc[g] = fmaf(qv[g][0].x, k0[0], qv[g][0].y * k1[0]);
#pragma unroll
        for (int d = 1; d < D2; d++) sc[g] += fmaf(qv[g][d].x, k0[d], qv[g][d].y * k1[d]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < G; g++) sc[g] += __shfl_xor_sync(LL_FULL, sc[g], o);
      }
#pragma unroll
      for (int g = 0; g < G; g++) {
        float mn = fmaxf(m[g], sc[g]);
        float corr = LL_EXP(m[g] - mn), p = LL_EXP(sc[g] - mn);
        l[g] = fmaf(l[g], corr, p);
#pragma unroll
        for (int d = 0; d < D2; d++) {
          a0[g][d] = fmaf(a0[g][d], corr, p * v0[d]);
          a1[g][d] = fmaf(a1[g][d], corr, p * v1[d]);
        }
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
#pragma unroll
    for (int d = 0; d < D2; d++) wacc[warp][g][lane * D2 + d] = make_float2(a0[g][d], a1[g][d]);
    if (lane == 0) { wm[warp][g] = m[g]; wl[warp][g] = l[g]; }
  }
  __syncthreads();
  // The block's partial per head, merged over warps: [m, l, 0, 0, sums...] at ((h * splits + s) * G + g).
  float* mine = part + ((unsigned long long)h * splits + s) * G * REC;
  for (unsigned i = threadIdx.x; i < G * W; i += LL_THREADS) {
    unsigned g = i / W, d2 = i % W;
    float mx = NEG;
    for (int w = 0; w < LL_WARPS; w++) mx = fmaxf(mx, wm[w][g]);
    float lsum = 0.0f, o0 = 0.0f, o1 = 0.0f;
    for (int w = 0; w < LL_WARPS; w++) {
      float sc = wl[w][g] > 0.0f ? expf(wm[w][g] - mx) : 0.0f;
      lsum = fmaf(wl[w][g], sc, lsum);
      o0 = fmaf(wacc[w][g][d2].x, sc, o0);
      o1 = fmaf(wacc[w][g][d2].y, sc, o1);
    }
    *(float2*)(mine + g * REC + 4 + 2 * d2) = make_float2(o0, o1);
    if (d2 == 0) *(float4*)(mine + g * REC) = make_float4(mx, lsum, 0.0f, 0.0f);
  }
}

// llama_attn(part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits, head_dim): attention
// of the query heads over cache rows 0..=pos (head dim 64 or 128; grouped-query with heads / kv_heads =
// 1, 2, 3, 4 or 8 query heads per KV head; cache layout [kv_head][max_seq][head_dim], bf16). Grid
// (splits, kv_heads): block (s, h) takes an equal share of the rows for every query head of KV head h,
// so each KV row is read once, and writes its softmax partial to `part` (llama_o merges them). Row pos
// is kv_new's (appended to the cache here, when pos < max_seq). One entry per head dim (llama_attn: 64,
// llama_attn_hd128: 128), each with its own registers and shared memory; head_dim must be the entry's.
template <int HD, class AfterWait = LlNoHook>
__device__ __forceinline__ void ll_attn_groups(LlAttnShared<HD>& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new,
                                               unsigned pos, unsigned heads, unsigned kv_heads, unsigned max_seq, unsigned splits,
                                               AfterWait after_wait = AfterWait()) {
  switch (heads / kv_heads) {
    case 1: ll_attn<1, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits, after_wait); break;
    case 2: ll_attn<2, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits, after_wait); break;
    case 3: ll_attn<3, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits, after_wait); break;
    case 4: ll_attn<4, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits, after_wait); break;
    default: ll_attn<8, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits, after_wait); break;
  }
}
#define LL_ATTN_ENTRY(NAME, HD)                                                                                                         \
  extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)                                                              \
      NAME(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new, unsigned pos, unsigned heads,           \
           unsigned kv_heads, unsigned max_seq, unsigned splits, unsigned head_dim) {                                                   \
    __shared__ LlAttnShared<HD> sh;                                                                                                     \
    ll_attn_groups<HD>(sh, part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits);                                    \
    OST_EXIT();                                                                                                                         \
  }
LL_ATTN_ENTRY(llama_attn, 64)
LL_ATTN_ENTRY(llama_attn_hd128, 128)

// The output projection of KV head h's query heads (G of them: columns h*G*HD ..) for 64 rows from
// blockIdx.x * 64, after merging that head's attention partials; adds into x. A warp owns 8 rows of
// PER_ROW = G*HD/8 16-byte columns, E = PER_ROW / 4 of them a lane, all loaded before the wait; lane's
// element e = lane + 32 j is row e / PER_ROW, column e % PER_ROW, so each load instruction reads 512
// contiguous bytes of the weights (one or two runs where a row ends inside it). Where PER_ROW divides
// 32 or 32 divides it, every j's lanes share rows evenly: lanes of one row add their sums (one add per
// row and KV head, or per row and j where a row spans more than 32 columns). Otherwise (three query
// heads a KV head: 24 or 48 columns) a lane keeps a sum per row of the warp's 8 and one reduction over
// the warp gives each row's (ll_rows8_sum): one add per row and KV head. The earlier order for that
// case, four lanes a row (each load instruction 8 runs of 64 bytes, an add per row and j), ran the 3B
// output projection at 16% of 4.8 TB/s (lab/llama-decode.md).
//
// The merge runs in registers. From pos the block knows which splits got rows (ll_attn's rule), so it
// reads only their records: after the wait every thread requests its outputs' weighted sums of every
// live split at once (one L2 round trip), while warp g reduces query head g's maxima and sums across its
// lanes (lane = split) into one scale per split; an output is then one FMA per live split, no exp in the
// loop. Measured on an H200 against staging the records through shared memory and merging there: 4.9
// against 7.1 us back to back at position 1,024 (lab/llama-decode.md).
// A merge's per-split scales of each query head of the group, and each head's sum.
struct LlMergeShared {
  float sc[8][LL_MAX_SPLITS];
  float l[8];
};
template <int HD>
struct __align__(16) LlOShared {
  LlMergeShared mg;
  float a[8 * HD];
};
// The weighted sums of output i (query head i / HD, dim i % HD) in every live split (zeros past). One
// pointer and a constant step a split, so each load is an immediate offset from it: indexed in 32-bit
// unsigned arithmetic, the compiler recomputed every address (about ten instructions a load; with
// the weights' row and column divisions below, 2,000 instructions a warp in the 3B's entry, which
// ran at 16% of 4.8 TB/s issue-bound).
template <int G, int HD>
__device__ __forceinline__ void ll_o_sums(float (&v)[LL_MAX_SPLITS], const float* hp, unsigned i, unsigned end, unsigned live) {
  const float* p = hp + (i / HD) * ll_rec(HD) + 4 + i % HD;
  bool in = i < end;
#pragma unroll
  for (int s = 0; s < LL_MAX_SPLITS; s++) v[s] = (in && (unsigned)s < live) ? __ldcg(p + s * (G * ll_rec(HD))) : 0.0f;
}
// The attention output of KV head h's G query heads, outputs first .. first + LL_THREADS x ITEMS below
// end (<= G x HD), merged from the partials at hp (the head's splits x G records) of the `live` splits that got
// rows, into dst[i - first]: warp g turns query head g's maxima and sums (lane = split) into one scale per
// split, every thread requests its outputs' weighted sums of every live split at once, and an output is
// one FMA per split. After the wait; every thread of the block calls it.
template <int G, int HD, int ITEMS>
__device__ __forceinline__ void ll_merge(LlMergeShared& sh, float* dst, const float* hp, unsigned live, unsigned first, unsigned end) {
  constexpr int REC = ll_rec(HD);
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v[LL_MAX_SPLITS];
  ll_o_sums<G, HD>(v, hp, first + threadIdx.x, end, live);
  if (warp < G) {  // query head `warp`: lane s holds split s's max and sum
    const float* r = hp + (lane * G + warp) * REC;
    float mm = lane < live ? __ldcg(r) : 0.0f, ll = lane < live ? __ldcg(r + 1) : 0.0f;
    float mx = ll > 0.0f ? mm : -3.402823466e38f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(LL_FULL, mx, o));
    float sc = ll > 0.0f ? expf(mm - mx) : 0.0f;
    float lsum = ll_warp_sum(ll * sc);
    sh.sc[warp][lane] = sc;
    if (lane == 0) sh.l[warp] = lsum;
  }
  __syncthreads();
#pragma unroll 1
  for (int it = 0; it < ITEMS; it++) {
    unsigned i = first + threadIdx.x + it * LL_THREADS;
    if (it > 0) ll_o_sums<G, HD>(v, hp, i, end, live);
    if (i < end) {
      unsigned g = i / HD;
      float o = 0.0f;
#pragma unroll
      for (int s = 0; s < LL_MAX_SPLITS; s++) o = fmaf(v[s], sh.sc[g][s], o);
      dst[i - first] = o / sh.l[g];
    }
  }
}
// Element e = lane + 32 j of a warp's rows of PER_ROW 16-byte columns, walked j by j without a
// division: `row` = e / PER_ROW, `col` = e % PER_ROW.
template <int PER_ROW>
struct LlWalk {
  unsigned row, col;
  __device__ __forceinline__ explicit LlWalk(unsigned lane) : row(lane / PER_ROW), col(lane % PER_ROW) {}
  __device__ __forceinline__ void next() {
    row += 32 / PER_ROW;
    col += 32 % PER_ROW;
    if (col >= PER_ROW) {
      col -= PER_ROW;
      row++;
    }
  }
};
// BeforeWait runs after the weights' loads are issued, AfterWait right after the wait (the pack passes
// neither; the decode probe's variants do).
template <int G, int HD, class BeforeWait = LlNoHook, class AfterWait = LlNoHook>
__device__ __forceinline__ void ll_o(LlOShared<HD>& sh, float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned splits,
                                     unsigned pos, unsigned max_seq, BeforeWait before_wait = BeforeWait(), AfterWait after_wait = AfterWait()) {
  constexpr int PER_ROW = G * HD / 8, E = PER_ROW / 4, REC = ll_rec(HD);
  constexpr bool EVEN = 32 % PER_ROW == 0 || PER_ROW % 32 == 0;  // every j's lanes share rows evenly
  constexpr int LPR = PER_ROW < 32 ? PER_ROW : 32;                // lanes that share a row at each j (EVEN)
  unsigned h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = heads * HD;
  unsigned r0 = blockIdx.x * 64 + warp * 8;
  const ll_bf16* wh = wo + h * G * HD;
  uint4 w[E];
  LlWalk<PER_ROW> at(lane);
#pragma unroll
  for (int j = 0; j < E; j++, at.next()) {
    unsigned r = r0 + at.row;
    w[j] = r < m ? ll_ld_early(wh + (unsigned long long)r * k + at.col * 8) : make_uint4(0, 0, 0, 0);
  }
  unsigned n = min(pos, max_seq - 1) + 1;
  unsigned live = ll_live_splits(n, splits);
  before_wait();
  OST_ENTRY();
  after_wait();
  ll_merge<G, HD, (G * HD + LL_THREADS - 1) / LL_THREADS>(sh.mg, sh.a, part + (unsigned long long)h * splits * G * REC, live, 0, G * HD);
  __syncthreads();
  if constexpr (EVEN) {
    LlWalk<PER_ROW> el(lane);
#pragma unroll
    for (int j = 0; j < E; j++, el.next()) {
      unsigned r = r0 + el.row;
      float v = ll_dot8(w[j], sh.a + el.col * 8);
#pragma unroll
      for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(LL_FULL, v, o);
      if (lane % LPR == 0 && r < m) atomicAdd(x + r, v);
    }
  } else {
    float acc[8];
#pragma unroll
    for (int r = 0; r < 8; r++) acc[r] = 0.0f;
    LlWalk<PER_ROW> el(lane);
#pragma unroll
    for (int j = 0; j < E; j++, el.next()) {
      float v = ll_dot8(w[j], sh.a + el.col * 8);
      unsigned own = el.row;  // the warp's row this element is in
      // The rows j's 32 elements span, known at compile time: the sum goes to the lane's own.
#pragma unroll
      for (int r = 32 * j / PER_ROW; r <= (32 * j + 31) / PER_ROW; r++) acc[r] += own == (unsigned)r ? v : 0.0f;
    }
    float v = ll_rows8_sum(acc, lane);
    unsigned r = r0 + lane / 4;
    if (lane % 4 == 0 && r < m) atomicAdd(x + r, v);
  }
}

// llama_o(x, part, wo, m, heads, kv_heads, splits, pos, max_seq, head_dim): merges the attention partials
// of every query head and adds Wo·attn to x (the output projection and the residual; Wo is m x
// heads*head_dim). Grid (ceil(m / 64), kv_heads): block (b, h) takes 64 rows of KV head h's columns; x
// gets one add per row per KV head (float atomics: the order of the kv_heads adds varies). pos and
// max_seq as llama_attn's (they say which splits got rows). One entry per head dim, as llama_attn's.
template <int HD>
__device__ __forceinline__ void ll_o_groups(LlOShared<HD>& sh, float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned kv_heads,
                                            unsigned splits, unsigned pos, unsigned max_seq) {
#ifdef LL_O_GROUP
  if (heads / kv_heads != LL_O_GROUP) __trap();  // a build for another shape
  ll_o<LL_O_GROUP, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq);
#else
  switch (heads / kv_heads) {
    case 1: ll_o<1, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq); break;
    case 2: ll_o<2, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq); break;
    case 3: ll_o<3, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq); break;
    case 4: ll_o<4, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq); break;
    default: ll_o<8, HD>(sh, x, part, wo, m, heads, splits, pos, max_seq); break;
  }
#endif
}
#define LL_O_ENTRY(NAME, HD)                                                                                                            \
  extern "C" __global__ void LL_O_BOUNDS                                                                                               \
      NAME(float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned kv_heads, unsigned splits, unsigned pos, \
           unsigned max_seq, unsigned head_dim) {                                                                                       \
    __shared__ LlOShared<HD> sh;                                                                                                        \
    ll_o_groups<HD>(sh, x, part, wo, m, heads, kv_heads, splits, pos, max_seq);                                                        \
    OST_EXIT();                                                                                                                         \
  }
LL_O_ENTRY(llama_o, 64)
LL_O_ENTRY(llama_o_hd128, 128)

// llama_attn_merge(out, part, heads, kv_heads, splits, pos, max_seq, head_dim): the attention output
// (heads x head_dim floats, query head by query head) merged from llama_attn's partials of the splits
// that got rows at pos, for an output projection that streams its weights (llama_down as x += Wo·out)
// where llama_o's all-weights-in-registers design does not fit the register file (Llama-3.2-3B's W_o
// is 18.9 MB). Grid (kv_heads, ceil(G x head_dim / 256)): block (h, c) merges outputs c x 256 .. of
// KV head h's query heads. Nothing to request before the wait: every input is attention's output.
template <int HD>
__device__ __forceinline__ void ll_merge_groups(LlMergeShared& sh, float* out, const float* part, unsigned heads, unsigned kv_heads, unsigned splits,
                                                unsigned live) {
  unsigned g = heads / kv_heads, h = blockIdx.x, first = blockIdx.y * LL_THREADS, end = min(first + LL_THREADS, g * HD);
  const float* hp = part + (unsigned long long)h * splits * g * ll_rec(HD);
  float* dst = out + h * g * HD + first;
  switch (g) {
    case 1: ll_merge<1, HD, 1>(sh, dst, hp, live, first, end); break;
    case 2: ll_merge<2, HD, 1>(sh, dst, hp, live, first, end); break;
    case 3: ll_merge<3, HD, 1>(sh, dst, hp, live, first, end); break;
    case 4: ll_merge<4, HD, 1>(sh, dst, hp, live, first, end); break;
    default: ll_merge<8, HD, 1>(sh, dst, hp, live, first, end); break;
  }
}
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_attn_merge(float* out, const float* part, unsigned heads, unsigned kv_heads, unsigned splits,
                                                                          unsigned pos, unsigned max_seq, unsigned head_dim) {
  __shared__ LlMergeShared sh;
  unsigned live = ll_live_splits(min(pos, max_seq - 1) + 1, splits);
  OST_ENTRY();
  if (head_dim == 128) ll_merge_groups<128>(sh, out, part, heads, kv_heads, splits, live);
  else ll_merge_groups<64>(sh, out, part, heads, kv_heads, splits, live);
  OST_EXIT();
}

// llama_ffn_in(act, ticket, x, ln, wgu, ffn, hidden, eps): rmsnorm(x)·ln, gate = Wg·xn, up = Wu·xn (wgu:
// the ffn gate rows, then the ffn up rows), act = silu(gate) * up. A tile is P (gate, up) pairs: the P
// gate rows, then the P up rows (two bulk copies); a unit is one row's 2,048-column chunk q (Q of them:
// consumer warp w takes chunk w % Q, its inputs in registers); the producer's lane p adds pair p's
// chunks and computes its SiLU·mul. Launch: LB_THREADS threads and, as dynamic shared memory, the
// stages (LB_STAGES x LB_STAGE_BYTES) then x ⊙ ln (Q x LL_CHUNK floats; src/step.rs,
// stream_norm_shared).
template <int Q>
__device__ __forceinline__ void ll_ffn_in(LbShared& sh, unsigned char* lb_stages, float* act, unsigned* ticket, const float* x, const ll_bf16* ln,
                                          const ll_bf16* wgu, unsigned ffn, unsigned hidden, float eps) {
  float* xs = (float*)(lb_stages + LB_STAGES * LB_STAGE_BYTES);
  unsigned row = hidden * 2, P = min(LB_MAX_UNITS / (2u * Q), LB_STAGE_BYTES / (2 * row)), n_tiles = (ffn + P - 1) / P;
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned p0 = t * P, bytes = min(P, ffn - p0) * row;
    lb_expect(bar, 2 * bytes);
    lb_copy(st, wgu + (unsigned long long)p0 * hidden, bytes, bar);
    lb_copy(st + P * row, wgu + (unsigned long long)(ffn + p0) * hidden, bytes, bar);
  };
  lb_init(sh);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, lb_stages, n_tiles, issue);
  OST_ENTRY();
  if (producer) {
    lb_produce(sh, lb_stages, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      unsigned p = threadIdx.x & 31;
      if (p < P && t * P + p < ffn) {
        float g = red[p * Q], u = red[(P + p) * Q];
#pragma unroll
        for (int q = 1; q < Q; q++) {
          g += red[p * Q + q];
          u += red[(P + p) * Q + q];
        }
        act[t * P + p] = g / (1.0f + expf(-g)) * u;
      }
    });
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = hidden - q * LL_CHUNK;  // hidden > (Q - 1) x 2048
    float xr[64];
    float scale = lb_norm_input<Q>(xr, xs, sh, x, ln, hidden, eps, q);
    lb_consume(sh, lb_stages, 2 * P * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;  // u % Q == q
      if (t * P + r % P >= ffn) return false;
      d = lb_dot(st + r * row + q * LL_CHUNK * 2, xr, lim) * scale;
      return true;
    });
  }
}
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_ffn_in(float* act, unsigned* ticket, const float* x, const ll_bf16* ln,
                                                                                  const ll_bf16* wgu, unsigned ffn, unsigned hidden, float eps) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  if (hidden <= LL_CHUNK) ll_ffn_in<1>(sh, lb_stages, act, ticket, x, ln, wgu, ffn, hidden, eps);
  else ll_ffn_in<2>(sh, lb_stages, act, ticket, x, ln, wgu, ffn, hidden, eps);
  OST_EXIT();
}

// llama_down(x, ticket, wd, act, m, k): x += Wd·act (FFN down projection + residual; k up to 8192). A
// tile is R whole rows (one bulk copy), a unit one row's 2048-column quarter q (consumer warp w takes
// quarter w % Q, its 2048 inputs in registers); the producer's lane r sums row r's quarters and adds
// them into x (one add per row).
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_down(float* x, unsigned* ticket, const ll_bf16* wd, const float* act, unsigned m,
                                                                                unsigned k) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  unsigned row = k * 2, Q = k <= 2048 ? 1 : k <= 4096 ? 2 : 4, R = min(LB_MAX_UNITS / Q, LB_STAGE_BYTES / row), n_tiles = (m + R - 1) / R;
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned bytes = min(R, m - t * R) * row;
    lb_expect(bar, bytes);
    lb_copy(st, wd + (unsigned long long)t * R * k, bytes, bar);
  };
  lb_init(sh);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, lb_stages, n_tiles, issue, LB_DOWN_STATIC_ROUNDS);
  OST_ENTRY();
  if (producer) {
    lb_produce(sh, lb_stages, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      for (unsigned r = threadIdx.x & 31; r < R && t * R + r < m; r += 32) {
        float s = 0.0f;
        for (unsigned q = 0; q < Q; q++) s += red[r * Q + q];
        atomicAdd(x + t * R + r, s);  // the row's only add: a fire-and-forget reduction
      }
    }, LB_DOWN_STATIC_ROUNDS);
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = k > q * LL_CHUNK ? k - q * LL_CHUNK : 0;
    float xr[64];
    lb_input(xr, act + q * LL_CHUNK, lim);
    lb_consume(sh, lb_stages, R * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;  // u % Q == q
      if (t * R + r >= m) return false;
      d = lb_dot(st + r * row + q * LL_CHUNK * 2, xr, lim);
      return true;
    });
  }
  OST_EXIT();
}

// (value, index) a beats (value, index) b: larger value, ties to the lower index; index ~0 is none.
__device__ __forceinline__ bool ll_better(float v, unsigned i, float bv, unsigned bi) {
  return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}

// The warp's best (value, index), on every lane.
__device__ __forceinline__ void ll_warp_best(float& bv, unsigned& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float v = __shfl_xor_sync(LL_FULL, bv, o);
    unsigned i = __shfl_xor_sync(LL_FULL, bi, o);
    if (ll_better(v, i, bv, bi)) { bv = v; bi = i; }
  }
}

// llama_lm_head(logits, part, counter, ticket, token, history, x, ln, emb, vocab, hidden, eps, pos, max_seq):
// final rmsnorm, logits = emb·xn (tied embeddings), and the greedy token: the producer warp of each block
// keeps the best (value, index) of its tiles' rows and writes it to `part`; the last block to finish
// (counted in counter[0], which it resets) reduces them into token[0] and, where pos < max_seq, into
// history[pos] (the tokens of a run of dependent steps, read back once at its end). Ties go to the lower
// index. A unit is one row's 2,048-column chunk (as llama_ffn_in's). Dynamic shared memory as
// llama_ffn_in's.
template <int Q>
__device__ __forceinline__ void ll_lm_head(LbShared& sh, unsigned char* lb_stages, float* logits, float* part, unsigned* counter, unsigned* ticket,
                                           unsigned* token, unsigned* history, const float* x, const ll_bf16* ln, const ll_bf16* emb, unsigned vocab,
                                           unsigned hidden, float eps, unsigned pos, unsigned max_seq) {
  float* xs = (float*)(lb_stages + LB_STAGES * LB_STAGE_BYTES);
  const unsigned NONE = 0xffffffffu;
  unsigned row = hidden * 2, R = min((unsigned)LB_MAX_UNITS / Q, LB_STAGE_BYTES / row), n_tiles = (vocab + R - 1) / R;
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned bytes = min(R, vocab - t * R) * row;
    lb_expect(bar, bytes);
    lb_copy(st, emb + (unsigned long long)t * R * hidden, bytes, bar);
  };
  lb_init(sh);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, lb_stages, n_tiles, issue);
  OST_ENTRY();
  if (producer) {
    float bv = -3.402823466e38f;
    unsigned bi = NONE, lane = threadIdx.x & 31;
    lb_produce(sh, lb_stages, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      for (unsigned r = lane; r < R && t * R + r < vocab; r += 32) {
        float v = red[r * Q];
#pragma unroll
        for (int q = 1; q < Q; q++) v += red[r * Q + q];
        logits[t * R + r] = v;
        if (ll_better(v, t * R + r, bv, bi)) { bv = v; bi = t * R + r; }
      }
    });
    // The block's best, then, in the last block to finish, the grid's.
    ll_warp_best(bv, bi);
    unsigned last = 0;
    if (lane == 0) {
      part[2 * blockIdx.x] = bv;
      part[2 * blockIdx.x + 1] = __uint_as_float(bi);
      __threadfence();
      last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    if (__shfl_sync(LL_FULL, last, 0)) {
      __threadfence();
      bv = -3.402823466e38f;
      bi = NONE;
      for (unsigned b = lane; b < gridDim.x; b += 32) {
        float v = __ldcg(part + 2 * b);
        unsigned i = __float_as_uint(__ldcg(part + 2 * b + 1));
        if (ll_better(v, i, bv, bi)) { bv = v; bi = i; }
      }
      ll_warp_best(bv, bi);
      if (lane == 0) {
        token[0] = bi;
        if (pos < max_seq) history[pos] = bi;
        counter[0] = 0;
      }
    }
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = hidden - q * LL_CHUNK;
    float xr[64];
    float scale = lb_norm_input<Q>(xr, xs, sh, x, ln, hidden, eps, q);
    lb_consume(sh, lb_stages, R * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;
      if (t * R + r >= vocab) return false;
      d = lb_dot(st + r * row + q * LL_CHUNK * 2, xr, lim) * scale;
      return true;
    });
  }
}
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_lm_head(float* logits, float* part, unsigned* counter, unsigned* ticket,
                                                                                   unsigned* token, unsigned* history, const float* x, const ll_bf16* ln,
                                                                                   const ll_bf16* emb, unsigned vocab, unsigned hidden, float eps,
                                                                                   unsigned pos, unsigned max_seq) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  if (hidden <= LL_CHUNK) ll_lm_head<1>(sh, lb_stages, logits, part, counter, ticket, token, history, x, ln, emb, vocab, hidden, eps, pos, max_seq);
  else ll_lm_head<2>(sh, lb_stages, logits, part, counter, ticket, token, history, x, ln, emb, vocab, hidden, eps, pos, max_seq);
  OST_EXIT();
}
