"""Print PrimExprs as script text with minimal parentheses and exact literals.

A literal is printed bare when re-parsing it gives the same node: default
dtypes (int64, float32, bool) anywhere, and any dtype when it is an operand
next to a non-literal of the same dtype (the parser then adopts that dtype,
just as the IR builders do). Otherwise it is typed: ``T.float16(1.5)``.
"""
from __future__ import annotations

import keyword
import math

from .. import expr as E
from ..buffer import Buffer
from .literals import string_literal

# Python operator precedence (higher binds tighter).
_OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 6, 7, 8, 10
_BIN = {E.Add: ("+", _ADD), E.Sub: ("-", _ADD), E.Mul: ("*", _MUL), E.Div: ("/", _MUL),
        E.FloorDiv: ("//", _MUL), E.FloorMod: ("%", _MUL),
        E.EQ: ("==", _CMP), E.NE: ("!=", _CMP), E.LT: ("<", _CMP), E.LE: ("<=", _CMP),
        E.GT: (">", _CMP), E.GE: (">=", _CMP), E.And: ("and", _AND), E.Or: ("or", _OR)}
_DEFAULT_LITERAL_DTYPES = ("int64", "float32", "bool")
RESERVED = frozenset(keyword.kwlist) | {"T", "range", "min", "max", "abs", "True", "False", "None",
                                        "prim_func", "tensorir", "R"}


class Namer:
    """Unique, deterministic, valid Python names for Vars and Buffers."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set(RESERVED)
        self._keep: list = []  # keep named nodes alive so ids stay unique

    def __call__(self, node) -> str:
        name = self.names.get(id(node))
        if name is not None:
            return name
        base = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in (node.name or "v"))
        if not base or base[0].isdigit():
            base = "v_" + base
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.names[id(node)] = name
        self._keep.append(node)
        return name


def py_literal(value) -> str:
    """Annotation / attribute values: Python literals, containers, PrimExprs."""
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value!r}")'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, E.PrimExpr):
        return ExprPrinter(Namer()).fmt(value)
    raise TypeError(f"cannot print annotation value {value!r}")


def _is_zero(e) -> bool:
    """A literal 0 that ``-x`` re-creates (positive zero of any numeric dtype)."""
    if isinstance(e, E.FloatImm):
        return e.value == 0.0 and math.copysign(1.0, e.value) > 0
    return E.is_const_int(e, 0)


def is_imm(e) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm))


class ExprPrinter:
    def __init__(self, namer: Namer):
        self.name = namer

    def fmt(self, e: E.PrimExpr, context_dtype: str | None = None) -> str:
        """``context_dtype``: a bare literal of this dtype re-parses exactly here."""
        return self._fmt(e, context_dtype)[0]

    def operand(self, e, min_prec: int, context_dtype: str | None = None) -> str:
        text, prec = self._fmt(e, context_dtype)
        return f"({text})" if prec < min_prec else text

    def literal(self, e, context_dtype: str | None) -> tuple[str, int]:
        bare = e.dtype in _DEFAULT_LITERAL_DTYPES or e.dtype == context_dtype
        if isinstance(e, E.IntImm):
            if e.dtype == "bool":
                text = "True" if e.value else "False"
                return (text, _ATOM) if bare else (f"T.bool({text})", _ATOM)
            text = str(e.value)
            if bare:
                return text, (_UNARY if e.value < 0 else _ATOM)
            return f"T.{e.dtype}({text})", _ATOM
        value = e.value
        if not math.isfinite(value):
            return f'T.{e.dtype}("{value!r}")', _ATOM
        text = repr(value)
        if bare:
            return text, (_UNARY if text.startswith("-") else _ATOM)
        return f"T.{e.dtype}({text})", _ATOM

    def _fmt(self, e, ctx: str | None) -> tuple[str, int]:
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return self.literal(e, ctx)
        if isinstance(e, E.StringImm):
            return string_literal(e.value), _ATOM
        if isinstance(e, E.Var):
            return self.name(e), _ATOM
        if isinstance(e, E.BufferLoad):
            return self.load(e.buffer, e.indices), _ATOM
        if isinstance(e, E.Sub) and _is_zero(e.a) and not is_imm(e.b):
            return "-" + self.operand(e.b, _UNARY), _UNARY
        if isinstance(e, (E.Min, E.Max)):
            name = "T.min" if isinstance(e, E.Min) else "T.max"
            return f"{name}({self.pair(e.a, e.b, 0)})", _ATOM
        if type(e) in _BIN:
            symbol, prec = _BIN[type(e)]
            if isinstance(e, (E.And, E.Or)):
                return f"{self.operand(e.a, prec)} {symbol} {self.operand(e.b, prec + 1)}", prec
            right_prec = prec + 1
            left_prec = prec + 1 if prec == _CMP else prec
            return f"{self.pair(e.a, e.b, left_prec, right_prec, symbol)}", prec
        if isinstance(e, E.Not):
            return "not " + self.operand(e.a, _NOT), _NOT
        if isinstance(e, E.Select):
            return (f"T.if_then_else({self.fmt(e.condition)}, "
                    f"{self.pair(e.true_value, e.false_value, 0)})", _ATOM)
        if isinstance(e, E.Cast):
            return f'T.Cast("{e.dtype}", {self.fmt(e.value)})', _ATOM
        if isinstance(e, E.Call):
            return self.call(e), _ATOM
        raise TypeError(f"cannot print {type(e).__name__}")

    def pair(self, a, b, left_prec: int, right_prec: int | None = None, symbol: str = ",") -> str:
        """Two operands; a literal next to a non-literal of its dtype prints bare."""
        ctx_a = b.dtype if is_imm(a) and not is_imm(b) else None
        ctx_b = a.dtype if is_imm(b) and not is_imm(a) else None
        left = self.operand(a, left_prec, ctx_a)
        right = self.operand(b, right_prec if right_prec is not None else left_prec, ctx_b)
        return f"{left}, {right}" if symbol == "," else f"{left} {symbol} {right}"

    def call(self, e: E.Call) -> str:
        args = ", ".join(self.fmt(a) for a in e.args)
        if e.op in E.INTRINSICS:
            from ..structural import structural_equal
            try:
                rebuilt = E.call_intrin(e.op, *e.args)
            except (TypeError, ValueError):
                rebuilt = None
            if rebuilt is not None and structural_equal(rebuilt, e, map_free_vars=False):
                return f"T.{e.op}({args})"
        return f'T.call_extern("{e.dtype}", {string_literal(e.op)}{", " + args if args else ""})'

    def load(self, buffer: Buffer, indices) -> str:
        if not indices:
            return f"{self.name(buffer)}[()]"
        return f"{self.name(buffer)}[{', '.join(self.fmt(i) for i in indices)}]"


def format_expr(expr, namer: Namer | None = None) -> str:
    return ExprPrinter(namer or Namer()).fmt(E.convert(expr))
