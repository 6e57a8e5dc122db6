// The Llama pack's streaming projections (gate/up, down, LM head): persistent bulk-copy pipelines,
// tiles by ticket. Compiled after llama.cu (its helpers and `ll_dyn`), as one source.
//
// A persistent block of LB_CONSUMERS consumer warps and one producer warp. Tiles of whole weight rows
// go through a ring of shared-memory stages: the producer's lane 0 issues a tile's `cp.async.bulk`
// copies (global -> shared, completing on the stage's `full` mbarrier); each consumer warp computes the
// tile's units (a row's chunk of at most 2048 columns: 8 x 16 B per lane against the input held in
// registers), leaves the dot products in `red` and arrives on the stage's `empty` mbarrier; the
// producer waits for `empty`, refills the stage, then runs the tile's epilogue from `red` (SiLU·mul, the
// residual add, the logits and the argmax), so no consumer ever waits for another.
//
// Tile and ring from the shape (`lb_per_tile`, `lb_ring`; ostinato_llama::step mirrors them): a tile is
// as many whole units (a (gate, up) pair of rows, a row) as fill LB_STAGE_BYTES, at most LB_MAX_UNITS
// dot products, the largest such count whose dot products share out evenly over the consumer warps; a
// stage is a tile's bytes (rounded to 128), and the ring as many stages as LB_BUDGET holds (at most
// LB_MAX_STAGES). A row of k columns is Q = 1, 2 or 4 equal chunks (k <= 2048, 4096, 8192) of `part`
// columns, consumer warp w taking chunk w % Q with that chunk of the input in registers.
//
// Before the wait the producer issues the block's first rounds of tiles (tiles b, b + G, ..., one per
// stage): the barrier setup and those copies of weights are the certified pre-wait part. After the wait
// it takes the rest by ticket (static tiles + atomicAdd(ticket, 1), drawn one tile ahead), so a block
// that started late takes fewer; a grid larger than what fits at once would leave late blocks' static
// tiles to the end. Each producer's last draw fails (and posts a sentinel tile, -1, that ends the
// consumers), so the draws number tiles + G; the producer whose draw returns the last value resets the
// counter to zero.
#define LB_CONSUMERS 8
#define LB_THREADS ((LB_CONSUMERS + 1) * 32)
// Bytes of weights in flight per block (the stages), and the tile size aimed at. One block per SM with
// six 32 KiB stages measured 2-3% faster per step on the H200 than two of three.
#ifndef LB_BUDGET
#define LB_BUDGET (192 * 1024)
#endif
#ifndef LB_STAGE_BYTES
#define LB_STAGE_BYTES 32768
#endif
#define LB_MAX_STAGES 8
// Blocks per SM the streaming kernels are built for (registers), and so launched with at most.
#ifndef LB_MIN_BLOCKS
#define LB_MIN_BLOCKS 1
#endif
// Bytes of one bulk copy at most, and dot products (units) per tile at most.
#define LB_PIECE 16384u
#define LB_MAX_UNITS 64
// Rounds of static tiles before the tickets (at most the ring's stages: the ones issued before the wait).
#ifndef LB_STATIC_ROUNDS
#define LB_STATIC_ROUNDS LB_MAX_STAGES
#endif

struct LbShared {
  unsigned long long full[LB_MAX_STAGES], empty[LB_MAX_STAGES];
  int tile[LB_MAX_STAGES];
  float red[2 * LB_MAX_STAGES][LB_MAX_UNITS];  // by tile sequence number mod 2 x stages
  float sum[LB_CONSUMERS];
};

// The stages: `n` of `bytes` each from the start of the dynamic shared memory.
struct LbRing {
  unsigned char* stages;
  unsigned bytes, n;
};

// Chunks of a row of k columns, and the columns of one chunk (a multiple of 8: 16-byte aligned).
__device__ __forceinline__ unsigned lb_chunks(unsigned k) { return k <= 2048 ? 1 : k <= 4096 ? 2 : 4; }
__device__ __forceinline__ unsigned lb_part(unsigned k, unsigned q) { return ((k + q - 1) / q + 7) & ~7u; }
// Columns of chunk q of a row (of k, in chunks of part).
__device__ __forceinline__ unsigned lb_lim(unsigned k, unsigned part, unsigned q) { return k > q * part ? min(part, k - q * part) : 0u; }

// Units per tile: units of unit_bytes, dots dot products each (see above).
__device__ __forceinline__ unsigned lb_per_tile(unsigned unit_bytes, unsigned dots) {
  unsigned most = max(1u, min(LB_STAGE_BYTES / unit_bytes, LB_MAX_UNITS / dots));
  for (unsigned c = most; c >= 1; c--)
    if (c * dots % LB_CONSUMERS == 0) return c;
  return most;
}
__device__ __forceinline__ LbRing lb_ring(unsigned tile_bytes) {
  unsigned bytes = (tile_bytes + 127) & ~127u;
  return LbRing{ll_dyn, bytes, max(1u, min((unsigned)LB_MAX_STAGES, LB_BUDGET / bytes))};
}

__device__ __forceinline__ unsigned lb_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void lb_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(lb_smem(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void lb_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(lb_smem(bar)) : "memory");
}

// Lane 0 of the producer: a tile of `bytes` from global `src` into shared `dst` (pieces of at most
// LB_PIECE), completing on `bar` (which also counts the producer's arrival).
__device__ __forceinline__ void lb_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(lb_smem(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void lb_copy(unsigned char* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  for (unsigned off = 0; off < bytes; off += LB_PIECE)
    asm volatile("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(lb_smem(dst + off)),
                 "l"((const char*)src + off), "r"(min(LB_PIECE, bytes - off)), "r"(lb_smem(bar))
                 : "memory");
}

// The block's barriers (thread 0), visible to the copy engine and every thread after the barrier.
__device__ __forceinline__ void lb_init(LbShared& sh, const LbRing& ring) {
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < ring.n; s++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(lb_smem(&sh.full[s])) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lb_smem(&sh.empty[s])), "r"(LB_CONSUMERS) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
}

// Static rounds: full rounds of G tiles, at most LB_STATIC_ROUNDS and the ring's stages.
__device__ __forceinline__ unsigned lb_rounds(const LbRing& ring, unsigned n_tiles) {
  return min(min((unsigned)LB_STATIC_ROUNDS, ring.n), n_tiles / gridDim.x);
}

// Before the wait, lane 0 of the producer: the block's static tiles into stages 0, 1, ...
// issue(tile, stage, bar) expects and copies the tile's bytes.
template <class Issue>
__device__ __forceinline__ void lb_prologue(LbShared& sh, const LbRing& ring, unsigned n_tiles, Issue issue) {
  unsigned rounds = lb_rounds(ring, n_tiles);
  for (unsigned r = 0; r < rounds; r++) {
    unsigned t = blockIdx.x + r * gridDim.x;
    sh.tile[r] = (int)t;
    issue(t, ring.stages + r * ring.bytes, &sh.full[r]);
  }
}

// After the wait, the producer warp: the ticketed tiles, then every tile's epilogue. epi(tile, red) runs
// on all 32 lanes once the consumers are done with the tile.
template <class Issue, class Epi>
__device__ __forceinline__ void lb_produce(LbShared& sh, const LbRing& ring, unsigned n_tiles, unsigned* ticket, Issue issue, Epi epi) {
  unsigned lane = threadIdx.x & 31, rounds = lb_rounds(ring, n_tiles), base = rounds * gridDim.x, n_dyn = n_tiles - base, S = ring.n;
  unsigned raw = lane == 0 ? atomicAdd(ticket, 1u) : 0u, i = rounds;
  while (true) {
    unsigned v = __shfl_sync(LL_FULL, raw, 0), s = i % S;
    bool more = v < n_dyn;
    if (lane == 0 && v == n_dyn + gridDim.x - 1) atomicExch(ticket, 0u);  // the launch's last draw
    int done = -1;
    if (i >= S) {
      lb_wait(&sh.empty[s], (i / S - 1) & 1);
      done = sh.tile[s];
    }
    __syncwarp();
    if (lane == 0) {
      if (more) {
        raw = atomicAdd(ticket, 1u);
        sh.tile[s] = (int)(base + v);
        issue(base + v, ring.stages + s * ring.bytes, &sh.full[s]);
      } else {
        sh.tile[s] = -1;
        lb_arrive(&sh.full[s]);
      }
    }
    if (done >= 0) epi((unsigned)done, sh.red[(i - S) % (2 * S)]);
    if (!more) break;
    i++;
  }
  // The tiles still with the consumers: i - S + 1 .. i - 1 (their stages hold their tile index).
  for (unsigned j = i >= S ? i - S + 1 : 0; j < i; j++) {
    unsigned s = j % S;
    lb_wait(&sh.empty[s], (j / S) & 1);
    epi((unsigned)sh.tile[s], sh.red[j % (2 * S)]);
  }
}

// A consumer warp: for each tile, unit(tile, u, stage) -> dot product for its units u = warp, warp +
// LB_CONSUMERS, ... < units (valid ones only: unit returns false for the others), into red.
template <class Unit>
__device__ __forceinline__ void lb_consume(LbShared& sh, const LbRing& ring, unsigned units, Unit unit) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, S = ring.n;
  for (unsigned i = 0;; i++) {
    unsigned s = i % S;
    lb_wait(&sh.full[s], (i / S) & 1);
    int t = *(volatile int*)&sh.tile[s];
    if (t < 0) break;
    for (unsigned u = warp; u < units; u += LB_CONSUMERS) {
      float d;
      if (unit((unsigned)t, u, ring.stages + s * ring.bytes, d) && lane == 0) sh.red[i % (2 * S)][u] = d;
    }
    __syncwarp();
    if (lane == 0) lb_arrive(&sh.empty[s]);
  }
}

// The warp's row chunk at `unit` (shared memory) against xr, columns below lim <= 2048 (relative to
// the chunk): the warp's sum on every lane. Two halves of four 16-byte loads keep the registers within
// two blocks per SM (xr holds 64).
__device__ __forceinline__ float lb_dot(const unsigned char* unit, const float (&xr)[64], unsigned lim) {
  unsigned lane = threadIdx.x & 31;
  const uint4* p = (const uint4*)unit;
  float a = 0.0f;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    uint4 w[4];
#pragma unroll
    for (int c = 0; c < 4; c++) w[c] = ((h * 4 + c) * 256 + lane * 8 < lim) ? p[(h * 4 + c) * 32 + lane] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const float* xc = xr + (h * 4 + c) * 8;
      float s = ll_lo(w[c].x) * xc[0];
      s = fmaf(ll_hi(w[c].x), xc[1], s);
      s = fmaf(ll_lo(w[c].y), xc[2], s);
      s = fmaf(ll_hi(w[c].y), xc[3], s);
      s = fmaf(ll_lo(w[c].z), xc[4], s);
      s = fmaf(ll_hi(w[c].z), xc[5], s);
      s = fmaf(ll_lo(w[c].w), xc[6], s);
      s = fmaf(ll_hi(w[c].w), xc[7], s);
      a += s;
    }
  }
  return ll_warp_sum(a);
}

// The lane's 64 inputs of a chunk from `v` (global, f32), columns below lim (zeros past).
__device__ __forceinline__ void lb_input(float (&xr)[64], const float* v, unsigned lim) {
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < 8; c++) {
    unsigned i = c * 256 + lane * 8;
    float4 a = i < lim ? __ldcg((const float4*)(v + i)) : make_float4(0, 0, 0, 0);
    float4 b = i < lim ? __ldcg((const float4*)(v + i + 4)) : make_float4(0, 0, 0, 0);
    xr[c * 8] = a.x; xr[c * 8 + 1] = a.y; xr[c * 8 + 2] = a.z; xr[c * 8 + 3] = a.w;
    xr[c * 8 + 4] = b.x; xr[c * 8 + 5] = b.y; xr[c * 8 + 6] = b.z; xr[c * 8 + 7] = b.w;
  }
}

// The consumers (LB_CONSUMERS warps): xs = x ⊙ ln (k <= 4096 floats, zero-padded to whole 2048-float
// passes), xr = the lane's 64 inputs of its chunk q (columns [q part, q part + lim)), returning the RMS
// norm's scale rsqrt(mean(x²) + eps). x goes through shared memory (xs) so the block reads it once; one
// barrier among the consumers (named barrier 1).
__device__ __forceinline__ float lb_norm_input(float (&xr)[64], float* xs, LbShared& sh, const float* x, const ll_bf16* ln, unsigned k, unsigned part,
                                              unsigned q, float eps) {
  float ss = 0.0f;
  for (unsigned base = 0; base < k; base += LL_CHUNK) {
    unsigned i = base + threadIdx.x * 8;  // 256 consumer threads x 8 = 2048 a pass
    float4 a = make_float4(0, 0, 0, 0), b = a;
    uint4 l = make_uint4(0, 0, 0, 0);
    if (i < k) {
      a = __ldcg((const float4*)(x + i));
      b = __ldcg((const float4*)(x + i + 4));
      l = __ldg((const uint4*)(ln + i));
    }
    ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    *(float4*)(xs + i) = make_float4(a.x * ll_lo(l.x), a.y * ll_hi(l.x), a.z * ll_lo(l.y), a.w * ll_hi(l.y));
    *(float4*)(xs + i + 4) = make_float4(b.x * ll_lo(l.z), b.y * ll_hi(l.z), b.z * ll_lo(l.w), b.w * ll_hi(l.w));
  }
  ss = ll_warp_sum(ss);
  if ((threadIdx.x & 31) == 0) sh.sum[threadIdx.x >> 5] = ss;
  asm volatile("bar.sync 1, %0;" ::"r"(LB_CONSUMERS * 32) : "memory");
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < LB_CONSUMERS; w++) s += sh.sum[w];
  unsigned lane = threadIdx.x & 31, lim = lb_lim(k, part, q);
  const float* xq = xs + q * part;
#pragma unroll
  for (int c = 0; c < 8; c++) {
    unsigned i = c * 256 + lane * 8;
#pragma unroll
    for (int e = 0; e < 8; e++) xr[c * 8 + e] = i + e < lim ? xq[i + e] : 0.0f;
  }
  return rsqrtf(s / (float)k + eps);
}

// llama_ffn_in(act, ticket, x, ln, wgu, ffn, hidden, eps): rmsnorm(x)·ln, gate = Wg·xn, up = Wu·xn (wgu:
// the ffn gate rows, then the ffn up rows), act = silu(gate) * up. A tile is P (gate, up) pairs: the P
// gate rows, then the P up rows (two bulk copies); the producer's lane p computes pair p's SiLU·mul.
// Launch: LB_THREADS threads, LB_BUDGET + 8 KiB per 2048 columns of hidden of dynamic shared memory
// (the stages, then xs).
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_ffn_in(float* act, unsigned* ticket, const float* x, const ll_bf16* ln,
                                                                                  const ll_bf16* wgu, unsigned ffn, unsigned hidden, float eps) {
  __shared__ LbShared sh;
  unsigned row = hidden * 2, Q = lb_chunks(hidden), part = lb_part(hidden, Q), P = lb_per_tile(2 * row, 2 * Q), n_tiles = (ffn + P - 1) / P;
  LbRing ring = lb_ring(2 * P * row);
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned p0 = t * P, bytes = min(P, ffn - p0) * row;
    lb_expect(bar, 2 * bytes);
    lb_copy(st, wgu + (unsigned long long)p0 * hidden, bytes, bar);
    lb_copy(st + P * row, wgu + (unsigned long long)(ffn + p0) * hidden, bytes, bar);
  };
  lb_init(sh, ring);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, ring, n_tiles, issue);
  OST_ENTRY();
  if (producer) {
    lb_produce(sh, ring, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      unsigned p = threadIdx.x & 31;
      if (p < P && t * P + p < ffn) {
        float g = red[p * Q], u = red[(P + p) * Q];
        for (unsigned q = 1; q < Q; q++) {
          g += red[p * Q + q];
          u += red[(P + p) * Q + q];
        }
        act[t * P + p] = g / (1.0f + expf(-g)) * u;
      }
    });
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = lb_lim(hidden, part, q);
    float xr[64];
    float scale = lb_norm_input(xr, (float*)(ll_dyn + LB_BUDGET), sh, x, ln, hidden, part, q, eps);
    lb_consume(sh, ring, 2 * P * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;  // u % Q == q
      if (t * P + r % P >= ffn) return false;
      d = lb_dot(st + r * row + q * part * 2, xr, lim) * scale;
      return true;
    });
  }
  OST_EXIT();
}

// llama_down(x, ticket, wd, act, m, k): x += Wd·act (FFN down projection + residual; k up to 8192). A
// tile is R whole rows (one bulk copy), a unit one row's chunk q (consumer warp w takes chunk w % Q, its
// inputs in registers); the producer's lane r sums row r's chunks and adds them into x (one add per
// row). Launch: LB_THREADS threads, LB_BUDGET bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_down(float* x, unsigned* ticket, const ll_bf16* wd, const float* act, unsigned m,
                                                                                unsigned k) {
  __shared__ LbShared sh;
  unsigned row = k * 2, Q = lb_chunks(k), part = lb_part(k, Q), R = lb_per_tile(row, Q), n_tiles = (m + R - 1) / R;
  LbRing ring = lb_ring(R * row);
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned bytes = min(R, m - t * R) * row;
    lb_expect(bar, bytes);
    lb_copy(st, wd + (unsigned long long)t * R * k, bytes, bar);
  };
  lb_init(sh, ring);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, ring, n_tiles, issue);
  OST_ENTRY();
  if (producer) {
    lb_produce(sh, ring, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      for (unsigned r = threadIdx.x & 31; r < R && t * R + r < m; r += 32) {
        float s = 0.0f;
        for (unsigned q = 0; q < Q; q++) s += red[r * Q + q];
        atomicAdd(x + t * R + r, s);  // the row's only add: a fire-and-forget reduction
      }
    });
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = lb_lim(k, part, q);
    float xr[64];
    lb_input(xr, act + q * part, lim);
    lb_consume(sh, ring, R * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;  // u % Q == q
      if (t * R + r >= m) return false;
      d = lb_dot(st + r * row + q * part * 2, xr, lim);
      return true;
    });
  }
  OST_EXIT();
}

// (value, index) a beats (value, index) b: larger value, ties to the lower index; index ~0 is none.
__device__ __forceinline__ bool ll_better(float v, unsigned i, float bv, unsigned bi) {
  return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}

// The greedy token's search state: the best (value, index), the second-best value, the least value.
struct LlBest {
  float v;
  unsigned i;
  float second, lo;
};
__device__ __forceinline__ LlBest ll_best_none() { return LlBest{-3.402823466e38f, 0xffffffffu, -3.402823466e38f, 3.402823466e38f}; }
// Adds the logit (v, i).
__device__ __forceinline__ void ll_best_take(LlBest& b, float v, unsigned i) {
  if (ll_better(v, i, b.v, b.i)) {
    b.second = fmaxf(b.second, b.v);
    b.v = v;
    b.i = i;
  } else {
    b.second = fmaxf(b.second, v);
  }
  b.lo = fminf(b.lo, v);
}
// Merges o into b.
__device__ __forceinline__ void ll_best_merge(LlBest& b, const LlBest& o) {
  float second = fmaxf(b.second, o.second);
  if (ll_better(o.v, o.i, b.v, b.i)) {
    second = fmaxf(second, b.v);
    b.v = o.v;
    b.i = o.i;
  } else {
    second = fmaxf(second, o.v);
  }
  b.second = second;
  b.lo = fminf(b.lo, o.lo);
}
// The warp's state, on every lane.
__device__ __forceinline__ void ll_warp_best(LlBest& b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    LlBest x{__shfl_xor_sync(LL_FULL, b.v, o), __shfl_xor_sync(LL_FULL, b.i, o), __shfl_xor_sync(LL_FULL, b.second, o), __shfl_xor_sync(LL_FULL, b.lo, o)};
    ll_best_merge(b, x);
  }
}

// llama_lm_head(logits, part, counter, ticket, token, trace, x, ln, emb, pos, max_seq, vocab, hidden,
// eps): final rmsnorm, logits = emb·xn (tied embeddings), and the greedy token: the producer warp of
// each block keeps its tiles' best (value, index), second-best value and least value and writes them
// to `part` (4 words a block); the last block to finish (counted in counter[0], which it resets)
// reduces them into token[0] and, where pos < max_seq, row pos of `trace` (u32 token, then f32 top-1
// logit, second-best logit and largest |logit|). Ties go to the lower index. Launch: LB_THREADS threads,
// LB_BUDGET + 8 KiB per 2048 columns of hidden of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(LB_THREADS, LB_MIN_BLOCKS) llama_lm_head(float* logits, float* part, unsigned* counter, unsigned* ticket,
                                                                                   unsigned* token, unsigned* trace, const float* x, const ll_bf16* ln,
                                                                                   const ll_bf16* emb, unsigned pos, unsigned max_seq, unsigned vocab,
                                                                                   unsigned hidden, float eps) {
  __shared__ LbShared sh;
  unsigned row = hidden * 2, Q = lb_chunks(hidden), part_cols = lb_part(hidden, Q), R = lb_per_tile(row, Q), n_tiles = (vocab + R - 1) / R;
  LbRing ring = lb_ring(R * row);
  auto issue = [&](unsigned t, unsigned char* st, unsigned long long* bar) {
    unsigned bytes = min(R, vocab - t * R) * row;
    lb_expect(bar, bytes);
    lb_copy(st, emb + (unsigned long long)t * R * hidden, bytes, bar);
  };
  lb_init(sh, ring);
  bool producer = threadIdx.x >= LB_CONSUMERS * 32;
  if (producer && (threadIdx.x & 31) == 0) lb_prologue(sh, ring, n_tiles, issue);
  OST_ENTRY();
  if (producer) {
    LlBest b = ll_best_none();
    unsigned lane = threadIdx.x & 31;
    lb_produce(sh, ring, n_tiles, ticket, issue, [&](unsigned t, const float* red) {
      for (unsigned r = lane; r < R && t * R + r < vocab; r += 32) {
        float v = red[r * Q];
        for (unsigned q = 1; q < Q; q++) v += red[r * Q + q];
        logits[t * R + r] = v;
        ll_best_take(b, v, t * R + r);
      }
    });
    // The block's state, then, in the last block to finish, the grid's.
    ll_warp_best(b);
    unsigned last = 0;
    if (lane == 0) {
      *(float4*)(part + 4 * blockIdx.x) = make_float4(b.v, __uint_as_float(b.i), b.second, b.lo);
      __threadfence();
      last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    if (__shfl_sync(LL_FULL, last, 0)) {
      __threadfence();
      b = ll_best_none();
      for (unsigned blk = lane; blk < gridDim.x; blk += 32) {
        float4 p = __ldcg((const float4*)(part + 4 * blk));
        ll_best_merge(b, LlBest{p.x, __float_as_uint(p.y), p.z, p.w});
      }
      ll_warp_best(b);
      if (lane == 0) {
        token[0] = b.i;
        if (pos < max_seq)
          *(uint4*)(trace + 4 * (unsigned long long)pos) = make_uint4(b.i, __float_as_uint(b.v), __float_as_uint(b.second), __float_as_uint(fmaxf(b.v, -b.lo)));
        counter[0] = 0;
      }
    }
  } else {
    unsigned q = (threadIdx.x >> 5) % Q, lim = lb_lim(hidden, part_cols, q);
    float xr[64];
    float scale = lb_norm_input(xr, (float*)(ll_dyn + LB_BUDGET), sh, x, ln, hidden, part_cols, q, eps);
    lb_consume(sh, ring, R * Q, [&](unsigned t, unsigned u, const unsigned char* st, float& d) {
      unsigned r = u / Q;  // u % Q == q
      if (t * R + r >= vocab) return false;
      d = lb_dot(st + r * row + q * part_cols * 2, xr, lim) * scale;
      return true;
    });
  }
  OST_EXIT();
}
