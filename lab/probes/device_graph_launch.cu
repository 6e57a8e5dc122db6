// Probe behind docs/fences.md §7 (host time of one replay call): can the 941-node chain be launched
// from the GPU (a one-node host graph whose kernel calls cudaGraphLaunch on a device-launchable exec),
// does such an exec keep programmatic (PDL) edges, what do the host call and the GPU time per dispatch
// then cost next to a plain host launch, and can a patched device exec be replayed? Also: can the
// launcher be built the way Ostinato builds kernels (NVRTC, -rdc, linked by the driver's cuLink
// against the toolkit's libcudadevrt.a)? Every launch is checked: a counter the chain increments.
//
// Build and run on the GPU machine: lab/probes/device-graph-launch.sh (nvcc -rdc, -lcudadevrt).
#include <cuda_runtime.h>

#include "probe_common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) {                                                                           \
      printf("runtime error %s (%s) at line %d: %s\n", cudaGetErrorName(e_), cudaGetErrorString(e_), __LINE__, #x); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

// One dispatch of the chain: trigger at entry, wait, then one read-modify-write per thread (Ostinato's
// early-trigger build of a 1-block add; with 256 threads the benchmark's add_one row shape).
__global__ void step(unsigned* x, unsigned add) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  x[threadIdx.x] += add;
}
__global__ void empty_kernel() {}
// Ostinato's own built-in kernels (add_one), built by nvcc here and by NVRTC below, trigger at entry.
#define OST_TRIGGER 1
#include "../../kernels/ostinato.cu"
#ifndef NO_DEVICE_LAUNCH
__global__ void launch_tail(cudaGraphExec_t g, int* err) {
  cudaError_t e = cudaGraphLaunch(g, cudaStreamGraphTailLaunch);
  if (e != cudaSuccess) *err = (int)e;
}
__global__ void launch_fire_and_forget(cudaGraphExec_t g, int* err) {
  cudaError_t e = cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
  if (e != cudaSuccess) *err = (int)e;
}
#endif

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void add_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, bool programmatic) {
  cudaGraphEdgeData e = {};
  if (programmatic) {
    e.from_port = cudaGraphKernelNodePortProgrammatic;
    e.type = cudaGraphDependencyTypeProgrammatic;
  }
#if CUDART_VERSION >= 13000
  CK(cudaGraphAddDependencies(g, &from, &to, &e, 1));
#else
  CK(cudaGraphAddDependencies_v2(g, &from, &to, &e, 1));
#endif
}

struct Chain {
  cudaGraph_t graph;
  std::vector<cudaGraphNode_t> nodes;
};

static cudaKernelNodeParams step_params(unsigned** x, unsigned* add, void** args, unsigned threads) {
  args[0] = x;
  args[1] = add;
  cudaKernelNodeParams p = {};
  p.func = (void*)step;
  p.gridDim = dim3(1);
  p.blockDim = dim3(threads);
  p.kernelParams = args;
  return p;
}

// A 941-node chain; `add_node` adds one kernel node (no dependencies) to the graph.
template <class AddNode>
static Chain build_chain_with(bool pdl, AddNode add_node) {
  Chain c;
  CK(cudaGraphCreate(&c.graph, 0));
  c.nodes.resize(kNodes);
  for (int i = 0; i < kNodes; i++) {
    c.nodes[i] = add_node(c.graph);
    if (i > 0) add_edge(c.graph, c.nodes[i - 1], c.nodes[i], pdl);
  }
  return c;
}

static Chain build_chain(unsigned* x, bool pdl, unsigned threads) {
  unsigned add = 1;
  void* args[2];
  cudaKernelNodeParams p = step_params(&x, &add, args, threads);
  return build_chain_with(pdl, [&](cudaGraph_t g) {
    cudaGraphNode_t n;
    CK(cudaGraphAddKernelNode(&n, g, nullptr, 0, &p));
    return n;
  });
}

// The benchmark's add_one row: Ostinato's add_one (float, grid-stride), 1 block of 256 threads.
static Chain build_add_one_chain(float* x, void* func) {
  unsigned n = 256;
  void* args[] = {&x, &n};
  cudaKernelNodeParams p = {};
  p.func = func;
  p.gridDim = dim3(1);
  p.blockDim = dim3(256);
  p.kernelParams = args;
  return build_chain_with(true, [&](cudaGraph_t g) {
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
    return node;
  });
}

// The same, with add_one compiled the way Ostinato compiles it (NVRTC to PTX, same options, loaded
// with cuModuleLoadData) and added through the driver API.
static Chain build_add_one_chain_nvrtc(float* x, int cc_major, int cc_minor) {
  CUfunction fn = load_add_one(cc_major * 10 + cc_minor);
  unsigned n = 256;
  void* args[] = {&x, &n};
  CUDA_KERNEL_NODE_PARAMS p = node_params(fn, 1, 256, args);
  return build_chain_with(true, [&](cudaGraph_t g) {
    CUgraphNode node;
    CU(cuGraphAddKernelNode(&node, (CUgraph)g, nullptr, 0, &p));
    return (cudaGraphNode_t)node;
  });
}

static cudaGraphExec_t one_node_graph(void* func, void** args) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaKernelNodeParams p = {};
  p.func = func;
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  cudaGraphNode_t n;
  CK(cudaGraphAddKernelNode(&n, g, nullptr, 0, &p));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphDestroy(g));
  return e;
}

#ifndef NO_DEVICE_LAUNCH
// The launcher built as Ostinato would build it: NVRTC with relocatable device code, linked by the
// driver against libcudadevrt.a. Returns nullptr (and says why) where that path does not work.
static CUfunction nvrtc_launcher(int cc_major, int cc_minor) {
  const char* paths[] = {getenv("CUDADEVRT"), "/usr/local/cuda/lib64/libcudadevrt.a",
                         "/usr/local/cuda/targets/x86_64-linux/lib/libcudadevrt.a"};
  const char* devrt = nullptr;
  for (const char* p : paths) {
    FILE* f = p ? fopen(p, "rb") : nullptr;
    if (f) { fclose(f); devrt = p; break; }
  }
  if (!devrt) { printf("nvrtc launcher: no libcudadevrt.a found\n"); return nullptr; }
  const char* src =
      "extern \"C\" __global__ void launch_tail(cudaGraphExec_t g, int* err) {\n"
      "  cudaError_t e = cudaGraphLaunch(g, cudaStreamGraphTailLaunch);\n"
      "  if (e != cudaSuccess) *err = (int)e;\n}\n";
  std::string arch = "--gpu-architecture=compute_" + std::to_string(cc_major * 10 + cc_minor);
  std::vector<std::vector<const char*>> attempts = {{arch.c_str(), "-rdc=true"},
                                                    {arch.c_str(), "-rdc=true", "-I/usr/local/cuda/include"}};
  std::string ptx;
  for (auto& opts : attempts) {
    std::string log;
    nvrtcResult r = nvrtc_ptx(src, "launcher.cu", opts, ptx, log);
    printf("nvrtc launcher: compile with %zu options: %s%s\n", opts.size(), nvrtcGetErrorString(r), r == NVRTC_SUCCESS ? "" : (" " + log).c_str());
    if (r == NVRTC_SUCCESS) break;
    ptx.clear();
  }
  if (ptx.empty()) return nullptr;
  CUlinkState link;
  CU(cuLinkCreate(0, nullptr, nullptr, &link));
  CU(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void*)ptx.data(), ptx.size(), "launcher.ptx", 0, nullptr, nullptr));
  CUresult r = cuLinkAddFile(link, CU_JIT_INPUT_LIBRARY, devrt, 0, nullptr, nullptr);
  if (r != CUDA_SUCCESS) {
    const char* n = nullptr;
    cuGetErrorName(r, &n);
    printf("nvrtc launcher: cuLinkAddFile(%s): %s\n", devrt, n);
    return nullptr;
  }
  void* cubin = nullptr;
  size_t size = 0;
  CU(cuLinkComplete(link, &cubin, &size));
  CUmodule m;
  CU(cuModuleLoadData(&m, cubin));
  CU(cuLinkDestroy(link));
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, "launch_tail"));
  printf("nvrtc launcher: linked with %s (%zu bytes)\n", devrt, size);
  return f;
}

static cudaGraphExec_t one_node_graph_driver(CUfunction f, void** args) {
  CUgraph g;
  CU(cuGraphCreate(&g, 0));
  CUDA_KERNEL_NODE_PARAMS p = node_params(f, 1, 1, args);
  CUgraphNode n;
  CU(cuGraphAddKernelNode(&n, g, nullptr, 0, &p));
  CUgraphExec e;
  CU(cuGraphInstantiate(&e, g, 0));
  CU(cuGraphDestroy(g));
  return (cudaGraphExec_t)e;
}

#endif  // NO_DEVICE_LAUNCH

struct Result {
  double gpu_us_per_dispatch, host_us_per_call;
  bool ok;
};

// `launch` enqueues one replay of the chain (whatever that takes) and returns how much the chain adds
// to the counter.
template <class F>
static Result measure(cudaStream_t s, unsigned* x, int* err, F launch, int dispatches = kNodes, bool float_counter = false) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) launch();
  CK(cudaStreamSynchronize(s));
  std::vector<double> gpu, host;
  for (int sample = 0; sample < 7; sample++) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 10; i++) launch();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    gpu.push_back(ms * 1000.0 / (10.0 * dispatches));
  }
  for (int round = 0; round < 15; round++) {
    CK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; i++) launch();
    auto t1 = std::chrono::steady_clock::now();
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 20.0);
  }
  CK(cudaStreamSynchronize(s));
  // Correctness: zero the counter, replay 5 times, wait on the stream only.
  CK(cudaMemsetAsync(x, 0, 4 * 256, s));
  unsigned expect = 0;
  for (int i = 0; i < 5; i++) expect += launch();
  CK(cudaStreamSynchronize(s));
  unsigned got = 0;
  int e = 0;
  CK(cudaMemcpy(&got, x, 4, cudaMemcpyDeviceToHost));
  if (float_counter) {
    float v;
    memcpy(&v, &got, 4);
    got = (unsigned)v;
  }
  CK(cudaMemcpy(&e, err, 4, cudaMemcpyDeviceToHost));
  if (got != expect || e != 0) printf("  counter %u, expected %u; device-side launch error %d\n", got, expect, e);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return {median(gpu), median(host), got == expect && e == 0};
}

static void row(const char* name, Result r) {
  printf("%-48s %11.3f %12.2f %s\n", name, r.gpu_us_per_dispatch, r.host_us_per_call, r.ok ? "ok" : "WRONG");
}

int main() {
  int dev = 0, major = 0, minor = 0, driver = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  CK(cudaDriverGetVersion(&driver));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, sm_%d%d, driver CUDA %d, runtime %d\n", prop.name, major, minor, driver, CUDART_VERSION);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* x;
  int* err;
  CK(cudaMalloc(&x, 4 * 256));
  CK(cudaMalloc(&err, 4));
  CK(cudaMemset(err, 0, 4));

  // chains[0]: PDL, 256 threads (the device-launch arms use it); then PDL with 1 and 32 threads, and
  // 256 threads without PDL.
  struct ChainArm { bool pdl; unsigned threads; };
  const ChainArm shapes[] = {{true, 256}, {true, 1}, {true, 32}, {false, 256}};
  std::vector<Chain> chains;
  std::vector<cudaGraphExec_t> host_exec;
  for (auto sh : shapes) {
    chains.push_back(build_chain(x, sh.pdl, sh.threads));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, chains.back().graph, 0));
    CK(cudaGraphUpload(e, s));
    host_exec.push_back(e);
  }
  [[maybe_unused]] cudaGraphExec_t dev_exec = nullptr;
#ifndef NO_DEVICE_LAUNCH
  cudaError_t inst = cudaGraphInstantiate(&dev_exec, chains[0].graph, cudaGraphInstantiateFlagDeviceLaunch);
  printf("device-launchable instantiate of the PDL chain: %s\n", cudaGetErrorName(inst));
  if (inst != cudaSuccess) { (void)cudaGetLastError(); dev_exec = nullptr; }
  else CK(cudaGraphUpload(dev_exec, s));
#else
  printf("built without relocatable device code: no device-launch arms\n");
#endif
  CK(cudaStreamSynchronize(s));

  printf("%-48s %11s %12s %s\n", "arm (941-node chain, 1 block)", "GPU us/disp", "host us/call", "check");
  for (size_t i = 0; i < chains.size(); i++) {
    std::string n = "host launch, " + std::string(shapes[i].pdl ? "PDL" : "no PDL") + ", " + std::to_string(shapes[i].threads) + " threads";
    row(n.c_str(), measure(s, x, err, [&] { CK(cudaGraphLaunch(host_exec[i], s)); return (unsigned)kNodes; }));
  }
  {
    float* xf = (float*)x;
    Chain nv = build_add_one_chain((float*)x, (void*)add_one);
    Chain rt = build_add_one_chain_nvrtc(xf, major, minor);
    const char* names[] = {"host launch, PDL, Ostinato add_one (nvcc)", "host launch, PDL, Ostinato add_one (NVRTC PTX)"};
    Chain* cs[] = {&nv, &rt};
    for (int i = 0; i < 2; i++) {
      cudaGraphExec_t e;
      CK(cudaGraphInstantiate(&e, cs[i]->graph, 0));
      CK(cudaGraphUpload(e, s));
      row(names[i], measure(s, x, err, [&] { CK(cudaGraphLaunch(e, s)); return (unsigned)kNodes; }, kNodes, true));
    }
  }
  {
    cudaGraphExec_t empty = one_node_graph((void*)empty_kernel, nullptr);
    CK(cudaGraphUpload(empty, s));
    row("control: host launch of a 1-node empty graph", measure(s, x, err, [&] { CK(cudaGraphLaunch(empty, s)); return 0u; }, 1));
  }
#ifndef NO_DEVICE_LAUNCH
  if (dev_exec) {
    void* args[] = {&dev_exec, &err};
    cudaGraphExec_t tail = one_node_graph((void*)launch_tail, args);
    cudaGraphExec_t faf = one_node_graph((void*)launch_fire_and_forget, args);
    CK(cudaGraphUpload(tail, s));
    CK(cudaGraphUpload(faf, s));
    row("device launch (tail), PDL, 256 threads", measure(s, x, err, [&] { CK(cudaGraphLaunch(tail, s)); return (unsigned)kNodes; }));
    row("device launch (fire and forget), PDL, 256 thr.", measure(s, x, err, [&] { CK(cudaGraphLaunch(faf, s)); return (unsigned)kNodes; }));
    // The launcher built through NVRTC + cuLink.
    CUfunction f = nvrtc_launcher(major, minor);
    if (f) {
      cudaGraphExec_t nv_tail = one_node_graph_driver(f, args);
      CK(cudaGraphUpload(nv_tail, s));
      row("device launch (tail, NVRTC + cuLink), PDL, 256", measure(s, x, err, [&] { CK(cudaGraphLaunch(nv_tail, s)); return (unsigned)kNodes; }));
    }
    // Patching: node 470 adds `r` instead of 1 each replay.
    unsigned r = 1;
    void* pargs[2];
    unsigned* xp = x;
    auto patch = [&](cudaGraphExec_t e) {
      r = r % 7 + 1;
      cudaKernelNodeParams p = step_params(&xp, &r, pargs, 256);
      CK(cudaGraphExecKernelNodeSetParams(e, chains[0].nodes[470], &p));
      return (unsigned)(kNodes - 1 + r);
    };
    row("host launch, PDL, patch 1 node + launch", measure(s, x, err, [&] { unsigned v = patch(host_exec[0]); CK(cudaGraphLaunch(host_exec[0], s)); return v; }));
    row("device launch, PDL, patch + re-upload + launch", measure(s, x, err, [&] {
          unsigned v = patch(dev_exec);
          CK(cudaGraphUpload(dev_exec, s));
          CK(cudaGraphLaunch(tail, s));
          return v;
        }));
    row("device launch, PDL, patch without re-upload", measure(s, x, err, [&] { unsigned v = patch(dev_exec); CK(cudaGraphLaunch(tail, s)); return v; }));
  }
#endif
  CK(cudaGetLastError());
  printf("done\n");
  return 0;
}
