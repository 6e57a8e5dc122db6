// Study variants of the Llama decode kernels (not part of the pack): the attention merging its own
// partials (the last block of each KV head, counted in counter[h], which it resets, writes the head's
// normalised output to `out`) and a plain output projection over that output (one warp per row, the
// whole 4 KB row requested before the wait, one add per row into x: no atomics, no merge after the
// wait). Included by lab/probes/llama_kernels.cu after kernels/llama.cu, whose helpers it uses.

// llama_attn_m(out, part, counter, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits):
// llama_attn, then the merge of KV head h's partials into out[(h * G + g) * 64 + d] by its last block.
template <int G>
__device__ __forceinline__ void lv_merge(float* out, const float* part, unsigned* counter, unsigned splits, bool& last) {
  unsigned h = blockIdx.y;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter + h, 1u) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* recs = part + (unsigned long long)h * splits * G * LL_REC;
  for (unsigned i = threadIdx.x; i < G * LL_HD; i += LL_THREADS) {
    unsigned g = i / LL_HD, d = i % LL_HD;
    float mx = -3.402823466e38f;
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * LL_REC;
      if (__ldcg(r + 1) > 0.0f) mx = fmaxf(mx, __ldcg(r));
    }
    float lsum = 0.0f, o = 0.0f;
#pragma unroll 4
    for (unsigned sp = 0; sp < splits; sp++) {
      const float* r = recs + (sp * G + g) * LL_REC;
      float l = __ldcg(r + 1), sc = l > 0.0f ? expf(__ldcg(r) - mx) : 0.0f;
      lsum = fmaf(l, sc, lsum);
      o = fmaf(__ldcg(r + 4 + d), sc, o);
    }
    out[(h * G + g) * LL_HD + d] = o / lsum;
  }
  if (threadIdx.x == 0) counter[h] = 0;
}

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn_m(float* out, float* part, unsigned* counter, ll_bf16* kcache, ll_bf16* vcache,
                                                                                  const float* q, const ll_bf16* kv_new, unsigned pos, unsigned heads,
                                                                                  unsigned kv_heads, unsigned max_seq, unsigned splits) {
  __shared__ LlAttnShared sh;
  __shared__ bool last;
  switch (heads / kv_heads) {
    case 1: ll_attn<1>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); lv_merge<1>(out, part, counter, splits, last); break;
    case 2: ll_attn<2>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); lv_merge<2>(out, part, counter, splits, last); break;
    case 4: ll_attn<4>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); lv_merge<4>(out, part, counter, splits, last); break;
    default: ll_attn<8>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); lv_merge<8>(out, part, counter, splits, last); break;
  }
  OST_EXIT();
}

// llama_o_dense(x, attn, wo, m, k): x += Wo·attn (k <= 2048). Block of 8 warps, one row each, its 4 KB
// in registers before the wait; attn through shared memory.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_o_dense(float* x, const float* attn, const ll_bf16* wo, unsigned m, unsigned k) {
  __shared__ __align__(16) float xs[LL_CHUNK];
  unsigned r = blockIdx.x * LL_WARPS + (threadIdx.x >> 5);
  uint4 w[8];
  if (r < m) {
    ll_load_chunk(w, wo + (unsigned long long)r * k, 0, k);
  } else {
#pragma unroll
    for (int j = 0; j < 8; j++) w[j] = make_uint4(0, 0, 0, 0);
  }
  OST_ENTRY();
  for (unsigned j = threadIdx.x * 4; j < LL_CHUNK; j += LL_THREADS * 4) *(float4*)(xs + j) = j < k ? __ldcg((const float4*)(attn + j)) : make_float4(0, 0, 0, 0);
  __syncthreads();
  float d = ll_warp_sum(ll_dot_chunk(w, xs, 0));
  if ((threadIdx.x & 31) == 0 && r < m) x[r] += d;
  OST_EXIT();
}

// llama_attn_b: llama_attn with the online softmax taken a batch of rows at a time. The pack's loop
// updates the running max row by row, so each row's shuffle reduction, exp and rescale wait for the
// previous row's; here a warp's eight rows of a batch reduce their scores together (8 x G independent
// shuffle trees), take the batch's max once, and rescale the running sums once per batch.
template <int G>
__device__ __forceinline__ void lv_attn_b(LlAttnShared& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new,
                                          unsigned pos, unsigned kv_heads, unsigned max_seq, unsigned splits) {
  auto& wm = sh.wm;
  auto& wl = sh.wl;
  auto& wacc = sh.wacc;
  const float NEG = -3.402823466e38f;
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned n = min(pos, max_seq - 1) + 1, fresh = pos < max_seq ? pos : 0xffffffffu;
  unsigned live = ll_live_splits(n, splits);
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
    qv[g] = make_float2(v.x * 0.125f, v.y * 0.125f);
  }
  float m[G], l[G], a0[G], a1[G];
#pragma unroll
  for (int g = 0; g < G; g++) { m[g] = NEG; l[g] = 0.0f; a0[g] = 0.0f; a1[g] = 0.0f; }
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LL_ATTN_UNROLL) {
    if (t != t0 + warp) {
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        bool cached = tu < t1 && tu != fresh;
        kw[u] = cached ? kh[(unsigned long long)tu * 32 + lane] : 0u;
        vw[u] = cached ? vh[(unsigned long long)tu * 32 + lane] : 0u;
      }
    }
    float sc[LL_ATTN_UNROLL][G];
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      unsigned kk = tu == fresh ? knew : kw[u];
      float k0 = ll_lo(kk), k1 = ll_hi(kk);
#pragma unroll
      for (int g = 0; g < G; g++) sc[u][g] = fmaf(qv[g].x, k0, qv[g].y * k1);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
#pragma unroll
        for (int g = 0; g < G; g++) sc[u][g] += __shfl_xor_sync(LL_FULL, sc[u][g], o);
      }
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
      float mn = m[g];
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++)
        if (t + u * LL_WARPS < t1) mn = fmaxf(mn, sc[u][g]);
      float corr = LL_EXP(m[g] - mn), ls = 0.0f, s0 = 0.0f, s1 = 0.0f;
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        unsigned vv = tu == fresh ? vnew : vw[u];
        float p = tu < t1 ? LL_EXP(sc[u][g] - mn) : 0.0f;
        ls += p;
        s0 = fmaf(p, ll_lo(vv), s0);
        s1 = fmaf(p, ll_hi(vv), s1);
      }
      l[g] = fmaf(l[g], corr, ls);
      a0[g] = fmaf(a0[g], corr, s0);
      a1[g] = fmaf(a1[g], corr, s1);
      m[g] = mn;
    }
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
    wacc[warp][g][lane] = make_float2(a0[g], a1[g]);
    if (lane == 0) { wm[warp][g] = m[g]; wl[warp][g] = l[g]; }
  }
  __syncthreads();
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

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn_b(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q,
                                                                                  const ll_bf16* kv_new, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                                  unsigned max_seq, unsigned splits) {
  __shared__ LlAttnShared sh;
  switch (heads / kv_heads) {
    case 1: lv_attn_b<1>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 2: lv_attn_b<2>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 4: lv_attn_b<4>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    default: lv_attn_b<8>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
  }
  OST_EXIT();
}

// llama_attn_g: llama_attn with a lane group per query head. The pack gives a lane 2 of a row's 64
// dims for every query head, so each row costs G five-level shuffle reductions and 2G exps a lane;
// here the 32/G lanes of group g hold 2G dims of the row for query head g alone (the groups' loads of
// a row hit the same 128 bytes: one request), so a row costs one log2(32/G)-level reduction and two
// exps a lane, and no group's state needs combining with another's.
template <int W>
__device__ __forceinline__ void lv_ld_words(unsigned (&d)[W], const unsigned* p, bool early) {
  if constexpr (W == 1) {
    d[0] = early ? ll_ld_early_u32(p) : *p;
  } else if constexpr (W == 2) {
    if (early) asm volatile("ld.global.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "l"(p));
    else { uint2 v = *(const uint2*)p; d[0] = v.x; d[1] = v.y; }
  } else {
#pragma unroll
    for (int j = 0; j < W; j += 4) {
      uint4 v = early ? ll_ld_early(p + j) : *(const uint4*)(p + j);
      d[j] = v.x; d[j + 1] = v.y; d[j + 2] = v.z; d[j + 3] = v.w;
    }
  }
}
// Rows a warp of llama_attn_g keeps in flight (the first batch requested before the wait).
#ifndef LV_G_UNROLL
#define LV_G_UNROLL LL_ATTN_UNROLL
#endif
template <int G>
__device__ __forceinline__ void lv_attn_g(LlAttnShared& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new,
                                          unsigned pos, unsigned kv_heads, unsigned max_seq, unsigned splits) {
  constexpr int LPH = 32 / G, DPL = LL_HD / LPH, W = DPL / 2;  // lanes per head, dims and words per lane
  auto& wm = sh.wm;
  auto& wl = sh.wl;
  auto& wacc = sh.wacc;
  const float NEG = -3.402823466e38f;
  unsigned h = blockIdx.y, s = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = lane / LPH, sub = lane % LPH;
  unsigned n = min(pos, max_seq - 1) + 1, fresh = pos < max_seq ? pos : 0xffffffffu;
  unsigned live = ll_live_splits(n, splits);
  unsigned chunk = (n + live - 1) / live;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  const unsigned* kh = (const unsigned*)(kcache + (unsigned long long)h * max_seq * LL_HD) + sub * W;
  const unsigned* vh = (const unsigned*)(vcache + (unsigned long long)h * max_seq * LL_HD) + sub * W;
  unsigned kw[LV_G_UNROLL][W], vw[LV_G_UNROLL][W];
#pragma unroll
  for (int u = 0; u < LV_G_UNROLL; u++) {
    unsigned tu = t0 + warp + u * LL_WARPS;
    bool cached = tu < t1 && tu != fresh;
#pragma unroll
    for (int j = 0; j < W; j++) kw[u][j] = vw[u][j] = 0u;
    if (cached) {
      lv_ld_words<W>(kw[u], kh + (unsigned long long)tu * 32, true);
      lv_ld_words<W>(vw[u], vh + (unsigned long long)tu * 32, true);
    }
  }
  for (unsigned t = t0 + LL_WARPS * LV_G_UNROLL + threadIdx.x / 2; t < t1; t += LL_THREADS / 2)
    ll_prefetch_l2((const unsigned*)(((threadIdx.x & 1) ? vcache : kcache) + (unsigned long long)h * max_seq * LL_HD) + (unsigned long long)t * 32);
  OST_ENTRY();
  bool owns_fresh = fresh >= t0 && fresh < t1;
  unsigned knew[W], vnew[W];
#pragma unroll
  for (int j = 0; j < W; j++) knew[j] = vnew[j] = 0u;
  if (owns_fresh) {
    const unsigned* kn = (const unsigned*)(kv_new + h * LL_HD) + sub * W;
    const unsigned* vn = (const unsigned*)(kv_new + (kv_heads + h) * LL_HD) + sub * W;
#pragma unroll
    for (int j = 0; j < W; j++) { knew[j] = __ldcg(kn + j); vnew[j] = __ldcg(vn + j); }
    if (warp == 0 && grp == 0) {
      unsigned* kd = (unsigned*)(kcache + ((unsigned long long)h * max_seq + fresh) * LL_HD) + sub * W;
      unsigned* vd = (unsigned*)(vcache + ((unsigned long long)h * max_seq + fresh) * LL_HD) + sub * W;
#pragma unroll
      for (int j = 0; j < W; j++) { kd[j] = knew[j]; vd[j] = vnew[j]; }
    }
  }
  float qv[DPL];
  const float* qh = q + (h * G + grp) * LL_HD + sub * DPL;
#pragma unroll
  for (int i = 0; i < DPL; i++) qv[i] = __ldcg(qh + i) * 0.125f;  // 1 / sqrt(64), exact
  float m = NEG, l = 0.0f, acc[DPL];
#pragma unroll
  for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
  for (unsigned t = t0 + warp; t < t1; t += LL_WARPS * LV_G_UNROLL) {
    if (t != t0 + warp) {
#pragma unroll
      for (int u = 0; u < LV_G_UNROLL; u++) {
        unsigned tu = t + u * LL_WARPS;
        bool cached = tu < t1 && tu != fresh;
#pragma unroll
        for (int j = 0; j < W; j++) kw[u][j] = vw[u][j] = 0u;
        if (cached) {
          lv_ld_words<W>(kw[u], kh + (unsigned long long)tu * 32, false);
          lv_ld_words<W>(vw[u], vh + (unsigned long long)tu * 32, false);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < LV_G_UNROLL; u++) {
      unsigned tu = t + u * LL_WARPS;
      if (tu >= t1) break;
      bool is_new = tu == fresh;
      float sc = 0.0f;
#pragma unroll
      for (int j = 0; j < W; j++) {
        unsigned kk = is_new ? knew[j] : kw[u][j];
        sc = fmaf(qv[2 * j], ll_lo(kk), sc);
        sc = fmaf(qv[2 * j + 1], ll_hi(kk), sc);
      }
#pragma unroll
      for (int o = LPH / 2; o > 0; o >>= 1) sc += __shfl_xor_sync(LL_FULL, sc, o);
      float mn = fmaxf(m, sc), corr = LL_EXP(m - mn), p = LL_EXP(sc - mn);
      l = fmaf(l, corr, p);
#pragma unroll
      for (int j = 0; j < W; j++) {
        unsigned vv = is_new ? vnew[j] : vw[u][j];
        acc[2 * j] = fmaf(acc[2 * j], corr, p * ll_lo(vv));
        acc[2 * j + 1] = fmaf(acc[2 * j + 1], corr, p * ll_hi(vv));
      }
      m = mn;
    }
  }
  float* wa = &wacc[warp][grp][0].x + sub * DPL;
#pragma unroll
  for (int i = 0; i < DPL; i++) wa[i] = acc[i];
  if (sub == 0) { wm[warp][grp] = m; wl[warp][grp] = l; }
  __syncthreads();
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

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS) llama_attn_g(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q,
                                                                                  const ll_bf16* kv_new, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                                  unsigned max_seq, unsigned splits) {
  __shared__ LlAttnShared sh;
  switch (heads / kv_heads) {
    case 1: lv_attn_g<1>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 2: lv_attn_g<2>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    case 4: lv_attn_g<4>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
    default: lv_attn_g<8>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, splits); break;
  }
  OST_EXIT();
}

// llama_ffn_in_pf(act, ticket, x, ln, wgu, wd, ffn, hidden, eps, down_rows, pf_rounds): llama_ffn_in
// that, once its tickets run out (its last tiles still in its ring), asks L2 for the first `pf_rounds`
// rounds of the down projection's static tiles — block b's tiles b, b + G, … as llama_down cuts them
// (whole rows filling a stage) — one bulk prefetch each, so that DRAM keeps streaming while the grid
// drains and llama_down's pre-wait copies find their bytes in L2. (A prefetch is a hint: nothing
// waits for it, and a grid of another size only prefetches other tiles.)
template <class Issue, class Epi, class Done>
__device__ __forceinline__ void lv_produce(LbShared& sh, unsigned char* stages, unsigned n_tiles, unsigned* ticket, Issue issue, Epi epi, Done on_done) {
  unsigned lane = threadIdx.x & 31, rounds = lb_rounds(n_tiles), base = rounds * gridDim.x, n_dyn = n_tiles - base;
  unsigned raw = lane == 0 ? atomicAdd(ticket, 1u) : 0u, i = rounds;
  while (true) {
    unsigned v = __shfl_sync(LL_FULL, raw, 0), s = i % LB_STAGES;
    bool more = v < n_dyn;
    if (lane == 0 && v == n_dyn + gridDim.x - 1) atomicExch(ticket, 0u);
    int done = -1;
    if (i >= LB_STAGES) {
      lb_wait(&sh.empty[s], (i / LB_STAGES - 1) & 1);
      done = sh.tile[s];
    }
    __syncwarp();
    if (lane == 0) {
      if (more) {
        raw = atomicAdd(ticket, 1u);
        sh.tile[s] = (int)(base + v);
        issue(base + v, stages + s * LB_STAGE_BYTES, &sh.full[s]);
      } else {
        sh.tile[s] = -1;
        lb_arrive(&sh.full[s]);
      }
    }
    if (!more) on_done();
    if (done >= 0) epi((unsigned)done, sh.red[(i - LB_STAGES) % (2 * LB_STAGES)]);
    if (!more) break;
    i++;
  }
  for (unsigned j = i >= LB_STAGES ? i - LB_STAGES + 1 : 0; j < i; j++) {
    unsigned s = j % LB_STAGES;
    lb_wait(&sh.empty[s], (j / LB_STAGES) & 1);
    epi((unsigned)sh.tile[s], sh.red[j % (2 * LB_STAGES)]);
  }
}

extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_ffn_in_pf(float* act, unsigned* ticket, const float* x, const ll_bf16* ln,
                                                                                     const ll_bf16* wgu, const ll_bf16* wd, unsigned ffn, unsigned hidden,
                                                                                     float eps, unsigned down_rows, unsigned pf_rounds) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  __shared__ __align__(16) float xs[LL_CHUNK];
  unsigned row = hidden * 2, P = min(LB_MAX_UNITS / 2u, LB_STAGE_BYTES / (2 * row)), n_tiles = (ffn + P - 1) / P;
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
    // The down projection's tiles, as llama_down cuts them: R rows of ffn bf16 each.
    unsigned drow = ffn * 2, Q = ffn <= 2048 ? 1 : ffn <= 4096 ? 2 : 4, R = min(LB_MAX_UNITS / Q, LB_STAGE_BYTES / drow);
    unsigned d_tiles = (down_rows + R - 1) / R;
    auto prefetch = [&]() {
      unsigned r = threadIdx.x & 31, t = blockIdx.x + r * gridDim.x;
      if (r < pf_rounds && t < d_tiles) {
        unsigned bytes = min(R, down_rows - t * R) * drow;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wd + (unsigned long long)t * R * ffn), "r"(bytes) : "memory");
      }
    };
    lv_produce(
        sh, lb_stages, n_tiles, ticket, issue,
        [&](unsigned t, const float* red) {
          unsigned p = threadIdx.x & 31;
          if (p < P && t * P + p < ffn) {
            float g = red[p], u = red[P + p];
            act[t * P + p] = g / (1.0f + expf(-g)) * u;
          }
        },
        prefetch);
  } else {
    float xr[64];
    float scale = lb_norm_input(xr, xs, sh, x, ln, hidden, eps);
    lb_consume(sh, lb_stages, 2 * P, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      if (t * P + u % P >= ffn) return false;
      d = lb_dot(st + u * row, xr, hidden) * scale;
      return true;
    });
  }
  OST_EXIT();
}
