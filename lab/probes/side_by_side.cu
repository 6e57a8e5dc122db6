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
// Timing (--timing, default idle): `idle` records an event, launches the replay and records the
// second event on an idle stream, as the bench does (the first event is taken as soon as the GPU
// reaches it, so the interval may hold part of the host's cuGraphLaunch call); `gated` enqueues the
// same three behind a wait on a host-mapped flag and sets the flag once all three are enqueued (the
// GPU runs them back to back, as a Vulkan command buffer's timestamps bracket its dispatches); `all`
// prints both. The question it answers: is raw Vulkan's lead on the independent geometry rows the
// host's launch call inside CUDA's interval? Prediction: gated 1-3 us a replay faster.
// Measured (H100 GPU-6ef58bfb, 2026-12-06, `e0a0886`'s probe): no. Gated against idle, us a replay:
// side 3.488 / 3.776 (1x32), 3.808 / 4.064 (64x256), 4.256 / 4.608 (64x512), 6.560 / 7.072
// (512x256), 52.064 / 52.512 (2048x512); the graph shapes move by -1.5 to +1.4 either way (lanes
// 8.416 gated / 7.584 idle at 1x32). What the event pair brackets is the GPU's own time.
// Build: nvcc -O3 -arch=sm_90 -o side_by_side side_by_side.cu -lcuda
// Run:   ./side_by_side [--timing idle|gated|all] [--alloc malloc|pool|vmm|vmm-1g] [--shared-x] [--nc]
//        [GRIDxBLOCK ...]   (default: the geometry rows 64x512 256x64 512x256 1024x128 8192x128
//        2048x1024); prints GPU us per replay and per dispatch, median of 201 replays.
// The second question, where raw Vulkan still beats every CUDA submission (256x1024, 1024x256 and
// 8192x128 independent, x one buffer all ten read as in the bench: --shared-x): is it the memory or
// the code? `--alloc` makes the buffers four ways, `--nc` reads x as a read-only storage buffer may
// be read. Prediction (before the run): neither moves a row by more than 3%, so the gap is the
// Vulkan driver's build or dispatch of the kernel, not CUDA's memory or load path.
// Measured (H100 GPU-57235208, 2026-12-07, `aa020dc`; malloc / vmm / pool / malloc --nc, `side` us a
// dispatch): 256x1024 1.098 / 1.114 / 1.091 / 1.123, 1024x256 1.024 / 1.024 / 1.027 / 1.053, 8192x128
// 5.392 / 5.386 / 5.395 / 5.389, 64x512 0.550 / 0.493 / 0.490 / 0.496 (the one move above 3%). Held:
// neither is the gap. But the bench on the same machine ran geom/indep/b1024/g256 at 1.514 (Ostinato)
// and 1.587 (stream capture) where this probe's side and roots take 1.098 and 1.331: the gap to raw
// Vulkan (1.398 in the bench) lies in how the bench times or in Ostinato's fused kernel (fences,
// "Where Ostinato still loses"), not in CUDA's memory or load path.
// Prediction (before any run): on the rows of 64-512 blocks, `side` at 0.3-0.5 us a dispatch against
// 1.4-1.7 for the graph shapes (H100, matrix of 2026-12-06), below raw Vulkan's 0.69; on 2,048 and
// 8,192 blocks no gain (the GPU is full either way).
// Measured (H100 GPU-8d8c0ee9, 2026-12-06, `6f0ce7c`; docs/fences.md decision 15): `side` 0.464 /
// 0.531 / 0.685 / 0.992 us a dispatch on the first four rows against 0.762-2.074 for the graph
// shapes, below raw Vulkan's 0.69 on the first; 8,192x128 gained too (5.392 against 10.346-10.733,
// where the prediction said none); 2,048x1,024 lost (10.755 against 10.205).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// With --nc, x is read through the non-coherent path (`ld.global.nc`), as a compiler may read a
// storage buffer the shader declares read-only (WGSL `var<storage, read>`, SPIR-V NonWritable).
__constant__ unsigned c_nc;

__device__ __forceinline__ void body(unsigned* out, const unsigned* x, unsigned n, unsigned salt, unsigned b, unsigned blocks) {
  const unsigned bt = blockDim.x;
  if (c_nc) {
    for (unsigned i = b * bt + threadIdx.x; i < n; i += bt * blocks) out[i] = out[i] * 3u + __ldg(x + i) + salt;
  } else {
    for (unsigned i = b * bt + threadIdx.x; i < n; i += bt * blocks) out[i] = out[i] * 3u + x[i] + salt;
  }
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
  bool shared_x;  // every kernel reads x[0..n) (else kernel k reads its own slice)
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
    if (out[i] != x[r.shared_x ? i % r.n : i] + r.m.salt[i / r.n]) return false;
  }
  return true;
}

// A gate before the timed interval: the stream waits for a host-mapped word to reach a count the
// host sets once the interval is enqueued.
struct Gate {
  volatile unsigned* host = nullptr;
  CUdeviceptr dev = 0;
  unsigned count = 0;
};

static float median_us(cudaGraphExec_t exec, cudaStream_t st, Gate* gate) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(exec, st));  // warm-up
  for (int i = 0; i < kReplays; ++i) {
    CHECK(cudaStreamSynchronize(st));  // each interval starts on an idle GPU, as a bench sample does
    if (gate) {
      ++gate->count;
      if (cuStreamWaitValue32(st, gate->dev, gate->count, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
        printf("cuStreamWaitValue32 failed\n");
        exit(1);
      }
    }
    CHECK(cudaEventRecord(a, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(b, st));
    if (gate) *gate->host = gate->count;
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

// Where the rows' buffers come from (--alloc): `malloc` cudaMalloc (the bench's CUDA buffers are
// cuMemAlloc); `pool` cudaMallocAsync from the device's default pool; `vmm` physical memory made by
// cuMemCreate at the recommended granularity and mapped into a reserved range; `vmm-1g` the same in
// one allocation rounded up to 1 GiB. A question the probe asks: does how the memory is made (its
// pages, its physical placement) move the independent geometry rows, where raw Vulkan, on memory of
// its own allocator, runs the same ten kernels faster than every CUDA submission.
struct Alloc {
  void* ptr = nullptr;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool vmm = false, pool = false;
};

static Alloc allocate(const char* how, size_t bytes, cudaStream_t st) {
  Alloc a;
  if (!strcmp(how, "malloc")) {
    CHECK(cudaMalloc(&a.ptr, bytes));
    return a;
  }
  if (!strcmp(how, "pool")) {
    CHECK(cudaMallocAsync(&a.ptr, bytes, st));
    CHECK(cudaStreamSynchronize(st));
    a.pool = true;
    return a;
  }
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) exit(2);
  size_t unit = strcmp(how, "vmm-1g") ? gran : (size_t)1 << 30;
  a.size = (bytes + unit - 1) / unit * unit;
  CUdeviceptr va = 0;
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cuMemCreate(&a.handle, a.size, &prop, 0) != CUDA_SUCCESS || cuMemAddressReserve(&va, a.size, unit, 0, 0) != CUDA_SUCCESS ||
      cuMemMap(va, a.size, 0, a.handle, 0) != CUDA_SUCCESS || cuMemSetAccess(va, a.size, &access, 1) != CUDA_SUCCESS) {
    printf("--alloc %s: the driver refused %zu bytes\n", how, a.size);
    exit(1);
  }
  a.ptr = (void*)va;
  a.vmm = true;
  return a;
}

static void release(Alloc& a, cudaStream_t st) {
  if (a.vmm) {
    cuMemUnmap((CUdeviceptr)a.ptr, a.size);
    cuMemAddressFree((CUdeviceptr)a.ptr, a.size);
    cuMemRelease(a.handle);
  } else if (a.pool) {
    CHECK(cudaFreeAsync(a.ptr, st));
    CHECK(cudaStreamSynchronize(st));
  } else {
    CHECK(cudaFree(a.ptr));
  }
}

int main(int argc, char** argv) {
  std::vector<const char*> rows = {"64x512", "256x64", "512x256", "1024x128", "8192x128", "2048x1024"};
  const char* timing = "idle";
  int first = 1;
  const char* alloc = "malloc";
  bool shared_x = false;
  unsigned nc = 0;
  for (;;) {
    if (argc > first && strcmp(argv[first], "--shared-x") == 0) {
      shared_x = true;
      first += 1;
    } else if (argc > first && strcmp(argv[first], "--nc") == 0) {
      nc = 1;
      first += 1;
    } else if (argc > first + 1 && (strcmp(argv[first], "--timing") == 0 || strcmp(argv[first], "--alloc") == 0)) {
      (strcmp(argv[first], "--timing") == 0 ? timing : alloc) = argv[first + 1];
      first += 2;
    } else {
      break;
    }
  }
  if (strcmp(alloc, "malloc") && strcmp(alloc, "pool") && strcmp(alloc, "vmm") && strcmp(alloc, "vmm-1g")) {
    printf("--alloc %s: malloc, pool, vmm or vmm-1g\n", alloc);
    return 1;
  }
  if (strcmp(timing, "idle") && strcmp(timing, "gated") && strcmp(timing, "all")) {
    printf("--timing %s: idle, gated or all\n", timing);
    return 1;
  }
  if (argc > first) rows.assign(argv + first, argv + argc);
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Gate gate;
  unsigned* flag = nullptr;
  CHECK(cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped));
  *flag = 0;
  gate.host = flag;
  void* dflag = nullptr;
  CHECK(cudaHostGetDevicePointer(&dflag, flag, 0));
  gate.dev = (CUdeviceptr)dflag;
  std::vector<Gate*> modes;
  if (strcmp(timing, "gated")) modes.push_back(nullptr);
  if (strcmp(timing, "idle")) modes.push_back(&gate);
  CHECK(cudaMemcpyToSymbol(c_nc, &nc, sizeof nc));
  printf("alloc %s, x %s%s\n", alloc, shared_x ? "one buffer all ten read (the bench's geometry rows)" : "a slice each",
         nc ? ", read by ld.global.nc" : "");
  printf("row          timing  us per replay (per dispatch): roots / lanes / lanes-pdl / serial / side\n");
  for (const char* spec : rows) {
    Row r = {};
    if (sscanf(spec, "%ux%u", &r.grid, &r.block) != 2 || !r.grid || !r.block || r.block > 1024) {
      printf("%s: GRIDxBLOCK, block at most 1024\n", spec);
      return 1;
    }
    r.n = r.grid * r.block;
    r.shared_x = shared_x;
    size_t total = (size_t)r.n * kKernels;
    Alloc out_mem = allocate(alloc, total * sizeof(unsigned), st), x_mem = allocate(alloc, total * sizeof(unsigned), st);
    r.out = (unsigned*)out_mem.ptr;
    r.x = (unsigned*)x_mem.ptr;
    std::vector<unsigned> x(total);
    for (size_t i = 0; i < total; ++i) x[i] = (unsigned)(i * 2654435761u);
    CHECK(cudaMemcpy(r.x, x.data(), total * sizeof(unsigned), cudaMemcpyHostToDevice));
    for (int k = 0; k < kKernels; ++k) {
      r.m.out[k] = r.out + (size_t)k * r.n;
      r.m.x[k] = shared_x ? r.x : r.x + (size_t)k * r.n;
      r.m.salt[k] = 1000u + k;
    }
    for (Gate* g : modes) {
      printf("%-12s %-6s ", spec, g ? "gated" : "idle");
      for (Shape s : {ROOTS, LANES, LANES_PDL, SERIAL, SIDE}) {
        cudaGraphExec_t exec = build(s, r);
        bool ok = check(exec, r, st);
        float us = median_us(exec, st, g);
        printf(" %s %.3f (%.3f)%s", kNames[s], us, us / kKernels, ok ? "" : " WRONG");
        CHECK(cudaGraphExecDestroy(exec));
      }
      printf("\n");
    }
    release(out_mem, st);
    release(x_mem, st);
  }
  CHECK(cudaFreeHost(flag));
  return 0;
}
