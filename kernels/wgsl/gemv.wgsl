// gemv(y: write f32[m], w: read f32[m*k], x: read f32[k], m, k): y = W x; one workgroup per row, strided.
struct Params { m: u32, k: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var row = wid.x; row < p.m; row = row + groups.x) {
        var acc = 0.0;
        let base = row * p.k;
        for (var j = lid.x; j < p.k; j = j + 256u) { acc = acc + w[base + j] * x[j]; }
        red[lid.x] = acc;
        workgroupBarrier();
        tree_sum(lid.x);
        if (lid.x == 0u) { y[row] = red[0]; }
        workgroupBarrier();
    }
}
