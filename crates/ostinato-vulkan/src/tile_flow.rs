//! How the WGSL tile check ([`crate::tilemaps`]) follows a function's local variables through its
//! control flow: their values at a point ([`Env`]), where two paths meet ([`join`]), what a loop or
//! branch may change ([`forget`]), and the `for` counter's step.

use std::collections::HashMap;

use naga::{BinaryOperator, Expression, Function, Handle, LocalVariable, Statement};

use crate::tile_forms::{Form, Val};

/// The values of a function's local variables at a point of its body.
pub(crate) type Env = HashMap<Handle<LocalVariable>, Val>;

/// A literal's value, where it is an integer.
pub(crate) fn literal(l: naga::Literal) -> Val {
    use naga::Literal as L;
    match l {
        L::U32(v) => Val::Int(Form::constant(i128::from(v))),
        L::I32(v) => Val::Int(Form::constant(i128::from(v))),
        L::U64(v) => Val::Int(Form::constant(i128::from(v))),
        L::I64(v) | L::AbstractInt(v) => Val::Int(Form::constant(i128::from(v))),
        _ => Val::Top("a value that is not an integer"),
    }
}

/// The local variable `pointer` points into, and whether it points at the whole of it.
pub(crate) fn local_root(f: &Function, mut e: Handle<Expression>) -> Option<(Handle<LocalVariable>, bool)> {
    let mut whole = true;
    loop {
        match f.expressions[e] {
            Expression::LocalVariable(v) => return Some((v, whole)),
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => {
                whole = false;
                e = base;
            }
            _ => return None,
        }
    }
}

/// `v = v + step` as the only statement of `continuing` but its emits: the variable and the step's
/// expression (its value, a constant above 0 that the loop does not change, is checked where it is
/// used).
pub(crate) fn step_of(f: &Function, continuing: &naga::Block) -> Option<(Handle<LocalVariable>, Handle<Expression>)> {
    let mut stores = continuing.iter().filter(|s| !matches!(s, Statement::Emit(_)));
    let Some(Statement::Store { pointer, value }) = stores.next() else { return None };
    if stores.next().is_some() {
        return None;
    }
    let Expression::LocalVariable(v) = f.expressions[*pointer] else { return None };
    let Expression::Binary { op: BinaryOperator::Add, left, right } = f.expressions[*value] else { return None };
    let loads_v = |e: Handle<Expression>| matches!(f.expressions[e], Expression::Load { pointer } if matches!(f.expressions[pointer], Expression::LocalVariable(x) if x == v));
    let step = if loads_v(left) {
        right
    } else if loads_v(right) {
        left
    } else {
        return None;
    };
    Some((v, step))
}

/// Whether `block` (nested blocks included) stores to `v` or passes a pointer into it to a function.
pub(crate) fn stores(f: &Function, block: &naga::Block, v: Handle<LocalVariable>) -> bool {
    let mut env = Env::new();
    env.insert(v, Val::Int(Form::constant(0)));
    forget(f, block, &mut env);
    env.get(&v) != Some(&Val::Int(Form::constant(0)))
}

/// Makes every variable `block` may change unknown in `env`.
pub(crate) fn forget(f: &Function, block: &naga::Block, env: &mut Env) {
    forget_at(f, block, env, 0);
}

fn forget_at(f: &Function, block: &naga::Block, env: &mut Env, depth: u32) {
    if depth >= crate::tilemaps::MAX_DEPTH {
        // Nested past what is followed: every variable may change.
        env.values_mut().for_each(|v| *v = Val::Top("a variable in code nested too deep"));
        return;
    }
    let forget = |f, b, env: &mut Env| forget_at(f, b, env, depth + 1);
    for s in block.iter() {
        match s {
            Statement::Store { pointer, .. } => {
                if let Some((v, _)) = local_root(f, *pointer) {
                    env.insert(v, Val::Top("a variable a loop or branch changes"));
                }
            }
            Statement::Call { arguments, .. } => {
                for &a in arguments {
                    if let Some((v, _)) = local_root(f, a) {
                        env.insert(v, Val::Top("a variable a called function may change"));
                    }
                }
            }
            Statement::Atomic { pointer, .. } => {
                if let Some((v, _)) = local_root(f, *pointer) {
                    env.insert(v, Val::Top("a variable a loop or branch changes"));
                }
            }
            Statement::Block(b) => forget(f, b, env),
            Statement::If { accept, reject, .. } => {
                forget(f, accept, env);
                forget(f, reject, env);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| forget(f, &c.body, env)),
            Statement::Loop { body, continuing, .. } => {
                forget(f, body, env);
                forget(f, continuing, env);
            }
            _ => {}
        }
    }
}

/// The state after two paths: a variable known on both with one form keeps it.
pub(crate) fn join(a: &Env, b: &Env) -> Env {
    let mut out = Env::new();
    for (v, x) in a {
        let j = match b.get(v) {
            Some(y) => x.join(y),
            None => Val::Top("a variable set on one path only"),
        };
        out.insert(*v, j);
    }
    for v in b.keys() {
        out.entry(*v).or_insert(Val::Top("a variable set on one path only"));
    }
    out
}
