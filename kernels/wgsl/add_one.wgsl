// add_one(x: read_write f32[], n: u32): x[i] += 1 for i < n, each i once whatever the grid (as the host built-in).
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // The grid's workgroups in x, y and z, numbered linearly: every i < n is done once, whatever its shape.
    let stride = ost_mul(ost_groups(groups), 256u);
    for (var i = ost_add(ost_mul(ost_group(wid, groups), 256u), lid); i < p.n; i = ost_add(i, stride)) {
        x[i] = x[i] + 1.0;
    }
}
