// What a block-local chain fused block by block costs per body, by what the fused kernel lets the
// compiler see: the dispatch-grid rows (941 add_one bodies on 128, 1,024 and 8,192 blocks of 256
// threads), each body the kernel header's grid-stride loop, as Ostinato generates them. Variants:
//   staged         the tile in shared memory, a block barrier before each body, the real
//                  gridDim/blockDim (the generated kernel of 1788f2a);
//   staged+const   the same with the launch geometry written into the source as constants (the
//                  fused kernel only ever launches with its group's geometry): the grid-stride loop
//                  is seen to run at most once;
//   staged+nobar   constant geometry and no barrier between bodies (legal where thread t of each
//                  body touches only elements thread t of the previous one touched);
//   global+nobar   no staging, constant geometry, no barrier;
//   runtime+nobar  staged, no barrier, the real gridDim/blockDim;
//   *+bound        constant geometry and the block and thread indices bounded by it
//                  (__builtin_assume): the 64-bit grid-stride index is then known not to wrap.
// The element count is a literal, as the generator writes a constant scalar argument.
// Every variant's result is checked (each element + 941 per launch). SASS per variant:
// cuobjdump -sass fused_thread_local | grep -c per kernel.
// Build: nvcc -O3 -arch=sm_90 -o fused_thread_local fused_thread_local.cu ; run: ./fused_thread_local
//
// Found on an H200 (2026-12-04, CUDA 13.0, nvcc -O3), us per body, 128 / 1,024 / 8,192 blocks:
//   staged 0.067 / 0.212 / 1.475; staged+const 0.071 / 0.227 / 1.603; staged+bound 0.065 / 0.219 /
//   1.568; st+bound+nobar 0.054 / 0.206 / 1.489; runtime+nobar 0.057 / 0.194 / 1.387; global+nobar
//   0.064 / 0.341 / 2.132; every result exact. Writing the geometry in as constants does not let the
//   compiler see that the grid-stride loop runs once per body: the SASS keeps a 64-bit wrap test of
//   `i += stride` (even with the indices bounded by __builtin_assume), unrolls the loop with a
//   remainder and runs slower; no variant keeps the element in a register across bodies. Dropping
//   the barrier between bodies (with the real geometry) saves 5-15%: what Ostinato does where each
//   body's thread touches only its own elements (ostinato::fusion::barriers_with).
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

enum Mode { STAGED, STAGED_CONST, STAGED_NOBAR, GLOBAL_NOBAR, RUNTIME_NOBAR, STAGED_BOUND, STAGED_BOUND_NOBAR, GLOBAL_BOUND_NOBAR };

struct Geometry { unsigned gx, bx; };

// The kernel header's grid-stride loop over the linear thread index, with the geometry either read
// from the special registers or given as constants.
template <bool CONST, unsigned GX, unsigned BX, bool BOUND = false>
__device__ __forceinline__ void add_one(float* x, unsigned n) {  // n: a literal in the fused source
  if (BOUND) {  // the block and thread indices bounded by the (constant) geometry
    __builtin_assume(blockIdx.x < GX); __builtin_assume(blockIdx.y == 0); __builtin_assume(blockIdx.z == 0);
    __builtin_assume(threadIdx.x < BX); __builtin_assume(threadIdx.y == 0); __builtin_assume(threadIdx.z == 0);
  }
  const unsigned long long gx = CONST ? GX : gridDim.x, bx = CONST ? BX : blockDim.x;
  const unsigned long long gy = CONST ? 1 : gridDim.y, gz = CONST ? 1 : gridDim.z;
  const unsigned long long by = CONST ? 1 : blockDim.y, bz = CONST ? 1 : blockDim.z;
  unsigned long long b = ((unsigned long long)blockIdx.z * gy + blockIdx.y) * gx + blockIdx.x;
  unsigned long long t = ((unsigned long long)threadIdx.z * by + threadIdx.y) * bx + threadIdx.x;
  for (unsigned long long i = b * (bx * by * bz) + t, s = gx * gy * gz * bx * by * bz; i < n; i += s) x[i] += 1.0f;
}

template <int M, unsigned GX, unsigned BX>
__global__ void __launch_bounds__(256) chain(float* x) {
  constexpr unsigned n = GX * BX;  // a constant scalar: written into the generated source
  constexpr bool CONST = M != STAGED && M != RUNTIME_NOBAR;
  constexpr bool BAR = M == STAGED || M == STAGED_CONST || M == STAGED_BOUND;
  constexpr bool STAGE = M != GLOBAL_NOBAR && M != GLOBAL_BOUND_NOBAR;
  constexpr bool BOUND = M >= STAGED_BOUND;
  __shared__ __align__(16) float tile[BX];
  float* p = x;
  const unsigned long long at = 1024ull * blockIdx.x;
  if (STAGE) {
    for (unsigned k = threadIdx.x; k < BX / 4; k += blockDim.x) reinterpret_cast<uint4*>(tile)[k] = reinterpret_cast<const uint4*>(x + at / 4)[k];
    __syncthreads();
    p = (float*)((unsigned long long)tile - at);
  }
  add_one<CONST, GX, BX, BOUND>(p, n);
  for (unsigned r = 0; r < 940u; ++r) {
    if (BAR) __syncthreads();
    add_one<CONST, GX, BX, BOUND>(p, n);
  }
  if (STAGE) {
    __syncthreads();
    for (unsigned k = threadIdx.x; k < BX / 4; k += blockDim.x) reinterpret_cast<uint4*>(x + at / 4)[k] = reinterpret_cast<const uint4*>(tile)[k];
  }
}

template <int M, unsigned GX> int run(const char* name) {
  const unsigned n = GX * 256;
  float* x;
  CHECK(cudaMalloc(&x, 4ull * n));
  CHECK(cudaMemset(x, 0, 4ull * n));
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  chain<M, GX, 256><<<GX, 256>>>(x);
  CHECK(cudaDeviceSynchronize());
  const int reps = 20;
  float best = 1e30f;
  for (int t = 0; t < reps; ++t) {
    cudaEventRecord(a);
    chain<M, GX, 256><<<GX, 256>>>(x);
    cudaEventRecord(b);
    CHECK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (ms < best) best = ms;
  }
  float* h = new float[n];
  CHECK(cudaMemcpy(h, x, 4ull * n, cudaMemcpyDeviceToHost));
  const float want = float((reps + 1) * 941);
  unsigned bad = 0;
  for (unsigned k = 0; k < n; ++k) bad += h[k] != want;
  delete[] h;
  printf("%-14s blocks %5u  %.4f us per body (best of %d)  %s\n", name, GX, best * 1000.f / 941, reps, bad ? "WRONG" : "exact");
  cudaFree(x);
  return 0;
}

template <unsigned GX> void all() {
  run<STAGED, GX>("staged");
  run<STAGED_CONST, GX>("staged+const");
  run<STAGED_NOBAR, GX>("staged+nobar");
  run<GLOBAL_NOBAR, GX>("global+nobar");
  run<RUNTIME_NOBAR, GX>("runtime+nobar");
  run<STAGED_BOUND, GX>("staged+bound");
  run<STAGED_BOUND_NOBAR, GX>("st+bound+nobar");
  run<GLOBAL_BOUND_NOBAR, GX>("gl+bound+nobar");
}

int main() {
  all<128>();
  all<1024>();
  all<8192>();
  return 0;
}
