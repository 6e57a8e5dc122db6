fn term(row: u32, j: u32, nb: u32) -> f32 {
    let b = row * nb + j;
    let dot = dot_q4(b, j) - 8i * xsum(j);
    return (ws_half(b) * xs_half(j)) * f32(dot);
}
