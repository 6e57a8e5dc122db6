// Study variant (lab/llama-decode-boundaries.md, version 21): every layer of the Llama-3.2-1B step as ONE
// persistent kernel, `llama_layers_mk`, launched cooperative (the driver refuses it unless all its blocks
// are resident at once), one block an SM. Included by llama_kernels.cu after the pack.
//
// Each block is the pack's streaming block (8 consumer warps and a producer warp, a ring of bulk-copy
// stages), but its producer streams the block's tiles of the WHOLE step, layer after layer: QKV, the
// output projection, gate/up, down, then the next layer's QKV. Weights depend on nothing, so the producer
// never waits on data, only for a free stage; only the consumers wait, on counters in global memory:
//   - QKV (384 tiles of 4 RoPE pairs: rows j..j+3 and j+32..j+35 of a head): warp w takes row w, warps w
//     and w + 4 meet on a named barrier, warp w applies RoPE and writes q or the new K/V row, then warp
//     0 counts the tile on its KV head's counter (48 a layer: 6 heads x 8 tiles);
//   - attention: block b < 8 x MK_S is split b % MK_S of KV head b / MK_S; it asks for its cache rows
//     first, then waits for its head's QKV count only (per-head hand-off), writes its softmax record
//     and counts it on the head's attention counter;
//   - the output projection (W_o laid out [KV head][row][256 columns]: 256 tiles of 64 rows of one KV
//     head): a tile waits for its head's attention only, merges that head's records in registers
//     (every warp, one L2 round trip) and adds its rows into x;
//   - gate/up and down wait for the whole previous phase (every row needs all of x, every row of down
//     all of `act`): a block counts itself once a phase; so does the next layer's QKV.
// Tiles of a layer are numbered QKV, O, gate/up, down (3,712) and tile i of the step goes to block
// i mod G, so a block's share differs by at most one a phase and evens out over phases.
// Counts are release reductions, waits acquire loads by one thread a block. Counters live one to a
// 128-byte line; the last block to finish zeroes them. A wait that polls more
// than MK_SPIN rounds gives up and counts itself (the check fails on it), so a bug cannot hang the GPU.
// Fixed shape: hidden 2048, 32 query heads over 8 KV heads of dim 64, FFN 8192 (the pack's 1B).

#ifndef MK_STAGES
#define MK_STAGES 6
#endif
#ifndef MK_SPIN
#define MK_SPIN (1u << 22)
#endif
#define MK_STAGE 32768u
#define MK_S 16
#define MK_H 2048u
#define MK_F 8192u
#define MK_NH 32u
#define MK_NKV 8u
#define MK_HD 64u
#define MK_GQ 4u
#define MK_REC 68u
#define MK_QKV_TILES 384u
#define MK_O_TILES 256u
#define MK_GU_TILES 2048u
#define MK_DN_TILES 1024u
#define MK_NT (MK_QKV_TILES + MK_O_TILES + MK_GU_TILES + MK_DN_TILES)
#define MK_THREADS (LB_THREADS)
#define MK_MAX_LAYERS 16
// Counters a layer: 0-7 QKV per KV head, 8-15 attention per KV head, then x read, O, gate/up, down.
#define MK_X_READ 16u
#define MK_O_DONE 17u
#define MK_GU_DONE 18u
#define MK_DN_DONE 19u
#define MK_WORDS 20u
#define MK_LINE 32u
#define MK_SYNC_WORDS ((MK_MAX_LAYERS * MK_WORDS + 2) * MK_LINE)
#define MK_SMEM (MK_STAGES * MK_STAGE + MK_H * 4)

struct MkParams {
  const ll_bf16 *wqkv[MK_MAX_LAYERS], *woh[MK_MAX_LAYERS], *wgu[MK_MAX_LAYERS], *wd[MK_MAX_LAYERS], *ln1[MK_MAX_LAYERS], *ln2[MK_MAX_LAYERS];
  ll_bf16 *kc[MK_MAX_LAYERS], *vc[MK_MAX_LAYERS];
  float *x, *q, *part, *act;
  ll_bf16* kv_new;
  const float* freq;
  unsigned* sync;  // MK_MAX_LAYERS x MK_WORDS counters, then `finished`, then `gave up` (never reset)
  unsigned layers, pos, max_seq;
  float eps;
};

struct MkShared {
  unsigned long long full[MK_STAGES], empty[MK_STAGES];
  float pairv[2][LB_CONSUMERS];
  LbShared lb;  // lb_norm_input's per-warp sums
  float wm[LB_CONSUMERS][MK_GQ], wl[LB_CONSUMERS][MK_GQ];
  float2 wacc[LB_CONSUMERS][MK_GQ][32];
};

__device__ __forceinline__ unsigned* mk_ctr(const MkParams& p, unsigned l, unsigned k) { return p.sync + (l * MK_WORDS + k) * MK_LINE; }
__device__ __forceinline__ unsigned* mk_finished(const MkParams& p) { return p.sync + MK_MAX_LAYERS * MK_WORDS * MK_LINE; }
__device__ __forceinline__ unsigned* mk_gave_up(const MkParams& p) { return p.sync + (MK_MAX_LAYERS * MK_WORDS + 1) * MK_LINE; }
__device__ __forceinline__ unsigned mk_off(unsigned ph) { return ph == 0 ? 0u : ph == 1 ? MK_QKV_TILES : ph == 2 ? MK_QKV_TILES + MK_O_TILES : MK_NT - MK_DN_TILES; }
__device__ __forceinline__ unsigned mk_count(unsigned ph) { return ph == 0 ? MK_QKV_TILES : ph == 1 ? MK_O_TILES : ph == 2 ? MK_GU_TILES : MK_DN_TILES; }
// The block's first tile of phase ph of layer l (then every gridDim.x-th).
__device__ __forceinline__ unsigned mk_first(unsigned l, unsigned ph) {
  unsigned g0 = (l * MK_NT + mk_off(ph)) % gridDim.x;
  return (blockIdx.x + gridDim.x - g0) % gridDim.x;
}
__device__ __forceinline__ unsigned mk_load_acquire(const unsigned* c) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
  return v;
}
// Consumers: thread 0 polls until *a >= ta and *b >= tb, then the consumers' barrier. -DMK_NO_WAIT
// builds a diagnostic that never polls: its results are wrong (its check fails), its time is what the
// kernel streams with every hand-off free.
__device__ __forceinline__ void mk_wait(const MkParams& p, const unsigned* a, unsigned ta, const unsigned* b = nullptr, unsigned tb = 0) {
#ifdef MK_NO_WAIT
  if (false) {
#else
  if (threadIdx.x == 0) {
#endif
    for (unsigned n = 0;; n++) {
      if (mk_load_acquire(a) >= ta && (!b || mk_load_acquire(b) >= tb)) break;
      if (n == MK_SPIN) { atomicAdd(mk_gave_up(p), 1u); break; }
    }
  }
  asm volatile("bar.sync 1, %0;" ::"r"(LB_CONSUMERS * 32) : "memory");
}
// One count on c, ordered after every write the calling thread has seen (its own, and those a barrier
// ordered before it): a release reduction (MEMBAR.ALL.GPU then RED). Not __threadfence() then an add:
// that fence is MEMBAR.SC.GPU with an L1 invalidation, and a fence a tile cost the fused FFN 9 µs a
// layer (lab/llama-decode-boundaries.md, H100 run 5).
__device__ __forceinline__ void mk_release_add(unsigned* c) { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(c) : "memory"); }
// Consumers: every consumer's writes so far, then one count on c.
__device__ __forceinline__ void mk_signal(unsigned* c) {
  asm volatile("bar.sync 1, %0;" ::"r"(LB_CONSUMERS * 32) : "memory");
  if (threadIdx.x == 0) mk_release_add(c);
}

// The producer's lane 0: tile t of phase ph of layer l into a stage.
__device__ __forceinline__ void mk_issue(const MkParams& p, unsigned l, unsigned ph, unsigned t, unsigned char* st, unsigned long long* bar) {
  lb_expect(bar, MK_STAGE);
  if (ph == 0) {
    const ll_bf16* r = p.wqkv[l] + (unsigned long long)((t / 8) * MK_HD + (t % 8) * 4) * MK_H;
    lb_copy(st, r, MK_STAGE / 2, bar);
    lb_copy(st + MK_STAGE / 2, r + 32ull * MK_H, MK_STAGE / 2, bar);
  } else if (ph == 1) {
    lb_copy(st, p.woh[l] + (unsigned long long)t * 64 * 256, MK_STAGE, bar);
  } else if (ph == 2) {
    const ll_bf16* g = p.wgu[l] + (unsigned long long)t * 4 * MK_H;
    lb_copy(st, g, MK_STAGE / 2, bar);
    lb_copy(st + MK_STAGE / 2, g + (unsigned long long)MK_F * MK_H, MK_STAGE / 2, bar);
  } else {
    lb_copy(st, p.wd[l] + (unsigned long long)t * 2 * MK_F, MK_STAGE, bar);
  }
}

// Attention split s of KV head h (the pack's ll_attn for 4 query heads of dim 64, the consumers only).
__device__ __forceinline__ void mk_attn(const MkParams& p, MkShared& sh, unsigned l, unsigned h, unsigned s, unsigned n, unsigned live) {
  const float NEG = -3.402823466e38f, QS = 0.125f;
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned fresh = p.pos < p.max_seq ? p.pos : 0xffffffffu;
  unsigned chunk = (n + live - 1) / live, t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  unsigned* kh = (unsigned*)(p.kc[l] + (unsigned long long)h * p.max_seq * MK_HD);
  unsigned* vh = (unsigned*)(p.vc[l] + (unsigned long long)h * p.max_seq * MK_HD);
  unsigned kw[LL_ATTN_UNROLL], vw[LL_ATTN_UNROLL];
#pragma unroll
  for (int u = 0; u < LL_ATTN_UNROLL; u++) {
    unsigned tu = t0 + warp + u * LB_CONSUMERS;
    bool cached = tu < t1 && tu != fresh;
    kw[u] = cached ? ll_ld_early_u32(kh + (unsigned long long)tu * 32 + lane) : 0u;
    vw[u] = cached ? ll_ld_early_u32(vh + (unsigned long long)tu * 32 + lane) : 0u;
  }
  for (unsigned i = (t0 + LB_CONSUMERS * LL_ATTN_UNROLL) * 2 + threadIdx.x; i < t1 * 2; i += LB_CONSUMERS * 32)
    ll_prefetch_l2(((i & 1) ? vh : kh) + (unsigned long long)(i / 2) * 32);
  mk_wait(p, mk_ctr(p, l, h), (MK_GQ + 2) * 8);  // the KV head's (4 query + K + V heads) x 8 QKV tiles
  bool owns_fresh = fresh >= t0 && fresh < t1;
  unsigned knew = 0u, vnew = 0u;
  if (owns_fresh) {
    knew = __ldcg((const unsigned*)(p.kv_new + h * MK_HD) + lane);
    vnew = __ldcg((const unsigned*)(p.kv_new + (MK_NKV + h) * MK_HD) + lane);
    if (warp == 0) {
      kh[(unsigned long long)fresh * 32 + lane] = knew;
      vh[(unsigned long long)fresh * 32 + lane] = vnew;
    }
  }
  float2 qv[MK_GQ];
#pragma unroll
  for (int g = 0; g < (int)MK_GQ; g++) {
    float2 v = __ldcg((const float2*)(p.q + (h * MK_GQ + g) * MK_HD) + lane);
    qv[g] = make_float2(v.x * QS, v.y * QS);
  }
  float m[MK_GQ], lsum[MK_GQ], a0[MK_GQ], a1[MK_GQ];
#pragma unroll
  for (int g = 0; g < (int)MK_GQ; g++) { m[g] = NEG; lsum[g] = 0.0f; a0[g] = a1[g] = 0.0f; }
  for (unsigned t = t0 + warp; t < t1; t += LB_CONSUMERS * LL_ATTN_UNROLL) {
    if (t != t0 + warp) {
#pragma unroll
      for (int u = 0; u < LL_ATTN_UNROLL; u++) {
        unsigned tu = t + u * LB_CONSUMERS;
        bool cached = tu < t1 && tu != fresh;
        kw[u] = cached ? kh[(unsigned long long)tu * 32 + lane] : 0u;
        vw[u] = cached ? vh[(unsigned long long)tu * 32 + lane] : 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < LL_ATTN_UNROLL; u++) {
      unsigned tu = t + u * LB_CONSUMERS;
      if (tu >= t1) break;
      unsigned kk = tu == fresh ? knew : kw[u], vv = tu == fresh ? vnew : vw[u];
      float k0 = ll_lo(kk), k1 = ll_hi(kk), v0 = ll_lo(vv), v1 = ll_hi(vv);
      float sc[MK_GQ];
#pragma unroll
      for (int g = 0; g < (int)MK_GQ; g++) sc[g] = fmaf(qv[g].x, k0, qv[g].y * k1);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int g = 0; g < (int)MK_GQ; g++) sc[g] += __shfl_xor_sync(LL_FULL, sc[g], o);
      }
#pragma unroll
      for (int g = 0; g < (int)MK_GQ; g++) {
        float mn = fmaxf(m[g], sc[g]), corr = LL_EXP(m[g] - mn), pr = LL_EXP(sc[g] - mn);
        lsum[g] = fmaf(lsum[g], corr, pr);
        a0[g] = fmaf(a0[g], corr, pr * v0);
        a1[g] = fmaf(a1[g], corr, pr * v1);
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < (int)MK_GQ; g++) {
    sh.wacc[warp][g][lane] = make_float2(a0[g], a1[g]);
    if (lane == 0) { sh.wm[warp][g] = m[g]; sh.wl[warp][g] = lsum[g]; }
  }
  asm volatile("bar.sync 1, %0;" ::"r"(LB_CONSUMERS * 32) : "memory");
  float* mine = p.part + ((unsigned long long)h * MK_S + s) * MK_GQ * MK_REC;
  for (unsigned i = threadIdx.x; i < MK_GQ * 32; i += LB_CONSUMERS * 32) {
    unsigned g = i / 32, d2 = i % 32;
    float mx = NEG;
    for (int w = 0; w < LB_CONSUMERS; w++) mx = fmaxf(mx, sh.wm[w][g]);
    float ls = 0.0f, o0 = 0.0f, o1 = 0.0f;
    for (int w = 0; w < LB_CONSUMERS; w++) {
      float c = sh.wl[w][g] > 0.0f ? expf(sh.wm[w][g] - mx) : 0.0f;
      ls = fmaf(sh.wl[w][g], c, ls);
      o0 = fmaf(sh.wacc[w][g][d2].x, c, o0);
      o1 = fmaf(sh.wacc[w][g][d2].y, c, o1);
    }
    *(float2*)(mine + g * MK_REC + 4 + 2 * d2) = make_float2(o0, o1);
    if (d2 == 0) *(float4*)(mine + g * MK_REC) = make_float4(mx, ls, 0.0f, 0.0f);
  }
  mk_signal(mk_ctr(p, l, 8 + h));  // its barrier also keeps sh.w* until every thread has read them
}

// The lane's 8 attention outputs of KV head h (query head lane / 8, dims (lane % 8) x 8 ..), merged in
// registers from the live splits' records: every load in one round trip.
__device__ __forceinline__ void mk_merge(const MkParams& p, unsigned h, unsigned live, float (&a)[8]) {
  const float NEG = -3.402823466e38f;
  unsigned lane = threadIdx.x & 31, g = lane / 8, d0 = (lane % 8) * 8;
  float m[MK_S], l[MK_S];
  float4 u[MK_S], v[MK_S];
#pragma unroll
  for (int s = 0; s < MK_S; s++) {
    const float* rec = p.part + (((unsigned long long)h * MK_S + s) * MK_GQ + g) * MK_REC;
    bool in = (unsigned)s < live;
    float2 ml = in ? __ldcg((const float2*)rec) : make_float2(NEG, 0.0f);
    m[s] = ml.x;
    l[s] = ml.y;
    u[s] = in ? __ldcg((const float4*)(rec + 4 + d0)) : make_float4(0, 0, 0, 0);
    v[s] = in ? __ldcg((const float4*)(rec + 8 + d0)) : make_float4(0, 0, 0, 0);
  }
  float mx = NEG;
#pragma unroll
  for (int s = 0; s < MK_S; s++) mx = l[s] > 0.0f ? fmaxf(mx, m[s]) : mx;
  float ls = 0.0f, o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
  for (int s = 0; s < MK_S; s++) {
    float c = l[s] > 0.0f ? expf(m[s] - mx) : 0.0f;
    ls = fmaf(l[s], c, ls);
    o[0] = fmaf(u[s].x, c, o[0]); o[1] = fmaf(u[s].y, c, o[1]); o[2] = fmaf(u[s].z, c, o[2]); o[3] = fmaf(u[s].w, c, o[3]);
    o[4] = fmaf(v[s].x, c, o[4]); o[5] = fmaf(v[s].y, c, o[5]); o[6] = fmaf(v[s].z, c, o[6]); o[7] = fmaf(v[s].w, c, o[7]);
  }
  float inv = 1.0f / ls;
#pragma unroll
  for (int k = 0; k < 8; k++) a[k] = o[k] * inv;
}

// Warps w and w + 4 hand their row's dot product to warp w (named barrier 2 + w % 4); returns the
// partner's on warp w < 4.
__device__ __forceinline__ float mk_pair(MkShared& sh, unsigned i, float d) {
  unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh.pairv[i & 1][w] = d;
  asm volatile("bar.sync %0, 64;" ::"r"(2 + (w & 3)) : "memory");
  return w < 4 ? sh.pairv[i & 1][w + 4] : 0.0f;
}

// A consumer's ring slot i: wait for its bytes (mk_take), free it once read (mk_free).
__device__ __forceinline__ const unsigned char* mk_take(MkShared& sh, const unsigned char* stages, unsigned i) {
  lb_wait(&sh.full[i % MK_STAGES], (i / MK_STAGES) & 1);
  return stages + (i % MK_STAGES) * MK_STAGE;
}
__device__ __forceinline__ void mk_free(MkShared& sh, unsigned i) { lb_arrive(&sh.empty[i % MK_STAGES]); }

__device__ __forceinline__ void mk_consume(const MkParams& p, MkShared& sh, const unsigned char* stages, float* xs) {
  unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5, G = gridDim.x, i = 0;
  unsigned n = min(p.pos, p.max_seq - 1) + 1, live = ll_live_splits(n, MK_S);
  float xr[64];
  for (unsigned l = 0; l < p.layers; l++) {
    if (l > 0) mk_wait(p, mk_ctr(p, l - 1, MK_DN_DONE), G);
    float scale = lb_norm_input<1>(xr, xs, sh.lb, p.x, p.ln1[l], MK_H, p.eps, 0);
    if (threadIdx.x == 0) mk_release_add(mk_ctr(p, l, MK_X_READ));  // after the norm's barrier: every read of x
    for (unsigned t = mk_first(l, 0); t < MK_QKV_TILES; t += G, i++) {
      float d = lb_dot(mk_take(sh, stages, i) + w * 4096, xr, MK_H) * scale;
      mk_free(sh, i);
      float b = mk_pair(sh, i, d);
      if (w < 4) {  // warps 0-3 write the tile's four pairs, meet (named barrier 6), and warp 0 counts the tile
        unsigned head = t / 8, j = (t % 8) * 4 + w;
        if (lane == 0) ll_qkv_pair_out(p.q, p.kv_new, d, b, head, j, p.pos, __ldg(p.freq + j), MK_NH, MK_NKV, MK_HD);
        asm volatile("bar.sync 6, 128;" ::: "memory");
        unsigned grp = head < MK_NH ? head / MK_GQ : head < MK_NH + MK_NKV ? head - MK_NH : head - MK_NH - MK_NKV;
        if (w == 0 && lane == 0) mk_release_add(mk_ctr(p, l, grp));
      }
    }
    if (blockIdx.x < MK_NKV * MK_S && blockIdx.x % MK_S < live) mk_attn(p, sh, l, blockIdx.x / MK_S, blockIdx.x % MK_S, n, live);
    for (unsigned t = mk_first(l, 1); t < MK_O_TILES; t += G, i++) {
      unsigned h = t / 32, r0 = (t % 32) * 64 + w * 8;
      mk_wait(p, mk_ctr(p, l, 8 + h), live, mk_ctr(p, l, MK_X_READ), G);
      float a[8], acc[8];
      mk_merge(p, h, live, a);
      const unsigned char* st = mk_take(sh, stages, i);
#pragma unroll
      for (int r = 0; r < 8; r++) acc[r] = ll_dot8(((const uint4*)(st + (w * 8 + r) * 512))[lane], a);
      mk_free(sh, i);
      float v = ll_rows8_sum(acc, lane);
      if (lane % 4 == 0) atomicAdd(p.x + r0 + lane / 4, v);
    }
    mk_signal(mk_ctr(p, l, MK_O_DONE));
    mk_wait(p, mk_ctr(p, l, MK_O_DONE), G);
    scale = lb_norm_input<1>(xr, xs, sh.lb, p.x, p.ln2[l], MK_H, p.eps, 0);
    for (unsigned t = mk_first(l, 2); t < MK_GU_TILES; t += G, i++) {
      float d = lb_dot(mk_take(sh, stages, i) + w * 4096, xr, MK_H) * scale;
      mk_free(sh, i);
      float u = mk_pair(sh, i, d);
      if (w < 4 && lane == 0) p.act[t * 4 + w] = d / (1.0f + expf(-d)) * u;
    }
    mk_signal(mk_ctr(p, l, MK_GU_DONE));
    mk_wait(p, mk_ctr(p, l, MK_GU_DONE), G);
    lb_input(xr, p.act + (w & 3) * MK_H, MK_H);
    for (unsigned t = mk_first(l, 3); t < MK_DN_TILES; t += G, i++) {
      float d = lb_dot(mk_take(sh, stages, i) + (w >> 2) * 16384 + (w & 3) * 4096, xr, MK_H);
      mk_free(sh, i);
      if (lane == 0) atomicAdd(p.x + t * 2 + (w >> 2), d);
    }
    mk_signal(mk_ctr(p, l, MK_DN_DONE));
  }
  // The last block to get here zeroes the counters: every block is past its last wait.
  if (threadIdx.x == 0) {
    unsigned before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(mk_finished(p)) : "memory");
    if (before == G - 1) {
      for (unsigned c = 0; c < p.layers * MK_WORDS; c++) p.sync[c * MK_LINE] = 0u;
      *mk_finished(p) = 0u;
    }
  }
}

__device__ __forceinline__ void mk_produce(const MkParams& p, MkShared& sh, unsigned char* stages) {
  unsigned i = 0;
  for (unsigned l = 0; l < p.layers; l++)
    for (unsigned ph = 0; ph < 4; ph++)
      for (unsigned t = mk_first(l, ph); t < mk_count(ph); t += gridDim.x, i++) {
        unsigned s = i % MK_STAGES;
        if (i >= MK_STAGES) lb_wait(&sh.empty[s], (i / MK_STAGES - 1) & 1);
        mk_issue(p, l, ph, t, stages + s * MK_STAGE, &sh.full[s]);
      }
}

extern "C" __global__ void __launch_bounds__(MK_THREADS, 1) llama_layers_mk(MkParams p) {
  extern __shared__ __align__(128) unsigned char mk_stages[];
  __shared__ MkShared sh;
  float* xs = (float*)(mk_stages + MK_STAGES * MK_STAGE);
  if (threadIdx.x == 0) {
    for (int s = 0; s < MK_STAGES; s++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lb_smem(&sh.full[s])), "r"(1) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lb_smem(&sh.empty[s])), "r"(LB_CONSUMERS * 32) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x >= LB_CONSUMERS * 32) {
    // The weights depend on nothing: the producer streams from the start, before the grid's wait.
    if (threadIdx.x == LB_CONSUMERS * 32) mk_produce(p, sh, mk_stages);
    return;
  }
  OST_ENTRY();
  mk_consume(p, sh, mk_stages, xs);
  OST_EXIT();
}
