// The geometry family of the benchmark's kernel pack (`ostinato_bench::pack`): one element-wise kernel
// launched in every block and grid shape the rows name. Its WGSL twin is geometry.wgsl, its host twin
// `families::geometry`.
#include "ostinato.cuh"

// out[i] = out[i] * 3 + x[i] + salt (wrapping u32) for i < n: the threads of a 1-, 2- or 3-D grid of 1-,
// 2- or 3-D blocks numbered linearly (x fastest), grid-stride, so the result never depends on the shape.
#if defined(OST_BENCH_ALL) || defined(OST_BENCH_geom_mix)
extern "C" __global__ void geom_mix(unsigned* out, const unsigned* x, unsigned n, unsigned salt) {
  OST_ENTRY();
  unsigned bt = blockDim.x * blockDim.y * blockDim.z;
  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned stride = bt * gridDim.x * gridDim.y * gridDim.z;
  for (unsigned i = b * bt + t; i < n; i += stride) out[i] = out[i] * 3u + x[i] + salt;
  OST_EXIT();
}
#endif
