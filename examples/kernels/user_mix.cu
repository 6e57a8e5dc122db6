// A user's own kernel, compiled by Ostinato with NVRTC at run time: the semantics of the built-in `mix`
// (out[i] = out[i]*3 + inp[i % n_in] + salt, wrapping u32), written without any griddepcontrol. It is
// therefore not PDL-capable: edges into it stay full, and a kernel that feeds it runs a build that
// never triggers its dependents early (docs/fences.md §4).
extern "C" __global__ void user_mix(unsigned* out, const unsigned* inp, unsigned n_out, unsigned n_in, unsigned salt) {
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_out;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = out[i] * 3u + inp[i % n_in] + salt;
  }
}
