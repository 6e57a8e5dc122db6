// softmax_scale(x: read_write f32[], c: read f32[], rows, n): in place, x[row] = c[row] *
// softmax(x[row]), as tiles.cu computes it: 32 invocations per row, 8 rows per workgroup.
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> c: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x * 8u + l.y;
    let live = row < p.rows;
    // The lowest finite f32: the maximum of no element.
    var m = bitcast<f32>(0xff7fffffu);
    if (live) {
        for (var j = l.x; j < p.n; j = j + 32u) {
            m = max(m, x[row * p.n + j]);
        }
    }
    m = row_max(l.x, l.y, m);
    var s = 0.0;
    if (live) {
        for (var j = l.x; j < p.n; j = j + 32u) {
            let e = tl_exp(x[row * p.n + j] - m);
            x[row * p.n + j] = e;
            s = s + e;
        }
    }
    s = row_sum(l.x, l.y, s);
    if (live) {
        let f = c[row] / s;
        for (var j = l.x; j < p.n; j = j + 32u) {
            x[row * p.n + j] = x[row * p.n + j] * f;
        }
    }
}
