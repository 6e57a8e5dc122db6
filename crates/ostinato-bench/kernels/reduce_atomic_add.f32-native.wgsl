// acc[0] += v: one f32 atomic add (for a device with VK_EXT_shader_atomic_float's
// shaderBufferFloat32AtomicAdd: acc is an array of atomic f32).
fn acc_add(v: f32) {
    atomicAdd(&acc[0], v);
}
