"""Bind a callee prim_func's symbolic variables to the shapes it is called with.

When FuseTIR inlines a prim_func, each of its buffer parameters stands for a
buffer of the merged function, whose shape is written in the merged
function's own variables. The callee's variables are solved from those
shapes, not compared structurally:

1. scalar parameters take the call's ``tir_vars`` values;
2. a bare dimension ``v`` binds ``v`` directly;
3. a dimension ``a * v + b`` with a single still-unknown ``v`` is solved,
   ``v = (e - b) / a`` (callee ``(n - 1,)`` vs ``(k,)`` gives ``n = k + 1``;
   callee ``(n * m,)`` vs ``(256,)`` gives ``n = 256 / m`` once ``m`` is
   known), repeated until nothing new is learnt;
4. every dimension is then checked: one that provably differs is an error.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.arith import Analyzer
from tensorir.functor import substitute

from ..struct_info_util import symbolic_vars_of


class FuseTIRError(ValueError):
    """A subgraph cannot be merged into one prim_func (names the prim_func and the problem)."""


class CalleeVarBinder:
    def __init__(self, callee_name: str, analyzer: Analyzer | None = None):
        self.callee_name = callee_name
        self.analyzer = analyzer or Analyzer()
        self.bindings: dict[tir.Var, tir.PrimExpr] = {}
        self._pairs: list[tuple[tir.PrimExpr, tir.PrimExpr, str]] = []

    def bind_scalar(self, var: tir.Var, value: tir.PrimExpr) -> None:
        self.bindings[var] = value

    def add_shape(self, callee_shape, actual_shape, what: str) -> None:
        if len(callee_shape) != len(actual_shape):
            raise FuseTIRError(f"prim_func {self.callee_name!r}: {what} has rank {len(callee_shape)} "
                               f"but is called with rank {len(actual_shape)}")
        for dim, (pattern, actual) in enumerate(zip(callee_shape, actual_shape)):
            self._pairs.append((pattern, actual, f"{what} dim {dim}"))

    def solve(self) -> dict[tir.Var, tir.PrimExpr]:
        for pattern, actual, _ in self._pairs:
            if isinstance(pattern, tir.Var) and pattern not in self.bindings:
                self.bindings[pattern] = actual
        progress = True
        while progress:
            progress = False
            for pattern, actual, _ in self._pairs:
                unknown = self._unknown_vars(pattern)
                if len(unknown) == 1 and self._solve_linear(pattern, unknown[0], actual):
                    progress = True
        for pattern, actual, what in self._pairs:
            unknown = self._unknown_vars(pattern)
            if unknown:
                raise FuseTIRError(
                    f"prim_func {self.callee_name!r}: cannot determine symbolic var {unknown[0].name} "
                    f"from {what} ({_text(pattern)} == {_text(actual)})")
            bound = self.analyzer.simplify(substitute(pattern, self.bindings))
            if self.analyzer.can_prove(tir.NE(bound, actual)):
                raise FuseTIRError(f"prim_func {self.callee_name!r}: {what} is {_text(pattern)} = "
                                   f"{_text(bound)}, but the buffer passed has {_text(actual)}")
        return self.bindings

    def _unknown_vars(self, expr) -> list[tir.Var]:
        return [v for v in symbolic_vars_of(expr) if v not in self.bindings]

    def _solve_linear(self, pattern, var: tir.Var, actual) -> bool:
        """Bind ``var`` from ``pattern == actual`` when ``pattern`` is ``a * var + b``."""
        known = substitute(pattern, self.bindings)
        simplify = self.analyzer.simplify
        offset = simplify(substitute(known, {var: tir.IntImm(0, var.dtype)}))
        slope = simplify(substitute(known, {var: tir.IntImm(1, var.dtype)}) - offset)
        if not isinstance(slope, tir.IntImm) or slope.value == 0:
            return False
        if not self.analyzer.can_prove_equal(known, slope * var + offset):
            return False  # not linear in var
        rest = simplify(actual - offset)
        if slope.value == 1:
            value = rest
        elif isinstance(rest, tir.IntImm):
            if rest.value % slope.value:
                raise FuseTIRError(f"prim_func {self.callee_name!r}: {_text(pattern)} == {_text(actual)} "
                                   f"has no integer solution for {var.name}")
            value = tir.IntImm(rest.value // slope.value, var.dtype)
        else:
            value = simplify(tir.floordiv(rest, slope))
        self.bindings[var] = value
        return True


def _text(expr) -> str:
    from ..struct_info_util import format_prim
    return format_prim(expr)
