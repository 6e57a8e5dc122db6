//! Recording a kernel DAG: buffers, kernel signatures, slots and nodes with declared access.
//!
//! Every `add_*` call validates its input completely before anything is stored, so an error leaves the
//! graph exactly as it was (nothing half-recorded). Errors name the node (by index and kernel) and the
//! param they are about.

use crate::error::GraphError;
use crate::tiles::{ParamTile, TileMap};

pub use crate::signature::{Access, AccessDecl, KernelSig, ParamKind, ParamSig, ScalarType};

pub use crate::error::MAX_NAME_LEN;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}
id_type!(
    /// A logical buffer (or a view of one) in a [`Graph`].
    BufferId
);
id_type!(
    /// A kernel signature in a [`Graph`].
    KernelId
);
id_type!(
    /// A named, typed, patchable scalar.
    SlotId
);
id_type!(
    /// A node, numbered in recording order from 0.
    NodeId
);

/// A name is an identifier: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `_`, `.` and `-`, starting
/// with a letter or `_` (so it is a safe file name, and a C or Python identifier up to `.`/`-`).
pub fn check_name(what: &'static str, name: &str) -> Result<(), GraphError> {
    if name.is_empty() {
        return Err(GraphError::EmptyName { what });
    }
    let first_ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if name.len() > MAX_NAME_LEN || !first_ok || !rest_ok {
        return Err(GraphError::BadName { what, name: name.chars().take(MAX_NAME_LEN + 8).collect() });
    }
    Ok(())
}

/// A logical buffer. A view shares the allocation of its `root` buffer at `root_offset`; hazards are
/// computed on the root allocation, so views of one allocation order correctly against each other.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferDecl {
    pub name: String,
    pub size: u64,
    pub root: BufferId,
    pub root_offset: u64,
    /// The device (of the DAG's devices, 0 first) that holds the allocation; a view's is its root's.
    pub device: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlotDecl {
    pub name: String,
    pub ty: ScalarType,
    pub initial: Scalar,
}

/// A scalar value: its type and little-endian bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scalar {
    pub ty: ScalarType,
    pub bits: u64,
}

impl Scalar {
    pub fn u32(v: u32) -> Self {
        Scalar { ty: ScalarType::U32, bits: v as u64 }
    }
    pub fn i32(v: i32) -> Self {
        Scalar { ty: ScalarType::I32, bits: v as u32 as u64 }
    }
    pub fn f32(v: f32) -> Self {
        Scalar { ty: ScalarType::F32, bits: v.to_bits() as u64 }
    }
    pub fn u64(v: u64) -> Self {
        Scalar { ty: ScalarType::U64, bits: v }
    }
    pub fn i64(v: i64) -> Self {
        Scalar { ty: ScalarType::I64, bits: v as u64 }
    }
    pub fn f64(v: f64) -> Self {
        Scalar { ty: ScalarType::F64, bits: v.to_bits() }
    }
    /// The value's little-endian bytes; the first `ty.size()` are the value as the kernel receives it.
    pub fn le_bytes(&self) -> [u8; 8] {
        self.bits.to_le_bytes()
    }
    /// Copies the value's `ty.size()` bytes into `out` (which must be exactly that long).
    pub fn write_to(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.le_bytes()[..self.ty.size()]);
    }
    /// Builds a scalar from exactly `ty.size()` little-endian bytes.
    pub fn from_bytes(ty: ScalarType, bytes: &[u8]) -> Option<Self> {
        if bytes.len() != ty.size() {
            return None;
        }
        let mut b = [0u8; 8];
        b[..bytes.len()].copy_from_slice(bytes);
        Some(Scalar { ty, bits: u64::from_le_bytes(b) })
    }
    pub fn as_u32(&self) -> u32 {
        self.bits as u32
    }
    pub fn as_f32(&self) -> f32 {
        f32::from_bits(self.bits as u32)
    }
}

/// A byte extent of a buffer: the declared reach of one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    pub buffer: BufferId,
    pub offset: u64,
    pub len: u64,
}

/// A kernel argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// A buffer extent; must match a buffer param.
    Buffer(Slice),
    /// The whole of a buffer; resolved to a [`Slice`] when the node is recorded.
    Whole(BufferId),
    /// A fixed value; must match a scalar param's type.
    Scalar(Scalar),
    /// A patchable slot; its type must match the scalar param's.
    Slot(SlotId),
}

/// Launch geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl Launch {
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        Launch { grid, block, shared_bytes: 0 }
    }
    pub fn linear(blocks: u32, threads: u32) -> Self {
        Launch::new([blocks, 1, 1], [threads, 1, 1])
    }
    pub fn shared(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }
}

/// Which collective a [`NodeOp::Collective`] runs (`crate::collective` has its semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveOp {
    AllReduceSum,
    AllGather,
    ReduceScatterSum,
}

impl CollectiveOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveOp::AllReduceSum => "all_reduce",
            CollectiveOp::AllGather => "all_gather",
            CollectiveOp::ReduceScatterSum => "reduce_scatter",
        }
    }
    pub fn parse(s: &str) -> Option<CollectiveOp> {
        Some(match s {
            "all_reduce" => CollectiveOp::AllReduceSum,
            "all_gather" => CollectiveOp::AllGather,
            "reduce_scatter" => CollectiveOp::ReduceScatterSum,
            _ => return None,
        })
    }
    /// The receive length for a send of `send` bytes over `ranks` ranks, or `None` where a send of
    /// that length cannot be split (reduce-scatter).
    pub fn recv_len(self, send: u64, ranks: u64) -> Option<u64> {
        match self {
            CollectiveOp::AllReduceSum => Some(send),
            CollectiveOp::AllGather => send.checked_mul(ranks),
            CollectiveOp::ReduceScatterSum => (send % ranks == 0).then(|| send / ranks),
        }
    }
}

/// What a node does. Buffer args are resolved: every `Arg::Whole` became an `Arg::Buffer`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeOp {
    Kernel {
        kernel: KernelId,
        launch: Launch,
        args: Vec<Arg>,
    },
    /// Copies `src` to `dst` (equal lengths, not overlapping on one allocation).
    Copy {
        src: Slice,
        dst: Slice,
    },
    /// Writes the u32 `value` repeatedly over `dst` (4-byte aligned offset and length).
    Fill {
        dst: Slice,
        value: u32,
    },
    /// A collective over the DAG's devices, one rank per device: rank `r` sends `send[r]` and
    /// receives into `recv[r]`, both on its device (`crate::collective`).
    Collective {
        op: CollectiveOp,
        dtype: ScalarType,
        send: Vec<Slice>,
        recv: Vec<Slice>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: NodeOp,
    /// Explicit orderings: this node runs after each of these.
    pub after: Vec<NodeId>,
    /// Per-block access maps of a launch's buffer params, ascending by param (`crate::tiles`); a param
    /// without one is touched by every block anywhere in its slice.
    pub tiles: Vec<ParamTile>,
}

/// One declared access of a node on a root allocation, in bytes of that allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootAccess {
    pub root: BufferId,
    pub start: u64,
    pub end: u64,
    pub access: Access,
    /// Index of the param (kernels) or 0 = src / 1 = dst (copies), 0 (fills).
    pub param: usize,
}

/// The recorded program: buffers, kernels, slots and nodes in recording order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Graph {
    pub(crate) buffers: Vec<BufferDecl>,
    pub(crate) kernels: Vec<KernelSig>,
    pub(crate) slots: Vec<SlotDecl>,
    pub(crate) nodes: Vec<Node>,
}

impl Graph {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same buffers, kernels and slots (same ids) without any node: the start of a graph that
    /// records the same program another way (a backend's rewrite of its nodes).
    pub fn without_nodes(&self) -> Graph {
        Graph { buffers: self.buffers.clone(), kernels: self.kernels.clone(), slots: self.slots.clone(), nodes: Vec::new() }
    }
    pub fn buffers(&self) -> &[BufferDecl] {
        &self.buffers
    }
    pub fn kernels(&self) -> &[KernelSig] {
        &self.kernels
    }
    pub fn slots(&self) -> &[SlotDecl] {
        &self.slots
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn buffer(&self, id: BufferId) -> &BufferDecl {
        &self.buffers[id.index()]
    }
    pub fn kernel(&self, id: KernelId) -> &KernelSig {
        &self.kernels[id.index()]
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }
    pub fn buffer_by_name(&self, name: &str) -> Option<BufferId> {
        self.buffers.iter().position(|b| b.name == name).map(|i| BufferId(i as u32))
    }
    pub fn kernel_by_name(&self, name: &str) -> Option<KernelId> {
        self.kernels.iter().position(|k| k.name == name).map(|i| KernelId(i as u32))
    }
    pub fn slot_by_name(&self, name: &str) -> Option<SlotId> {
        self.slots.iter().position(|s| s.name == name).map(|i| SlotId(i as u32))
    }

    /// A short human name for a node: `node 3 (mix)`.
    pub fn describe_node(&self, id: NodeId) -> String {
        match self.nodes.get(id.index()).map(|n| &n.op) {
            Some(NodeOp::Kernel { kernel, .. }) => format!("node {} ({})", id, self.kernels[kernel.index()].name),
            Some(NodeOp::Copy { .. }) => format!("node {} (copy)", id),
            Some(NodeOp::Fill { .. }) => format!("node {} (fill)", id),
            Some(NodeOp::Collective { op, send, .. }) => format!("node {} ({} over {} ranks)", id, op.as_str(), send.len()),
            None => format!("node {} (unknown)", id),
        }
    }

    /// Declares a buffer (its own allocation) of `size` bytes on device 0.
    pub fn add_buffer(&mut self, name: impl Into<String>, size: u64) -> Result<BufferId, GraphError> {
        self.add_buffer_on(name, size, 0)
    }

    /// Declares a buffer of `size` bytes on `device` (an index into the devices the DAG runs on: 0 for
    /// a one-device DAG). A kernel runs on the device of its buffers; a copy between devices is a peer
    /// copy; a collective spans one buffer pair per device.
    pub fn add_buffer_on(&mut self, name: impl Into<String>, size: u64, device: u32) -> Result<BufferId, GraphError> {
        let name = name.into();
        self.check_new_buffer_name(&name)?;
        if size == 0 {
            return Err(GraphError::EmptyBuffer { buffer: name });
        }
        let id = BufferId(self.buffers.len() as u32);
        self.buffers.push(BufferDecl { name, size, root: id, root_offset: 0, device });
        Ok(id)
    }

    /// Declares `name` as a view of `len` bytes at `offset` in `parent`. Views alias their parent's
    /// allocation; hazards between them are computed on that allocation.
    pub fn add_view(&mut self, name: impl Into<String>, parent: BufferId, offset: u64, len: u64) -> Result<BufferId, GraphError> {
        let name = name.into();
        self.check_new_buffer_name(&name)?;
        let p = self.buffers.get(parent.index()).ok_or(GraphError::UnknownBuffer { id: parent.0 })?;
        if len == 0 {
            return Err(GraphError::EmptyBuffer { buffer: name });
        }
        if offset.checked_add(len).is_none_or(|end| end > p.size) {
            return Err(GraphError::ViewOutOfRange { view: name, parent: p.name.clone(), offset, len, parent_size: p.size });
        }
        let (root, root_offset, device) = (p.root, p.root_offset + offset, p.device);
        let id = BufferId(self.buffers.len() as u32);
        self.buffers.push(BufferDecl { name, size: len, root, root_offset, device });
        Ok(id)
    }

    fn check_new_buffer_name(&self, name: &str) -> Result<(), GraphError> {
        check_name("buffer", name)?;
        if self.buffer_by_name(name).is_some() {
            return Err(GraphError::DuplicateName { what: "buffer", name: name.to_string() });
        }
        Ok(())
    }

    /// Declares a kernel signature.
    pub fn add_kernel(&mut self, sig: KernelSig) -> Result<KernelId, GraphError> {
        check_name("kernel", &sig.name)?;
        if self.kernel_by_name(&sig.name).is_some() {
            return Err(GraphError::DuplicateName { what: "kernel", name: sig.name });
        }
        for (i, p) in sig.params.iter().enumerate() {
            check_name("kernel param", &p.name)?;
            if sig.params[..i].iter().any(|q| q.name == p.name) {
                return Err(GraphError::DuplicateName { what: "kernel param", name: format!("{}.{}", sig.name, p.name) });
            }
        }
        let id = KernelId(self.kernels.len() as u32);
        self.kernels.push(sig);
        Ok(id)
    }

    /// Declares that kernel `kernel`'s params `a` and `b` may alias in one launch (see
    /// [`KernelSig::aliasing`]); launches recorded before keep the check they passed.
    pub fn declare_aliasing(&mut self, kernel: KernelId, a: &str, b: &str) -> Result<(), GraphError> {
        let sig = self.kernels.get(kernel.index()).ok_or(GraphError::UnknownKernel { node: self.nodes.len() as u32, id: kernel.0 })?;
        self.kernels[kernel.index()] = sig.clone().may_alias(a, b)?;
        Ok(())
    }

    /// Settles the mode of `kernel`'s param `param`, declared `infer`, from its code: the param becomes
    /// [`AccessDecl::Inferred`] with `access`. Any other param is refused (a declared mode is never
    /// overwritten).
    pub fn resolve_access(&mut self, kernel: KernelId, param: usize, access: Access) -> Result<(), GraphError> {
        let sig = self.kernels.get_mut(kernel.index()).ok_or(GraphError::UnknownKernel { node: u32::MAX, id: kernel.0 })?;
        let name = sig.name.clone();
        let p = sig.params.get_mut(param).ok_or_else(|| GraphError::NotInferred { kernel: name.clone(), param: format!("#{param}") })?;
        if p.decl != AccessDecl::Infer || !matches!(p.kind, ParamKind::Buffer(_)) {
            return Err(GraphError::NotInferred { kernel: name, param: p.name.clone() });
        }
        p.kind = ParamKind::Buffer(access);
        p.decl = AccessDecl::Inferred;
        Ok(())
    }

    /// Declares a patchable scalar slot with its initial value.
    pub fn add_slot(&mut self, name: impl Into<String>, initial: Scalar) -> Result<SlotId, GraphError> {
        let name = name.into();
        check_name("slot", &name)?;
        if self.slot_by_name(&name).is_some() {
            return Err(GraphError::DuplicateName { what: "slot", name });
        }
        let id = SlotId(self.slots.len() as u32);
        self.slots.push(SlotDecl { name, ty: initial.ty, initial });
        Ok(id)
    }

    /// The whole extent of a buffer.
    pub fn whole(&self, buffer: BufferId) -> Slice {
        let size = self.buffers.get(buffer.index()).map_or(0, |b| b.size);
        Slice { buffer, offset: 0, len: size }
    }

    fn next_node(&self) -> NodeId {
        NodeId(self.nodes.len() as u32)
    }

    pub(crate) fn check_slice(&self, node: NodeId, what: &str, s: Slice) -> Result<(), GraphError> {
        let b = self.buffers.get(s.buffer.index()).ok_or_else(|| GraphError::BadArg {
            node: node.0,
            param: what.to_string(),
            reason: format!("unknown buffer id {}", s.buffer),
        })?;
        if s.len == 0 {
            return Err(GraphError::EmptySlice { node: node.0, param: what.to_string(), buffer: b.name.clone() });
        }
        if s.offset.checked_add(s.len).is_none_or(|end| end > b.size) {
            return Err(GraphError::SliceOutOfRange {
                node: node.0,
                param: what.to_string(),
                buffer: b.name.clone(),
                offset: s.offset,
                len: s.len,
                size: b.size,
            });
        }
        Ok(())
    }

    pub(crate) fn check_after(&self, node: NodeId, after: &[NodeId]) -> Result<(), GraphError> {
        for a in after {
            if a.index() >= self.nodes.len() {
                return Err(GraphError::UnknownNode { node: node.0, referenced: a.0 });
            }
        }
        Ok(())
    }

    /// Records a kernel launch. `args` are in signature order, one per param.
    pub fn add_launch(&mut self, kernel: KernelId, launch: Launch, args: &[Arg], after: &[NodeId]) -> Result<NodeId, GraphError> {
        self.add_launch_tiled(kernel, launch, args, &[], after)
    }

    /// Records a kernel launch whose buffer params named in `tiles` carry per-block access maps: block
    /// `(x, y, z)` touches only the bytes its map gives, relative to the param's slice
    /// (`crate::tiles`). Every map must lie inside its slice for every block of the grid, on a buffer
    /// param, one per param.
    pub fn add_launch_tiled(
        &mut self,
        kernel: KernelId,
        launch: Launch,
        args: &[Arg],
        tiles: &[(&str, TileMap)],
        after: &[NodeId],
    ) -> Result<NodeId, GraphError> {
        let node = self.next_node();
        let sig = self.kernels.get(kernel.index()).ok_or(GraphError::UnknownKernel { node: node.0, id: kernel.0 })?;
        let kname = sig.name.clone();
        if args.len() != sig.params.len() {
            return Err(GraphError::ArgCount { node: node.0, kernel: kname, expected: sig.params.len(), got: args.len() });
        }
        if launch.grid.contains(&0) || launch.block.contains(&0) {
            return Err(GraphError::BadLaunch { node: node.0, kernel: kname, reason: "grid and block dimensions must be >= 1".into() });
        }
        let mut resolved = Vec::with_capacity(args.len());
        for (p, a) in sig.params.iter().zip(args) {
            let bad = |reason: String| GraphError::BadArg { node: node.0, param: format!("{kname}.{}", p.name), reason };
            let r = match (&p.kind, *a) {
                (ParamKind::Buffer(_), Arg::Buffer(s)) => {
                    self.check_slice(node, &format!("{kname}.{}", p.name), s)?;
                    Arg::Buffer(s)
                }
                (ParamKind::Buffer(_), Arg::Whole(b)) => {
                    let s = self.whole(b);
                    self.check_slice(node, &format!("{kname}.{}", p.name), Slice { buffer: b, ..s })?;
                    Arg::Buffer(s)
                }
                (ParamKind::Buffer(m), _) => return Err(bad(format!("is a {} buffer param but got a scalar or slot", m.as_str()))),
                (ParamKind::Scalar(ty), Arg::Scalar(v)) => {
                    if v.ty != *ty {
                        return Err(bad(format!("expects a {} but got a {}", ty.as_str(), v.ty.as_str())));
                    }
                    Arg::Scalar(v)
                }
                (ParamKind::Scalar(ty), Arg::Slot(s)) => {
                    let slot = self.slots.get(s.index()).ok_or_else(|| bad(format!("unknown slot id {s}")))?;
                    if slot.ty != *ty {
                        return Err(GraphError::SlotType {
                            node: node.0,
                            param: format!("{kname}.{}", p.name),
                            slot: slot.name.clone(),
                            expected: ty.as_str(),
                            got: slot.ty.as_str(),
                        });
                    }
                    Arg::Slot(s)
                }
                (ParamKind::Scalar(ty), _) => return Err(bad(format!("is a {} scalar param but got a buffer", ty.as_str()))),
            };
            resolved.push(r);
        }
        let mut devices =
            resolved.iter().filter_map(|a| if let Arg::Buffer(s) = a { Some(s.buffer) } else { None }).map(|b| (b, self.buffers[b.index()].device));
        if let Some((first, d)) = devices.next() {
            if let Some((other, e)) = devices.find(|(_, e)| *e != d) {
                return Err(GraphError::MixedDevices {
                    node: node.0,
                    what: kname,
                    detail: format!("`{}` is on device {d} and `{}` on device {e}", self.buffers[first.index()].name, self.buffers[other.index()].name),
                });
            }
        }
        self.check_aliasing(node, sig, &resolved)?;
        let tiles = self.check_tiles(node, sig, &launch, &resolved, tiles)?;
        self.check_after(node, after)?;
        self.nodes.push(Node { op: NodeOp::Kernel { kernel, launch, args: resolved }, after: after.to_vec(), tiles });
        Ok(node)
    }

    /// The launch's tile maps, checked against its signature, grid and slices, ascending by param.
    fn check_tiles(&self, node: NodeId, sig: &KernelSig, launch: &Launch, args: &[Arg], tiles: &[(&str, TileMap)]) -> Result<Vec<ParamTile>, GraphError> {
        let mut out: Vec<ParamTile> = Vec::new();
        out.try_reserve_exact(tiles.len()).map_err(|_| GraphError::BadTile { node: node.0, param: sig.name.clone(), reason: "out of memory".into() })?;
        for (name, map) in tiles {
            let bad = |reason: String| GraphError::BadTile { node: node.0, param: format!("{}.{name}", sig.name), reason };
            let i = sig.param_index(name).ok_or_else(|| bad("no such param".into()))?;
            let Some(Arg::Buffer(s)) = args.get(i) else { return Err(bad("a tile map belongs to a buffer param".into())) };
            if out.iter().any(|t| t.param == i) {
                return Err(bad("two tile maps for one param".into()));
            }
            let blocks = crate::tiles::block_count(launch.grid);
            if blocks > crate::tiles::MAX_TILE_BLOCKS {
                return Err(bad(format!("the launch has {blocks} blocks; tile maps are analysed for at most {}", crate::tiles::MAX_TILE_BLOCKS)));
            }
            map.check_within(launch.grid, s.len).map_err(bad)?;
            out.push(ParamTile { param: i, map: map.clone() });
        }
        out.sort_by_key(|t| t.param);
        Ok(out)
    }

    /// The tile map declared on param `param` of node `node`, if any.
    pub fn tile_map(&self, node: NodeId, param: usize) -> Option<&TileMap> {
        let tiles = &self.nodes.get(node.index())?.tiles;
        tiles.binary_search_by_key(&param, |t| t.param).ok().map(|i| &tiles[i].map)
    }

    /// Refuses a launch in which a written param overlaps another of its params (on one root
    /// allocation) where the signature declares no such aliasing: the launch's threads run in no
    /// order, so its result would depend on the backend.
    fn check_aliasing(&self, node: NodeId, sig: &KernelSig, args: &[Arg]) -> Result<(), GraphError> {
        let buffers: Vec<(usize, Access, Slice)> = sig
            .params
            .iter()
            .zip(args)
            .enumerate()
            .filter_map(|(i, (p, a))| match (&p.kind, a) {
                (ParamKind::Buffer(m), Arg::Buffer(s)) => Some((i, *m, *s)),
                _ => None,
            })
            .collect();
        for (x, &(i, mi, si)) in buffers.iter().enumerate() {
            for &(j, mj, sj) in &buffers[x + 1..] {
                if !(mi.writes() || mj.writes()) || sig.aliasing.contains(&(i, j)) {
                    continue;
                }
                let ((ri, a0, a1), (rj, b0, b1)) = (self.root_extent(si), self.root_extent(sj));
                if ri == rj && a0 < b1 && b0 < a1 {
                    return Err(GraphError::Aliasing {
                        node: node.0,
                        kernel: sig.name.clone(),
                        first: sig.params[i].name.clone(),
                        second: sig.params[j].name.clone(),
                        buffer: self.buffers[ri.index()].name.clone(),
                        lo: a0.max(b0),
                        hi: a1.min(b1),
                    });
                }
            }
        }
        Ok(())
    }

    /// Records a copy of `src` into `dst`.
    pub fn add_copy(&mut self, src: Slice, dst: Slice, after: &[NodeId]) -> Result<NodeId, GraphError> {
        let node = self.next_node();
        self.check_slice(node, "copy.src", src)?;
        self.check_slice(node, "copy.dst", dst)?;
        if src.len != dst.len {
            return Err(GraphError::BadArg { node: node.0, param: "copy".into(), reason: format!("src is {} bytes but dst is {}", src.len, dst.len) });
        }
        let (rs, rd) = (self.root_extent(src), self.root_extent(dst));
        if rs.0 == rd.0 && rs.1 < rd.2 && rd.1 < rs.2 {
            return Err(GraphError::BadArg { node: node.0, param: "copy".into(), reason: "src and dst overlap on one allocation".into() });
        }
        self.check_after(node, after)?;
        self.nodes.push(Node { op: NodeOp::Copy { src, dst }, after: after.to_vec(), tiles: Vec::new() });
        Ok(node)
    }

    /// Records a fill of `dst` with the repeated u32 `value`.
    pub fn add_fill(&mut self, dst: Slice, value: u32, after: &[NodeId]) -> Result<NodeId, GraphError> {
        let node = self.next_node();
        self.check_slice(node, "fill.dst", dst)?;
        if dst.offset % 4 != 0 || dst.len % 4 != 0 {
            return Err(GraphError::BadArg {
                node: node.0,
                param: "fill.dst".into(),
                reason: format!("offset {} and length {} must be multiples of 4", dst.offset, dst.len),
            });
        }
        self.check_after(node, after)?;
        self.nodes.push(Node { op: NodeOp::Fill { dst, value }, after: after.to_vec(), tiles: Vec::new() });
        Ok(node)
    }

    /// Adds an explicit ordering `before` → `after` between two recorded nodes, in either recording
    /// direction. Cycles are reported by [`crate::Plan::compile`].
    pub fn add_edge(&mut self, before: NodeId, after: NodeId) -> Result<(), GraphError> {
        let n = self.nodes.len();
        if before.index() >= n {
            return Err(GraphError::UnknownNode { node: after.0, referenced: before.0 });
        }
        if after.index() >= n {
            return Err(GraphError::UnknownNode { node: before.0, referenced: after.0 });
        }
        if before == after {
            return Err(GraphError::SelfEdge { node: after.0 });
        }
        let list = &mut self.nodes[after.index()].after;
        if !list.contains(&before) {
            list.push(before);
        }
        Ok(())
    }

    /// (root, start, end) of a slice on its root allocation.
    pub fn root_extent(&self, s: Slice) -> (BufferId, u64, u64) {
        let b = &self.buffers[s.buffer.index()];
        let start = b.root_offset + s.offset;
        (b.root, start, start + s.len)
    }

    /// Every declared access of a node, on root allocations.
    pub fn accesses(&self, id: NodeId) -> Vec<RootAccess> {
        let mut out = Vec::new();
        self.for_each_access(id, |a| out.push(a));
        out
    }

    /// Per buffer: whether some node writes it, marked on root buffers (a write through a view marks
    /// its root).
    pub fn written_roots(&self) -> Vec<bool> {
        let mut w = vec![false; self.buffers.len()];
        for n in 0..self.nodes.len() {
            self.for_each_access(NodeId(n as u32), |a| {
                if a.access.writes() {
                    w[a.root.index()] = true;
                }
            });
        }
        w
    }

    /// Calls `f` for every declared access of a node (no allocation).
    pub fn for_each_access(&self, id: NodeId, mut f: impl FnMut(RootAccess)) {
        let mut push = |s: Slice, access: Access, param: usize| {
            let (root, start, end) = self.root_extent(s);
            f(RootAccess { root, start, end, access, param })
        };
        match &self.nodes[id.index()].op {
            NodeOp::Kernel { kernel, args, .. } => {
                let sig = &self.kernels[kernel.index()];
                for (i, (p, a)) in sig.params.iter().zip(args).enumerate() {
                    if let (ParamKind::Buffer(m), Arg::Buffer(s)) = (&p.kind, a) {
                        push(*s, *m, i);
                    }
                }
            }
            NodeOp::Copy { src, dst } => {
                push(*src, Access::Read, 0);
                push(*dst, Access::Write, 1);
            }
            NodeOp::Fill { dst, .. } => push(*dst, Access::Write, 0),
            NodeOp::Collective { send, recv, .. } => {
                for (r, s) in send.iter().enumerate() {
                    push(*s, Access::Read, r);
                }
                for (r, s) in recv.iter().enumerate() {
                    push(*s, Access::Write, send.len() + r);
                }
            }
        }
    }

    /// The name of param `param` of a node, for messages.
    pub fn param_name(&self, id: NodeId, param: usize) -> String {
        match &self.nodes[id.index()].op {
            NodeOp::Kernel { kernel, .. } => {
                let sig = &self.kernels[kernel.index()];
                sig.params.get(param).map_or_else(|| format!("#{param}"), |p| p.name.clone())
            }
            NodeOp::Copy { .. } => (if param == 0 { "src" } else { "dst" }).to_string(),
            NodeOp::Fill { .. } => "dst".to_string(),
            NodeOp::Collective { send, .. } if param < send.len() => format!("send[{param}]"),
            NodeOp::Collective { send, .. } => format!("recv[{}]", param - send.len()),
        }
    }
}
