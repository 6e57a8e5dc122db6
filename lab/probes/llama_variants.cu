// Variants of the Llama pack's kernels for the decode probe (llama_kernels.cu includes this after the
// pack). Earlier variants (the merge in attention with a plain O, batched or lane-group softmax, gate/up
// prefetching the down projection's tiles) were measured and not kept; they live in git history and
// lab/llama-decode.md.
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

extern "C" __global__ void __launch_bounds__(LL_THREADS, LL_MIN_BLOCKS)
    llama_attn_pf(float* part, ll_bf16* kcache, ll_bf16* vcache, const float* q, const ll_bf16* kv_new, unsigned pos, unsigned heads,
                  unsigned kv_heads, unsigned max_seq, unsigned splits, unsigned head_dim, const ll_bf16* wgu, unsigned ffn, unsigned hidden,
                  unsigned pf_pairs) {
  __shared__ LlAttnShared<64> sh;
  auto prefetch = [&] {
    // Two ranges of pf_pairs rows (gate from row 0, up from row ffn), cut into LV_PF_PIECE pieces;
    // piece j goes to block j % blocks, lane j / blocks of its first warp.
    unsigned long long range = (unsigned long long)min(pf_pairs, ffn) * hidden * 2;
    unsigned per_range = (unsigned)((range + LV_PF_PIECE - 1) / LV_PF_PIECE), pieces = 2 * per_range;
    unsigned blocks = gridDim.x * gridDim.y, b = blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x >= 32) return;
    for (unsigned j = b + threadIdx.x * blocks; j < pieces; j += 32 * blocks) {
      unsigned r = j / per_range;
      unsigned long long off = (unsigned long long)(j % per_range) * LV_PF_PIECE;
      const char* base = (const char*)(wgu + (unsigned long long)r * ffn * hidden);
      lv_prefetch_bulk_l2(base + off, (unsigned)min((unsigned long long)LV_PF_PIECE, range - off));
    }
  };
  ll_attn_groups<64>(sh, part, kcache, vcache, q, kv_new, pos, heads, kv_heads, max_seq, splits, prefetch);
  OST_EXIT();
}
