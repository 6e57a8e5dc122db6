// Probe: the 941-node PDL chain of Ostinato's add_one (1 block of 256 threads, NVRTC-compiled with
// Ostinato's options, trigger at entry) built and timed through the CUDA driver API only, the way
// Ostinato does it (primary context retained and made current, cuStreamCreate non-blocking,
// cuMemAlloc, cuGraphAddKernelNode + programmatic edges, instantiate, upload, launch), with no CUDA
// runtime in the process. Its twin in lab/probes/device_graph_launch.cu builds the same graph
// but instantiates and launches it through the runtime. GPU µs per dispatch: events around 10
// launches, median of 7 samples after 3 warm-ups; the float counter is checked after every run.
//
// Build and run on the GPU machine: lab/probes/device-graph-launch.sh.
#include "probe_common.h"

#include <algorithm>
#include <cstring>

static CUresult add_deps(CUgraph g, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* e, size_t n) {
#if CUDA_VERSION >= 13000
  return cuGraphAddDependencies(g, from, to, e, n);
#else
  return cuGraphAddDependencies_v2(g, from, to, e, n);
#endif
}

// `bulk`: every node first, then all edges in one call (Ostinato's default build); otherwise one
// edge per call right after each node (as the runtime probe does).
static CUgraphExec build(CUfunction f, CUdeviceptr x, bool pdl, bool bulk, CUstream s) {
  CUgraph g;
  CU(cuGraphCreate(&g, 0));
  unsigned n = 256;
  void* args[] = {&x, &n};
  CUDA_KERNEL_NODE_PARAMS p = node_params(f, 1, 256, args);
  std::vector<CUgraphNode> nodes(kNodes);
  CUgraphEdgeData e = {};
  if (pdl) {
    e.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    e.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  }
  for (int i = 0; i < kNodes; i++) {
    CU(cuGraphAddKernelNode(&nodes[i], g, nullptr, 0, &p));
    if (!bulk && i > 0) CU(add_deps(g, &nodes[i - 1], &nodes[i], &e, 1));
  }
  if (bulk) {
    std::vector<CUgraphEdgeData> data(kNodes - 1, e);
    CU(add_deps(g, nodes.data(), nodes.data() + 1, data.data(), kNodes - 1));
  }
  if (const char* dot = getenv("DOT")) {
    if (pdl && !bulk) CU(cuGraphDebugDotPrint(g, dot, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
  }
  CUgraphExec exec;
  CU(cuGraphInstantiate(&exec, g, 0));
  CU(cuGraphUpload(exec, s));
  CU(cuGraphDestroy(g));
  return exec;
}

static void measure(const char* name, CUgraphExec exec, CUstream s, CUdeviceptr x) {
  CUevent a, b;
  CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  CU(cuMemsetD32Async(x, 0, 256, s));
  for (int i = 0; i < 3; i++) CU(cuGraphLaunch(exec, s));
  CU(cuStreamSynchronize(s));
  std::vector<double> us;
  for (int sample = 0; sample < 7; sample++) {
    CU(cuEventRecord(a, s));
    for (int i = 0; i < 10; i++) CU(cuGraphLaunch(exec, s));
    CU(cuEventRecord(b, s));
    CU(cuEventSynchronize(b));
    float ms = 0;
    CU(cuEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.0 / (10.0 * kNodes));
  }
  float v = 0;
  CU(cuMemcpyDtoH(&v, x, 4));
  bool ok = v == float(kNodes * (3 + 7 * 10));
  std::sort(us.begin(), us.end());
  printf("%-56s %11.3f %s\n", name, us[us.size() / 2], ok ? "ok" : "WRONG");
  CU(cuEventDestroy(a));
  CU(cuEventDestroy(b));
}

int main() {
  CU(cuInit(0));
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  int major = 0, minor = 0;
  CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CUcontext ctx;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUstream s;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x;
  CU(cuMemAlloc(&x, 1024));
  CUfunction f = load_add_one(major * 10 + minor);
  printf("%-56s %11s\n", "arm (driver API only, 941-node add_one chain, 1 x 256)", "GPU us/disp");
  measure("PDL, edges one per call", build(f, x, true, false, s), s, x);
  measure("PDL, all edges in one call", build(f, x, true, true, s), s, x);
  measure("no PDL, edges one per call", build(f, x, false, false, s), s, x);
  // Where the chain's 1 KB lives: the same chain on 24 places of one 8 MiB allocation (the first
  // 8 at 1 KiB steps, then 64 KiB steps, then 1 MiB steps).
  CUdeviceptr big;
  CU(cuMemAlloc(&big, 8 << 20));
  printf("%-56s %11s\n", "PDL chain on x = base + offset (offset in bytes)", "GPU us/disp");
  for (int k = 0; k < 24; k++) {
    size_t off = k < 8 ? k * 1024 : k < 16 ? (k - 7) * 65536 : (k - 15) * (1 << 20) - 1024;
    char name[96];
    snprintf(name, sizeof name, "offset %zu (address 0x%llx)", off, (unsigned long long)(big + off));
    CUgraphExec e = build(f, big + off, true, false, s);
    measure(name, e, s, big + off);
    CU(cuGraphExecDestroy(e));
  }
  // Small allocations, as the benchmark's rows and Ostinato's own buffers are: 12 separate 1 KiB
  // cuMemAlloc calls, each zeroed from the host (cuMemcpyHtoD) first.
  printf("%-56s %11s\n", "PDL chain on separate 1 KiB allocations", "GPU us/disp");
  std::vector<unsigned char> zeros(1024, 0);
  for (int k = 0; k < 12; k++) {
    CUdeviceptr small;
    CU(cuMemAlloc(&small, 1024));
    CU(cuMemcpyHtoD(small, zeros.data(), zeros.size()));
    char name[96];
    snprintf(name, sizeof name, "allocation %d (address 0x%llx)", k, (unsigned long long)small);
    CUgraphExec e = build(f, small, true, false, s);
    measure(name, e, s, small);
    CU(cuGraphExecDestroy(e));
  }
  printf("done\n");
  return 0;
}
