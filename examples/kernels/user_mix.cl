// A user's own kernel for AMD GPUs, in OpenCL C: the semantics of the built-in `mix`
// (out[i] = out[i]*3 + inp[i % n_in] + salt, wrapping u32), compiled by scripts/build-hsaco.sh into
// user_mix.hsaco for gfx1100 (clang-19 -x cl --target=amdgcn-amd-amdhsa -mcpu=gfx1100). The HSA
// backend checks its kernel-argument metadata against the graph's signature when it binds it.
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void user_mix(__global unsigned* restrict out, __global const unsigned* restrict inp,
                                                                           unsigned n_out, unsigned n_in, unsigned salt) {
  __constant unsigned short* packet = (__constant unsigned short*)__builtin_amdgcn_dispatch_ptr();
  unsigned long stride = ((__constant unsigned*)packet)[3];
  for (unsigned long i = (unsigned long)__builtin_amdgcn_workgroup_id_x() * packet[2] + __builtin_amdgcn_workitem_id_x(); i < n_out; i += stride) {
    out[i] = out[i] * 3u + inp[i % n_in] + salt;
  }
}
