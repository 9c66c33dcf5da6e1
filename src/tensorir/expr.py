"""Scalar expressions of the loop level (PrimExpr) and their constructors.

Python operators on PrimExprs build nodes (with constant folding of literal
operands only); full simplification lives in ``tensorir.arith``. ``==`` keeps
Python identity semantics so nodes can be dict keys: build equality nodes
with ``EQ(a, b)`` or ``a.equal(b)``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from . import dtype as dt
from .node import Node


_SCALAR = dt.SCALAR_NAMES   # dtypes of one lane


class PrimExpr(Node):
    __slots__ = ("dtype",)
    _attrs = ("dtype",)

    # arithmetic sugar -------------------------------------------------------
    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __sub__(self, other): return sub(self, other)
    def __rsub__(self, other): return sub(other, self)
    def __mul__(self, other): return mul(self, other)
    def __rmul__(self, other): return mul(other, self)
    def __floordiv__(self, other): return floordiv(self, other)
    def __rfloordiv__(self, other): return floordiv(other, self)
    def __mod__(self, other): return floormod(self, other)
    def __rmod__(self, other): return floormod(other, self)
    def __truediv__(self, other): return div(self, other)
    def __rtruediv__(self, other): return div(other, self)
    def __neg__(self): return sub(const(0, dt.element(self.dtype)), self)  # a vector: broadcast 0
    def __lt__(self, other): return LT(self, other)
    def __le__(self, other): return LE(self, other)
    def __gt__(self, other): return GT(self, other)
    def __ge__(self, other): return GE(self, other)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def equal(self, other) -> "EQ":
        return EQ(self, other)


# ---------------------------------------------------------------- leaves
class IntImm(PrimExpr):
    """Integer or boolean literal (``dtype`` 'bool' for booleans)."""
    __slots__ = ("value",)
    _attrs = ("dtype", "value")

    def __init__(self, value: int, dtype: str = "int64"):
        self.dtype = dt.normalize(dtype)
        self.value = bool(value) if self.dtype == "bool" else int(value)


class FloatImm(PrimExpr):
    __slots__ = ("value",)
    _attrs = ("dtype", "value")

    def __init__(self, value: float, dtype: str = "float32"):
        self.dtype = dt.normalize(dtype)
        self.value = float(value)


class StringImm(PrimExpr):
    """String literal; appears only as an annotation or extern-call argument."""
    __slots__ = ("value",)
    _attrs = ("value",)

    def __init__(self, value: str):
        self.dtype = "handle"
        self.value = value


class Var(PrimExpr):
    """A scalar variable: a symbolic shape variable, loop variable or parameter.

    Facts (``lower``, ``upper``, ``multiple_of``) are known properties used by
    the analyzer, memory planning and runtime checks. ``upper`` is inclusive.
    Shape variables are created with ``lower=0`` (non-negative).
    """
    __slots__ = ("name", "lower", "upper", "multiple_of")
    _binder = True
    _attrs = ("dtype", "lower", "upper", "multiple_of")  # name excluded: renaming is free

    def __init__(self, name: str, dtype: str = "int64", *, lower: int | None = None,
                 upper: int | None = None, multiple_of: int | None = None):
        self.name = name
        self.dtype = dt.normalize(dtype)
        self.lower = lower
        self.upper = upper
        self.multiple_of = multiple_of

    def with_name(self, name: str) -> "Var":
        return Var(name, self.dtype, lower=self.lower, upper=self.upper, multiple_of=self.multiple_of)


def size_var(name: str, dtype: str = "int64", **facts) -> Var:
    """A symbolic shape variable (non-negative unless told otherwise)."""
    facts.setdefault("lower", 0)
    return Var(name, dtype, **facts)


# ---------------------------------------------------------------- operators
class BinaryOp(PrimExpr):
    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a, b):
        a, b = _promote_pair(a, b)
        self.a, self.b = a, b
        self.dtype = self._result_dtype(a.dtype)

    def _result_dtype(self, operand_dtype: str) -> str:
        return operand_dtype


class Add(BinaryOp): symbol = "+"
class Sub(BinaryOp): symbol = "-"
class Mul(BinaryOp): symbol = "*"
class Div(BinaryOp):
    """True division for floats; truncating division for integers (C semantics)."""
    symbol = "/"
class FloorDiv(BinaryOp): symbol = "//"
class FloorMod(BinaryOp): symbol = "%"
class Min(BinaryOp): symbol = "min"
class Max(BinaryOp): symbol = "max"


class CmpOp(BinaryOp):
    def _result_dtype(self, operand_dtype: str) -> str:
        return "bool" if operand_dtype in _SCALAR else dt.with_lanes("bool", dt.lanes(operand_dtype))


class EQ(CmpOp): symbol = "=="
class NE(CmpOp): symbol = "!="
class LT(CmpOp): symbol = "<"
class LE(CmpOp): symbol = "<="
class GT(CmpOp): symbol = ">"
class GE(CmpOp): symbol = ">="


class LogicalBinary(BinaryOp):
    """Common base of ``And`` and ``Or`` (boolean operands and result).

    The two are siblings: a pass that splits a conjunction must test for
    ``And`` itself, never for this base, since a disjunction is no conjunction.
    """

    def __init__(self, a, b):
        self.a, self.b = _promote_pair(as_bool(a), as_bool(b))
        self.dtype = self.a.dtype  # bool, or bool lanes


class And(LogicalBinary): symbol = "and"
class Or(LogicalBinary): symbol = "or"


class Not(PrimExpr):
    __slots__ = ("a",)
    _fields = ("a",)

    def __init__(self, a):
        self.a = as_bool(a)
        self.dtype = self.a.dtype


class Select(PrimExpr):
    """``cond ? true_value : false_value`` (printed as ``T.if_then_else``)."""
    __slots__ = ("condition", "true_value", "false_value")
    _fields = ("condition", "true_value", "false_value")

    def __init__(self, condition, true_value, false_value):
        self.condition = as_bool(condition)
        self.true_value, self.false_value = _promote_pair(true_value, false_value)
        self.dtype = self.true_value.dtype
        n = 1 if self.condition.dtype in _SCALAR else dt.lanes(self.condition.dtype)
        if n != 1 and n != dt.lanes(self.dtype):
            raise TypeError(f"a select's condition has {n} lanes but its values {dt.lanes(self.dtype)}")


class Cast(PrimExpr):
    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, dtype: str, value):
        self.dtype = dt.normalize(dtype)
        self.value = convert(value)
        if (self.dtype not in _SCALAR or self.value.dtype not in _SCALAR) \
                and dt.lanes(self.dtype) != dt.lanes(self.value.dtype):
            raise TypeError(f"cannot cast a {self.value.dtype} value to {self.dtype}: the lane "
                            f"counts differ (T.Broadcast makes a vector of a scalar)")


class Call(PrimExpr):
    """Call of a math intrinsic (see ``INTRINSICS``) or a named extern."""
    __slots__ = ("op", "args")
    _fields = ("args",)
    _attrs = ("dtype", "op")

    def __init__(self, dtype: str, op: str, args: Sequence):
        self.dtype = dt.normalize(dtype)
        self.op = op
        self.args = tuple(convert(a) for a in args)


class BufferLoad(PrimExpr):
    __slots__ = ("buffer", "indices")
    _fields = ("buffer", "indices")

    def __init__(self, buffer, indices: Sequence):
        self.buffer = buffer
        self.indices, vector = _checked_indices(buffer, indices)
        self.dtype = buffer.dtype
        if vector:   # a vector index (T.Ramp) loads that many lanes
            self.dtype = dt.with_lanes(buffer.dtype, index_lanes(buffer, self.indices))


def index_exprs(buffer, indices: Sequence) -> tuple:
    """Buffer indices as PrimExprs; each must be an integer (a string or float index is a mistake
    that would otherwise print as text that does not parse back)."""
    return _checked_indices(buffer, indices)[0]


def _checked_indices(buffer, indices: Sequence) -> tuple[tuple, bool]:
    """``index_exprs`` and whether any index is a vector."""
    out = tuple(convert(i) for i in indices)
    vector = False
    for i in out:
        if i.dtype in _INT_SCALARS:   # the common case first: one set lookup
            continue
        if not dt.is_int(i.dtype):
            raise TypeError(f"an index of buffer {getattr(buffer, 'name', '?')!r} must be an integer "
                            f"expression, got a {i.dtype} one")
        vector = True
    return out, vector


_INT_SCALARS = frozenset(d for d in dt.SCALAR_NAMES if dt.is_int(d))


def index_lanes(buffer, indices) -> int:
    """Lanes of an access: 1, or the lane count its vector indices share (scalar ones repeat)."""
    scalar = dt.SCALAR_NAMES
    for i in indices:   # the common case (no vector index) kept cheap: loads are built often
        if i.dtype not in scalar:
            break
    else:
        return 1
    counts = {dt.lanes(i.dtype) for i in indices} - {1}
    if len(counts) > 1:
        raise TypeError(f"the vector indices of buffer {getattr(buffer, 'name', '?')!r} have "
                        f"different lane counts {sorted(counts)}")
    return counts.pop() if counts else 1


class Ramp(PrimExpr):
    """``T.Ramp(base, stride, lanes)``: the integer vector ``base + stride * k`` for
    ``k = 0 .. lanes - 1`` (TVM's tir.Ramp; a vector index of a load or store)."""
    __slots__ = ("base", "stride", "lanes")
    _fields = ("base", "stride")
    _attrs = ("dtype", "lanes")

    def __init__(self, base, stride, lanes: int):
        base, stride = _promote_pair(base, stride)
        for what, value in (("base", base), ("stride", stride)):
            if not dt.is_int(value.dtype) or dt.lanes(value.dtype) != 1:
                raise TypeError(f"T.Ramp's {what} must be a scalar integer, got a {value.dtype} one")
        self.base, self.stride = base, stride
        self.lanes = _lane_count("T.Ramp", lanes)
        self.dtype = dt.with_lanes(base.dtype, self.lanes)


class Broadcast(PrimExpr):
    """``T.Broadcast(value, lanes)``: a vector of ``lanes`` copies of a scalar."""
    __slots__ = ("value", "lanes")
    _fields = ("value",)
    _attrs = ("dtype", "lanes")

    def __init__(self, value, lanes: int):
        value = convert(value)
        if dt.lanes(value.dtype) != 1:
            raise TypeError(f"T.Broadcast takes a scalar, got a {value.dtype} value")
        if value.dtype == "handle":
            raise TypeError("T.Broadcast takes a number, got a handle")
        self.value = value
        self.lanes = _lane_count("T.Broadcast", lanes)
        self.dtype = dt.with_lanes(value.dtype, self.lanes)


def _lane_count(what: str, lanes) -> int:
    if isinstance(lanes, IntImm) and lanes.dtype != "bool":
        lanes = lanes.value
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 2 <= lanes <= dt.MAX_LANES:
        raise TypeError(f"{what}'s lanes must be a constant integer from 2 to {dt.MAX_LANES}, got {lanes!r}")
    return lanes


def is_vector(e) -> bool:
    """Whether ``e`` (a PrimExpr) has more than one lane."""
    return dt.lanes(e.dtype) != 1


# Math intrinsics: name -> number of arguments. Their NumPy and C
# implementations live with the interpreter and the code generators.
INTRINSICS = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
    "pow": 2, "abs": 1, "sin": 1, "cos": 1, "floor": 1, "ceil": 1, "round": 1,
    "exp2": 1, "log2": 1, "tan": 1, "isnan": 1, "isinf": 1,
    # C's math library functions TVM's T namespace also has (its legalizations emit them)
    "trunc": 1, "log1p": 1, "exp10": 1, "atan": 1, "asin": 1, "acos": 1, "sinh": 1, "cosh": 1,
    "atanh": 1, "asinh": 1, "acosh": 1, "atan2": 2, "hypot": 2, "copysign": 2, "fmod": 2,
}
# Integer bit operations (T.bitwise_and(a, b), T.shift_right(a, b)...): C's operators.
BITWISE = {"bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1,
           "shift_left": 2, "shift_right": 2}
INTRINSICS.update(BITWISE)
# Bit counts of an integer's two's-complement bits: T.clz (leading zeros, int32 as TVM's; the
# width for 0, where C's __builtin_clz is undefined) and T.popcount (set bits, the operand's dtype).
BIT_COUNTS = {"clz": 1, "popcount": 1}
BITWISE.update(BIT_COUNTS)  # integer-only bit operations too (what the float intrinsic tests skip)
INTRINSICS.update(BIT_COUNTS)
_FLOAT_PAIRS = ("pow", "atan2", "hypot", "copysign", "fmod")
# T.int_pow(a, b): an integer power with NumPy's meaning (R.power on integers), exact and wrapping
# modulo 2**bits as NumPy's does; a negative exponent is an error (NegativeIntegerPowerError).
# T.pow on integers computes in float32 (TVM's meaning): 3**19 came out 1162261504, not ...467.
INTEGER_POWER = "int_pow"
INTRINSICS[INTEGER_POWER] = 2
INTEGER_INTRINSICS = frozenset(BITWISE) | {INTEGER_POWER}   # the intrinsics that take integers only
REINTERPRET = "reinterpret"
UNDEF = "undef"


def undef(dtype: str = "int32") -> PrimExpr:
    """``T.undef(dtype=...)``: a value the program leaves unspecified (TVM's passes drop a store
    of it). Any value is a correct one; every target here reads it as 0, so runs agree."""
    return Call(dt.normalize(dtype), UNDEF, [])


def reinterpret(dtype: str, value) -> PrimExpr:
    """``T.reinterpret(dtype, x)``: ``x``'s bits read as ``dtype`` (same width and lanes)."""
    value = convert(value)
    if dt.lanes(dtype) != dt.lanes(value.dtype) or dt.bits(dtype) != dt.bits(value.dtype) \
            or "bool" in (dt.element(dtype), dt.element(value.dtype)):
        raise ValueError(f"T.reinterpret needs a dtype of the same width and lanes as its value: "
                         f"{value.dtype} cannot be read as {dtype}")
    if dtype == value.dtype:
        return value  # reading bits as their own type is the value (TVM folds it too)
    return Call(dtype, REINTERPRET, [value])


class CallFunc(PrimExpr):
    """A call of another prim_func of the same module (``cls.subroutine(args)``, TVM's call of a
    GlobalVar). ``dtype`` is the callee's result dtype (``-> T.int32``), "void" when it returns
    nothing (then the call is a statement's whole value). Arguments are scalars or pointers
    (``T.address_of(A[i])``, ``A.data``). The build inlines every call into its caller
    (``tensorir.transform.inline_subroutines``); no kernel ever makes one."""
    __slots__ = ("callee", "args")
    _fields = ("args",)
    _attrs = ("dtype", "callee")

    def __init__(self, dtype: str, callee: str, args: Sequence):
        self.dtype = dt.normalize(dtype)
        self.callee = str(callee)
        self.args = tuple(convert(a) for a in args)


RET = "tir.ret"


def ret(value) -> Call:
    """``T.ret(v)`` / ``return v``: the function's result (only as its last statement here)."""
    value = convert(value)
    return Call(value.dtype, RET, [value])


# LLVM intrinsics (``T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.ctpop.i8"), x,
# dtype="uint8")``): Call(dtype, op, [name or numeric id, *args]). The build maps the few with an
# exact meaning here to ours (``tensorir.transform.llvm_intrinsics``) and refuses the rest by name.
LLVM_INTRIN_OPS = ("tir.call_llvm_pure_intrin", "tir.call_llvm_intrin")


ADDRESS_OF = "tir.address_of"


def address_of(load: "BufferLoad") -> Call:
    """The address of one buffer element (``T.address_of(A[i])``): a handle only extern calls take."""
    if not isinstance(load, BufferLoad):
        raise TypeError(f"address_of takes a buffer element, got {type(load).__name__}")
    return Call("handle", ADDRESS_OF, [load])


CHECKED_INDEX = "tir.checked_index"


def checked_index(index, extent) -> Call:
    """``T.checked_index(i, n)``: an index read from data (take's, a gather's or a scatter's
    index tensor) into an axis of ``extent``, with NumPy's meaning: ``i + n`` for
    ``-n <= i < 0``, ``i`` for ``0 <= i < n``; any other value stops the kernel with an
    ``IndexOutOfRangeError`` naming it (the interpreter raises, the compiled targets report
    it through their status word). Never clamped: a wrong index is an error, not a wrong answer."""
    index, extent = convert(index), convert(extent)
    for what, value in (("index", index), ("extent", extent)):
        if not dt.is_int(value.dtype):
            raise TypeError(f"T.checked_index: the {what} must be an integer, got a {value.dtype} one")
    return Call("int64", CHECKED_INDEX, [cast("int64", index), cast("int64", extent)])


def call_intrin(op: str, *args) -> Call:
    if op not in INTRINSICS:
        raise ValueError(f"unknown intrinsic T.{op}")
    if len(args) != INTRINSICS[op]:
        raise ValueError(f"T.{op} takes {INTRINSICS[op]} argument(s), got {len(args)}")
    args = [convert(a) for a in args]
    if op in BIT_COUNTS:
        if not dt.is_int(args[0].dtype):
            raise ValueError(f"T.{op} takes an integer operand, got {args[0].dtype}")
        return Call(dt.with_lanes("int32", dt.lanes(args[0].dtype)) if op == "clz" else args[0].dtype,
                    op, args)
    if op in BITWISE:
        if len(args) == 2:
            args = list(_promote_pair(*args))
        if not all(dt.is_int(a.dtype) or dt.is_bool(a.dtype) for a in args):
            raise ValueError(f"T.{op} takes integer operands, got {', '.join(a.dtype for a in args)}")
        return Call(args[0].dtype, op, args)
    if op == INTEGER_POWER:
        args = list(_promote_pair(*args))
        if not all(dt.is_int(a.dtype) for a in args):
            raise ValueError(f"T.{op} takes integer operands, got {', '.join(a.dtype for a in args)}")
        return Call(args[0].dtype, op, args)
    if op in ("isnan", "isinf"):
        return Call(dt.with_lanes("bool", dt.lanes(args[0].dtype)), op, args)
    if op in _FLOAT_PAIRS:
        args = list(_promote_pair(*args))
    out = args[0].dtype
    if op == "abs" or dt.is_float(out):
        return Call(out, op, args)
    # Transcendental ops on integers compute in float32, as NumPy would in float64.
    wide = dt.with_lanes("float32", dt.lanes(out))
    return Call(wide, op, [Cast(wide, a) for a in args])


# ---------------------------------------------------------------- conversion
def const(value, dtype: str | None = None) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        if dtype is not None and dt.is_float(dtype):  # True adopting a float operand's dtype is 1.0
            return FloatImm(float(value), dtype)
        return IntImm(value, dtype or "bool")
    if isinstance(value, int):
        dtype = dtype or "int64"
        if dt.is_float(dtype):
            return FloatImm(float(value), dtype)
        if not _fits(value, dtype):
            raise ValueError(f"integer {value} does not fit in {dtype}")
        return IntImm(value, dtype)
    if isinstance(value, float):
        dtype = dtype or "float32"
        if not dt.is_float(dtype):
            if value != int(value):
                raise ValueError(f"cannot represent {value} as {dtype}")
            return IntImm(int(value), dtype)
        return FloatImm(value, dtype)
    if isinstance(value, np.generic):  # NumPy scalars
        return const(value.item(), dtype or value.dtype.name)
    raise TypeError(f"cannot convert {value!r} ({type(value).__name__}) to a PrimExpr")


def convert(value) -> PrimExpr:
    return value if isinstance(value, PrimExpr) else const(value)


def as_bool(value) -> PrimExpr:
    """A boolean expression (or a vector of booleans, lane-wise)."""
    value = convert(value)
    if dt.element(value.dtype) != "bool":
        raise TypeError(f"expected a boolean expression, got dtype {value.dtype}")
    return value


def as_scalar_bool(value, what: str) -> PrimExpr:
    """A boolean that is one value (a branch, loop or assert condition)."""
    value = as_bool(value)
    if value.dtype != "bool":
        raise TypeError(f"{what} must be one boolean, got a {value.dtype} vector")
    return value


def _promote_pair(a, b):
    """Convert two operands to PrimExprs of one dtype (Python literals adopt the other side;
    a scalar next to a vector is broadcast to its lanes)."""
    if not isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
        d = b.dtype if b.dtype in _SCALAR else dt.element(b.dtype)
        a = const(a, d if not isinstance(a, float) or dt.is_float(d) else None)
    elif not isinstance(b, PrimExpr) and isinstance(a, PrimExpr):
        d = a.dtype if a.dtype in _SCALAR else dt.element(a.dtype)
        b = const(b, d if not isinstance(b, float) or dt.is_float(d) else None)
    else:
        a, b = convert(a), convert(b)
    if a.dtype != b.dtype:
        la, lb = dt.lanes(a.dtype), dt.lanes(b.dtype)   # (equal dtypes have equal lanes)
        if la != lb:
            return _promote_lanes(a, b, la, lb)
        target = dt.promote(a.dtype, b.dtype)
        a = a if a.dtype == target else _cast_const(target, a)
        b = b if b.dtype == target else _cast_const(target, b)
    return a, b


def _promote_lanes(a, b, la: int, lb: int):
    """Operands of different lane counts: a scalar is broadcast to the vector's lanes (after both
    take the promoted element dtype); two vectors must have the same lanes."""
    if la != 1 and lb != 1:
        raise TypeError(f"operands of {la} and {lb} lanes: vector operands need the same lane count")
    target = dt.promote(dt.element(a.dtype), dt.element(b.dtype))
    lanes_ = max(la, lb)

    def widen(e):
        if dt.lanes(e.dtype) == 1:
            return Broadcast(e if e.dtype == target else _cast_const(target, e), lanes_)
        return e if dt.element(e.dtype) == target else Cast(dt.with_lanes(target, lanes_), e)
    return widen(a), widen(b)


def _cast_const(dtype: str, e: PrimExpr) -> PrimExpr:
    if isinstance(e, IntImm) and not dt.is_float(dtype) and (dtype == "bool" or _fits(e.value, dtype)):
        return IntImm(e.value, dtype)
    if isinstance(e, (IntImm, FloatImm)) and dt.is_float(dtype):
        return FloatImm(float(e.value), dtype)
    return Cast(dtype, e)


def is_const_int(e, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and e.dtype != "bool" and (value is None or e.value == value)


# ---------------------------------------------------------------- builders with literal folding
def _fits(value: int, dtype: str) -> bool:
    """Whether an integer dtype holds ``value`` (other dtypes: always)."""
    if not dt.is_int(dtype):
        return True
    bits = dt.bits(dtype)
    if dt.is_uint(dtype):
        return 0 <= value < 2 ** bits
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def _fold(cls, a, b, fn):
    a, b = _promote_pair(a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm) and a.dtype != "bool":
        try:
            value = fn(a.value, b.value)
            if _fits(value, a.dtype):  # an overflowing result stays an expression (C wraps it)
                return IntImm(value, a.dtype)
        except ZeroDivisionError:
            pass
    elif isinstance(a, FloatImm) and isinstance(b, FloatImm) and cls is not FloorMod:
        try:
            return FloatImm(fn(a.value, b.value), a.dtype)
        except ZeroDivisionError:
            pass
    elif a.dtype not in _SCALAR and isinstance(a, (Broadcast, Ramp)) and isinstance(b, (Broadcast, Ramp)):
        folded = _fold_lanes(cls, a, b, fn)
        if folded is not None:
            return folded
    return cls(a, b)


def _fold_lanes(cls, a, b, fn):
    """Exact identities of vector operands, which keep flattened vector indices a ramp:
    op(broadcast x, broadcast y) = broadcast(op(x, y)); a ramp plus, minus or times a broadcast
    (or plus/minus a ramp) is a ramp. None where no identity applies."""
    if isinstance(a, Broadcast) and isinstance(b, Broadcast):
        return Broadcast(_fold(cls, a.value, b.value, fn), a.lanes)
    if cls is Add or cls is Sub:
        op = add if cls is Add else sub
        if isinstance(a, Ramp) and isinstance(b, Ramp):
            return Ramp(op(a.base, b.base), op(a.stride, b.stride), a.lanes)
        if isinstance(a, Ramp):
            return Ramp(op(a.base, b.value), a.stride, a.lanes)
        return Ramp(op(a.value, b.base), b.stride if cls is Add else sub(0, b.stride), b.lanes)
    if cls is Mul and (isinstance(a, Broadcast) or isinstance(b, Broadcast)):
        ramp, factor = (a, b.value) if isinstance(a, Ramp) else (b, a.value)
        return Ramp(mul(ramp.base, factor), mul(ramp.stride, factor), ramp.lanes)
    return None


def _trunc_div(x, y):
    if isinstance(x, float) or isinstance(y, float):
        return x / y
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def add(a, b): return _fold(Add, a, b, lambda x, y: x + y)
def sub(a, b): return _fold(Sub, a, b, lambda x, y: x - y)
def mul(a, b): return _fold(Mul, a, b, lambda x, y: x * y)
def div(a, b): return _fold(Div, a, b, _trunc_div)
def floordiv(a, b): return _fold(FloorDiv, a, b, lambda x, y: x // y if not isinstance(x, float) else math.floor(x / y))
def floormod(a, b): return _fold(FloorMod, a, b, lambda x, y: x % y)
def min_(a, b): return _fold(Min, a, b, min)
def max_(a, b): return _fold(Max, a, b, max)


def ceildiv(a, b):
    return floordiv(add(a, sub(b, 1)), b)


def select(cond, t, f):
    return Select(cond, t, f)


def cast(dtype: str, value) -> PrimExpr:
    value = convert(value)
    dtype = dt.normalize(dtype)
    if value.dtype == dtype:
        return value
    if isinstance(value, (IntImm, FloatImm)) and dtype != "bool" and dt.lanes(dtype) == 1:
        return _cast_const(dtype, value)
    if dt.lanes(dtype) != 1 and dt.lanes(value.dtype) == 1:
        return Broadcast(cast(dt.element(dtype), value), dt.lanes(dtype))
    return Cast(dtype, value)
