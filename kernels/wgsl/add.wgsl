// add(x: read_write f32[n], y: read f32[n], n): x += y.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i = i + groups.x * 256u) { x[i] = x[i] + y[i]; }
}
