// mix(out: read_write u32[], inp: read u32[], n_out, n_in, salt): out[i] = out[i]*3 + inp[i % n_in] + salt.
struct Params { n_out: u32, n_in: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<u32>;
@group(0) @binding(1) var<storage, read> inp: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 256u;
    for (var i = gid.x; i < p.n_out; i = i + stride) {
        out_[i] = out_[i] * 3u + inp[i % p.n_in] + p.salt;
    }
}
