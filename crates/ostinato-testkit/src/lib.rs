//! Ostinato's shared test kit, used as a dev-dependency by the backends' and shells' tests: random
//! order-sensitive programs and their serial oracle ([`random_graphs`]), a counting allocator for the
//! zero-allocation tests ([`counting_alloc`]), and how a device test says why it skips ([`skip`]).

pub mod counting_alloc;
pub mod random_graphs;
mod skip;

pub use skip::skip;
