// silu_mul(out: write f32[n], gate_up: read f32[2n], n): out = silu(gate) * up.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> gu: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i = i + groups.x * 256u) {
        let g = gu[i];
        out_[i] = g / (1.0 + exp(-g)) * gu[p.n + i];
    }
}
