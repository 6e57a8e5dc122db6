// reduce_tree(acc: read_write, x: read, n): each workgroup's tree sum, added into acc[0] by its first
// invocation.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> acc: array<atomic<ACC>>;
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let s = tree(lid, local_sum(lid, wid.x, groups.x, p.n));
    if (lid == 0u) {
        acc_add(s);
    }
}
