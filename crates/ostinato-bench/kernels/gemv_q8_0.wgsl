fn term(row: u32, j: u32, nb: u32) -> f32 {
    let b = row * nb + j;
    var dot = 0i;
    for (var m = 0u; m < 8u; m = m + 1u) {
        dot = dot + DOT4I8(wq[b * 8u + m], xq[j * 8u + m]);
    }
    return (ws_half(b) * xs_half(j)) * f32(dot);
}
