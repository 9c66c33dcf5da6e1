"""Symbolic (PrimExpr) expressions inside graph-level scripts: print and parse.

Shapes, ``R.prim_value`` and ``R.Prim(value=...)`` hold tensorir PrimExprs.
The printer and parser here are exact inverses: the parser builds node
classes directly (no literal folding), so ``2 + 3`` stays an ``Add`` when
that is what was printed, and literals carry their dtype explicitly unless
it is int64 (``T.int32(4)``, ``T.float32(1.5)``).
"""
from __future__ import annotations

import ast
import math
from typing import Callable

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.dispatch import handles
from tensorir.operators import PREC_ATOM, PREC_UNARY, PYTHON_INFIX, left_min_prec
from tensorir.script.expr_printer import ExprPrinter
from tensorir.script.literals import int_literal_problem


# ---------------------------------------------------------------- printing
class SymExprPrinter(ExprPrinter):
    """The prim_func expression printer with the exact-inverse literal rule: a literal is
    bare only when int64 or bool (the parser here never adopts a neighbour's dtype), and
    ``0 - x`` stays a subtraction."""

    def literal(self, e, context_dtype: str | None) -> tuple[str, int]:
        if isinstance(e, E.IntImm):
            if e.dtype == "bool":
                return ("True" if e.value else "False"), PREC_ATOM
            if e.dtype == "int64":
                return str(e.value), (PREC_UNARY if e.value < 0 else PREC_ATOM)
            return f"T.{e.dtype}({e.value})", PREC_ATOM
        value = repr(e.value) if math.isfinite(e.value) else f'"{e.value}"'
        return f"T.{e.dtype}({value})", PREC_ATOM

    @handles(*PYTHON_INFIX)
    def infix(self, e, ctx):
        symbol, prec = PYTHON_INFIX[type(e)]
        return f"{self.operand(e.a, left_min_prec(prec))} {symbol} {self.operand(e.b, prec + 1)}", prec

    @handles(E.CallFunc)
    def subroutine_call(self, e, ctx):
        raise ValueError(f"a call of prim_func {e.callee!r} is not a symbolic shape expression")

    @handles(E.Call)
    def intrinsic_call(self, e, ctx):
        if e.op not in E.INTRINSICS:
            self.not_in_annotations(e, ctx)
        return f"T.{e.op}({', '.join(self.fmt(a) for a in e.args)})", PREC_ATOM

    @handles(E.StringImm, E.BufferLoad, E.Ramp, E.Broadcast)
    def not_in_annotations(self, e, ctx):
        raise ValueError(f"cannot print {type(e).__name__} in a graph-level annotation")


def format_sym_expr(expr: E.PrimExpr, name_of: Callable[[E.Var], str]) -> str:
    """Python source for ``expr``; ``name_of`` names each symbolic variable."""
    return SymExprPrinter(name_of).fmt(expr)


# ---------------------------------------------------------------- parsing
_BIN = {ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.FloorDiv: E.FloorDiv,
        ast.Mod: E.FloorMod, ast.Div: E.Div}
_CMP = {ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT, ast.GtE: E.GE}
_T_BINARY = {"min": E.Min, "max": E.Max, "floordiv": E.FloorDiv, "floormod": E.FloorMod}


class SymExprParser:
    """Evaluates an ``ast.expr`` to a PrimExpr.

    ``lookup(name, node)`` returns the symbolic variable bound to ``name`` (and
    raises a ParseError when there is none); ``error(message, node)`` builds a
    ParseError; ``t_names`` are the names that refer to the ``T`` namespace;
    ``python(node)`` (decorator form) gives ``(True, value)`` for plain Python
    such as ``HIDDEN * 2`` (``ParseContext.python_value``).
    """

    def __init__(self, lookup, error, t_names=frozenset({"T"}), python=None):
        self.lookup = lookup
        self.error = error
        self.t_names = t_names
        self.python = python

    def parse(self, node: ast.expr) -> E.PrimExpr:
        value = self._eval(node)
        return self._build(E.convert, node, value) if not isinstance(value, E.PrimExpr) else value

    def _eval(self, node):
        """PrimExpr, or a Python int/float/bool for a bare literal (adopts the other side's dtype)."""
        if self.python is not None and not isinstance(node, ast.Constant):
            found, value = self.python(node)
            if found:
                return self._python_number(value, node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, int) and not isinstance(node.value, bool) \
                    and int_literal_problem(node.value) is not None:
                raise self.error(int_literal_problem(node.value), node)
            if isinstance(node.value, (bool, int, float)):
                return node.value
            raise self.error(f"expected a symbolic expression, got {node.value!r}", node)
        if isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return node.id == "True"
            return self.lookup(node.id, node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return self._build(_BIN[type(node.op)], node, self._eval(node.left), self._eval(node.right))
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1 or type(node.ops[0]) not in _CMP:
                raise self.error("only single comparisons (a < b) are supported here", node)
            return self._build(_CMP[type(node.ops[0])], node, self._eval(node.left),
                               self._eval(node.comparators[0]))
        if isinstance(node, ast.BoolOp):
            cls = E.And if isinstance(node.op, ast.And) else E.Or
            out = self.parse(node.values[0])
            for v in node.values[1:]:
                out = self._build(cls, node, out, self.parse(v))
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.t_names:
            return self._call_t(node.func.attr, node)
        raise self.error(f"unsupported symbolic expression: {ast.unparse(node)}", node)

    def _python_number(self, value, node):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)):
            problem = int_literal_problem(int(value))
            if problem is not None:
                raise self.error(problem, node)
            return int(value)
        if isinstance(value, (float, np.floating)):
            return float(value)
        if isinstance(value, E.PrimExpr):
            return value
        raise self.error(f"{ast.unparse(node)} is a Python {type(value).__name__}, not a number or "
                         "symbolic expression", node)

    def _build(self, cls, node, *operands):
        try:
            result = cls(*operands)
        except (TypeError, ValueError, OverflowError) as err:
            raise self.error(str(err), node) from None
        if isinstance(result, E.IntImm) and int_literal_problem(result.value, result.dtype) is not None:
            raise self.error(int_literal_problem(result.value, result.dtype), node)
        return result

    def _unary(self, node: ast.UnaryOp):
        value = self._eval(node.operand)
        if isinstance(node.op, ast.USub):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value
            value = self._build(E.convert, node, value)  # True -> T.bool(True)
            return self._build(E.Sub, node, E.const(0, value.dtype), value)
        if isinstance(node.op, ast.Not):
            return self._build(E.Not, node, value)
        if isinstance(node.op, ast.UAdd):
            return value
        raise self.error("unsupported unary operator", node)

    def _call_t(self, name: str, node: ast.Call):
        args = node.args
        if node.keywords:
            raise self.error(f"T.{name} takes no keyword arguments here", node)
        if name in _T_BINARY:
            self._arity(node, 2)
            return self._build(_T_BINARY[name], node, self._eval(args[0]), self._eval(args[1]))
        if name in ("if_then_else", "Select"):
            self._arity(node, 3)
            return self._build(E.Select, node, *(self._eval(a) for a in args))
        if name == "Cast":
            self._arity(node, 2)
            return self._build(E.Cast, node, self._dtype(args[0]), self.parse(args[1]))
        if name == "cast":
            self._arity(node, 2)
            return self._build(E.cast, node, self._dtype(args[1]), self.parse(args[0]))
        if name in E.INTRINSICS:
            self._arity(node, E.INTRINSICS[name])
            return self._build(lambda *a: E.call_intrin(name, *a), node, *(self.parse(a) for a in args))
        try:
            dtype = dt.normalize(name)
        except ValueError:
            raise self.error(f"unknown function 'T.{name}'", node) from None
        self._arity(node, 1)
        return self._typed_literal(dtype, args[0], node)

    def _typed_literal(self, dtype: str, arg: ast.expr, node: ast.Call):
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            try:
                return E.FloatImm(float(arg.value), dtype)  # "nan", "inf"
            except ValueError:
                raise self.error(f"T.{dtype}({arg.value!r}) is not a number", node) from None
        value = self._eval(arg)
        if isinstance(value, E.PrimExpr):
            return self._build(E.cast, node, dtype, value)
        return self._build(E.const, node, value, dtype)

    def _dtype(self, node) -> str:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            raise self.error("expected a dtype string", node)
        try:
            return dt.normalize(node.value)
        except ValueError:
            raise self.error(f"unknown dtype {node.value!r}", node) from None

    def _arity(self, node: ast.Call, count: int) -> None:
        if len(node.args) != count:
            raise self.error(f"{ast.unparse(node.func)} takes {count} argument(s), "
                             f"got {len(node.args)}", node)
