// Variants of the Llama pack's kernels for the decode probe (llama_kernels.cu includes this after the
// pack). Earlier variants (the merge in attention with a plain O, batched or lane-group softmax, gate/up
// prefetching the down projection's tiles) were measured and not kept; they live in git history and
// lab/llama-decode.md. The ones below were measured and not kept either (lab/llama-decode-boundaries.md:
// attention's prefetch version 9, the fused FFN versions 11 and 12, O's prefetch version 16, attention
// prefetching O's weights version 20); they stay
// as the probe's references for those boundaries, beside l2_touch, the `l2` stage's tool.
//
// llama_attn_pf: the pack's attention (head dim 64), and right after its wait the blocks ask L2 for the
// first `pf_pairs` (gate, up) row pairs of the layer's gate/up weights (`wgu`: ffn gate rows, then ffn up
// rows, `hidden` bf16 columns each): the tiles llama_ffn_in's blocks copy first (its static rounds).
// Why: attention runs 4.5 us at 1,024 positions reading 2.1 MB (9% of the H200's bandwidth) and the
// output projection's 8.4 MB of weights are requested during it, so DRAM idles for most of the pair,
// while llama_ffn_in (67 MB, 84% of 4.8 TB/s back to back) can start streaming only once the pair's
// blocks have left its SMs (it needs 200 KiB of shared memory a block). Up to 26 MB of its first tiles
// could be in L2 (50 MB on the H200) when it starts. The prefetch is issued after the wait, so it does
// not compete with QKV's stream, and as bulk prefetches (`cp.async.bulk.prefetch.L2`, 16 KiB each, one
// lane a piece): no registers, no shared memory, a few instructions a block.

// Bulk prefetch of `bytes` (a multiple of 16, from a 16-byte-aligned address) into L2.
__device__ __forceinline__ void lv_prefetch_bulk_l2(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

#define LV_PF_PIECE 16384u

// Runs piece(j) for j in [0, pieces): piece j goes to block j % blocks of the grid, lane j / blocks of
// its first warp.
template <class Piece>
__device__ __forceinline__ void lv_each_piece(unsigned pieces, Piece piece) {
  unsigned blocks = gridDim.x * gridDim.y, b = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x >= 32) return;
  for (unsigned j = b + threadIdx.x * blocks; j < pieces; j += 32 * blocks) piece(j);
}

// Bulk prefetches into L2 of (gate, up) row pairs [pair0, pair0 + pairs) of a layer's gate/up weights
// (`wgu`: ffn gate rows, then ffn up rows, `hidden` bf16 columns each): two contiguous ranges cut into
// LV_PF_PIECE pieces, spread over the grid by lv_each_piece.
__device__ __forceinline__ void lv_prefetch_pairs(const ll_bf16* wgu, unsigned ffn, unsigned hidden, unsigned pair0, unsigned pairs) {
  pair0 = min(pair0, ffn);
  unsigned long long range = (unsigned long long)min(pairs, ffn - pair0) * hidden * 2;
  unsigned per_range = (unsigned)((range + LV_PF_PIECE - 1) / LV_PF_PIECE);
  lv_each_piece(2 * per_range, [&](unsigned j) {
    unsigned r = j / per_range;
    unsigned long long off = (unsigned long long)(j % per_range) * LV_PF_PIECE;
    const char* base = (const char*)(wgu + ((unsigned long long)r * ffn + pair0) * hidden);
    lv_prefetch_bulk_l2(base + off, (unsigned)min((unsigned long long)LV_PF_PIECE, range - off));
  });
}

// Bulk prefetches into L2 of `bytes` (a multiple of 16, at most 2^45, so that the piece count and
// lv_each_piece's index fit 32 bits) from p (16-byte aligned), in LV_PF_PIECE pieces spread over the
// grid by lv_each_piece.
__device__ __forceinline__ void lv_prefetch_range(const void* p, unsigned long long bytes) {
  lv_each_piece((unsigned)((bytes + LV_PF_PIECE - 1) / LV_PF_PIECE), [&](unsigned j) {
    unsigned long long off = (unsigned long long)j * LV_PF_PIECE;
    lv_prefetch_bulk_l2((const char*)p + off, (unsigned)min((unsigned long long)LV_PF_PIECE, bytes - off));
  });
}

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)
    llama_attn_pf(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new, unsigned pos, unsigned heads,
                  unsigned kv_heads, unsigned max_seq, unsigned splits, unsigned head_dim, const ll_bf16* wgu, unsigned ffn, unsigned hidden,
                  unsigned pf_pairs) {
  __shared__ LlAttnShared<64> sh;
  auto prefetch = [&] { lv_prefetch_pairs(wgu, ffn, hidden, 0, pf_pairs); };
  ll_attn_groups<64>(sh, part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits, prefetch);
  OST_EXIT();
}

// llama_attn_pfo: the pack's attention (head dim 64), whose blocks ask L2 for the first `wo_bytes` of
// the layer's output-projection weights, before their wait (`before` = 1: while QKV streams) or right
// after it. Why: two attention blocks take 57,344 of an SM's 65,536 registers and an O block needs
// 32,768, so O's blocks land only as attention's leave, and only then ask DRAM for their 32 KiB of
// weights each: on the H200 O ends 3.46 us after attention, about W_o's 8.4 MB at the stream rate. With
// W_o in L2 those late blocks' loads are L2 hits (the `l2` stage: bytes a kernel would otherwise wait
// for save about half their DRAM time from L2), and attention's own reads are 2.1 MB at 1,024.
extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)
    llama_attn_pfo(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new, unsigned pos, unsigned heads,
                   unsigned kv_heads, unsigned max_seq, unsigned splits, unsigned head_dim, const ll_bf16* wo, unsigned long long wo_bytes,
                   unsigned before) {
  __shared__ LlAttnShared<64> sh;
  if (before) lv_prefetch_range(wo, wo_bytes);
  auto prefetch = [&] { if (!before) lv_prefetch_range(wo, wo_bytes); };
  ll_attn_groups<64>(sh, part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits, prefetch);
  OST_EXIT();
}

// llama_o_pf: the pack's output projection (head dim 64, four query heads a KV head: the 1B's), asking
// L2 for gate/up's (gate, up) pairs [pair0, pair0 + pairs) either before its wait, right after its own
// weights' loads are issued (after = 0), or right after the wait (after = 1). Why: gate/up's blocks
// land only as O's leave their SMs, and gate/up then streams its 67 MB from DRAM at 78% of 4.8 TB/s,
// while DRAM idles through attention's tail and O's merge (QKV, attention and O move 23 MB in 11.2 us,
// 2.1 TB/s). Pairs beyond gate/up's static rounds (pair0 = 5 rounds x 132 tiles x 4 pairs) are the ones
// its blocks cannot request before their own wait. Attention asking for the static rounds (version 9)
// slowed attention's own loads; O's loads are issued before its prefetch.
extern "C" __global__ void LL_O_BOUNDS llama_o_pf(float* x, const float* part, const ll_bf16* wo, unsigned m, unsigned heads, unsigned kv_heads,
                                                  unsigned splits, unsigned pos, unsigned max_seq, unsigned head_dim, const ll_bf16* wgu,
                                                  unsigned ffn, unsigned hidden, unsigned pair0, unsigned pairs, unsigned after) {
  __shared__ LlOShared<64> sh;
  if (heads != 4 * kv_heads) __trap();  // the 1B's group only
  auto early = [&] { if (!after) lv_prefetch_pairs(wgu, ffn, hidden, pair0, pairs); };
  auto late = [&] { if (after) lv_prefetch_pairs(wgu, ffn, hidden, pair0, pairs); };
  ll_o<4, 64>(sh, x, part, wo, m, heads, splits, pos, max_seq, early, late);
  OST_EXIT();
}

// l2_touch: reads n16 16-byte words from each of two ranges a and b (b may be null) through L2 and adds
// them into *sink (never taken: the sum only keeps the loads), so once it ends those bytes are in L2
// (as far as L2 keeps them). The `l2` stage of the probe puts gate/up's tiles there before timing it.
extern "C" __global__ void l2_touch(const uint4* a, const uint4* b, unsigned long long n16, unsigned* sink) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16; i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = __ldcg(a + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
    if (b) {
      uint4 w = __ldcg(b + i);
      acc ^= w.x ^ w.y ^ w.z ^ w.w;
    }
  }
  if (acc == 0x9e3779b9u) atomicAdd(sink, 1u);
}

// llama_ffn_fused(act, sync, x, ln, wgu, wd, ffn, hidden, eps): llama_ffn_in then llama_down (x += Wd·act)
// as ONE persistent bulk-copy pipeline: tiles 0 .. TA-1 are gate/up's (as llama_ffn_in cuts them), tiles
// TA .. TA+TB-1 the down projection's (as llama_down cuts them), drawn from one ticket counter, so the
// stages keep streaming across the boundary where the two kernels drain and fill. Why: back to back the
// pair takes 27.6 us at 1,024 for 100.7 MB (76% of 4.8 TB/s) where gate/up alone streams at 84%, and the
// calibration's down projection alone reached 8.7 us against the pack's 11.2 (its fill and drain). For
// hidden <= 2,048 (one chunk a gate/up row).
//
// The hand-off: gate/up tiles' epilogues (the producer's, act = silu(g)·u) release their count in
// sync[LV_SYNC_STRIDE], once a block (lv_hand_off); a consumer warp's first down tile waits (acquire) until it
// reaches TA, then loads its quarter of act. Deadlock-free while every block of the grid is resident at once (grid <= one block per SM, as
// launched): tickets are drawn in order, so every gate/up tile is drawn before any down tile, by a
// running block whose consumers take their tiles in order and whose producer finishes each gate/up
// tile's epilogue before it can stall on a later one; the static first tiles (blocks b, b + G, ...:
// gate/up's, TA >= 6 G) belong to blocks that are resident. A wait that outlasts ~7 s traps (a probe must
// not hang the machine). x: every block reads it (the norm) before its first tile, a gate/up tile, so
// the count at TA means every read of x is done before any down add. sync = [ticket, done, finished]:
// zero before and after (the last block to finish resets them).
__device__ __forceinline__ unsigned lv_ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void lv_red_release(unsigned* p, unsigned v) { asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
__device__ __forceinline__ unsigned lv_atom_acq_rel(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
// The calling thread spins until *p >= target (its own acquire loads).
__device__ __forceinline__ void lv_spin_at_least(const unsigned* p, unsigned target) {
  for (unsigned n = 0; lv_ld_acquire(p) < target; n++) {
    if (n > (1u << 26)) __trap();
    __nanosleep(100);
  }
}
// Every lane waits until *p >= target (each lane's own acquire load). -DLV_POLL_LANE0: lane 0 alone
// spins, then every lane takes its own acquire load (which finds the count there), so the grid's
// waiting consumers poll the counter's line with a warp's one load instead of 32.
__device__ __forceinline__ void lv_wait_at_least(const unsigned* p, unsigned target) {
#ifdef LV_POLL_LANE0
  if ((threadIdx.x & 31) == 0) lv_spin_at_least(p, target);
  __syncwarp();
#endif
  lv_spin_at_least(p, target);
}
// Words between the fused FFN's three counters (ticket, done, finished): 1 packs them in one 128-byte
// line, where the ticket's atomics meet the consumers' polling of `done`; -DLV_SYNC_STRIDE=32 puts each
// on its own line. The probe allocates 3 x LV_SYNC_STRIDE words.
#ifndef LV_SYNC_STRIDE
#define LV_SYNC_STRIDE 1
#endif

// The hand-off of finished gate/up tiles, in the producer warp. Released tile by tile (the form first
// measured; built with -DLV_RELEASE_PER_TILE), the pair took 42.5 us back to back where the two kernels
// take 27.6 (H200, 2026-12-05): each release puts a fence on the producer's path, 15-16 times a block, and
// the producer is the block's only copier. So a block releases its count once, when its last gate/up
// tile is finished: the tile after it in the block's order is a down tile (lane 0 saw one drawn:
// `drawn.past`) and every gate/up tile it drew is finished; or, where the block drew no down tile, once
// its producer loop ends. No wait grows by this: a block's consumers wait only at its first down tile,
// and its producer reaches every gate/up epilogue before it can stall on a down tile's stage (the
// argument in the kernels' comments).
struct LvDrawn {
  unsigned count;  // gate/up tiles the block drew (lane 0 of the producer)
  int past;        // the block drew a down tile
};
struct LvHandOff {
  unsigned finished = 0, released = 0;  // gate/up epilogues run, and counted in *done (warp-uniform)
};
__device__ __forceinline__ void lv_hand_off(LvHandOff& h, const LvDrawn& drawn, unsigned* done, bool last) {
#ifdef LV_RELEASE_PER_TILE
  bool now = h.finished > h.released;
#else
  __syncwarp();  // lane 0's `drawn` writes
  bool now = h.finished > h.released && (last || (*(volatile const int*)&drawn.past && h.finished == *(volatile const unsigned*)&drawn.count));
#endif
  if (!now) return;
  __threadfence();  // every lane's act stores, before the count
  __syncwarp();
  if ((threadIdx.x & 31) == 0) lv_red_release(done, h.finished - h.released);
  h.released = h.finished;
}

// The fused FFN's tiles (both forms below): gate/up's as llama_ffn_in cuts them (Q = 1: P (gate, up)
// row pairs a tile), then the down projection's as llama_down does (R rows of Qd quarters a tile).
struct LvFfn {
  const ll_bf16 *wgu, *wd;
  unsigned ffn, hidden, row_a, P, TA, row_d, Qd, R, TB, units;
  __device__ LvFfn(const ll_bf16* wgu_, const ll_bf16* wd_, unsigned ffn_, unsigned hidden_) : wgu(wgu_), wd(wd_), ffn(ffn_), hidden(hidden_) {
    row_a = hidden * 2, P = min(LB_MAX_UNITS / 2u, LB_STAGE_BYTES / (2 * row_a)), TA = (ffn + P - 1) / P;
    row_d = ffn * 2, Qd = ffn <= 2048 ? 1 : ffn <= 4096 ? 2 : 4, R = min(LB_MAX_UNITS / Qd, LB_STAGE_BYTES / row_d);
    TB = (hidden + R - 1) / R, units = max(2 * P, R * Qd);
  }
  __device__ unsigned tiles() const { return TA + TB; }
  // The global ranges of tile t (gate's rows and up's rows; a down tile is one range): each(src, bytes, at).
  template <class Each> __device__ void ranges(unsigned t, Each each) const {
    if (t < TA) {
      unsigned p0 = t * P, bytes = min(P, ffn - p0) * row_a;
      each(wgu + (unsigned long long)p0 * hidden, bytes, 0u);
      each(wgu + (unsigned long long)(ffn + p0) * hidden, bytes, P * row_a);
    } else {
      unsigned td = t - TA;
      each(wd + (unsigned long long)td * R * ffn, min(R, hidden - td * R) * row_d, 0u);
    }
  }
  // Producer lane 0: tile t's copies into stage st, completing on bar; the draw counted in `drawn`.
  __device__ void issue(unsigned t, unsigned char* st, unsigned long long* bar, LvDrawn& drawn) const {
    if (t < TA) drawn.count++;
    else drawn.past = 1;
    unsigned bytes = 0;
    ranges(t, [&](const ll_bf16*, unsigned b, unsigned) { bytes += b; });
    lb_expect(bar, bytes);
    ranges(t, [&](const ll_bf16* src, unsigned b, unsigned at) { lb_copy(st + at, src, b, bar); });
  }
  // Tile t's bytes asked of L2.
  __device__ void prefetch_l2(unsigned t) const {
    ranges(t, [&](const ll_bf16* src, unsigned b, unsigned) {
      for (unsigned off = 0; off < b; off += LV_PF_PIECE) lv_prefetch_bulk_l2((const char*)src + off, min(LV_PF_PIECE, b - off));
    });
  }
  // The producer warp's epilogue of tile t: act = silu(g)·u, or the down rows' sums added into x. A
  // finished gate/up tile is counted in `h` and handed off (released into *done) by lv_hand_off.
  __device__ void epilogue(unsigned t, const float* red, float* act, float* x, LvHandOff& h, const LvDrawn& drawn, unsigned* done) const {
    unsigned lane = threadIdx.x & 31;
    if (t < TA) {
      if (lane < P && t * P + lane < ffn) {
        float g = red[lane], u = red[P + lane];
        act[t * P + lane] = g / (1.0f + expf(-g)) * u;
      }
      h.finished++;
      lv_hand_off(h, drawn, done, false);
    } else {
      unsigned td = t - TA;
      for (unsigned r = lane; r < R && td * R + r < hidden; r += 32) {
        float s = 0.0f;
        for (unsigned q = 0; q < Qd; q++) s += red[r * Qd + q];
        atomicAdd(x + td * R + r, s);
      }
    }
  }
  // Consumer warp: unit u of tile t from stage st (x ⊙ ln or act in xr), into d; false for no unit.
  __device__ bool unit(unsigned t, unsigned u, const unsigned char* st, const float (&xr)[64], float scale, unsigned q, unsigned lim,
                       float& d) const {
    if (t < TA) {
      if (u >= 2 * P || t * P + u % P >= ffn) return false;
      d = lb_dot(st + u * row_a, xr, hidden) * scale;
      return true;
    }
    unsigned td = t - TA, r = u / Qd;  // u % Qd == q
    if (r >= R || td * R + r >= hidden) return false;
    d = lb_dot(st + r * row_d + q * LL_CHUNK * 2, xr, lim);
    return true;
  }
};

// The last block to finish sets sync's hand-off count and its own count back to zero.
__device__ __forceinline__ void lv_ffn_finish(unsigned* done, unsigned* finished) {
  __syncthreads();
  if (threadIdx.x == 0 && lv_atom_acq_rel(finished, 1u) == gridDim.x - 1) {
    *done = 0;
    *finished = 0;
  }
}

extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_ffn_fused(float* act, unsigned* sync, float* x, const ll_bf16* ln,
                                                                                     const ll_bf16* wgu, const ll_bf16* wd, unsigned ffn, unsigned hidden,
                                                                                     float eps) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  float* xs = (float*)(lb_stages + LB_STAGES * LB_STAGE_BYTES);
  const LvFfn f(wgu, wd, ffn, hidden);
  unsigned *ticket = sync, *done = sync + LV_SYNC_STRIDE, *finished = sync + 2 * LV_SYNC_STRIDE;
  __shared__ LvDrawn drawn;
  if (threadIdx.x == 0) drawn = {0u, 0};
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) { f.issue(t, st, bar, drawn); };
  lb_init(sh);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, lb_stages, f.tiles(), issue);
  OST_ENTRY();
  if (producer) {
    LvHandOff h;
    lb_produce(sh, lb_stages, f.tiles(), ticket, issue, [&](unsigned t, const float* red) { f.epilogue(t, red, act, x, h, drawn, done); });
    lv_hand_off(h, drawn, done, true);
  } else {
    const unsigned q = (threadIdx.x >> 5) % f.Qd, lim = ffn > q * LL_CHUNK ? ffn - q * LL_CHUNK : 0;
    float xr[64];
    float scale = lb_norm_input<1>(xr, xs, sh, x, ln, hidden, eps, 0);
    bool down = false;
    lb_consume(sh, lb_stages, f.units, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      if (t >= f.TA && !down) {  // the first down tile: every gate/up tile's act is out
        lv_wait_at_least(done, f.TA);
        lb_input(xr, act + q * LL_CHUNK, lim);
        down = true;
      }
      return f.unit(t, u, st, xr, scale, q, lim, d);
    });
  }
  lv_ffn_finish(done, finished);
  OST_EXIT();
}

// llama_ffn_fused_t: llama_ffn_fused without its residency condition, so a grid of any size, next to
// any other kernel, under MPS or on a smaller GPU, cannot deadlock. Every tile is drawn by ticket (no
// static tiles owned by a block index), and each block asks L2 before the wait for the tiles it would
// have owned statically (tiles b, b + G, ... for LB_STAGES rounds: the first 6 G tickets' bytes, whoever
// draws them), so the weights still stream during the previous kernel's tail, into L2 instead of shared
// memory. The norm of x is taken at a block's first gate/up tile, and not at all by a block that draws
// none. Why no wait can last for ever: a consumer waits only at its block's first down tile, for the
// count of finished gate/up tiles to reach TA. Every gate/up ticket (0 .. TA-1) is drawn before any down
// ticket, by a block that is running when it draws; a block takes its tiles in ticket order, so a block
// holding a gate/up tile holds only gate/up tiles before it and finishes that tile (its consumers' dot
// products, then its producer's epilogue when the stage comes round again or at the end) without waiting
// for anything outside the block. So the count reaches TA whichever blocks are resident, and in what
// order the rest are scheduled. The x reads come before any add: a block reads x at its first gate/up
// tile, whose epilogue (and so the count's TA) follows that read. sync = [ticket, done, finished]: zero
// before and after.
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_ffn_fused_t(float* act, unsigned* sync, float* x, const ll_bf16* ln,
                                                                                       const ll_bf16* wgu, const ll_bf16* wd, unsigned ffn, unsigned hidden,
                                                                                       float eps) {
  extern __shared__ __align__(128) unsigned char lb_stages[];
  __shared__ LbShared sh;
  float* xs = (float*)(lb_stages + LB_STAGES * LB_STAGE_BYTES);
  const LvFfn f(wgu, wd, ffn, hidden);
  unsigned *ticket = sync, *done = sync + LV_SYNC_STRIDE, *finished = sync + 2 * LV_SYNC_STRIDE;
  __shared__ LvDrawn drawn;
  if (threadIdx.x == 0) drawn = {0u, 0};
  lb_init(sh);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  unsigned lane = threadIdx.x & 31;
  // Before the wait: producer lane r asks L2 for tile b + r G, r < LB_STAGES.
  if (producer && lane < LB_STAGES && blockIdx.x + lane * gridDim.x < f.tiles()) f.prefetch_l2(blockIdx.x + lane * gridDim.x);
  OST_ENTRY();
  if (producer) {
    LvHandOff h;
    auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) { f.issue(t, st, bar, drawn); };
    lb_produce_after(sh, lb_stages, f.tiles(), 0u, ticket, issue, [&](unsigned t, const float* red) { f.epilogue(t, red, act, x, h, drawn, done); });
    lv_hand_off(h, drawn, done, true);
  } else {
    // lb_consume with two steps between a tile's arrival and its dot products, taken by every consumer
    // warp at the same tile: the norm at the first gate/up tile, the wait and act at the first down tile.
    const unsigned warp = threadIdx.x >> 5, q = warp % f.Qd, lim = ffn > q * LL_CHUNK ? ffn - q * LL_CHUNK : 0;
    float xr[64], scale = 0.0f;
    bool normed = false, down = false;
    for (unsigned i = 0;; i++) {
      unsigned s = i % LB_STAGES;
      lb_wait(&sh.full[s], (i / LB_STAGES) & 1);
      int ti = *(volatile int*)&sh.tile[s];
      if (ti < 0) break;
      unsigned t = (unsigned)ti;
      if (t < f.TA && !normed) {
        scale = lb_norm_input<1>(xr, xs, sh, x, ln, hidden, eps, 0);
        normed = true;
      }
      if (t >= f.TA && !down) {
        lv_wait_at_least(done, f.TA);
        lb_input(xr, act + q * LL_CHUNK, lim);
        down = true;
      }
      for (unsigned u = warp; u < f.units; u += LB_CONSUMERS) {
        float d;
        if (f.unit(t, u, lb_stages + s * LB_STAGE_BYTES, xr, scale, q, lim, d) && lane == 0) sh.red[i % (2 * LB_STAGES)][u] = d;
      }
      __syncwarp();
      if (LB_LANES_ARRIVING > 1 || lane == 0) lb_arrive(&sh.empty[s]);
    }
  }
  lv_ffn_finish(done, finished);
  OST_EXIT();
}

// ---- Version 18: QKV and attention as one kernel, handing off per KV head --------------------------
// llama_qkv_attn(part, kcache, vcache, q, kv_new, x, ln, wqkv, rope_freq, arrive, seen, pos, hidden,
// heads, kv_heads, max_seq, eps): grid (S, kv_heads), S = (G + 2) x 32 / 8 (head dim 64), 8 warps.
// Warp w of block (s, h) computes RoPE pair p = 8 s + w of KV head h's group (its G query heads, then
// its K head, then its V head; 32 pairs each) as llama_qkv does (both rows in registers before the
// wait, the norm after it; q to `q`, K and V to `kv_new`), then the block counts itself in arrive[h]
// (every thread fences its stores, a barrier, one add), waits until all S blocks of head h have
// (ld.acquire, polled by thread 0), and runs attention split s of S for head h (the pack's ll_attn,
// its cache rows asked of L2 before the wait). So head h's attention starts when head h's 48 QKV rows
// are written, not when the whole QKV grid has drained and a second grid has landed: the grid drain
// and launch at the QKV -> attention boundary (attention ends 4.7 us after QKV on the H200) become one
// counter per head. llama_o merges the S splits.
// The counters only grow: block (s, h) keeps how many arrivals it has waited for in seen[h S + s] (its
// own word), so a launch waits for S more than the last. A wait gives up after LV_SPIN_LIMIT polls and
// sets lv_error (the probe reports it; a probe must not hang the machine). Every block waits for
// others of its grid: all must be resident at once, which holds on the H100 and H200 (192 blocks,
// two a SM fit) once the previous kernel has left; the pack could not ship this without a launch
// that guarantees it (cooperative) or the occupancy checked at instantiate.
#ifndef LV_SPIN_LIMIT
#define LV_SPIN_LIMIT (1u << 24)
#endif
__device__ unsigned lv_error;

template <int G>
__device__ __forceinline__ void lv_qkv_attn(float* xs, float* red, LlAttnShared<64>& sh, float* part, ll_bf16* kcache, ll_bf16* vcache, float* q,
                                            ll_bf16* kv_new, const float* x, const ll_bf16* ln, const ll_bf16* wqkv, const float* rope_freq,
                                            unsigned* arrive, unsigned* seen, unsigned pos, unsigned hidden, unsigned heads, unsigned kv_heads,
                                            unsigned max_seq, float eps) {
  constexpr int T = LL_THREADS, HD = 64, HALF = HD / 2, N = 8;
  unsigned h = blockIdx.y, s = blockIdx.x, S = gridDim.x, lane = threadIdx.x & 31;
  unsigned p = s * LL_WARPS + (threadIdx.x >> 5), member = p / HALF, j = p % HALF;
  bool mine = member < G + 2;  // the last block may have warps past the group's pairs
  unsigned head = member < G ? h * G + member : member == G ? heads + h : heads + kv_heads + h;
  uint4 wa[N], wb[N];
  float freq = 0.0f;
  if (mine) {
    const ll_bf16* ra = wqkv + (unsigned long long)(head * HD + j) * hidden;
    ll_load_chunk<N>(wa, ra, 0, hidden);
    ll_load_chunk<N>(wb, ra + (unsigned long long)HALF * hidden, 0, hidden);
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(freq) : "l"(rope_freq + j));
  }
  LlNormWeights<T, N * 256> lw = ll_norm_weights<T, N * 256>(ln, hidden);
  // Attention's rows of this split into L2 (cache rows below pos: nothing in the step writes them).
  {
    unsigned n = min(pos, max_seq - 1) + 1, live = ll_live_splits(n, S), chunk = (n + live - 1) / live;
    unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
    const char* kh = (const char*)(kcache + (unsigned long long)h * max_seq * HD);
    const char* vh = (const char*)(vcache + (unsigned long long)h * max_seq * HD);
    for (unsigned i = t0 * 2 + threadIdx.x; i < t1 * 2; i += T) ll_prefetch_l2(((i & 1) ? vh : kh) + (unsigned long long)(i >> 1) * HD * 2);
  }
  unsigned target = 0;
  if (threadIdx.x == 0) target = seen[h * S + s] + S;
  OST_ENTRY();
  float scale = ll_norm_input<T, N * 256>(xs, red, x, hidden, lw, eps);
  if (mine) {
    float a = ll_warp_sum(ll_dot_chunk<N>(wa, xs, 0)) * scale, b = ll_warp_sum(ll_dot_chunk<N>(wb, xs, 0)) * scale;
    if (lane == 0) ll_qkv_pair_out(q, kv_new, a, b, head, j, pos, freq, heads, kv_heads, HD);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(arrive + h, 1u);
    unsigned polls = 0, v;
    do v = lv_ld_acquire(arrive + h);
    while ((int)(v - target) < 0 && ++polls < LV_SPIN_LIMIT);
    if ((int)(v - target) < 0) atomicExch(&lv_error, 1u);
    seen[h * S + s] = target;
  }
  __syncthreads();
  ll_attn<G, HD>(sh, part, kcache, vcache, q, kv_new, pos, kv_heads, max_seq, S);
}

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)
    llama_qkv_attn(float* part, ll_bf16* kcache, ll_bf16* vcache, float* q, ll_bf16* kv_new, const float* x, const ll_bf16* ln, const ll_bf16* wqkv,
                   const float* rope_freq, unsigned* arrive, unsigned* seen, unsigned pos, unsigned hidden, unsigned heads, unsigned kv_heads,
                   unsigned max_seq, float eps) {
  __shared__ __align__(16) float xs[8 * 256];
  __shared__ float red[LL_WARPS];
  __shared__ LlAttnShared<64> sh;
  if (heads != 4 * kv_heads || hidden > 8 * 256) __trap();  // the 1B's shape only
  lv_qkv_attn<4>(xs, red, sh, part, kcache, vcache, q, kv_new, x, ln, wqkv, rope_freq, arrive, seen, pos, hidden, heads, kv_heads, max_seq, eps);
  OST_EXIT();
}
