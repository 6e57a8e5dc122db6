// reduce_partials(acc: read_write, x: read, part: read_write, n): each workgroup's tree sum into
// part[workgroup], a ticket in part[groups]; the workgroup that takes the last ticket sums the partials
// (invocation t: part[t], part[t + 256], ...; then the tree) into acc[0] and resets the ticket. The
// partials are atomics so that the last workgroup reads what the others stored; storageBarrier orders
// each store before its workgroup's ticket.
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> acc: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<ELEM>;
@group(0) @binding(2) var<storage, read_write> part: array<atomic<u32>>;
var<immediate> p: Params;
var<workgroup> last: u32;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let s = tree(lid, local_sum(lid, wid.x, groups.x, p.n));
    if (lid == 0u) {
        atomicStore(&part[wid.x], to_bits(s));
    }
    storageBarrier();
    if (lid == 0u) {
        last = select(0u, 1u, atomicAdd(&part[groups.x], 1u) == groups.x - 1u);
    }
    if (workgroupUniformLoad(&last) == 1u) {
        storageBarrier();
        var v = ELEM(0);
        for (var i = lid; i < groups.x; i = i + 256u) {
            v = v + from_bits(atomicLoad(&part[i]));
        }
        let total = tree(lid, v);
        if (lid == 0u) {
            acc[0] = to_bits(from_bits(acc[0]) + total);
            atomicStore(&part[groups.x], 0u);
        }
    }
}
