// A user's own kernel with block barriers: the built-in `mix`'s semantics (out[i] = out[i]*3 +
// inp[i % n_in] + salt, wrapping u32), each block staging its slice of `out` in shared memory and
// finishing the element of the thread mirrored in the block (blocks of at most 1,024 threads). The
// barriers make it a fused body only alone in its block: fused, it runs side by side with others,
// never after another body in the same block (docs/design.md, chain fusion).
extern "C" __global__ void user_mix_staged(unsigned* out, const unsigned* inp, unsigned n_out, unsigned n_in, unsigned salt) {
  __shared__ unsigned staged[1024];
  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x; base < n_out; base += step) {
    const unsigned long long i = base + threadIdx.x;
    if (i < n_out) staged[threadIdx.x] = out[i] * 3u + salt;
    __syncthreads();
    const unsigned mirror = blockDim.x - 1 - threadIdx.x;
    const unsigned long long k = base + mirror;
    if (k < n_out) out[k] = staged[mirror] + inp[k % n_in];
    __syncthreads();
  }
}
