// tile_spread(x: read_write u32[], y: read u32[], salt): a grid of (F, G) workgroups of T invocations
// (T filled in); workgroup (i, j) updates tile i + F j of x from tile j of y: x = x * 3 + y + salt.
struct Params { salt: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read> y: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(WG_X)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let tile = wid.x + groups.x * wid.y;
    x[WG_X * tile + t] = x[WG_X * tile + t] * 3u + y[WG_X * wid.y + t] + p.salt;
}
