// acc[0] += v: a compare-exchange loop on the bits of an atomic u32, for a device without f32 atomic adds.
fn acc_add(v: f32) {
    var old = atomicLoad(&acc[0]);
    loop {
        let r = atomicCompareExchangeWeak(&acc[0], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
}
