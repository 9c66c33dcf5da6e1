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
from tensorir.arith.evaluate import call_intrinsic, has_intrinsic, round_to_dtype
from tensorir.dispatch import ClassDispatch, handles
from tensorir.functor import collect
from tensorir.operators import PYTHON_INFIX

from .instructions import VMBuildError
from .sym_code import ROUNDED_DTYPES, render_expr

def trunc_div(a, b):
    """C-style integer division (``tensorir`` Div on integers)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trunc_mod(a, b):
    return a - trunc_div(a, b) * b


# Names the generated source may use besides the table ``t``.
RUNTIME_NAMES = {"_tdiv": trunc_div, "_tmod": trunc_mod, "_round": round_to_dtype, "_intrin": call_intrinsic}


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
        return _TreeBuilder(self, defined).tree(expr)


class _TreeBuilder(ClassDispatch):
    """PrimExpr -> ``sym_code`` tree, with the reference interpreter's meaning
    (``tensorir.arith.evaluate``): floats narrower than float64 are rounded to their
    dtype after every operation, integer ``Div`` truncates."""

    def __init__(self, table: SymTable, defined):
        self.table = table
        self.defined = defined

    def tree(self, expr) -> tuple:
        handler = self.handler_for(type(expr))
        if handler is None:
            raise VMBuildError(f"function '{self.table.func_name}': the VM cannot compute the symbolic "
                               f"expression {type(expr).__name__} at run time")
        return handler(self, expr)

    @staticmethod
    def rounded(tree: tuple, dtype: str) -> tuple:
        return ("round", dtype, tree) if dtype in ROUNDED_DTYPES else tree

    @handles(E.IntImm)
    def int_literal(self, expr: E.IntImm) -> tuple:
        return ("bool", bool(expr.value)) if expr.dtype == "bool" else ("int", int(expr.value))

    @handles(E.FloatImm)
    def float_literal(self, expr: E.FloatImm) -> tuple:
        return ("float", float(round_to_dtype(expr.value, expr.dtype)))

    @handles(E.Var)
    def var(self, expr: E.Var) -> tuple:
        slots, defined = self.table.var_slots, self.defined
        if (defined is not None and expr not in defined) or expr not in slots:
            raise VMBuildError(f"function '{self.table.func_name}': symbolic var {expr.name} is used "
                               "where it has no value (no parameter or match_cast defines it)")
        return ("t", slots[expr])

    @handles(*(cls for cls in PYTHON_INFIX if cls is not E.Div))
    def infix(self, expr) -> tuple:
        tree = (PYTHON_INFIX[type(expr)][0], self.tree(expr.a), self.tree(expr.b))
        return self.rounded(tree, expr.dtype)

    @handles(E.Div)
    def div(self, expr: E.Div) -> tuple:
        a, b = self.tree(expr.a), self.tree(expr.b)
        return self.rounded(("/", a, b), expr.dtype) if dt.is_float(expr.dtype) else ("tdiv", a, b)

    @handles(E.Min, E.Max)
    def min_max(self, expr) -> tuple:
        return ("min" if isinstance(expr, E.Min) else "max", self.tree(expr.a), self.tree(expr.b))

    @handles(E.Not)
    def logical_not(self, expr: E.Not) -> tuple:
        return ("not", self.tree(expr.a))

    @handles(E.Select)
    def select(self, expr: E.Select) -> tuple:
        return ("select", self.tree(expr.condition), self.tree(expr.true_value), self.tree(expr.false_value))

    @handles(E.Cast)
    def cast(self, expr: E.Cast) -> tuple:
        conv = "bool" if expr.dtype == "bool" else "float" if dt.is_float(expr.dtype) else "int"
        return self.rounded(("cast", conv, self.tree(expr.value)), expr.dtype)

    @handles(E.CallFunc)
    def subroutine_call(self, expr: E.CallFunc) -> tuple:
        raise VMBuildError(f"function '{self.table.func_name}': a call of prim_func {expr.callee!r} in a "
                           "symbolic expression")

    @handles(E.Call)
    def intrinsic(self, expr: E.Call) -> tuple:
        if not has_intrinsic(expr.op):
            raise VMBuildError(f"function '{self.table.func_name}': the VM has no implementation of "
                               f"intrinsic {expr.op!r} in a symbolic expression")
        return ("intrin", expr.op, expr.dtype, *(self.tree(a) for a in expr.args))


def vars_of(expr) -> list[E.Var]:
    if isinstance(expr, E.Var):
        return [expr]
    return collect(expr, lambda n: isinstance(n, E.Var))


def compile_expr(tree, name: str = "<vm-sym>"):
    """``lambda t: <expression>``, generated from the tree and compiled once per function."""
    source = render_expr(tree)
    return eval(compile(f"lambda t: {source}", name, "eval"), dict(RUNTIME_NAMES))  # noqa: S307
