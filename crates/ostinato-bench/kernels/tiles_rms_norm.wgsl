// rms_norm(h: write f32[], x: read f32[], rows, n, eps): h[row] = x[row] / sqrt(mean(x[row]^2) + eps),
// as tiles.cu computes it: 32 invocations per row, 8 rows per workgroup.
struct Params { rows: u32, n: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> h: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x * 8u + l.y;
    var s = 0.0;
    if (row < p.rows) {
        for (var c = l.x; c < p.n; c = c + 32u) {
            let v = x[row * p.n + c];
            s = s + v * v;
        }
    }
    s = row_sum(l.x, l.y, s);
    let inv = 1.0 / sqrt(s / f32(p.n) + p.eps);
    if (row < p.rows) {
        for (var c = l.x; c < p.n; c = c + 32u) {
            h[row * p.n + c] = x[row * p.n + c] * inv;
        }
    }
}
