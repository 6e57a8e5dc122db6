// gemv(y: write f32[m], w: read f32[m*k], x: read f32[k], m, k): y = W x. The CUDA kernel's geometry: a
// 256-invocation workgroup works on 8 rows at once, 32 invocations per row reading the row coalesced
// (invocation `lane` reads columns lane, lane + 32, ...), then one 32-wide tree reduction per row, all
// 8 rows in the same 5 barrier steps. Rows are strided over the workgroups, so any grid is correct.
struct Params { m: u32, k: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lane = lid.x & 31u;
    let slot = lid.x >> 5u;
    // `first` is the same for the whole workgroup, so every invocation reaches every barrier.
    // Workgroups numbered linearly over x, y and z (the same for the whole workgroup).
    let stride = ost_mul(ost_groups(groups), 8u);
    for (var first = ost_mul(ost_group(wid, groups), 8u); first < p.m; first = ost_add(first, stride)) {
        let row = ost_add(first, slot);
        var acc = 0.0;
        if (row < p.m) {
            let base = row * p.k;
            for (var j = lane; j < p.k; j = j + 32u) { acc = acc + w[base + j] * x[j]; }
        }
        red[lid.x] = acc;
        workgroupBarrier();
        for (var o = 16u; o > 0u; o = o >> 1u) {
            if (lane < o) { red[lid.x] = red[lid.x] + red[lid.x + o]; }
            workgroupBarrier();
        }
        if (lane == 0u && row < p.m) { y[row] = red[lid.x]; }
        workgroupBarrier();
    }
}
