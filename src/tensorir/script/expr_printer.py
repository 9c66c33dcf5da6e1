"""Print PrimExprs as script text with minimal parentheses and exact literals.

A literal is printed bare when re-parsing it gives the same node: default
dtypes (int64, float32, bool) anywhere, and any dtype when it is an operand
next to a non-literal of the same dtype (the parser then adopts that dtype,
just as the IR builders do). Otherwise it is typed: ``T.float16(1.5)``.
"""
from __future__ import annotations

import keyword
import math

from .. import dtype as dt
from .. import expr as E
from ..buffer import Buffer, Pointer
from ..dispatch import ClassDispatch, handles
from ..identity_names import IdentityNames
from ..operators import PREC_ATOM as _ATOM, PREC_NOT as _NOT, PREC_UNARY as _UNARY
from ..operators import PYTHON_INFIX, SCRIPT_CALLS, left_min_prec
from ..thread_sync import is_sync_call
from .literals import TargetAttr, string_literal
_DEFAULT_LITERAL_DTYPES = ("int64", "float32", "bool")
RESERVED = frozenset(keyword.kwlist) | {"T", "range", "min", "max", "abs", "True", "False", "None",
                                        "prim_func", "tensorir", "R"}


class Namer(IdentityNames):
    """Unique, deterministic, valid Python names for Vars and Buffers."""

    def __init__(self):
        super().__init__(RESERVED)

    def __call__(self, node) -> str:
        name = self.lookup(node)
        if name is not None:
            return name
        base = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in (node.name or "v"))
        if not base or base[0].isdigit():
            base = "v_" + base
        return self.assign(node, base)


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
    if isinstance(value, TargetAttr):
        spec = dict(value.spec) if isinstance(value.spec, tuple) else value.spec
        return f"T.target({py_literal(spec)})"
    raise TypeError(f"cannot print annotation value {value!r}")


def _is_zero(e) -> bool:
    """A literal 0 that ``-x`` re-creates (positive zero of any numeric dtype)."""
    if isinstance(e, E.FloatImm):
        return e.value == 0.0 and math.copysign(1.0, e.value) > 0
    return E.is_const_int(e, 0)


def is_imm(e) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm))


class ExprPrinter(ClassDispatch):
    """Handlers take ``(e, context_dtype)`` and return ``(text, precedence)``."""

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
        handler = self.handler_for(type(e))
        if handler is None:
            raise TypeError(f"cannot print {type(e).__name__}")
        return handler(self, e, ctx)

    @handles(E.IntImm, E.FloatImm)
    def imm(self, e, ctx):
        return self.literal(e, ctx)

    @handles(E.StringImm)
    def string(self, e, ctx):
        return string_literal(e.value), _ATOM

    @handles(E.Var)
    def var(self, e, ctx):
        return self.name(e), _ATOM

    @handles(E.BufferLoad)
    def buffer_load(self, e, ctx):
        return self.load(e.buffer, e.indices), _ATOM

    @handles(*PYTHON_INFIX)
    def infix(self, e, ctx):
        symbol, prec = PYTHON_INFIX[type(e)]
        if isinstance(e, E.Sub) and _is_zero(e.a) and not is_imm(e.b):
            return "-" + self.operand(e.b, _UNARY), _UNARY
        if isinstance(e, (E.And, E.Or)):  # operands are bool: no literal context to pass
            return f"{self.operand(e.a, prec)} {symbol} {self.operand(e.b, prec + 1)}", prec
        return f"{self.pair(e.a, e.b, left_min_prec(prec), prec + 1, symbol)}", prec

    @handles(*SCRIPT_CALLS)
    def binary_call(self, e, ctx):
        return f"{SCRIPT_CALLS[type(e)]}({self.pair(e.a, e.b, 0)})", _ATOM

    @handles(E.Not)
    def logical_not(self, e, ctx):
        return "not " + self.operand(e.a, _NOT), _NOT

    @handles(E.Select)
    def select(self, e, ctx):
        return (f"T.if_then_else({self.fmt(e.condition)}, "
                f"{self.pair(e.true_value, e.false_value, 0)})", _ATOM)

    @handles(E.Cast)
    def cast(self, e, ctx):
        return f'T.Cast("{e.dtype}", {self.fmt(e.value)})', _ATOM

    @handles(E.Ramp)
    def ramp(self, e, ctx):
        return f"T.Ramp({self.pair(e.base, e.stride, 0)}, {e.lanes})", _ATOM

    @handles(E.Broadcast)
    def broadcast(self, e, ctx):
        # the parser gives T.Broadcast's value no dtype context: a literal prints typed
        return f"T.Broadcast({self.fmt(e.value)}, {e.lanes})", _ATOM

    @handles(E.Call)
    def intrinsic_call(self, e, ctx):
        return self.call(e), _ATOM

    @handles(E.CallFunc)
    def subroutine_call(self, e, ctx):
        # a call of another prim_func of the module (the module prints as a class: `cls`)
        return f"cls.{e.callee}({', '.join(self.pointer_or_expr(a) for a in e.args)})", _ATOM

    def pointer_or_expr(self, a) -> str:
        """A pointer parameter passed on prints as its name (the parser reads it back so)."""
        if isinstance(a, E.Call) and a.op == E.ADDRESS_OF and isinstance(a.args[0], E.BufferLoad) \
                and isinstance(a.args[0].buffer, Pointer):
            return self.name(a.args[0].buffer)
        return self.fmt(a)

    def pair(self, a, b, left_prec: int, right_prec: int | None = None, symbol: str = ",") -> str:
        """Two operands; a literal next to a non-literal of its dtype prints bare."""
        ctx_a = b.dtype if is_imm(a) and not is_imm(b) else None
        ctx_b = a.dtype if is_imm(b) and not is_imm(a) else None
        left = self.operand(a, left_prec, ctx_a)
        right = self.operand(b, right_prec if right_prec is not None else left_prec, ctx_b)
        return f"{left}, {right}" if symbol == "," else f"{left} {symbol} {right}"

    def call(self, e: E.Call) -> str:
        args = ", ".join(self.fmt(a) for a in e.args)
        if e.op == E.ADDRESS_OF and e.dtype == "handle" and len(e.args) == 1 \
                and isinstance(e.args[0], E.BufferLoad):
            return f"T.address_of({args})"
        if e.op in E.LLVM_INTRIN_OPS and e.args and (isinstance(e.args[0], E.StringImm) or (
                isinstance(e.args[0], E.IntImm) and e.args[0].dtype != "bool")):
            ident = f"T.llvm_lookup_intrinsic_id({string_literal(e.args[0].value)})" \
                if isinstance(e.args[0], E.StringImm) else self.fmt(e.args[0])
            rest = "".join(", " + self.fmt(a) for a in e.args[1:])
            return f'T.{e.op[4:]}({ident}{rest}, dtype="{e.dtype}")'
        if e.op == E.CHECKED_INDEX and e.dtype == "int64" and len(e.args) == 2 \
                and all(a.dtype == "int64" for a in e.args):
            return f"T.checked_index({args})"
        if e.op == E.UNDEF and not e.args and dt.lanes(e.dtype) == 1:
            return f'T.undef(dtype="{e.dtype}")'
        if e.op == E.REINTERPRET and len(e.args) == 1 and e.dtype != e.args[0].dtype:
            try:
                E.reinterpret(e.dtype, e.args[0])
                return f'T.reinterpret("{e.dtype}", {args})'
            except ValueError:
                pass
        if is_sync_call(e):
            return f"T.{e.op}({args})"
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
