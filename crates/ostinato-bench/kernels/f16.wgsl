// An f16 (the low 16 bits of h) as f32, exactly: normal numbers by moving the exponent and mantissa,
// subnormals as mantissa · 2^-24, infinities and NaNs kept. Written out because naga's `unpack2x16float`
// needs the SHADER_FLOAT16_IN_FLOAT32 capability, which the Vulkan backend does not ask of a device.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        return bitcast<f32>(sign | bitcast<u32>(f32(m) * 5.9604645e-8));
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// The two f16 of a word (low first).
fn f16x2(w: u32) -> vec2<f32> {
    return vec2<f32>(f16_to_f32(w & 0xffffu), f16_to_f32(w >> 16u));
}
