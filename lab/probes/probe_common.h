// Shared by the two C++ probes (driver_api_chain.cpp, device_graph_launch.cu): the driver-error check,
// the chain's length, driver kernel-node params, and NVRTC compilation of a CUDA source to PTX the way Ostinato compiles its
// built-in kernels. Build and run on the GPU machine: lab/probes/device-graph-launch.sh.
#pragma once
#include <cuda.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CU(x)                                                                                          \
  do {                                                                                                 \
    CUresult r_ = (x);                                                                                 \
    if (r_ != CUDA_SUCCESS) {                                                                          \
      const char* n_ = nullptr;                                                                        \
      cuGetErrorName(r_, &n_);                                                                         \
      printf("driver error %s at line %d: %s\n", n_ ? n_ : "?", __LINE__, #x);                        \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

constexpr int kNodes = 941;

// Driver kernel-node params: `f` on `blocks` × `threads` (1-D), reading its arguments from `args`.
static CUDA_KERNEL_NODE_PARAMS node_params(CUfunction f, unsigned blocks, unsigned threads, void** args) {
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = f;
  p.gridDimX = blocks;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = threads;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

static std::string read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) { printf("cannot read %s\n", path); exit(1); }
  std::string s;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, got);
  fclose(f);
  return s;
}

// NVRTC: `src` (named `name`) compiled with `opts` to PTX, into `ptx`; the compile log into `log`.
static nvrtcResult nvrtc_ptx(const std::string& src, const char* name, const std::vector<const char*>& opts, std::string& ptx, std::string& log) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), name, 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return r;
  r = nvrtcCompileProgram(prog, (int)opts.size(), opts.data());
  size_t size = 0;
  nvrtcGetProgramLogSize(prog, &size);
  log.assign(size, '\0');
  nvrtcGetProgramLog(prog, &log[0]);
  if (r == NVRTC_SUCCESS) {
    nvrtcGetPTXSize(prog, &size);
    ptx.assign(size, '\0');
    nvrtcGetPTX(prog, &ptx[0]);
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

// Ostinato's add_one from kernels/ostinato.cu, compiled as Ostinato compiles it (NVRTC to PTX for
// compute capability `cc`, trigger at entry) and loaded with cuModuleLoadData.
static CUfunction load_add_one(int cc) {
  std::string arch = "--gpu-architecture=compute_" + std::to_string(cc);
  std::string ptx, log;
  nvrtcResult r = nvrtc_ptx(read_file("../../kernels/ostinato.cu"), "ostinato.cu", {arch.c_str(), "-default-device", "--std=c++17", "-DOST_TRIGGER=1"}, ptx, log);
  if (r != NVRTC_SUCCESS) { printf("nvrtc: %s %s\n", nvrtcGetErrorString(r), log.c_str()); exit(1); }
  CUmodule m;
  CU(cuModuleLoadData(&m, ptx.c_str()));
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, "add_one"));
  return f;
}
