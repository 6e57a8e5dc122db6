fn term(row: u32, j: u32, nb: u32) -> f32 {
    let b = row * nb + j;
    let hb = p.rows * nb * 4u + b * 2u;
    var dot = 0i;
    for (var a = 0u; a < 8u; a = a + 1u) {
        var q: u32;
        if (a < 4u) {
            q = wq[b * 4u + a] & 0x0f0f0f0fu;
        } else {
            q = (wq[b * 4u + a - 4u] >> 4u) & 0x0f0f0f0fu;
        }
        q = q | (((wq[hb + a % 2u] >> (2u * (a / 2u))) & 0x03030303u) << 4u);
        dot = dot + DOT4I8(q, xq[j * 8u + a]);
    }
    dot = dot - 32i * xsum(j);
    let s = (row * (nb / 8u) + j / 8u) * 3u;
    let sub = j % 8u;
    let sc = bitcast<i32>(ws[s + 1u + sub / 4u] << (24u - 8u * (sub % 4u))) >> 24u;
    let d = f16_to_f32(ws[s]);
    return (d * xs_half(j)) * f32(sc * dot);
}
