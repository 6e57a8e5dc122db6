//! A stable fingerprint of a plan's shape: FNV-1a 64 over an explicit canonical encoding (independent of
//! Rust's `Hash` layout, pointer values and slot values), so it is equal across runs, builds and hosts.

use crate::graph::{Arg, Graph, Node, NodeOp, ParamKind, Slice};

struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

pub(crate) fn fingerprint(g: &Graph, max_lanes: usize) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.str("ostinato-plan-v2");
    h.u64(max_lanes as u64);
    h.u64(g.buffers().len() as u64);
    for b in g.buffers() {
        h.str(&b.name);
        h.u64(b.size);
        h.u64(b.root.0 as u64);
        h.u64(b.root_offset);
        h.u64(b.device as u64);
    }
    h.u64(g.kernels().len() as u64);
    for k in g.kernels() {
        h.str(&k.name);
        h.u64(k.params.len() as u64);
        for p in &k.params {
            h.str(&p.name);
            match p.kind {
                ParamKind::Buffer(m) => h.str(m.as_str()),
                ParamKind::Scalar(t) => h.str(t.as_str()),
            }
        }
    }
    h.u64(g.slots().len() as u64);
    for s in g.slots() {
        h.str(&s.name);
        h.str(s.ty.as_str());
    }
    h.u64(g.nodes().len() as u64);
    for n in g.nodes() {
        h.node(n);
    }
    h.0
}

impl Fnv {
    fn slice(&mut self, s: &Slice) {
        self.u64(s.buffer.0 as u64);
        self.u64(s.offset);
        self.u64(s.len);
    }

    fn arg(&mut self, a: &Arg) {
        match a {
            Arg::Buffer(s) => {
                self.u64(1);
                self.slice(s);
            }
            Arg::Whole(b) => {
                self.u64(2);
                self.u64(b.0 as u64);
            }
            Arg::Scalar(v) => {
                self.u64(3);
                self.str(v.ty.as_str());
                self.u64(v.bits);
            }
            Arg::Slot(s) => {
                self.u64(4);
                self.u64(s.0 as u64);
            }
        }
    }

    /// A node: its operation, its tile maps, the nodes it is explicitly after.
    fn node(&mut self, n: &Node) {
        match &n.op {
            NodeOp::Kernel { kernel, launch, args } => {
                self.u64(1);
                self.u64(kernel.0 as u64);
                for d in launch.grid.iter().chain(&launch.block) {
                    self.u64(*d as u64);
                }
                self.u64(launch.shared_bytes as u64);
                for a in args {
                    self.arg(a);
                }
            }
            NodeOp::Copy { src, dst } => {
                self.u64(2);
                self.slice(src);
                self.slice(dst);
            }
            NodeOp::Fill { dst, value } => {
                self.u64(3);
                self.slice(dst);
                self.u64(*value as u64);
            }
            NodeOp::Collective { op, dtype, send, recv } => {
                self.u64(4);
                self.str(op.as_str());
                self.str(dtype.as_str());
                self.u64(send.len() as u64);
                for s in send.iter().chain(recv) {
                    self.slice(s);
                }
            }
        }
        // Tile maps shape the plan's block dependencies; a node without any hashes as before they existed.
        if !n.tiles.is_empty() {
            self.u64(5);
            self.u64(n.tiles.len() as u64);
            for t in &n.tiles {
                self.u64(t.param as u64);
                self.u64(t.map.ranges().len() as u64);
                for r in t.map.ranges() {
                    for v in [r.base, r.stride[0], r.stride[1], r.stride[2], r.len, r.rows, r.pitch] {
                        self.u64(v);
                    }
                }
            }
        }
        let mut after: Vec<u32> = n.after.iter().map(|a| a.0).collect();
        after.sort_unstable();
        self.u64(after.len() as u64);
        for a in after {
            self.u64(a as u64);
        }
    }
}
