// The packed signed 8-bit dot product without the device's instruction: the four byte products of a
// and b, summed (what `dot4I8Packed` computes).
fn dot4_i8(a: u32, b: u32) -> i32 {
    var s = 0i;
    for (var k = 0u; k < 4u; k = k + 1u) {
        s = s + (bitcast<i32>(a << (24u - 8u * k)) >> 24u) * (bitcast<i32>(b << (24u - 8u * k)) >> 24u);
    }
    return s;
}
