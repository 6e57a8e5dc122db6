// Llama decode kernels (bf16 weights and KV cache, f32 activations and accumulation). Built with the
// built-in source (kernels/ostinato.cu supplies OST_ENTRY / OST_EXIT); the host backend's twins live in
// crates/ostinato-host/src/llama.rs with the same signatures and math (summation order differs).
//
// Every projection is a block tile: 256 threads split the input dimension k (thread t owns the 16-byte
// chunks t, t+256, ... of each row, so one tile row is read by the whole block with coalesced 16-byte
// loads) and the block owns ROWS rows. Each thread loads all its weight chunks for all ROWS rows into
// registers BEFORE `griddepcontrol.wait` (the certified pre-wait prefetch: weights are written by no
// node of the step), then waits for the producer of its input vector, loads its slice of that vector
// once, and reuses it for every row. Preconditions (checked by the graph builder): k % 8 == 0 and
// k <= KC * 2048.

#define LL_THREADS 256
#define LL_WARPS (LL_THREADS / 32)

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
  float a = ll_lo(w.x) * x[0];
  a = fmaf(ll_hi(w.x), x[1], a);
  a = fmaf(ll_lo(w.y), x[2], a);
  a = fmaf(ll_hi(w.y), x[3], a);
  a = fmaf(ll_lo(w.z), x[4], a);
  a = fmaf(ll_hi(w.z), x[5], a);
  a = fmaf(ll_lo(w.w), x[6], a);
  a = fmaf(ll_hi(w.w), x[7], a);
  return a;
}

// Weight chunks of `rows` (row-major, k columns) for this thread, into registers.
template <int ROWS, int KC>
__device__ __forceinline__ void ll_load_rows(uint4 (&w)[ROWS][KC], const ll_bf16* W, const unsigned (&rows)[ROWS], unsigned k) {
#pragma unroll
  for (int c = 0; c < KC; c++) {
    unsigned j = (c * LL_THREADS + threadIdx.x) * 8;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      w[r][c] = j < k ? ll_stream(W + (unsigned long long)rows[r] * k + j) : make_uint4(0, 0, 0, 0);
    }
  }
}

// This thread's slice of an f32 input vector (zeros past k).
template <int KC>
__device__ __forceinline__ void ll_load_x(float (&x)[KC][8], const float* v, unsigned k) {
#pragma unroll
  for (int c = 0; c < KC; c++) {
    unsigned j = (c * LL_THREADS + threadIdx.x) * 8;
    if (j < k) {
      float4 a = *(const float4*)(v + j), b = *(const float4*)(v + j + 4);
      x[c][0] = a.x; x[c][1] = a.y; x[c][2] = a.z; x[c][3] = a.w;
      x[c][4] = b.x; x[c][5] = b.y; x[c][6] = b.z; x[c][7] = b.w;
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) x[c][e] = 0.0f;
    }
  }
}

// Block-wide sums of v[0..N): on return every thread holds the totals. `red` holds LL_WARPS * N floats.
template <int N>
__device__ __forceinline__ void ll_block_sum(float (&v)[N], float* red) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < N; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
  }
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < N; r++) red[warp * N + r] = v[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < N; r++) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < LL_WARPS; w++) s += red[w * N + r];
    v[r] = s;
  }
}

// RMS-normalises this thread's slice of x in place: x * rsqrt(mean(x^2) + eps) * ln (ln: bf16 chunks).
template <int KC>
__device__ __forceinline__ void ll_rmsnorm(float (&x)[KC][8], const uint4 (&ln)[KC], unsigned k, float eps, float* red) {
  float ss[1] = {0.0f};
#pragma unroll
  for (int c = 0; c < KC; c++) {
#pragma unroll
    for (int e = 0; e < 8; e++) ss[0] = fmaf(x[c][e], x[c][e], ss[0]);
  }
  ll_block_sum<1>(ss, red);
  float scale = rsqrtf(ss[0] / (float)k + eps);
#pragma unroll
  for (int c = 0; c < KC; c++) {
    const unsigned g[4] = {ln[c].x, ln[c].y, ln[c].z, ln[c].w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
      x[c][2 * e] = x[c][2 * e] * scale * ll_lo(g[e]);
      x[c][2 * e + 1] = x[c][2 * e + 1] * scale * ll_hi(g[e]);
    }
  }
}

// The ROWS dot products of the tile (every thread holds the totals on return).
template <int ROWS, int KC>
__device__ __forceinline__ void ll_tile_dot(float (&acc)[ROWS], const uint4 (&w)[ROWS][KC], const float (&x)[KC][8], float* red) {
#pragma unroll
  for (int r = 0; r < ROWS; r++) {
    acc[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < KC; c++) acc[r] += ll_dot8(w[r][c], x[c]);
  }
  ll_block_sum<ROWS>(acc, red);
}

// The norm weights' chunks for this thread (zeros past k).
template <int KC>
__device__ __forceinline__ void ll_load_norm(uint4 (&ln)[KC], const ll_bf16* g, unsigned k) {
#pragma unroll
  for (int c = 0; c < KC; c++) {
    unsigned j = (c * LL_THREADS + threadIdx.x) * 8;
    ln[c] = j < k ? ll_stream(g + j) : make_uint4(0, 0, 0, 0);
  }
}

// llama_embed(x, emb, token, hidden): x = emb[token[0]] as f32.
extern "C" __global__ void llama_embed(float* x, const ll_bf16* emb, const unsigned* token, unsigned hidden) {
  OST_ENTRY();
  unsigned long long row = (unsigned long long)token[0] * hidden;
  OST_GRID_STRIDE(i, hidden) { x[i] = ll_bf(emb[row + i]); }
  OST_EXIT();
}

#define LL_QKV_ROWS 8
// llama_qkv(q, kcache, vcache, x, ln, wqkv, rope_freq, pos, hidden, heads, kv_heads, head_dim, max_seq, eps):
// rmsnorm(x)·ln, then the fused q/k/v projection (wqkv: heads*hd + 2*kv_heads*hd rows), RoPE on q and k
// (the rotate-half pairing: dims j and j + hd/2 of a head, angle pos * rope_freq[j]), q to `q` (f32),
// k and v appended to the caches at `pos` (bf16; layout [kv_head][max_seq][hd]). A block owns 4 pairs.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_qkv(float* q, ll_bf16* kcache, ll_bf16* vcache, const float* x, const ll_bf16* ln,
                                                                 const ll_bf16* wqkv, const float* rope_freq, unsigned pos, unsigned hidden,
                                                                 unsigned heads, unsigned kv_heads, unsigned head_dim, unsigned max_seq, float eps) {
  __shared__ float red[LL_WARPS * LL_QKV_ROWS];
  unsigned half = head_dim / 2;
  unsigned pairs = (heads + 2 * kv_heads) * half;
  unsigned rows[LL_QKV_ROWS];
#pragma unroll
  for (int i = 0; i < LL_QKV_ROWS / 2; i++) {
    unsigned p = min(blockIdx.x * (LL_QKV_ROWS / 2) + i, pairs - 1);
    unsigned r = (p / half) * head_dim + p % half;
    rows[2 * i] = r;
    rows[2 * i + 1] = r + half;
  }
  uint4 w[LL_QKV_ROWS][1], g[1];
  ll_load_rows<LL_QKV_ROWS, 1>(w, wqkv, rows, hidden);
  ll_load_norm<1>(g, ln, hidden);
  OST_ENTRY();
  float xv[1][8], acc[LL_QKV_ROWS];
  ll_load_x<1>(xv, x, hidden);
  ll_rmsnorm<1>(xv, g, hidden, eps, red);
  ll_tile_dot<LL_QKV_ROWS, 1>(acc, w, xv, red);
  unsigned i = threadIdx.x;
  if (i < LL_QKV_ROWS / 2) {
    unsigned p = blockIdx.x * (LL_QKV_ROWS / 2) + i;
    if (p < pairs) {
      unsigned head = p / half, j = p % half;
      float a = acc[2 * i], b = acc[2 * i + 1];
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
    }
  }
  OST_EXIT();
}

// Projection + residual: x[row] += W[row]·v, for ROWS rows per block.
template <int ROWS, int KC>
__device__ __forceinline__ void ll_gemv_residual(float* x, const ll_bf16* W, const float* v, unsigned m, unsigned k) {
  __shared__ float red[LL_WARPS * ROWS];
  unsigned rows[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; r++) rows[r] = min(blockIdx.x * ROWS + r, m - 1);
  uint4 w[ROWS][KC];
  ll_load_rows<ROWS, KC>(w, W, rows, k);
  OST_ENTRY();
  float xv[KC][8], acc[ROWS];
  ll_load_x<KC>(xv, v, k);
  ll_tile_dot<ROWS, KC>(acc, w, xv, red);
  if (threadIdx.x < ROWS) {
    unsigned row = blockIdx.x * ROWS + threadIdx.x;
    float a = 0.0f;
#pragma unroll
    for (int r = 0; r < ROWS; r++) a = r == (int)threadIdx.x ? acc[r] : a;
    if (row < m) x[row] += a;
  }
  OST_EXIT();
}

// llama_o(x, wo, attn, m, k): x += Wo·attn (attention output projection + residual). 8 rows per block.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_o(float* x, const ll_bf16* wo, const float* attn, unsigned m, unsigned k) {
  ll_gemv_residual<8, 1>(x, wo, attn, m, k);
}

// llama_down(x, wd, act, m, k): x += Wd·act (FFN down projection + residual; k up to 8192). 4 rows per block.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_down(float* x, const ll_bf16* wd, const float* act, unsigned m, unsigned k) {
  ll_gemv_residual<4, 4>(x, wd, act, m, k);
}

#define LL_FFN_ROWS 8
// llama_ffn_in(act, x, ln, wgu, ffn, hidden, eps): rmsnorm(x)·ln, gate = Wg·xn, up = Wu·xn (wgu: the ffn
// gate rows, then the ffn up rows), act = silu(gate) * up. A block owns 4 (gate, up) pairs.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_ffn_in(float* act, const float* x, const ll_bf16* ln, const ll_bf16* wgu, unsigned ffn,
                                                                    unsigned hidden, float eps) {
  __shared__ float red[LL_WARPS * LL_FFN_ROWS];
  unsigned rows[LL_FFN_ROWS];
#pragma unroll
  for (int i = 0; i < LL_FFN_ROWS / 2; i++) {
    unsigned r = min(blockIdx.x * (LL_FFN_ROWS / 2) + i, ffn - 1);
    rows[2 * i] = r;
    rows[2 * i + 1] = ffn + r;
  }
  uint4 w[LL_FFN_ROWS][1], g[1];
  ll_load_rows<LL_FFN_ROWS, 1>(w, wgu, rows, hidden);
  ll_load_norm<1>(g, ln, hidden);
  OST_ENTRY();
  float xv[1][8], acc[LL_FFN_ROWS];
  ll_load_x<1>(xv, x, hidden);
  ll_rmsnorm<1>(xv, g, hidden, eps, red);
  ll_tile_dot<LL_FFN_ROWS, 1>(acc, w, xv, red);
  unsigned i = threadIdx.x;
  if (i < LL_FFN_ROWS / 2) {
    unsigned r = blockIdx.x * (LL_FFN_ROWS / 2) + i;
    float gate = acc[2 * i], up = acc[2 * i + 1];
    if (r < ffn) act[r] = gate / (1.0f + expf(-gate)) * up;
  }
  OST_EXIT();
}

#define LL_HEAD_ROWS 8
// llama_lm_head(logits, part, counter, token, x, ln, emb, vocab, hidden, eps): final rmsnorm, logits =
// emb·xn (tied embeddings), and the greedy token: each block writes its best (value, index) to `part`;
// the last block to finish (counted in counter[0], which it resets) reduces them into token[0]. Ties go
// to the lower index.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_lm_head(float* logits, float* part, unsigned* counter, unsigned* token, const float* x,
                                                                     const ll_bf16* ln, const ll_bf16* emb, unsigned vocab, unsigned hidden, float eps) {
  __shared__ float red[LL_WARPS * LL_HEAD_ROWS];
  __shared__ float best_v[LL_THREADS];
  __shared__ unsigned best_i[LL_THREADS];
  __shared__ bool last;
  unsigned rows[LL_HEAD_ROWS];
#pragma unroll
  for (int r = 0; r < LL_HEAD_ROWS; r++) rows[r] = min(blockIdx.x * LL_HEAD_ROWS + r, vocab - 1);
  uint4 w[LL_HEAD_ROWS][1], g[1];
  ll_load_rows<LL_HEAD_ROWS, 1>(w, emb, rows, hidden);
  ll_load_norm<1>(g, ln, hidden);
  OST_ENTRY();
  float xv[1][8], acc[LL_HEAD_ROWS];
  ll_load_x<1>(xv, x, hidden);
  ll_rmsnorm<1>(xv, g, hidden, eps, red);
  ll_tile_dot<LL_HEAD_ROWS, 1>(acc, w, xv, red);
  if (threadIdx.x == 0) {
    float bv = -3.402823466e38f;
    unsigned bi = 0xffffffffu;
#pragma unroll
    for (int r = 0; r < LL_HEAD_ROWS; r++) {
      unsigned row = blockIdx.x * LL_HEAD_ROWS + r;
      if (row < vocab) {
        logits[row] = acc[r];
        if (acc[r] > bv || bi == 0xffffffffu) { bv = acc[r]; bi = row; }
      }
    }
    part[2 * blockIdx.x] = bv;
    part[2 * blockIdx.x + 1] = __uint_as_float(bi);
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {
    __threadfence();
    float bv = -3.402823466e38f;
    unsigned bi = 0xffffffffu;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += LL_THREADS) {
      float v = __ldcg(part + 2 * b);
      unsigned i = __float_as_uint(__ldcg(part + 2 * b + 1));
      if (v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned s = LL_THREADS / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        float v = best_v[threadIdx.x + s];
        unsigned i = best_i[threadIdx.x + s];
        if (v > best_v[threadIdx.x] || (v == best_v[threadIdx.x] && i < best_i[threadIdx.x])) {
          best_v[threadIdx.x] = v;
          best_i[threadIdx.x] = i;
        }
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
#define LL_MAX_GROUP 8
// llama_attn(out, part, counter, q, kcache, vcache, pos, heads, kv_heads, max_seq, splits): attention of
// the query heads over cache rows 0..=pos (head dim 64, grouped-query: heads / kv_heads query heads per
// KV head, at most 8). Grid (splits, kv_heads): block (s, h) takes an equal share of the rows for the
// query heads of KV head h, so every KV row is read once; it writes its softmax partial (max, sum, and
// the weighted value sums) to `part`, and the last block of KV head h (counted in counter[h], which it
// resets) merges the partials into out. Dynamic shared memory: group * ceil(max_seq / splits) floats.
extern "C" __global__ void __launch_bounds__(LL_THREADS) llama_attn(float* out, float* part, unsigned* counter, const float* q, const ll_bf16* kcache,
                                                                  const ll_bf16* vcache, unsigned pos, unsigned heads, unsigned kv_heads,
                                                                  unsigned max_seq, unsigned splits) {
  extern __shared__ float scores[];
  __shared__ float qs[LL_MAX_GROUP][LL_HD];
  __shared__ float red[LL_WARPS * LL_MAX_GROUP];
  __shared__ float accs[LL_THREADS / LL_HD][LL_MAX_GROUP][LL_HD];
  __shared__ bool last;
  OST_ENTRY();
  unsigned group = heads / kv_heads, h = blockIdx.y, s = blockIdx.x;
  unsigned n = min(pos, max_seq - 1) + 1;
  unsigned chunk = (n + splits - 1) / splits;
  unsigned t0 = min(n, s * chunk), t1 = min(n, t0 + chunk);
  for (unsigned i = threadIdx.x; i < group * LL_HD; i += LL_THREADS) qs[i / LL_HD][i % LL_HD] = q[(h * group) * LL_HD + i];
  __syncthreads();
  const ll_bf16* kh = kcache + (unsigned long long)h * max_seq * LL_HD;
  const ll_bf16* vh = vcache + (unsigned long long)h * max_seq * LL_HD;
  float m[LL_MAX_GROUP];
#pragma unroll
  for (int g = 0; g < LL_MAX_GROUP; g++) m[g] = -3.402823466e38f;
  for (unsigned t = t0 + threadIdx.x; t < t1; t += LL_THREADS) {
    const uint4* kr = (const uint4*)(kh + (unsigned long long)t * LL_HD);
    float d[LL_MAX_GROUP] = {};
#pragma unroll
    for (int c = 0; c < LL_HD / 8; c++) {
      uint4 kv = __ldcg(kr + c);
#pragma unroll
      for (int g = 0; g < LL_MAX_GROUP; g++) {
        if (g < (int)group) d[g] += ll_dot8(kv, &qs[g][c * 8]);
      }
    }
#pragma unroll
    for (int g = 0; g < LL_MAX_GROUP; g++) {
      if (g < (int)group) {
        float sc = d[g] * 0.125f;  // 1 / sqrt(64)
        scores[g * chunk + (t - t0)] = sc;
        m[g] = fmaxf(m[g], sc);
      }
    }
  }
  // Block max per head (through red), then the exponentials and their sums.
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int g = 0; g < LL_MAX_GROUP; g++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m[g] = fmaxf(m[g], __shfl_xor_sync(0xffffffffu, m[g], o));
  }
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < LL_MAX_GROUP; g++) red[warp * LL_MAX_GROUP + g] = m[g];
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < LL_MAX_GROUP; g++) {
    float mm = red[g];
    for (int w = 1; w < LL_WARPS; w++) mm = fmaxf(mm, red[w * LL_MAX_GROUP + g]);
    m[g] = mm;
  }
  float l[LL_MAX_GROUP];
#pragma unroll
  for (int g = 0; g < LL_MAX_GROUP; g++) l[g] = 0.0f;
  for (unsigned t = t0 + threadIdx.x; t < t1; t += LL_THREADS) {
#pragma unroll
    for (int g = 0; g < LL_MAX_GROUP; g++) {
      if (g < (int)group) {
        float e = expf(scores[g * chunk + (t - t0)] - m[g]);
        scores[g * chunk + (t - t0)] = e;
        l[g] += e;
      }
    }
  }
  ll_block_sum<LL_MAX_GROUP>(l, red);  // syncs: the exponentials are visible below
  // Weighted value sums: thread (tg, d) takes rows t0 + tg, t0 + tg + 4, ...
  unsigned d = threadIdx.x % LL_HD, tg = threadIdx.x / LL_HD;
  float a[LL_MAX_GROUP] = {};
  for (unsigned t = t0 + tg; t < t1; t += LL_THREADS / LL_HD) {
    float v = ll_bf(__ldcg(vh + (unsigned long long)t * LL_HD + d));
#pragma unroll
    for (int g = 0; g < LL_MAX_GROUP; g++) {
      if (g < (int)group) a[g] = fmaf(scores[g * chunk + (t - t0)], v, a[g]);
    }
  }
#pragma unroll
  for (int g = 0; g < LL_MAX_GROUP; g++) accs[tg][g][d] = a[g];
  __syncthreads();
  // Partial layout per (h, s): group * (2 + 64) floats: max, sum, then the 64 sums, per query head.
  float* mine = part + ((unsigned long long)h * splits + s) * group * (2 + LL_HD);
  for (unsigned i = threadIdx.x; i < group * LL_HD; i += LL_THREADS) {
    unsigned g = i / LL_HD, dd = i % LL_HD;
    float sum = 0.0f;
    for (unsigned k = 0; k < LL_THREADS / LL_HD; k++) sum += accs[k][g][dd];
    mine[g * (2 + LL_HD) + 2 + dd] = sum;
  }
  if (threadIdx.x < group) {
    mine[threadIdx.x * (2 + LL_HD)] = t1 > t0 ? m[threadIdx.x] : -3.402823466e38f;
    mine[threadIdx.x * (2 + LL_HD) + 1] = l[threadIdx.x];
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter + h, 1u) == splits - 1;
  __syncthreads();
  if (last) {
    __threadfence();
    const float* all = part + (unsigned long long)h * splits * group * (2 + LL_HD);
    for (unsigned i = threadIdx.x; i < group * LL_HD; i += LL_THREADS) {
      unsigned g = i / LL_HD, dd = i % LL_HD;
      float mx = -3.402823466e38f;
      for (unsigned k = 0; k < splits; k++) mx = fmaxf(mx, __ldcg(all + (k * group + g) * (2 + LL_HD)));
      float lsum = 0.0f, o = 0.0f;
      for (unsigned k = 0; k < splits; k++) {
        const float* pk = all + (k * group + g) * (2 + LL_HD);
        float lk = __ldcg(pk + 1);
        if (lk > 0.0f) {
          float sc = expf(__ldcg(pk) - mx);
          lsum += lk * sc;
          o += __ldcg(pk + 2 + dd) * sc;
        }
      }
      out[(h * group + g) * LL_HD + dd] = o / lsum;
    }
    if (threadIdx.x == 0) counter[h] = 0;
  }
  OST_EXIT();
}
