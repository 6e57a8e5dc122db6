//! The built-in kernels as AMD code objects, compiled by clang from `kernels/amdgpu/ostinato.cl` for
//! each target in `kernels/amdgpu/targets` (`scripts/build-hsaco.sh`) and embedded here, so building
//! Ostinato needs no AMDGPU compiler. The `hsaco_drift` test rebuilds them and fails on any
//! difference.

use ostinato::{Access, KernelSig, ScalarType};

macro_rules! hsaco {
    ($($target:literal),* $(,)?) => {
        /// (ISA, code object) for every shipped target.
        pub const CODE_OBJECTS: &[(&str, &[u8])] = &[$(($target, include_bytes!(concat!("../../../kernels/amdgpu/hsaco/ostinato-", $target, ".hsaco")))),*];
    };
}
hsaco!("gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151", "gfx1200", "gfx1201");

/// The built-in kernels' names (the ones a graph may bind as `builtin:NAME`).
pub const NAMES: &[&str] = &["add_one", "mix"];

/// The internal copy kernel's name and signature.
pub const COPY: &str = "ostinato_copy";
/// The internal fill kernel's name.
pub const FILL: &str = "ostinato_fill";

/// `ostinato_copy(dst: write, src: read, n_bytes: u64)`.
pub fn copy_sig() -> KernelSig {
    KernelSig::new(COPY).buffer("dst", Access::Write).buffer("src", Access::Read).scalar("n", ScalarType::U64)
}

/// `ostinato_fill(dst: write, value: u32, n_words: u64)`.
pub fn fill_sig() -> KernelSig {
    KernelSig::new(FILL).buffer("dst", Access::Write).scalar("value", ScalarType::U32).scalar("n_words", ScalarType::U64)
}

/// The ISAs built-in code objects exist for.
pub fn targets() -> Vec<&'static str> {
    CODE_OBJECTS.iter().map(|(t, _)| *t).collect()
}

/// The built-in code object for `isa` (`gfx1100`; a target-ID suffix such as `:xnack-` is ignored).
pub fn code_object_for(isa: &str) -> Option<&'static [u8]> {
    let base = isa.split(':').next().unwrap_or(isa);
    CODE_OBJECTS.iter().find(|(t, _)| *t == base).map(|(_, c)| *c)
}
