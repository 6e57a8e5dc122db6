// Shared by the tiles family's row kernels (prepended): workgroups of 32 x 8 invocations, 32 per row
// (the CUDA twin's warp), and the warp's butterfly done in workgroup memory (WGSL has no portable
// subgroups): the 32 values of a row are added (or maxed) in the order the butterfly gives its first
// lane, offsets 16, 8, 4, 2, 1, and every invocation of the row reads the result. Every invocation of
// the workgroup calls these (the barriers are workgroup-wide).
var<workgroup> red: array<f32, 256>;

fn row_sum(lx: u32, ly: u32, v: f32) -> f32 {
    let i = ly * 32u + lx;
    red[i] = v;
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (lx < o) {
            red[i] = red[i] + red[i + o];
        }
    }
    workgroupBarrier();
    let s = red[ly * 32u];
    workgroupBarrier();
    return s;
}

fn row_max(lx: u32, ly: u32, v: f32) -> f32 {
    let i = ly * 32u + lx;
    red[i] = v;
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (lx < o) {
            red[i] = max(red[i], red[i + o]);
        }
    }
    workgroupBarrier();
    let m = red[ly * 32u];
    workgroupBarrier();
    return m;
}

// e^x as tiles.cu's tl_exp takes it: 2^x of the product x log2 e (the driver's exp2).
fn tl_exp(x: f32) -> f32 {
    return exp2(x * bitcast<f32>(0x3fb8aa3bu));
}
