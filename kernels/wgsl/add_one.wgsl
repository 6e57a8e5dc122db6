// add_one(x: read_write f32[], n: u32): x[i] += 1 for i < n (grid-stride; same semantics as kernels/ostinato.cu).
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 256u;
    for (var i = gid.x; i < p.n; i = i + stride) {
        x[i] = x[i] + 1.0;
    }
}
