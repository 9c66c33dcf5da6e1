"""Operators run for their effect: ``R.assert_op`` and ``R.print`` (TVM's
signatures). Both return an empty tuple and are impure, so dead-code
elimination keeps them and constant folding never runs them early; the VM
runs them through their NumPy references, in program order.

``format`` holds ``{}`` / ``{0}`` fields only (attribute and item lookups
are refused: a format string from a file never reaches into the values).
"""
from __future__ import annotations

import re

import numpy as np

from tensorir import expr as E

from ..expr import Expr, PrimValue, Tuple
from ..struct_info import ObjectStructInfo, PrimStructInfo, TensorStructInfo, TupleStructInfo
from ._convert import as_prim_value, as_tensor, make_call
from ._infer_util import format_sinfo, sinfo_of
from .registry import OpAttributeError, register_op

_FIELD = re.compile(r"\{(\d*)\}")


def _check_format(value, op: str) -> str:
    if not isinstance(value, str):
        raise OpAttributeError(f"R.{op}: format must be a string, got {value!r}")
    stripped = _FIELD.sub("", value.replace("{{", "").replace("}}", ""))
    if "{" in stripped or "}" in stripped:
        raise OpAttributeError(f"R.{op}: format {value!r} may only hold {{}} or {{<index>}} fields")
    return value


def render(fmt: str, values) -> str:
    """``fmt`` with its ``{}`` / ``{i}`` fields replaced by the values (NumPy's str)."""
    if not fmt:
        return " ".join(str(v) for v in values)
    counter = iter(range(len(values)))

    def field(match):
        index = int(match.group(1)) if match.group(1) else next(counter, len(values))
        if index >= len(values):
            raise ValueError(f"format {fmt!r} names value {index}, only {len(values)} given")
        return str(values[index])

    parts = fmt.split("{{")
    return "{".join(_FIELD.sub(field, p).replace("}}", "}") for p in parts)


def _as_arg(value) -> Expr:
    return value if isinstance(value, Expr) else as_tensor(value)


# ---------------------------------------------------------------- assert_op
def assert_op(condition, *args, format_args=None, format: str = ""):  # noqa: A002 - TVM's name
    """R.assert_op(condition, format_args=None, format=""): raise ``AssertionError`` with the
    formatted message when ``condition`` (a bool scalar tensor or ``R.Prim("bool")``) is false.

    The format arguments come as TVM writes them (one list, or ``format_args=``) or, as
    printed, one positional argument each."""
    if format_args is not None:
        args = (*args, format_args)
    values = []
    for arg in args:
        if arg is None:
            continue
        if isinstance(arg, Tuple):   # the script's list arrives as a tuple expression
            values += arg.fields
        elif isinstance(arg, (list, tuple)):
            values += arg
        else:
            values.append(arg)
    if isinstance(condition, bool):
        condition = as_prim_value(condition)
    elif isinstance(condition, E.PrimExpr):  # R.assert_op(n % 16 == 0): TVM's sugar for R.prim_value
        condition = PrimValue(condition)
    return make_call("relax.assert_op", [_as_arg(condition), *[_as_arg(a) for a in values]],
                     {"format": _check_format(format, "assert_op")})


def _infer_assert(call, ctx) -> TupleStructInfo:
    cond = sinfo_of(call.args[0])
    scalar_bool = (isinstance(cond, PrimStructInfo) and cond.dtype == "bool") or (
        isinstance(cond, TensorStructInfo) and cond.dtype in ("bool", None) and cond.ndim in (0, -1))
    if not scalar_bool:
        ctx.error(f"relax.assert_op: the condition must be a bool scalar (tensor or R.Prim), got "
                  f"{format_sinfo(cond)}")
    return TupleStructInfo([])


def _assert_reference(condition, *format_args, format=""):  # noqa: A002
    if not bool(np.asarray(condition)):
        message = render(format, format_args) if format or format_args else "assertion failed"
        raise AssertionError(message)
    return ()


register_op("relax.assert_op", _infer_assert, _assert_reference, pure=False,
            attr_names=("format",), constructor=assert_op)


# ---------------------------------------------------------------- print
def print(*values, format: str = ""):  # noqa: A001,A002 - TVM's names
    """R.print(*values, format=""): write the values (or ``format`` filled with them) to stdout."""
    return make_call("relax.print", [_as_arg(v) for v in values],
                     {"format": _check_format(format, "print")})


def _infer_print(call, ctx) -> TupleStructInfo:
    return TupleStructInfo([])


def _print_reference(*values, format=""):  # noqa: A002
    import builtins
    builtins.print(render(format, values), flush=True)
    return ()


register_op("relax.print", _infer_print, _print_reference, pure=False, attr_names=("format",),
            constructor=print)


# ---------------------------------------------------------------- null_value
def null_value():
    """R.null_value(): the empty object (``R.Object``). TVM's ``nn.Module`` exports start their
    effect chain with it (``_io: R.Object = R.null_value()`` in ``_initialize_effect``); it is
    passed along and returned, never read, so it runs as Python's ``None``."""
    return make_call("relax.null_value", [], {})


def _infer_null_value(call, ctx) -> ObjectStructInfo:
    return ObjectStructInfo()


def _null_value_reference():
    return None


register_op("relax.null_value", _infer_null_value, _null_value_reference, constructor=null_value)


__all__ = ["assert_op", "null_value", "print"]
