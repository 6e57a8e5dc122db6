// Shared by the WGSL decode kernels (prepended to each): workgroup scratch and tree reductions.
// Block-cooperative kernels use 256-invocation workgroups whatever block size the graph records; every
// loop is strided, so results never depend on the geometry.

var<workgroup> red: array<f32, 256>;

fn tree_sum(lid: u32) {
    for (var o = 128u; o > 0u; o = o >> 1u) {
        if (lid < o) { red[lid] = red[lid] + red[lid + o]; }
        workgroupBarrier();
    }
}

fn tree_max(lid: u32) {
    for (var o = 128u; o > 0u; o = o >> 1u) {
        if (lid < o) { red[lid] = max(red[lid], red[lid + o]); }
        workgroupBarrier();
    }
}
