// add_one(x: read_write f32[], n: u32): x[i] += 1 for i < n, each i once whatever the grid (as the host built-in).
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // The grid's workgroups in x, y and z, numbered linearly: every i < n is done once, whatever its shape.
    let stride = groups.x * groups.y * groups.z * 256u;
    for (var i = (wid.x + groups.x * (wid.y + groups.y * wid.z)) * 256u + lid; i < p.n; i = i + stride) {
        x[i] = x[i] + 1.0;
    }
}
