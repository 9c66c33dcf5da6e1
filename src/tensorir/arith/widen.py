"""widen_index: an integer index expression in int64 with casts only at its leaves.

Schedules mix index dtypes (an int32 ``n`` from ``T.int32()`` beside int64
loop extents): the parser then writes one access ``(T.Cast("int64", bx) + ty)
% T.Cast("int64", n)`` and another ``bx % n`` in int32. The analyzer treats a
cast as an opaque leaf, so it cannot see that the two agree. Widening pushes
every cast to int64 down to the variables and loads (``Cast(int64, a % b)`` ->
``Cast(int64, a) % Cast(int64, b)``): for integer values that fit their
dtype, the int64 arithmetic is the exact value of the narrower one, so both
forms become one expression. Used for analysis (bounds, comparisons); the
kernels keep their own forms.
"""
from __future__ import annotations

from .. import dtype as dt
from .. import expr as E

_ARITH = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_INT64 = "int64"


def widen_index(e):
    """``e`` (a scalar integer expression) as int64 with casts only around leaves."""
    if not isinstance(e, E.PrimExpr) or e.dtype not in ("int8", "int16", "int32", "int64", "uint8",
                                                        "uint16", "uint32"):
        return e
    return _widen(e)


def _widen(e):
    if isinstance(e, E.IntImm):
        return e if e.dtype == _INT64 else E.IntImm(e.value, _INT64)
    if isinstance(e, _ARITH) and dt.is_int(e.a.dtype) and dt.is_int(e.b.dtype) \
            and e.dtype in ("int8", "int16", "int32", "int64"):
        # signed arithmetic of values in range: the wide result is the narrow one (unsigned wraps)
        return type(e)(_widen(e.a), _widen(e.b))
    if isinstance(e, E.Select) and dt.is_int(e.dtype) and e.dtype != "uint64":
        return E.Select(e.condition, _widen(e.true_value), _widen(e.false_value))
    if isinstance(e, E.Cast) and e.dtype in ("int32", "int64") and _keeps_value(e.value.dtype, e.dtype):
        return _widen(e.value)   # a widening cast changes no value
    return e if e.dtype == _INT64 else E.Cast(_INT64, e)


def _keeps_value(source: str, target: str) -> bool:
    """Whether every ``source`` integer is the same number as a ``target`` (signed) integer."""
    if not dt.is_int(source) or source == "bool":
        return False
    signed = not source.startswith("uint")
    return dt.itemsize(target) >= dt.itemsize(source) if signed else dt.itemsize(target) > dt.itemsize(source)
