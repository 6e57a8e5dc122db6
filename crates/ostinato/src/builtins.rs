//! The generic built-in kernels every backend ships (`builtin:NAME`) have one meaning everywhere, and
//! the bytes each touches are a function of its scalars: `add_one` with `n = 512` touches 2,048 bytes
//! of `x` whatever its declared extent says. [`required_bytes`] states that function for each built-in,
//! so a launch that would touch more than it declared is refused before it runs (when instantiated and
//! when a slot it reads is patched) instead of faulting on one backend, being clamped on another and
//! writing past its extent on a third.

use crate::graph::{Arg, Graph, KernelSig, NodeId, NodeOp, ParamKind, Scalar};

/// Why a built-in launch cannot run as recorded.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BuiltinError {
    /// A param would be touched past its declared extent.
    #[error("{node}, param `{param}`: `{kernel}` touches {needed} bytes of it with these scalars, its declared extent is {declared} bytes")]
    Extent { node: String, kernel: String, param: String, needed: u128, declared: u64 },
    /// A scalar out of the built-in's domain.
    #[error("{node}: `{kernel}` {reason}")]
    Scalar { node: String, kernel: String, reason: String },
    /// A declared tile map that does not hold what the built-in's block touches, or a map on a
    /// built-in whose per-block footprint is not stated.
    #[error("{node}, param `{param}`: {reason}")]
    Tile { node: String, param: String, reason: String },
    /// An aliasing declaration the kernel's code does not keep: a scalar param, or a pair of params
    /// whose accesses the built-in it is bound to does not order.
    #[error("kernel `{kernel}` declares that params {pair} may alias, but {reason}")]
    Alias {
        kernel: String,
        /// The two params, as the message names them: "`out` and `inp`".
        pair: String,
        reason: String,
    },
}

impl BuiltinError {
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            BuiltinError::Alias { .. } => crate::ErrorKind::Bind,
            _ => crate::ErrorKind::Argument,
        }
    }
}

/// The pairs of params (by index, the smaller first) whose accesses built-in `name`'s code orders
/// within one launch, so that a launch may bind them to overlapping bytes: none, for every generic
/// built-in. Each thread reads and writes its own elements with no barrier between one thread's write
/// and another's read (`mix` reads `inp[i % n_in]` while other threads write `out`), so params on
/// overlapping bytes give a result that depends on the device's schedule: the host's serial order
/// and a GPU's differ.
pub fn ordered_aliases(name: &str) -> &'static [(usize, usize)] {
    let _ = name;
    &[]
}

/// Checks the aliasing `sig` declares against the code it is bound to (`builtin`: the built-in's name,
/// `None` for a user's code, which its author vouches for): each pair names two buffer params, and a
/// built-in orders each pair it is bound with. Checked when a kernel is bound, on every backend.
pub fn check_aliasing(sig: &KernelSig, builtin: Option<&str>) -> Result<(), BuiltinError> {
    for &(i, j) in &sig.aliasing {
        let name = |p: usize| sig.params.get(p).map_or_else(|| format!("#{p}"), |q| q.name.clone());
        let refuse = |reason: String| BuiltinError::Alias { kernel: sig.name.clone(), pair: format!("`{}` and `{}`", name(i), name(j)), reason };
        for p in [i, j] {
            match sig.params.get(p).map(|q| &q.kind) {
                Some(ParamKind::Buffer(_)) => {}
                Some(ParamKind::Scalar(_)) => return Err(refuse(format!("`{}` is a scalar param: only buffer params have bytes that can overlap", name(p)))),
                None => return Err(refuse(format!("the signature has no param #{p}"))),
            }
        }
        if let Some(b) = builtin.filter(|b| !ordered_aliases(b).contains(&(i, j))) {
            return Err(refuse(format!(
                "the built-in `{b}` does not order their accesses (its threads read and write their elements in no order): a launch on overlapping bytes would give a schedule-dependent result"
            )));
        }
    }
    Ok(())
}

/// The bytes built-in `name` touches of each of its buffer params (by param index), given its scalar
/// args by param index (`scalars[i]` is `None` for a buffer param). `None` for a name that is no
/// generic built-in; `Some(Err(reason))` for scalars out of the built-in's domain.
pub fn required_bytes(name: &str, scalars: &[Option<Scalar>]) -> Option<Result<Vec<(usize, u128)>, String>> {
    let u = |i: usize| scalars.get(i).copied().flatten().map_or(0u128, |s| u128::from(s.as_u32()));
    let f = |words: u128| 4 * words;
    Some(Ok(match name {
        "add_one" => vec![(0, f(u(1)))],
        "mix" => {
            if u(3) == 0 {
                return Some(Err("n_in is 0: every element reads inp[i % n_in]".into()));
            }
            vec![(0, f(u(2))), (1, f(u(3).min(u(2))))]
        }
        "rmsnorm" => vec![(0, f(u(3))), (1, f(u(3))), (2, f(u(3)))],
        "gemv" => vec![(0, f(u(3))), (1, f(u(3) * u(4))), (2, f(u(4)))],
        "rope" => vec![(0, f(u(2) * u(3)))],
        "kv_store" => {
            let (pos, kv) = (u(4), u(5));
            vec![(0, f((pos + 1) * kv)), (1, f((pos + 1) * kv)), (2, f(kv)), (3, f(kv))]
        }
        "attention" => {
            let (pos, heads, kv_heads, head_dim) = (u(4), u(5), u(6), u(7));
            if kv_heads == 0 || heads % kv_heads != 0 {
                return Some(Err(format!("heads {heads} is not a multiple of kv_heads {kv_heads}")));
            }
            if head_dim == 0 {
                return Some(Err("head_dim is 0".into()));
            }
            let rows = (pos + 1) * kv_heads * head_dim;
            vec![(0, f(heads * head_dim)), (1, f(heads * head_dim)), (2, f(rows)), (3, f(rows))]
        }
        "add" => vec![(0, f(u(2))), (1, f(u(2)))],
        "silu_mul" => vec![(0, f(u(2))), (1, f(2 * u(2)))],
        _ => return None,
    }))
}

/// The bytes block `block` of a launch of built-in `name` touches, per buffer param: calls
/// `f(param, lo, hi)` for each byte range (relative to the param's slice). The element-wise built-ins
/// are grid-stride loops over the launch's linear thread index: block `b` of `G` blocks of `T` threads
/// touches elements `b·T + k·G·T .. + T` for `k = 0, 1, …` below the element count. `None` for a
/// built-in whose per-block footprint is not stated (a tile map on it cannot be checked).
pub fn block_footprint(name: &str, scalars: &[Option<Scalar>], launch: &crate::Launch, block: [u32; 3], mut f: impl FnMut(usize, u64, u64)) -> Option<()> {
    let u = |i: usize| scalars.get(i).copied().flatten().map_or(0u64, |s| u64::from(s.as_u32()));
    let threads: u64 = launch.block.iter().map(|&d| u64::from(d)).product();
    let blocks = crate::tiles::block_count(launch.grid);
    let b = u64::from(block[0]) + u64::from(launch.grid[0]) * (u64::from(block[1]) + u64::from(launch.grid[1]) * u64::from(block[2]));
    let chunks = |n: u64, g: &mut dyn FnMut(u64, u64)| {
        let mut start = b * threads;
        while start < n {
            g(start, (start + threads).min(n));
            start += blocks * threads;
        }
    };
    match name {
        "add_one" => chunks(u(1), &mut |a, e| f(0, 4 * a, 4 * e)),
        "mix" => {
            let (n_out, n_in) = (u(2), u(3));
            if n_in == 0 {
                return None;
            }
            chunks(n_out, &mut |a, e| {
                f(0, 4 * a, 4 * e);
                // inp[i % n_in] for i in a..e: one or more wrapped runs.
                let mut i = a;
                while i < e {
                    let r = i % n_in;
                    let run = (n_in - r).min(e - i);
                    f(1, 4 * r, 4 * (r + run));
                    i += run;
                }
            });
        }
        _ => return None,
    }
    Some(())
}

/// The bytes each thread of a launch of built-in `name` touches through buffer param `param`, where
/// they follow the grid-stride loop: `Some(e)` says thread `L` (the launch's linear thread index, blocks
/// and threads in x, y, z, x fastest, of `N` threads in all) touches only the `e`-byte elements
/// `L + k·N` of the param's slice, whatever the launch's scalars (an element count only stops the loop
/// earlier). `add_one`'s `x` and `mix`'s `out`; `mix`'s `inp` is read at `i % n_in` (another thread's
/// element where `n_in` is less than the count), so it has none. Fused bodies ordered only through such
/// params need no barrier between them (`crate::fusion::barriers_with`).
pub fn thread_footprint(name: &str, param: usize) -> Option<u64> {
    match (name, param) {
        ("add_one", 0) | ("mix", 0) => Some(4),
        _ => None,
    }
}

/// Checks node `node` of `graph`, a launch of built-in `builtin`, with each slot at `slot_value(slot)`:
/// every param's touched bytes within its declared extent. Nodes of other kinds, and names that are
/// no generic built-in, pass.
pub fn check_launch(graph: &Graph, node: NodeId, builtin: &str, slot_value: &dyn Fn(crate::SlotId) -> Scalar) -> Result<(), BuiltinError> {
    let NodeOp::Kernel { kernel, args, .. } = &graph.node(node).op else { return Ok(()) };
    let scalars = scalars_of(args, slot_value);
    let sig = graph.kernel(*kernel);
    let at = || graph.describe_node(node);
    let needs = match required_bytes(builtin, &scalars) {
        None => return Ok(()),
        Some(Err(reason)) => return Err(BuiltinError::Scalar { node: at(), kernel: builtin.to_string(), reason }),
        Some(Ok(n)) => n,
    };
    for (param, needed) in needs {
        let Some(Arg::Buffer(s)) = args.get(param) else { continue };
        if needed > u128::from(s.len) {
            let name = sig.params.get(param).map_or_else(|| format!("#{param}"), |p| p.name.clone());
            return Err(BuiltinError::Extent { node: at(), kernel: builtin.to_string(), param: name, needed, declared: s.len });
        }
    }
    check_tiles(graph, node, builtin, &scalars)
}

/// Built-in launches already found within their extents and tiles, by everything [`check_launch`]
/// reads of a node: the built-in, the launch's geometry, its scalars (slots at their values), each
/// buffer param's extent and its tile maps. Launches alike are then checked once: the tile check goes
/// block by block, so four chains of 941 launches of 8,192 blocks took 449 ms checked node by node
/// and take 0.86 ms this way (`cargo bench -p ostinato --bench plan_scale`, the 2-core developer
/// machine): most chains repeat one launch. Only passes are kept: a launch that fails is checked
/// anew, and its error names it. Where no memory is left for another key, the pass is not kept
/// (the next launch alike is checked again).
#[derive(Debug, Default)]
pub struct LaunchChecks {
    passed: std::collections::HashSet<LaunchKey>,
}

/// What [`check_launch`]'s verdict on a node depends on (the node's name only enters its errors).
#[derive(Debug, PartialEq, Eq, Hash)]
struct LaunchKey {
    builtin: String,
    launch: crate::Launch,
    scalars: Vec<Option<Scalar>>,
    /// Per arg: a buffer param's extent in bytes (`None` for a scalar or a whole buffer, which
    /// `check_launch` does not measure).
    extents: Vec<Option<u64>>,
    tiles: Vec<crate::tiles::ParamTile>,
}

impl LaunchChecks {
    /// [`check_launch`], skipped for a launch like one that passed before.
    pub fn check(&mut self, graph: &Graph, node: NodeId, builtin: &str, slot_value: &dyn Fn(crate::SlotId) -> Scalar) -> Result<(), BuiltinError> {
        let NodeOp::Kernel { launch, args, .. } = &graph.node(node).op else { return Ok(()) };
        let key = LaunchKey {
            builtin: builtin.to_string(),
            launch: *launch,
            scalars: scalars_of(args, slot_value),
            extents: args.iter().map(|a| if let Arg::Buffer(s) = a { Some(s.len) } else { None }).collect(),
            tiles: graph.node(node).tiles.clone(),
        };
        if self.passed.contains(&key) {
            return Ok(());
        }
        check_launch(graph, node, builtin, slot_value)?;
        if self.passed.try_reserve(1).is_ok() {
            self.passed.insert(key);
        }
        Ok(())
    }
}

/// Each arg's scalar value (a slot's at `slot_value`), `None` for a buffer.
fn scalars_of(args: &[Arg], slot_value: &dyn Fn(crate::SlotId) -> Scalar) -> Vec<Option<Scalar>> {
    args.iter()
        .map(|a| match a {
            Arg::Scalar(s) => Some(*s),
            Arg::Slot(s) => Some(slot_value(*s)),
            Arg::Buffer(_) | Arg::Whole(_) => None,
        })
        .collect()
}

/// The built-in's per-block footprint against the node's declared tile maps, block by block.
fn check_tiles(graph: &Graph, node: NodeId, builtin: &str, scalars: &[Option<Scalar>]) -> Result<(), BuiltinError> {
    let n = graph.node(node);
    let NodeOp::Kernel { launch, .. } = &n.op else { return Ok(()) };
    let Some(first) = n.tiles.first() else { return Ok(()) };
    let tile_err = |param: usize, reason: String| BuiltinError::Tile { node: graph.describe_node(node), param: graph.param_name(node, param), reason };
    for i in 0..crate::tiles::block_count(launch.grid) {
        let block = crate::tiles::block_at(launch.grid, i);
        let mut broken: Option<(usize, u64, u64)> = None;
        let stated = block_footprint(builtin, scalars, launch, block, |p, lo, hi| {
            if broken.is_none() && graph.tile_map(node, p).is_some_and(|m| !m.covers(block, lo, hi)) {
                broken = Some((p, lo, hi));
            }
        });
        if stated.is_none() {
            return Err(tile_err(first.param, format!("the built-in `{builtin}` states no per-block footprint, so a tile map on it cannot be checked")));
        }
        if let Some((p, lo, hi)) = broken {
            return Err(tile_err(
                p,
                format!("block {block:?} of the built-in `{builtin}` touches bytes [{lo}, {hi}) of its extent, outside the block's declared tile"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, Graph, KernelSig, Launch, ScalarType, Slice};

    #[test]
    fn an_aliasing_a_built_in_does_not_order_or_on_a_scalar_is_refused_naming_kernel_and_params() {
        let mix = || KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read).scalar("n_out", ScalarType::U32);
        let aliased = mix().may_alias("out", "inp").unwrap();
        let e = check_aliasing(&aliased, Some("mix")).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Bind);
        assert!(e.to_string().starts_with("kernel `mix` declares that params `out` and `inp` may alias, but the built-in `mix` does not order"), "{e}");
        assert!(check_aliasing(&aliased, None).is_ok(), "a user's code: its author's promise");
        assert!(check_aliasing(&mix(), Some("mix")).is_ok(), "no declaration, nothing to check");
        // A signature made field by field (as a shell may) with a scalar in a pair.
        let scalar = KernelSig { aliasing: vec![(0, 2)], ..mix() };
        let e = check_aliasing(&scalar, None).unwrap_err().to_string();
        assert!(e.contains("params `out` and `n_out`") && e.contains("`n_out` is a scalar param"), "{e}");
    }

    #[test]
    fn a_built_in_told_to_touch_past_its_extent_is_refused_naming_node_and_param() {
        let mut g = Graph::new();
        let x = g.add_buffer("x", 4096).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let n = g.add_slot("n", Scalar::u32(128)).unwrap();
        let half = Slice { buffer: x, offset: 0, len: 512 };
        let a = g.add_launch(k, Launch::linear(1, 256), &[Arg::Buffer(half), Arg::Scalar(Scalar::u32(512))], &[]).unwrap();
        let b = g.add_launch(k, Launch::linear(1, 256), &[Arg::Buffer(half), Arg::Slot(n)], &[]).unwrap();
        let e = check_launch(&g, a, "add_one", &|_| Scalar::u32(0)).unwrap_err();
        assert_eq!(e.to_string(), "node 0 (add_one), param `x`: `add_one` touches 2048 bytes of it with these scalars, its declared extent is 512 bytes");
        assert!(check_launch(&g, b, "add_one", &|_| Scalar::u32(128)).is_ok());
        assert!(check_launch(&g, b, "add_one", &|_| Scalar::u32(129)).is_err(), "the slot's value counts");
        assert!(check_launch(&g, a, "user_kernel", &|_| Scalar::u32(0)).is_ok(), "a user's kernel keeps its declared extents");
    }

    /// `LaunchChecks` skips only launches like one that passed: pairs of launches that differ in one
    /// thing its key holds (the extent, a scalar, a slot's value, the grid, the tile map, the built-in),
    /// the first passing and the second not, checked in that order through one `LaunchChecks`, still
    /// fail, naming the second launch; and its verdict is `check_launch`'s on every node in any order.
    #[test]
    fn launch_checks_skip_only_launches_like_one_that_passed() {
        use crate::TileMap;
        let mut g = Graph::new();
        let x = g.add_buffer("x", 1 << 16).unwrap();
        let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
        let n = g.add_slot("n", Scalar::u32(256)).unwrap();
        let row = TileMap::linear(1024, 1024).unwrap();
        let short = TileMap::linear(1020, 1024).unwrap();
        let slice = |len: u64| Arg::Buffer(Slice { buffer: x, offset: 0, len });
        let u = |v: u32| Arg::Scalar(Scalar::u32(v));
        let mut launch = |grid: u32, args: &[Arg], map: Option<&TileMap>| {
            let tiles: Vec<(&str, TileMap)> = map.map(|m| ("x", m.clone())).into_iter().collect();
            g.add_launch_tiled(k, Launch::linear(grid, 256), args, &tiles, &[]).unwrap()
        };
        let pairs = [
            ("the extent", launch(2, &[slice(2048), u(512)], None), launch(2, &[slice(2044), u(512)], None)),
            ("a scalar", launch(4, &[slice(4096), u(1024)], Some(&row)), launch(4, &[slice(4096), u(1025)], Some(&row))),
            // Four blocks over 2,048 elements loop twice: block b's second pass is outside its row.
            ("the grid", launch(8, &[slice(8192), u(2048)], Some(&row)), launch(4, &[slice(8192), u(2048)], Some(&row))),
            ("the tile map", launch(16, &[slice(16384), u(4096)], Some(&row)), launch(16, &[slice(16384), u(4096)], Some(&short))),
        ];
        for (what, pass, fail) in pairs {
            let mut checks = LaunchChecks::default();
            assert_eq!(checks.check(&g, pass, "add_one", &|_| Scalar::u32(0)), check_launch(&g, pass, "add_one", &|_| Scalar::u32(0)), "{what}");
            assert!(checks.check(&g, pass, "add_one", &|_| Scalar::u32(0)).is_ok(), "{what}: the first passes");
            let e = checks.check(&g, fail, "add_one", &|_| Scalar::u32(0)).expect_err(what);
            assert_eq!(Err(e), check_launch(&g, fail, "add_one", &|_| Scalar::u32(0)), "{what}: the second's own error");
        }
        // A slot's value, and the built-in the node is bound to.
        let by_slot = g.add_launch_tiled(k, Launch::linear(1, 256), &[slice(1024), Arg::Slot(n)], &[("x", row.clone())], &[]).unwrap();
        let mut checks = LaunchChecks::default();
        assert!(checks.check(&g, by_slot, "add_one", &|_| Scalar::u32(256)).is_ok());
        assert!(checks.check(&g, by_slot, "add_one", &|_| Scalar::u32(257)).is_err(), "the slot's value counts");
        let over = pairs_node(&g, 1025);
        assert!(checks.check(&g, over, "user_kernel", &|_| Scalar::u32(0)).is_ok(), "a user's kernel: nothing to check");
        assert!(checks.check(&g, over, "add_one", &|_| Scalar::u32(0)).is_err(), "the built-in counts");
        // Every node, forwards and backwards through one `LaunchChecks`: `check_launch`'s verdicts.
        let nodes: Vec<NodeId> = (0..g.nodes().len() as u32).map(NodeId).collect();
        for order in [nodes.clone(), nodes.iter().rev().copied().collect()] {
            let mut checks = LaunchChecks::default();
            for &v in &order {
                assert_eq!(checks.check(&g, v, "add_one", &|_| Scalar::u32(256)), check_launch(&g, v, "add_one", &|_| Scalar::u32(256)), "node {v:?}");
            }
        }
    }

    /// The node of `g` that launches add_one with `n` as its scalar (the first).
    fn pairs_node(g: &Graph, n: u32) -> NodeId {
        let at = g.nodes().iter().position(|node| matches!(&node.op, NodeOp::Kernel { args, .. } if args.get(1) == Some(&Arg::Scalar(Scalar::u32(n)))));
        NodeId(at.expect("such a node") as u32)
    }

    #[test]
    fn scalars_out_of_a_built_ins_domain_are_refused() {
        let s = |v: &[u32]| v.iter().map(|&x| Some(Scalar::u32(x))).collect::<Vec<_>>();
        let mut attention = vec![None, None, None, None];
        attention.extend(s(&[u32::MAX, 4, 1, 0]));
        assert!(required_bytes("attention", &attention).unwrap().unwrap_err().contains("head_dim is 0"));
        let mut mix = vec![None, None];
        mix.extend(s(&[16, 0, 1]));
        assert!(required_bytes("mix", &mix).unwrap().unwrap_err().contains("n_in is 0"));
        // No overflow: u32::MAX rows of u32::MAX words are counted, not wrapped.
        let mut gemv = vec![None, None, None];
        gemv.extend(s(&[u32::MAX, u32::MAX]));
        assert_eq!(required_bytes("gemv", &gemv).unwrap().unwrap()[1].1, 4 * u128::from(u32::MAX) * u128::from(u32::MAX));
    }
}
