"""The ``T`` namespace of the script form.

A prim_func body is never executed: the parser reads its AST. The names here
exist so that annotations (evaluated by Python when the ``def`` runs) work,
``T.prim_func`` decorates, and expression helpers (``T.exp``, ``T.max``,
typed literals) can also build IR directly from Python code. Statement-level
constructs (``T.grid``, ``T.block``, ...) only have meaning inside a script
and raise a clear error when called from ordinary Python.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import dtype as dt
from .. import expr as E

DTYPE_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "bfloat16", "bool")

# Statement-level constructs: only meaningful inside a parsed body.
SCRIPT_ONLY = ("grid", "serial", "parallel", "vectorized", "unroll", "thread_binding", "block",
               "init", "reads", "writes", "where", "alloc_buffer", "match_buffer", "decl_buffer",
               "func_attr", "block_attr", "evaluate", "LetStmt", "allocate", "launch_thread",
               "env_thread", "var", "Let", "address_of", "meta_var", "assume", "Bind",
               "sblock_alloc_buffer", "Assert")


@dataclass(frozen=True)
class BufferAnnotation:
    """What ``T.Buffer(...)`` evaluates to in a parameter annotation."""
    shape: Any
    dtype: str = "float32"
    strides: Any = ()
    elem_offset: Any = 0
    scope: str = "global"


class DTypeConstructor:
    """``T.int64``: a parameter annotation, a typed literal ``T.int64(5)``, a
    cast ``T.float32(x)``, or a symbolic variable ``T.int64(upper=4096)``."""

    def __init__(self, name: str):
        self.dtype = name
        self.__name__ = name

    def __call__(self, value=None, *, lower=0, upper=None, multiple_of=None, name="v"):
        if value is None:
            return E.Var(name, self.dtype, lower=lower, upper=upper, multiple_of=multiple_of)
        if isinstance(value, str):
            value = float(value)
        return E.cast(self.dtype, value) if isinstance(value, E.PrimExpr) else E.const(value, self.dtype)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


def _script_only(name: str):
    def fail(*args, **kwargs):
        raise RuntimeError(f"T.{name} can only be used inside the body of a @T.prim_func "
                           "(the body is parsed, never executed)")
    fail.__name__ = name
    return fail


class _Axis:
    def __getattr__(self, name: str):
        if name in ("spatial", "reduce", "S", "R", "remap", "scan", "opaque"):
            return _script_only("axis." + name)
        raise AttributeError(f"T.axis has no attribute {name!r}")


def _intrinsic(op: str):
    def build(*args):
        return E.call_intrin(op, *args)
    build.__name__ = op
    return build


def _truncdiv(a, b):
    a, b = E._promote_pair(a, b)
    if dt.is_float(a.dtype):
        raise TypeError("T.truncdiv takes integer operands")
    return E.div(a, b)


class _Namespace:
    """The object imported as ``T``."""

    axis = _Axis()
    handle = "handle"  # a parameter annotation: an opaque pointer, or storage T.match_buffer names

    def __init__(self):
        for name in DTYPE_NAMES:
            setattr(self, name, DTypeConstructor(name))
        for op in E.INTRINSICS:
            setattr(self, op, _intrinsic(op))
        for name in SCRIPT_ONLY:
            setattr(self, name, _script_only(name))

    @staticmethod
    def Buffer(shape, dtype="float32", strides=(), elem_offset=0, scope="global", **_ignored):
        return BufferAnnotation(shape, dt.normalize(dtype), strides, elem_offset, scope)

    @staticmethod
    def prim_func(func=None, **options):
        from .parser import prim_func
        return prim_func(func, **options)

    checked_index = staticmethod(E.checked_index)
    max = staticmethod(E.max_)
    min = staticmethod(E.min_)
    floordiv = staticmethod(E.floordiv)
    floormod = staticmethod(E.floormod)
    ceildiv = staticmethod(E.ceildiv)
    truncdiv = staticmethod(_truncdiv)
    if_then_else = staticmethod(E.select)
    Select = staticmethod(E.select)
    Ramp = staticmethod(E.Ramp)
    Broadcast = staticmethod(E.Broadcast)

    @staticmethod
    def cast(value, dtype):
        return E.cast(dtype, value)

    @staticmethod
    def Cast(dtype, value):
        return E.Cast(dtype, value)

    def __repr__(self) -> str:
        return "T"


T = _Namespace()

__all__ = ["T", "BufferAnnotation", "DTypeConstructor", "DTYPE_NAMES"]


def t_namespace_names(py_globals: dict) -> frozenset:
    """The names a definition's scope gives the T namespace (``T``, and aliases such as ``tir``)."""
    return frozenset({"T"} | {k for k, v in py_globals.items() if isinstance(v, _Namespace)})
