// kv_store(kcache: read_write, vcache: read_write, k: read, v: read, pos, kv): row `pos` of both caches.
struct Params { pos: u32, kv: u32 }
@group(0) @binding(0) var<storage, read_write> kc: array<f32>;
@group(0) @binding(1) var<storage, read_write> vc: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let first = ost_add(ost_mul(ost_group(wid, groups), 256u), lid);
    let stride = ost_mul(ost_groups(groups), 256u);
    for (var i = first; i < p.kv; i = ost_add(i, stride)) {
        kc[p.pos * p.kv + i] = k[i];
        vc[p.pos * p.kv + i] = v[i];
    }
}
