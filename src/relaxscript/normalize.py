"""Forward deduction of annotations: the normalizer behind the BlockBuilder.

``Normalizer.normalize(expr)`` fills ``struct_info`` on ``expr`` and on every
sub-expression lacking one, bottom-up, each node once (an annotated
expression is taken as already normalized, which keeps a whole-program pass
linear). Inside a block, non-leaf call arguments are emitted as bindings
first (A-normal form). The frame bookkeeping (blocks, scopes) lives in
``block_builder.BlockBuilder``, which mixes this class in.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir.dispatch import ClassDispatch, handles
from tensorir.expr import IntImm

from .call_deduction import deduce_call
from .expr import (Call, Constant, DataflowBlock, Expr, ExternFunc, Function, GlobalVar, If,
                   MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var)
from .op.registry import DeductionContext, OpDeductionError, get_op_spec
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          TensorStructInfo, TupleStructInfo)
from .struct_info_of import signature_of, with_own_callable_vars
from .struct_info_util import (NO, erase_to_well_defined, format_sinfo, is_base_of,
                               is_dtype_int_scalar, struct_info_lca, symbolic_vars_of)


# One error class for every deduction conflict, the operators' rules included.
DeductionError = OpDeductionError


def describe_span(span) -> str:
    """``file:line: source`` for a parser-set ``node.span = (file, line, col, source_line)``."""
    if not span:
        return ""
    filename, lineno, _col, source_line = span
    text = f"{filename}:{lineno}"
    return f"{text}: {source_line.strip()}" if source_line else text


_LEAF_TYPES = (Var, GlobalVar, Op, ExternFunc, Constant, ShapeExpr, PrimValue, StringImm)


def is_leaf(expr: Expr) -> bool:
    """Leaves (and tuples of leaves) may appear as call arguments in A-normal form."""
    if isinstance(expr, Tuple):
        return all(is_leaf(f) for f in expr.fields)
    return isinstance(expr, _LEAF_TYPES)


class Normalizer(ClassDispatch):
    """Deduction rules per expression kind. Requires from the host class:
    ``analyzer``, ``get()``, ``emit(expr)``, ``in_block()``, ``begin_scope``/
    ``end_scope``/``define_symbolic_vars``/``is_symbolic_var_defined``, and the
    block-frame methods ``_push_frame``/``_pop_frame``/``_append_binding``."""

    _span = None
    _nested_seqs = 0

    # ---------------------------------------------------------------- entry points
    def normalize(self, expr: Expr) -> Expr:
        if not isinstance(expr, Expr):
            raise TypeError(f"cannot normalize {type(expr).__name__}; expected a graph-level expression")
        if expr.struct_info is not None or isinstance(expr, Op):
            return expr
        saved = self._span
        self._span = getattr(expr, "span", None) or saved
        try:
            handler = self.handler_for(type(expr))
            if handler is None:
                raise TypeError(f"no deduction rule for {type(expr).__name__}")
            return handler(self, expr)
        finally:
            self._span = saved

    def normalize_argument(self, expr: Expr) -> Expr:
        """Normalize, then bind a non-leaf result to a fresh var when inside a block."""
        expr = self.normalize(expr)
        if self.in_block() and not is_leaf(expr):
            return self.emit(expr)
        return expr

    def deduction_error(self, message: str, span=None) -> DeductionError:
        where = describe_span(span or self._span)
        return DeductionError(f"{message}\n  at {where}" if where else message)

    @staticmethod
    def _annotate(new: Expr, sinfo) -> Expr:
        """Set the annotation on ``new``: a fresh copy, or the input itself when unchanged."""
        new.struct_info = sinfo
        return new

    # ---------------------------------------------------------------- leaves
    @handles(Var)
    def _normalize_Var(self, var: Var):
        raise self.deduction_error(f"variable '{var.name_hint}' has no annotation; "
                                   "parameters need one and bindings get one when emitted")

    @handles(GlobalVar)
    def _normalize_GlobalVar(self, gvar: GlobalVar):
        mod = self.get()
        if gvar.name_hint not in mod:
            raise self.deduction_error(f"GlobalVar '{gvar.name_hint}' names no function in the module "
                                       f"(it has {sorted(mod.functions)})")
        return gvar.replace(struct_info=signature_of(mod[gvar.name_hint]))

    @handles(ExternFunc)
    def _normalize_ExternFunc(self, func: ExternFunc):
        return self._annotate(func, FuncStructInfo(None, ObjectStructInfo(), purity=False))

    @handles(Constant)
    def _normalize_Constant(self, const: Constant):
        data = const.data
        return self._annotate(const, TensorStructInfo([int(d) for d in data.shape], data.dtype.name))

    @handles(ShapeExpr)
    def _normalize_ShapeExpr(self, shape: ShapeExpr):
        for v in shape.values:
            if not dt.is_int(v.dtype):
                raise self.deduction_error(f"shape value {v!r} has dtype {v.dtype}; shapes hold integers")
        return self._annotate(shape, ShapeStructInfo(shape.values))

    @handles(PrimValue)
    def _normalize_PrimValue(self, prim: PrimValue):
        return self._annotate(prim, PrimStructInfo(prim.value.dtype, prim.value))

    @handles(StringImm)
    def _normalize_StringImm(self, string: StringImm):
        return self._annotate(string, ObjectStructInfo())

    # ---------------------------------------------------------------- composites
    @handles(Tuple)
    def _normalize_Tuple(self, tup: Tuple):
        for field in tup.fields:
            if isinstance(field, Op):   # `R.exp, (x)`: an operator is no value (the parser reports it)
                spelled = field.name.replace("relax.", "R.", 1)
                raise TypeError(f"a tuple field must be a value, got the operator {spelled} "
                                f"(call it: {spelled}(...))")
        fields = tuple(self.normalize_argument(f) for f in tup.fields)
        new = tup if _same(fields, tup.fields) else tup.replace(fields=fields)
        return self._annotate(new, TupleStructInfo([f.struct_info for f in fields]))

    @handles(TupleGetItem)
    def _normalize_TupleGetItem(self, item: TupleGetItem):
        value = self.normalize_argument(item.tuple_value)
        sinfo = value.struct_info
        new = item if value is item.tuple_value else item.replace(tuple_value=value)
        if isinstance(sinfo, ObjectStructInfo):
            return self._annotate(new, ObjectStructInfo())
        if not isinstance(sinfo, TupleStructInfo):
            raise self.deduction_error(f"indexing [{item.index}] needs a tuple, got {format_sinfo(sinfo)}")
        if not -len(sinfo.fields) <= item.index < len(sinfo.fields):
            raise self.deduction_error(f"index {item.index} is out of range for {format_sinfo(sinfo)} "
                                       f"({len(sinfo.fields)} fields)")
        return self._annotate(new, sinfo.fields[item.index])

    @handles(Call)
    def _normalize_Call(self, call: Call):
        op = call.op if isinstance(call.op, Op) else self.normalize_argument(call.op)
        args = tuple(self.normalize_argument(a) for a in call.args)
        new = call if op is call.op and _same(args, call.args) else call.replace(op=op, args=args)
        return self._annotate(new, self._deduce_call(new))

    def _deduce_call(self, call: Call):
        callee = call.op
        if isinstance(callee, Op):
            return self._deduce_op_call(call)
        if isinstance(callee, ExternFunc):
            return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()
        sinfo = callee.struct_info
        if isinstance(sinfo, FuncStructInfo):
            name = getattr(callee, "name_hint", "callee")
            try:
                return deduce_call(sinfo, [a.struct_info for a in call.args], self.analyzer, name)
            except DeductionError as err:
                raise self.deduction_error(str(err), getattr(call, "span", None)) from None
        raise self.deduction_error(f"cannot call a value annotated {format_sinfo(sinfo)}")

    def _deduce_op_call(self, call: Call):
        try:
            spec = get_op_spec(call.op.name)
        except DeductionError:
            raise self.deduction_error(f"unknown operator {call.op.name!r}") from None
        ctx = DeductionContext(self.analyzer, describe_span(getattr(call, "span", None) or self._span) or None)
        sinfo = spec.infer(call, ctx)
        if sinfo is None:
            raise self.deduction_error(f"deduction of {call.op.name} returned no annotation")
        too_large = _uncountable_tensor(sinfo)
        if too_large is not None:
            raise self.deduction_error(
                f"{call.op.name}: the result {format_sinfo(too_large)} would hold {_count(too_large)} "
                f"elements, more than an int64 counts ({_INT64_MAX})", getattr(call, "span", None))
        return sinfo

    @handles(If)
    def _normalize_If(self, node: If):
        cond = self.normalize_argument(node.cond)
        if not (is_dtype_int_scalar(cond.struct_info) or _is_scalar_tensor_condition(cond.struct_info)):
            raise self.deduction_error("if condition must be a boolean or integer scalar "
                                       f'(R.Prim("bool") or R.Tensor((), "bool")), '
                                       f"got {format_sinfo(cond.struct_info)}")
        true_branch = self._normalize_branch(node.true_branch)
        false_branch = self._normalize_branch(node.false_branch)
        unchanged = _same((cond, true_branch, false_branch), (node.cond, node.true_branch, node.false_branch))
        new = node if unchanged else node.replace(cond=cond, true_branch=true_branch, false_branch=false_branch)
        sinfo = struct_info_lca(true_branch.struct_info, false_branch.struct_info, self.analyzer)
        return self._annotate(new, sinfo)

    def _normalize_branch(self, branch: Expr) -> SeqExpr:
        if not isinstance(branch, SeqExpr):
            branch = SeqExpr([], branch)
        return self.normalize(branch)

    @handles(SeqExpr)
    def _normalize_SeqExpr(self, seq: SeqExpr):
        saved_frames = self._swap_frames([])
        self.begin_scope()
        self._nested_seqs += 1     # an If branch: its bindings establish no function-wide facts
        try:
            blocks = []
            for block in seq.blocks:
                self._push_frame(isinstance(block, DataflowBlock))
                for binding in block.bindings:
                    self.normalize_binding(binding)
                new_block = self._pop_frame(original=block)
                if new_block.bindings:
                    blocks.append(new_block)
            self._push_frame(False)
            body = self.normalize_argument(seq.body)
            tail = self._pop_frame()
            if tail.bindings:
                blocks.append(tail)
        finally:
            self._nested_seqs -= 1
            self.end_scope()
            self._swap_frames(saved_frames)
        new = seq if _same(blocks, seq.blocks) and body is seq.body else SeqExpr(blocks, body)
        if new is not seq and getattr(seq, "span", None):
            new.span = seq.span
        sinfo = erase_to_well_defined(body.struct_info, self.is_symbolic_var_defined)
        return self._annotate(new, sinfo)

    @handles(Function)
    def _normalize_Function(self, func: Function):
        for p in func.params:
            if p.struct_info is None:
                raise self.deduction_error(f"parameter '{p.name_hint}' has no annotation")
        body = func.body if isinstance(func.body, SeqExpr) else SeqExpr([], func.body)
        self.begin_scope(func.params)
        try:
            body = self.normalize(body)
        finally:
            self.end_scope()
        new = func if body is func.body else func.replace(body=body)
        return self.finish_function(func, new)

    def finish_function(self, original: Function, func: Function) -> Function:
        """Check the body against the declared return annotation and set the signature."""
        body_sinfo = func.body.struct_info
        ret = func.ret_struct_info
        if ret is None:
            ret = with_own_callable_vars(body_sinfo)
            func = func.replace(ret_struct_info=ret)
        else:
            param_vars = symbolic_vars_of([p.struct_info for p in func.params])
            if is_base_of(ret, body_sinfo, self.analyzer, fixed_vars=param_vars) == NO:
                name = original.attrs.get("global_symbol", "function")
                raise self.deduction_error(
                    f"{name} returns {format_sinfo(body_sinfo)}, which can never match its declared "
                    f"return annotation {format_sinfo(ret)}", getattr(original, "span", None))
        sinfo = FuncStructInfo([p.struct_info for p in func.params], ret, func.is_pure)
        return self._annotate(func, sinfo)

    # ---------------------------------------------------------------- bindings
    def normalize_binding(self, binding):
        """Normalize one binding into the current block (emitting ANF temporaries before it)."""
        saved = self._span
        self._span = getattr(binding, "span", None) or saved
        try:
            value = self.normalize(binding.value)
            if isinstance(binding, MatchCast):
                self._check_match_cast(binding, value)
            else:
                self._check_var_annotation(binding.var, value)
        finally:
            self._span = saved
        new = binding if value is binding.value else binding.replace(value=value)
        self.emit_normalized(new)
        return new

    def _check_var_annotation(self, var: Var, value: Expr):
        if var.struct_info is None:
            var.struct_info = value.struct_info  # a fresh binder gets the deduced annotation
        elif self._incompatible(var.struct_info, value.struct_info):
            raise self.deduction_error(
                f"'{var.name_hint}' is annotated {format_sinfo(var.struct_info)} but its value is "
                f"{format_sinfo(value.struct_info)}")

    def _check_match_cast(self, binding: MatchCast, value: Expr):
        if self._incompatible(binding.struct_info, value.struct_info):
            raise self.deduction_error(
                f"match_cast of a value annotated {format_sinfo(value.struct_info)} to "
                f"{format_sinfo(binding.struct_info)} can never succeed")
        if binding.var.struct_info is None:
            binding.var.struct_info = binding.struct_info

    def _incompatible(self, annotation, actual) -> bool:
        """Provable conflict; symbolic vars not yet defined act as pattern vars."""
        fixed = [v for v in symbolic_vars_of(annotation) if self.is_symbolic_var_defined(v)]
        return is_base_of(annotation, actual, self.analyzer, fixed_vars=fixed) == NO


_INT64_MAX = 2 ** 63 - 1


def _count(sinfo: TensorStructInfo) -> int:
    count = 1
    for d in sinfo.shape:
        count *= d.value
    return count


def _uncountable_tensor(sinfo):
    """A tensor in ``sinfo`` whose constant shape holds more elements than an int64 counts, or
    None. (2**63 - 1, 2) zeros made the C build fail in gcc (a fused loop extent past int64)
    and the interp VM raise NumPy's bare 'Maximum allowed dimension exceeded' (s13)."""
    if isinstance(sinfo, TupleStructInfo):
        for field in sinfo.fields:
            found = _uncountable_tensor(field)
            if found is not None:
                return found
        return None
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None \
            and all(type(d) is IntImm for d in sinfo.shape) and _count(sinfo) > _INT64_MAX:
        return sinfo
    return None


def _same(new, old) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


def _is_scalar_tensor_condition(sinfo) -> bool:
    """A 0-d bool or integer tensor (TVM's other condition form; the VM and the
    interpreter read its one element)."""
    return isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 0 and sinfo.dtype is not None \
        and (dt.is_int(sinfo.dtype) or dt.is_bool(sinfo.dtype))
