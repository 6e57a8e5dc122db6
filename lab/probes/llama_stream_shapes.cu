// Study tool: the pack's streaming projections (llama_ffn_in: gate/up, llama_down) at a model shape given
// at run time, in the stage geometry of the build (LB_STAGES x LB_STAGE_BYTES), to learn whether stages
// sized by the shape's rows pay. At hidden 3,072 a weight row is 6 KiB: two (gate, up) pairs fill 24 KiB
// of a 32 KiB stage, so six stages keep 144 KiB in flight where the 1B's shape keeps 192; five stages of
// 36 KiB hold three pairs each (180 KiB), four of 48 KiB four pairs (192 KiB).
//   check: gate/up and down of one layer against a double-precision CPU computation from the kernels'
//          own inputs, twice (the ticket counters must come back to zero).
//   time : each kernel over `layers` layers' weights as a captured graph, launches serialized (alone) and
//          with PDL on every edge (back to back, as the step runs them); µs per launch and TB/s.
// Build (scripts/fetch-cuda-tools.sh --lab gives a machine without a GPU nvcc; lab/probes/llama-shapes.sh
// builds the geometries and runs them):
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -DOST_TRIGGER=3 [-DLB_STAGES=5 -DLB_STAGE_BYTES=36864] \
//        -o llama_stream_shapes lab/probes/llama_stream_shapes.cu
//   ./llama_stream_shapes hidden ffn layers   (Llama-3.2-1B: 2048 8192 16; Llama-3.2-3B: 3072 8192 28)
#include "../../kernels/ostinato.cu"
#include "../../crates/ostinato-llama/kernels/llama_common.cu"
#include "../../crates/ostinato-llama/kernels/llama.cu"

#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s at %d: %s\n", cudaGetErrorString(e_), __LINE__, #x); exit(1); } } while (0)

static const size_t STAGES = (size_t)LB_STAGES * LB_STAGE_BYTES, NORM_SMEM = STAGES + 4 * 2 * LL_CHUNK;
static const float EPS = 1e-5f;

__global__ void fill(ll_bf16* p, size_t n, unsigned seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 0x9e3779b9u ^ (unsigned)(i >> 32); h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = ll_to_bf(lo + (h >> 8) * (1.0f / 16777216.0f) * (hi - lo));
  }
}
template <class T> static T* dev(size_t n) { T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }
static ll_bf16* weights(size_t n, unsigned seed, float lo, float hi) { ll_bf16* p = dev<ll_bf16>(n); fill<<<1024, 256>>>(p, n, seed, lo, hi); CK(cudaGetLastError()); return p; }
static double bf(ll_bf16 v) { unsigned u = (unsigned)v << 16; float f; memcpy(&f, &u, 4); return f; }
template <class T> static std::vector<T> host(const T* p, size_t n) { std::vector<T> v(n); CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost)); return v; }

struct Shape { unsigned hidden, ffn, layers, grid; };
struct Layer { ll_bf16 *wgu, *wd, *ln; };
struct Bufs { float *x, *act; unsigned* tickets; };

// Tiles as the kernels cut them (llama.cu: ll_ffn_in's P pairs, llama_down's R rows).
static unsigned ffn_tiles(Shape s) {
  unsigned q = s.hidden <= LL_CHUNK ? 1 : 2, p = std::min(LB_MAX_UNITS / (2 * q), LB_STAGE_BYTES / (4 * s.hidden));
  return (s.ffn + p - 1) / p;
}
static unsigned down_tiles(Shape s) {
  unsigned q = s.ffn <= 2048 ? 1 : s.ffn <= 4096 ? 2 : 4, r = std::min(LB_MAX_UNITS / q, LB_STAGE_BYTES / (2 * s.ffn));
  return (s.hidden + r - 1) / r;
}

static cudaError_t launch(cudaStream_t st, bool pdl, const void* k, unsigned grid, size_t smem, void** args) {
  cudaLaunchAttribute at;
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid); c.blockDim = dim3(LB_THREADS); c.dynamicSmemBytes = smem; c.stream = st; c.attrs = &at; c.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelExC(&c, k, args);
}
static void ffn_in(cudaStream_t st, bool pdl, Shape s, Layer& l, Bufs& b) {
  unsigned* t = b.tickets; float eps = EPS;
  void* a[] = {&b.act, &t, &b.x, &l.ln, &l.wgu, &s.ffn, &s.hidden, &eps};
  CK(launch(st, pdl, (const void*)llama_ffn_in, std::min(s.grid, ffn_tiles(s)), NORM_SMEM, a));
}
static void down(cudaStream_t st, bool pdl, Shape s, Layer& l, Bufs& b) {
  unsigned* t = b.tickets + 1;
  void* a[] = {&b.x, &t, &l.wd, &b.act, &s.hidden, &s.ffn};
  CK(launch(st, pdl, (const void*)llama_down, std::min(s.grid, down_tiles(s)), STAGES, a));
}

// Gate/up then down of layer 0 against double precision, from the inputs the kernels read.
static int check(cudaStream_t st, Shape s, Layer& l, Bufs& b) {
  int failures = 0;
  for (int round = 0; round < 2; round++) {
    std::vector<float> x0 = host(b.x, s.hidden);
    ffn_in(st, true, s, l, b); CK(cudaStreamSynchronize(st));
    std::vector<float> act = host(b.act, s.ffn);
    down(st, true, s, l, b); CK(cudaStreamSynchronize(st));
    std::vector<float> x1 = host(b.x, s.hidden);
    std::vector<ll_bf16> wgu = host(l.wgu, (size_t)2 * s.ffn * s.hidden), wd = host(l.wd, (size_t)s.hidden * s.ffn), ln = host(l.ln, s.hidden);
    std::vector<unsigned> t = host(b.tickets, 2);
    double ss = 0; for (float v : x0) ss += (double)v * v;
    double inv = 1.0 / sqrt(ss / s.hidden + EPS), worst_act = 0, worst_x = 0, scale_act = 0, scale_x = 0;
    for (unsigned j = 0; j < s.ffn; j++) {
      double g = 0, u = 0;
      for (unsigned k = 0; k < s.hidden; k++) {
        double xn = x0[k] * inv * bf(ln[k]);
        g += bf(wgu[(size_t)j * s.hidden + k]) * xn; u += bf(wgu[(size_t)(s.ffn + j) * s.hidden + k]) * xn;
      }
      double r = g / (1 + exp(-g)) * u;
      worst_act = std::max(worst_act, fabs(r - act[j])); scale_act = std::max(scale_act, fabs(r));
    }
    for (unsigned i = 0; i < s.hidden; i++) {  // from the kernel's own act, as the down projection reads it
      double d = x0[i];
      for (unsigned k = 0; k < s.ffn; k++) d += bf(wd[(size_t)i * s.ffn + k]) * act[k];
      worst_x = std::max(worst_x, fabs(d - x1[i])); scale_x = std::max(scale_x, fabs(d));
    }
    bool ok = worst_act <= 1e-3 * scale_act && worst_x <= 1e-4 * scale_x && t[0] == 0 && t[1] == 0;
    failures += !ok;
    printf("check %d: act |err| %.3g of %.3g, x |err| %.3g of %.3g, tickets %u %u: %s\n", round, worst_act, scale_act, worst_x, scale_x, t[0], t[1],
           ok ? "ok" : "FAIL");
  }
  return failures;
}

// µs per launch of `kernel` over every layer, replayed `reps` times in one captured graph.
template <class K> static double per_launch_us(cudaStream_t st, bool pdl, Shape s, std::vector<Layer>& ls, Bufs& b, K kernel) {
  cudaGraph_t g; cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (Layer& l : ls) kernel(st, pdl, s, l, b);
  CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&e, g, 0));
  cudaEvent_t a, z; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&z));
  for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(e, st));
  std::vector<double> us;
  for (int r = 0; r < 15; r++) {
    CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(e, st)); CK(cudaEventRecord(z, st)); CK(cudaEventSynchronize(z));
    float ms; CK(cudaEventElapsedTime(&ms, a, z)); us.push_back(ms * 1e3 / ls.size());
  }
  std::sort(us.begin(), us.end());
  CK(cudaGraphExecDestroy(e)); CK(cudaGraphDestroy(g)); CK(cudaEventDestroy(a)); CK(cudaEventDestroy(z));
  return us[us.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 4) { printf("usage: %s hidden ffn layers\n", argv[0]); return 2; }
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Shape s{(unsigned)atoi(argv[1]), (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)sms};
  if (s.hidden % 8 || s.hidden > 2 * LL_CHUNK || s.ffn > 8192 || s.layers == 0) { printf("shape out of the kernels' range\n"); return 2; }
  CK(cudaFuncSetAttribute(llama_ffn_in, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)NORM_SMEM));
  CK(cudaFuncSetAttribute(llama_down, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)STAGES));
  std::vector<Layer> ls(s.layers);
  for (unsigned i = 0; i < s.layers; i++)
    ls[i] = {weights((size_t)2 * s.ffn * s.hidden, 10 * i + 3, -0.03f, 0.03f), weights((size_t)s.hidden * s.ffn, 10 * i + 4, -0.03f, 0.03f),
             weights(s.hidden, 10 * i + 8, 0.5f, 1.5f)};
  Bufs b{dev<float>(s.hidden), dev<float>(s.ffn), dev<unsigned>(2)};
  std::vector<float> x(s.hidden);
  for (unsigned i = 0; i < s.hidden; i++) x[i] = sinf(0.37f * i) + 0.1f;
  CK(cudaMemcpy(b.x, x.data(), 4 * x.size(), cudaMemcpyHostToDevice));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  printf("shape hidden %u ffn %u layers %u; stages %d x %d B; grid %u; gate/up %u tiles, down %u tiles\n", s.hidden, s.ffn, s.layers, LB_STAGES,
         LB_STAGE_BYTES, s.grid, ffn_tiles(s), down_tiles(s));
  int failures = check(st, s, ls[0], b);
  double gu_bytes = 4.0 * s.ffn * s.hidden, d_bytes = 2.0 * s.hidden * s.ffn;
  for (int pdl = 0; pdl < 2; pdl++) {
    double g = per_launch_us(st, pdl, s, ls, b, ffn_in), d = per_launch_us(st, pdl, s, ls, b, down);
    printf("%-12s gate/up %7.2f us %5.2f TB/s   down %7.2f us %5.2f TB/s\n", pdl ? "back to back" : "alone", g, gu_bytes / g * 1e-6, d, d_bytes / d * 1e-6);
  }
  CK(cudaDeviceSynchronize());
  printf("failures %d\n", failures);
  return failures ? 1 : 0;
}
