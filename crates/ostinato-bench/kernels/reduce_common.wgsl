// Shared by the reduction kernels' WGSL (prepended; ELEM is the element type, f32 or u32, filled in):
// workgroups of 256 invocations and the shared-memory tree.
var<workgroup> sm: array<ELEM, 256>;

// sm[t] += sm[t + o] for o = 128, 64, ..., 1, as the CUDA twin adds; the sum is sm[0] after it.
fn tree(lid: u32, v: ELEM) -> ELEM {
    sm[lid] = v;
    workgroupBarrier();
    for (var o = 128u; o > 0u; o = o >> 1u) {
        if (lid < o) {
            sm[lid] = sm[lid] + sm[lid + o];
        }
        workgroupBarrier();
    }
    return sm[0];
}
