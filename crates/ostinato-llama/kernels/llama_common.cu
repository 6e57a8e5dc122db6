// Llama decode kernels (bf16 weights and KV cache, f32 activations and accumulation): the CUDA side of
// the `ostinato-llama` kernel pack, bound through a kernel reference that carries its source
// (`ostinato_llama::pack::CUDA_SOURCE`: this file, then llama.cu, as one source). This file holds the
// pack's defines, its device helpers and the streaming projections' pipeline; llama.cu the kernels.
// OST_ENTRY / OST_EXIT come from Ostinato's kernel header; the host twins live in
// crates/ostinato-llama/src/host.rs with the same signatures and math (summation order differs).
//
// Before `griddepcontrol.wait` every kernel requests the bytes no node of the step writes: the small
// projections (QKV, O) load ALL their weights into registers (a warp owns its rows), attention the
// KV-cache rows of its share below the position (plain `ld.global`, which ptxas keeps above the wait, and
// `prefetch.global.L2`); the streaming projections (gate/up, down, LM head) issue bulk copies of their
// first tiles of weights into shared memory. Those are the certified pre-wait reads
// (crates/ostinato-cuda/src/ptx.rs); nothing before the wait writes global memory or takes a ticket.
//
// The streaming projections are persistent bulk-copy pipelines (see below). Preconditions (checked by
// the graph builder): hidden % 8 == 0 and <= 3072, ffn % 8 == 0 and <= 8192, head_dim 64 or 128,
// grouped-query groups of 1, 2, 3, 4 or 8, splits <= 32. Each kernel is a template over the shape's
// constants (head dim, group, 2,048-column chunks of the input); QKV, attention and the output
// projection have an entry per width or head dim (a kernel's registers are those of its largest path).

#include "ostinato.cuh"

#define LL_THREADS 256
#define LL_WARPS (LL_THREADS / 32)
// Blocks per SM attention and the output projection must fit (registers).
#ifndef LL_MIN_BLOCKS
#define LL_MIN_BLOCKS 2
#endif
// The output projection's bounds. By default those of attention; LL_O_MAXNREG caps its registers
// instead (__maxnreg__), so that a gate/up block fits on an SM beside two of its blocks. LL_O_GROUP builds
// its path for one grouped-query group only (a shape's own build: its registers are that path's).
#ifdef LL_O_MAXNREG
#define LL_O_BOUNDS __maxnreg__(LL_O_MAXNREG)  // nvcc takes no __launch_bounds__ beside it
#else
#define LL_O_BOUNDS __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)
#endif
// Columns per row chunk: a lane loads 8 x 16 bytes of it, each load instruction 512 contiguous bytes.
#define LL_CHUNK 2048
// Warps (one RoPE pair each) per block of the QKV projection.
#ifndef LL_QKV_WARPS
#define LL_QKV_WARPS 4
#endif
#define LL_ATTN_UNROLL 8
// Attention splits that get rows: one per LL_SPLIT_ROWS rows, at least min(LL_MIN_LIVE, splits)
// (measured: 16-row shares at position 128, 64 at 1,024, 128 at 4,096 were the fastest). The host twin
// of llama_o (src/host.rs, live_splits) uses the same numbers.
#ifndef LL_SPLIT_ROWS
#define LL_SPLIT_ROWS 64
#endif
#ifndef LL_MIN_LIVE
#define LL_MIN_LIVE 8
#endif
// The exp of attention's online softmax (per row and query head): the hardware's ex2 (__expf), about 2
// instructions against expf's dozen, measured on an H200 at 4.52 against 4.90 us back to back at
// position 1,024 (8.61 against 9.40 at 4,096), the layer's output within the same 1.7e-7 of a double-
// precision reference (lab/llama-decode.md). Every lane of a warp runs each row's exps.
#ifndef LL_EXP
#define LL_EXP __expf
#endif
// Most blocks per KV head in attention (the output projection's merge gives a split a lane); a partial
// record is m, l, two pads and the head's HD sums (ll_rec).
#define LL_MAX_SPLITS 32
__host__ __device__ constexpr int ll_rec(int hd) { return hd + 4; }

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

// Eight sums at once over a warp (acc[r]: this lane's share of row r): returns row lane / 4's total,
// on lanes where lane % 4 == 0. A halving exchange: at offsets 16, 8 and 4 each lane keeps the half of
// its rows its lane bit picks and adds its partner's share of them (4 + 2 + 1 shuffles), then the
// four lanes of a row add up (2): 9 shuffles where eight warp sums take 40.
__device__ __forceinline__ float ll_rows8_sum(const float (&acc)[8], unsigned lane) {
  float b[4], c[2];
  bool hi = lane & 16;
#pragma unroll
  for (int r = 0; r < 4; r++) b[r] = (hi ? acc[r + 4] : acc[r]) + __shfl_xor_sync(LL_FULL, hi ? acc[r] : acc[r + 4], 16);
  hi = lane & 8;
#pragma unroll
  for (int r = 0; r < 2; r++) c[r] = (hi ? b[r + 2] : b[r]) + __shfl_xor_sync(LL_FULL, hi ? b[r] : b[r + 2], 8);
  hi = lane & 4;
  float d = (hi ? c[1] : c[0]) + __shfl_xor_sync(LL_FULL, hi ? c[0] : c[1], 4);
  d += __shfl_xor_sync(LL_FULL, d, 2);
  return d + __shfl_xor_sync(LL_FULL, d, 1);
}

// A warp's N x 256 columns of a row, loaded before the wait: lane's N loads at columns
// base + (j * 32 + lane) * 8 (zeros past k).
template <int N>
__device__ __forceinline__ void ll_load_chunk(uint4 (&w)[N], const ll_bf16* row, unsigned base, unsigned k) {
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < N; j++) {
    unsigned c = base + (j * 32 + lane) * 8;
    w[j] = c < k ? ll_ld_early(row + c) : make_uint4(0, 0, 0, 0);
  }
}

// The lane's part of those columns' dot product with xs (shared memory, zero-padded to N x 256).
template <int N>
__device__ __forceinline__ float ll_dot_chunk(const uint4 (&w)[N], const float* xs, unsigned base) {
  unsigned lane = threadIdx.x & 31;
  float a = 0.0f;
#pragma unroll
  for (int j = 0; j < N; j++) a += ll_dot8(w[j], xs + base + (j * 32 + lane) * 8);
  return a;
}

// ---- The input vector -----------------------------------------------------------------------------
// An RMS norm's weights, the thread's float4 groups g = tid, tid + T, ... of a vector of k <= K
// (loaded before the wait: no node writes them).
template <int T, int K>
struct LlNormWeights {
  uint2 w[K / 4 / T];
};
template <int T, int K>
__device__ __forceinline__ LlNormWeights<T, K> ll_norm_weights(const ll_bf16* ln, unsigned k) {
  LlNormWeights<T, K> r;
#pragma unroll
  for (int g = 0; g < K / 4 / T; g++) {
    unsigned i = (threadIdx.x + g * T) * 4;
    if (i < k) {
      asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(r.w[g].x), "=r"(r.w[g].y) : "l"(ln + i));
    } else {
      r.w[g] = make_uint2(0, 0);
    }
  }
  return r;
}

// After the wait: xs = x ⊙ ln (k <= K floats, zero-padded to K) and the norm's scale
// rsqrt(mean(x²) + eps), which the caller applies to its dot products. One barrier.
template <int T, int K>
__device__ __forceinline__ float ll_norm_input(float* xs, float* red, const float* x, unsigned k, const LlNormWeights<T, K>& ln, float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int g = 0; g < K / 4 / T; g++) {
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

// ---- Streaming projections: bulk copies into shared memory, tiles by ticket -------------------------
// A persistent block of LB_CONSUMERS consumer warps and one producer warp. Tiles (up to LB_STAGE_BYTES of
// whole weight rows) go through a ring of LB_STAGES shared-memory stages: the producer's lane 0 issues a
// tile's `cp.async.bulk` copies (global -> shared, completing on the stage's `full` mbarrier); each
// consumer warp computes the tile's units (4 KB row chunks: 8 x 16 B per lane against the input held in
// registers), leaves the dot products in `red` and arrives on the stage's `empty` mbarrier; the producer
// waits for `empty`, refills the stage, then runs the tile's epilogue from `red` (SiLU·mul, the residual
// add, the logits and the argmax), so no consumer ever waits for another.
//
// Before the wait the producer issues the block's first LB_STATIC_ROUNDS tiles (tiles b, b + G, ...):
// the barrier setup and those copies of weights are the certified pre-wait part. After the wait it takes
// the rest by ticket (static tiles + atomicAdd(ticket, 1), drawn one tile ahead), so a block that started
// late takes fewer; a grid larger than what fits at once would leave late blocks' static tiles to the
// end. Each producer's last draw fails (and posts a sentinel tile, -1, that ends the consumers), so the
// draws number tiles + G; the producer whose draw returns the last value resets the counter to zero.
#define LB_CONSUMERS 8
#define LB_THREADS ((LB_CONSUMERS + 1) * 32)
// One block per SM with five 36 KiB stages (180 KiB in flight). Five stages of 36 KiB hold three
// (gate, up) pairs of 6 KiB rows (hidden 3,072), where 32 KiB stages hold two: on the H200 the 3B's gate/up
// streams at 82% of 4.8 TB/s instead of 75%, and the 1B's kernels (four 4 KiB pairs a tile either way)
// are unchanged (lab/llama-decode-boundaries.md, version 13). One block of six 32 KiB stages had measured 2-3% a step
// faster than two blocks of three.
#ifndef LB_STAGES
#define LB_STAGES 5
#endif
#ifndef LB_STAGE_BYTES
#define LB_STAGE_BYTES 36864
#endif
// Blocks per SM the streaming kernels are built for (registers), and so launched with at most.
#ifndef LB_MIN_BLOCKS
#define LB_MIN_BLOCKS 1
#endif
// Bytes of one bulk copy at most, and dot products (units) per tile at most.
#define LB_PIECE 16384u
#define LB_MAX_UNITS 64
// Rounds of static tiles before the tickets (at most LB_STAGES: the ones issued before the wait).
#ifndef LB_STATIC_ROUNDS
#define LB_STATIC_ROUNDS LB_STAGES
#endif
// The down projection's (the probe builds it with fewer, lab/llama-decode-boundaries.md version 17).
#ifndef LB_DOWN_STATIC_ROUNDS
#define LB_DOWN_STATIC_ROUNDS LB_STATIC_ROUNDS
#endif

// Arrivals on a stage's barriers: every lane of a warp arrives, so each thread's own shared-memory accesses
// (a consumer's reads of the stage, the producer's epilogue reads of `red`) are ordered by the mbarrier
// itself. One arriving lane after `__syncwarp` orders the same accesses by the warp barrier, but
// compute-sanitizer's racecheck does not follow that and reports the ring's reuse as races; with every
// lane arriving it reports none, and the 1B step is unchanged (H100: 962.6 against 962.5 µs at position
// 1,024; lab/llama-decode-boundaries.md, version 14). -DLB_ARRIVE_ONE_LANE builds the one-lane form.
#ifdef LB_ARRIVE_ONE_LANE
#define LB_LANES_ARRIVING 1u
#else
#define LB_LANES_ARRIVING 32u
#endif

struct LbShared {
  unsigned long long full[LB_STAGES], empty[LB_STAGES];
  int tile[LB_STAGES];
  float red[2 * LB_STAGES][LB_MAX_UNITS];  // by tile sequence number mod 2 x LB_STAGES
  float sum[LB_CONSUMERS];
};

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
__device__ __forceinline__ void lb_init(LbShared& sh) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < LB_STAGES; s++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lb_smem(&sh.full[s])), "r"(LB_LANES_ARRIVING) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lb_smem(&sh.empty[s])), "r"(LB_CONSUMERS * LB_LANES_ARRIVING) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
}

// Static rounds: full rounds of G tiles, at most `most` (at most LB_STAGES).
__device__ __forceinline__ unsigned lb_rounds(unsigned n_tiles, unsigned most = LB_STATIC_ROUNDS) { return min(most, n_tiles / gridDim.x); }

// Before the wait, lane 0 of the producer: the block's static tiles into stages 0, 1, ...
// issue(tile, stage, bar) expects and copies the tile's bytes.
template <class Issue>
__device__ __forceinline__ void lb_prologue(LbShared& sh, unsigned char* stages, unsigned n_tiles, Issue issue, unsigned most = LB_STATIC_ROUNDS) {
  unsigned rounds = lb_rounds(n_tiles, most);
  for (unsigned r = 0; r < rounds; r++) {
    unsigned t = blockIdx.x + r * gridDim.x;
    sh.tile[r] = (int)t;
    issue(t, stages + r * LB_STAGE_BYTES, &sh.full[r]);
  }
}

// After the wait, the producer warp: the ticketed tiles, then every tile's epilogue. epi(tile, red) runs
// on all 32 lanes once the consumers are done with the tile. `rounds`: the static rounds lb_prologue
// issued (lb_produce: lb_rounds(n_tiles); 0: every tile by ticket).
template <class Issue, class Epi>
__device__ __forceinline__ void lb_produce_after(LbShared& sh, unsigned char* stages, unsigned n_tiles, unsigned rounds, unsigned* ticket, Issue issue,
                                                 Epi epi) {
  unsigned lane = threadIdx.x & 31, base = rounds * gridDim.x, n_dyn = n_tiles - base;
  unsigned raw = lane == 0 ? atomicAdd(ticket, 1u) : 0u, i = rounds;
  // The static tiles lane 0 issued before the wait: the other lanes' arrivals where every lane arrives.
  if (LB_LANES_ARRIVING > 1 && lane != 0)
    for (unsigned r = 0; r < rounds; r++) lb_arrive(&sh.full[r]);
  while (true) {
    unsigned v = __shfl_sync(LL_FULL, raw, 0), s = i % LB_STAGES;
    bool more = v < n_dyn;
    if (lane == 0 && v == n_dyn + gridDim.x - 1) atomicExch(ticket, 0u);  // the launch's last draw
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
    } else if (LB_LANES_ARRIVING > 1) {
      lb_arrive(&sh.full[s]);  // after this lane's reads of the slot's previous tile in `red` (its epilogue)
    }
    if (done >= 0) epi((unsigned)done, sh.red[(i - LB_STAGES) % (2 * LB_STAGES)]);
    if (!more) break;
    i++;
  }
  // The tiles still with the consumers: i - LB_STAGES + 1 .. i - 1 (their stages hold their tile index).
  for (unsigned j = i >= LB_STAGES ? i - LB_STAGES + 1 : 0; j < i; j++) {
    unsigned s = j % LB_STAGES;
    lb_wait(&sh.empty[s], (j / LB_STAGES) & 1);
    epi((unsigned)sh.tile[s], sh.red[j % (2 * LB_STAGES)]);
  }
}

template <class Issue, class Epi>
__device__ __forceinline__ void lb_produce(LbShared& sh, unsigned char* stages, unsigned n_tiles, unsigned* ticket, Issue issue, Epi epi,
                                           unsigned most = LB_STATIC_ROUNDS) {
  lb_produce_after(sh, stages, n_tiles, lb_rounds(n_tiles, most), ticket, issue, epi);
}

// A consumer warp: for each tile, unit(tile, u, stage) -> dot product for its units u = warp, warp +
// LB_CONSUMERS, ... < units (valid ones only: unit returns false for the others), into red.
template <class Unit>
__device__ __forceinline__ void lb_consume(LbShared& sh, const unsigned char* stages, unsigned units, Unit unit) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (unsigned i = 0;; i++) {
    unsigned s = i % LB_STAGES;
    lb_wait(&sh.full[s], (i / LB_STAGES) & 1);
    int t = *(volatile int*)&sh.tile[s];
    if (t < 0) break;
    for (unsigned u = warp; u < units; u += LB_CONSUMERS) {
      float d;
      if (unit((unsigned)t, u, stages + s * LB_STAGE_BYTES, d) && lane == 0) sh.red[i % (2 * LB_STAGES)][u] = d;
    }
    __syncwarp();
    if (LB_LANES_ARRIVING > 1 || lane == 0) lb_arrive(&sh.empty[s]);
  }
}

// The warp's 4 KB row chunk at `unit` (shared memory) against xr, columns below lim (relative to the
// chunk): the warp's sum on every lane. Two halves of four 16-byte loads keep the registers within
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

// The lane's 64 inputs of a 2048-column chunk from `v` (global, f32), columns below lim (zeros past).
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

// The consumers (LB_CONSUMERS warps): xr = the lane's 64 inputs of chunk q of x ⊙ ln (k <= Q x 2048,
// zeros past k), returning the RMS norm's scale rsqrt(mean(x²) + eps). x goes through shared memory
// (xs, Q x 2048 floats) so the block reads it once; one barrier among the consumers (named barrier 1).
template <int Q>
__device__ __forceinline__ float lb_norm_input(float (&xr)[64], float* xs, LbShared& sh, const float* x, const ll_bf16* ln, unsigned k, float eps,
                                               unsigned q) {
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < Q; c++) {
    unsigned i = c * LL_CHUNK + threadIdx.x * 8;  // 256 consumer threads x 8 = 2048 a chunk
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
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < 8; c++) {
    const float* at = xs + q * LL_CHUNK + c * 256 + lane * 8;
    float4 p = *(const float4*)at, r = *(const float4*)(at + 4);
    xr[c * 8] = p.x; xr[c * 8 + 1] = p.y; xr[c * 8 + 2] = p.z; xr[c * 8 + 3] = p.w;
    xr[c * 8 + 4] = r.x; xr[c * 8 + 5] = r.y; xr[c * 8 + 6] = r.z; xr[c * 8 + 7] = r.w;
  }
  return rsqrtf(s / (float)k + eps);
}

