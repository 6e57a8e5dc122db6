// The interposer's GPU test application (run.sh builds and runs it): a CUDA graph captured through
// the runtime API as an application would capture it, then instantiated and launched several times,
// its results checked on the host. Prints PASS or FAIL.
//
// The graph: a memset of `c`; a fork over two streams (fill `a` on one, fill `b` on the other); a
// join; `c = a + b`; then `d = 3 * c`, launched with programmatic stream serialization so that its
// edge from the add is a programmatic (PDL) one. 5 nodes, 5 edges, 1 programmatic.
//
// `graph_app time`: then, where the interposer is preloaded (`ostinato_preload_set_adopt` found), the
// same graph instantiated twice — adoption off (the application's own graph) and on (the adopted
// one) — each checked again, and both timed side by side: µs per launch of back-to-back launches
// between two events, rounds alternating, the median printed.
//
// `graph_app memnode`: a graph with memory nodes instead (see `memnode`), which falls through.
//
// `graph_app update`: then the graph instantiated again and updated in place (`cudaGraphExecUpdate`)
// from a graph of the same topology captured with another scale (d = 15), launched on both streams,
// and updated back (d = 9), each launch checked.
//
// `graph_app setparams`: then the graph instantiated again and two of its nodes' params changed in
// place (`cudaGraphExecKernelNodeSetParams`): the scale's factor (d = 4 (a + b) = 12), its output (e,
// another allocation: e = 12), then the add's second input (a for b: e = 4 (a + a) = 8), each launch
// checked, on both streams.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>
#include <dlfcn.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::printf("FAIL: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

__global__ void fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void add(float* out, const float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i];
#if __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__global__ void scale(float* out, const float* in, float s, int n) {
#if __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s * in[i];
}

// Runs `exec` once on `s` and checks d == `want` everywhere (d cleared first).
static int check_value(cudaGraphExec_t exec, cudaStream_t s, float* d, int n, float want) {
  std::vector<float> host(n);
  CHECK(cudaMemsetAsync(d, 0, n * sizeof(float), s));
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaMemcpyAsync(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; i++) {
    if (host[i] != want) {
      std::printf("FAIL: d[%d] = %g, expected %g\n", i, host[i], want);
      return 1;
    }
  }
  return 0;
}

// Runs `exec` once on `s` and checks d == 9 everywhere.
static int check_once(cudaGraphExec_t exec, cudaStream_t s, float* d, int n) {
  return check_value(exec, s, d, n, 9.0f);
}

// `graph_app update` (see the header): `graph` (d = 9) and `other` (d = 15) have one topology.
static int update(cudaGraph_t graph, cudaGraph_t other, cudaStream_t s0, cudaStream_t s1, float* d, int n) {
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  if (check_value(exec, s0, d, n, 9.0f) != 0) return 1;
  cudaGraphExecUpdateResultInfo info;
  CHECK(cudaGraphExecUpdate(exec, other, &info));
  if (check_value(exec, s0, d, n, 15.0f) != 0 || check_value(exec, s1, d, n, 15.0f) != 0) return 1;
  CHECK(cudaGraphExecUpdate(exec, graph, &info));
  if (check_value(exec, s1, d, n, 9.0f) != 0 || check_value(exec, s0, d, n, 9.0f) != 0) return 1;
  CHECK(cudaGraphExecDestroy(exec));
  std::printf("PASS (updated twice, 5 launches on two streams)\n");
  return 0;
}

// The kernel node of `graph` running `func`, or null.
static cudaGraphNode_t kernel_node(cudaGraph_t graph, const void* func) {
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return nullptr;
  std::vector<cudaGraphNode_t> nodes(count);
  if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return nullptr;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    cudaKernelNodeParams p = {};
    if (cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel && cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess &&
        p.func == func)
      return node;
  }
  return nullptr;
}

// `graph_app setparams` (see the header).
static int setparams(cudaGraph_t graph, cudaStream_t s0, cudaStream_t s1, float* a, float* c, float* e, int n) {
  cudaGraphNode_t scale_node = kernel_node(graph, (const void*)scale), add_node = kernel_node(graph, (const void*)add);
  if (scale_node == nullptr || add_node == nullptr) {
    std::printf("FAIL: the scale and add nodes were not found\n");
    return 1;
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  cudaKernelNodeParams sp = {}, ap = {};
  CHECK(cudaGraphKernelNodeGetParams(scale_node, &sp));
  CHECK(cudaGraphKernelNodeGetParams(add_node, &ap));
  // The scale's factor: 4.
  float by = 4.0f;
  float* out = *(float**)sp.kernelParams[0];
  const float* in = *(const float**)sp.kernelParams[1];
  void* scale_args[4] = {&out, &in, &by, &n};
  sp.kernelParams = scale_args;
  CHECK(cudaGraphExecKernelNodeSetParams(exec, scale_node, &sp));
  if (check_value(exec, s0, out, n, 12.0f) != 0) return 1;
  // Its output: e.
  out = e;
  CHECK(cudaGraphExecKernelNodeSetParams(exec, scale_node, &sp));
  if (check_value(exec, s0, e, n, 12.0f) != 0 || check_value(exec, s1, e, n, 12.0f) != 0) return 1;
  // The add's second input: a (c = a + a).
  float* add_out = c;
  const float* x = a;
  const float* y = a;
  void* add_args[4] = {&add_out, &x, &y, &n};
  ap.kernelParams = add_args;
  CHECK(cudaGraphExecKernelNodeSetParams(exec, add_node, &ap));
  if (check_value(exec, s1, e, n, 8.0f) != 0 || check_value(exec, s0, e, n, 8.0f) != 0) return 1;
  CHECK(cudaGraphExecDestroy(exec));
  std::printf("PASS (params changed 3 times, 5 launches on two streams)\n");
  return 0;
}

// The graph adopted and not, side by side (see the header).
static int timed(cudaGraph_t graph, cudaStream_t s, float* d, int n) {
  typedef int (*SetAdopt)(int);
  SetAdopt set_adopt = (SetAdopt)dlsym(RTLD_DEFAULT, "ostinato_preload_set_adopt");
  if (set_adopt == nullptr) {
    std::printf("TIME skipped: the interposer is not preloaded\n");
    return 0;
  }
  cudaGraphExec_t execs[2];
  for (int a = 0; a < 2; a++) {
    set_adopt(a);
    CHECK(cudaGraphInstantiateWithFlags(&execs[a], graph, 0));
    if (check_once(execs[a], s, d, n) != 0) return 1;
  }
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  const int count = 1000, rounds = 15;
  std::vector<float> us[2];
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 2; k++) {
      int a = (r + k) % 2;
      for (int w = 0; w < 20; w++) CHECK(cudaGraphLaunch(execs[a], s));
      CHECK(cudaEventRecord(start, s));
      for (int l = 0; l < count; l++) CHECK(cudaGraphLaunch(execs[a], s));
      CHECK(cudaEventRecord(stop, s));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      us[a].push_back(ms * 1000.0f / count);
    }
  }
  for (int a = 0; a < 2; a++) {
    std::sort(us[a].begin(), us[a].end());
    if (check_once(execs[a], s, d, n) != 0) return 1;
    CHECK(cudaGraphExecDestroy(execs[a]));
  }
  float own = us[0][rounds / 2], adopted = us[1][rounds / 2];
  std::printf("TIME own %.3f us, adopted %.3f us per launch (median of %d rounds of %d; min %.3f / %.3f): %.3fx\n", own, adopted, rounds, count,
              us[0][0], us[1][0], own / adopted);
  return 0;
}

// `graph_app memnode`: a graph the interposer must pass through untouched — a memory node
// (`cudaMallocAsync` captured: an alloc node), a fill of the new allocation, `d = t + t`, and its
// free node — launched 5 times, d checked each time. Prints PASS or FAIL.
static int memnode(float* d, int n, cudaStream_t s) {
  const int threads = 256, blocks = (n + threads - 1) / threads;
  cudaGraph_t graph;
  float* t = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMallocAsync(&t, n * sizeof(float), s));
  fill<<<blocks, threads, 0, s>>>(t, 4.5f, n);
  add<<<blocks, threads, 0, s>>>(d, t, t, n);
  CHECK(cudaFreeAsync(t, s));
  CHECK(cudaStreamEndCapture(s, &graph));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  const int launches = 5;
  for (int l = 0; l < launches; l++) {
    if (check_once(exec, s, d, n) != 0) return 1;
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("PASS (memory nodes: %zu nodes, %d launches)\n", nodes, launches);
  return 0;
}

int main(int argc, char** argv) {
  const int n = 1 << 16, threads = 256, blocks = (n + threads - 1) / threads;
  const size_t bytes = n * sizeof(float);
  float *a, *b, *c, *d, *e;
  CHECK(cudaMalloc(&e, bytes));
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMalloc(&c, bytes));
  CHECK(cudaMalloc(&d, bytes));
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  if (argc > 1 && std::strcmp(argv[1], "memnode") == 0) return memnode(d, n, s0);

  // The graph of the header, `d = by * (a + b)`.
  auto capture = [&](cudaGraph_t* graph, float by) -> int {
    CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemsetAsync(c, 0, bytes, s0));
    CHECK(cudaEventRecord(fork, s0));
    CHECK(cudaStreamWaitEvent(s1, fork, 0));
    fill<<<blocks, threads, 0, s0>>>(a, 1.0f, n);
    fill<<<blocks, threads, 0, s1>>>(b, 2.0f, n);
    CHECK(cudaEventRecord(join, s1));
    CHECK(cudaStreamWaitEvent(s0, join, 0));
    add<<<blocks, threads, 0, s0>>>(c, a, b, n);
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.stream = s0;
    cudaLaunchAttribute pdl[1];
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = pdl;
    config.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&config, scale, d, (const float*)c, by, n));
    CHECK(cudaStreamEndCapture(s0, graph));
    return 0;
  };
  cudaGraph_t graph;
  if (capture(&graph, 3.0f) != 0) return 1;

  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  std::vector<float> host(n);
  const int launches = 5;
  for (int l = 0; l < launches; l++) {
    CHECK(cudaMemsetAsync(d, 0, bytes, s0));
    CHECK(cudaGraphLaunch(exec, s0));
    CHECK(cudaStreamSynchronize(s0));
    CHECK(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
      if (host[i] != 9.0f) {
        std::printf("FAIL: launch %d: d[%d] = %g, expected 9\n", l, i, host[i]);
        return 1;
      }
    }
  }
  CHECK(cudaGraphExecDestroy(exec));
  if (argc > 1 && std::strcmp(argv[1], "time") == 0) {
    if (timed(graph, s0, d, n) != 0) return 1;
  }
  if (argc > 1 && std::strcmp(argv[1], "update") == 0) {
    cudaGraph_t other;
    if (capture(&other, 5.0f) != 0 || update(graph, other, s0, s1, d, n) != 0) return 1;
    CHECK(cudaGraphDestroy(other));
  }
  if (argc > 1 && std::strcmp(argv[1], "setparams") == 0) {
    if (setparams(graph, s0, s1, a, c, e, n) != 0) return 1;
  }
  CHECK(cudaGraphDestroy(graph));
  std::printf("PASS (%zu nodes, %d launches)\n", nodes, launches);
  return 0;
}
