// The invocation's sum of x[g], x[g + G], x[g + 2G], ... in that order (g its index in the grid, G the
// grid's invocations), as the CUDA twin's threads sum (prepended to the kernels that read x).
fn local_sum(lid: u32, wid: u32, groups: u32, n: u32) -> ELEM {
    var s = ELEM(0);
    for (var i = wid * 256u + lid; i < n; i = i + groups * 256u) {
        s = s + x[i];
    }
    return s;
}

