//! Reading a kernel's PTX for the kernel contract (docs/contract.md): what each buffer param's code
//! really does ([`access`]), what the kernel does before `griddepcontrol.wait` ([`prewait`], the
//! evidence behind every programmatic edge), and whether a kernel may run as a fused body ([`fused`]).
//!
//! The analyses share one reading of the text ([`parse`]), one table of what each instruction does to
//! memory ([`memory`]) and one address-provenance analysis ([`taint`]).
//!
//! The tile-map check ([`tiles`]) adds the address of each access as a form over the launch's
//! registers ([`affine`], [`expr`]), evaluated per node into polynomials ([`spec`], [`poly`]), with a
//! one-thread run that shows a violation ([`witness`]).

pub mod access;
pub mod affine;
pub mod expr;
pub mod fused;
pub mod memory;
pub mod parse;
pub mod poly;
pub mod prewait;
pub mod spec;
pub mod taint;
mod thread0;
pub mod tiles;
pub mod witness;

pub use access::{entry_access, EntryAccess};
pub use fused::{fused_body, handoff_body, FusedBody, HandoffBody};
pub use parse::{Entry, Instr, Item, ModuleInfo};
pub use prewait::{pre_wait, PreWait};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tiles_props;
#[cfg(test)]
mod tiles_tests;
