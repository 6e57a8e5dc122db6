// tile_gather(y: read_write u32[], x: read u32[], fan): workgroup j of T invocations (T filled in):
// y's tile j = y * 5 + the sum of x's tiles fan j .. fan j + fan - 1.
struct Params { fan: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(WG_X)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    var s = 0u;
    for (var k = 0u; k < p.fan; k = k + 1u) {
        s = s + x[WG_X * (p.fan * wid.x + k) + t];
    }
    y[WG_X * wid.x + t] = y[WG_X * wid.x + t] * 5u + s;
}
