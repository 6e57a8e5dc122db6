// What the form of a body's grid-stride loop costs in a fused block-local chain: 941 add_one bodies
// on 128, 1,024 and 8,192 blocks of 256 threads, as Ostinato fuses the dispatch-grid rows (the tile
// staged in shared memory, no barrier between thread-local bodies, the real gridDim/blockDim, the
// loop of 940 repeated calls unrolled 8 times). Forms of the body's loop, each taking the same
// elements (thread t of G*T takes t, t + G*T, ...):
//   for      the kernel header's `for (i = t, s = G*T; i < n; i += s)` with a 64-bit index;
//   peeled   the first element apart: `if (t < n) { x[t]; for (i = t + s; i < n; i += s) ... }`
//            (in a chain of identical calls, `t < n` and `t + s < n` are the same values in every
//            call: a compiler may compute them once);
//   u32      peeled, then a 32-bit index whose bound test cannot wrap: the next element exists
//            while s < n - k (n a 32-bit count);
//   header   the kernel header's OST_GRID_STRIDE (kernels/ostinato.cuh) as it is now;
//   form B / form C   two ways to write the header's two passes (below).
// Then the header's loop against the one-loop form on bodies that `continue` and `break`, over grids
// and counts that take one, several and no elements a thread: the same elements each time.
// The element count is a literal, as the generator writes a constant scalar argument. Every result
// is checked (each element + 941 per launch). SASS: cuobjdump -sass fused_loop_forms.
// Build: nvcc -O3 -arch=sm_90 -o fused_loop_forms fused_loop_forms.cu ; run: ./fused_loop_forms
//
// Found on an H200 (2026-12-04, CUDA 13.0, nvcc -O3), us per body, 128 / 1,024 / 8,192 blocks:
//   for 0.049 / 0.158 / 1.107; peeled 0.044 / 0.120 / 0.781; u32 0.044 / 0.120 / 0.781; form B
//   0.044 / 0.120 / 0.783; form C 0.050 / 0.142 / 1.036; every result exact, and forms B and C (and
//   the header) take the one loop's elements in all 240 cases. In the SASS a peeled body is its load,
//   add and store, one 64-bit test of `t + s < n` and two branches in one convergence region (9
//   instructions); the one loop adds the 64-bit increment, the test and the address arithmetic. Form
//   C's compiler turned the first pass into predicated code and the second pass's start into a
//   select (about 14 instructions a body); form B leaves the peeled shape. A 32-bit index buys
//   nothing more. The header took form B.
#include <cstdio>
#include <cuda_runtime.h>
#include "../../kernels/ostinato.cuh"

// Two ways to write two passes (the second pass entered only where the first took and finished its
// element): B gates the outer loop on it (what the header now does), C the inner loop's test.
#define GS_B(i, n)                                                                                        \
  _Pragma("unroll") for (unsigned long long f_##i = ost_linear_thread(), s_##i = ost_grid_threads(), p_##i = 0, m_##i = 0; \
                         p_##i < 2 && (p_##i == 0 || m_##i); ++p_##i)                                        \
    for (unsigned long long i = p_##i == 0 ? f_##i : f_##i + s_##i; i < (n); i = p_##i ? i + s_##i : (m_##i = 1, ~0ull))
#define GS_C(i, n)                                                                                        \
  _Pragma("unroll") for (unsigned long long f_##i = ost_linear_thread(), s_##i = ost_grid_threads(), p_##i = 0, m_##i = 0; \
                         p_##i < 2; ++p_##i)                                                                 \
    for (unsigned long long i = p_##i == 0 ? f_##i : f_##i + s_##i; (p_##i == 0 || m_##i) && i < (n);       \
         i = p_##i ? i + s_##i : (m_##i = 1, ~0ull))

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

enum Form { FOR, PEELED, U32, HEADER, FORM_B, FORM_C };

template <int F>
__device__ __forceinline__ void add_one(float* x, unsigned n) {
  const unsigned long long t = ost_linear_thread(), s = ost_grid_threads();  // the header's
  if (F == FOR) {
    for (unsigned long long i = t; i < n; i += s) x[i] += 1.0f;
  } else if (F == PEELED) {
    if (t < n) {
      x[t] += 1.0f;
      for (unsigned long long i = t + s; i < n; i += s) x[i] += 1.0f;
    }
  } else if (F == HEADER) {
    OST_GRID_STRIDE(i, n) { x[i] += 1.0f; }
  } else if (F == FORM_B) {
    GS_B(i, n) { x[i] += 1.0f; }
  } else if (F == FORM_C) {
    GS_C(i, n) { x[i] += 1.0f; }
  } else {
    if (t < n) {
      unsigned k = (unsigned)t;
      x[k] += 1.0f;
      while (s < (unsigned long long)(n - k)) {
        k += (unsigned)s;
        x[k] += 1.0f;
      }
    }
  }
}

template <int F, unsigned GX>
__global__ void __launch_bounds__(256) chain(float* x) {
  constexpr unsigned n = GX * 256;
  __shared__ __align__(16) float tile[256];
  const unsigned long long at = 1024ull * blockIdx.x;
  for (unsigned k = threadIdx.x; k < 64; k += blockDim.x) reinterpret_cast<uint4*>(tile)[k] = reinterpret_cast<const uint4*>(x + at / 4)[k];
  __syncthreads();
  float* p = (float*)((unsigned long long)tile - at);
  add_one<F>(p, n);
#pragma unroll 8
  for (unsigned r = 0; r < 940u; ++r) add_one<F>(p, n);
  __syncthreads();
  for (unsigned k = threadIdx.x; k < 64; k += blockDim.x) reinterpret_cast<uint4*>(x + at / 4)[k] = reinterpret_cast<const uint4*>(tile)[k];
}

template <int F, unsigned GX> int run(const char* name) {
  const unsigned n = GX * 256;
  float* x;
  CHECK(cudaMalloc(&x, 4ull * n));
  CHECK(cudaMemset(x, 0, 4ull * n));
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  chain<F, GX><<<GX, 256>>>(x);
  CHECK(cudaDeviceSynchronize());
  const int reps = 30;
  float best = 1e30f;
  for (int t = 0; t < reps; ++t) {
    cudaEventRecord(a);
    chain<F, GX><<<GX, 256>>>(x);
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
  printf("%-8s blocks %5u  %.4f us per body (best of %d)  %s\n", name, GX, best * 1000.f / 941, reps, bad ? "WRONG" : "exact");
  cudaFree(x);
  return 0;
}

template <unsigned GX> void all() {
  for (int round = 0; round < 2; ++round) {
    run<FOR, GX>("for");
    run<PEELED, GX>("peeled");
    run<U32, GX>("u32");
    run<HEADER, GX>("header");
    run<FORM_B, GX>("form B");
    run<FORM_C, GX>("form C");
  }
}

// Elements a thread takes, by the one-loop form and by the header's, with `continue` and `break`.
__global__ void one_loop(unsigned* out, unsigned n, unsigned skip, unsigned stop) {
  for (unsigned long long i = ost_linear_thread(), s = ost_grid_threads(); i < n; i += s) {
    if (i % skip == 0) continue;
    if (i == stop) break;
    atomicAdd(&out[i % 97], (unsigned)i + 1);
  }
}
#define SAME_BODY(i)                      \
  {                                        \
    if (i % skip == 0) continue;           \
    if (i == stop) break;                  \
    atomicAdd(&out[i % 97], (unsigned)i + 1); \
  }
__global__ void header_loop(unsigned* out, unsigned n, unsigned skip, unsigned stop) { OST_GRID_STRIDE(i, n) SAME_BODY(i) }
__global__ void b_loop(unsigned* out, unsigned n, unsigned skip, unsigned stop) { GS_B(i, n) SAME_BODY(i) }
__global__ void c_loop(unsigned* out, unsigned n, unsigned skip, unsigned stop) { GS_C(i, n) SAME_BODY(i) }

int same_elements(void (*form)(unsigned*, unsigned, unsigned, unsigned), const char* name) {
  unsigned *a, *b;
  CHECK(cudaMalloc(&a, 4 * 97)); CHECK(cudaMalloc(&b, 4 * 97));
  unsigned ha[97], hb[97], cases = 0, bad = 0;
  for (unsigned grid : {1u, 3u, 64u}) for (unsigned block : {32u, 96u}) for (unsigned n : {0u, 1u, 50u, 1000u, 100000u})
    for (unsigned skip : {1000000u, 7u}) for (unsigned stop : {0xffffffffu, 5u, 40u, 3000u}) {
      CHECK(cudaMemset(a, 0, 4 * 97)); CHECK(cudaMemset(b, 0, 4 * 97));
      one_loop<<<grid, block>>>(a, n, skip, stop);
      form<<<grid, block>>>(b, n, skip, stop);
      CHECK(cudaMemcpy(ha, a, 4 * 97, cudaMemcpyDeviceToHost)); CHECK(cudaMemcpy(hb, b, 4 * 97, cudaMemcpyDeviceToHost));
      ++cases;
      for (int k = 0; k < 97; ++k) if (ha[k] != hb[k]) { ++bad; break; }
    }
  printf("%s against the one loop, continue and break: %u of %u cases the same\n", name, cases - bad, cases);
  cudaFree(a); cudaFree(b);
  return bad != 0;
}

int main() {
  if (same_elements(header_loop, "header") | same_elements(b_loop, "form B") | same_elements(c_loop, "form C")) return 1;
  all<128>();
  all<1024>();
  all<8192>();
  return 0;
}
