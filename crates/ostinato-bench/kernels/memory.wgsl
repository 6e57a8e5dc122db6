// mem_lL(out: read_write u32[], table: read u32[], mask, salt): out[t] = out[t] * 3 + the sum of the L
// (filled in) loads table[hash(t * L + j + salt) & mask], j < L, all issued before the sum, as the CUDA
// twin issues them; workgroups of 128.
struct Params { mask: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<u32>;
var<immediate> p: Params;

fn ml_hash(x: u32) -> u32 {
    var v = x;
    v = v ^ (v >> 16u);
    v = v * 0x7feb352du;
    v = v ^ (v >> 15u);
    v = v * 0x846ca68bu;
    v = v ^ (v >> 16u);
    return v;
}

@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = wid.x * 128u + lid;
    var v: array<u32, LOADS>;
    for (var j = 0u; j < LOADS; j = j + 1u) {
        v[j] = table[ml_hash(t * LOADS + j + p.salt) & p.mask];
    }
    var s = 0u;
    for (var j = 0u; j < LOADS; j = j + 1u) {
        s = s + v[j];
    }
    out_[t] = out_[t] * 3u + s;
}
