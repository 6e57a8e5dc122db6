//! Ostinato core: record a kernel DAG with declared byte-range access, plan exactly the orderings the
//! data flow needs, and hand the plan to a backend. This crate knows no GPU.
//!
//! ```
//! use ostinato::{Access, Arg, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
//! let mut g = Graph::new();
//! let x = g.add_buffer("x", 4096).unwrap();
//! let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
//! let a = g.add_launch(k, Launch::linear(4, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(1024))], &[]).unwrap();
//! let b = g.add_launch(k, Launch::linear(4, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(1024))], &[]).unwrap();
//! let plan = Plan::compile(&g).unwrap();
//! assert_eq!(plan.edges().len(), 1);
//! assert_eq!((plan.edges()[0].from, plan.edges()[0].to), (a, b));
//! ```
#![deny(unsafe_code)]

pub mod backend;
pub mod builtins;
pub mod capped_read;
pub mod collective;
pub mod contract;
pub mod error;
pub mod file;
mod fingerprint;
pub mod frontier;
pub mod fusion;
pub mod graph;
pub mod kernel_ref;
pub mod lanes;
pub mod manifest;
mod named;
pub mod plan;
pub mod rng;
pub mod signature;
pub mod tiles;
pub mod trace;

pub use backend::{
    allocate_all, bind_all, bind_builtins, check_bindings, check_disjoint_roots, check_range, check_rebind, check_single_device, check_slot,
    for_each_init_piece, pieces, read_roots, write_inits, Backend, BufferBinding, Exec, MemoryExtent, PIECE,
};
pub use error::{BindError, ErrorKind, GraphError, PlanError, SlotError, UsageError};
pub use graph::{
    Access, AccessDecl, Arg, BufferDecl, BufferId, Graph, KernelId, KernelSig, Launch, Node, NodeId, NodeOp, ParamKind, ParamSig, RootAccess, Scalar,
    ScalarType, Slice, SlotDecl, SlotId,
};
pub use kernel_ref::{KernelRef, RefOption};
pub use lanes::Lanes;
pub use named::Named;
pub use plan::{direct_hazards, hazard_between, Edge, Hazards, Plan, PlanOptions};
pub use tiles::{ParamTile, TileMap, TileRange, TileRelation};
pub use trace::{EdgeKind, GapSummary, ReplaySummary, Span, Trace, TraceEdge, TraceError};
