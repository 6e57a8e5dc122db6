//! The tile maps of a plan's launches checked against their kernels' PTX (docs/contract.md, "Tile
//! maps"): each launch with maps, with its geometry and its scalars (a slot at its present value), is
//! checked when the plan is instantiated and again when a slot it reads is patched. A map the code
//! contradicts is refused naming node, kernel, param and instruction; one the analysis cannot verify
//! is accepted only on a param declared `vouched`.
//!
//! The built-ins are not checked here: their per-block footprint is stated with their semantics and
//! checked by the core (`ostinato::builtins::check_launch`). Their PTX is verified by this analysis in
//! its tests.

use std::collections::HashMap;

use ostinato::contract::Evidence;
use ostinato::{AccessDecl, Arg, Graph, NodeId, NodeOp, Scalar, SlotId, TileMap};

use crate::ptx::access::evidence;
use crate::ptx::affine::Why;
use crate::ptx::spec::{Node, WhyNot};
use crate::ptx::tiles::{analyse, Case, EntryTiles, Unverified, Verdict};
use crate::ptx::{Item, ModuleInfo};

/// A tile map refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TileError {
    #[error(
        "{node}, param `{param}`: kernel `{kernel}`'s code ({code}) contradicts the tile map: {} in block {:?}, thread {:?} \
         touches bytes [{}, {}) of the param's slice, outside the block's tile",
        .witness.evidence, .witness.block, .witness.thread, .witness.bytes.0, .witness.bytes.1
    )]
    Contradicted { node: String, kernel: String, param: String, code: String, witness: Box<Witness> },
    #[error(
        "{node}, param `{param}`: the tile map cannot be verified from kernel `{kernel}`'s code ({code}): {reason}; \
         declare the param `vouched` if you know each block stays within its tile"
    )]
    Unverified { node: String, kernel: String, param: String, code: String, reason: String },
}

/// A thread seen to leave its block's tile: the instruction, the block, the thread, the bytes of the
/// param's slice it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    pub evidence: Evidence,
    pub block: [u32; 3],
    pub thread: [u32; 3],
    pub bytes: (i64, i64),
}

impl TileError {
    pub fn kind(&self) -> ostinato::ErrorKind {
        ostinato::ErrorKind::Bind
    }
}

/// One kernel's code as the check reads it.
pub enum KernelCode<'a> {
    /// PTX: the module's declarations, its text, the entry, the module's name in messages.
    Ptx { module: &'a ModuleInfo, ptx: &'a str, entry: &'a str, name: &'a str },
    /// Code the analysis does not read (machine code, captured work): why.
    Unread(String),
    /// A built-in: its stated footprint is checked by the core.
    Stated,
}

/// How a param's map was accepted, for `plan --explain` and the exec's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    pub node: NodeId,
    pub param: String,
    /// `None`: verified from the code; else vouched by the declaration, with why it is not verified.
    pub vouched: Option<String>,
}

/// A kernel the check reads.
enum Checker {
    /// `fed`: the scalar params a verdict can depend on.
    Ptx {
        tiles: Box<EntryTiles>,
        fed: std::collections::BTreeSet<usize>,
        module: Box<ModuleInfo>,
        name: String,
    },
    Unread(String),
}

/// The verdicts of one node's check, by what they depend on.
type Key = (usize, [u32; 3], [u32; 3], Vec<Option<u64>>, Vec<Option<TileMap>>, Vec<u64>);

/// The tile-map checks of one exec: what each kernel's code gives, and the slots its checked launches
/// read (so that a patch is checked before it is applied).
pub struct TileChecks {
    kernels: Vec<Option<Checker>>,
    /// Per slot: the checked launches that read it.
    readers: Vec<Vec<NodeId>>,
    values: Vec<Scalar>,
    cache: HashMap<Key, Vec<(usize, Verdict)>>,
    /// Every map accepted, node by node.
    pub accepted: Vec<Accepted>,
}

impl TileChecks {
    /// Checks every launch of graph `g` (a plan's) that declares tile maps against its kernel's code
    /// (`code[k]` for kernel `k`), with the slots at their initial values.
    pub fn check_graph(g: &Graph, code: &[KernelCode]) -> Result<TileChecks, TileError> {
        let tiled: Vec<NodeId> = (0..g.nodes().len()).map(|i| NodeId(i as u32)).filter(|&v| !g.node(v).tiles.is_empty()).collect();
        let mut kernels: Vec<Option<Checker>> = (0..g.kernels().len()).map(|_| None).collect();
        for &v in &tiled {
            let NodeOp::Kernel { kernel, .. } = &g.node(v).op else { continue };
            let k = kernel.index();
            if kernels[k].is_some() {
                continue;
            }
            kernels[k] = match code.get(k) {
                Some(KernelCode::Stated) => None,
                Some(KernelCode::Ptx { module, ptx, entry, name }) => Some(match crate::ptx::parse::entry(ptx, entry) {
                    Ok(parsed) => {
                        let tiles = analyse(module, &parsed, &crate::contract::is_buffer(g.kernel(*kernel)));
                        let fed = tiles.scalars_read();
                        Checker::Ptx { tiles: Box::new(tiles), fed, module: Box::new((*module).clone()), name: crate::contract::display(name) }
                    }
                    Err(why) => Checker::Unread(why),
                }),
                Some(KernelCode::Unread(why)) => Some(Checker::Unread(why.clone())),
                None => Some(Checker::Unread("no code was given for it".into())),
            };
        }
        let values: Vec<Scalar> = g.slots().iter().map(|s| s.initial).collect();
        let mut checks =
            TileChecks { kernels, readers: vec![Vec::new(); g.slots().len()], values: values.clone(), cache: HashMap::new(), accepted: Vec::new() };
        for v in tiled {
            let accepted = checks.check_node(g, v, &|s| checks_value(&values, s), true)?;
            // A slot feeds the check where its param can change a verdict; every slot of a launch
            // with a vouched map or unread code (a patch may bring a witness to light).
            let NodeOp::Kernel { kernel, args, .. } = &g.node(v).op else { continue };
            let fed = match &checks.kernels[kernel.index()] {
                Some(Checker::Ptx { fed, .. }) if accepted.iter().all(|a| a.vouched.is_none()) => Some(fed),
                Some(_) => None,
                None => continue,
            };
            let fed: Vec<usize> = (0..args.len()).filter(|i| fed.is_none_or(|f| f.contains(i))).collect();
            for i in fed {
                if let Arg::Slot(s) = args[i] {
                    // Nodes come in ascending order: one already listed is the last.
                    if checks.readers[s.index()].last() != Some(&v) {
                        checks.readers[s.index()].push(v);
                    }
                }
            }
            checks.accepted.extend(accepted);
        }
        Ok(checks)
    }

    /// Checks the launches that read `slot` with it at `value` (the others at theirs). The caller
    /// records the value with [`TileChecks::patched`] once the patch is applied.
    pub fn check_patch(&mut self, g: &Graph, slot: SlotId, value: Scalar) -> Result<(), TileError> {
        // A slot no mapped launch's verdict reads: nothing to check, nothing allocated (a patch is
        // on the replay path).
        let Some(readers) = self.readers.get(slot.index()).filter(|r| !r.is_empty()).cloned() else { return Ok(()) };
        let values = self.values.clone();
        let value_of = |s: SlotId| if s == slot { value } else { checks_value(&values, s) };
        for v in readers {
            self.check_node(g, v, &value_of, false)?;
        }
        Ok(())
    }

    /// Records that `slot` now holds `value` (checked by [`TileChecks::check_patch`]).
    pub fn patched(&mut self, slot: SlotId, value: Scalar) {
        if let Some(x) = self.values.get_mut(slot.index()) {
            *x = value;
        }
    }

    /// One launch: its maps accepted, or the first refused. `keep`: the verdicts are kept for launches
    /// alike (at instantiate; a patch's are not, so that patching keeps no more memory).
    fn check_node(&mut self, g: &Graph, v: NodeId, slot_value: &dyn Fn(SlotId) -> Scalar, keep: bool) -> Result<Vec<Accepted>, TileError> {
        let NodeOp::Kernel { kernel, launch, args } = &g.node(v).op else { return Ok(Vec::new()) };
        let Some(Some(checker)) = self.kernels.get(kernel.index()) else { return Ok(Vec::new()) };
        let sig = g.kernel(*kernel);
        let scalars: Vec<Option<u64>> = args
            .iter()
            .map(|a| match a {
                Arg::Scalar(s) => Some(s.bits),
                Arg::Slot(s) => Some(slot_value(*s).bits),
                Arg::Buffer(_) | Arg::Whole(_) => None,
            })
            .collect();
        let align: Vec<u64> = args.iter().map(|a| if let Arg::Buffer(s) = a { g.root_extent(*s).1 % 256 } else { 0 }).collect();
        let maps: Vec<Option<&TileMap>> = (0..sig.params.len()).map(|p| g.tile_map(v, p)).collect();
        let key: Key = (kernel.index(), launch.grid, launch.block, scalars.clone(), maps.iter().map(|m| m.cloned()).collect(), align.clone());
        let verdicts = match (self.cache.get(&key), checker) {
            (Some(v), _) => v.clone(),
            (None, Checker::Ptx { tiles, .. }) => {
                let node = Node { grid: launch.grid, block: launch.block, scalars: &scalars };
                let verdicts = tiles.check(&Case { node, maps: &maps, align: &align });
                if keep {
                    self.cache.insert(key, verdicts.clone());
                }
                verdicts
            }
            (None, Checker::Unread(why)) => maps
                .iter()
                .enumerate()
                .filter(|(_, m)| m.is_some())
                .map(|(p, _)| (p, Verdict::Unknown { item: None, why: Unverified::Entry(why.clone()) }))
                .collect(),
        };
        let (code, at) = match checker {
            Checker::Ptx { tiles, module, name, .. } => (format!("{name} (PTX)"), Some((tiles.as_ref(), module.as_ref(), name.as_str()))),
            Checker::Unread(_) => ("not read".to_string(), None),
        };
        let mut out = Vec::new();
        for (p, verdict) in verdicts {
            let param = g.param_name(v, p);
            let refuse =
                |reason: String| TileError::Unverified { node: g.describe_node(v), kernel: sig.name.clone(), param: param.clone(), code: code.clone(), reason };
            match verdict {
                Verdict::Verified => out.push(Accepted { node: v, param, vouched: None }),
                Verdict::Contradicted { item, block, thread, bytes } => {
                    let evidence = at.map_or_else(
                        || Evidence { instruction: "?".into(), at: code.clone() },
                        |(t, m, name)| instr_at(t, item).map_or_else(|| Evidence { instruction: "?".into(), at: code.clone() }, |ins| evidence(m, name, ins)),
                    );
                    return Err(TileError::Contradicted {
                        node: g.describe_node(v),
                        kernel: sig.name.clone(),
                        param,
                        code,
                        witness: Box::new(Witness { evidence, block, thread, bytes }),
                    });
                }
                Verdict::Unknown { item, why } => {
                    let reason = match at {
                        Some((t, m, name)) => describe(t, m, name, item, &why),
                        None => match why {
                            Unverified::Entry(w) => format!("the analysis does not read this code ({w})"),
                            other => format!("{other:?}"),
                        },
                    };
                    if sig.params.get(p).is_some_and(|q| q.decl == AccessDecl::Vouched) {
                        out.push(Accepted { node: v, param, vouched: Some(reason) });
                    } else {
                        return Err(refuse(reason));
                    }
                }
            }
        }
        Ok(out)
    }
}

fn checks_value(values: &[Scalar], s: SlotId) -> Scalar {
    values.get(s.index()).copied().unwrap_or(Scalar { ty: ostinato::ScalarType::U32, bits: 0 })
}

fn instr_at(t: &EntryTiles, item: usize) -> Option<&crate::ptx::Instr> {
    match t.entry().items.get(item) {
        Some(Item::Instr(i)) => Some(i),
        _ => None,
    }
}

/// Why a map is not verified, in words, naming the instructions involved.
fn describe(t: &EntryTiles, m: &ModuleInfo, name: &str, item: Option<usize>, why: &Unverified) -> String {
    let ev = |i: usize| instr_at(t, i).map_or_else(|| format!("item {i}"), |ins| evidence(m, name, ins).to_string());
    let label = |i: usize| match t.entry().items.get(i) {
        Some(Item::Label(l)) => format!("`{l}`"),
        _ => ev(i),
    };
    let addr = item.map_or_else(|| "the code".to_string(), |i| format!("the address of {}", ev(i)));
    match why {
        Unverified::Not(w) => match w {
            WhyNot::Opaque(Why::Loaded, i) => format!("{addr} depends on a value loaded from memory by {}", ev(*i)),
            WhyNot::Opaque(Why::TooDeep, i) => format!(
                "{addr} depends on a chain of more than {} operations (at {}), longer than the analysis follows",
                crate::ptx::expr::MAX_EXPR_DEPTH,
                ev(*i)
            ),
            WhyNot::Opaque(_, i) => format!("{addr} depends on {}, which the analysis does not follow", ev(*i)),
            WhyNot::Carried(r) => format!("{addr} depends on `{r}`, which its loop carries from one iteration to the next other than as `i0 + k·step`"),
            WhyNot::Path(r) => format!("{addr} depends on which path reaches it (`{r}`)"),
            WhyNot::Unbounded(i) => format!("{addr} depends on the counter of the loop at {}, which no condition bounds", label(*i)),
            WhyNot::Wraps(Some(i)) => format!("{addr} depends on {}, whose value may wrap in its register (with this launch's sizes)", ev(*i)),
            WhyNot::Wraps(None) => format!("{addr} depends on a value that may wrap in its register (with this launch's sizes)"),
            WhyNot::Form(Some(i)) => format!("{addr} is not a polynomial the analysis follows (at {})", ev(*i)),
            WhyNot::Form(None) => format!("{addr} is not a polynomial the analysis follows"),
        },
        Unverified::Anywhere => {
            format!("{} may touch any buffer (its address is not derived from a buffer param alone)", item.map_or_else(|| "the code".into(), ev))
        }
        Unverified::NotOffset => format!("{addr} is not this param's pointer plus an offset"),
        Unverified::Width => format!("the size of {} is not a constant", item.map_or_else(|| "an access".into(), ev)),
        Unverified::Uncovered { block, bytes } => {
            format!(
                "block {block:?} may touch bytes [{}, {}) of the slice outside its tile at {} (no thread run was seen to)",
                bytes.0,
                bytes.1,
                item.map_or_else(|| "?".into(), ev)
            )
        }
        Unverified::TooLarge => format!("{addr} does not move with the block index as the map does, and the launch is too large to check block by block"),
        Unverified::Entry(w) => format!("the code is not followed: {w}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, KernelSig, Launch, Plan, ScalarType, TileRange};

    const TILES: &str = include_str!("../tests/fixtures/tiles.ptx");

    /// One launch of a kernel of signature `sig` (each buffer param a buffer of `bytes`, then the
    /// scalars), with `maps`.
    fn graph(sig: KernelSig, grid: u32, block: u32, bytes: u64, scalars: &[Arg], maps: &[(&str, TileMap)]) -> Plan {
        let mut g = Graph::new();
        let bufs: Vec<Arg> =
            sig.params.iter().filter(|p| matches!(p.kind, ostinato::ParamKind::Buffer(_))).map(|p| Arg::Whole(g.add_buffer(&p.name, bytes).unwrap())).collect();
        let k = g.add_kernel(sig).unwrap();
        let args: Vec<Arg> = bufs.into_iter().chain(scalars.iter().cloned()).collect();
        g.add_launch_tiled(k, Launch::linear(grid, block), &args, maps, &[]).unwrap();
        Plan::compile(&g).unwrap()
    }

    fn check(plan: &Plan, entry: &str) -> Result<TileChecks, TileError> {
        let module = crate::contract::module_info(TILES, &[]);
        TileChecks::check_graph(plan.graph(), &[KernelCode::Ptx { module: &module, ptx: TILES, entry, name: "tiles.cu" }])
    }

    fn row_sig(name: &str) -> KernelSig {
        KernelSig::new(name).buffer("x", Access::ReadWrite).scalar("cols", ScalarType::U32)
    }

    #[test]
    fn a_true_map_is_accepted_as_verified_and_a_contradicted_one_refused_naming_node_param_and_instruction() {
        let row = TileMap::linear(400, 400).unwrap();
        let plan = graph(row_sig("row"), 8, 128, 3200, &[Arg::Scalar(Scalar::u32(100))], &[("x", row.clone())]);
        let c = check(&plan, "row").unwrap();
        assert_eq!(c.accepted, vec![Accepted { node: NodeId(0), param: "x".into(), vouched: None }]);
        let plan = graph(row_sig("row_next"), 8, 128, 3600, &[Arg::Scalar(Scalar::u32(100))], &[("x", row)]);
        let e = check(&plan, "row_next").err().unwrap();
        let msg = e.to_string();
        assert!(matches!(e, TileError::Contradicted { .. }), "{msg}");
        assert!(msg.starts_with("node 0 (row_next), param `x`: kernel `row_next`'s code (tiles.cu (PTX)) contradicts the tile map: `st.global."), "{msg}");
        assert!(msg.contains("(tiles.cu:14, line "), "names the source line: {msg}");
        assert!(msg.contains("in block [0, 0, 0], thread [0, 0, 0] touches bytes [400, 404) of the param's slice"), "{msg}");
        assert_eq!(e.kind(), ostinato::ErrorKind::Bind);
    }

    #[test]
    fn an_unverifiable_map_is_refused_unless_vouched() {
        let sig = |vouched: bool| {
            let s = KernelSig::new("chase").buffer("out", Access::Write);
            let s = if vouched { s.buffer_vouched("x", Access::Read) } else { s.buffer("x", Access::Read) };
            s.buffer("idx", Access::Read)
        };
        let maps = [("out", TileMap::linear(256, 256).unwrap()), ("x", TileMap::linear(256, 256).unwrap())];
        let e = check(&graph(sig(false), 4, 64, 1024, &[], &maps), "chase").err().unwrap().to_string();
        assert!(
            e.starts_with(
                "node 0 (chase), param `x`: the tile map cannot be verified from kernel `chase`'s code (tiles.cu (PTX)): the address of `ld.global.f32"
            ),
            "{e}"
        );
        assert!(e.contains("depends on a value loaded from memory by `ld.global.u32"), "{e}");
        assert!(e.ends_with("declare the param `vouched` if you know each block stays within its tile"), "{e}");
        let c = check(&graph(sig(true), 4, 64, 1024, &[], &maps), "chase").unwrap();
        assert_eq!(c.accepted[0], Accepted { node: NodeId(0), param: "out".into(), vouched: None });
        assert_eq!(c.accepted[1].param, "x");
        assert!(c.accepted[1].vouched.as_deref().is_some_and(|w| w.contains("loaded from memory")), "{:?}", c.accepted[1]);
    }

    #[test]
    fn a_patched_slot_is_checked_before_it_is_kept() {
        let mut g = Graph::new();
        let out = g.add_buffer("out", 32).unwrap();
        let x = g.add_buffer("x", 8 * 64).unwrap();
        let stride = g.add_slot("stride", Scalar::u32(16)).unwrap();
        let k = g.add_kernel(KernelSig::new("strided").buffer("out", Access::Write).buffer("x", Access::Read).scalar("stride", ScalarType::U32)).unwrap();
        let map = TileMap::new(vec![TileRange::span(0, [64, 0, 0], 4)]).unwrap();
        g.add_launch_tiled(k, Launch::linear(8, 32), &[Arg::Whole(out), Arg::Whole(x), Arg::Slot(stride)], &[("x", map)], &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        let mut c = check(&plan, "strided").unwrap();
        let e = c.check_patch(plan.graph(), stride, Scalar::u32(15)).unwrap_err();
        assert!(matches!(e, TileError::Contradicted { .. }), "{e}");
        assert_eq!(c.values[stride.index()], Scalar::u32(16), "a refused value is not kept");
        c.check_patch(plan.graph(), stride, Scalar::u32(16)).unwrap();
        c.patched(stride, Scalar::u32(16));
    }

    #[test]
    fn code_not_read_needs_a_vouched_param_and_built_ins_are_left_to_their_stated_footprint() {
        let row = TileMap::linear(400, 400).unwrap();
        let plan = graph(row_sig("row"), 8, 128, 3200, &[Arg::Scalar(Scalar::u32(100))], &[("x", row.clone())]);
        let e = TileChecks::check_graph(plan.graph(), &[KernelCode::Unread("machine code: the analysis reads PTX".into())]).err().unwrap().to_string();
        assert!(e.contains("the analysis does not read this code (machine code: the analysis reads PTX)"), "{e}");
        let c = TileChecks::check_graph(plan.graph(), &[KernelCode::Stated]).unwrap();
        assert!(c.accepted.is_empty());
        let vouched = KernelSig::new("row").buffer_vouched("x", Access::ReadWrite).scalar("cols", ScalarType::U32);
        let plan = graph(vouched, 8, 128, 3200, &[Arg::Scalar(Scalar::u32(100))], &[("x", row)]);
        assert!(TileChecks::check_graph(plan.graph(), &[KernelCode::Unread("machine code".into())]).unwrap().accepted[0].vouched.is_some());
    }

    #[test]
    fn only_slots_that_feed_a_verdict_are_checked_when_patched() {
        // The built-in mix read as a user's kernel: `n_out` bounds its loop, `salt` is only data.
        let ptx = include_str!("../tests/fixtures/tiles_builtins.ptx");
        let mut g = Graph::new();
        let (out, inp) = (g.add_buffer("out", 4 * 512).unwrap(), g.add_buffer("inp", 4 * 512).unwrap());
        let (n, salt) = (g.add_slot("n", Scalar::u32(512)).unwrap(), g.add_slot("salt", Scalar::u32(3)).unwrap());
        let sig = KernelSig::new("mix").buffer("out", Access::ReadWrite).buffer("inp", Access::Read);
        let k = g.add_kernel(sig.scalar("n_out", ScalarType::U32).scalar("n_in", ScalarType::U32).scalar("salt", ScalarType::U32)).unwrap();
        let row = TileMap::linear(256, 256).unwrap();
        let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Slot(n), Arg::Scalar(Scalar::u32(512)), Arg::Slot(salt)];
        g.add_launch_tiled(k, Launch::linear(8, 64), &args, &[("out", row.clone()), ("inp", row)], &[]).unwrap();
        let module = crate::contract::module_info(ptx, &[]);
        let mut c = TileChecks::check_graph(&g, &[KernelCode::Ptx { module: &module, ptx, entry: "mix", name: "ostinato.cu" }]).unwrap();
        assert_eq!(c.accepted.iter().filter(|a| a.vouched.is_none()).count(), 2);
        assert_eq!((c.readers[n.index()].len(), c.readers[salt.index()].len()), (1, 0));
        // n past the grid's threads: each block's rows no longer hold.
        assert!(c.check_patch(&g, n, Scalar::u32(1024)).is_err());
        assert!(c.check_patch(&g, salt, Scalar::u32(u32::MAX)).is_ok());
    }
}
