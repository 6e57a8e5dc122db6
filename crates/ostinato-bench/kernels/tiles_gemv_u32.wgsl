// gemv_u32(y: write u32[], w: read u32[], x: read u32[], rows, k): y[row] = W[row] . x (wrapping),
// 32 invocations per row, 8 rows per workgroup (the butterfly's sum in workgroup memory: u32 sums wrap,
// so any order gives the same word).
struct Params { rows: u32, k: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
var<immediate> p: Params;
var<workgroup> red: array<u32, 256>;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x * 8u + l.y;
    let i = l.y * 32u + l.x;
    var s = 0u;
    if (row < p.rows) {
        for (var j = l.x; j < p.k; j = j + 32u) {
            s = s + w[row * p.k + j] * x[j];
        }
    }
    red[i] = s;
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (l.x < o) {
            red[i] = red[i] + red[i + o];
        }
    }
    if (row < p.rows && l.x == 0u) {
        y[row] = red[i];
    }
}
