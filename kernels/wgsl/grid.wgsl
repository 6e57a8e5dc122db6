// Grid arithmetic of the built-in kernels (prepended to each), in u32 that never wraps: a product or
// sum past u32 saturates at 0xffffffff, which no element count (a u32) reaches, so an index past what
// u32 counts does no work instead of wrapping onto another invocation's element. A grid of 2^24 or
// more 256-wide workgroups has 2^32 or more invocations: plain u32 products there applied a kernel
// twice to some elements (grid [65535, 257, 1]) or made the stride 0 (grid [4096, 4096, 1]).

const OST_SAT: u32 = 0xffffffffu;

fn ost_add(a: u32, b: u32) -> u32 {
    let s = a + b;
    return select(s, OST_SAT, s < a);
}

fn ost_mul(a: u32, b: u32) -> u32 {
    let ah = a >> 16u;
    let bh = b >> 16u;
    if (ah != 0u && bh != 0u) { return OST_SAT; }
    // One of the two cross terms is zero, the other below 2^32.
    let cross = ah * (b & 0xffffu) + (a & 0xffffu) * bh;
    if (cross > 0xffffu) { return OST_SAT; }
    return ost_add(cross << 16u, (a & 0xffffu) * (b & 0xffffu));
}

// The workgroup's index among the grid's, numbered linearly over x, y and z.
fn ost_group(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return ost_add(wid.x, ost_mul(groups.x, ost_add(wid.y, ost_mul(groups.y, wid.z))));
}

// How many workgroups the grid has.
fn ost_groups(groups: vec3<u32>) -> u32 {
    return ost_mul(ost_mul(groups.x, groups.y), groups.z);
}
