//! The entry point of a fused dispatch, written as naga IR: workgroup `b` runs lane `b`'s calls (a
//! `switch` on the workgroup id where there are several lanes); before each call, a control barrier
//! with workgroup and storage semantics where the plan needs one, then the call's params block loaded
//! from its function's storage array into the function's private params variable, then the call with
//! the built-ins of a one-workgroup launch. Runs of calls of one function with consecutive params
//! become a loop.

use naga::{
    AddressSpace, ArraySize, Barrier, Block, BuiltIn, EntryPoint, Expression, Function, FunctionArgument, GlobalVariable, Handle, Literal, LocalVariable,
    Module, ResourceBinding, ShaderStage, Span, Statement, StorageAccess, SwitchCase, SwitchValue, Type, TypeInner,
};

/// One imported body function: its handle, its private params variable, the built-in each argument
/// is, the stride of its params array and where the array starts in the params binding (in strides).
pub(crate) struct BodyFn {
    pub(crate) function: Handle<Function>,
    pub(crate) params: Option<Handle<GlobalVariable>>,
    pub(crate) args: Vec<BuiltIn>,
    pub(crate) stride: u32,
    pub(crate) base: u32,
}

/// One call: which body function, which element of its params array, a barrier before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) function: usize,
    pub(crate) index: u32,
    pub(crate) barrier: bool,
}

/// The fused entry point `main` of `module` (whose functions `fns` were imported): every function's
/// params array a view of binding `n_bindings` (bindings alias: they are ordered by the barriers).
/// Where `multi_block` (one lane on a grid of many workgroups), each body sees the dispatch's own
/// built-ins (its workgroup `b` runs every body's workgroup `b`).
pub(crate) fn entry(module: &mut Module, fns: &[BodyFn], lanes: &[Vec<Call>], block: [u32; 3], n_bindings: u32, multi_block: bool) -> EntryPoint {
    let u32_ty = module.types.insert(Type { name: None, inner: TypeInner::Scalar(naga::Scalar::U32) }, Span::UNDEFINED);
    let vec3_ty =
        module.types.insert(Type { name: None, inner: TypeInner::Vector { size: naga::VectorSize::Tri, scalar: naga::Scalar::U32 } }, Span::UNDEFINED);
    let arrays: Vec<Option<Handle<GlobalVariable>>> = fns
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.params.map(|p| {
                let base = module.global_variables[p].ty;
                let ty =
                    module.types.insert(Type { name: None, inner: TypeInner::Array { base, size: ArraySize::Dynamic, stride: f.stride } }, Span::UNDEFINED);
                let binding = Some(ResourceBinding { group: 0, binding: n_bindings });
                let var = GlobalVariable {
                    name: Some(format!("ostinato_fused_params_{i}")),
                    space: AddressSpace::Storage { access: StorageAccess::LOAD },
                    binding,
                    ty,
                    init: None,
                };
                module.global_variables.append(var, Span::UNDEFINED)
            })
        })
        .collect();
    // One workgroup of the whole grid: a body sees workgroup 0 of a grid of one.
    let one = module.global_expressions.append(Expression::Literal(Literal::U32(1)), Span::UNDEFINED);
    let ones = module.global_expressions.append(Expression::Compose { ty: vec3_ty, components: vec![one, one, one] }, Span::UNDEFINED);
    let one_group = module.constants.append(naga::Constant { name: Some("ostinato_one_workgroup".into()), ty: vec3_ty, init: ones }, Span::UNDEFINED);
    let builtin = |b: BuiltIn, ty| FunctionArgument { name: None, ty, binding: Some(naga::Binding::BuiltIn(b)) };
    let mut arguments =
        vec![builtin(BuiltIn::LocalInvocationId, vec3_ty), builtin(BuiltIn::LocalInvocationIndex, u32_ty), builtin(BuiltIn::WorkGroupId, vec3_ty)];
    if multi_block {
        arguments.extend([builtin(BuiltIn::GlobalInvocationId, vec3_ty), builtin(BuiltIn::NumWorkGroups, vec3_ty)]);
    }
    let function = Function { name: Some("main".into()), arguments, ..Default::default() };
    let mut w = Writer { f: function, fns, arrays, u32_ty, vec3_ty, one_group, multi_block };
    let mut body = Block::new();
    if let [only] = lanes {
        w.calls(&mut body, only);
    } else {
        let wid = w.expr(&mut body, Expression::FunctionArgument(2));
        let selector = w.expr(&mut body, Expression::AccessIndex { base: wid, index: 0 });
        let mut cases: Vec<SwitchCase> = lanes
            .iter()
            .enumerate()
            .map(|(b, lane)| {
                let mut case = Block::new();
                w.calls(&mut case, lane);
                SwitchCase { value: SwitchValue::U32(b as u32), body: case, fall_through: false }
            })
            .collect();
        cases.push(SwitchCase { value: SwitchValue::Default, body: Block::new(), fall_through: false });
        body.push(Statement::Switch { selector, cases }, Span::UNDEFINED);
    }
    body.push(Statement::Return { value: None }, Span::UNDEFINED);
    w.f.body = body;
    EntryPoint {
        name: "main".into(),
        stage: ShaderStage::Compute,
        early_depth_test: None,
        workgroup_size: block,
        workgroup_size_overrides: None,
        function: w.f,
        mesh_info: None,
        task_payload: None,
    }
}

struct Writer<'a> {
    f: Function,
    fns: &'a [BodyFn],
    arrays: Vec<Option<Handle<GlobalVariable>>>,
    u32_ty: Handle<Type>,
    vec3_ty: Handle<Type>,
    one_group: Handle<naga::Constant>,
    /// The bodies see the dispatch's own built-ins (arguments 2, 3, 4: workgroup id, global invocation
    /// id, workgroup count) rather than a one-workgroup launch's.
    multi_block: bool,
}

impl Writer<'_> {
    /// Appends `e` to the function's expressions, emitted in `block` where it must be.
    fn expr(&mut self, block: &mut Block, e: Expression) -> Handle<Expression> {
        let pre = e.needs_pre_emit();
        let len = self.f.expressions.len();
        let h = self.f.expressions.append(e, Span::UNDEFINED);
        if !pre {
            block.push(Statement::Emit(self.f.expressions.range_from(len)), Span::UNDEFINED);
        }
        h
    }

    /// `calls` in order, runs of one function with consecutive params (and the same barrier) as loops.
    fn calls(&mut self, block: &mut Block, calls: &[Call]) {
        let mut i = 0;
        while i < calls.len() {
            let c = calls[i];
            let mut j = i + 1;
            while j < calls.len() && calls[j].function == c.function && calls[j].barrier == c.barrier && calls[j].index == c.index + (j - i) as u32 {
                j += 1;
            }
            if j - i > 2 {
                self.repeat(block, c, (j - i) as u32);
            } else {
                for &call in &calls[i..j] {
                    let index = self.expr(block, Expression::Literal(Literal::U32(self.fns[call.function].base + call.index)));
                    self.call(block, call, index);
                }
            }
            i = j;
        }
    }

    /// A loop making `count` calls of `first`'s function with params `first.index..`.
    fn repeat(&mut self, block: &mut Block, first: Call, count: u32) {
        let r = self.f.local_variables.append(LocalVariable { name: Some("ostinato_r".into()), ty: self.u32_ty, init: None }, Span::UNDEFINED);
        let var = self.expr(block, Expression::LocalVariable(r));
        let zero = self.expr(block, Expression::Literal(Literal::U32(0)));
        block.push(Statement::Store { pointer: var, value: zero }, Span::UNDEFINED);
        let mut body = Block::new();
        let var = self.expr(&mut body, Expression::LocalVariable(r));
        let now = self.expr(&mut body, Expression::Load { pointer: var });
        let end = self.expr(&mut body, Expression::Literal(Literal::U32(count)));
        let done = self.expr(&mut body, Expression::Binary { op: naga::BinaryOperator::GreaterEqual, left: now, right: end });
        let mut stop = Block::new();
        stop.push(Statement::Break, Span::UNDEFINED);
        body.push(Statement::If { condition: done, accept: stop, reject: Block::new() }, Span::UNDEFINED);
        let base = self.expr(&mut body, Expression::Literal(Literal::U32(self.fns[first.function].base + first.index)));
        let index = self.expr(&mut body, Expression::Binary { op: naga::BinaryOperator::Add, left: now, right: base });
        self.call(&mut body, first, index);
        let mut continuing = Block::new();
        let var = self.expr(&mut continuing, Expression::LocalVariable(r));
        let now = self.expr(&mut continuing, Expression::Load { pointer: var });
        let one = self.expr(&mut continuing, Expression::Literal(Literal::U32(1)));
        let next = self.expr(&mut continuing, Expression::Binary { op: naga::BinaryOperator::Add, left: now, right: one });
        continuing.push(Statement::Store { pointer: var, value: next }, Span::UNDEFINED);
        block.push(Statement::Loop { body, continuing, break_if: None }, Span::UNDEFINED);
    }

    /// One call: the barrier where needed, the params block `index` stored in the function's private
    /// params, the call with the one-workgroup built-ins.
    fn call(&mut self, block: &mut Block, call: Call, index: Handle<Expression>) {
        if call.barrier {
            block.push(Statement::ControlBarrier(Barrier::STORAGE | Barrier::WORK_GROUP), Span::UNDEFINED);
        }
        let f = &self.fns[call.function];
        if let (Some(array), Some(private)) = (self.arrays[call.function], f.params) {
            let array = self.expr(block, Expression::GlobalVariable(array));
            let element = self.expr(block, Expression::Access { base: array, index });
            let value = self.expr(block, Expression::Load { pointer: element });
            let private = self.expr(block, Expression::GlobalVariable(private));
            block.push(Statement::Store { pointer: private, value }, Span::UNDEFINED);
        }
        let (function, builtins) = (f.function, f.args.clone());
        let multi = self.multi_block;
        let arguments = builtins
            .iter()
            .map(|b| match b {
                BuiltIn::GlobalInvocationId if multi => self.expr(block, Expression::FunctionArgument(3)),
                BuiltIn::WorkGroupId if multi => self.expr(block, Expression::FunctionArgument(2)),
                BuiltIn::NumWorkGroups if multi => self.expr(block, Expression::FunctionArgument(4)),
                BuiltIn::LocalInvocationId | BuiltIn::GlobalInvocationId => self.expr(block, Expression::FunctionArgument(0)),
                BuiltIn::LocalInvocationIndex => self.expr(block, Expression::FunctionArgument(1)),
                BuiltIn::WorkGroupId => self.expr(block, Expression::ZeroValue(self.vec3_ty)),
                _ => self.expr(block, Expression::Constant(self.one_group)),
            })
            .collect();
        block.push(Statement::Call { function, arguments, result: None }, Span::UNDEFINED);
    }
}
