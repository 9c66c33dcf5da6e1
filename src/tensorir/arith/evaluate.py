"""Exact scalar evaluation of PrimExprs.

Integer arithmetic is exact (Python ints; floordiv/floormod round toward
-inf, ``Div`` on integers truncates like C). Float results are rounded to
their dtype after every operation, as NumPy would compute them. Casts to a
narrower integer type wrap around like C.
"""
from __future__ import annotations

import math
import operator
from typing import Mapping

import numpy as np

from .. import dtype as dt
from .. import expr as E
from ..dispatch import ClassDispatch, handles
from ..expr import PrimExpr
from ..float_casts import VIA, float_to_int


class EvaluationError(ValueError):
    """The expression cannot be evaluated (an unbound variable, an unknown node)."""


def evaluate(expr: PrimExpr, env: Mapping | None = None):
    """Value of ``expr`` with Vars (and Buffers, as NumPy arrays) looked up in ``env``."""
    return _Evaluator(env or {}).eval(expr)


def _round_to(value, dtype: str):
    if dt.is_float(dtype):
        value = float(value)
        if dtype in ("float16", "float32"):
            return float(np.array(value, dtype=dtype))
        return value
    if dtype == "bool":
        return bool(value)
    return int(value)


def wrap_int(value: int, dtype: str) -> int:
    """``value`` converted to integer ``dtype`` with C wrap-around."""
    bits = dt.bits(dtype)
    value %= 2 ** bits
    if not dt.is_uint(dtype) and value >= 2 ** (bits - 1):
        value -= 2 ** bits
    return value


_INTRINSICS = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "tanh": math.tanh, "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)), "erf": math.erf,
    "pow": math.pow, "abs": abs, "sin": math.sin, "cos": math.cos, "floor": math.floor,
    "ceil": math.ceil, "round": lambda x: float(np.round(x)), "exp2": lambda x: 2.0 ** x,
    "log2": math.log2, "tan": math.tan, "isnan": math.isnan, "isinf": math.isinf,
    "trunc": math.trunc, "log1p": math.log1p, "exp10": lambda x: 10.0 ** x, "atan": math.atan,
    "asin": math.asin, "acos": math.acos, "sinh": math.sinh, "cosh": math.cosh, "atanh": math.atanh,
    "asinh": math.asinh, "acosh": math.acosh, "atan2": math.atan2, "hypot": math.hypot,
    "copysign": math.copysign, "fmod": math.fmod,
    "bitwise_and": lambda a, b: int(a) & int(b), "bitwise_or": lambda a, b: int(a) | int(b),
    "bitwise_xor": lambda a, b: int(a) ^ int(b), "bitwise_not": lambda a: ~int(a),
    # NumPy's meaning for counts outside [0, bits): everything is shifted out
    "shift_left": lambda a, b: int(a) << int(b) if 0 <= int(b) < 64 else 0,
    "shift_right": lambda a, b: int(a) >> int(b) if 0 <= int(b) < 64 else (-1 if int(a) < 0 else 0),
}


def has_intrinsic(op: str) -> bool:
    return op in _INTRINSICS


# Where Python's math raises (log(0), sqrt(-1), exp(1000), floor(inf)), a kernel computes the IEEE
# value: these give it, as NumPy does.
_IEEE = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
         "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "pow": np.power, "floor": np.floor, "ceil": np.ceil,
         "exp2": np.exp2, "log2": np.log2, "tan": np.tan, "trunc": np.trunc, "log1p": np.log1p,
         "exp10": lambda x: np.power(10.0, x), "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
         "cosh": np.cosh, "atanh": np.arctanh, "acosh": np.arccosh, "fmod": np.fmod, "sin": np.sin,
         "cos": np.cos, "hypot": np.hypot}


def call_intrinsic(op: str, dtype: str, args):
    """Intrinsic ``op`` on Python scalars, its result rounded to ``dtype``."""
    fn = _INTRINSICS.get(op)
    if fn is None:
        raise EvaluationError(f"cannot evaluate call to {op!r}")
    try:
        value = fn(*args)
    except (ValueError, OverflowError, ZeroDivisionError) as err:
        if op not in _IEEE or not dt.is_float(dtype):
            raise EvaluationError(f"{op}{tuple(args)} has no {dtype} value: {err}") from None
        with np.errstate(all="ignore"):
            value = _IEEE[op](*(np.float64(a) for a in args))
    return _round_to(value, dtype)


def round_to_dtype(value, dtype: str):
    """A Python scalar of ``dtype``: floats rounded to its precision, like NumPy."""
    return _round_to(value, dtype)


class _Evaluator(ClassDispatch):
    def __init__(self, env: Mapping):
        self.env = env

    def eval(self, e):
        handler = self.handler_for(type(e))
        if handler is None:
            raise EvaluationError(f"cannot evaluate a {type(e).__name__} node")
        return handler(self, e)

    @handles(E.IntImm, E.StringImm)
    def literal(self, e):
        return e.value

    @handles(E.FloatImm)
    def float_literal(self, e):
        return _round_to(e.value, e.dtype)

    @handles(E.Var)
    def var(self, e):
        if e not in self.env:
            raise EvaluationError(f"variable {e.name!r} has no value")
        return _round_to(self.env[e], e.dtype)

    @handles(E.Add, E.Sub, E.Mul, E.Min, E.Max)
    def arith(self, e):
        return self._binary(e, _ARITH[type(e)])

    def _binary(self, e, fn):
        a, b = self.eval(e.a), self.eval(e.b)
        return _round_to(fn(a, b), e.dtype)

    def _float_binary(self, e, ufunc):
        """A float division in ``e.dtype`` as NumPy computes it (a zero divisor gives inf or NaN,
        floor division and modulo NumPy's, which differ from ``floor(a / b)``; not Python's errors)."""
        scalar = np.dtype(e.dtype).type
        with np.errstate(all="ignore"):
            return self._binary(e, lambda a, b: ufunc(scalar(a), scalar(b)))

    @handles(E.Div)
    def div(self, e):
        if dt.is_float(e.dtype):
            return self._float_binary(e, np.true_divide)
        return self._binary(e, _trunc_div)

    @handles(E.FloorDiv)
    def floordiv(self, e):
        if dt.is_float(e.dtype):
            return self._float_binary(e, np.floor_divide)
        return self._binary(e, lambda a, b: a // b)

    @handles(E.FloorMod)
    def floormod(self, e):
        if dt.is_float(e.dtype):
            return self._float_binary(e, np.mod)
        return self._binary(e, lambda a, b: a % b)

    @handles(E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)
    def compare(self, e):
        return bool(_COMPARE[type(e)](self.eval(e.a), self.eval(e.b)))

    @handles(E.And)
    def logical_and(self, e):
        return bool(self.eval(e.a)) and bool(self.eval(e.b))

    @handles(E.Or)
    def logical_or(self, e):
        return bool(self.eval(e.a)) or bool(self.eval(e.b))

    @handles(E.Not)
    def logical_not(self, e):
        return not self.eval(e.a)

    @handles(E.Select)
    def select(self, e):
        # Only the chosen branch is evaluated: the other may divide by zero.
        return self.eval(e.true_value if self.eval(e.condition) else e.false_value)

    @handles(E.Cast)
    def cast(self, e):
        value = self.eval(e.value)
        if e.dtype == "bool":
            return bool(value)
        if dt.is_float(e.dtype):
            return _round_to(value, e.dtype)
        if isinstance(value, float):
            if e.dtype in VIA:   # the run-time conversion's value (float_casts), NaN included
                return int(float_to_int(value, e.dtype))
            if math.isnan(value) or math.isinf(value):
                raise EvaluationError(f"cannot cast {value} to {e.dtype}")
            value = math.trunc(value)
        return wrap_int(int(value), e.dtype)

    @handles(E.CallFunc)
    def subroutine_call(self, e):
        raise EvaluationError(f"a call of prim_func {e.callee!r} has no value here (calls are inlined "
                              "into their callers by the build)")

    @handles(E.Call)
    def call(self, e):
        return call_intrinsic(e.op, e.dtype, [self.eval(a) for a in e.args])

    @handles(E.BufferLoad)
    def buffer_load(self, e):
        array = self.env.get(e.buffer)
        if array is None:
            raise EvaluationError(f"buffer {e.buffer.name!r} has no value")
        return _round_to(np.asarray(array)[tuple(self.eval(i) for i in e.indices)].item(), e.dtype)


_ARITH = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.Min: min, E.Max: max}
_COMPARE = {E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt, E.LE: operator.le,
            E.GT: operator.gt, E.GE: operator.ge}


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q
