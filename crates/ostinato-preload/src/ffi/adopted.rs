//! The adopted graph on the real driver: the application's graph cloned (`cuGraphClone`), its edges
//! changed to the adoption's (`cuGraphRemoveDependencies_v2`, `cuGraphAddDependencies_v2`: a
//! programmatic edge is port 1, type 1, as a PDL capture records it), instantiated with the
//! application's flags beside the application's own executable graph; the replica a node param change
//! is adopted from ([`Replica`]); and what a revocation and a destroy do to them. Entry points are
//! resolved through the real `cuGetProcAddress` at the version of the signature declared here, never
//! through the wrappers.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_uint, c_void};
use std::ptr::null_mut;
use std::sync::OnceLock;

use super::procaddr;
use super::types::{CuResult, EdgeData, Handle, CUDA_SUCCESS};
use crate::adopt::{self, Adoption};
use crate::decide::Decision;
use crate::log::{AdoptionLog, Call};
use crate::model::{GraphModel, EDGE_PROGRAMMATIC};
use crate::state::{Adopted, Extents, Replica, State, Stream};

/// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD`: only `cuGraphInstantiateWithParams` takes it (with a stream).
const FLAG_UPLOAD: u64 = 2;
/// `CU_EVENT_DISABLE_TIMING`.
const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream's handle.
const STREAM_PER_THREAD: usize = 2;

type Deps = unsafe extern "C" fn(Handle, *const Handle, *const Handle, *const EdgeData, usize) -> CuResult;
/// A graph node's param setter (`cuGraphKernelNodeSetParams`, `cuGraphNodeSetParams`, …).
type SetNode = unsafe extern "C" fn(Handle, *const c_void) -> CuResult;

/// The real entry points (each `None` where the driver does not offer it).
struct Table {
    clone: Option<unsafe extern "C" fn(*mut Handle, Handle) -> CuResult>,
    find_in_clone: Option<unsafe extern "C" fn(*mut Handle, Handle, Handle) -> CuResult>,
    remove: Option<Deps>,
    add: Option<Deps>,
    instantiate: Option<unsafe extern "C" fn(*mut Handle, Handle, u64) -> CuResult>,
    upload: Option<unsafe extern "C" fn(Handle, Handle) -> CuResult>,
    exec_destroy: Option<unsafe extern "C" fn(Handle) -> CuResult>,
    graph_destroy: Option<unsafe extern "C" fn(Handle) -> CuResult>,
    event_create: Option<unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult>,
    event_record: Option<unsafe extern "C" fn(Handle, Handle) -> CuResult>,
    event_destroy: Option<unsafe extern "C" fn(Handle) -> CuResult>,
    stream_wait_event: Option<unsafe extern "C" fn(Handle, Handle, c_uint) -> CuResult>,
    kernel_set_v1: Option<SetNode>,
    kernel_set_v2: Option<SetNode>,
    node_set: Option<SetNode>,
    memset_set: Option<SetNode>,
    memcpy_set: Option<SetNode>,
}

macro_rules! entry {
    ($name:literal, $version:literal) => {{
        let raw = procaddr::real_entry($name, $version);
        // SAFETY: the driver's entry point `name` at `version` has the C signature of the field it
        // fills (cuda.h, cudaTypedefs.h of CUDA 13.0); a function pointer is pointer-sized.
        (raw != 0).then(|| unsafe { std::mem::transmute::<usize, _>(raw) })
    }};
}

static TABLE: OnceLock<Table> = OnceLock::new();

fn table() -> &'static Table {
    TABLE.get_or_init(|| Table {
        clone: entry!(c"cuGraphClone", 10000),
        find_in_clone: entry!(c"cuGraphNodeFindInClone", 10000),
        remove: entry!(c"cuGraphRemoveDependencies", 12030),
        add: entry!(c"cuGraphAddDependencies", 12030),
        instantiate: entry!(c"cuGraphInstantiateWithFlags", 11040),
        upload: entry!(c"cuGraphUpload", 11010),
        exec_destroy: entry!(c"cuGraphExecDestroy", 10000),
        graph_destroy: entry!(c"cuGraphDestroy", 10000),
        event_create: entry!(c"cuEventCreate", 2000),
        event_record: entry!(c"cuEventRecord", 2000),
        event_destroy: entry!(c"cuEventDestroy", 4000),
        stream_wait_event: entry!(c"cuStreamWaitEvent", 3020),
        // Below 12000 the v1 params struct, from 12000 v2 (as the executable graph's setters).
        kernel_set_v1: entry!(c"cuGraphKernelNodeSetParams", 10000),
        kernel_set_v2: entry!(c"cuGraphKernelNodeSetParams", 12000),
        node_set: entry!(c"cuGraphNodeSetParams", 12020),
        memset_set: entry!(c"cuGraphMemsetNodeSetParams", 10000),
        memcpy_set: entry!(c"cuGraphMemcpyNodeSetParams", 10000),
    })
}

fn h(v: u64) -> Handle {
    v as usize as Handle
}

fn call(op: &str, rc: CuResult) -> Result<(), String> {
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{op} returned CUresult {rc}"))
    }
}

fn need<F>(f: Option<F>, op: &str) -> Result<F, String> {
    f.ok_or_else(|| format!("the driver offers no {op}"))
}

/// A captured graph cloned, destroyed on drop unless kept.
struct Clone(Handle);

impl Drop for Clone {
    fn drop(&mut self) {
        if let (false, Some(f)) = (self.0.is_null(), table().graph_destroy) {
            // SAFETY: a graph this module cloned and no one else holds.
            let _ = unsafe { f(self.0) };
        }
    }
}

/// An adopted graph made: the graph and its executable graph, its nodes by the model's node index,
/// and its edges (from, to, programmatic) by node index.
pub(super) struct Built {
    pub graph: u64,
    pub exec: u64,
    nodes: Vec<u64>,
    edges: Vec<(usize, usize, bool)>,
}

impl Built {
    pub fn pair(&self) -> (u64, u64) {
        (self.graph, self.exec)
    }
}

/// A replica of clone `graph` (`nodes`: the application's node handles mapped to the clone's) whose
/// adopted graph is `built`, if any, keyed by `twins` (the clone's node of each model index).
fn replica_of(graph: u64, nodes: HashMap<u64, u64>, built: Option<&Built>, twins: &[u64]) -> Replica {
    let mut replica = Replica { graph, nodes, ..Replica::default() };
    if let Some(b) = built {
        replica.adopted_nodes = twins.iter().copied().zip(b.nodes.iter().copied()).collect();
        replica.edges = b.edges.iter().map(|&(from, to, programmatic)| (twins[from], twins[to], programmatic)).collect();
    }
    replica
}

/// Adopts `graph` (read back as `model`, decided `decision`) where adoption is on and it pays: the
/// log entry, and the adopted graph made. `known`: the model's adoption where the caller computed it
/// already (it is not computed again).
pub(super) fn adopt_graph(
    state: &State,
    graph: u64,
    model: &GraphModel,
    decision: &Decision,
    flags: u64,
    upload: Option<Handle>,
    known: Option<adopt::Adoption>,
) -> (AdoptionLog, Option<Built>) {
    if !state.adopting() {
        return (AdoptionLog::not("off", "adoption is off"), None);
    }
    if let Some(api) = super::mutate::unwrapped() {
        return (AdoptionLog::not("not_adopted", format!("{api} was handed out unwrapped: an adopted graph could miss a change")), None);
    }
    if !decision.adoptable() {
        return (AdoptionLog::not("not_adopted", decision.reason.clone().unwrap_or_default()), None);
    }
    let start = std::time::Instant::now();
    let adoption = match known.map_or_else(|| adopt::adopt(model, &adopt::default_policy(), state.orderings()), Ok) {
        Ok(a) => a,
        Err(why) => return (AdoptionLog::not("not_adopted", why), None),
    };
    let mut log = AdoptionLog {
        status: "adopted",
        why: None,
        programmatic: adoption.programmatic(),
        new_programmatic: adoption.new_programmatic(model),
        edges: adoption.edges.clone(),
        dropped: adoption.dropped.clone(),
        adopt_us: 0,
    };
    let built = if adoption.same_as_captured(model) {
        Err("the adopted graph's edges are the captured ones: nothing to gain".to_string())
    } else {
        super::driver::with_driver(|_| build(graph, model, &adoption, flags, upload))
            .unwrap_or_else(|| Err("the driver is not reachable".into()))
            .map(|(graph, exec, nodes)| Built { graph, exec, nodes, edges: adoption.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect() })
    };
    log.adopt_us = start.elapsed().as_micros() as u64;
    match built {
        Ok(built) => (log, Some(built)),
        Err(why) => {
            log.status = "not_adopted";
            log.why = Some(why);
            (log, None)
        }
    }
}

/// After `api` updated the application's executable graph `exec` in place from `graph` (the same
/// topology, new params): where `exec` runs adopted, reads `graph` back, adopts it again and puts the
/// new adopted graph in the old one's place (the old one destroyed: the driver frees it after its
/// launches in flight), with a replica of `graph` (node param changes after the update name `graph`'s
/// nodes). Returns whether `exec` still runs adopted; where not, the caller revokes.
pub(super) fn readopt(state: &State, exec: u64, graph: u64, api: &'static str) -> bool {
    let Some(flags) = state.adopted_flags(exec) else { return false };
    let Some((model, decision, read_us)) = super::driver::with_driver(|d| state.read(d, graph, flags)) else { return false };
    let (adoption, built) = adopt_graph(state, graph, &model, &decision, flags, None, None);
    let call = Call { api, graph, exec, result: CUDA_SUCCESS, read_us };
    let (kept, old) = state.update(&call, &model, &decision, &adoption, built.as_ref().map(Built::pair));
    if let Some(old) = old {
        destroy(&old);
    }
    if kept {
        keep_replica(state, exec, graph, &model, built.as_ref());
    }
    kept
}

/// Keeps a replica of `graph` (read back as `model`; `built`: the adopted graph made from it, if
/// any) for `exec`: `graph` cloned, the application's node handles mapped to the clone's. Without one
/// (a driver call failed) a node param change revokes the adoption.
pub(super) fn keep_replica(state: &State, exec: u64, graph: u64, model: &GraphModel, built: Option<&Built>) {
    let Some(Ok((clone, nodes))) = super::driver::with_driver(|_| clone_graph(graph, &model.handles)) else { return };
    let replica = replica_of(clone.0 as u64, model.handles.iter().copied().zip(nodes.iter().copied()).collect(), built, &nodes);
    std::mem::forget(clone);
    if let Some(old) = state.set_replica(exec, replica) {
        drop(Clone(h(old.graph)));
    }
}

/// Destroys a replica's graph.
pub(super) fn destroy_replica(replica: &Replica) {
    drop(Clone(h(replica.graph)));
}

/// Which param setter a node param change came through (the graph's setter of the same params).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Setter {
    KernelV1,
    KernelV2,
    Node,
    Memset,
    Memcpy,
}

/// After `api` changed node `node`'s params (`params`, of `setter`'s struct) in the application's
/// executable graph `exec`: the same change on the replica, which is read back and adopted again. The
/// same adopted edges: `apply` (the application's executable-graph setter, for the adopted executable
/// graph and its node) makes the change on the adopted graph in place; other edges: the adopted graph
/// is made again from the replica and put in the old one's place. Returns whether `exec` still runs
/// adopted; where not, the caller revokes.
pub(super) fn node_params(
    state: &State,
    exec: u64,
    node: u64,
    params: *const c_void,
    setter: Setter,
    api: &'static str,
    apply: &dyn Fn(Handle, Handle) -> CuResult,
) -> bool {
    let Some((flags, adopted_exec, replica)) = state.replica(exec) else { return false };
    let Some(&twin) = replica.nodes.get(&node) else { return false };
    let t = table();
    let set = match setter {
        Setter::KernelV1 => t.kernel_set_v1,
        Setter::KernelV2 => t.kernel_set_v2,
        Setter::Node => t.node_set,
        Setter::Memset => t.memset_set,
        Setter::Memcpy => t.memcpy_set,
    };
    let Some(set) = set else { return false };
    // SAFETY: a node of the replica (this module's graph); the application's params, of the struct
    // this setter takes (the one its executable-graph setter was given), read only.
    if super::driver::with_driver(|_| unsafe { set(h(twin), params) }) != Some(CUDA_SUCCESS) {
        return false;
    }
    let Some(read) = super::driver::with_driver(|d| state.read(d, replica.graph, flags)) else { return false };
    let (model, decision, read_us) = (&read.0, &read.1, read.2);
    if !decision.adoptable() || model.handles.len() != model.nodes.len() {
        return false;
    }
    let Ok(adoption) = adopt::adopt(model, &adopt::default_policy(), state.orderings()) else { return false };
    let edges: HashSet<(u64, u64, bool)> = adoption.edges.iter().map(|e| (model.handles[e.from], model.handles[e.to], e.programmatic)).collect();
    if edges == replica.edges {
        if let Some(&adopted_node) = replica.adopted_nodes.get(&twin) {
            if apply(h(adopted_exec), h(adopted_node)) == CUDA_SUCCESS {
                state.patched(exec, api, read_us);
                return true;
            }
        }
    }
    made_again(state, exec, &replica, flags, ReadBack { read: &read, known: Some(adoption) }, api, true)
}

/// A replica read back (model, decision, microseconds; the model's node handles the replica's) and
/// its adoption where it was computed already.
struct ReadBack<'a> {
    read: &'a (GraphModel, Decision, u64),
    known: Option<adopt::Adoption>,
}

/// The adopted graph of `exec` made again from its replica (`read`, read back) and put in place of the one it
/// runs (`active`), or adopted for the first time (not `active`), logged under `api`; the replica then
/// maps the new adopted graph. Returns whether a new adopted graph was kept.
fn made_again(state: &State, exec: u64, replica: &Replica, flags: u64, read: ReadBack<'_>, api: &'static str, active: bool) -> bool {
    let ReadBack { read: (model, decision, read_us), known } = read;
    let read_us = *read_us;
    let call = Call { api, graph: replica.graph, exec, result: CUDA_SUCCESS, read_us };
    let (log, built) = adopt_graph(state, replica.graph, model, decision, flags, None, known);
    let pair = built.as_ref().map(Built::pair);
    let (kept, old) = if active { state.update(&call, model, decision, &log, pair) } else { state.adopt_late(&call, model, decision, &log, pair) };
    if let Some(old) = old {
        destroy(&old);
    }
    if let (true, Some(built)) = (kept, built) {
        // The same clone: nothing to destroy.
        let _ = state.set_replica(exec, replica_of(replica.graph, replica.nodes.clone(), Some(&built), &model.handles));
    }
    kept
}

/// Adopts `exec` again from its replica with `extents` (the application's allocator's, finer than
/// the driver's segments; used for this read-back only): where it runs adopted, a new adopted graph
/// replaces the old one where it adopts (else the old one stays); where it was never adopted, it is
/// adopted now where it can be. Returns whether it runs adopted after, or `None` where it has no
/// replica (unknown, not adoptable, or changed in place since without the change made on one).
pub(super) fn readopt_with(state: &State, exec: u64, extents: &Extents) -> Option<bool> {
    let (flags, active, replica) = state.replica_any(exec)?;
    let read = super::driver::with_driver(|d| state.read_with(d, replica.graph, flags, extents))?;
    let kept = made_again(state, exec, &replica, flags, ReadBack { read: &read, known: None }, "ostinato_preload_readopt", active);
    Some(kept || (active && state.adopted_flags(exec).is_some()))
}

/// Clones `graph`; returns the clone (destroyed on drop) and the clone's node of each of `handles`.
fn clone_graph(graph: u64, handles: &[u64]) -> Result<(Clone, Vec<u64>), String> {
    let t = table();
    let mut cloned: Handle = null_mut();
    // SAFETY: an out-pointer to a local; `graph` is the application's graph.
    call("cuGraphClone", unsafe { need(t.clone, "cuGraphClone")?(&mut cloned, h(graph)) })?;
    let clone = Clone(cloned);
    let find = need(t.find_in_clone, "cuGraphNodeFindInClone")?;
    let mut nodes = Vec::with_capacity(handles.len());
    for &original in handles {
        let mut n: Handle = null_mut();
        // SAFETY: an out-pointer to a local; `original` a node of the graph `clone` was cloned from.
        call("cuGraphNodeFindInClone", unsafe { find(&mut n, h(original), clone.0) })?;
        nodes.push(n as u64);
    }
    Ok((clone, nodes))
}

/// Builds and instantiates the adopted graph of `graph` (read back as `model`, adopted as
/// `adoption`) with the application's instantiate `flags`; `upload`: the stream the application
/// asked the instantiate to upload on. Returns (adopted graph, its executable graph, its nodes by
/// the model's node index); on any failure nothing is left behind.
pub(super) fn build(graph: u64, model: &GraphModel, adoption: &Adoption, flags: u64, upload: Option<Handle>) -> Result<(u64, u64, Vec<u64>), String> {
    let t = table();
    if model.handles.len() != model.nodes.len() {
        return Err("the node handles were not read".into());
    }
    let (clone, found) = clone_graph(graph, &model.handles)?;
    let nodes: Vec<Handle> = found.iter().map(|&n| h(n)).collect();
    let data =
        |programmatic: bool| if programmatic { EdgeData { from_port: 1, to_port: 0, kind: EDGE_PROGRAMMATIC, reserved: [0; 5] } } else { EdgeData::default() };
    let captured: HashSet<(usize, usize, bool)> = model.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect();
    let adopted: HashSet<(usize, usize, bool)> = adoption.edges.iter().map(|e| (e.from, e.to, e.programmatic)).collect();
    let removed: Vec<(Handle, Handle, EdgeData)> = model
        .edges
        .iter()
        .filter(|e| !adopted.contains(&(e.from, e.to, e.programmatic)))
        .map(|e| (nodes[e.from], nodes[e.to], EdgeData { from_port: e.from_port, to_port: e.to_port, kind: e.kind, reserved: [0; 5] }))
        .collect();
    let added: Vec<(Handle, Handle, EdgeData)> = adoption
        .edges
        .iter()
        .filter(|e| !captured.contains(&(e.from, e.to, e.programmatic)))
        .map(|e| (nodes[e.from], nodes[e.to], data(e.programmatic)))
        .collect();
    rewire(need(t.remove, "cuGraphRemoveDependencies_v2")?, "cuGraphRemoveDependencies_v2", clone.0, &removed)?;
    rewire(need(t.add, "cuGraphAddDependencies_v2")?, "cuGraphAddDependencies_v2", clone.0, &added)?;
    let mut exec: Handle = null_mut();
    // SAFETY: an out-pointer to a local; `clone` is this module's graph.
    call("cuGraphInstantiateWithFlags", unsafe { need(t.instantiate, "cuGraphInstantiateWithFlags")?(&mut exec, clone.0, flags & !FLAG_UPLOAD) })?;
    if let (Some(stream), true) = (upload, flags & FLAG_UPLOAD != 0) {
        // SAFETY: the executable graph just made, on the application's upload stream.
        if let Err(e) = call("cuGraphUpload", unsafe { need(t.upload, "cuGraphUpload")?(exec, stream) }) {
            destroy_exec(exec as u64);
            return Err(e);
        }
    }
    let graph = clone.0;
    std::mem::forget(clone);
    Ok((graph as u64, exec as u64, found))
}

fn rewire(f: Deps, op: &str, graph: Handle, edges: &[(Handle, Handle, EdgeData)]) -> Result<(), String> {
    if edges.is_empty() {
        return Ok(());
    }
    let from: Vec<Handle> = edges.iter().map(|e| e.0).collect();
    let to: Vec<Handle> = edges.iter().map(|e| e.1).collect();
    let data: Vec<EdgeData> = edges.iter().map(|e| e.2).collect();
    // SAFETY: three arrays of `edges.len()` entries; nodes of `graph`.
    call(op, unsafe { f(graph, from.as_ptr(), to.as_ptr(), data.as_ptr(), edges.len()) })
}

fn destroy_exec(exec: u64) {
    if let Some(f) = table().exec_destroy {
        // SAFETY: an executable graph this module made; the driver frees it after any replay in flight.
        let _ = unsafe { f(h(exec)) };
    }
}

/// Destroys an adopted graph and its executable graph (the application destroyed its own).
pub(super) fn destroy(a: &Adopted) {
    destroy_exec(a.exec);
    drop(Clone(h(a.graph)));
}

fn stream_handle(s: Stream) -> Handle {
    if s.handle == 0 && s.per_thread {
        STREAM_PER_THREAD as Handle
    } else {
        h(s.handle)
    }
}

/// Makes `next` wait for everything queued on `last` so far (the adopted graph's last launch: launches
/// of one executable graph are ordered, so the application's own graph, launched after a revocation,
/// must follow the adopted one). Best effort: an event recorded on `last`, waited for on `next`.
pub(super) fn follow(last: Stream, next: Stream) {
    let t = table();
    let (Some(create), Some(record), Some(wait), Some(destroy)) = (t.event_create, t.event_record, t.stream_wait_event, t.event_destroy) else { return };
    let mut event: Handle = null_mut();
    // SAFETY: an out-pointer to a local.
    if unsafe { create(&mut event, EVENT_DISABLE_TIMING) } != CUDA_SUCCESS {
        return;
    }
    // SAFETY: the event just created; the application's streams, as it launched on them.
    unsafe {
        if record(event, stream_handle(last)) == CUDA_SUCCESS {
            let _ = wait(stream_handle(next), event, 0);
        }
        // The driver keeps the event until the wait is done.
        let _ = destroy(event);
    }
}
