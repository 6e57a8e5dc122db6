// add(x: read_write f32[n], y: read f32[n], n): x += y.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let first = ost_add(ost_mul(ost_group(wid, groups), 256u), lid);
    let stride = ost_mul(ost_groups(groups), 256u);
    for (var i = first; i < p.n; i = ost_add(i, stride)) { x[i] = x[i] + y[i]; }
}
