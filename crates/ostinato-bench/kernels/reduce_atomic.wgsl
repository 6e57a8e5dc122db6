// reduce_atomic(acc: read_write, x: read, n): every invocation adds its grid-stride sum into acc[0].
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> acc: array<atomic<ACC>>;
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    acc_add(local_sum(lid, wid.x, groups.x, p.n));
}
