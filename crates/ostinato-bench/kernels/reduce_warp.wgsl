// reduce_warp(acc: read_write, x: read, n): each group of 32 invocations (the CUDA twin's warp) sums its
// invocations' sums in the order of the warp's butterfly (for its first lane: offsets 16, 8, 4, 2, 1),
// in workgroup memory (WGSL has no portable subgroups), and its first adds the sum into acc[0].
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> acc: array<atomic<ACC>>;
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    sm[lid] = local_sum(lid, wid.x, groups.x, p.n);
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if ((lid & 31u) < o) {
            sm[lid] = sm[lid] + sm[lid + o];
        }
    }
    if ((lid & 31u) == 0u) {
        acc_add(sm[lid]);
    }
}
