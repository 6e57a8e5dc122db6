// What bounds a chain fused block by block (the dispatch-grid rows 941 x {128, 1024, 8192} blocks):
// block b runs 941 add_one bodies on its own 1 KiB, with a block barrier between bodies. Each body's
// load reads what the block's previous body stored. Variants of the load and store cache operators
// show whether those loads are served by the SM's L1 or travel to L2, and a register-carried variant
// gives the floor of the barrier and the arithmetic alone.
// Build: nvcc -O3 -arch=sm_90 -o fused_l1 fused_l1.cu ; run: ./fused_l1
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

enum Mode { PLAIN, LD_CA, LD_CG, LD_EVICT_LAST, ST_WT, REGISTER, PLAIN_FENCE };

template <int M> __device__ __forceinline__ float load(const float* p) {
  float v;
  if (M == LD_CA) asm volatile("ld.global.ca.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  else if (M == LD_CG) asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  else if (M == LD_EVICT_LAST) asm volatile("ld.global.L1::evict_last.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  else v = *p;
  return v;
}
template <int M> __device__ __forceinline__ void store(float* p, float v) {
  if (M == ST_WT) asm volatile("st.global.wt.f32 [%0], %1;" :: "l"(p), "f"(v) : "memory");
  else *p = v;
}

template <int M> __global__ void chain(float* x, unsigned n, unsigned bodies) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (M == REGISTER) {
    float v = i < n ? x[i] : 0.f;
    for (unsigned r = 0; r < bodies; ++r) { __syncthreads(); v += 1.0f; }
    if (i < n) x[i] = v;
    return;
  }
  for (unsigned r = 0; r < bodies; ++r) {
    __syncthreads();
    if (M == PLAIN_FENCE) __threadfence();
    for (unsigned long long k = i; k < n; k += (unsigned long long)gridDim.x * blockDim.x) store<M>(x + k, load<M>(x + k) + 1.0f);
  }
}

template <int M> int run(const char* name, unsigned blocks) {
  const unsigned bodies = 941, n = blocks * 256;
  float* x;
  CHECK(cudaMalloc(&x, 4ull * n));
  CHECK(cudaMemset(x, 0, 4ull * n));
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  chain<M><<<blocks, 256>>>(x, n, bodies);
  CHECK(cudaDeviceSynchronize());
  const int reps = 20;
  float best = 1e30f;
  for (int t = 0; t < reps; ++t) {
    cudaEventRecord(a);
    chain<M><<<blocks, 256>>>(x, n, bodies);
    cudaEventRecord(b);
    CHECK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (ms < best) best = ms;
  }
  float* h = new float[n];
  CHECK(cudaMemcpy(h, x, 4ull * n, cudaMemcpyDeviceToHost));
  float want = float((reps + 1) * bodies);
  unsigned bad = 0;
  for (unsigned k = 0; k < n; ++k) bad += h[k] != want;
  delete[] h;
  printf("%-14s blocks %5u  %.3f us per body (best of %d)  %s\n", name, blocks, best * 1000.f / bodies, reps, bad ? "WRONG" : "exact");
  cudaFree(x);
  return 0;
}

int main() {
  for (unsigned blocks : {128u, 1024u, 8192u}) {
    run<PLAIN>("plain", blocks);
    run<LD_CA>("ld.ca", blocks);
    run<LD_CG>("ld.cg", blocks);
    run<LD_EVICT_LAST>("ld.evict_last", blocks);
    run<ST_WT>("st.wt", blocks);
    run<PLAIN_FENCE>("plain+fence", blocks);
    run<REGISTER>("register", blocks);
  }
  return 0;
}
