fn term(row: u32, j: u32, nb: u32) -> f32 {
    let b = row * nb + j;
    let s = (row * (nb / 8u) + j / 8u) * 5u;
    let sub = j % 8u;
    let shift = 8u * (sub % 4u);
    let sc = i32((ws[s + 1u + sub / 4u] >> shift) & 0xffu);
    let mn = i32((ws[s + 3u + sub / 4u] >> shift) & 0xffu);
    let dx = xs_half(j);
    let dd = f16x2(ws[s]);
    return (dd.x * dx) * f32(sc * dot_q4(b, j)) - (dd.y * dx) * f32(mn * xsum(j));
}
