fn acc_add(v: u32) {
    atomicAdd(&acc[0], v);
}
