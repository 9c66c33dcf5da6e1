"""Evaluation of PrimExprs on NumPy values, scalar or vectorised.

A value is a NumPy scalar or an array broadcastable over the iteration
domain of the loop nest being evaluated. ``mask`` (None = every lane
active) says which lanes are really executed: conditional sub-expressions
(``Select``, ``And``/``Or`` right operands) are evaluated under a narrower
mask, so an out-of-bounds load or a division by zero in a branch that is
not taken raises nothing, exactly as in the scalar C semantics.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from .. import expr as E
from ..dispatch import ClassDispatch, handles
from ..errors import IndexOutOfRangeError
from ..float_casts import float_to_int, is_float_to_int
from .errors import InterpretDivisionByZeroError, InterpretError
from ..thread_sync import is_sync_call
from .intrinsics import INTRINSIC_IMPLS


def np_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of one element (a vector's lanes are a trailing array axis)."""
    dtype = dt.element(dtype)
    if dtype == "bfloat16":
        raise InterpretError("bfloat16 is not supported by the NumPy interpreter")
    return np.dtype(dtype)


def scalar(dtype: str, value):
    return np_dtype(dtype).type(value)


def as_dtype(value, dtype: str):
    """``value`` converted to ``dtype`` with C cast semantics (float->int truncates)."""
    target = np_dtype(dtype)
    if np.asarray(value).dtype == target:
        return value
    if target == np.bool_:
        return np.asarray(value) != 0
    if is_float_to_int(np.asarray(value).dtype, target):   # NumPy's answer, not its length's
        return float_to_int(value, target.name)
    return np.asarray(value).astype(target)


def narrow(mask, cond):
    """Lanes active under ``mask`` where ``cond`` also holds (None: all lanes)."""
    if np.ndim(cond) == 0:
        return mask if cond else np.False_
    return cond if mask is None else np.logical_and(mask, cond)


def any_active(mask) -> bool:
    return mask is None or bool(np.any(mask))


class ExprEvaluator(ClassDispatch):
    """Evaluates expressions against ``frame.vars`` (Var -> value) and ``frame.view(buffer)``.

    If ``frame.recorder`` is set, every buffer load is reported to it as
    ``recorder(view, indices, mask)`` (used to detect loop-carried reads).
    """

    def __init__(self, frame):
        self.frame = frame

    def eval(self, e, mask=None):
        handler = self.default_handlers[type(e)]
        if handler is None:
            raise InterpretError(f"cannot evaluate expression node {type(e).__name__}")
        return handler(self, e, mask)

    # leaves -----------------------------------------------------------------
    @handles(E.IntImm, E.FloatImm)
    def _imm(self, e, mask):
        return scalar(e.dtype, e.value)

    @handles(E.StringImm)
    def _string(self, e, mask):
        raise InterpretError(f"string literal {e.value!r} has no numeric value")

    @handles(E.Var)
    def _var(self, e, mask):
        try:
            return self.frame.vars[e]
        except KeyError:
            raise InterpretError(f"variable {e.name!r} is used but not bound") from None

    # arithmetic ---------------------------------------------------------------
    _ARITH = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply,
              E.Min: np.minimum, E.Max: np.maximum}
    _CMP = {E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal,
            E.GT: np.greater, E.GE: np.greater_equal}

    def _operands(self, e, mask):
        return self.eval(e.a, mask), self.eval(e.b, mask)

    @handles(E.Add, E.Sub, E.Mul, E.Min, E.Max)
    def _arith(self, e, mask):
        a, b = self._operands(e, mask)
        return as_dtype(self._ARITH[type(e)](a, b), e.dtype)

    @handles(E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)
    def _cmp(self, e, mask):
        a, b = self._operands(e, mask)
        return self._CMP[type(e)](a, b)

    def _int_divisor(self, e, b, mask):
        """The divisor with zeros in inactive lanes replaced by 1; active zeros raise."""
        zero = np.equal(b, 0)
        if not np.any(zero):
            return b
        if any_active(narrow(mask, zero)):
            raise InterpretDivisionByZeroError(f"integer division by zero in {type(e).__name__}")
        return np.where(zero, np.ones((), dtype=np.asarray(b).dtype), b)

    @handles(E.Div)
    def _div(self, e, mask):
        a, b = self._operands(e, mask)
        if np_dtype(e.dtype).kind == "f":
            return as_dtype(np.true_divide(a, b), e.dtype)
        b = self._int_divisor(e, b, mask)
        quotient = np.floor_divide(a, b)
        # C division truncates toward zero: undo flooring when the signs differ.
        inexact = np.not_equal(np.subtract(a, np.multiply(quotient, b)), 0)
        fix = np.logical_and(inexact, np.not_equal(np.less(a, 0), np.less(b, 0)))
        return as_dtype(np.add(quotient, fix.astype(quotient.dtype)), e.dtype)

    @handles(E.FloorDiv)
    def _floordiv(self, e, mask):
        a, b = self._operands(e, mask)
        if np_dtype(e.dtype).kind == "f":   # NumPy's float floor division (1 // 0.1 is 9, inf // 2 NaN)
            return as_dtype(np.floor_divide(a, b), e.dtype)
        return as_dtype(np.floor_divide(a, self._int_divisor(e, b, mask)), e.dtype)

    @handles(E.FloorMod)
    def _floormod(self, e, mask):
        a, b = self._operands(e, mask)
        if np_dtype(e.dtype).kind != "f":
            b = self._int_divisor(e, b, mask)
        return as_dtype(np.mod(a, b), e.dtype)

    # logic (right operands short-circuit, as in C) ----------------------------
    @handles(E.And)
    def _and(self, e, mask):
        a = self.eval(e.a, mask)
        if np.ndim(a) == 0:
            return self.eval(e.b, mask) if a else np.False_
        inner = narrow(mask, a)
        if not any_active(inner):
            return a
        return np.logical_and(a, self.eval(e.b, inner))

    @handles(E.Or)
    def _or(self, e, mask):
        a = self.eval(e.a, mask)
        if np.ndim(a) == 0:
            return np.True_ if a else self.eval(e.b, mask)
        inner = narrow(mask, np.logical_not(a))
        if not any_active(inner):
            return a
        return np.logical_or(a, self.eval(e.b, inner))

    @handles(E.Not)
    def _not(self, e, mask):
        return np.logical_not(self.eval(e.a, mask))

    @handles(E.Select)
    def _select(self, e, mask):
        cond = self.eval(e.condition, mask)
        if np.ndim(cond) == 0:
            return self.eval(e.true_value if cond else e.false_value, mask)
        zero = scalar(e.dtype, 0)
        true_mask = narrow(mask, cond)
        false_mask = narrow(mask, np.logical_not(cond))
        t = self.eval(e.true_value, true_mask) if any_active(true_mask) else zero
        f = self.eval(e.false_value, false_mask) if any_active(false_mask) else zero
        return as_dtype(np.where(cond, t, f), e.dtype)

    # vectors (lanes are the last axis; the nest executor declines vector code) ------
    @handles(E.Ramp)
    def _ramp(self, e, mask):
        base, stride = self.eval(e.base, mask), self.eval(e.stride, mask)
        lanes = np.arange(e.lanes, dtype=np_dtype(e.dtype))
        return as_dtype(np.add(base, np.multiply(stride, lanes)), e.dtype)

    @handles(E.Broadcast)
    def _broadcast(self, e, mask):
        return np.full(e.lanes, self.eval(e.value, mask), dtype=np_dtype(e.dtype))

    # conversions and calls --------------------------------------------------------
    @handles(E.Cast)
    def _cast(self, e, mask):
        return as_dtype(self.eval(e.value, mask), e.dtype)

    @handles(E.CallFunc)
    def _subroutine_call(self, e, mask):
        raise InterpretError(f"{self.frame.func.name}: a call of prim_func {e.callee!r} runs only inlined "
                             "(tensorir.transform.inline_subroutines, as every build does)")

    @handles(E.Call)
    def _call(self, e, mask):
        if is_sync_call(e):   # between the threads of a block: the executor's affair
            return self.frame.sync_call(e, mask)
        if e.op == E.CHECKED_INDEX:
            return self._checked_index(e, mask)
        if e.op == E.UNDEF:  # unspecified: read as 0 on every target
            return np.zeros((), dtype=np_dtype(e.dtype))[()]
        if e.op == E.REINTERPRET:  # the same bytes read as the other dtype
            value = np.array(self.eval(e.args[0], mask), dtype=np_dtype(e.args[0].dtype))
            return value.view(np_dtype(e.dtype))
        impl = INTRINSIC_IMPLS.get(e.op)
        if impl is None:
            raise InterpretError(f"the interpreter has no implementation of call {e.op!r}")
        args = [self.eval(a, mask) for a in e.args]
        return as_dtype(impl(*args), e.dtype)

    def _checked_index(self, e, mask):
        """``T.checked_index``: NumPy's negative indices wrap; an active lane outside
        ``[-n, n)`` raises (inactive lanes, a branch not taken, may hold anything)."""
        index, extent = (np.asarray(self.eval(a, mask), dtype=np.int64) for a in e.args)
        bad = np.logical_or(index < -extent, index >= extent)
        if mask is not None:
            bad = np.logical_and(bad, mask)
        if np.any(bad):
            shape = np.broadcast(index, extent, bad).shape
            first = tuple(np.argwhere(np.broadcast_to(bad, shape))[0])
            value = int(np.broadcast_to(index, shape)[first])
            size = int(np.broadcast_to(extent, shape)[first])
            raise IndexOutOfRangeError(f"index {value} is out of range for an axis of size {size}")
        return np.where(index < 0, index + extent, index)

    @handles(E.BufferLoad)
    def _load(self, e, mask):
        view = self.frame.view(e.buffer)
        indices = [self.eval(i, mask) for i in e.indices]
        recorder = self.frame.recorder
        if recorder is not None:
            recorder(view, indices, mask)
        return view.load(indices, mask)
