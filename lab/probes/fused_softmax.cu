// What a block-local softmax chain fused block by block costs per body, by what the fused kernel tells
// the compiler about its launch: the bench row tiles/softmax/r4096x1024/d16 (16 in-place
// `softmax_scale` calls over 4,096 rows of 1,024 floats, blocks of 32 x 8 threads, a warp per row, the
// block's 8 rows staged in shared memory), its body the bench pack's own kernel (tiles.cu, included).
// Variants of the fused kernel, each the 16 calls as Ostinato writes them (`#pragma unroll 8` loop):
//   runtime   the generated kernel: the real blockDim, the thread indices unknown;
//   assume    the thread indices bounded by the block (__builtin_assume(threadIdx.x < 32) ...): the
//             fused kernel only ever launches with its group's block;
//   const     assume, and blockDim written in as a constant;
// and `alone`: 16 launches of the kernel itself, back to back on a stream (no PDL).
// Every variant's single-launch output is compared bit for bit with runtime's.
// Build: nvcc -O3 -arch=sm_90 -I kernels -I crates/ostinato-bench/kernels -o fused_softmax lab/probes/fused_softmax.cu
// SASS: cuobjdump -sass fused_softmax
//
// Found on an H200 (2026-12-04, CUDA 13.0, nvcc -O3, two rounds), us per body, min / median:
//   runtime 9.728 / 9.838 and 9.730 / 9.816; assume 9.578 / 9.680 and 9.596 / 9.668; const 9.558 / 9.620
//   and 9.476 / 9.612; alone (16 launches, no PDL) 12.788 / 12.850 and 12.800 / 12.866; every variant
//   bitwise equal to runtime. Telling the compiler the launch's block makes the body 1.5-2% faster: not
//   the 10% the softmax row would need to reach 1.5x the expert's PDL graph, and for add_one's grid-stride
//   loop constant geometry was slower (fused_thread_local.cu), so the generator does not do it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

#define OST_NO_PDL 1
#define OST_BENCH_softmax_scale 1
#include "ostinato.cuh"
#define __global__ __device__ __forceinline__
namespace rt {
#define softmax_scale softmax_scale_rt
#include "tiles.cu"
#undef softmax_scale
}
namespace ct {
#define softmax_scale softmax_scale_ct
#define blockDim (::dim3(32u, 8u, 1u))
#include "tiles.cu"
#undef blockDim
#undef softmax_scale
}
#undef __global__
#define __global__ __attribute__((global))

constexpr unsigned ROWS = 4096, N = 1024, R = 8, DEPTH = 16;
enum Mode { RUNTIME, ASSUME, CONST };

template <int M>
__global__ void __launch_bounds__(256) fused(float* x, const float* c) {
  if (M != RUNTIME) {
    __builtin_assume(threadIdx.x < 32u);
    __builtin_assume(threadIdx.y < 8u);
    __builtin_assume(threadIdx.z == 0u);
  }
  __shared__ __align__(16) unsigned char tile[R * N * 4];
  const unsigned long long at = 4ull * R * N * blockIdx.x;
  const unsigned t = threadIdx.x + blockDim.x * threadIdx.y, nt = blockDim.x * blockDim.y;
  for (unsigned k = t; k < R * N / 4; k += nt) reinterpret_cast<uint4*>(tile)[k] = reinterpret_cast<const uint4*>((const unsigned char*)x + at)[k];
  __syncthreads();
  {
    float* const p = (float*)((unsigned long long)tile - at);
#pragma unroll 8
    for (unsigned r = 0; r < DEPTH; ++r) {
      if (M == CONST) ct::softmax_scale_ct(p, c, ROWS, N);
      else rt::softmax_scale_rt(p, c, ROWS, N);
    }
  }
  __syncthreads();
  for (unsigned k = t; k < R * N / 4; k += nt) reinterpret_cast<uint4*>((unsigned char*)x + at)[k] = reinterpret_cast<const uint4*>(tile)[k];
}

__global__ void alone(float* x, const float* c) { rt::softmax_scale_rt(x, c, ROWS, N); }

static void launch(int m, float* x, const float* c) {
  dim3 grid(ROWS / R), block(32, R);
  switch (m) {
    case 0: fused<RUNTIME><<<grid, block>>>(x, c); break;
    case 1: fused<ASSUME><<<grid, block>>>(x, c); break;
    case 2: fused<CONST><<<grid, block>>>(x, c); break;
    default: for (unsigned d = 0; d < DEPTH; ++d) alone<<<grid, block>>>(x, c);
  }
}

int main() {
  const char* names[] = {"runtime", "assume", "const", "alone"};
  std::vector<float> init(ROWS * N), cs(ROWS), want, got(ROWS * N);
  unsigned s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return (s >> 8) * (1.0f / 16777216.0f); };
  for (auto& v : init) v = 8.0f * rnd() - 4.0f;
  for (auto& v : cs) v = 0.5f + 1.5f * rnd();
  float *x, *c;
  CHECK(cudaMalloc(&x, 4ull * ROWS * N));
  CHECK(cudaMalloc(&c, 4ull * ROWS));
  CHECK(cudaMemcpy(c, cs.data(), 4ull * ROWS, cudaMemcpyHostToDevice));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int round = 0; round < 2; ++round) {
    for (int m = 0; m < 4; ++m) {
      CHECK(cudaMemcpy(x, init.data(), 4ull * ROWS * N, cudaMemcpyHostToDevice));
      launch(m, x, c);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(got.data(), x, 4ull * ROWS * N, cudaMemcpyDeviceToHost));
      if (m == 0 && round == 0) want = got;
      bool same = memcmp(want.data(), got.data(), 4ull * ROWS * N) == 0;
      std::vector<float> t;
      for (int k = 0; k < 30; ++k) {
        cudaEventRecord(a);
        launch(m, x, c);
        cudaEventRecord(b);
        CHECK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms * 1000.f / DEPTH);
      }
      std::sort(t.begin(), t.end());
      printf("%-8s us per body: min %.3f median %.3f  %s\n", names[m], t[0], t[t.size() / 2], same ? "bitwise equal to runtime" : "DIFFERS");
    }
  }
  return 0;
}
