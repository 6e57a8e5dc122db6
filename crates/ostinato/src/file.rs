//! Declarative graph files (TOML). Every error names the file, the line of the offending entry and the
//! offending name; nothing is guessed (a buffer param without a declared access, an unknown arg, a
//! missing arg, a value out of its type's range are all errors).
//!
//! ```toml
//! [[buffer]]
//! name = "a"
//! size = 4096            # bytes
//! init = "iota"          # zero | iota | const:V | random:SEED | f32:V | randf:SEED:SCALE | randbf16:SEED:SCALE
//! [[kernel]]
//! name = "mix"
//! params = [{ name = "out", access = "read_write" }, { name = "n", scalar = "u32" }]
//! alias = []            # pairs of params one launch may bind to overlapping bytes (default: none)
//! host = "builtin:mix"   # one implementation per backend, by backend name
//! cuda = { source = "kernels/mix.cu", entry = "mix", pdl = true }   # options go to the backend
//! [[node]]
//! kernel = "mix"
//! grid = [1, 1, 1]
//! block = [256, 1, 1]
//! args = { out = { buffer = "a", offset = 0, len = 1024 }, n = 256 }
//! ```
//!
//! A buffer param or a node's buffer arg may carry a tile map (`crate::tiles`): which bytes of the
//! slice each block touches, `tile = { base = 0, stride = [x, y, z], len = L, rows = R, pitch = P }`
//! (`base`, `rows`, `pitch` optional; `stride` 1 to 3 numbers, the rest 0), or a list of such ranges.
//! On a kernel's param it applies to every node of the kernel whose arg gives none; an arg's
//! `tile = "none"` drops it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::graph::{Access, Arg, BufferId, Graph, KernelSig, Launch, NodeId, ParamKind, Scalar, ScalarType, Slice};
use crate::kernel_ref::{KernelRef, RefOption};
use crate::tiles::{TileMap, TileRange};

/// A graph-file error: `path:line: message`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct FileError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// How a buffer is initialised before the first replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BufferInit {
    Zero,
    /// u32 element index: bytes [4i, 4i+4) hold i.
    Iota,
    /// Every u32 element holds the value.
    Const(u32),
    /// xorshift64* u32 stream from the seed.
    Random(u64),
    /// Every f32 element holds the value.
    ConstF32(f32),
    /// f32 elements uniform in [-scale, scale) from the seed.
    RandomF32 {
        seed: u64,
        scale: f32,
    },
    /// bf16 elements (two per 4 bytes, low half first) uniform in [-scale, scale) from the seed, each
    /// the f32 draw of `RandomF32` rounded to nearest even.
    RandomBf16 {
        seed: u64,
        scale: f32,
    },
}

impl BufferInit {
    pub fn parse(s: &str) -> Option<BufferInit> {
        match s {
            "zero" => return Some(BufferInit::Zero),
            "iota" => return Some(BufferInit::Iota),
            _ => {}
        }
        let (kind, v) = s.split_once(':')?;
        match kind {
            "const" => parse_u32(v).map(BufferInit::Const),
            "random" => v.parse().ok().map(BufferInit::Random),
            "f32" => v.parse().ok().map(BufferInit::ConstF32),
            "randf" => {
                let (seed, scale) = v.split_once(':')?;
                Some(BufferInit::RandomF32 { seed: seed.parse().ok()?, scale: scale.parse().ok()? })
            }
            "randbf16" => {
                let (seed, scale) = v.split_once(':')?;
                Some(BufferInit::RandomBf16 { seed: seed.parse().ok()?, scale: scale.parse().ok()? })
            }
            _ => None,
        }
    }

    /// Fills `out` (the buffer's bytes). A trailing partial element gets the element's low bytes.
    pub fn fill(&self, out: &mut [u8]) {
        self.stream().fill_next(out);
    }

    /// The buffer's bytes as a stream, to fill a large buffer in pieces with no full copy.
    pub fn stream(&self) -> InitStream {
        let rng = match self {
            BufferInit::Random(seed) | BufferInit::RandomF32 { seed, .. } | BufferInit::RandomBf16 { seed, .. } => seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            _ => 0,
        };
        InitStream { init: *self, element: 0, rng }
    }
}

/// A buffer's initial bytes, piece after piece: [`InitStream::fill_next`] continues where the last
/// piece ended, so pieces of any multiple of 4 bytes give the bytes [`BufferInit::fill`] gives.
#[derive(Clone, Debug)]
pub struct InitStream {
    init: BufferInit,
    element: u64,
    rng: u64,
}

impl InitStream {
    /// A uniform f32 in [-scale, scale).
    fn next_uniform(&mut self, scale: f32) -> f32 {
        ((self.next_random() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0).mul_add(scale, 0.0)
    }

    fn next_random(&mut self) -> u32 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    /// Fills `out` with the next `out.len()` bytes (a trailing partial element ends the stream's
    /// whole elements: give pieces of multiples of 4 bytes but the last).
    pub fn fill_next(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(4) {
            let v: u32 = match self.init {
                BufferInit::Zero => 0,
                BufferInit::Iota => self.element as u32,
                BufferInit::Const(c) => c,
                BufferInit::ConstF32(f) => f.to_bits(),
                BufferInit::Random(_) => self.next_random(),
                BufferInit::RandomF32 { scale, .. } => self.next_uniform(scale).to_bits(),
                BufferInit::RandomBf16 { scale, .. } => {
                    let lo = bf16_bits(self.next_uniform(scale));
                    lo | (bf16_bits(self.next_uniform(scale)) << 16)
                }
            };
            self.element += 1;
            let b = v.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }
}

/// f32 → bf16 bits, round to nearest even (finite values: the draws are).
fn bf16_bits(f: f32) -> u32 {
    let u = f.to_bits();
    u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16
}

fn parse_u32(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// A parsed graph file: the recorded graph plus what a runner needs beside it.
#[derive(Clone, Debug)]
pub struct GraphFile {
    pub path: PathBuf,
    pub graph: Graph,
    /// Per buffer (by id): its initial contents (views: `None`).
    pub inits: Vec<Option<BufferInit>>,
    /// Per kernel (by id): backend name → implementation reference.
    pub impls: Vec<BTreeMap<String, KernelRef>>,
    /// Per kernel (by id): the line it was declared on.
    pub kernel_lines: Vec<usize>,
    /// Per node (by id): the line of the `[[node]]` that recorded it.
    pub node_lines: Vec<usize>,
}

/// The most nodes a graph file may record (`repeat` included).
pub const MAX_NODES: usize = 200_000;

/// The largest buffer a graph file may declare, in bytes (1 TiB). Whether a backend can allocate it
/// is the backend's check, at instantiation.
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;

impl GraphFile {
    /// The directory relative implementation paths resolve against.
    pub fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
    /// Error for kernel `k` about its implementation on a backend.
    pub fn kernel_error(&self, k: usize, message: impl Into<String>) -> FileError {
        FileError { path: self.path.clone(), line: self.kernel_lines.get(k).copied(), message: message.into() }
    }
    /// A planning error with the lines of the nodes it names (a cycle through explicit edges).
    pub fn plan_error(&self, e: &crate::PlanError) -> FileError {
        let line = |n: u32| self.node_lines.get(n as usize).copied();
        let message = match e {
            crate::PlanError::Cycle { cycle } => {
                let at: Vec<String> = cycle.iter().map(|&n| format!("node {n} (line {})", line(n).map_or("?".into(), |l| l.to_string()))).collect();
                format!("explicit edges make a cycle: {} -> back to the first", at.join(" -> "))
            }
            other => other.to_string(),
        };
        let first = match e {
            crate::PlanError::Cycle { cycle } => cycle.first().and_then(|&n| line(n)),
            _ => None,
        };
        FileError { path: self.path.clone(), line: first, message }
    }
    /// Kernel `k`'s reference for `backend`, or an error naming the kernel and its line.
    pub fn kernel_ref(&self, k: usize, backend: &str) -> Result<&KernelRef, FileError> {
        let name = self.graph.kernels().get(k).map_or("?", |s| s.name.as_str());
        self.impls.get(k).and_then(|m| m.get(backend)).ok_or_else(|| self.kernel_error(k, format!("kernel `{name}` has no `{backend}` implementation")))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    buffer: Vec<Spanned<BufferSpec>>,
    #[serde(default)]
    slot: Vec<Spanned<SlotSpec>>,
    #[serde(default)]
    kernel: Vec<Spanned<KernelSpec>>,
    #[serde(default)]
    node: Vec<Spanned<NodeSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BufferSpec {
    name: String,
    size: Spanned<u64>,
    #[serde(default)]
    init: Option<String>,
    #[serde(default)]
    view: Option<ViewSpec>,
    /// The device of the DAG that holds it (default 0; a view's is its parent's).
    #[serde(default)]
    device: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewSpec {
    of: String,
    offset: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotSpec {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    value: Option<toml::Value>,
}

#[derive(Deserialize)]
struct KernelSpec {
    name: String,
    params: Vec<ParamSpec>,
    /// Pairs of params one launch may bind to overlapping bytes (`alias = [["out", "inp"]]`).
    #[serde(default)]
    alias: Vec<Vec<String>>,
    #[serde(flatten)]
    impls: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamSpec {
    name: String,
    #[serde(default)]
    access: Option<String>,
    /// The author vouches for the declared access where the analysis of the code cannot tell.
    #[serde(default)]
    vouched: Option<bool>,
    #[serde(default)]
    scalar: Option<String>,
    /// The tile map every node of the kernel declares on this param, unless its arg gives its own.
    #[serde(default)]
    tile: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSpec {
    #[serde(default)]
    kernel: Option<String>,
    #[serde(default)]
    grid: Option<Vec<u32>>,
    #[serde(default)]
    block: Option<Vec<u32>>,
    #[serde(default)]
    shared: Option<u32>,
    #[serde(default)]
    args: Option<BTreeMap<String, Spanned<toml::Value>>>,
    #[serde(default)]
    copy: Option<CopySpec>,
    #[serde(default)]
    fill: Option<FillSpec>,
    #[serde(default)]
    collective: Option<CollectiveSpec>,
    #[serde(default)]
    after: Vec<u32>,
    /// Records the node this many times in a row (default 1).
    #[serde(default)]
    repeat: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CopySpec {
    src: toml::Value,
    dst: toml::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FillSpec {
    dst: toml::Value,
    value: u32,
}

/// `collective = { op = "all_reduce", dtype = "f32", send = ["a0", "a1"], recv = ["a0", "a1"] }`: one
/// send and receive extent per rank (a buffer name or `{ buffer, offset, len }`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CollectiveSpec {
    op: String,
    dtype: String,
    send: Vec<toml::Value>,
    recv: Vec<toml::Value>,
}

struct Ctx<'a> {
    path: &'a Path,
    src: &'a str,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.src[..offset.min(self.src.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }
    fn err(&self, offset: usize, message: impl Into<String>) -> FileError {
        FileError { path: self.path.to_path_buf(), line: Some(self.line(offset)), message: message.into() }
    }
    fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// A kernel's implementation for one backend: `"builtin:NAME"` or `"path"`, or a table with `source`,
/// an optional `entry` and the backend's own options (passed through; the backend checks them).
fn kernel_ref_from_toml(v: &toml::Value, base_dir: &Path) -> Result<KernelRef, String> {
    let with_base = |mut r: KernelRef| {
        r.base_dir = base_dir.to_path_buf();
        r
    };
    match v {
        toml::Value::String(s) if !s.is_empty() => Ok(with_base(KernelRef::file(s))),
        toml::Value::Table(t) => {
            let source = match t.get("source") {
                Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
                Some(other) => return Err(format!("`source` must be a non-empty string, not `{other}`")),
                None => return Err("a table needs `source = \"builtin:NAME\"` or a file path".into()),
            };
            let mut r = with_base(KernelRef::file(&source));
            for (key, value) in t {
                match (key.as_str(), value) {
                    ("source", _) => {}
                    ("entry", toml::Value::String(e)) if !e.is_empty() => r.entry = Some(e.clone()),
                    ("entry", other) => return Err(format!("`entry` must be a non-empty string, not `{other}`")),
                    (_, toml::Value::Boolean(b)) => _ = r.options.insert(key.clone(), RefOption::Bool(*b)),
                    (_, toml::Value::Integer(i)) => _ = r.options.insert(key.clone(), RefOption::Int(*i)),
                    (_, toml::Value::Float(f)) => _ = r.options.insert(key.clone(), RefOption::Float(*f)),
                    (_, toml::Value::String(s)) => _ = r.options.insert(key.clone(), RefOption::Str(s.clone())),
                    (_, other) => return Err(format!("option `{key}` must be a boolean, number or string, not `{other}`")),
                }
            }
            Ok(r)
        }
        other => Err(format!("expected \"builtin:NAME\", a file path, or a table with `source`; got `{other}`")),
    }
}

/// Reads and parses a graph file. `impl_keys` lists the backend names a kernel may name an
/// implementation for; any other extra key on a kernel is an error (a typo must not be ignored).
pub fn load(path: &Path, impl_keys: &[&str]) -> Result<GraphFile, FileError> {
    let src = crate::capped_read::read_text(path, crate::capped_read::GRAPH_FILE).map_err(|e| FileError {
        path: path.to_path_buf(),
        line: None,
        message: e.reason.to_string(),
    })?;
    parse(&src, path, impl_keys)
}

/// Parses graph-file text; `path` is used for messages and relative implementation paths.
pub fn parse(src: &str, path: &Path, impl_keys: &[&str]) -> Result<GraphFile, FileError> {
    let cx = Ctx { path, src };
    let spec: FileSpec = toml::from_str(src).map_err(|e| {
        let line = e.span().map(|s| cx.line(s.start));
        // The parser's messages name no key; the text its span covers does.
        let named = match e.span().and_then(|s| src.get(s)).map(str::trim) {
            Some(key) if e.message().starts_with("duplicate key") && !key.is_empty() && key.len() <= 128 => format!("duplicate key `{key}`"),
            _ => e.message().trim_end().to_string(),
        };
        FileError { path: path.to_path_buf(), line, message: named }
    })?;
    let mut g = Graph::new();
    let inits = add_buffers(&cx, &mut g, &spec.buffer)?;
    add_slots(&cx, &mut g, &spec.slot)?;
    let kernels = add_kernels(&cx, &mut g, &spec.kernel, impl_keys)?;
    let node_lines = add_nodes(&cx, &mut g, &spec.node, &kernels.default_tiles)?;
    let KernelsRead { impls, lines: kernel_lines, .. } = kernels;
    Ok(GraphFile { path: path.to_path_buf(), graph: g, inits, impls, kernel_lines, node_lines })
}

/// Declares the file's buffers in `g`, in order; returns each one's initial contents (views: `None`).
fn add_buffers(cx: &Ctx, g: &mut Graph, specs: &[Spanned<BufferSpec>]) -> Result<Vec<Option<BufferInit>>, FileError> {
    let mut inits = Vec::new();
    for b in specs {
        let at = b.span().start;
        let b = b.get_ref();
        let (size, size_at) = (*b.size.get_ref(), b.size.span().start);
        if size > MAX_BUFFER_BYTES {
            return Err(cx.err(size_at, format!("buffer `{}`: {size} bytes is more than the {MAX_BUFFER_BYTES} a graph file may declare", b.name)));
        }
        let id = match &b.view {
            None => g.add_buffer_on(&b.name, size, b.device.unwrap_or(0)),
            Some(_) if b.device.is_some() => return Err(cx.err(at, format!("view `{}`: a view lies on its parent's device; drop `device`", b.name))),
            Some(v) => {
                let parent = g.buffer_by_name(&v.of).ok_or_else(|| cx.err(at, format!("view `{}`: unknown buffer `{}` (declare it above)", b.name, v.of)))?;
                g.add_view(&b.name, parent, v.offset, size)
            }
        }
        .map_err(|e| cx.err(at, e.to_string()))?;
        let init = match (&b.init, &b.view) {
            (Some(_), Some(_)) => return Err(cx.err(at, format!("view `{}` cannot have an init (initialise its root)", b.name))),
            (None, Some(_)) => None,
            (None, None) => Some(BufferInit::Zero),
            (Some(s), None) => Some(BufferInit::parse(s).ok_or_else(|| {
                cx.err(at, format!("buffer `{}`: unknown init `{s}` (zero, iota, const:V, random:SEED, f32:V, randf:SEED:SCALE, randbf16:SEED:SCALE)", b.name))
            })?),
        };
        debug_assert_eq!(id.index(), inits.len());
        inits.push(init);
    }
    Ok(inits)
}

/// Declares the file's slots in `g`, each with its initial value (0 where none is given).
fn add_slots(cx: &Ctx, g: &mut Graph, specs: &[Spanned<SlotSpec>]) -> Result<(), FileError> {
    for s in specs {
        let at = s.span().start;
        let s = s.get_ref();
        let ty = ScalarType::parse(&s.ty).ok_or_else(|| cx.err(at, format!("slot `{}`: unknown type `{}`", s.name, s.ty)))?;
        let v = match &s.value {
            None => Scalar { ty, bits: 0 },
            Some(v) => scalar_from_toml(ty, v).map_err(|m| cx.err(at, format!("slot `{}`: {m}", s.name)))?,
        };
        g.add_slot(&s.name, v).map_err(|e| cx.err(at, e.to_string()))?;
    }
    Ok(())
}

/// What the file's kernels declare beside their signatures, per kernel by id.
struct KernelsRead {
    /// Backend name → implementation reference.
    impls: Vec<BTreeMap<String, KernelRef>>,
    /// The line each kernel was declared on.
    lines: Vec<usize>,
    /// Per param, the tile map a launch takes unless its node declares another.
    default_tiles: Vec<Vec<Option<TileMap>>>,
}

/// Declares the file's kernels in `g` with their implementations for `impl_keys`' backends.
fn add_kernels(cx: &Ctx, g: &mut Graph, specs: &[Spanned<KernelSpec>], impl_keys: &[&str]) -> Result<KernelsRead, FileError> {
    let mut impls = Vec::new();
    let mut kernel_lines = Vec::new();
    let mut default_tiles: Vec<Vec<Option<TileMap>>> = Vec::new();
    for k in specs {
        let at = k.span().start;
        let k = k.get_ref();
        let mut sig = KernelSig::new(&k.name);
        let mut tiles = Vec::with_capacity(k.params.len());
        for p in &k.params {
            let here = |m: String| cx.err(at, format!("kernel `{}` param `{}`: {m}", k.name, p.name));
            sig = param_from_spec(sig, p).map_err(here)?;
            tiles.push(match &p.tile {
                None => None,
                Some(_) if p.scalar.is_some() => return Err(here("a tile map belongs to a buffer param".into())),
                Some(v) => tile_from_toml(v).map_err(here)?,
            });
        }
        default_tiles.push(tiles);
        for pair in &k.alias {
            let [a, b] = pair.as_slice() else {
                return Err(cx.err(at, format!("kernel `{}`: each `alias` entry is a pair of param names, got {} names", k.name, pair.len())));
            };
            sig = sig.may_alias(a, b).map_err(|e| cx.err(at, e.to_string()))?;
        }
        let mut refs = BTreeMap::new();
        for (key, value) in &k.impls {
            if !impl_keys.contains(&key.as_str()) {
                return Err(cx.err(at, format!("kernel `{}`: unknown key `{key}` (backends: {})", k.name, impl_keys.join(", "))));
            }
            let r = kernel_ref_from_toml(value, cx.base_dir()).map_err(|m| cx.err(at, format!("kernel `{}`, `{key}` implementation: {m}", k.name)))?;
            refs.insert(key.clone(), r);
        }
        g.add_kernel(sig).map_err(|e| cx.err(at, e.to_string()))?;
        impls.push(refs);
        kernel_lines.push(cx.line(at));
    }
    Ok(KernelsRead { impls, lines: kernel_lines, default_tiles })
}

/// Records the file's nodes in `g` (`repeat` times each), then the `after` edges; returns the line
/// of the `[[node]]` that recorded each node.
fn add_nodes(cx: &Ctx, g: &mut Graph, specs: &[Spanned<NodeSpec>], default_tiles: &[Vec<Option<TileMap>>]) -> Result<Vec<usize>, FileError> {
    // `after` may name a later node; those edges are added once every node is recorded.
    let mut pending = Vec::new();
    let mut node_lines = Vec::new();
    for n in specs {
        let at = n.span().start;
        let spec = n.get_ref();
        let repeat = spec.repeat.unwrap_or(1);
        if repeat == 0 {
            return Err(cx.err(at, format!("node {}: `repeat = 0` records nothing; give 1 or more", g.nodes().len())));
        }
        if g.nodes().len() as u64 + u64::from(repeat) > MAX_NODES as u64 {
            return Err(
                cx.err(at, format!("node {}: `repeat = {repeat}` takes the graph past {MAX_NODES} nodes, the most a graph file may record", g.nodes().len()))
            );
        }
        for _ in 0..repeat {
            add_node(g, spec, cx, at, &mut pending, default_tiles)?;
            node_lines.push(cx.line(at));
        }
    }
    if g.nodes().is_empty() {
        return Err(FileError { path: cx.path.to_path_buf(), line: None, message: "the file records no node: nothing to plan or run (add a [[node]])".into() });
    }
    for (id, before, at) in pending {
        g.add_edge(before, id).map_err(|e| cx.err(at, e.to_string()))?;
    }
    Ok(node_lines)
}

/// One declared param: `access` (read, write, read_write, or infer: read from the code before
/// planning) with an optional `vouched = true`, or `scalar`.
fn param_from_spec(sig: KernelSig, p: &ParamSpec) -> Result<KernelSig, String> {
    match (&p.access, &p.scalar, p.vouched) {
        (Some(a), None, vouched) if a == "infer" => match vouched {
            Some(true) => Err("`vouched` vouches for a declared mode; an inferred one comes from the code (declare the mode instead)".into()),
            _ => Ok(sig.buffer_infer(&p.name)),
        },
        (Some(a), None, vouched) => {
            let mode = Access::parse(a).ok_or_else(|| format!("unknown access `{a}` (read, write, read_write, infer)"))?;
            Ok(if vouched == Some(true) { sig.buffer_vouched(&p.name, mode) } else { sig.buffer(&p.name, mode) })
        }
        (None, Some(t), None) => Ok(sig.scalar(&p.name, ScalarType::parse(t).ok_or_else(|| format!("unknown scalar type `{t}`"))?)),
        (None, Some(_), Some(_)) => Err("`vouched` is for a buffer param's access, not a scalar".into()),
        (None, None, _) => Err("declare `access` (read, write, read_write, infer) or `scalar`; none is assumed".into()),
        (Some(_), Some(_), _) => Err("both `access` and `scalar` given".into()),
    }
}

fn add_node(
    g: &mut Graph,
    n: &NodeSpec,
    cx: &Ctx,
    at: usize,
    pending: &mut Vec<(NodeId, NodeId, usize)>,
    default_tiles: &[Vec<Option<TileMap>>],
) -> Result<NodeId, FileError> {
    let idx = g.nodes().len();
    let after: Vec<NodeId> = n.after.iter().map(|&a| NodeId(a)).collect();
    let forward: Vec<NodeId> = after.iter().copied().filter(|a| a.index() >= idx).collect();
    let backward: Vec<NodeId> = after.iter().copied().filter(|a| a.index() < idx).collect();
    if forward.iter().any(|a| a.index() == idx) {
        return Err(cx.err(at, format!("node {idx}: `after` names the node itself")));
    }
    let kinds = n.kernel.is_some() as u8 + n.copy.is_some() as u8 + n.fill.is_some() as u8 + n.collective.is_some() as u8;
    if kinds != 1 {
        return Err(cx.err(at, format!("node {idx}: give exactly one of `kernel`, `copy`, `fill`, `collective`")));
    }
    let id = if let Some(kname) = &n.kernel {
        let k = g.kernel_by_name(kname).ok_or_else(|| cx.err(at, format!("node {idx}: unknown kernel `{kname}`")))?;
        let dims = |v: &Option<Vec<u32>>, what: &str| -> Result<[u32; 3], FileError> {
            let v = v.as_ref().ok_or_else(|| cx.err(at, format!("node {idx} ({kname}): `{what}` is required")))?;
            if v.is_empty() || v.len() > 3 {
                return Err(cx.err(at, format!("node {idx} ({kname}): `{what}` needs 1 to 3 dimensions")));
            }
            let mut d = [1u32; 3];
            d[..v.len()].copy_from_slice(v);
            Ok(d)
        };
        let launch = Launch::new(dims(&n.grid, "grid")?, dims(&n.block, "block")?).shared(n.shared.unwrap_or(0));
        let sig = g.kernel(k).clone();
        let empty = BTreeMap::new();
        let given = n.args.as_ref().unwrap_or(&empty);
        for (name, v) in given {
            if sig.param_index(name).is_none() {
                return Err(cx.err(v.span().start, format!("node {idx} ({kname}): kernel has no param `{name}`")));
            }
        }
        let mut args = Vec::with_capacity(sig.params.len());
        let mut tiles: Vec<(&str, TileMap)> = Vec::new();
        for (pi, p) in sig.params.iter().enumerate() {
            let v = given.get(&p.name).ok_or_else(|| cx.err(at, format!("node {idx} ({kname}): missing arg `{}`", p.name)))?;
            // A param's error points at its value's line.
            let (v, at) = (v.get_ref(), v.span().start);
            let here = |m: String| cx.err(at, format!("node {idx} ({kname}), param `{}`: {m}", p.name));
            if matches!(p.kind, ParamKind::Buffer(_)) {
                let own = match v {
                    toml::Value::Table(t) => t.get("tile").map(tile_from_toml).transpose().map_err(here)?,
                    _ => None,
                };
                let default = default_tiles.get(k.index()).and_then(|d| d.get(pi)).cloned().flatten();
                if let Some(map) = own.unwrap_or(default) {
                    tiles.push((p.name.as_str(), map));
                }
            }
            args.push(match &p.kind {
                ParamKind::Buffer(_) => Arg::Buffer(slice_from_toml(g, v, true).map_err(here)?),
                ParamKind::Scalar(ty) => match v {
                    toml::Value::Table(t) if t.contains_key("slot") => {
                        let name = t.get("slot").and_then(|s| s.as_str()).ok_or_else(|| here("`slot` must be a slot name".into()))?;
                        Arg::Slot(g.slot_by_name(name).ok_or_else(|| here(format!("unknown slot `{name}`")))?)
                    }
                    other => Arg::Scalar(scalar_from_toml(*ty, other).map_err(here)?),
                },
            });
        }
        g.add_launch_tiled(k, launch, &args, &tiles, &backward)
    } else if let Some(c) = &n.copy {
        let here = |m: String| cx.err(at, format!("node {idx} (copy): {m}"));
        let src = slice_from_toml(g, &c.src, false).map_err(|m| here(format!("src: {m}")))?;
        let dst = slice_from_toml(g, &c.dst, false).map_err(|m| here(format!("dst: {m}")))?;
        g.add_copy(src, dst, &backward)
    } else if let Some(f) = &n.fill {
        let dst = slice_from_toml(g, &f.dst, false).map_err(|m| cx.err(at, format!("node {idx} (fill): dst: {m}")))?;
        g.add_fill(dst, f.value, &backward)
    } else if let Some(c) = &n.collective {
        let here = |m: String| cx.err(at, format!("node {idx} (collective): {m}"));
        let op = crate::collective::CollectiveOp::parse(&c.op).ok_or_else(|| here(format!("`op = {:?}`: all_reduce, all_gather or reduce_scatter", c.op)))?;
        let dtype = ScalarType::parse(&c.dtype).ok_or_else(|| here(format!("`dtype = {:?}`: u32, i32, f32, u64, i64 or f64", c.dtype)))?;
        let slices = |what: &str, v: &[toml::Value]| -> Result<Vec<Slice>, FileError> {
            v.iter().enumerate().map(|(r, x)| slice_from_toml(g, x, false).map_err(|m| here(format!("{what}[{r}]: {m}")))).collect()
        };
        let (send, recv) = (slices("send", &c.send)?, slices("recv", &c.recv)?);
        g.add_collective(op, dtype, &send, &recv, &backward)
    } else {
        unreachable!("exactly one kind checked above")
    }
    .map_err(|e| cx.err(at, e.to_string()))?;
    for f in forward {
        pending.push((id, f, at));
    }
    Ok(id)
}

/// A buffer arg: a name or `{ buffer, offset, len }` (and `tile`, read by the caller, where
/// `tiled`: a kernel's buffer arg).
fn slice_from_toml(g: &Graph, v: &toml::Value, tiled: bool) -> Result<Slice, String> {
    let lookup = |name: &str| -> Result<BufferId, String> { g.buffer_by_name(name).ok_or_else(|| format!("unknown buffer `{name}`")) };
    match v {
        toml::Value::String(name) => Ok(g.whole(lookup(name)?)),
        toml::Value::Table(t) => {
            for k in t.keys() {
                let allowed = ["buffer", "offset", "len"].contains(&k.as_str()) || (tiled && k == "tile");
                if !allowed {
                    let keys = if tiled { "buffer, offset, len, tile" } else { "buffer, offset, len" };
                    return Err(format!("unknown key `{k}` in buffer arg ({keys})"));
                }
            }
            let name = t.get("buffer").and_then(|b| b.as_str()).ok_or("a buffer arg needs `buffer = \"name\"`")?;
            let b = lookup(name)?;
            let size = g.buffer(b).size;
            let int = |k: &str| -> Result<Option<u64>, String> {
                match t.get(k) {
                    None => Ok(None),
                    Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
                    Some(_) => Err(format!("`{k}` must be a non-negative integer")),
                }
            };
            let offset = int("offset")?.unwrap_or(0);
            let len = match int("len")? {
                Some(l) => l,
                None => size.checked_sub(offset).ok_or_else(|| format!("offset {offset} is past the end of `{name}` ({size} bytes)"))?,
            };
            Ok(Slice { buffer: b, offset, len })
        }
        _ => Err("expected a buffer name or { buffer, offset, len }".into()),
    }
}

/// A tile map: one range table, a list of them, or `"none"` (no map: the whole slice per block).
fn tile_from_toml(v: &toml::Value) -> Result<Option<TileMap>, String> {
    let ranges = match v {
        toml::Value::String(s) if s == "none" => return Ok(None),
        toml::Value::Table(_) => vec![range_from_toml(v)?],
        toml::Value::Array(a) => a.iter().enumerate().map(|(i, r)| range_from_toml(r).map_err(|m| format!("tile range {i}: {m}"))).collect::<Result<_, _>>()?,
        other => return Err(format!("`tile` is a range table, a list of them or \"none\", not `{other}`")),
    };
    TileMap::new(ranges).map(Some)
}

fn range_from_toml(v: &toml::Value) -> Result<TileRange, String> {
    let toml::Value::Table(t) = v else { return Err(format!("a tile range is a table {{ base, stride, len, rows, pitch }}, not `{v}`")) };
    for k in t.keys() {
        if !["base", "stride", "len", "rows", "pitch"].contains(&k.as_str()) {
            return Err(format!("unknown key `{k}` in a tile range (base, stride, len, rows, pitch)"));
        }
    }
    let int = |k: &str, default: Option<u64>| -> Result<u64, String> {
        match t.get(k) {
            None => default.ok_or_else(|| format!("a tile range needs `{k}`")),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(*i as u64),
            Some(other) => Err(format!("`{k}` must be a non-negative integer, not `{other}`")),
        }
    };
    let mut stride = [0u64; 3];
    match t.get("stride") {
        Some(toml::Value::Array(a)) if (1..=3).contains(&a.len()) => {
            for (d, x) in a.iter().enumerate() {
                stride[d] = x.as_integer().filter(|i| *i >= 0).ok_or_else(|| format!("`stride` holds non-negative integers, not `{x}`"))? as u64;
            }
        }
        Some(other) => return Err(format!("`stride` is 1 to 3 non-negative integers (bytes per block in x, y, z), not `{other}`")),
        None => return Err("a tile range needs `stride` (bytes per block in x, y, z)".into()),
    }
    let rows = int("rows", Some(1))?;
    Ok(TileRange::span(int("base", Some(0))?, stride, int("len", None)?).with_rows(rows, int("pitch", Some(0))?))
}

fn scalar_from_toml(ty: ScalarType, v: &toml::Value) -> Result<Scalar, String> {
    let range = |lo: i128, hi: i128, i: i64| -> Result<(), String> {
        if (i as i128) < lo || (i as i128) > hi {
            Err(format!("{i} does not fit a {}", ty.as_str()))
        } else {
            Ok(())
        }
    };
    match (ty, v) {
        (ScalarType::U32, toml::Value::Integer(i)) => range(0, u32::MAX as i128, *i).map(|_| Scalar::u32(*i as u32)),
        (ScalarType::I32, toml::Value::Integer(i)) => range(i32::MIN as i128, i32::MAX as i128, *i).map(|_| Scalar::i32(*i as i32)),
        (ScalarType::U64, toml::Value::Integer(i)) => range(0, i64::MAX as i128, *i).map(|_| Scalar::u64(*i as u64)),
        (ScalarType::I64, toml::Value::Integer(i)) => Ok(Scalar::i64(*i)),
        (ScalarType::F32, toml::Value::Float(f)) => Ok(Scalar::f32(*f as f32)),
        (ScalarType::F32, toml::Value::Integer(i)) => Ok(Scalar::f32(*i as f32)),
        (ScalarType::F64, toml::Value::Float(f)) => Ok(Scalar::f64(*f)),
        (ScalarType::F64, toml::Value::Integer(i)) => Ok(Scalar::f64(*i as f64)),
        (_, other) => Err(format!("expected a {} value, got `{other}`", ty.as_str())),
    }
}
