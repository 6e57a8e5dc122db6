// rmsnorm(out: write f32[n], x: read f32[n], w: read f32[n], n: u32, eps: f32): one workgroup.
struct Params { n: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    // One workgroup does the work (the first); any others of a larger grid have none.
    if (any(wid != vec3<u32>(0u))) { return; }
    var s = 0.0;
    for (var i = lid.x; i < p.n; i = i + 256u) { let v = x[i]; s = s + v * v; }
    red[lid.x] = s;
    workgroupBarrier();
    tree_sum(lid.x);
    let scale = inverseSqrt(red[0] / f32(p.n) + p.eps);
    for (var i = lid.x; i < p.n; i = i + 256u) { out_[i] = x[i] * scale * w[i]; }
}
