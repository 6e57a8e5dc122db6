//! Reading a graph back into a [`GraphModel`]: the nodes and edges, and for each kernel node its
//! launch, its params (the layout from the code where the image is known, so the driver is never
//! probed past the last param), the device pointers in them and what its code does to each. The
//! driver is behind the [`Driver`] trait (the FFI layer implements it over the real entry points;
//! tests over a table), so this logic runs without a GPU.

use std::collections::HashMap;
use std::sync::Arc;

use crate::code::{self, CodeStatus};
use crate::error::ReadError;
use crate::model::{Edge, GraphModel, KernelNode, MemcpyNode, MemsetNode, Node, NodeBody, Param};
use crate::scan::Scanner;
use crate::store::{Handle, Held, Image};

/// The most nodes, edges and params per kernel read back (bounds on the work and memory).
pub const MAX_NODES: usize = 1 << 16;
pub const MAX_EDGES: usize = 1 << 20;
pub const MAX_PARAMS: usize = 1024;
/// The most bytes of one param (CUDA's param bank holds 32,764).
pub const MAX_PARAM_BYTES: usize = 32_768;

/// An edge as the driver returns it: node handles and the edge data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEdge {
    pub from: u64,
    pub to: u64,
    pub from_port: u8,
    pub to_port: u8,
    pub kind: u8,
}

/// A kernel node's params as the driver returns them (`CUDA_KERNEL_NODE_PARAMS_v2`): handles and
/// the addresses of the param pointer array and of `extra`, kept opaque here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawKernel {
    pub func: u64,
    pub kern: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub kernel_params: u64,
    pub extra: u64,
}

/// The driver calls the read-back makes.
pub trait Driver {
    /// The current device's architecture (`90`).
    fn device_arch(&self) -> Result<u32, ReadError>;
    fn nodes(&self, graph: u64) -> Result<Vec<u64>, ReadError>;
    fn edges(&self, graph: u64) -> Result<Vec<RawEdge>, ReadError>;
    /// `CUgraphNodeType`.
    fn node_type(&self, node: u64) -> Result<u32, ReadError>;
    fn kernel(&self, node: u64) -> Result<RawKernel, ReadError>;
    fn memset(&self, node: u64) -> Result<MemsetNode, ReadError>;
    fn memcpy(&self, node: u64) -> Result<MemcpyNode, ReadError>;
    /// The function of a `CUkernel` in the current context.
    fn kernel_function(&self, kern: u64) -> Result<u64, ReadError>;
    fn func_name(&self, func: u64) -> Result<String, ReadError>;
    fn func_module(&self, func: u64) -> Result<u64, ReadError>;
    fn kernel_library(&self, kern: u64) -> Result<u64, ReadError>;
    /// (offset, size) of param `index`.
    fn param_info(&self, func: u64, index: usize) -> Result<(usize, usize), ReadError>;
    /// The `size` bytes of param `index` (at bank offset `offset`) of a kernel node.
    fn param_bytes(&self, kernel: &RawKernel, index: usize, offset: usize, size: usize) -> Result<Vec<u8>, ReadError>;
    /// The allocation segment (base, size) holding `address`, if it is a device address.
    fn address_range(&self, address: u64) -> Option<(u64, u64)>;
}

/// Analyses an entry of an image on an architecture, given which params hold pointers
/// ([`code::analyse`], cached by the caller).
pub type Analyse<'a> = dyn Fn(&Arc<Image>, &str, u32, &[bool]) -> CodeStatus + 'a;

/// Where the read-back finds images, how it analyses code, and the extents known finer than the
/// driver's allocation segments.
pub struct Code<'a> {
    pub image: &'a dyn Fn(Handle) -> Option<Held>,
    pub analyse: &'a Analyse<'a>,
    /// The extent (base, size) holding an address, where the caller knows one (the application's
    /// allocator's); else the driver's segment is asked.
    pub extent: &'a dyn Fn(u64) -> Option<(u64, u64)>,
}

/// Reads `graph` (instantiated with `flags`) back.
pub fn read_graph(driver: &dyn Driver, code: &Code<'_>, graph: u64, flags: u64) -> GraphModel {
    let mut model = GraphModel { flags, arch: driver.device_arch().ok(), ..GraphModel::default() };
    if let Err(e) = read_structure(driver, code, graph, &mut model) {
        model.error = Some(e.to_string());
    }
    model
}

/// Reads the nodes and edges into `model` (what was read stays on an error).
fn read_structure(driver: &dyn Driver, code: &Code<'_>, graph: u64, model: &mut GraphModel) -> Result<(), ReadError> {
    let handles = driver.nodes(graph)?;
    if handles.len() > MAX_NODES {
        return Err(ReadError::Bound { what: "graph nodes", count: handles.len(), limit: MAX_NODES });
    }
    let index: HashMap<u64, usize> = handles.iter().enumerate().map(|(i, &h)| (h, i)).collect();
    let mut lookup = |a: u64| (code.extent)(a).or_else(|| driver.address_range(a));
    let mut reader = Reader { driver, code, arch: model.arch, scanner: Scanner::new(&mut lookup) };
    model.nodes = handles.iter().enumerate().map(|(i, &h)| Node { index: i, body: reader.node(h) }).collect();
    model.handles = handles;
    let raw = driver.edges(graph)?;
    if raw.len() > MAX_EDGES {
        return Err(ReadError::Bound { what: "graph edges", count: raw.len(), limit: MAX_EDGES });
    }
    for e in raw {
        let at = |h: u64| {
            index.get(&h).copied().ok_or_else(|| ReadError::Invalid { op: "cuGraphGetEdges", reason: format!("an edge names node {h:#x}, not in the graph") })
        };
        model.edges.push(Edge::new(at(e.from)?, at(e.to)?, e.from_port, e.to_port, e.kind));
    }
    Ok(())
}

/// The state of one graph's read-back.
struct Reader<'a, 'b> {
    driver: &'a dyn Driver,
    code: &'a Code<'a>,
    arch: Option<u32>,
    scanner: Scanner<'b>,
}

impl Reader<'_, '_> {
    fn node(&mut self, node: u64) -> NodeBody {
        let body = self.driver.node_type(node).and_then(|t| match t {
            0 => self.driver.kernel(node).map(|raw| NodeBody::Kernel(self.kernel(&raw))),
            1 => self.driver.memcpy(node).map(NodeBody::Memcpy),
            2 => self.driver.memset(node).map(NodeBody::Memset),
            code => Ok(NodeBody::Other { code, name: crate::model::node_type_name(code) }),
        });
        body.unwrap_or_else(|e| NodeBody::Unreadable { error: e.to_string() })
    }

    fn kernel(&mut self, raw: &RawKernel) -> KernelNode {
        let mut node = KernelNode {
            name: None,
            grid: raw.grid,
            block: raw.block,
            shared_bytes: raw.shared_bytes,
            code: CodeStatus::NotAnalysed { why: String::new() },
            params: Vec::new(),
            params_error: None,
        };
        let func = match (raw.func, raw.kern) {
            (0, 0) => return not_analysed(node, "the node names no function"),
            (0, kern) => match self.driver.kernel_function(kern) {
                Ok(f) => f,
                Err(e) => return not_analysed(node, &e.to_string()),
            },
            (f, _) => f,
        };
        node.name = self.driver.func_name(func).ok();
        let image = self.image(raw, func);
        let count = match (&image, &node.name, self.arch) {
            (Ok(img), Some(name), Some(arch)) => code::param_count(img, name, arch),
            _ => None,
        };
        if let Err(e) = self.params(raw, func, count, &mut node.params) {
            node.params_error = Some(e.to_string());
        }
        node.code = self.analyse(&node, image);
        if let CodeStatus::Analysed { access, .. } = &node.code {
            for (p, a) in node.params.iter_mut().zip(access) {
                p.access = *a;
            }
        }
        node
    }

    /// The image the function was loaded from: through its `CUkernel`'s library, else its module.
    fn image(&self, raw: &RawKernel, func: u64) -> Result<Arc<Image>, String> {
        let via_library = (raw.kern != 0).then(|| self.driver.kernel_library(raw.kern).ok()).flatten().and_then(|l| (self.code.image)(Handle::Library(l)));
        let held = via_library.or_else(|| self.driver.func_module(func).ok().and_then(|m| (self.code.image)(Handle::Module(m))));
        match held {
            Some(Held::Kept(image)) => Ok(image),
            Some(Held::NotKept(why)) => Err(why),
            None => Err("its module's image was not seen loaded (loaded from a file, or before the interposer)".into()),
        }
    }

    /// Reads each param's layout, bytes and pointers into `out`; `count` is the code's param count
    /// (unknown: the driver is asked until it answers `CUDA_ERROR_INVALID_VALUE`).
    fn params(&mut self, raw: &RawKernel, func: u64, count: Option<usize>, out: &mut Vec<Param>) -> Result<(), ReadError> {
        let limit = count.unwrap_or(MAX_PARAMS);
        if limit > MAX_PARAMS {
            return Err(ReadError::Bound { what: "kernel params", count: limit, limit: MAX_PARAMS });
        }
        for index in 0..limit {
            let (offset, size) = match self.driver.param_info(func, index) {
                Ok(info) => info,
                Err(e) if count.is_none() && e.is_invalid_value() => return Ok(()),
                Err(e) => return Err(e),
            };
            if size > MAX_PARAM_BYTES {
                return Err(ReadError::Bound { what: "param bytes", count: size, limit: MAX_PARAM_BYTES });
            }
            let bytes = self.driver.param_bytes(raw, index, offset, size)?;
            let pointers = self.scanner.pointers(offset, &bytes).ok_or(ReadError::Bound {
                what: "addresses asked",
                count: crate::scan::MAX_LOOKUPS,
                limit: crate::scan::MAX_LOOKUPS,
            })?;
            out.push(Param { index, offset, size, access: None, pointers });
        }
        if count.is_none() {
            return Err(ReadError::Bound { what: "kernel params", count: MAX_PARAMS + 1, limit: MAX_PARAMS });
        }
        Ok(())
    }

    fn analyse(&self, node: &KernelNode, image: Result<Arc<Image>, String>) -> CodeStatus {
        let why = match (image, &node.name, self.arch, &node.params_error) {
            (_, _, _, Some(e)) => format!("the params could not be read: {e}"),
            (Err(why), ..) => why,
            (_, None, ..) => "the driver gave no function name".into(),
            (_, _, None, _) => "the device's architecture could not be read".into(),
            (Ok(image), Some(name), Some(arch), None) => {
                let pointer: Vec<bool> = node.params.iter().map(|p| !p.pointers.is_empty()).collect();
                return (self.code.analyse)(&image, name, arch, &pointer);
            }
        };
        CodeStatus::NotAnalysed { why }
    }
}

fn not_analysed(mut node: KernelNode, why: &str) -> KernelNode {
    node.code = CodeStatus::NotAnalysed { why: why.to_string() };
    node
}

#[cfg(test)]
#[path = "readback_tests.rs"]
mod tests;
