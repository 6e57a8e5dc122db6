// gemv_FORMAT(y: read_write f32[], wq, ws, xq, xs: read u32[], rows, k): y[row] += W[row] . x for the
// format of gemv.cu (its comment gives the layouts), the same operations in the same order: 32
// invocations (the CUDA twin's warp) per row, 8 rows per workgroup of 256; invocation l sums blocks
// l, l + 32, ... (`term`, filled in per format), then the 32 sums are added in workgroup memory in the
// order of the warp's butterfly for its first lane (offsets 16, 8, 4, 2, 1) and the sum added into y.
struct Params { rows: u32, k: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> wq: array<u32>;
@group(0) @binding(2) var<storage, read> ws: array<u32>;
@group(0) @binding(3) var<storage, read> xq: array<u32>;
@group(0) @binding(4) var<storage, read> xs: array<u32>;
var<immediate> p: Params;
var<workgroup> red: array<f32, 256>;

// The i-th f16 of ws / xs, two per word.
fn ws_half(i: u32) -> f32 {
    return f16_to_f32(ws[i >> 1u] >> (16u * (i & 1u)));
}
fn xs_half(i: u32) -> f32 {
    return f16_to_f32(xs[i >> 1u] >> (16u * (i & 1u)));
}
// The sum of block j's 32 activations.
fn xsum(j: u32) -> i32 {
    var s = 0i;
    for (var m = 0u; m < 8u; m = m + 1u) {
        s = s + DOT4I8(0x01010101u, xq[j * 8u + m]);
    }
    return s;
}
// The dot of block b's 4-bit quants (4 words from wq[4 b]) and block j's activations.
fn dot_q4(b: u32, j: u32) -> i32 {
    var s = 0i;
    for (var m = 0u; m < 4u; m = m + 1u) {
        let w = wq[b * 4u + m];
        s = s + DOT4I8(w & 0x0f0f0f0fu, xq[j * 8u + m]);
        s = s + DOT4I8((w >> 4u) & 0x0f0f0f0fu, xq[j * 8u + m + 4u]);
    }
    return s;
}

TERM

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let lane = lid & 31u;
    let row = wid.x * 8u + (lid >> 5u);
    let nb = p.k / 32u;
    var acc = 0.0;
    if (row < p.rows) {
        for (var j = lane; j < nb; j = j + 32u) {
            acc = acc + term(row, j, nb);
        }
    }
    red[lid] = acc;
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (lane < o) {
            red[lid] = red[lid] + red[lid + o];
        }
    }
    if (lane == 0u && row < p.rows) {
        y[row] = y[row] + red[lid];
    }
}
