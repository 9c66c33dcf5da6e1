"""Run-time values of symbolic variables, one scope per call frame.

``ShapeEnv`` maps tensorir Vars (by identity) to Python ints and records
where each was bound, so a failed check can say "n was bound to 3 by
x.shape[0]". ``evaluate`` computes a PrimExpr under those bindings with
the loop level's semantics (``tensorir.arith.evaluate``).
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.functor import collect
from tensorir.script.printer import format_expr


class UnboundSymbolError(LookupError):
    """An expression mentions a symbolic variable with no value in this frame."""

    def __init__(self, var: E.Var):
        super().__init__(f"symbolic var {var.name} has no value here")
        self.var = var


def coerce(value, dtype: str):
    """A Python scalar of ``dtype``'s kind (bool, int or float)."""
    if dtype == "bool":
        return bool(value)
    if dt.is_float(dtype):
        return float(value)
    return int(value)


def format_prim_expr(expr) -> str:
    """Source form of a PrimExpr for messages."""
    return format_expr(expr)


class ShapeEnv:
    """Symbolic-variable bindings of one call frame."""

    def __init__(self, parent: "ShapeEnv | None" = None):
        # A closure's frame starts from the bindings visible where it was made.
        self.values: dict[E.Var, int] = dict(parent.values) if parent else {}
        self.origins: dict[E.Var, str] = dict(parent.origins) if parent else {}

    def __contains__(self, var: E.Var) -> bool:
        return var in self.values

    def lookup(self, var: E.Var):
        try:
            return self.values[var]
        except KeyError:
            raise UnboundSymbolError(var) from None

    def bind(self, var: E.Var, value, origin: str) -> None:
        self.values[var] = coerce(value, var.dtype)
        self.origins[var] = origin

    def origin(self, var: E.Var) -> str:
        return self.origins.get(var, "?")

    def evaluate(self, expr) -> int | float | bool:
        """Value of PrimExpr ``expr`` (raises ``UnboundSymbolError`` naming a missing var)."""
        if isinstance(expr, (E.IntImm, E.FloatImm)):
            return expr.value
        if isinstance(expr, E.Var):
            return self.lookup(expr)
        for var in collect(expr, lambda n: isinstance(n, E.Var)):
            if var not in self.values:
                raise UnboundSymbolError(var)
        from tensorir.arith.evaluate import evaluate
        return evaluate(expr, self.values)
