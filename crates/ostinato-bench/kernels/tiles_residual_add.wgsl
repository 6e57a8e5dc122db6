// residual_add(x: read_write f32[], h: read f32[], rows, n): x[row] += h[row], 32 invocations per row.
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> h: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x * 8u + l.y;
    if (row < p.rows) {
        for (var c = l.x; c < p.n; c = c + 32u) {
            x[row * p.n + c] = x[row * p.n + c] + h[row * p.n + c];
        }
    }
}
