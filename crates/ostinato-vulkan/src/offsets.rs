//! Storage bindings at any byte offset. A device binds a storage buffer only at multiples of
//! `minStorageBufferOffsetAlignment` (16 to 256 bytes), but a slice may start anywhere. So every buffer
//! binding of a kernel gets an *element offset*: the exec binds the slice from the aligned byte at or
//! below its start, and the shader adds the offset (in elements of the binding's array) to every index
//! into that binding, and subtracts it from its `arrayLength`. The offsets travel with the scalars:
//! one `u32` per buffer binding appended to the module's params struct (push constants or the params
//! storage buffer), so a node's offsets cost what its scalars cost.
//!
//! The rewrite is done on the naga module (WGSL, or SPIR-V through naga's front end). A binding can
//! take an offset when its type is a runtime-sized array, or a struct whose one member is one, and the
//! module only indexes it, takes elements' addresses or its length; anything else (a load or store of
//! the whole array, the array passed to a function) leaves that binding without offsets, and an exec
//! refuses a slice that would need one there, naming the binding and why.
//!
//! How expressions are inserted: naga requires an expression's operands to come before it in the
//! function's arena, and each function's arena to be emitted in order. The rewrite appends the new
//! expressions (the offset's load, the sum) at the end of the arena, points the rewritten index at
//! them, and re-imports the module through `naga_oil`'s `DerivedModule`, which rebuilds every function
//! by importing each expression's operands first: the new expressions land just before their user,
//! inside the same emitted range. The result is validated again like any module.

use naga::{
    AddressSpace, ArraySize, BinaryOperator, Expression, Function, GlobalVariable, Handle, Literal, Module, ResourceBinding, Scalar, ScalarKind, Span,
    StructMember, Type, TypeInner,
};

/// One buffer binding of a kernel: its array's element, and whether it can take an element offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingInfo {
    /// Bytes per element (the array's stride); 1 where the type is not an array.
    pub element_size: u32,
    /// The element type, as WGSL writes it.
    pub element: String,
    /// `Err(why)` where this binding cannot take an element offset.
    pub offsets: Result<(), String>,
}

/// Where a module takes its scalars: an immediate (push-constant) struct (WGSL), or the storage
/// buffer at `binding` of group 0 (a SPIR-V kernel's convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsVar {
    Immediate,
    Storage(u32),
}

/// The bindings of a rewritten module and where their offsets live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub bindings: Vec<BindingInfo>,
    /// Byte offset in the params block of binding `i`'s element offset (`at + 4 i`); `None` where no
    /// binding takes offsets (the module is unchanged).
    pub at: Option<u32>,
    /// The params block's size: the scalars', then the offsets'.
    pub params_bytes: u32,
}

/// How a binding's array is reached from its global variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// The global is the array.
    Array,
    /// The global is a struct whose only member is the array.
    Wrapped,
}

/// Rewrites `module` (validated, its buffer params at bindings `0..n_buf` of group 0) so that binding
/// `i` adds the `u32` at `at + 4 i` of its params block to every index; `scalar_bytes`: the size the
/// signature's scalars take. Bindings that cannot take offsets are reported, not refused.
pub fn add_offsets(module: &mut Module, info: &naga::valid::ModuleInfo, n_buf: u32, scalar_bytes: u32, params: ParamsVar) -> Offsets {
    let mut bindings = Vec::with_capacity(n_buf as usize);
    let mut rewrite: Vec<(Handle<GlobalVariable>, Shape, u32)> = Vec::new();
    for b in 0..n_buf {
        let Some((g, _)) = module.global_variables.iter().find(|(_, v)| v.binding == Some(ResourceBinding { group: 0, binding: b })) else {
            bindings.push(BindingInfo { element_size: 1, element: "?".into(), offsets: Err(format!("the module has no binding {b}")) });
            continue;
        };
        let (shape, element_size, element) = match array_of(module, module.global_variables[g].ty) {
            Ok(x) => x,
            Err((why, ty)) => {
                bindings.push(BindingInfo { element_size: 1, element: ty, offsets: Err(why) });
                continue;
            }
        };
        let offsets = indexed_only(module, info, g, shape);
        if offsets.is_ok() {
            rewrite.push((g, shape, b));
        }
        bindings.push(BindingInfo { element_size, element, offsets });
    }
    let unchanged = |bindings: Vec<BindingInfo>| Offsets { bindings, at: None, params_bytes: scalar_bytes };
    if rewrite.is_empty() {
        return unchanged(bindings);
    }
    let mut work = module.clone();
    let (pvar, at) = match extend_params(&mut work, n_buf, scalar_bytes, params) {
        Ok(x) => x,
        Err(why) => return unchanged(refuse_all(bindings, &why)),
    };
    let members: Vec<u32> = rewrite.iter().map(|r| offset_member(&work, pvar, n_buf, r.2)).collect();
    // The clone keeps the original's function handles and entry-point order, so `info` describes it.
    let handles: Vec<Handle<Function>> = module.functions.iter().map(|(h, _)| h).collect();
    for h in handles {
        for (&(g, shape, _), &member) in rewrite.iter().zip(&members) {
            offset_indices(&mut work.functions[h], &info[h], &module.types, g, shape, pvar, member);
        }
    }
    for i in 0..work.entry_points.len() {
        for (&(g, shape, _), &member) in rewrite.iter().zip(&members) {
            offset_indices(&mut work.entry_points[i].function, info.get_entry_point(i), &module.types, g, shape, pvar, member);
        }
    }
    let rebuilt = reimport(work);
    let caps = naga::valid::Capabilities::IMMEDIATES | crate::kernel::FLOAT_ATOMICS;
    match naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&rebuilt) {
        Ok(_) => {
            *module = rebuilt;
            Offsets { bindings, at: Some(at), params_bytes: at + 4 * n_buf }
        }
        Err(e) => unchanged(refuse_all(bindings, &format!("naga refused the rewritten module: {}", e.into_inner()))),
    }
}

fn refuse_all(mut bindings: Vec<BindingInfo>, why: &str) -> Vec<BindingInfo> {
    for b in &mut bindings {
        if b.offsets.is_ok() {
            b.offsets = Err(why.to_string());
        }
    }
    bindings
}

/// The array a binding's type holds: its shape, element size and element type; `Err((why, type))`.
fn array_of(module: &Module, ty: Handle<Type>) -> Result<(Shape, u32, String), (String, String)> {
    let name = type_name(module, ty);
    let runtime = |t: Handle<Type>| match module.types[t].inner {
        TypeInner::Array { base, size: ArraySize::Dynamic, stride } => Some((stride, type_name(module, base))),
        _ => None,
    };
    if let Some((stride, elem)) = runtime(ty) {
        return Ok((Shape::Array, stride, elem));
    }
    if let TypeInner::Struct { members, .. } = &module.types[ty].inner {
        if let [only] = members.as_slice() {
            if let (Some((stride, elem)), 0) = (runtime(only.ty), only.offset) {
                return Ok((Shape::Wrapped, stride, elem));
            }
        }
    }
    Err((format!("its type `{name}` is not a runtime-sized array (or a struct of one)"), name))
}

/// `Ok` where every use of global `g` in every function indexes its array, takes an element's address
/// or its length; else why not.
fn indexed_only(module: &Module, info: &naga::valid::ModuleInfo, g: Handle<GlobalVariable>, shape: Shape) -> Result<(), String> {
    let fns =
        module.functions.iter().map(|(h, f)| (f, &info[h])).chain(module.entry_points.iter().enumerate().map(|(i, e)| (&e.function, info.get_entry_point(i))));
    for (f, fi) in fns {
        for (h, e) in f.expressions.iter() {
            if !matches!(e, Expression::GlobalVariable(v) if *v == g) {
                continue;
            }
            let arrays: Vec<Handle<Expression>> = match shape {
                Shape::Array => vec![h],
                Shape::Wrapped => {
                    let members: Vec<Handle<Expression>> =
                        f.expressions.iter().filter(|(_, m)| matches!(m, Expression::AccessIndex { base, index: 0 } if *base == h)).map(|(m, _)| m).collect();
                    if fi[h].ref_count != members.len() {
                        return Err("the module uses the whole struct (not only its array)".into());
                    }
                    members
                }
            };
            for a in arrays {
                let uses = f
                    .expressions
                    .iter()
                    .filter(|(_, x)| match x {
                        Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => *base == a,
                        Expression::ArrayLength(x) => *x == a,
                        _ => false,
                    })
                    .count();
                if fi[a].ref_count != uses {
                    return Err("the module uses the array as a whole (a load, a store, or a pointer passed to a function)".into());
                }
            }
        }
    }
    Ok(())
}

/// Appends one `u32` per buffer binding to the params struct (creating the params variable where the
/// module has none); returns the variable and the byte offset of the first appended member.
fn extend_params(module: &mut Module, n_buf: u32, scalar_bytes: u32, params: ParamsVar) -> Result<(Handle<GlobalVariable>, u32), String> {
    let found = module.global_variables.iter().find(|(_, v)| match params {
        ParamsVar::Immediate => v.space == AddressSpace::Immediate,
        ParamsVar::Storage(b) => v.binding == Some(ResourceBinding { group: 0, binding: b }),
    });
    let u32_ty = module.types.insert(Type { name: None, inner: TypeInner::Scalar(Scalar::U32) }, Span::UNDEFINED);
    let (mut members, span, var) = match found {
        Some((h, v)) => match &module.types[v.ty].inner {
            TypeInner::Struct { members, span } => (members.clone(), *span, Some(h)),
            _ => return Err(format!("its params variable's type `{}` is not a struct", type_name(module, v.ty))),
        },
        None => (Vec::new(), 0, None),
    };
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).map_err(|e| format!("naga could not lay out its types: {e}"))?;
    let align = members.iter().map(|m| layouter[m.ty].alignment.round_up(1)).max().unwrap_or(4).max(4);
    let at = span.max(scalar_bytes).div_ceil(4) * 4;
    for b in 0..n_buf {
        members.push(StructMember { name: Some(format!("ostinato_offset_{b}")), ty: u32_ty, binding: None, offset: at + 4 * b });
    }
    let new_span = (at + 4 * n_buf).div_ceil(align) * align;
    let ty = module.types.insert(Type { name: Some("OstinatoParams".into()), inner: TypeInner::Struct { members, span: new_span } }, Span::UNDEFINED);
    let var = match var {
        Some(h) => {
            module.global_variables[h].ty = ty;
            h
        }
        None => {
            let (space, binding) = match params {
                ParamsVar::Immediate => (AddressSpace::Immediate, None),
                ParamsVar::Storage(b) => (AddressSpace::Storage { access: naga::StorageAccess::LOAD }, Some(ResourceBinding { group: 0, binding: b })),
            };
            module.global_variables.append(GlobalVariable { name: Some("ostinato_params".into()), space, binding, ty, init: None }, Span::UNDEFINED)
        }
    };
    Ok((var, at))
}

/// The member index of binding `b`'s offset in the (extended) params struct of `pvar`.
fn offset_member(module: &Module, pvar: Handle<GlobalVariable>, n_buf: u32, b: u32) -> u32 {
    match &module.types[module.global_variables[pvar].ty].inner {
        TypeInner::Struct { members, .. } => (members.len() as u32 - n_buf) + b,
        _ => unreachable!("extend_params made a struct"),
    }
}

/// In `f`, adds the params member `member` (a `u32`) to every index into global `g`'s array and
/// subtracts it from its length. The new expressions are appended (forward references, put in order
/// by [`reimport`]).
fn offset_indices(
    f: &mut Function,
    fi: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
    g: Handle<GlobalVariable>,
    shape: Shape,
    pvar: Handle<GlobalVariable>,
    member: u32,
) {
    let globals: Vec<Handle<Expression>> =
        f.expressions.iter().filter(|(_, e)| matches!(e, Expression::GlobalVariable(v) if *v == g)).map(|(h, _)| h).collect();
    let arrays: Vec<Handle<Expression>> = match shape {
        Shape::Array => globals,
        Shape::Wrapped => {
            f.expressions.iter().filter(|(_, e)| matches!(e, Expression::AccessIndex { base, index: 0 } if globals.contains(base))).map(|(h, _)| h).collect()
        }
    };
    let targets: Vec<(Handle<Expression>, Expression)> = f
        .expressions
        .iter()
        .filter(|(_, e)| match e {
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => arrays.contains(base),
            Expression::ArrayLength(x) => arrays.contains(x),
            _ => false,
        })
        .map(|(h, e)| (h, e.clone()))
        .collect();
    for (h, e) in targets {
        // A load of the offset per use: an expression emitted in one block is not in scope in another.
        let p = f.expressions.append(Expression::GlobalVariable(pvar), Span::UNDEFINED);
        let m = f.expressions.append(Expression::AccessIndex { base: p, index: member }, Span::UNDEFINED);
        let off = f.expressions.append(Expression::Load { pointer: m }, Span::UNDEFINED);
        let new = match e {
            Expression::Access { base, index } => {
                let signed = matches!(fi[index].ty.inner_with(types), TypeInner::Scalar(Scalar { kind: ScalarKind::Sint, .. }));
                let off =
                    if signed { f.expressions.append(Expression::As { expr: off, kind: ScalarKind::Sint, convert: Some(4) }, Span::UNDEFINED) } else { off };
                let sum = f.expressions.append(Expression::Binary { op: BinaryOperator::Add, left: index, right: off }, Span::UNDEFINED);
                Expression::Access { base, index: sum }
            }
            Expression::AccessIndex { base, index } => {
                let lit = f.expressions.append(Expression::Literal(Literal::U32(index)), Span::UNDEFINED);
                let sum = f.expressions.append(Expression::Binary { op: BinaryOperator::Add, left: lit, right: off }, Span::UNDEFINED);
                Expression::Access { base, index: sum }
            }
            Expression::ArrayLength(x) => {
                let len = f.expressions.append(Expression::ArrayLength(x), Span::UNDEFINED);
                Expression::Binary { op: BinaryOperator::Subtract, left: len, right: off }
            }
            _ => unreachable!("targets are accesses and lengths"),
        };
        f.expressions[h] = new;
    }
}

/// The module rebuilt through `naga_oil`'s importer: every function's expressions in an order where
/// operands come first, the appended ones inside their user's emitted range.
pub(crate) fn reimport(mut module: Module) -> Module {
    // The importer finds called functions by name: give every function a unique one.
    for (i, (_, f)) in module.functions.iter_mut().enumerate() {
        f.name = Some(format!("{}_{i}", f.name.as_deref().unwrap_or("function")));
    }
    // It also merges equal global variables, and two unnamed ones of one type and initial value are
    // equal (SPIR-V without debug names: a compiler's release build, a stripped module): give every
    // global a name no other has.
    let mut names: Vec<String> = Vec::with_capacity(module.global_variables.len());
    for (i, (_, g)) in module.global_variables.iter_mut().enumerate() {
        if g.name.as_ref().is_none_or(|n| names.contains(n)) {
            g.name = Some(format!("{}_ostinato_{i}", g.name.as_deref().unwrap_or("global")));
        }
        names.extend(g.name.clone());
    }
    let mut derived = naga_oil::derive::DerivedModule::default();
    derived.set_shader_source(&module, 0);
    derived.into_module_with_entrypoints()
}

/// A type as WGSL writes it (for messages).
pub(crate) fn type_name(module: &Module, ty: Handle<Type>) -> String {
    let t = &module.types[ty];
    let scalar = |s: Scalar| match (s.kind, s.width) {
        (ScalarKind::Float, w) => format!("f{}", w * 8),
        (ScalarKind::Sint, w) => format!("i{}", w * 8),
        (ScalarKind::Uint, w) => format!("u{}", w * 8),
        (ScalarKind::Bool, _) => "bool".into(),
        (k, w) => format!("{k:?}{w}"),
    };
    match &t.inner {
        TypeInner::Scalar(s) => scalar(*s),
        TypeInner::Atomic(s) => format!("atomic<{}>", scalar(*s)),
        TypeInner::Vector { size, scalar: s } => format!("vec{}<{}>", *size as u8, scalar(*s)),
        TypeInner::Matrix { columns, rows, scalar: s } => format!("mat{}x{}<{}>", *columns as u8, *rows as u8, scalar(*s)),
        TypeInner::Array { base, size: ArraySize::Dynamic, .. } => format!("array<{}>", type_name(module, *base)),
        TypeInner::Array { base, size: ArraySize::Constant(n), .. } => format!("array<{}, {n}>", type_name(module, *base)),
        TypeInner::Struct { .. } => t.name.clone().unwrap_or_else(|| "struct".into()),
        other => format!("{other:?}"),
    }
}
