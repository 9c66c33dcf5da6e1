"""Printing of graph-level expressions (the right-hand sides of bindings)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from tensorir import expr as E
from tensorir.dispatch import ClassDispatch, handles
from tensorir.script.literals import is_identifier, string_literal

from .. import expr as rx
from ..op.registry import OpDeductionError, get_op_spec
from ..op.layout_transform import IndexMap
from ..op.qdq import SCRIPT_NAMES
from .annotations import format_struct_info
from .constants import CONSTANT_KEY, METADATA_NAME, can_inline, inline_literal
from .naming import RESERVED
from .sym_expr import format_sym_expr

# Operators whose script form differs from "positional args, then attrs":
# the callee and argument tuple are positional, annotations are keywords.
CROSS_LEVEL_CALLS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_library",
                     "relax.call_dps_packed")


class ExprPrinter(ClassDispatch):
    """``name(node, hint)`` names variables; large constants are appended to
    ``constants`` and printed as references into the metadata section."""

    def __init__(self, name: Callable, constants: list, in_module: bool):
        self.name = name
        self.constants = constants
        self.in_module = in_module

    def sym(self, e: E.PrimExpr) -> str:
        return format_sym_expr(e, lambda v: self.name(v, v.name))

    def sinfo(self, s) -> str:
        return format_struct_info(s, lambda v: self.name(v, v.name))

    # ------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        method = self.handler_for(type(e))
        if method is None:
            raise TypeError(f"cannot print {type(e).__name__} as an expression")
        return method(self, e)

    @handles(rx.Var)
    def expr_Var(self, e: rx.Var) -> str:
        return self.name(e, e.name_hint)

    @handles(rx.GlobalVar)
    def expr_GlobalVar(self, e: rx.GlobalVar) -> str:
        name = member_name(e.name_hint)
        return f"cls.{name}" if self.in_module else name

    @handles(rx.Op)
    def expr_Op(self, e: rx.Op) -> str:
        return "R." + SCRIPT_NAMES.get(e.name, e.name[len("relax."):])

    @handles(rx.ExternFunc)
    def expr_ExternFunc(self, e: rx.ExternFunc) -> str:
        return f"R.ExternFunc({string_literal(e.global_symbol)})"

    @handles(rx.Constant)
    def expr_Constant(self, e: rx.Constant) -> str:
        data = e.data
        if can_inline(data):
            return f'R.const({inline_literal(data)}, "{data.dtype.name}")'
        self.constants.append(data)
        return f'R.const({METADATA_NAME}["{CONSTANT_KEY}"][{len(self.constants) - 1}])'

    @handles(rx.ShapeExpr)
    def expr_ShapeExpr(self, e: rx.ShapeExpr) -> str:
        return f"R.shape([{', '.join(self.sym(v) for v in e.values)}])"

    @handles(rx.PrimValue)
    def expr_PrimValue(self, e: rx.PrimValue) -> str:
        return f"R.prim_value({self.sym(e.value)})"

    @handles(rx.StringImm)
    def expr_StringImm(self, e: rx.StringImm) -> str:
        return f"R.str({string_literal(e.value)})"

    @handles(rx.Tuple)
    def expr_Tuple(self, e: rx.Tuple) -> str:
        if not e.fields:
            return "R.tuple()"
        items = [self.expr(f) for f in e.fields]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    @handles(rx.TupleGetItem)
    def expr_TupleGetItem(self, e: rx.TupleGetItem) -> str:
        return f"{self.expr(e.tuple_value)}[{e.index}]"

    @handles(rx.Call)
    def expr_Call(self, e: rx.Call) -> str:
        op = e.op
        if isinstance(op, rx.Op):
            if op.name in CROSS_LEVEL_CALLS:
                return self.cross_level_call(e)
            if op.name == "relax.call_pure_packed":
                return self.packed_call("R.call_pure_packed", e.args[0], e.args[1:], e.sinfo_args)
            args = [self.expr(a) for a in e.args]
            args += [f"{k}={self.attr(v)}" for k, v in self.ordered_attrs(e)]
            if e.sinfo_args:
                args.append(f"sinfo_args={self.sinfo_list(e.sinfo_args)}")
            return f"{self.expr_Op(op)}({', '.join(args)})"
        if isinstance(op, rx.ExternFunc):
            return self.packed_call("R.call_packed", op, e.args, e.sinfo_args)
        return f"{self.expr(op)}({', '.join(self.expr(a) for a in e.args)})"

    def packed_call(self, form: str, callee: rx.ExternFunc, args, sinfo_args) -> str:
        parts = [string_literal(callee.global_symbol)] + [self.expr(a) for a in args]
        if sinfo_args:
            parts.append(f"sinfo_args={self.sinfo_list(sinfo_args)}")
        return f"{form}({', '.join(parts)})"

    def cross_level_call(self, e: rx.Call) -> str:
        """``R.call_tir(cls.f, (x, y), out_sinfo=..., tir_vars=R.shape([n]))`` and
        ``R.call_dps_library("name", (x,), out_sinfo=...)``."""
        callee, *rest = e.args
        head = string_literal(callee.global_symbol) if isinstance(callee, rx.ExternFunc) \
            else self.expr(callee)
        parts = [head]
        if rest:
            parts.append(self.expr(rest[0]) if not isinstance(rest[0], rx.Tuple) or rest[0].fields
                         else "()")
        if len(e.sinfo_args) == 1:
            parts.append(f"out_sinfo={self.sinfo(e.sinfo_args[0])}")
        elif e.sinfo_args:
            parts.append(f"out_sinfo={self.sinfo_list(e.sinfo_args)}")
        if len(rest) > 1:
            parts.append(f"tir_vars={self.expr(rest[1])}")
        parts += [f"{k}={self.attr(v)}" for k, v in self.ordered_attrs(e)]
        return f"{self.expr_Op(e.op)}({', '.join(parts)})"

    def sinfo_list(self, sinfos) -> str:
        return f"[{', '.join(self.sinfo(s) for s in sinfos)}]"

    @staticmethod
    def ordered_attrs(e: rx.Call) -> list[tuple[str, object]]:
        """Attributes in the operator's declared order; unknown ones after, sorted."""
        try:
            order = list(get_op_spec(e.op.name).attr_names)
        except OpDeductionError:  # an operator this build does not register
            order = []
        known = [k for k in order if k in e.attrs]
        return [(k, e.attrs[k]) for k in known + sorted(set(e.attrs) - set(known))]

    # ------------------------------------------------------------ attribute values
    def attr(self, value) -> str:
        if isinstance(value, IndexMap):
            return repr(value)   # T.index_map(lambda ...): its own parameter names
        if isinstance(value, E.PrimExpr):
            return self.sym(value)
        if isinstance(value, rx.Expr):
            return self.expr(value)
        return self.python_literal(value, self.attr)

    @staticmethod
    def python_literal(value, inner=None) -> str:
        """Python source for a plain value (None, bool, int, float, str, tuple, list, dict)."""
        inner = inner or ExprPrinter.python_literal
        if value is None or isinstance(value, (bool, int)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else f'float("{value}")'
        if isinstance(value, str):
            return string_literal(value)
        if isinstance(value, np.generic):
            return inner(value.item())
        if isinstance(value, tuple):
            items = [inner(v) for v in value]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(value, list):
            return f"[{', '.join(inner(v) for v in value)}]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{inner(k)}: {inner(v)}" for k, v in value.items()) + "}"
        raise TypeError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def member_name(name) -> str:
    """A module member's name as written in ``def`` and ``cls.name``: it is the member's key,
    so one that is not an identifier cannot be written at all (rather than written wrongly)."""
    if not is_identifier(name) or name in RESERVED:
        raise ValueError(f"cannot print a function named {name!r}: names of module members "
                         f"must be Python identifiers other than {sorted(RESERVED)}")
    return name
