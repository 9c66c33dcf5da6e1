"""CanonicalizeBindings: remove indirections between variables.

- ``y = x`` (same annotation): uses of ``y`` become ``x`` and the binding
  goes. When ``y`` is a dataflow block's output and ``x`` a DataflowVar of
  that block, ``x``'s own binding is rebound to ``y`` instead, so the value
  stays visible after the block (``lv0 = f(a); gv = lv0`` -> ``gv = f(a)``).
  A binding whose annotation differs from its value's (an explicit, coarser
  annotation) is kept: it changes what later code may assume.
- ``y = R.match_cast(x, S)`` whose check is proven by ``x``'s annotation
  becomes a plain binding (then usually a trivial one). Symbolic variables
  the cast would define are replaced by what they provably equal, in every
  later annotation and shape. Casts the prover cannot settle stay checks.
- ``t[i]`` where ``t`` is bound to a tuple literal becomes the field.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.dispatch import handles
from tensorir.functor import substitute
from tensorir.structural import structural_equal

from ..expr import (BindingBlock, DataflowVar, Function, MatchCast, SeqExpr, Tuple,
                    TupleGetItem, Var, VarBinding)
from ..expr_functor import ExprMutator
from ..irmodule import IRModule
from ..struct_info_util import (YES, StructInfoMatcher, default_analyzer, substitute_sinfo,
                               symbolic_vars_of)
from .dead_code_elimination import drop_empty_blocks
from .pass_infra import Pass


class CanonicalizeBindings(Pass):
    """Fold trivial var bindings, proven match_casts and indexing of tuple literals."""
    name = "CanonicalizeBindings"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        changed = False
        for name, func in mod.relax_functions.items():
            new = canonicalize_function(func)
            if new is not func:
                functions[name] = new
                changed = True
        return IRModule(functions, mod.attrs) if changed else mod


def canonicalize_function(func: Function) -> Function:
    """One graph function with CanonicalizeBindings applied."""
    return _Canonicalizer().canonicalize(func)


class _Canonicalizer(ExprMutator):
    def __init__(self):
        super().__init__()
        self.analyzer = default_analyzer()
        self.tuple_values: dict[Var, Tuple] = {}
        self.defined_symbolic: list[set] = []
        # DataflowVar -> output Var that takes over its binding (applied after the walk).
        self.takeovers: dict[Var, Var] = {}

    def canonicalize(self, func: Function) -> Function:
        new = self.visit(func)
        if self.takeovers:
            new = substitute(new, self.takeovers)
        return new

    @handles(Function)
    def visit_Function(self, func: Function):
        self.defined_symbolic.append(set(symbolic_vars_of([p.struct_info for p in func.params])))
        try:
            return super().visit_Function(func)
        finally:
            self.defined_symbolic.pop()

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        self.defined_symbolic.append(set())
        try:
            new = super().visit_SeqExpr(seq)
        finally:
            self.defined_symbolic.pop()
        if new is not seq:
            blocks = drop_empty_blocks(new.blocks)
            if len(blocks) != len(new.blocks):
                new = new.replace(blocks=blocks)
        return new

    def visit_block(self, block: BindingBlock) -> BindingBlock:
        bindings = [self.visit_binding(b) for b in block.bindings]
        kept = tuple(b for b in bindings if b is not None)
        same = len(kept) == len(block.bindings) and all(a is b for a, b in zip(kept, block.bindings))
        return block if same else block.replace(bindings=kept)

    def _is_defined(self, var: tir.Var) -> bool:
        return any(var in scope for scope in self.defined_symbolic)

    # ---------------------------------------------------------------- bindings
    def visit_binding(self, binding):
        if isinstance(binding, MatchCast):
            binding = self._fold_match_cast(binding)
            if isinstance(binding, MatchCast):
                self.defined_symbolic[-1].update(symbolic_vars_of(binding.struct_info))
                return super().visit_binding(binding)
        value = self.visit(binding.value)
        if isinstance(value, TupleGetItem):
            value = self._field_of_literal(value)
        var = self.visit_var_def(binding.var)
        if isinstance(value, Var) and structural_equal(var.struct_info, value.struct_info,
                                                       map_free_vars=False):
            if self._drop_trivial(binding.var, var, value):
                return None
        if isinstance(value, Tuple):
            self.tuple_values[binding.var] = value
        if value is binding.value and var is binding.var and isinstance(binding, VarBinding):
            return binding
        return VarBinding(var, value)

    def _drop_trivial(self, old_var: Var, var: Var, value: Var) -> bool:
        """Handle ``var = value`` between two vars with the same annotation."""
        if isinstance(var, DataflowVar) or not isinstance(value, DataflowVar):
            self._remap(old_var, value)
            return True
        # An output copying a DataflowVar (necessarily of this block): the output
        # takes over the DataflowVar's binding, earlier uses included.
        self.takeovers[value] = var
        self._remap(old_var, var)
        self._remap(value, var)
        return True

    def _remap(self, old, new) -> None:
        self.var_remap[old] = new
        self._memo.pop(old, None)  # ``old`` may have been visited (memoised) before

    def _field_of_literal(self, item: TupleGetItem):
        tup = item.tuple_value
        literal = self.tuple_values.get(tup) if isinstance(tup, Var) else tup
        if isinstance(literal, Tuple) and -len(literal.fields) <= item.index < len(literal.fields):
            return literal.fields[item.index]
        return item

    def _fold_match_cast(self, binding: MatchCast):
        """A plain binding when the cast is proven to succeed, else the match_cast itself."""
        value = self.visit(binding.value)
        # Not through visit_value: the memo would pin the annotation before the new vars are replaced.
        symbolic_remap = {k: v for k, v in self.var_remap.items() if isinstance(k, tir.Var)}
        target = substitute_sinfo(binding.struct_info, symbolic_remap)
        if value.struct_info is None:
            return binding
        matcher = StructInfoMatcher(self.analyzer, lambda v: not self._is_defined(v))
        matcher.match(target, value.struct_info)
        if matcher.finish() != YES:
            return binding
        new_vars = [v for v in symbolic_vars_of(target) if not self._is_defined(v)]
        if any(v not in matcher.bindings for v in new_vars):
            return binding
        for v in new_vars:
            self._remap(v, matcher.bindings[v])
        return VarBinding(binding.var, value)  # its annotation is rewritten like any binder's


__all__ = ["CanonicalizeBindings"]
