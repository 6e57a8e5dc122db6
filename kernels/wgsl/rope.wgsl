// rope(qk: read_write f32[heads*head_dim], pos, heads, head_dim): rotate (2i, 2i+1) by pos * 10000^(-2i/hd).
struct Params { pos: u32, heads: u32, head_dim: u32 }
@group(0) @binding(0) var<storage, read_write> qk: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.head_dim / 2u;
    let stride = ost_mul(ost_groups(groups), 256u);
    for (var t = ost_add(ost_mul(ost_group(wid, groups), 256u), lid); t < p.heads * half; t = ost_add(t, stride)) {
        let h = t / half;
        let i = t % half;
        let theta = f32(p.pos) * pow(10000.0, -2.0 * f32(i) / f32(p.head_dim));
        let s = sin(theta);
        let c = cos(theta);
        let a = h * p.head_dim + 2u * i;
        let x0 = qk[a];
        let x1 = qk[a + 1u];
        qk[a] = x0 * c - x1 * s;
        qk[a + 1u] = x0 * s + x1 * c;
    }
}
