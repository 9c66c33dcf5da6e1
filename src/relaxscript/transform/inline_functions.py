"""InlineFunctions: replace calls of small graph functions by their bodies.

Fusion works inside one function's dataflow blocks, so a helper such as a
rotary embedding written as its own ``@R.function`` stays a separate VM call
with its own kernels, checks and allocations. This pass copies the callee's
bindings into the caller, so its operators fuse with the caller's (the
reshape before a rotary embedding and the transpose after it become one
kernel). The callee itself stays in the module (DeadCodeElimination later
drops it from a build when no entry function reaches it any more).

A call is inlined only when nothing it would check at run time is lost:

- the callee is a leaf (it calls no graph function), pure, straight-line
  (variable bindings of operator calls, tuples and leaves; no ``if``, no
  ``match_cast``), has at most ``max_bindings`` bindings (64: a transformer
  layer after its rotary helper is inlined has 46), and its body's result
  provably satisfies its return annotation;
- every argument provably satisfies its parameter's annotation (rank,
  dtype, dims), every symbolic variable of the parameters is determined by
  the arguments, and the caller's values provably meet the variables'
  declared facts (``lower``, ``upper``, ``multiple_of``).

A plain (non-dataflow) block of pure bindings that contains an inlined call
joins the dataflow blocks next to it, and the functions that changed are
canonicalized (CanonicalizeBindings), so the inlined operators can fuse with
their neighbours.

The pass repeats until nothing more is inlined: a function whose own calls were
all inlined is a leaf in the next round (the Llama workload's ``rope`` goes into
``layer``, then ``layer`` into ``main``: no VM call, no parameter checks of the
layer's 23 arguments, and the residual add of one layer fuses with the next
layer's RMSNorm).
"""
from __future__ import annotations

from tensorir.dispatch import handles
from tensorir.functor import collect, substitute

from ..expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc, Function, GlobalVar, Op,
                    PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var, VarBinding)
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..struct_info_util import YES, StructInfoMatcher, default_analyzer, is_base_of, substitute_sinfo, \
    symbolic_vars_of
from .canonicalize_bindings import canonicalize_function
from .pass_infra import Pass
from .static_plan_block_memory import bounds_analyzer
from .var_bounds import var_bounds

DEFAULT_MAX_BINDINGS = 64


class InlineFunctions(Pass):
    """Inline calls of small, pure, straight-line leaf graph functions (see the module docstring)."""
    name = "InlineFunctions"

    def __init__(self, max_bindings: int = DEFAULT_MAX_BINDINGS):
        self.max_bindings = max_bindings

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        for _ in range(len(mod.relax_functions)):   # each round makes the callers of its leaves leaves
            inlined = self._inline_leaves(mod)
            if inlined is mod:
                break
            mod = inlined
        return mod

    def _inline_leaves(self, mod: IRModule) -> IRModule:
        candidates = {name: func for name, func in mod.relax_functions.items()
                      if _inlinable(func, mod, self.max_bindings)}
        if not candidates:
            return mod
        inlined = _Inliner(mod, candidates).transform_module(mod)
        if all(func is mod.functions.get(name) for name, func in inlined.relax_functions.items()):
            return mod   # every call kept (a check the caller could not prove): nothing changed
        functions = dict(inlined.functions)
        for name, func in inlined.relax_functions.items():
            if func is not mod.functions.get(name):
                # `result = callee_out` bindings would sit between the copied operators and their
                # users (fusion follows producers through calls only): fold them first
                functions[name] = _localize_block_outputs(canonicalize_function(func))
        return IRModule(functions, inlined.attrs)


# ------------------------------------------------------------------ which callees
def _inlinable(func: Function, mod: IRModule, max_bindings: int) -> bool:
    if not func.is_pure or not isinstance(func.body, SeqExpr):
        return False
    bindings = [b for block in func.body.blocks for b in block.bindings]
    if len(bindings) > max_bindings or not all(isinstance(b, VarBinding) for b in bindings):
        return False
    if not all(_copyable(b.value, mod) for b in bindings) or not _copyable(func.body.body, mod):
        return False
    param_vars = set(symbolic_vars_of([p.struct_info for p in func.params]))
    # the body may use only the symbolic vars its parameters bind
    used = symbolic_vars_of([b.value for b in bindings] + [b.var.struct_info for b in bindings]
                            + [func.body.body])
    if not set(used) <= param_vars:
        return False
    returned = func.body.body.struct_info
    return func.ret_struct_info is None or (
        returned is not None and is_base_of(func.ret_struct_info, returned, fixed_vars=param_vars) == YES)


def _copyable(expr, mod: IRModule) -> bool:
    """Whether ``_copy`` handles ``expr``: operator calls, tuples and leaves (no calls of graph
    functions, no ``if`` or nested sequences)."""
    if isinstance(expr, (Var, Constant, StringImm, ShapeExpr, PrimValue, ExternFunc)):
        return True
    if isinstance(expr, GlobalVar):   # e.g. a prim_func passed to call_tir
        return not isinstance(mod[expr.name_hint], Function) if expr.name_hint in mod else False
    if isinstance(expr, Tuple):
        return all(_copyable(f, mod) for f in expr.fields)
    if isinstance(expr, TupleGetItem):
        return _copyable(expr.tuple_value, mod)
    if isinstance(expr, Call):
        return (isinstance(expr.op, Op) or _copyable(expr.op, mod)) and all(_copyable(a, mod) for a in expr.args) \
            and not symbolic_vars_of(list(expr.attrs.values()))
    return False


def _copy(expr, values: dict, symbols: dict):
    """``expr`` with the callee's vars replaced by the caller's values and its symbolic vars
    by the caller's expressions (annotations left for the builder to deduce)."""
    if isinstance(expr, Var):
        return values[expr]
    if isinstance(expr, (Constant, StringImm, ExternFunc, GlobalVar, Op)):
        return expr
    if isinstance(expr, ShapeExpr):
        return ShapeExpr([substitute_sinfo(v, symbols) for v in expr.values])
    if isinstance(expr, PrimValue):
        return PrimValue(substitute_sinfo(expr.value, symbols))
    if isinstance(expr, Tuple):
        return Tuple([_copy(f, values, symbols) for f in expr.fields])
    if isinstance(expr, TupleGetItem):
        return TupleGetItem(_copy(expr.tuple_value, values, symbols), expr.index)
    if isinstance(expr, Call):
        return Call(_copy(expr.op, values, symbols), [_copy(a, values, symbols) for a in expr.args],
                    expr.attrs, [substitute_sinfo(s, symbols) for s in expr.sinfo_args])
    raise TypeError(f"InlineFunctions cannot copy {type(expr).__name__}")   # _copyable refused it


# ------------------------------------------------------------------ call sites
class _Inliner(PassMutator):
    def __init__(self, mod: IRModule, candidates: dict):
        super().__init__(mod)
        self.mod = mod
        self.candidates = candidates
        self.analyzer = default_analyzer()

    @handles(Function)
    def visit_Function(self, func: Function):
        saved, self.analyzer = self.analyzer, bounds_analyzer(func)   # the caller's facts and bounds
        try:
            return super().visit_Function(func)
        finally:
            self.analyzer = saved

    def _callee(self, value):
        if isinstance(value, Call) and isinstance(value.op, GlobalVar):
            return self.candidates.get(value.op.name_hint)
        return None

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        absorbable = [self._absorbable(b) for b in seq.blocks]
        if not any(absorbable):
            return super().visit_SeqExpr(seq)
        # runs of dataflow and absorbable blocks become one dataflow block when they hold an
        # absorbable one; other plain blocks stay as they are
        blocks, run = [], []

        def close_run():
            if any(absorbable[i] for i in run):
                blocks.append(DataflowBlock([b for i in run for b in seq.blocks[i].bindings]))
            else:
                blocks.extend(seq.blocks[i] for i in run)
            run.clear()

        for i, block in enumerate(seq.blocks):
            if isinstance(block, DataflowBlock) or absorbable[i]:
                run.append(i)
            else:
                close_run()
                blocks.append(block)
        close_run()
        return super().visit_SeqExpr(SeqExpr(blocks, seq.body))

    def _absorbable(self, block: BindingBlock) -> bool:
        """A plain block of pure bindings with a call to inline: it can join a dataflow block."""
        if isinstance(block, DataflowBlock):
            return False
        return any(self._callee(b.value) is not None for b in block.bindings if isinstance(b, VarBinding)) and \
            all(isinstance(b, VarBinding) and _pure(b.value, self.mod) for b in block.bindings)

    def visit_binding(self, binding):
        callee = self._callee(binding.value) if isinstance(binding, VarBinding) else None
        if callee is not None:
            args = [self.visit_expr(a) for a in binding.value.args]
            symbols = self._bind_params(callee, args)
            if symbols is not None:
                self._emit_body(callee, args, symbols, binding.var)
                return None
        return super().visit_binding(binding)

    def _bind_params(self, callee: Function, args: list) -> dict | None:
        """The callee's symbolic vars in the caller's terms, or None when a check could fail."""
        if len(args) != len(callee.params):
            return None
        callee_vars = set(symbolic_vars_of([p.struct_info for p in callee.params]))
        matcher = StructInfoMatcher(self.analyzer, lambda v: v in callee_vars)
        for param, arg in zip(callee.params, args):
            if arg.struct_info is None or matcher.match(param.struct_info, arg.struct_info) != YES:
                return None
        if matcher.finish() != YES:
            return None
        symbols = dict(matcher.bindings)   # the matcher proved the vars' own facts too
        if not all(var in symbols for var in callee_vars):
            return None
        # bounds given as the callee's attributes are checked at its entry
        bounds = var_bounds(callee)
        for var in callee_vars:
            lower, upper = bounds.get(var.name, (None, None))
            if upper is not None and not self.analyzer.can_prove_less_equal(symbols[var], upper):
                return None
            if lower is not None and not self.analyzer.can_prove_less_equal(lower, symbols[var]):
                return None
        return symbols

    def _emit_body(self, callee: Function, args: list, symbols: dict, result_var: Var) -> None:
        bb = self.builder
        values = dict(zip(callee.params, args))
        for block in callee.body.blocks:
            for binding in block.bindings:
                values[binding.var] = bb.emit(_copy(binding.value, values, symbols), binding.var.name_hint)
        result = bb.normalize(_copy(callee.body.body, values, symbols))
        self.var_remap[result_var] = self._rebind(result_var, result)


def _localize_block_outputs(func: Function) -> Function:
    """Make a dataflow block's output vars that nothing after the block reads DataflowVars, so
    fusion need not materialize them (blocks merged around an inlined call keep the outputs
    the old, separate blocks needed)."""
    local = {}
    for seq in collect(func, lambda n: isinstance(n, SeqExpr)):
        for i, block in enumerate(seq.blocks):
            if not isinstance(block, DataflowBlock):
                continue
            read_later = {id(v) for node in [*seq.blocks[i + 1:], seq.body]
                          for v in collect(node, lambda n: isinstance(n, Var))}
            for binding in block.bindings:
                var = binding.var
                if type(var) is Var and id(var) not in read_later:
                    local[var] = DataflowVar(var.name_hint, var.struct_info)
    return substitute(func, local) if local else func


def _pure(value, mod: IRModule) -> bool:
    """Whether a binding's value may sit in a dataflow block (no impure calls, no ``if``)."""
    if isinstance(value, (Var, Constant, StringImm, ShapeExpr, PrimValue, GlobalVar, ExternFunc)):
        return True
    if isinstance(value, Tuple):
        return all(_pure(f, mod) for f in value.fields)
    if isinstance(value, TupleGetItem):
        return _pure(value.tuple_value, mod)
    if isinstance(value, Call):
        if isinstance(value.op, Op):
            from ..op.registry import get_op_spec
            pure = get_op_spec(value.op.name).pure
        elif isinstance(value.op, GlobalVar) and value.op.name_hint in mod:
            target = mod[value.op.name_hint]   # a direct prim_func call writes its outputs: impure
            pure = isinstance(target, Function) and target.is_pure
        else:
            pure = False
        return pure and all(_pure(a, mod) for a in value.args)
    return False
