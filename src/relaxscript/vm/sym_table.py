"""The host integer table of one VM function and PrimExpr -> plain-data expression trees.

Every symbolic variable of a graph function gets a slot in one int64 table
per call (paper section 4.7); derived expressions (``n * 4``) and the
argument vectors that kernels receive get slots too. Expressions are turned
into plain-data trees over the table (``("*", ("t", 0), ("int", 4))``) at
build time; ``sym_code`` generates Python from them, compiled once when the
executable is linked, so nothing walks an expression tree at run time.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.functor import collect

from .instructions import VMBuildError
from .sym_code import render_expr

_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
           E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


def trunc_div(a, b):
    """C-style integer division (``tensorir`` Div on integers)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trunc_mod(a, b):
    return a - trunc_div(a, b) * b


# Names the generated source may use besides the table ``t``.
RUNTIME_NAMES = {"_tdiv": trunc_div, "_tmod": trunc_mod}


class SymTable:
    """Slot allocation for one function: vars, derived expressions, kernel vectors."""

    def __init__(self, func_name: str):
        self.func_name = func_name
        self.var_slots: dict[E.Var, int] = {}
        self.size = 0

    def new_slot(self) -> int:
        self.size += 1
        return self.size - 1

    def new_slots(self, count: int) -> int:
        base = self.size
        self.size += count
        return base

    def slot_of(self, var: E.Var) -> int:
        slot = self.var_slots.get(var)
        if slot is None:
            slot = self.var_slots[var] = self.new_slot()
        return slot

    def has(self, var: E.Var) -> bool:
        return var in self.var_slots

    # ---------------------------------------------------------------- code
    def code(self, expr, defined=None) -> tuple:
        """An expression tree (``sym_code``) computing ``expr`` from the table ``t``.

        ``defined`` (a set of Vars) restricts which vars may be read; an
        expression using any other var is a build error naming it."""
        if isinstance(expr, bool):
            return ("bool", expr)
        if isinstance(expr, int):
            return ("int", int(expr))
        if isinstance(expr, E.IntImm):
            return ("bool", bool(expr.value)) if expr.dtype == "bool" else ("int", int(expr.value))
        if isinstance(expr, E.FloatImm):
            return ("float", float(expr.value))
        if isinstance(expr, E.Var):
            if (defined is not None and expr not in defined) or expr not in self.var_slots:
                raise VMBuildError(f"function '{self.func_name}': symbolic var {expr.name} is used "
                                   "where it has no value (no parameter or match_cast defines it)")
            return ("t", self.var_slots[expr])
        op = _BINARY.get(type(expr))
        if op is not None:
            return (op, self.code(expr.a, defined), self.code(expr.b, defined))
        if isinstance(expr, E.Div):
            a, b = self.code(expr.a, defined), self.code(expr.b, defined)
            return ("/", a, b) if dt.is_float(expr.dtype) else ("tdiv", a, b)
        if isinstance(expr, E.Min):
            return ("min", self.code(expr.a, defined), self.code(expr.b, defined))
        if isinstance(expr, E.Max):
            return ("max", self.code(expr.a, defined), self.code(expr.b, defined))
        if isinstance(expr, E.Or):  # before And: Or subclasses And
            return ("or", self.code(expr.a, defined), self.code(expr.b, defined))
        if isinstance(expr, E.And):
            return ("and", self.code(expr.a, defined), self.code(expr.b, defined))
        if isinstance(expr, E.Not):
            return ("not", self.code(expr.a, defined))
        if isinstance(expr, E.Select):
            return ("select", self.code(expr.condition, defined), self.code(expr.true_value, defined),
                    self.code(expr.false_value, defined))
        if isinstance(expr, E.Cast):
            conv = "bool" if expr.dtype == "bool" else "float" if dt.is_float(expr.dtype) else "int"
            return ("cast", conv, self.code(expr.value, defined))
        raise VMBuildError(f"function '{self.func_name}': the VM cannot compute the symbolic "
                           f"expression {type(expr).__name__} at run time")


def vars_of(expr) -> list[E.Var]:
    if isinstance(expr, E.Var):
        return [expr]
    return collect(expr, lambda n: isinstance(n, E.Var))


def compile_expr(tree, name: str = "<vm-sym>"):
    """``lambda t: <expression>``, generated from the tree and compiled once per function."""
    source = render_expr(tree)
    return eval(compile(f"lambda t: {source}", name, "eval"), dict(RUNTIME_NAMES))  # noqa: S307
