// reduce2_final(acc: read_write, part: read, m): one workgroup sums the m partials (invocation t: part[t],
// part[t + 256], ...; then the tree) into acc[0].
struct Params { m: u32 }
@group(0) @binding(0) var<storage, read_write> acc: array<u32>;
@group(0) @binding(1) var<storage, read> part: array<u32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var v = ELEM(0);
    for (var i = lid; i < p.m; i = i + 256u) {
        v = v + from_bits(part[i]);
    }
    let total = tree(lid, v);
    if (lid == 0u) {
        acc[0] = to_bits(from_bits(acc[0]) + total);
    }
}
