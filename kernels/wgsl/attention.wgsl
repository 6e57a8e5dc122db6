// attention(out: write, q: read, kcache: read, vcache: read, pos, heads, kv_heads, head_dim): a
// workgroup per head (heads strided over the grid) over cache rows 0..=pos (at most 1024), grouped-query.
struct Params { pos: u32, heads: u32, kv_heads: u32, head_dim: u32 }
@group(0) @binding(0) var<storage, read_write> out_: array<f32>;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
var<immediate> p: Params;
var<workgroup> scores: array<f32, 1024>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // Heads strided over the workgroups, numbered linearly over x, y and z: every head once, whatever
    // the grid (the head is the same for the whole workgroup, so every invocation reaches each barrier).
    let stride = ost_groups(groups);
    for (var h = ost_group(wid, groups); h < p.heads; h = ost_add(h, stride)) {
        head(h, lid.x);
    }
}

fn head(h: u32, lx: u32) {
    let hd = p.head_dim;
    let kvo = (h / (p.heads / p.kv_heads)) * hd;
    let stride = p.kv_heads * hd;
    let scale = inverseSqrt(f32(hd));
    for (var t = lx; t <= p.pos; t = t + 256u) {
        var d = 0.0;
        for (var i = 0u; i < hd; i = i + 1u) { d = d + q[h * hd + i] * kc[t * stride + kvo + i]; }
        scores[t] = d * scale;
    }
    workgroupBarrier();
    var m = -3.402823e38;
    for (var t = lx; t <= p.pos; t = t + 256u) { m = max(m, scores[t]); }
    red[lx] = m;
    workgroupBarrier();
    tree_max(lx);
    let mx = red[0];
    workgroupBarrier();
    var s = 0.0;
    for (var t = lx; t <= p.pos; t = t + 256u) { let e = exp(scores[t] - mx); scores[t] = e; s = s + e; }
    red[lx] = s;
    workgroupBarrier();
    tree_sum(lx);
    let inv = 1.0 / red[0];
    for (var i = lx; i < hd; i = i + 256u) {
        var acc = 0.0;
        for (var t = 0u; t <= p.pos; t = t + 1u) { acc = acc + scores[t] * vc[t * stride + kvo + i]; }
        out_[h * hd + i] = acc * inv;
    }
    // The next head of this workgroup reuses `scores` and `red`.
    workgroupBarrier();
}
