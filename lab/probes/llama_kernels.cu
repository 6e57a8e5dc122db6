// Study tool: each Llama decode kernel (crates/ostinato-llama/kernels/llama.cu) timed alone at Llama-3.2-1B's shapes,
// cycling over 16 layers' worth of distinct weights so L2 does not serve them; prints µs and TB/s per
// kernel. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -DOST_TRIGGER=3 -o /tmp/llama_kernels lab/probes/llama_kernels.cu && /tmp/llama_kernels [pos] [blocks]
// The shipped numbers come from `ostinato bench` (its decode rows' kernel table); this is for trying a
// kernel change in seconds.
#include "../../kernels/ostinato.cu"
#include "../../crates/ostinato-llama/kernels/llama.cu"

#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s at %d: %s\n", cudaGetErrorString(e_), __LINE__, #x); exit(1); } } while (0)

#ifndef SPLITS
#define SPLITS 16
#endif
constexpr unsigned H = 2048, L = 16, NH = 32, NKV = 8, HD = 64, F = 8192, V = 128256, SEQ = 4352;

template <class T> T* dev(size_t n) { T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }

__global__ void fill_bf16(ll_bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = ll_to_bf(((h >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 0.0346f);
  }
}

static cudaStream_t cur_stream = 0;

// Alone: one launch between two events on an idle GPU (median).
template <class Launch> void time(const char* name, double bytes, Launch launch) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> t, s;
  for (int r = 0; r < 5 * (int)L; r++) {
    CK(cudaEventRecord(a)); launch(r % L); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r >= (int)L) t.push_back(ms * 1e3f);
  }
  // Chained: a captured graph of 16 launches (one per layer's weights), per launch: the kernel plus a
  // graph's dependent-launch gap, without the host's launch cost.
  cudaStream_t cs; CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
  cur_stream = cs;
  for (unsigned l = 0; l < L; l++) launch(l);
  cur_stream = 0;
  CK(cudaStreamEndCapture(cs, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
  for (int r = 0; r < 12; r++) {
    CK(cudaEventRecord(a, cs)); CK(cudaGraphLaunch(ge, cs)); CK(cudaEventRecord(b, cs)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r >= 2) s.push_back(ms * 1e3f / L);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end()); std::sort(s.begin(), s.end());
  double us = t[t.size() / 2], su = s[s.size() / 2];
  printf("%-14s alone %7.2f us %5.2f TB/s %3.0f%% | chained %7.2f us %5.2f TB/s %3.0f%%\n", name, us, bytes / us / 1e6, bytes / us / 1e6 / 4.8 * 100, su, bytes / su / 1e6, bytes / su / 1e6 / 4.8 * 100);
}

int main(int argc, char** argv) {
  unsigned pos = argc > 1 ? atoi(argv[1]) : 1024;
  const unsigned Q = NH * HD, KV = NKV * HD, G = NH / NKV;
  std::vector<ll_bf16*> wqkv(L), wo(L), wgu(L), wd(L), kc(L), vc(L);
  auto rnd = [](ll_bf16* p, size_t n, unsigned s) { fill_bf16<<<1024, 256>>>(p, n, s); };
  for (unsigned l = 0; l < L; l++) {
    wqkv[l] = dev<ll_bf16>((size_t)(Q + 2 * KV) * H); rnd(wqkv[l], (size_t)(Q + 2 * KV) * H, 10 * l + 1);
    wo[l] = dev<ll_bf16>((size_t)H * Q); rnd(wo[l], (size_t)H * Q, 10 * l + 2);
    wgu[l] = dev<ll_bf16>((size_t)2 * F * H); rnd(wgu[l], (size_t)2 * F * H, 10 * l + 3);
    wd[l] = dev<ll_bf16>((size_t)H * F); rnd(wd[l], (size_t)H * F, 10 * l + 4);
    kc[l] = dev<ll_bf16>((size_t)KV * SEQ); rnd(kc[l], (size_t)KV * SEQ, 10 * l + 5);
    vc[l] = dev<ll_bf16>((size_t)KV * SEQ); rnd(vc[l], (size_t)KV * SEQ, 10 * l + 6);
  }
  ll_bf16* emb = dev<ll_bf16>((size_t)V * H); rnd(emb, (size_t)V * H, 99);
  ll_bf16* ln = dev<ll_bf16>(H); rnd(ln, H, 98);
  float *x = dev<float>(H), *q = dev<float>(Q), *attn = dev<float>(Q), *act = dev<float>(F), *logits = dev<float>(V), *freq = dev<float>(HD / 2);
  float *apart = dev<float>((size_t)NKV * SPLITS * G * (2 + HD)), *hpart = dev<float>(2 * ((V + 7) / 8));
  unsigned *acount = dev<unsigned>(NKV), *hcount = dev<unsigned>(1), *token = dev<unsigned>(1);
  CK(cudaDeviceSynchronize());
  const unsigned B = argc > 2 ? atoi(argv[2]) : 264;  // blocks per projection
  auto grid = [&](unsigned units) { unsigned b = (units + 7) / 8; return b < B ? b : B; };
  // Warm-up: half a second of work, so the clocks leave idle before anything is timed.
  {
    cudaEvent_t a; CK(cudaEventCreate(&a)); float ms = 0; cudaEvent_t b; CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a));
    for (int i = 0; i < 20000 && ms < 500; i++) {
      llama_ffn_in<<<F / 4, 256>>>(act, x, ln, wgu[i % L], F, H, 1e-5f);
      if (i % 500 == 499) { CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); CK(cudaEventElapsedTime(&ms, a, b)); }
    }
  }
  printf("pos %u\n", pos);
  time("llama_qkv", 2.0 * (Q + 2 * KV) * H, [&](int l) { llama_qkv<<<grid((NH + 2 * NKV) * HD / 2), 256, 0, cur_stream>>>(q, kc[l], vc[l], x, ln, wqkv[l], freq, pos, H, NH, NKV, HD, SEQ, 1e-5f); });
  time("llama_attn", 4.0 * KV * (pos + 1), [&](int l) { llama_attn<<<dim3(SPLITS, NKV), 256, 0, cur_stream>>>(attn, apart, acount, q, kc[l], vc[l], pos, NH, NKV, SEQ, SPLITS); });
  time("llama_o", 2.0 * H * Q, [&](int l) { llama_o<<<grid(H), 256, 0, cur_stream>>>(x, wo[l], attn, H, Q); });
  time("llama_ffn_in", 4.0 * F * H, [&](int l) { llama_ffn_in<<<grid(F), 256, 0, cur_stream>>>(act, x, ln, wgu[l], F, H, 1e-5f); });
  time("llama_down", 2.0 * H * F, [&](int l) { llama_down<<<grid(H), 256, 0, cur_stream>>>(x, wd[l], act, H, F); });
  time("llama_lm_head", 2.0 * V * H, [&](int) { llama_lm_head<<<grid(V), 256, 0, cur_stream>>>(logits, hpart, hcount, token, x, ln, emb, V, H, 1e-5f); });
  // The whole step (16 layers, LM head) as a captured graph, with and without the PDL launch attribute.
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto step_graph = [&](bool pdl) {
    cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
    auto go = [&](auto kern, dim3 grid, auto... args) {
      cudaLaunchConfig_t c = {}; c.gridDim = grid; c.blockDim = dim3(256); c.stream = st; c.attrs = at; c.numAttrs = pdl ? 1 : 0;
      CK(cudaLaunchKernelEx(&c, kern, args...));
    };
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (unsigned l = 0; l < L; l++) {
      go(llama_qkv, dim3(grid((NH + 2 * NKV) * HD / 2)), q, kc[l], vc[l], (const float*)x, (const ll_bf16*)ln, (const ll_bf16*)wqkv[l], (const float*)freq, pos, H, NH, NKV, HD, SEQ, 1e-5f);
      go(llama_attn, dim3(SPLITS, NKV), attn, apart, acount, (const float*)q, (const ll_bf16*)kc[l], (const ll_bf16*)vc[l], pos, NH, NKV, SEQ, SPLITS);
      go(llama_o, dim3(grid(H)), x, (const ll_bf16*)wo[l], (const float*)attn, H, Q);
      go(llama_ffn_in, dim3(grid(F)), act, (const float*)x, (const ll_bf16*)ln, (const ll_bf16*)wgu[l], F, H, 1e-5f);
      go(llama_down, dim3(grid(H)), x, (const ll_bf16*)wd[l], (const float*)act, H, F);
    }
    go(llama_lm_head, dim3(grid(V)), logits, hpart, hcount, token, (const float*)x, (const ll_bf16*)ln, (const ll_bf16*)emb, V, H, 1e-5f);
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < 30; r++) {
      CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r >= 5) t.push_back(ms * 1e3f);
    }
    std::sort(t.begin(), t.end());
    printf("step graph, pdl %d: %.1f us\n", (int)pdl, t[t.size() / 2]);
  };
  step_graph(false);
  step_graph(true);
  return 0;
}
