// Ten independent kernels of one replay, submitted five ways, to measure what one launch for all ten
// would gain on the matrix's independent rows (docs/fences.md, "Where Ostinato still loses": raw
// Vulkan runs ten dispatches recorded without a barrier up to 2.4x faster than any CUDA submission).
// Each kernel is the geometry family's element-wise body (out[i] = out[i] * 3 + x[i] + salt over its
// own slice of `grid * block` elements, grid-stride), 1-D blocks. Submissions, each a CUDA graph
// replayed alone between two events (the bench's protocol):
//   roots      ten kernel nodes, no edges (the exec's `plan shape` candidate without PDL);
//   lanes      four chains of full edges, node i on chain i % 4 (`auto`'s shape for a root fan);
//   lanes-pdl  the same chains with programmatic edges (every kernel waits, then triggers);
//   serial     one chain of ten (stream capture of ten launches on one stream);
//   side       one kernel of 10 * grid blocks, block b running kernel b / grid's block b % grid: the
//              ten side by side in one launch, what Ostinato could submit for independent nodes.
// Every submission's result is checked against the host after one replay from zeroed outputs.
// Build: nvcc -O3 -arch=sm_90 -o side_by_side side_by_side.cu
// Run:   ./side_by_side [GRIDxBLOCK ...]   (default: the geometry rows 64x512 256x64 512x256 1024x128
//        8192x128 2048x1024); prints GPU us per replay and per dispatch, median of 201 replays.
// Prediction (before any run): on the rows of 64-512 blocks, `side` at 0.3-0.5 us a dispatch against
// 1.4-1.7 for the graph shapes (H100, matrix of 2026-12-06), below raw Vulkan's 0.69; on 2,048 and
// 8,192 blocks no gain (the GPU is full either way).
// Measured (H100 GPU-8d8c0ee9, 2026-12-06, `6f0ce7c`; docs/fences.md decision 15): `side` 0.464 /
// 0.531 / 0.685 / 0.992 us a dispatch on the first four rows against 0.762-2.074 for the graph
// shapes, below raw Vulkan's 0.69 on the first; 8,192x128 gained too (5.392 against 10.346-10.733,
// where the prediction said none); 2,048x1,024 lost (10.755 against 10.205).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      printf("%s at line %d: %s\n", cudaGetErrorString(e_), __LINE__, #x);        \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

constexpr int kKernels = 10;
constexpr int kReplays = 201;

__device__ __forceinline__ void body(unsigned* out, const unsigned* x, unsigned n, unsigned salt, unsigned b, unsigned blocks) {
  const unsigned bt = blockDim.x;
  for (unsigned i = b * bt + threadIdx.x; i < n; i += bt * blocks) out[i] = out[i] * 3u + x[i] + salt;
}

__global__ void one(unsigned* out, const unsigned* x, unsigned n, unsigned salt) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  body(out, x, n, salt, blockIdx.x, gridDim.x);
}

struct Members {
  unsigned* out[kKernels];
  const unsigned* x[kKernels];
  unsigned salt[kKernels];
};

__global__ void side(Members m, unsigned n, unsigned grid) {
  const unsigned k = blockIdx.x / grid;
  body(m.out[k], m.x[k], n, m.salt[k], blockIdx.x % grid, grid);
}

enum Shape { ROOTS, LANES, LANES_PDL, SERIAL, SIDE };
static const char* kNames[] = {"roots", "lanes", "lanes-pdl", "serial", "side"};

struct Row {
  unsigned grid, block, n;
  unsigned *out, *x;
  Members m;
};

static cudaGraphNode_t add_one(cudaGraph_t g, Row& r, int k) {
  void* args[] = {&r.m.out[k], &r.m.x[k], &r.n, &r.m.salt[k]};
  cudaKernelNodeParams p = {};
  p.func = (void*)one;
  p.gridDim = dim3(r.grid);
  p.blockDim = dim3(r.block);
  p.kernelParams = args;
  cudaGraphNode_t node;
  CHECK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
  return node;
}

static void edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, bool programmatic) {
  cudaGraphEdgeData e = {};
  if (programmatic) {
    e.type = cudaGraphDependencyTypeProgrammatic;
    e.from_port = cudaGraphKernelNodePortProgrammatic;
  }
  CHECK(cudaGraphAddDependencies(g, &from, &to, &e, 1));  // CUDA 13: edge data in the call
}

static cudaGraphExec_t build(Shape s, Row& r) {
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  if (s == SIDE) {
    unsigned blocks = r.grid * kKernels;
    void* args[] = {&r.m, &r.n, &r.grid};
    cudaKernelNodeParams p = {};
    p.func = (void*)side;
    p.gridDim = dim3(blocks);
    p.blockDim = dim3(r.block);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
  } else {
    int chains = s == ROOTS ? kKernels : s == SERIAL ? 1 : 4;
    std::vector<cudaGraphNode_t> last(chains, nullptr);
    for (int k = 0; k < kKernels; ++k) {
      cudaGraphNode_t n = add_one(g, r, k);
      if (last[k % chains]) edge(g, last[k % chains], n, s == LANES_PDL);
      last[k % chains] = n;
    }
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphDestroy(g));
  return exec;
}

// One replay from zeroed outputs, checked against the host: out = x + salt.
static bool check(cudaGraphExec_t exec, Row& r, cudaStream_t st) {
  size_t total = (size_t)r.n * kKernels;
  CHECK(cudaMemsetAsync(r.out, 0, total * sizeof(unsigned), st));
  CHECK(cudaGraphLaunch(exec, st));
  std::vector<unsigned> out(total), x(total);
  CHECK(cudaMemcpyAsync(out.data(), r.out, total * sizeof(unsigned), cudaMemcpyDeviceToHost, st));
  CHECK(cudaMemcpyAsync(x.data(), r.x, total * sizeof(unsigned), cudaMemcpyDeviceToHost, st));
  CHECK(cudaStreamSynchronize(st));
  for (size_t i = 0; i < total; ++i) {
    if (out[i] != x[i] + r.m.salt[i / r.n]) return false;
  }
  return true;
}

static float median_us(cudaGraphExec_t exec, cudaStream_t st) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(exec, st));  // warm-up
  for (int i = 0; i < kReplays; ++i) {
    CHECK(cudaEventRecord(a, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  std::vector<const char*> rows = {"64x512", "256x64", "512x256", "1024x128", "8192x128", "2048x1024"};
  if (argc > 1) rows.assign(argv + 1, argv + argc);
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  printf("row          us per replay (per dispatch): roots / lanes / lanes-pdl / serial / side\n");
  for (const char* spec : rows) {
    Row r = {};
    if (sscanf(spec, "%ux%u", &r.grid, &r.block) != 2 || !r.grid || !r.block || r.block > 1024) {
      printf("%s: GRIDxBLOCK, block at most 1024\n", spec);
      return 1;
    }
    r.n = r.grid * r.block;
    size_t total = (size_t)r.n * kKernels;
    CHECK(cudaMalloc(&r.out, total * sizeof(unsigned)));
    CHECK(cudaMalloc(&r.x, total * sizeof(unsigned)));
    std::vector<unsigned> x(total);
    for (size_t i = 0; i < total; ++i) x[i] = (unsigned)(i * 2654435761u);
    CHECK(cudaMemcpy(r.x, x.data(), total * sizeof(unsigned), cudaMemcpyHostToDevice));
    for (int k = 0; k < kKernels; ++k) {
      r.m.out[k] = r.out + (size_t)k * r.n;
      r.m.x[k] = r.x + (size_t)k * r.n;
      r.m.salt[k] = 1000u + k;
    }
    printf("%-12s", spec);
    for (Shape s : {ROOTS, LANES, LANES_PDL, SERIAL, SIDE}) {
      cudaGraphExec_t exec = build(s, r);
      bool ok = check(exec, r, st);
      float us = median_us(exec, st);
      printf(" %s %.3f (%.3f)%s", kNames[s], us, us / kKernels, ok ? "" : " WRONG");
      CHECK(cudaGraphExecDestroy(exec));
    }
    printf("\n");
    CHECK(cudaFree(r.out));
    CHECK(cudaFree(r.x));
  }
  return 0;
}
