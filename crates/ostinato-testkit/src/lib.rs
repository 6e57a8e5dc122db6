//! Ostinato's shared test kit, used as a dev-dependency by the backends' and shells' tests: random
//! order-sensitive programs and their serial oracle ([`random_graphs`]; with tile maps, and run block by
//! block as a fused plan runs: [`tiled_graphs`]), a counting allocator for the
//! zero-allocation tests ([`counting_alloc`]), a kernel with a block barrier and a program of its
//! launches ([`barrier_bodies`]), how a device test says why it skips ([`skip`]), and
//! where the repository is when a test runs from a copy of the tree at any path ([`repo_root`]).

pub mod barrier_bodies;
pub mod counting_alloc;
pub mod random_graphs;
mod repo_root;
mod skip;
pub mod tiled_graphs;

pub use repo_root::repo_root;
pub use skip::skip;

/// The process's resident memory in bytes (`/proc/self/statm`), where the system says.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
