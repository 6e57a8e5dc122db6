// geom_mix(out: read_write u32[], x: read u32[], n, salt): out[i] = out[i] * 3 + x[i] + salt over a
// workgroup of WG_X x WG_Y x WG_Z invocations (the row's block shape, filled in), numbered linearly as
// the CUDA twin numbers its threads.
struct Params { n: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let bt = WG_X * WG_Y * WG_Z;
    let stride = bt * groups.x * groups.y * groups.z;
    for (var i = (wid.x + groups.x * (wid.y + groups.y * wid.z)) * bt + t; i < p.n; i = i + stride) {
        out_[i] = out_[i] * 3u + x[i] + p.salt;
    }
}
