// Ostinato's built-in kernels for AMD GPUs, OpenCL C compiled by clang for amdgcn-amd-amdhsa (one code
// object per target: scripts/build-hsaco.sh). Same semantics as the host's built-ins and
// kernels/ostinato.cu: grid-stride loops, so the result never depends on the launch geometry.
//
// The kernels read their geometry from the AQL dispatch packet (the dispatch pointer the command
// processor hands every kernel: workgroup_size_x at byte 4, grid_size_x in work-items at byte 12), so
// they need no hidden kernel arguments: their kernarg segment is exactly their explicit arguments,
// which the backend checks against each signature from the code object's metadata.
//
// Every pointer is `restrict` so the compiler records, in the metadata, which buffers a kernel only
// reads (`.actual_access: read_only`) or only writes (`write_only`); the backend refuses a signature
// those contradict.

typedef unsigned int u32;
typedef unsigned long u64;
typedef unsigned char u8;

// This work-item's first index and the grid's stride (its size in work-items).
static inline u64 first_index(void) {
  __constant unsigned short* packet = (__constant unsigned short*)__builtin_amdgcn_dispatch_ptr();
  return (u64)__builtin_amdgcn_workgroup_id_x() * packet[2] + __builtin_amdgcn_workitem_id_x();
}

static inline u64 grid_stride(void) {
  __constant u32* packet = (__constant u32*)__builtin_amdgcn_dispatch_ptr();
  return packet[3];
}

// x[i] += 1 for i < n.
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void add_one(__global float* restrict x, u32 n) {
  for (u64 i = first_index(), s = grid_stride(); i < n; i += s) x[i] += 1.0f;
}

// out[i] = out[i]*3 + inp[i % n_in] + salt (wrapping u32) for i < n_out.
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void mix(__global u32* restrict out, __global const u32* restrict inp, u32 n_out, u32 n_in, u32 salt) {
  for (u64 i = first_index(), s = grid_stride(); i < n_out; i += s) out[i] = out[i] * 3u + inp[i % n_in] + salt;
}

// Internal: a plan's copy node (any alignment).
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void ostinato_copy(__global u8* restrict dst, __global const u8* restrict src, u64 n) {
  u64 first = first_index(), s = grid_stride();
  if ((((u64)dst | (u64)src | n) & 3ul) == 0) {
    for (u64 i = first; i < n / 4; i += s) ((__global u32*)dst)[i] = ((__global const u32*)src)[i];
  } else {
    for (u64 i = first; i < n; i += s) dst[i] = src[i];
  }
}

// Internal: a plan's fill node (the u32 `value` over n_words words).
__kernel __attribute__((amdgpu_flat_work_group_size(1, 1024))) void ostinato_fill(__global u32* restrict dst, u32 value, u64 n_words) {
  for (u64 i = first_index(), s = grid_stride(); i < n_words; i += s) dst[i] = value;
}
