// dot_f16 / dot_bf16 (out: read_write f32[], a: read u32[], b: read u32[], n): out[t] += the dot product
// of the thread's 8 words of a and b as pairs (UNPACK, filled in: f16 or bf16), accumulated in f32 in word
// order, low half first; workgroups of 256.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
var<immediate> p: Params;

fn bf16x2(w: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t < p.n) {
        var s = 0.0;
        for (var j = 0u; j < 8u; j = j + 1u) {
            let x = UNPACK(a[t * 8u + j]);
            let y = UNPACK(b[t * 8u + j]);
            s = fma(x.x, y.x, s);
            s = fma(x.y, y.y, s);
        }
        out_[t] = out_[t] + s;
    }
}
