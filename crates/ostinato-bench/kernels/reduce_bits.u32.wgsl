// An element's bits in a u32 word, and back (u32).
fn to_bits(v: u32) -> u32 { return v; }
fn from_bits(b: u32) -> u32 { return b; }
