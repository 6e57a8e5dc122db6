// mix(out: read_write u32[], inp: read u32[], n_out, n_in, salt): out[i] = out[i]*3 + inp[i % n_in] + salt.
struct Params { n_out: u32, n_in: u32, salt: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<u32>;
@group(0) @binding(1) var<storage, read> inp: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // Workgroups numbered linearly over x, y and z: each i once, whatever the grid's shape.
    let stride = ost_mul(ost_groups(groups), 256u);
    for (var i = ost_add(ost_mul(ost_group(wid, groups), 256u), lid); i < p.n_out; i = ost_add(i, stride)) {
        out_[i] = out_[i] * 3u + inp[i % p.n_in] + p.salt;
    }
}
