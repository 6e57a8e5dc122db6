//! A node's tile maps checked against its WGSL (or naga-read SPIR-V) kernel, so that a user's kernel of
//! many workgroups fuses block by block on Vulkan from maps the code is shown to keep, as on CUDA from
//! its PTX (`docs/contract.md`, "Tile maps"). The check reads the module as written (before the
//! element-offset rewrite: index 0 of a binding is byte 0 of the param's slice).
//!
//! Every access through a storage binding (a load, a store, an atomic, in the entry point or a function
//! it calls) is followed to a byte range of the binding, an affine form of the workgroup id plus a
//! range ([`crate::tile_forms`]): built-ins, the node's scalars, literals and `+ - *`, and `/ % & >> <<`
//! by constants; a loop counter in its `for` loop (`var c = init; c < bound; c = c + step`) takes
//! `[init, bound)`. Conditions are not followed, so each range covers what the access may touch. Then:
//!
//! - where the range moves with the workgroup exactly as every range of the map does (its coefficients
//!   are the map's strides), workgroup 0 stands for all: its range must lie in its tile;
//! - otherwise each workgroup is checked, up to [`BLOCK_BUDGET`] of them.
//!
//! A map is **verified** only if every access of its param is. Anything else — a value loaded from
//! memory or from a slot in an index, a product of two workgroup-dependent values, an operation that
//! may wrap, a pointer passed to a function — leaves it unverified, with why and where: the node is then
//! ordered as a whole (fail closed), never fused block by block on a map the code may break.

use std::collections::HashMap;

use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{AddressSpace, BinaryOperator, BuiltIn, Expression, Function, GlobalVariable, Handle, LocalVariable, Module, Statement, TypeInner};
use ostinato::tiles::{block_at, block_count};
use ostinato::{KernelSig, Launch, ParamKind, Scalar, ScalarType, TileMap};

use crate::tile_flow::{forget, join, literal, local_root, step_of, stores, Env};
use crate::tile_forms::{Form, IntRange, Val};

/// The most workgroups an access is checked over one by one, where its range does not move with the
/// workgroup as the map does.
pub(crate) const BLOCK_BUDGET: u64 = 1 << 16;
/// The largest workgroup whose invocations are checked one by one where their joined ranges leave the
/// tile.
const THREAD_BUDGET: u64 = 1024;
/// The deepest nesting of blocks, calls and expressions the check follows.
pub(crate) const MAX_DEPTH: u32 = 200;

/// Why a check failed: an access with no range, or a range outside the tile.
enum Miss {
    Unknown(String),
    Range(String),
}

/// A kernel's code as the tile check reads it.
pub(crate) struct TileCode {
    module: Module,
    info: ModuleInfo,
    layouter: naga::proc::Layouter,
    entry: usize,
    /// Storage binding `i` (the `i`-th buffer param)'s variable.
    buffers: Vec<Option<Handle<GlobalVariable>>>,
    /// The scalars' struct variable and, per member, the scalar param it is (index among the
    /// signature's scalars).
    params: Option<(Handle<GlobalVariable>, Vec<Option<usize>>)>,
    workgroup: [u32; 3],
    /// WGSL text, for line numbers in messages, and the kernel's name.
    source: Option<String>,
    kernel: String,
}

impl std::fmt::Debug for TileCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TileCode({})", self.module.entry_points[self.entry].name)
    }
}

/// How the Vulkan backend takes one declared tile map ([`crate::VulkanExec::tile_maps`]): what lets it
/// relate the node's workgroups to another's, or why it orders the node as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapUse {
    pub node: ostinato::NodeId,
    pub param: String,
    pub kept: Result<MapKept, String>,
}

/// Why a map is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKept {
    /// Every access of the param was shown to stay in its workgroup's tile (this module).
    Verified,
    /// The param is declared `vouched`.
    Vouched,
    /// A built-in's stated footprint, checked by the core when the node is recorded.
    Stated,
}

/// Where a params struct lives: a `var<immediate>` (WGSL) or the storage binding after the buffers.
#[derive(Clone, Copy)]
pub(crate) enum ParamsAt {
    Immediate,
    Binding(u32),
}

impl TileCode {
    /// The check's view of `module` (validated as `info`) for `sig`: entry `entry`, buffer param `i` at
    /// binding `i` of group 0, the scalars in a struct at their natural offsets (`scalar_offsets`).
    pub(crate) fn new(
        module: &Module,
        info: ModuleInfo,
        sig: &KernelSig,
        entry: &str,
        scalar_offsets: &[u32],
        params_at: ParamsAt,
        source: Option<&str>,
    ) -> Result<TileCode, String> {
        let e = module.entry_points.iter().position(|p| p.name == entry).ok_or_else(|| format!("no entry point `{entry}`"))?;
        let n_buf = sig.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer(_))).count() as u32;
        let at = |b: u32| {
            module.global_variables.iter().find(|(_, v)| v.binding == Some(naga::ResourceBinding { group: 0, binding: b }) && is_storage(v)).map(|(h, _)| h)
        };
        let buffers = (0..n_buf).map(at).collect();
        let params_var = match params_at {
            ParamsAt::Immediate => module.global_variables.iter().find(|(_, v)| v.space == AddressSpace::Immediate).map(|(h, _)| h),
            ParamsAt::Binding(b) => at(b),
        };
        let scalar_types: Vec<ScalarType> = sig.params.iter().filter_map(|p| if let ParamKind::Scalar(t) = p.kind { Some(t) } else { None }).collect();
        let params = params_var.map(|p| {
            let members = match &module.types[module.global_variables[p].ty].inner {
                TypeInner::Struct { members, .. } => members
                    .iter()
                    .map(|m| {
                        let k = scalar_offsets.iter().position(|&o| o == m.offset)?;
                        let same = matches!((&module.types[m.ty].inner, scalar_types.get(k)?),
                            (TypeInner::Scalar(s), t) if IntRange::of(*s) == int_range(*t));
                        same.then_some(k)
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (p, members)
        });
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).map_err(|e| format!("laying out its types: {e}"))?;
        let workgroup = module.entry_points[e].workgroup_size;
        let source = source.map(str::to_string);
        Ok(TileCode { module: module.clone(), info, layouter, entry: e, buffers, params, workgroup, source, kernel: sig.name.clone() })
    }

    /// Whether every access of buffer param `buffer` (its index among the buffers) by workgroup `b` of
    /// `launch` lies in `map`'s tile of `b`, with the node's `scalars` (`None`: a slot): `Err` says why
    /// not, naming the access.
    pub(crate) fn check(&self, buffer: usize, map: &TileMap, launch: &Launch, scalars: &[Option<Scalar>]) -> Result<(), String> {
        let Some(Some(var)) = self.buffers.get(buffer) else { return Ok(()) };
        match self.check_as(*var, map, launch, scalars, None) {
            Err(Miss::Range(why)) => {
                // Ranges over the workgroup's invocations may join what each invocation touches apart (the
                // rows of a 2-D tile): each invocation on its own, where the workgroup is small enough.
                let [x, y, z] = self.workgroup;
                if u64::from(x) * u64::from(y) * u64::from(z) > THREAD_BUDGET {
                    return Err(why);
                }
                for t in (0..z).flat_map(|k| (0..y).flat_map(move |j| (0..x).map(move |i| [i, j, k]))) {
                    self.check_as(*var, map, launch, scalars, Some(t)).map_err(|m| match m {
                        Miss::Range(w) | Miss::Unknown(w) => format!("{w} (invocation {t:?})"),
                    })?;
                }
                Ok(())
            }
            Err(Miss::Unknown(why)) => Err(why),
            Ok(()) => Ok(()),
        }
    }

    /// The check with the local invocation id a range (`None`) or one invocation's.
    fn check_as(&self, var: Handle<GlobalVariable>, map: &TileMap, launch: &Launch, scalars: &[Option<Scalar>], thread: Option<[u32; 3]>) -> Result<(), Miss> {
        let mut walk = Walk { code: self, grid: launch.grid, scalars, found: Vec::new(), var, thread, depth: 0, too_deep: false };
        let ep = &self.module.entry_points[self.entry];
        let mut frame = Frame::new(&ep.function, self.info.get_entry_point(self.entry), None);
        walk.function(&mut frame);
        for f in &walk.found {
            match f {
                Found::Unknown { why, at } => return Err(Miss::Unknown(format!("{}: {why}", self.at(*at)))),
                Found::Bytes { start, len, at } => {
                    check_extent(map, launch.grid, *start, *len).map_err(|why| Miss::Range(format!("{}: {why}", self.at(*at))))?
                }
            }
        }
        Ok(())
    }

    fn at(&self, span: naga::Span) -> String {
        match (&self.source, span.is_defined()) {
            (Some(src), true) => format!("kernel `{}`, the access at line {}", self.kernel, span.location(src).line_number),
            _ => format!("kernel `{}`, an access", self.kernel),
        }
    }
}

fn is_storage(v: &GlobalVariable) -> bool {
    matches!(v.space, AddressSpace::Storage { .. })
}

fn int_range(t: ScalarType) -> Option<IntRange> {
    match t {
        ScalarType::U32 => Some(IntRange::U32),
        ScalarType::I32 => Some(IntRange::I32),
        ScalarType::U64 => Some(IntRange::U64),
        ScalarType::I64 => Some(IntRange::I64),
        _ => None,
    }
}

#[cfg(test)]
thread_local! {
    /// A mutation for the tests: workgroup 0 stands for every workgroup even where the range does not
    /// move as the map does.
    pub(crate) static IGNORE_STRIDES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn ignore_strides() -> bool {
    #[cfg(test)]
    {
        IGNORE_STRIDES.with(|c| c.get())
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// Whether the bytes `[start, start + len)` every workgroup of `grid` may touch lie in its tile.
fn check_extent(map: &TileMap, grid: [u32; 3], start: Form, len: u64) -> Result<(), String> {
    let (least, _) = start.extremes(grid);
    if least < 0 {
        return Err(format!("may touch byte {least}, before the param's slice"));
    }
    let len = i128::from(len);
    let moves_with_map = ignore_strides() || map.ranges().iter().all(|r| (0..3).all(|d| grid[d] == 1 || i128::from(r.stride[d]) == start.coef[d]));
    let blocks: Box<dyn Iterator<Item = [u32; 3]>> = if moves_with_map {
        // The range and the tile move alike: workgroup 0 stands for every workgroup.
        Box::new(std::iter::once([0, 0, 0]))
    } else if block_count(grid) <= BLOCK_BUDGET {
        Box::new((0..block_count(grid)).map(move |i| block_at(grid, i)))
    } else {
        return Err(format!(
            "its offset does not move with the workgroup as the map does (workgroup strides {:?} bytes), and the grid has more than {BLOCK_BUDGET} workgroups to check one by one",
            start.coef
        ));
    };
    for b in blocks {
        let (lo, hi) = start.at(b);
        let (lo, end) = (u64::try_from(lo).unwrap_or(u64::MAX), u64::try_from(hi + len).unwrap_or(u64::MAX));
        if !map.covers(b, lo, end) {
            return Err(format!("workgroup {b:?} may touch bytes [{lo}, {end}) of the param's slice, outside its tile"));
        }
    }
    Ok(())
}

/// An access of the checked binding: its byte range, or why it has none.
enum Found {
    Bytes { start: Form, len: u64, at: naga::Span },
    Unknown { why: String, at: naga::Span },
}

/// One function being walked: its arguments' values (a callee's), the values of the expressions met.
struct Frame<'f> {
    f: &'f Function,
    info: &'f FunctionInfo,
    args: Option<Vec<Val>>,
    memo: HashMap<Handle<Expression>, Val>,
    /// A load of a local variable: the variable's value where the load was emitted.
    loads: HashMap<Handle<Expression>, Val>,
}

impl<'f> Frame<'f> {
    fn new(f: &'f Function, info: &'f FunctionInfo, args: Option<Vec<Val>>) -> Self {
        Frame { f, info, args, memo: HashMap::new(), loads: HashMap::new() }
    }
}

struct Walk<'a> {
    code: &'a TileCode,
    grid: [u32; 3],
    scalars: &'a [Option<Scalar>],
    /// The binding whose accesses are collected.
    var: Handle<GlobalVariable>,
    /// One invocation's local id, or `None`: all of the workgroup's.
    thread: Option<[u32; 3]>,
    found: Vec<Found>,
    /// How deep the walk is in nested blocks, calls and expressions, and whether it went too deep.
    depth: u32,
    too_deep: bool,
}

impl Walk<'_> {
    /// Walks a function's body from its variables' initial values.
    fn function(&mut self, fr: &mut Frame) {
        let mut env = Env::new();
        for (v, lv) in fr.f.local_variables.iter() {
            let val = match lv.init {
                Some(i) => self.eval(fr, i),
                None => Val::Top("a variable read before it is stored"),
            };
            env.insert(v, val);
        }
        let f = fr.f;
        self.block(fr, &f.body, &mut env);
    }

    fn block(&mut self, fr: &mut Frame, block: &naga::Block, env: &mut Env) {
        if !self.enter() {
            return;
        }
        for (s, span) in block.span_iter() {
            self.statement(fr, s, *span, env);
        }
        self.depth -= 1;
    }

    /// One level deeper into nested blocks, calls or expressions; past [`MAX_DEPTH`] the walk stops
    /// there and the binding is unverified (the walk's recursion stays bounded whatever the code).
    fn enter(&mut self) -> bool {
        if self.depth >= MAX_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                self.found.push(Found::Unknown { why: format!("code nested more than {MAX_DEPTH} deep"), at: naga::Span::UNDEFINED });
            }
            return false;
        }
        self.depth += 1;
        true
    }

    fn statement(&mut self, fr: &mut Frame, s: &Statement, span: naga::Span, env: &mut Env) {
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    if let Expression::Load { pointer } = fr.f.expressions[h] {
                        match local_root(fr.f, pointer) {
                            Some((v, true)) => {
                                fr.loads.insert(h, env.get(&v).cloned().unwrap_or(Val::Top("a variable the check cannot follow")));
                            }
                            Some((_, false)) => {}
                            None => self.access(fr, pointer, fr.f.expressions.get_span(h)),
                        }
                    }
                }
            }
            Statement::Block(b) => self.block(fr, b, env),
            Statement::If { accept, reject, .. } => {
                let (mut a, mut r) = (env.clone(), env.clone());
                self.block(fr, accept, &mut a);
                self.block(fr, reject, &mut r);
                *env = join(&a, &r);
            }
            Statement::Switch { cases, .. } => {
                // Each case from the state before the switch, every variable a case changes unknown
                // (a case may fall through into the next).
                let mut start = env.clone();
                for c in cases {
                    forget(fr.f, &c.body, &mut start);
                }
                let mut out: Option<Env> = None;
                for c in cases {
                    let mut e = start.clone();
                    self.block(fr, &c.body, &mut e);
                    out = Some(match out {
                        None => e,
                        Some(o) => join(&o, &e),
                    });
                }
                *env = out.unwrap_or(start);
            }
            Statement::Loop { body, continuing, break_if } => self.for_loop(fr, body, continuing, *break_if, env),
            Statement::Store { pointer, value } => match local_root(fr.f, *pointer) {
                Some((v, true)) => {
                    let val = self.eval(fr, *value);
                    env.insert(v, val);
                }
                Some((v, false)) => {
                    env.insert(v, Val::Top("a variable the check cannot follow"));
                }
                None => self.access(fr, *pointer, span),
            },
            Statement::Atomic { pointer, .. } => self.access(fr, *pointer, span),
            Statement::WorkGroupUniformLoad { pointer, .. } => self.access(fr, *pointer, span),
            Statement::Call { function, arguments, .. } => {
                let mut args = Vec::with_capacity(arguments.len());
                for &a in arguments {
                    let pointer = is_pointer(&self.code.module, fr, a);
                    match local_root(fr.f, a) {
                        Some((v, _)) if pointer => {
                            env.insert(v, Val::Top("a variable a called function may change"));
                        }
                        _ => {}
                    }
                    if pointer && self.root_is_var(fr.f, a) {
                        self.found.push(Found::Unknown { why: "a pointer to the binding is passed to a function".into(), at: span });
                    }
                    args.push(self.eval(fr, a));
                }
                let callee = &self.code.module.functions[*function];
                let mut inner = Frame::new(callee, &self.code.info[*function], Some(args));
                self.function(&mut inner);
            }
            // No storage-buffer pointer in the rest (images, ray queries, subgroup values, barriers,
            // control flow out of a block).
            _ => {}
        }
    }

    /// A loop: every variable its body or continuing block stores is unknown inside and after it, but a
    /// `for` counter, which takes `[init, bound)` in the body after its guard.
    fn for_loop(&mut self, fr: &mut Frame, body: &naga::Block, continuing: &naga::Block, break_if: Option<Handle<Expression>>, env: &mut Env) {
        if !self.enter() {
            return;
        }
        self.for_loop_inner(fr, body, continuing, break_if, env);
        self.depth -= 1;
    }

    fn for_loop_inner(&mut self, fr: &mut Frame, body: &naga::Block, continuing: &naga::Block, break_if: Option<Handle<Expression>>, env: &mut Env) {
        let stepped = if break_if.is_none() { step_of(fr.f, continuing).filter(|(v, _)| !stores(fr.f, body, *v)) } else { None };
        let before = env.clone();
        forget(fr.f, body, env);
        forget(fr.f, continuing, env);
        // The step: a constant above 0 (a value the loop changes, or a variable's load not yet met,
        // is unknown here).
        let counter = stepped.and_then(|(v, e)| match self.eval(fr, e) {
            Val::Int(f) => f.as_constant().filter(|&k| k > 0).map(|k| (v, k)),
            _ => None,
        });
        let mut inner = env.clone();
        let mut guarded = false;
        for (s, span) in body.span_iter() {
            if !guarded && !matches!(s, Statement::Emit(_)) {
                guarded = true;
                if let (Some((v, step)), Statement::If { condition, accept, reject }) = (counter, s) {
                    if let Some(range) = self.counter_range(fr, v, step, *condition, accept, reject, &before) {
                        inner.insert(v, range);
                        continue;
                    }
                }
            }
            self.statement(fr, s, *span, &mut inner);
        }
        let mut cont = env.clone();
        self.block(fr, continuing, &mut cont);
    }

    /// The range of counter `v` (stepped by `step` in the continuing block, `v` before the loop in
    /// `before`) after the loop's guard `if condition {} else { break; }` (or `if condition { break; }`).
    #[allow(clippy::too_many_arguments)]
    fn counter_range(
        &mut self,
        fr: &mut Frame,
        v: Handle<LocalVariable>,
        step: i128,
        condition: Handle<Expression>,
        accept: &naga::Block,
        reject: &naga::Block,
        before: &Env,
    ) -> Option<Val> {
        let breaks = |b: &naga::Block| b.len() == 1 && matches!(b.first(), Some(Statement::Break));
        let stays_when_true = if accept.is_empty() && breaks(reject) {
            true
        } else if breaks(accept) && reject.is_empty() {
            false
        } else {
            return None;
        };
        let (mut condition, mut stays_when_true) = (condition, stays_when_true);
        while let Expression::Unary { op: naga::UnaryOperator::LogicalNot, expr } = fr.f.expressions[condition] {
            condition = expr;
            stays_when_true = !stays_when_true;
        }
        let Expression::Binary { op, left, right } = fr.f.expressions[condition] else { return None };
        let is_v = |e: Handle<Expression>| matches!(fr.f.expressions[e], Expression::Load { pointer } if matches!(fr.f.expressions[pointer], Expression::LocalVariable(x) if x == v));
        use BinaryOperator as B;
        // Normalise to `v < bound` or `v <= bound` holding in the body.
        let (strict, bound) = match (op, is_v(left), is_v(right), stays_when_true) {
            (B::Less, true, false, true) | (B::Greater, false, true, true) => (true, if is_v(left) { right } else { left }),
            (B::LessEqual, true, false, true) | (B::GreaterEqual, false, true, true) => (false, if is_v(left) { right } else { left }),
            (B::GreaterEqual, true, false, false) | (B::LessEqual, false, true, false) => (true, if is_v(left) { right } else { left }),
            (B::Greater, true, false, false) | (B::Less, false, true, false) => (false, if is_v(left) { right } else { left }),
            _ => return None,
        };
        let Val::Int(init) = before.get(&v)? else { return None };
        let Val::Int(bound) = self.eval(fr, bound) else { return None };
        let range = IntRange::of(scalar_of(&self.code.module, fr.f.local_variables[v].ty)?)?;
        let last = if strict { bound.hi - 1 } else { bound.hi };
        // The counter never steps past its type (a wrap would start it again from the bottom).
        if bound.extremes(self.grid).1 + step > range.max || init.extremes(self.grid).1 + step > range.max {
            return None;
        }
        if bound.coef == init.coef && init.lo <= last {
            // From `init` up to the bound, which moves with the workgroup as it does.
            return Some(Val::Int(Form { coef: init.coef, lo: init.lo, hi: last }));
        }
        if bound.block_free() && init.extremes(self.grid).0 + step > last {
            // One pass at most, in every workgroup (a grid-stride loop over no more elements than the
            // grid has invocations): the counter is its first value.
            return Some(Val::Int(*init));
        }
        None
    }

    /// Notes an access through `pointer` where it is the checked binding's.
    fn access(&mut self, fr: &mut Frame, pointer: Handle<Expression>, at: naga::Span) {
        if !self.root_is_var(fr.f, pointer) {
            return;
        }
        match self.extent(fr, pointer) {
            Ok((start, ty)) => match self.size(&ty) {
                Some(len) => self.found.push(Found::Bytes { start, len, at }),
                None => self.found.push(Found::Unknown { why: "it touches a whole runtime-sized array".into(), at }),
            },
            Err(why) => self.found.push(Found::Unknown { why, at }),
        }
    }

    fn root_is_var(&self, f: &Function, e: Handle<Expression>) -> bool {
        crate::access::root(f, e) == Some(self.var)
    }

    /// The byte offset of what `pointer` points at, in the binding, and its type.
    fn extent(&mut self, fr: &mut Frame, pointer: Handle<Expression>) -> Result<(Form, Ty), String> {
        if !self.enter() {
            return Err("a pointer nested too deep".into());
        }
        let r = self.extent_inner(fr, pointer);
        self.depth -= 1;
        r
    }

    fn extent_inner(&mut self, fr: &mut Frame, pointer: Handle<Expression>) -> Result<(Form, Ty), String> {
        let m = &self.code.module;
        match fr.f.expressions[pointer] {
            Expression::GlobalVariable(g) => Ok((Form::constant(0), Ty::Type(m.global_variables[g].ty))),
            Expression::Access { base, index } => {
                let (start, ty) = self.extent(fr, base)?;
                let i = match self.eval(fr, index) {
                    Val::Int(i) => i,
                    Val::Top(why) => return Err(format!("its index depends on {why}")),
                    Val::Vec(_) => return Err("its index is a vector".into()),
                };
                let (stride, elem) = self.element(&ty)?;
                Ok((start.add(i.scale(stride).ok_or("an offset past what the check holds")?), elem))
            }
            Expression::AccessIndex { base, index } => {
                let (start, ty) = self.extent(fr, base)?;
                if let Ty::Type(t) = ty {
                    if let TypeInner::Struct { members, .. } = &m.types[t].inner {
                        let member = members.get(index as usize).ok_or("a struct member past the struct".to_string())?;
                        return Ok((start.add(Form::constant(i128::from(member.offset))), Ty::Type(member.ty)));
                    }
                }
                let (stride, elem) = self.element(&ty)?;
                Ok((start.add(Form::constant(stride * i128::from(index))), elem))
            }
            _ => Err("its pointer is not the binding indexed".into()),
        }
    }

    /// The stride and type of an element of an array or vector type.
    fn element(&self, ty: &Ty) -> Result<(i128, Ty), String> {
        let Ty::Type(t) = ty else { return Err("an index into a scalar".into()) };
        match self.code.module.types[*t].inner {
            TypeInner::Array { base, stride, .. } => Ok((i128::from(stride), Ty::Type(base))),
            TypeInner::Vector { scalar, .. } => Ok((i128::from(scalar.width), Ty::Scalar(u64::from(scalar.width)))),
            TypeInner::Matrix { .. } => Err("an index into a matrix".into()),
            _ => Err("an index into a type the check does not follow".into()),
        }
    }

    fn size(&self, ty: &Ty) -> Option<u64> {
        match ty {
            Ty::Scalar(w) => Some(*w),
            Ty::Type(t) => match self.code.module.types[*t].inner {
                TypeInner::Array { size: naga::ArraySize::Dynamic, .. } => None,
                _ => Some(u64::from(self.code.layouter[*t].size)),
            },
        }
    }

    fn eval(&mut self, fr: &mut Frame, h: Handle<Expression>) -> Val {
        if let Some(v) = fr.loads.get(&h).or_else(|| fr.memo.get(&h)) {
            return v.clone();
        }
        if !self.enter() {
            return Val::Top("an expression nested too deep");
        }
        let v = self.compute(fr, h);
        self.depth -= 1;
        fr.memo.insert(h, v.clone());
        v
    }

    fn compute(&mut self, fr: &mut Frame, h: Handle<Expression>) -> Val {
        let m = &self.code.module;
        let v = match fr.f.expressions[h] {
            Expression::Literal(l) => literal(l),
            Expression::Constant(c) => match m.global_expressions[m.constants[c].init] {
                naga::Expression::Literal(l) => literal(l),
                _ => Val::Top("a constant the check does not follow"),
            },
            Expression::ZeroValue(_) => Val::Int(Form::constant(0)),
            Expression::FunctionArgument(i) => match &fr.args {
                Some(args) => args.get(i as usize).cloned().unwrap_or(Val::Top("a missing argument")),
                None => self.builtin(fr.f, i),
            },
            Expression::AccessIndex { base, index } => match self.eval(fr, base) {
                Val::Vec(c) => c.get(index as usize).map_or(Val::Top("a component past the vector"), |f| Val::Int(*f)),
                Val::Int(_) => Val::Top("a component of a scalar"),
                top => top,
            },
            Expression::Load { pointer } => self.scalar_param(fr.f, pointer),
            Expression::Binary { op, left, right } => {
                let (a, b) = (self.eval(fr, left), self.eval(fr, right));
                self.binary(op, a, b)
            }
            Expression::Unary { op: naga::UnaryOperator::Negate, expr } => match self.eval(fr, expr) {
                Val::Int(f) => Val::Int(f.neg()),
                _ => Val::Top("a negated value the check does not follow"),
            },
            Expression::Select { accept, reject, .. } => {
                let (a, r) = (self.eval(fr, accept), self.eval(fr, reject));
                a.join(&r)
            }
            Expression::As { expr, convert: Some(_), .. } => self.eval(fr, expr),
            Expression::Compose { ref components, .. } => {
                let c: Vec<Val> = components.iter().map(|&c| self.eval(fr, c)).collect();
                vector(c)
            }
            Expression::Splat { size, value } => match self.eval(fr, value) {
                Val::Int(f) => Val::Vec(vec![f; size as usize]),
                top => top,
            },
            Expression::Swizzle { size, vector, pattern } => match self.eval(fr, vector) {
                Val::Vec(c) => pattern[..size as usize]
                    .iter()
                    .map(|&p| c.get(p as usize).copied())
                    .collect::<Option<Vec<Form>>>()
                    .map_or(Val::Top("a component past the vector"), Val::Vec),
                top => top,
            },
            _ => Val::Top("a value the check does not follow"),
        };
        // Every integer result within its type, or it may have wrapped.
        let range = match fr.info[h].ty.inner_with(&m.types) {
            TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } => IntRange::of(*s),
            _ => None,
        };
        match (v, range) {
            (Val::Int(f), Some(r)) => f.fit(r, self.grid),
            (Val::Vec(c), Some(r)) => {
                if c.iter().all(|f| matches!(f.fit(r, self.grid), Val::Int(_))) {
                    Val::Vec(c)
                } else {
                    Val::Top("a value that may wrap around its type")
                }
            }
            (Val::Top(w), _) => Val::Top(w),
            (_, None) => Val::Top("a value that is not an integer"),
        }
    }

    fn binary(&self, op: BinaryOperator, a: Val, b: Val) -> Val {
        use BinaryOperator as B;
        let (a, b) = match (a, b) {
            (Val::Int(a), Val::Int(b)) => (a, b),
            (Val::Vec(a), Val::Vec(b)) if a.len() == b.len() => {
                let c: Vec<Val> = a.into_iter().zip(b).map(|(x, y)| self.binary(op, Val::Int(x), Val::Int(y))).collect();
                return vector(c);
            }
            (Val::Top(w), _) | (_, Val::Top(w)) => return Val::Top(w),
            _ => return Val::Top("mixed scalars and vectors"),
        };
        let constant = b.as_constant();
        let r = match op {
            B::Add => Some(a.add(b)),
            B::Subtract => Some(a.sub(b)),
            B::Multiply => a.mul(b),
            B::Divide => constant.and_then(|d| a.div(d, self.grid)),
            B::Modulo => constant.and_then(|d| a.rem(d, self.grid)),
            B::And => constant.and_then(|k| a.and(k, self.grid)),
            // A shader takes a shift amount modulo its operand's width: only amounts below 32 (every
            // width's) are followed.
            B::ShiftLeft => constant.filter(|k| (0..32).contains(k)).and_then(|k| a.scale(1 << k)),
            B::ShiftRight => constant.filter(|k| (0..32).contains(k)).and_then(|k| a.div(1 << k, self.grid)),
            _ => None,
        };
        r.map_or(Val::Top("an operation whose result is not a form of the workgroup id"), Val::Int)
    }

    /// A built-in argument of the entry point.
    fn builtin(&self, f: &Function, i: u32) -> Val {
        let block = self.code.workgroup.map(i128::from);
        // Each local id component: one invocation's, or every one of the workgroup.
        let local: [Form; 3] = match self.thread {
            Some(t) => t.map(|c| Form::constant(i128::from(c))),
            None => block.map(|n| Form::range(0, n - 1)),
        };
        match f.arguments.get(i as usize).and_then(|a| a.binding.as_ref()) {
            Some(naga::Binding::BuiltIn(b)) => match b {
                BuiltIn::WorkGroupId => Val::Vec((0..3).map(|d| Form::along(d, 1, 0, 0)).collect()),
                BuiltIn::LocalInvocationId => Val::Vec(local.to_vec()),
                BuiltIn::GlobalInvocationId => Val::Vec((0..3).map(|d| Form::along(d, block[d], 0, 0).add(local[d])).collect()),
                BuiltIn::NumWorkGroups => Val::Vec(self.grid.iter().map(|&n| Form::constant(i128::from(n))).collect()),
                BuiltIn::LocalInvocationIndex => Val::Int(match self.thread {
                    Some([x, y, z]) => Form::constant(i128::from(x) + block[0] * (i128::from(y) + block[1] * i128::from(z))),
                    None => Form::range(0, block[0] * block[1] * block[2] - 1),
                }),
                _ => Val::Top("a built-in the check does not follow"),
            },
            _ => Val::Top("an entry-point argument that is not a built-in"),
        }
    }

    /// A load of one of the node's scalars from the params struct.
    fn scalar_param(&self, f: &Function, pointer: Handle<Expression>) -> Val {
        let Some((params, members)) = &self.code.params else { return Val::Top("a value loaded from memory") };
        let Expression::AccessIndex { base, index } = f.expressions[pointer] else { return Val::Top("a value loaded from memory") };
        if !matches!(f.expressions[base], Expression::GlobalVariable(g) if g == *params) {
            return Val::Top("a value loaded from memory");
        }
        match members.get(index as usize).copied().flatten().map(|k| self.scalars.get(k).copied().flatten()) {
            Some(Some(s)) => Val::Int(Form::constant(scalar_value(s))),
            Some(None) => Val::Top("a scalar taken from a slot (patchable after the check)"),
            None => Val::Top("a scalar that is not an integer param"),
        }
    }
}

/// The type of what a pointer points at: a type of the module, or a vector's component (its width).
#[derive(Clone, Copy)]
enum Ty {
    Type(Handle<naga::Type>),
    Scalar(u64),
}

fn scalar_value(s: Scalar) -> i128 {
    match s.ty {
        ScalarType::I32 => i128::from(s.bits as u32 as i32),
        ScalarType::I64 => i128::from(s.bits as i64),
        _ => i128::from(s.bits),
    }
}

fn vector(c: Vec<Val>) -> Val {
    let mut out = Vec::with_capacity(c.len());
    for v in c {
        match v {
            Val::Int(f) => out.push(f),
            Val::Top(w) => return Val::Top(w),
            Val::Vec(_) => return Val::Top("a vector of vectors"),
        }
    }
    Val::Vec(out)
}

fn scalar_of(m: &Module, ty: Handle<naga::Type>) -> Option<naga::Scalar> {
    match m.types[ty].inner {
        TypeInner::Scalar(s) => Some(s),
        _ => None,
    }
}

fn is_pointer(m: &Module, fr: &Frame, e: Handle<Expression>) -> bool {
    matches!(fr.info[e].ty.inner_with(&m.types), TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. })
}

#[cfg(test)]
#[path = "tilemaps_tests.rs"]
mod tests;
