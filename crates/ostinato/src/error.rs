//! Errors of recording and planning. Each names the node and param it is about.

use thiserror::Error;

/// The longest name (of a buffer, kernel, param, slot) in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// A recording call was refused; the graph is unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GraphError {
    /// [`crate::Graph::resolve_access`] on a param not declared `infer`.
    #[error("kernel `{kernel}` param `{param}` is not declared `infer`: its mode is not the code's to set")]
    NotInferred { kernel: String, param: String },
    #[error("a {what} needs a non-empty name")]
    EmptyName { what: &'static str },
    /// Names are identifiers: they become file names (`run --dump`), C and Python identifiers.
    #[error("{what} name {name:?} is not an identifier: up to {} ASCII letters, digits, `_`, `.` and `-`, starting with a letter or `_`", MAX_NAME_LEN)]
    BadName { what: &'static str, name: String },
    #[error("{what} `{name}` is declared twice")]
    DuplicateName { what: &'static str, name: String },
    #[error("buffer `{buffer}` has size 0")]
    EmptyBuffer { buffer: String },
    #[error("unknown buffer id {id}")]
    UnknownBuffer { id: u32 },
    #[error("view `{view}` ({offset}+{len}) lies outside buffer `{parent}` of {parent_size} bytes")]
    ViewOutOfRange { view: String, parent: String, offset: u64, len: u64, parent_size: u64 },
    #[error("node {node}: unknown kernel id {id}")]
    UnknownKernel { node: u32, id: u32 },
    #[error("node {node} ({kernel}): {got} args given but the signature has {expected} params")]
    ArgCount { node: u32, kernel: String, expected: usize, got: usize },
    #[error("node {node} ({kernel}): bad launch: {reason}")]
    BadLaunch { node: u32, kernel: String, reason: String },
    #[error("node {node}, param `{param}`: {reason}")]
    BadArg { node: u32, param: String, reason: String },
    #[error("node {node}, param `{param}`: empty extent of buffer `{buffer}` (length 0 declares no access)")]
    EmptySlice { node: u32, param: String, buffer: String },
    #[error("node {node}, param `{param}`: extent {offset}+{len} lies outside buffer `{buffer}` of {size} bytes")]
    SliceOutOfRange { node: u32, param: String, buffer: String, offset: u64, len: u64, size: u64 },
    #[error("node {node}, param `{param}`: slot `{slot}` is a {got} but the param is a {expected}")]
    SlotType { node: u32, param: String, slot: String, expected: &'static str, got: &'static str },
    #[error("node {node}: explicit edge names node {referenced}, which is not recorded")]
    UnknownNode { node: u32, referenced: u32 },
    #[error("node {node}: an explicit edge from a node to itself")]
    SelfEdge { node: u32 },
    #[error("node {node} ({what}): {detail}: a kernel runs on one device (copy between devices instead)")]
    MixedDevices { node: u32, what: String, detail: String },
    #[error("node {node} ({op}): {reason}")]
    Collective { node: u32, op: &'static str, reason: String },
    /// A written param of a launch overlaps another of its params, an aliasing its kernel does not declare.
    #[error(
        "node {node} ({kernel}): params `{first}` and `{second}` overlap on bytes [{lo}, {hi}) of `{buffer}` and one of them is written; the threads of one launch run in no order (declare the aliasing in the kernel's signature if its code orders them)"
    )]
    Aliasing { node: u32, kernel: String, first: String, second: String, buffer: String, lo: u64, hi: u64 },
    #[error("kernel `{kernel}`: an aliasing declaration names {reason}")]
    BadAlias { kernel: String, reason: String },
    /// A tile map that does not fit its param, its slice or its launch (`crate::tiles`).
    #[error("node {node}, param `{param}`: tile map: {reason}")]
    BadTile { node: u32, param: String, reason: String },
}

/// Planning failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The union of hazard order and explicit edges has a cycle; `cycle` lists its nodes in order.
    #[error("explicit edges make a cycle: {}", describe_cycle(.cycle))]
    Cycle { cycle: Vec<u32> },
    #[error("plan option: {0}")]
    BadOption(String),
    /// A buffer param declared `infer` whose mode was not read from the code yet: the runtime resolves
    /// it through the backends' analysis (`ostinato_runtime::contract`) before planning.
    #[error("kernel `{kernel}` param `{param}` is declared `infer`: its access mode must be read from the kernel's code before planning")]
    PendingAccess { kernel: String, param: String },
    /// The system would not give the planner the memory it asked for (within its budget).
    #[error("planning {nodes} nodes: the system refused {bytes} bytes of planner memory")]
    OutOfMemory { nodes: usize, bytes: u64 },
}

fn describe_cycle(c: &[u32]) -> String {
    let mut s: Vec<String> = c.iter().map(|n| format!("node {n}")).collect();
    if let Some(first) = c.first() {
        s.push(format!("node {first}"));
    }
    s.join(" -> ")
}

/// A slot patch was refused; the slot keeps its old value.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SlotError {
    #[error("unknown slot id {0}")]
    Unknown(u32),
    #[error("slot `{slot}` is a {ty} of {expected} bytes, got {got} bytes")]
    WrongSize { slot: String, ty: &'static str, expected: usize, got: usize },
    #[error("slot `{slot}` is a {expected}, got a {got}")]
    WrongType { slot: String, expected: &'static str, got: &'static str },
}

/// A kernel implementation does not fit the graph's signature.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BindError {
    #[error("kernel `{kernel}` has no implementation bound for backend `{backend}`")]
    Missing { kernel: String, backend: String },
    #[error("kernel `{kernel}`: implementation signature does not match the graph's: {reason}")]
    Signature { kernel: String, reason: String },
    #[error("buffer `{buffer}`: bound memory of {got} bytes, the graph declares {expected}")]
    BufferSize { buffer: String, expected: u64, got: u64 },
    #[error("buffer `{buffer}` is a view; bind its root buffer `{root}` instead")]
    BindView { buffer: String, root: String },
    #[error(
        "buffers `{a}` and `{b}` are bound to overlapping memory: the plan orders only what the graph says shares bytes, so their nodes would race; declare one a view of the other"
    )]
    SharedMemory { a: String, b: String },
}

/// What class of failure an error is. Every error the runtime returns has one; the shells map it —
/// never the message text — to a C status or a Python exception class, so rewording a message
/// changes nothing a program sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A recording call was refused (a bad slice, a wrong arg count, a duplicate name).
    Graph,
    /// A graph file could not be read or parsed.
    File,
    /// Planning failed (a cycle through explicit edges, a graph past the planner's budget).
    Plan,
    /// An argument out of its domain: an unknown name or id, a wrong type, a range outside its
    /// buffer, an unknown option, memory of the wrong length.
    Argument,
    /// The call is not allowed in the object's present state (a replay in flight, a faulted exec).
    State,
    /// A kernel could not be bound: no implementation, another signature, a compile error, a
    /// declaration its own code contradicts.
    Bind,
    /// The backend or device cannot run this plan as recorded (a launch past the device's limits, a
    /// buffer on a device the exec does not drive, a feature the device lacks).
    Unsupported,
    /// The backend, a runtime library it loads, or the device asked for is not there.
    BackendMissing,
    /// The driver or device failed at run time.
    Runtime,
    /// A kernel faulted or replays missed their deadline: the exec is faulted and refuses further use.
    Fault,
    /// A result differs from the host oracle.
    Mismatch,
    /// A file could not be read or written, or host memory could not be had.
    Io,
}

impl ErrorKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::Graph,
        ErrorKind::File,
        ErrorKind::Plan,
        ErrorKind::Argument,
        ErrorKind::State,
        ErrorKind::Bind,
        ErrorKind::Unsupported,
        ErrorKind::BackendMissing,
        ErrorKind::Runtime,
        ErrorKind::Fault,
        ErrorKind::Mismatch,
        ErrorKind::Io,
    ];

    /// A short lower-case name (`"bind"`, `"backend-missing"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Graph => "graph",
            ErrorKind::File => "file",
            ErrorKind::Plan => "plan",
            ErrorKind::Argument => "argument",
            ErrorKind::State => "state",
            ErrorKind::Bind => "bind",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::BackendMissing => "backend-missing",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Fault => "fault",
            ErrorKind::Mismatch => "mismatch",
            ErrorKind::Io => "io",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl GraphError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Graph
    }
}

impl PlanError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            PlanError::BadOption(_) | PlanError::PendingAccess { .. } => ErrorKind::Argument,
            PlanError::Cycle { .. } | PlanError::OutOfMemory { .. } => ErrorKind::Plan,
        }
    }
}

impl SlotError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Argument
    }
}

impl BindError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            BindError::Missing { .. } | BindError::Signature { .. } => ErrorKind::Bind,
            BindError::BufferSize { .. } | BindError::BindView { .. } | BindError::SharedMemory { .. } => ErrorKind::Argument,
        }
    }
}

/// A call on an exec named a buffer or a range the plan does not allow, or a plan the exec cannot drive.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UsageError {
    #[error("unknown buffer id {id}")]
    UnknownBuffer { id: u32 },
    #[error("range {offset}+{len} lies outside buffer `{buffer}` of {size} bytes")]
    OutOfRange { buffer: String, offset: u64, len: u64, size: u64 },
    #[error("buffer `{buffer}` is on device {device}: a {backend} exec drives one device (device 0 of the DAG)")]
    OtherDevice { buffer: String, device: u32, backend: String },
}

impl UsageError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            UsageError::UnknownBuffer { .. } | UsageError::OutOfRange { .. } => ErrorKind::Argument,
            UsageError::OtherDevice { .. } => ErrorKind::Unsupported,
        }
    }
}
