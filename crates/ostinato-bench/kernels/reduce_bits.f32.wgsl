// An element's bits in a u32 word, and back (f32).
fn to_bits(v: f32) -> u32 { return bitcast<u32>(v); }
fn from_bits(b: u32) -> f32 { return bitcast<f32>(b); }
