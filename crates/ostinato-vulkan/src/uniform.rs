//! Whether a kernel's workgroup barriers lie in uniform control flow — every invocation of a workgroup
//! reaches each of them, or none does — so that it may keep them as a fused body (`crate::fusion`). naga's
//! validator records that a barrier needs uniform control flow but does not check it (its analysis
//! checks only derivatives), so this module does, conservatively:
//!
//! - **Uniform values**: literals and constants, the kernel's scalars (the params struct: one value
//!   for every invocation, also once the fused entry copies it into each invocation's private
//!   variable), the workgroup id and count, `arrayLength`, `workgroupUniformLoad`'s result, operations
//!   on uniform values, and a local variable every store to which is a uniform value in uniform control
//!   flow (to a fixpoint). Anything else — the local and global invocation ids, loads from storage or
//!   workgroup memory, calls' results — varies.
//! - **Uniform control flow**: the function's start; an `if` or `switch` on a uniform value inside
//!   uniform flow; a loop in uniform flow whose every way out (`break`, `continue`, `return`, `break
//!   if`) is taken under uniform conditions only. After a `return` in varying flow, the rest of the
//!   function varies.
//! - A barrier (`workgroupBarrier`, `storageBarrier`, `workgroupUniformLoad`) must be in uniform flow,
//!   and so must a call to a function that has one; the callee is checked with its arguments'
//!   uniformity.

use std::collections::HashSet;

use naga::{AddressSpace, Block, BuiltIn, Expression, Function, GlobalVariable, Handle, LocalVariable, Module, Span, Statement};

use crate::tile_flow::local_root;
use crate::tilemaps::MAX_DEPTH;

/// `Ok` where every barrier of entry point `entry` (and of the functions it calls) lies in uniform
/// control flow; else the first that may not, with its line where `source` is given. `params` is the
/// kernel's scalars' variable (uniform).
pub(crate) fn barriers_uniform(module: &Module, entry: usize, params: Option<Handle<GlobalVariable>>, source: Option<&str>) -> Result<(), String> {
    let f = &module.entry_points[entry].function;
    check_function(module, f, None, params).map_err(|span| match (source, span.is_defined()) {
        (Some(src), true) => format!("its barrier at line {} may be reached by some invocations of a workgroup and not others", span.location(src).line_number),
        _ => "a barrier of it may be reached by some invocations of a workgroup and not others".to_string(),
    })
}

/// Checks `f` (an entry point where `args` is `None`, else a callee with each argument's uniformity).
fn check_function(m: &Module, f: &Function, args: Option<&[bool]>, params: Option<Handle<GlobalVariable>>) -> Result<(), Span> {
    // The uniform variables: all to begin with, then those a store shows varying are dropped, until
    // nothing changes.
    let mut uniform_vars: HashSet<Handle<LocalVariable>> = f.local_variables.iter().map(|(h, _)| h).collect();
    loop {
        let mut flow = Flow { m, f, args, params, uniform_vars: &uniform_vars, varying: HashSet::new(), diverged: false, bad: None, depth: 0 };
        flow.block(&f.body, true);
        if flow.varying.is_empty() || flow.varying.iter().all(|v| !uniform_vars.contains(v)) {
            return flow.bad.map_or(Ok(()), Err);
        }
        let varying = flow.varying;
        uniform_vars.retain(|v| !varying.contains(v));
    }
}

struct Flow<'a> {
    m: &'a Module,
    f: &'a Function,
    args: Option<&'a [bool]>,
    params: Option<Handle<GlobalVariable>>,
    uniform_vars: &'a HashSet<Handle<LocalVariable>>,
    /// Variables a store shows varying in this pass.
    varying: HashSet<Handle<LocalVariable>>,
    /// Some invocations returned in varying flow: the rest of the function varies.
    diverged: bool,
    /// The first barrier (or call of a function with one) found in varying flow.
    bad: Option<Span>,
    /// How deep the walk is in nested blocks.
    depth: u32,
}

impl Flow<'_> {
    fn block(&mut self, b: &Block, uniform: bool) {
        if self.depth >= MAX_DEPTH {
            // Nested past what is followed: taken as a barrier in varying flow.
            self.flag(b.span_iter().next().map_or(Span::UNDEFINED, |(_, sp)| *sp));
            return;
        }
        self.depth += 1;
        self.block_inner(b, uniform);
        self.depth -= 1;
    }

    fn block_inner(&mut self, b: &Block, uniform: bool) {
        for (s, span) in b.span_iter() {
            let u = uniform && !self.diverged;
            match s {
                Statement::Store { pointer, value } => {
                    if let Some((v, _)) = local_root(self.f, *pointer) {
                        if !(u && self.value(*value) && self.indices(*pointer)) {
                            self.varying.insert(v);
                        }
                    }
                }
                Statement::Atomic { pointer, .. } => {
                    if let Some((v, _)) = local_root(self.f, *pointer) {
                        self.varying.insert(v);
                    }
                }
                Statement::Call { function, arguments, .. } => {
                    for &a in arguments {
                        if let Some((v, _)) = local_root(self.f, a) {
                            self.varying.insert(v);
                        }
                    }
                    let callee = &self.m.functions[*function];
                    if has_barrier(self.m, &callee.body) {
                        if !u {
                            self.flag(*span);
                        }
                        let args: Vec<bool> = arguments.iter().map(|&a| self.value(a)).collect();
                        if let Err(at) = check_function(self.m, callee, Some(&args), self.params) {
                            self.flag(at);
                        }
                    }
                }
                Statement::ControlBarrier(_) | Statement::MemoryBarrier(_) | Statement::WorkGroupUniformLoad { .. } if !u => self.flag(*span),
                Statement::If { condition, accept, reject } => {
                    let c = u && self.value(*condition);
                    self.block(accept, c);
                    self.block(reject, c);
                }
                Statement::Switch { selector, cases } => {
                    let c = u && self.value(*selector);
                    for case in cases {
                        self.block(&case.body, c);
                    }
                }
                Statement::Loop { body, continuing, break_if } => {
                    let c = u && break_if.is_none_or(|e| self.value(e)) && self.exits_uniform(body, false) && self.exits_uniform(continuing, false);
                    self.block(body, c);
                    self.block(continuing, c);
                }
                Statement::Return { .. } if !u => self.diverged = true,
                Statement::Block(inner) => self.block(inner, u),
                _ => {}
            }
        }
    }

    fn flag(&mut self, at: Span) {
        self.bad.get_or_insert(at);
    }

    /// Whether every `if` and `switch` in `b` that holds a way out of the loop (`break` and `continue`
    /// outside nested loops where `nested` is false; `return` anywhere) branches on a uniform value.
    fn exits_uniform(&self, b: &Block, nested: bool) -> bool {
        self.exits_uniform_at(b, nested, 0)
    }

    fn exits_uniform_at(&self, b: &Block, nested: bool, depth: u32) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        let exits_uniform = |b: &Block, nested: bool| self.exits_uniform_at(b, nested, depth + 1);
        b.iter().all(|s| match s {
            Statement::If { condition, accept, reject } => {
                (!(exits(accept, nested) || exits(reject, nested)) || self.value(*condition)) && exits_uniform(accept, nested) && exits_uniform(reject, nested)
            }
            Statement::Switch { selector, cases } => {
                (!cases.iter().any(|c| exits(&c.body, nested)) || self.value(*selector)) && cases.iter().all(|c| exits_uniform(&c.body, nested))
            }
            Statement::Block(inner) => exits_uniform(inner, nested),
            Statement::Loop { body, continuing, .. } => exits_uniform(body, true) && exits_uniform(continuing, true),
            _ => true,
        })
    }

    /// Whether the indices along a pointer into a local variable are uniform.
    fn indices(&self, mut e: Handle<Expression>) -> bool {
        loop {
            match self.f.expressions[e] {
                Expression::Access { base, index } => {
                    if !self.value(index) {
                        return false;
                    }
                    e = base;
                }
                Expression::AccessIndex { base, .. } => e = base,
                _ => return true,
            }
        }
    }

    /// Whether expression `e` has one value for every invocation of a workgroup (one nested past
    /// [`MAX_DEPTH`] counts as varying).
    fn value(&self, e: Handle<Expression>) -> bool {
        self.value_at(e, 0)
    }

    fn value_at(&self, e: Handle<Expression>, depth: u32) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        let value = |x: Handle<Expression>| self.value_at(x, depth + 1);
        match &self.f.expressions[e] {
            Expression::Literal(_) | Expression::Constant(_) | Expression::Override(_) | Expression::ZeroValue(_) => true,
            Expression::ArrayLength(_) | Expression::WorkGroupUniformLoadResult { .. } => true,
            Expression::FunctionArgument(i) => match self.args {
                Some(args) => args.get(*i as usize).copied().unwrap_or(false),
                None => matches!(
                    self.f.arguments.get(*i as usize).and_then(|a| a.binding.as_ref()),
                    Some(naga::Binding::BuiltIn(BuiltIn::WorkGroupId | BuiltIn::NumWorkGroups | BuiltIn::WorkGroupSize))
                ),
            },
            Expression::Load { pointer } => self.uniform_place(*pointer),
            Expression::Access { base, index } => value(*base) && value(*index),
            Expression::AccessIndex { base, .. } => value(*base),
            Expression::Splat { value: v, .. } => value(*v),
            Expression::Swizzle { vector, .. } => value(*vector),
            Expression::Compose { components, .. } => components.iter().all(|&c| value(c)),
            Expression::Unary { expr, .. } | Expression::As { expr, .. } => value(*expr),
            Expression::Binary { left, right, .. } => value(*left) && value(*right),
            Expression::Select { condition, accept, reject } => value(*condition) && value(*accept) && value(*reject),
            Expression::Relational { argument, .. } => value(*argument),
            Expression::Math { arg, arg1, arg2, arg3, .. } => [Some(*arg), *arg1, *arg2, *arg3].into_iter().flatten().all(value),
            _ => false,
        }
    }

    /// Whether a load through `pointer` gives every invocation one value: a uniform local variable,
    /// or the scalars (push constants, a uniform buffer, the params variable), at uniform indices.
    fn uniform_place(&self, pointer: Handle<Expression>) -> bool {
        if !self.indices(pointer) {
            return false;
        }
        let mut e = pointer;
        loop {
            match self.f.expressions[e] {
                Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => e = base,
                Expression::LocalVariable(v) => return self.uniform_vars.contains(&v),
                Expression::GlobalVariable(g) => {
                    let space = self.m.global_variables[g].space;
                    return Some(g) == self.params || matches!(space, AddressSpace::Immediate | AddressSpace::Uniform);
                }
                _ => return false,
            }
        }
    }
}

/// Whether `b` holds a `break` or `continue` (outside nested loops, unless `nested`) or a `return`
/// (code nested past [`MAX_DEPTH`]: taken to).
fn exits(b: &Block, nested: bool) -> bool {
    exits_at(b, nested, 0)
}

fn exits_at(b: &Block, nested: bool, depth: u32) -> bool {
    if depth >= MAX_DEPTH {
        return true;
    }
    let exits = |b: &Block, nested: bool| exits_at(b, nested, depth + 1);
    b.iter().any(|s| match s {
        Statement::Break | Statement::Continue => !nested,
        Statement::Return { .. } => true,
        Statement::Block(inner) => exits(inner, nested),
        Statement::If { accept, reject, .. } => exits(accept, nested) || exits(reject, nested),
        Statement::Switch { cases, .. } => cases.iter().any(|c| exits(&c.body, nested)),
        Statement::Loop { body, continuing, .. } => exits(body, true) || exits(continuing, true),
        _ => false,
    })
}

/// Whether `b`, or a function it calls, has a barrier (code nested past [`MAX_DEPTH`]: taken to).
pub(crate) fn has_barrier(m: &Module, b: &Block) -> bool {
    has_barrier_at(m, b, 0)
}

fn has_barrier_at(m: &Module, b: &Block, depth: u32) -> bool {
    if depth >= MAX_DEPTH {
        return true;
    }
    let has_barrier = |m: &Module, b: &Block| has_barrier_at(m, b, depth + 1);
    b.iter().any(|s| match s {
        Statement::ControlBarrier(_) | Statement::MemoryBarrier(_) | Statement::WorkGroupUniformLoad { .. } => true,
        Statement::Call { function, .. } => has_barrier(m, &m.functions[*function].body),
        Statement::Block(inner) => has_barrier(m, inner),
        Statement::If { accept, reject, .. } => has_barrier(m, accept) || has_barrier(m, reject),
        Statement::Switch { cases, .. } => cases.iter().any(|c| has_barrier(m, &c.body)),
        Statement::Loop { body, continuing, .. } => has_barrier(m, body) || has_barrier(m, continuing),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str) -> Result<(), String> {
        let src = format!(
            "struct P {{ n: u32 }}
var<immediate> p: P;
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
var<workgroup> t: array<u32, 64>;
fn sync_if(c: u32) {{ if (c > 3u) {{ workgroupBarrier(); }} }}
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{
{body}
}}"
        );
        let m = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
        barriers_uniform(&m, 0, None, Some(&src))
    }

    #[test]
    fn barriers_every_invocation_reaches_pass() {
        // A tree reduction: the loop's counter and exits are uniform.
        check("t[l.x] = x[l.x]; for (var o = 32u; o > 0u; o = o >> 1u) { workgroupBarrier(); if (l.x < o) { t[l.x] += t[l.x + o]; } } workgroupBarrier();")
            .unwrap();
        // Branches on the workgroup id and the scalars are uniform, and so is a variable set from them.
        check("if (wid.x > 2u) { return; } var k = p.n * 2u; if (k > 8u) { workgroupBarrier(); } sync_if(p.n);").unwrap();
        // A return after the last barrier.
        check("workgroupBarrier(); if (l.x > 3u) { return; } x[l.x] = 1u;").unwrap();
    }

    #[test]
    fn barriers_some_invocations_skip_are_found_with_their_line() {
        for (body, line) in [
            // Under a branch on the invocation id.
            ("if (l.x < 16u) { workgroupBarrier(); }", 8),
            // After a return some invocations take.
            ("if (l.x < 16u) { return; }\nworkgroupBarrier();", 9),
            // In a loop whose trip count varies.
            ("for (var c = l.x; c < p.n; c = c + 64u) {\nworkgroupBarrier(); }", 9),
            // In a loop some invocations leave early.
            ("for (var i = 0u; i < 4u; i++) { if (x[l.x] == i) { break; }\nworkgroupBarrier(); }", 9),
            // A variable that varies by path.
            ("var k = 0u; if (l.x > 5u) { k = 1u; }\nif (k == 0u) { workgroupBarrier(); }", 9),
            // A callee's barrier on a varying argument.
            ("sync_if(l.x);", 5),
            // A call of a function with a barrier, under a varying branch.
            ("if (l.x > 1u) {\nsync_if(p.n); }", 9),
        ] {
            let e = check(body).unwrap_err();
            assert!(e.contains(&format!("line {line}")), "{body}: {e}");
        }
    }
}
