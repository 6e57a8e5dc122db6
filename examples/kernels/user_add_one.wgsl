// A user's WGSL add_one: x[i] += 1 for i < n, one invocation per element, workgroup w taking elements
// [256 w, 256 w + 256). The Vulkan backend reads this from the code (its tile check), so the chain in
// examples/tiled_user_chain.toml fuses block by block without vouching for the map.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let i = wid.x * 256u + l.x;
    if (i < p.n) {
        x[i] = x[i] + 1.0;
    }
}
