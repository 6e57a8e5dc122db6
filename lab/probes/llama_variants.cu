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
