//! What the lowering produces: an AQL program, one packet list per queue (a plan lane), with the
//! barrier bits, barrier-AND dependencies, fence scopes and completion signals of one replay. No
//! addresses: the exec encodes it with real kernel objects, kernarg addresses and signal handles.

use std::fmt::Write as _;

use ostinato::{BufferId, KernelId, NodeId, Plan, SlotId};

pub use crate::abi::Scope;

/// One of the program's completion signals (per replay: reset to 1, decremented once by the one
/// packet that carries it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SignalId(pub u32);

/// What a packet does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketOp {
    /// Runs node `node`'s kernel ([`Dispatch`] `dispatches[node]`).
    Dispatch { node: NodeId },
    /// Waits until every signal in `deps` (at most five) is 0, blocking its queue meanwhile.
    BarrierAnd { deps: Vec<SignalId> },
}

/// One AQL packet of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub op: PacketOp,
    /// Launch only once every earlier packet of the queue completed.
    pub barrier: bool,
    pub acquire: Scope,
    pub release: Scope,
    pub completion: Option<SignalId>,
}

/// What a node's dispatch calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Callee {
    Kernel(KernelId),
    /// The built-in `ostinato_copy(dst, src, n_bytes)`.
    Copy,
    /// The built-in `ostinato_fill(dst, value, n_words)`.
    Fill,
}

/// One kernel argument's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgValue {
    /// The device address `offset` bytes into root allocation `root`.
    Pointer { root: BufferId, offset: u64 },
    /// A scalar's little-endian bits (its size is the kernel parameter's).
    Bits(u64),
    /// The value of a slot at the replay.
    Slot(SlotId),
}

/// A node as a kernel dispatch: callee, geometry and argument values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub node: NodeId,
    pub callee: Callee,
    pub dimensions: u16,
    pub workgroup_size: [u16; 3],
    /// In work-items.
    pub grid_size: [u32; 3],
    /// Dynamic group-segment (LDS) bytes the launch asks for.
    pub dynamic_group_bytes: u32,
    pub args: Vec<ArgValue>,
}

/// A plan lowered to AQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AqlProgram {
    /// One dispatch per node, by node index.
    pub dispatches: Vec<Dispatch>,
    /// One packet list per queue (queue `q` runs the plan's lane `q`).
    pub queues: Vec<Vec<Packet>>,
    /// Completion signals per replay.
    pub signals: u32,
    /// The replay's completion signal (the host waits for it).
    pub done: SignalId,
}

impl AqlProgram {
    /// Every packet, with its queue and index.
    pub fn packets(&self) -> impl Iterator<Item = (usize, usize, &Packet)> {
        self.queues.iter().enumerate().flat_map(|(q, ps)| ps.iter().enumerate().map(move |(i, p)| (q, i, p)))
    }

    /// Counts: (dispatches, barrier-AND packets, barrier bits set, acquire fences, release fences).
    pub fn counts(&self) -> (usize, usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0, 0);
        for (_, _, p) in self.packets() {
            match p.op {
                PacketOp::Dispatch { .. } => c.0 += 1,
                PacketOp::BarrierAnd { .. } => c.1 += 1,
            }
            c.2 += p.barrier as usize;
            c.3 += (p.acquire != Scope::None) as usize;
            c.4 += (p.release != Scope::None) as usize;
        }
        c
    }

    /// One line per packet, per queue: what golden tests pin.
    pub fn describe(&self, plan: &Plan) -> String {
        let g = plan.graph();
        let mut s = String::new();
        for (q, packets) in self.queues.iter().enumerate() {
            let _ = writeln!(s, "queue {q}:");
            for p in packets {
                let what = match &p.op {
                    PacketOp::Dispatch { node } => {
                        let d = &self.dispatches[node.index()];
                        let name = match d.callee {
                            Callee::Kernel(k) => g.kernel(k).name.clone(),
                            Callee::Copy => "ostinato_copy".into(),
                            Callee::Fill => "ostinato_fill".into(),
                        };
                        format!("dispatch n{} {name} grid {} wg {}", node, d.grid_size[0], d.workgroup_size[0])
                    }
                    PacketOp::BarrierAnd { deps } => {
                        let deps: Vec<String> = deps.iter().map(|d| format!("s{}", d.0)).collect();
                        format!("barrier-and [{}]", deps.join(" "))
                    }
                };
                let _ = write!(s, "  {what}");
                if p.barrier {
                    s.push_str(" barrier");
                }
                if p.acquire != Scope::None {
                    let _ = write!(s, " acquire={}", p.acquire.as_str());
                }
                if p.release != Scope::None {
                    let _ = write!(s, " release={}", p.release.as_str());
                }
                if let Some(c) = p.completion {
                    let _ = write!(s, " -> s{}", c.0);
                }
                s.push('\n');
            }
        }
        let _ = writeln!(s, "done s{}", self.done.0);
        s
    }
}
