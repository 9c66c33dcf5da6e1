"""ApplyShapeConstraints: use the shape facts (``shape_facts.py``) of each function.

The BlockBuilder collects facts as bindings are emitted (``match_cast``,
``R.assert_op(x == y)``) and deduces with them, so a parser or pass emitting
a binding after a fact already gets the tighter annotation. This pass rebuilds
each graph function in program order and adds what a rebuild alone does not:

1. **Tighter annotations.** Every call is deduced again with the facts known
   at its place (``R.add`` of ``(a * b,)`` and ``(c,)`` after
   ``R.assert_op(a * b == c)`` gets a shape instead of ``ndim=1``), so the op
   legalizes to a kernel and fuses with its neighbours (a coarse op stays a VM
   call of NumPy code).
2. **Fewer run-time checks.** A ``match_cast`` whose every dim the facts
   prove (or that only names new vars for dims already known) becomes a plain
   binding; the vars it would have defined are replaced by the expressions
   they equal in the rest of the function. A new var with a bound
   (``T.int64(upper=...)``) or a bound attribute keeps its check.
3. **Checks of view-like ops stated early.** LegalizeOps puts a check before
   every reshape whose element counts (squeeze whose dims, broadcast_to whose
   dims, topk and argmax/argmin whose axis length) the facts at its place cannot prove
   (``legalize/guards.py``: the kernels read past their input otherwise). This
   pass emits the same checks at the graph level, where each becomes a fact
   for the rest of the function: 30 equal reshapes get one check, a
   regrouping reshape between two elementwise ops joins their kernel, and
   lowering finds the counts proven and adds nothing. A check the facts
   prove is never emitted (``checks_added`` lists the others).

Facts are taken from the top-level blocks of a function only. A function with
no facts and no unproven check is returned unchanged. ``stats`` (per
function) records what the pass found, for
``benchmarks/shape_constraints_report.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir import expr as E
from tensorir.structural import structural_equal

from ..expr import Call, If, MatchCast, PrimValue, ShapeExpr, VarBinding
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..shape_facts import Fact, ShapeFacts
from ..struct_info import TensorStructInfo
from ..struct_info_util import substitute_sinfo, symbolic_vars_of
from .fuse_ops import is_primitive
from .legalize.guards import emit_guards
from .pass_infra import Pass
from .var_bounds import var_bounds


@dataclass
class ShapeConstraintStats:
    """What the pass found in one function."""
    facts: list[Fact] = field(default_factory=list)
    tightened: list[str] = field(default_factory=list)          # bindings given a finer annotation
    casts_removed: list[str] = field(default_factory=list)      # match_casts the facts imply
    checks_added: list[str] = field(default_factory=list)       # ops given a check (legalize/guards.py)


class ApplyShapeConstraints(Pass):
    """Collect shape facts per function and use them (see the module docstring)."""
    name = "ApplyShapeConstraints"

    def __init__(self):
        self.stats: dict[str, ShapeConstraintStats] = {}

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        mutator = _ShapeFactsMutator(mod)
        self.stats = {}
        for name, func in mod.relax_functions.items():
            if is_primitive(func):
                continue
            new, stats = mutator.run_function(func, name)
            self.stats[name] = stats
            if new is not func:
                mutator.builder.update_func(name, new)
        return mutator.builder.get()


class _ShapeFactsMutator(PassMutator):
    def run_function(self, func, name: str):
        self.stats = ShapeConstraintStats()
        self.defined = set(symbolic_vars_of([p.struct_info for p in func.params]))
        self.replaced: dict[E.Var, E.PrimExpr] = {}     # vars of removed match_casts
        self.bounded = var_bounds(func, f"function '{name}'")
        self.depth = 0
        new = self.visit(func)
        if new is not func:
            ret = substitute_sinfo(new.ret_struct_info, self.replaced)
            body = new.body.struct_info
            params = set(symbolic_vars_of([p.struct_info for p in new.params]))
            if _coarser(ret, body) and all(v in params for v in symbolic_vars_of(body)):
                ret = body     # a return annotation the facts made finer (vars of the params only)
            if ret is not new.ret_struct_info:
                new = new.replace(ret_struct_info=ret)
        return new, self.stats

    @property
    def facts(self) -> ShapeFacts:
        return self.builder.shape_facts

    # ---------------------------------------------------------------- structure
    def visit_expr(self, expr):
        if isinstance(expr, If):
            self.depth += 1      # facts from inside a branch hold there only: none are kept
            try:
                return super().visit_expr(expr)
            finally:
                self.depth -= 1
        return super().visit_expr(expr)

    def visit_binding(self, binding):
        if self.depth == 0:
            self.stats.facts = self.facts.facts     # the list grows as bindings are emitted
        if isinstance(binding, MatchCast):
            return self._match_cast(binding)
        if isinstance(binding, VarBinding) and isinstance(binding.value, Call) and self.depth == 0:
            return self._call_binding(binding)
        return super().visit_binding(binding)

    # ---------------------------------------------------------------- calls
    def _call_binding(self, binding):
        bb = self.builder
        value = self.visit_expr(binding.value)
        value = self._substituted(value)
        name = binding.var.name_hint
        # the checks lowering would put before the op (legalize/guards.py), stated here where
        # they become facts for the rest of the function; lowering then finds them proven
        self.stats.checks_added += [name] * len(emit_guards(self.builder, value, name))
        if isinstance(value, Call) and (self.facts.facts or value is not binding.value):
            original = value is binding.value
            value = self._rededuce(value)
            if original and structural_equal(value.struct_info, binding.var.struct_info,
                                             map_free_vars=False):
                value = binding.value    # the facts add nothing here: keep the binding
        if value is binding.value:
            bb.emit_normalized(binding)
            new_var = binding.var
        else:
            new_var = self._rebind(binding.var, value)
            if new_var is not binding.var:
                self.var_remap[binding.var] = new_var
                if _coarser(binding.var.struct_info, new_var.struct_info):
                    self.stats.tightened.append(name)
        return None

    def _substituted(self, call: Call) -> Call:
        """``call`` with the vars of removed match_casts replaced in its shapes."""
        if not self.replaced:
            return call
        args = [ShapeExpr(substitute_sinfo(a.values, self.replaced)) if isinstance(a, ShapeExpr)
                else PrimValue(substitute_sinfo(a.value, self.replaced)) if isinstance(a, PrimValue)
                else a for a in call.args]
        sinfo_args = [substitute_sinfo(s, self.replaced) for s in call.sinfo_args]
        if all(a is b for a, b in zip(args, call.args)) and all(a is b for a, b in zip(sinfo_args, call.sinfo_args)):
            return call
        return Call(call.op, args, call.attrs, sinfo_args)

    def _rededuce(self, call: Call) -> Call:
        new = Call(call.op, call.args, call.attrs, call.sinfo_args)
        span = getattr(call, "span", None)
        if span is not None:
            new.span = span
        return self.builder.normalize(new)

    # ---------------------------------------------------------------- match_cast
    def _match_cast(self, binding: MatchCast):
        bb = self.builder
        value = self.visit_expr(binding.value)
        target = substitute_sinfo(binding.struct_info, self.replaced)
        name = binding.var.name_hint
        new_vars = self._implied(value.struct_info, target) if self.depth == 0 else None
        if new_vars is not None:
            self.replaced.update(new_vars)
            self.replaced = {v: substitute_sinfo(e, self.replaced) for v, e in self.replaced.items()}
            self.defined.update(new_vars)
            self.var_remap[binding.var] = self._rebind(binding.var, value)
            self.stats.casts_removed.append(name)
            return None
        if value is binding.value and target is binding.struct_info:
            bb.emit_normalized(binding)
        else:
            self.var_remap[binding.var] = bb.match_cast(value, target, name)
        self.defined.update(symbolic_vars_of(target))
        return None

    def _facts_hold(self, var: E.Var, value) -> bool:
        """Whether ``value`` provably meets ``var``'s own facts and bound attributes."""
        analyzer = self.builder.analyzer
        lower, upper = self.bounded.get(var.name, (None, None))
        lowers = [b for b in (var.lower, lower) if b is not None]
        uppers = [b for b in (var.upper, upper) if b is not None]
        return all(analyzer.can_prove(E.GE(value, b)) for b in lowers) \
            and all(analyzer.can_prove(E.LE(value, b)) for b in uppers) \
            and (not var.multiple_of or analyzer.can_prove_divisible(value, var.multiple_of))

    def _implied(self, actual, target) -> dict | None:
        """The values of ``target``'s new vars when the facts imply the whole cast, else None."""
        if not (isinstance(actual, TensorStructInfo) and isinstance(target, TensorStructInfo)):
            return None
        if not _known(actual) or target.shape is None or target.ndim != actual.ndim \
                or target.dtype != actual.dtype:
            return None
        new_vars: dict[E.Var, E.PrimExpr] = {}
        for dim, expected in zip(actual.shape, target.shape):
            if isinstance(expected, E.Var) and expected not in self.defined:
                if expected in new_vars or not self._facts_hold(expected, dim):
                    return None   # its facts are checked where it is bound
                new_vars[expected] = dim
                continue
            expected = substitute_sinfo(expected, new_vars)
            if any(v not in self.defined for v in symbolic_vars_of(expected)) \
                    or not self.builder.analyzer.can_prove_equal(dim, expected):
                return None
        return new_vars


def _known(sinfo) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None


def _coarser(old, new) -> bool:
    """Whether ``new`` knows a shape that ``old`` did not."""
    return isinstance(old, TensorStructInfo) and isinstance(new, TensorStructInfo) \
        and old.shape is None and new.shape is not None


__all__ = ["ApplyShapeConstraints", "ShapeConstraintStats"]
