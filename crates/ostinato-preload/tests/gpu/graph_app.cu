// The interposer's GPU test application (run.sh builds and runs it): a CUDA graph captured through
// the runtime API as an application would capture it, then instantiated and launched several times,
// its results checked on the host. Prints PASS or FAIL.
//
// The graph: a memset of `c`; a fork over two streams (fill `a` on one, fill `b` on the other); a
// join; `c = a + b`; then `d = 3 * c`, launched with programmatic stream serialization so that its
// edge from the add is a programmatic (PDL) one. 5 nodes, 5 edges, 1 programmatic.
#include <cstdio>
#include <vector>
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

int main() {
  const int n = 1 << 16, threads = 256, blocks = (n + threads - 1) / threads;
  const size_t bytes = n * sizeof(float);
  float *a, *b, *c, *d;
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

  cudaGraph_t graph;
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
  CHECK(cudaLaunchKernelEx(&config, scale, d, (const float*)c, 3.0f, n));
  CHECK(cudaStreamEndCapture(s0, &graph));

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
  CHECK(cudaGraphDestroy(graph));
  std::printf("PASS (%zu nodes, %d launches)\n", nodes, launches);
  return 0;
}
