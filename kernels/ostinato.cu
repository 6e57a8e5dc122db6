// Ostinato's built-in CUDA kernels. Same semantics as the host backend's built-ins (grid-stride: the
// result never depends on the launch geometry). Every kernel is PDL-capable: it executes
// `griddepcontrol.wait` before its first global-memory access (OST_ENTRY, kernels/ostinato.cuh), so a
// programmatic edge into it is safe.

#include "ostinato.cuh"

// x[i] += 1 for i < n.
extern "C" __global__ void add_one(float* x, unsigned n) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, n) { x[i] += 1.0f; }
  OST_EXIT();
}

// out[i] = out[i]*3 + inp[i % n_in] + salt (wrapping u32) for i < n_out.
extern "C" __global__ void mix(unsigned* out, const unsigned* inp, unsigned n_out, unsigned n_in, unsigned salt) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, n_out) { out[i] = out[i] * 3u + inp[i % n_in] + salt; }
  OST_EXIT();
}

// Internal: a plan's copy node (any alignment).
extern "C" __global__ void ostinato_copy(unsigned char* dst, const unsigned char* src, unsigned long long n) {
  OST_ENTRY();
  if ((((unsigned long long)dst | (unsigned long long)src | n) & 3ull) == 0) {
    OST_GRID_STRIDE(i, n / 4) { ((unsigned*)dst)[i] = ((const unsigned*)src)[i]; }
  } else {
    OST_GRID_STRIDE(i, n) { dst[i] = src[i]; }
  }
  OST_EXIT();
}

// Internal: a plan's fill node (u32 pattern over n_words words).
extern "C" __global__ void ostinato_fill(unsigned* dst, unsigned value, unsigned long long n_words) {
  OST_ENTRY();
  OST_GRID_STRIDE(i, n_words) { dst[i] = value; }
  OST_EXIT();
}
