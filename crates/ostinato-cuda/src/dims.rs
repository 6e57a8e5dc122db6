//! Launch geometry, shared by the lowering (what to launch) and the FFI layer (how).

/// Launch geometry in driver terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
}

impl Dims {
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g as u64).product()
    }
}
