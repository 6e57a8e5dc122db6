//! Graphs built node by node with typed (full or programmatic) edges, and their executable form.

#![allow(unsafe_code)]

use cudarc::driver::sys;

use super::check;
use super::module::{Function, KernelArgs};
use super::require_driver;
use super::stream::Stream;
use crate::dims::Dims;
use crate::error::{CudaError, Result};

/// Node handles and their edge data, in the driver's form, for the `deps.len()` edges into (or out of)
/// a node; refused unless every edge has its programmatic flag (the driver reads both arrays to the
/// same length).
pub(super) fn driver_edges(op: &'static str, deps: &[GraphNode], programmatic: &[bool]) -> Result<(Vec<sys::CUgraphNode>, Vec<sys::CUgraphEdgeData>)> {
    if deps.len() != programmatic.len() {
        return Err(CudaError::Internal { op, reason: format!("{} dependency nodes but {} edge types", deps.len(), programmatic.len()) });
    }
    Ok((deps.iter().map(|n| n.0).collect(), programmatic.iter().map(|&p| edge_data(p)).collect()))
}

/// The data of one graph edge: full, or programmatic (PDL) from the producer's programmatic port.
fn edge_data(programmatic: bool) -> sys::CUgraphEdgeData {
    sys::CUgraphEdgeData {
        from_port: if programmatic { sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8 } else { 0 },
        to_port: 0,
        type_: if programmatic { sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8 } else { 0 },
        reserved: [0; 5],
    }
}

/// A CUDA graph under construction (or captured).
pub(crate) struct Graph {
    pub(super) g: sys::CUgraph,
}

// SAFETY: a graph may be used from any thread, one at a time (the driver's rule for graph objects);
// its owner (the exec, or a baseline) moves it between threads but never shares it.
unsafe impl Send for Graph {}

/// A node handle of a [`Graph`] (valid while the graph lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GraphNode(pub(super) sys::CUgraphNode);

// SAFETY: a node handle is an identifier the driver only reads; the exec that patches by it is used from
// one thread at a time.
unsafe impl Send for GraphNode {}

impl GraphNode {
    /// The driver's handle, as a number (what a profiler's callbacks name the node by).
    pub(crate) fn handle(self) -> usize {
        self.0 as usize
    }
}

impl Graph {
    pub(crate) fn new() -> Result<Graph> {
        let mut g = std::ptr::null_mut();
        // SAFETY: creates an empty graph.
        check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut g, 0) })?;
        Ok(Graph { g })
    }

    fn kernel_params(f: &Function, d: Dims, args: &mut KernelArgs) -> sys::CUDA_KERNEL_NODE_PARAMS {
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: f.f,
            gridDimX: d.grid[0],
            gridDimY: d.grid[1],
            gridDimZ: d.grid[2],
            blockDimX: d.block[0],
            blockDimY: d.block[1],
            blockDimZ: d.block[2],
            sharedMemBytes: d.shared,
            kernelParams: args.as_driver(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }

    /// Adds a kernel node with no dependencies (edges are added with [`Graph::add_edges`]).
    pub(crate) fn add_kernel(&mut self, f: &Function, d: Dims, args: &mut KernelArgs) -> Result<GraphNode> {
        let p = Self::kernel_params(f, d, args);
        let mut n = std::ptr::null_mut();
        // SAFETY: the driver copies the params (and the arg values they point to) during the call.
        check("cuGraphAddKernelNode_v2", unsafe { sys::cuGraphAddKernelNode_v2(&mut n, self.g, std::ptr::null(), 0, &p) })?;
        Ok(GraphNode(n))
    }

    /// Adds a kernel node together with its in-edges `deps[i]` (programmatic where `programmatic[i]`).
    pub(crate) fn add_kernel_after(&mut self, f: &Function, d: Dims, args: &mut KernelArgs, deps: &[GraphNode], programmatic: &[bool]) -> Result<GraphNode> {
        require_driver("cuGraphAddNode_v2", 12030)?;
        let k = Self::kernel_params(f, d, args);
        // SAFETY: the node-params union is plain-old-data; zeroed is a valid starting value.
        let mut p: sys::CUgraphNodeParams = unsafe { std::mem::zeroed() };
        p.type_ = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL;
        p.__bindgen_anon_1.kernel = sys::CUDA_KERNEL_NODE_PARAMS_v3 {
            func: k.func,
            gridDimX: k.gridDimX,
            gridDimY: k.gridDimY,
            gridDimZ: k.gridDimZ,
            blockDimX: k.blockDimX,
            blockDimY: k.blockDimY,
            blockDimZ: k.blockDimZ,
            sharedMemBytes: k.sharedMemBytes,
            kernelParams: k.kernelParams,
            extra: k.extra,
            kern: k.kern,
            ctx: k.ctx,
        };
        let (raw, data) = driver_edges("cuGraphAddNode_v2", deps, programmatic)?;
        let mut n = std::ptr::null_mut();
        // SAFETY: both dependency arrays hold `raw.len()` entries and outlive the call, the nodes belong to
        // this graph; the driver copies the params (and the arg values they point to) during the call.
        check("cuGraphAddNode_v2", unsafe { sys::cuGraphAddNode_v2(&mut n, self.g, raw.as_ptr(), data.as_ptr(), raw.len(), &mut p) })?;
        Ok(GraphNode(n))
    }

    /// Adds a child-graph node running a copy of `child` (a captured library call), after `deps`
    /// (full edges).
    pub(crate) fn add_child(&mut self, child: &Graph, deps: &[GraphNode]) -> Result<GraphNode> {
        let raw: Vec<sys::CUgraphNode> = deps.iter().map(|n| n.0).collect();
        let mut n = std::ptr::null_mut();
        // SAFETY: `raw` holds nodes of this graph and outlives the call; the driver clones `child`.
        check("cuGraphAddChildGraphNode", unsafe { sys::cuGraphAddChildGraphNode(&mut n, self.g, raw.as_ptr(), raw.len(), child.g) })?;
        Ok(GraphNode(n))
    }

    /// Adds edges `from[i] -> to[i]`; `programmatic[i]` makes an edge a programmatic (PDL) dependency
    /// from the producer's programmatic port (needs driver 12.3+).
    pub(crate) fn add_edges(&mut self, from: &[GraphNode], to: &[GraphNode], programmatic: &[bool]) -> Result<()> {
        if from.is_empty() {
            return Ok(());
        }
        require_driver("cuGraphAddDependencies_v2", 12030)?;
        let op = "cuGraphAddDependencies_v2";
        let (f, data) = driver_edges(op, from, programmatic)?;
        if to.len() != from.len() {
            return Err(CudaError::Internal { op, reason: format!("{} edge sources but {} targets", from.len(), to.len()) });
        }
        let t: Vec<sys::CUgraphNode> = to.iter().map(|n| n.0).collect();
        // SAFETY: the three arrays have equal length and outlive the call; nodes belong to this graph.
        check(op, unsafe { sys::cuGraphAddDependencies_v2(self.g, f.as_ptr(), t.as_ptr(), data.as_ptr(), f.len()) })
    }

    /// An owned copy of a graph another part of the program made (work it captured itself): `raw` is
    /// the handle a [`crate::CapturedWork`] holds, whose maker vouched for it.
    pub(crate) fn clone_of(raw: u64) -> Result<Graph> {
        let mut g = std::ptr::null_mut();
        // SAFETY: `raw` is a live `CUgraph` no other thread uses meanwhile (`CapturedWork::from_raw`'s
        // contract); the driver writes a new graph we own.
        check("cuGraphClone", unsafe { sys::cuGraphClone(&mut g, raw as sys::CUgraph) })?;
        Ok(Graph { g })
    }

    /// The type of every node, in the driver's order, as the driver's number (a driver newer than
    /// these bindings may report a type they do not name).
    pub(crate) fn node_types(&self) -> Result<Vec<u32>> {
        let mut n = 0usize;
        // SAFETY: with a null array the driver only writes the count.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(self.g, std::ptr::null_mut(), &mut n) })?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut nodes = vec![std::ptr::null_mut(); n];
        // SAFETY: an array of `n` entries, as the count call reported; the driver fills at most `n`.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(self.g, nodes.as_mut_ptr(), &mut n) })?;
        nodes.truncate(n);
        nodes
            .into_iter()
            .map(|node| {
                let mut t = 0u32;
                // SAFETY: a node of this graph, just listed; the driver writes its type, a 32-bit enum
                // value, into a u32 (never read as the bindings' enum, which may not name it).
                check("cuGraphNodeGetType", unsafe { sys::cuGraphNodeGetType(node, (&mut t as *mut u32).cast()) }).map(|_| t)
            })
            .collect()
    }

    pub(crate) fn instantiate(&self) -> Result<GraphExec> {
        let mut e = std::ptr::null_mut();
        // SAFETY: instantiates a complete graph.
        check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut e, self.g, 0) })?;
        Ok(GraphExec { e })
    }

    /// Writes the driver's verbose DOT description of the graph (nodes with their launch params) to
    /// `path`, then one comment line per edge with its type and ports (which the driver's DOT omits):
    /// `// edge 0x<from handle> -> 0x<to handle> type=<n> from_port=<n> to_port=<n>`.
    pub(crate) fn write_dot(&self, path: &std::path::Path) -> Result<()> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| CudaError::Usage { op: "cuGraphDebugDotPrint", reason: format!("path {} contains a NUL byte", path.display()) })?;
        let flags = sys::CUgraphDebugDot_flags::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE as u32;
        // SAFETY: a complete graph of ours and a NUL-terminated path that outlives the call.
        check("cuGraphDebugDotPrint", unsafe { sys::cuGraphDebugDotPrint(self.g, c.as_ptr(), flags) }).map_err(|e| e.at(path.display().to_string()))?;
        let mut text = String::new();
        for (from, to, d) in self.edges()? {
            text.push_str(&format!(
                "// edge {:#018X} -> {:#018X} type={} from_port={} to_port={}\n",
                from as usize, to as usize, d.type_, d.from_port, d.to_port
            ));
        }
        let io = |e: std::io::Error| CudaError::Io { path: path.display().to_string(), message: e.to_string() };
        let mut f = std::fs::OpenOptions::new().append(true).open(path).map_err(io)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(io)
    }

    /// Every edge as `(from, to, programmatic)`: exactly the two kinds of edge data we submit, a full
    /// edge (all zero) or a programmatic dependency from the producer's programmatic port. Any other
    /// edge data is an error, not a guess.
    pub(crate) fn typed_edges(&self) -> Result<Vec<(GraphNode, GraphNode, bool)>> {
        let same = |a: &sys::CUgraphEdgeData, b: &sys::CUgraphEdgeData| (a.type_, a.from_port, a.to_port) == (b.type_, b.from_port, b.to_port);
        let (full, programmatic) = (edge_data(false), edge_data(true));
        self.edges()?
            .into_iter()
            .map(|(f, t, d)| match (same(&d, &full), same(&d, &programmatic)) {
                (true, _) => Ok((GraphNode(f), GraphNode(t), false)),
                (_, true) => Ok((GraphNode(f), GraphNode(t), true)),
                _ => Err(CudaError::Internal {
                    op: "cuGraphGetEdges_v2",
                    reason: format!("an edge holds type {} from port {} to port {}, which Ostinato never submits", d.type_, d.from_port, d.to_port),
                }),
            })
            .collect()
    }

    /// Every edge with its data (type and ports).
    fn edges(&self) -> Result<Vec<(sys::CUgraphNode, sys::CUgraphNode, sys::CUgraphEdgeData)>> {
        require_driver("cuGraphGetEdges_v2", 12030)?;
        let mut n = 0usize;
        // SAFETY: with null arrays the driver only writes the count.
        check("cuGraphGetEdges_v2", unsafe { sys::cuGraphGetEdges_v2(self.g, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), &mut n) })?;
        if n == 0 {
            // An edgeless graph (independent roots only): the driver refuses the second call with
            // empty arrays, so there is nothing to ask for.
            return Ok(Vec::new());
        }
        let mut from = vec![std::ptr::null_mut(); n];
        let mut to = vec![std::ptr::null_mut(); n];
        let mut data = vec![sys::CUgraphEdgeData { from_port: 0, to_port: 0, type_: 0, reserved: [0; 5] }; n];
        // SAFETY: three arrays of `n` entries, as the count call reported; the driver fills at most `n`.
        check("cuGraphGetEdges_v2", unsafe { sys::cuGraphGetEdges_v2(self.g, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut n) })?;
        Ok((0..n.min(from.len())).map(|i| (from[i], to[i], data[i])).collect())
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: destroys our own graph once.
        let _ = unsafe { sys::cuGraphDestroy(self.g) };
    }
}

/// An instantiated, uploaded graph.
pub(crate) struct GraphExec {
    e: sys::CUgraphExec,
}

// SAFETY: a graph exec may be used from any thread of its context, one thread at a time (the driver does
// not synchronize it); it moves to the launch thread whole and is used only there.
unsafe impl Send for GraphExec {}

impl GraphExec {
    pub(crate) fn upload(&self, s: &Stream) -> Result<()> {
        // SAFETY: valid exec and stream.
        check("cuGraphUpload", unsafe { sys::cuGraphUpload(self.e, s.s) })
    }
    #[inline]
    pub(crate) fn launch(&self, s: &Stream) -> Result<()> {
        // SAFETY: valid exec and stream.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.e, s.s) })
    }
    /// Replaces a kernel node's params for future launches (launches already enqueued keep theirs).
    pub(crate) fn set_kernel_params(&self, node: GraphNode, f: &Function, d: Dims, args: &mut KernelArgs) -> Result<()> {
        let p = Graph::kernel_params(f, d, args);
        // SAFETY: node belongs to the graph this exec came from (which the caller keeps alive); the
        // driver copies the params during the call.
        check("cuGraphExecKernelNodeSetParams_v2", unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.e, node.0, &p) })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: destroys our own exec once.
        let _ = unsafe { sys::cuGraphExecDestroy(self.e) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_arrays_reach_the_driver_only_at_equal_lengths_with_the_right_edge_types() {
        let nodes = [GraphNode(std::ptr::null_mut()), GraphNode(std::ptr::null_mut())];
        let err = driver_edges("cuGraphAddNode_v2", &nodes, &[true]).unwrap_err().to_string();
        assert!(err.contains("cuGraphAddNode_v2") && err.contains("2 dependency nodes but 1 edge types"), "{err}");
        let (raw, data) = driver_edges("cuGraphAddNode_v2", &nodes, &[false, true]).unwrap();
        assert_eq!(raw.len(), 2);
        assert_eq!((data[0].type_, data[0].from_port), (0, 0), "a full edge is the default type from the default port");
        assert_eq!(data[1].type_, sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8);
        assert_eq!(data[1].from_port, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8);
    }
}
