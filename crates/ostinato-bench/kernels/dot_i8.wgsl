// dot_i8(out: read_write u32[], a: read u32[], b: read u32[], n): out[t] += the dot product of the
// thread's 8 words of a and b as signed byte quads (wrapping u32); workgroups of 256.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t < p.n) {
        var s = 0i;
        for (var j = 0u; j < 8u; j = j + 1u) {
            s = s + DOT4I8(a[t * 8u + j], b[t * 8u + j]);
        }
        out_[t] = out_[t] + bitcast<u32>(s);
    }
}
