"""The ``R`` namespace of the graph-level script form.

Function bodies are parsed, never executed, so most names here matter only
to the parser. They still exist as Python objects because signature
annotations are evaluated when a ``def`` runs, and because the value and
operator constructors are useful for building IR from Python directly:

- annotations (``R.Tensor``, ``R.Shape``, ``R.Tuple``, ``R.Callable``,
  ``R.Object``, ``R.Prim``) return StructInfo; a string dimension such as
  ``"n"`` cannot be resolved outside a script, so such annotations return a
  ``ScriptAnnotation`` record instead;
- values (``R.shape``, ``R.const``, ``R.prim_value``, ``R.str``, ``R.tuple``)
  build Exprs; ``R.sym_var`` is ``T.int64``;
- every registered operator appears under its R path (``R.add``,
  ``R.nn.softmax``), looked up in the op registry on first use so that new
  operators appear without touching this file;
- statement forms (``R.dataflow``, ``R.output``, ``R.match_cast``,
  ``R.func_attr``) only have meaning inside a parsed body.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from .. import expr as rx
from ..op.registry import all_op_specs
from ..struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                           TensorStructInfo, TupleStructInfo)

# Statement-level forms; calling them from Python is a mistake worth a clear message.
SCRIPT_ONLY = ("dataflow", "output", "match_cast", "func_attr", "module_attrs")


@dataclass(frozen=True)
class ScriptAnnotation:
    """What an annotation with string dimensions evaluates to at ``def`` time.
    The parser reads the annotation from the source; this record is inert."""
    kind: str
    args: tuple
    kwargs: tuple

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"R.{self.kind}({', '.join(parts)})"


def _has_string(value) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_string(v) for v in value)
    return isinstance(value, ScriptAnnotation)


def _symbolic(kind: str, args: tuple, kwargs: dict) -> ScriptAnnotation:
    return ScriptAnnotation(kind, tuple(args), tuple(sorted(kwargs.items())))


# ---------------------------------------------------------------- annotations
def Tensor(shape=None, dtype=None, ndim=-1):
    """``R.Tensor((n, 4), "float32")``, ``R.Tensor(ndim=2, dtype=...)``, ``R.Tensor()``."""
    if isinstance(shape, str) and dtype is None and not _looks_symbolic(shape):
        shape, dtype = None, shape  # R.Tensor("float32")
    if _has_string(shape):
        return _symbolic("Tensor", (shape,), {"dtype": dtype, "ndim": ndim})
    return TensorStructInfo(shape, dtype, -1 if ndim is None else ndim)


def _looks_symbolic(text: str) -> bool:
    try:
        dt.normalize(text)
        return False
    except ValueError:
        return True


def Shape(values=None, ndim=-1):
    """``R.Shape([n, 4])`` or ``R.Shape(ndim=2)``."""
    if _has_string(values):
        return _symbolic("Shape", (values,), {"ndim": ndim})
    return ShapeStructInfo(values, -1 if ndim is None else ndim)


def Tuple(*fields):
    """``R.Tuple(R.Tensor(...), R.Object())``."""
    if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
        fields = tuple(fields[0])
    if any(isinstance(f, ScriptAnnotation) for f in fields):
        return _symbolic("Tuple", fields, {})
    return TupleStructInfo(fields)


def Callable(params=None, ret=None, purity=True):
    """``R.Callable([param annotations], return annotation)``."""
    if _has_string(params) or isinstance(ret, ScriptAnnotation):
        return _symbolic("Callable", (params, ret), {"purity": purity})
    return FuncStructInfo(params, ret if ret is not None else ObjectStructInfo(), purity)


def Object():
    """``R.Object``: any value."""
    return ObjectStructInfo()


def Prim(dtype=None, value=None):
    """``R.Prim("int64")`` or ``R.Prim(value=n)``."""
    if isinstance(value, str):
        return _symbolic("Prim", (dtype,), {"value": value})
    if dtype is None:
        if value is None:
            raise ValueError('R.Prim needs a dtype (R.Prim("int64")) or a value')
        dtype = E.convert(value).dtype
    return PrimStructInfo(dtype, value)


# ---------------------------------------------------------------- values
def shape(values) -> rx.ShapeExpr:
    """``R.shape([n, 4])``: a shape value."""
    return rx.ShapeExpr(values)


def const(value, dtype: str | None = None) -> rx.Constant:
    """``R.const(1.5, "float32")`` / ``R.const(np_array)``: a constant tensor.

    Without a dtype, arrays keep theirs, Python floats become float32, ints
    int32 (TVM's ``relax.const`` default) and bools bool."""
    if dtype is None:
        if isinstance(value, (np.ndarray, np.generic)):
            dtype = value.dtype.name
        else:
            flat = np.asarray(value)
            dtype = {"b": "bool", "i": "int32", "u": "int32"}.get(flat.dtype.kind, "float32")
    return rx.Constant(np.asarray(value, dtype=dt.to_numpy(dt.normalize(dtype))))


def prim_value(value) -> rx.PrimValue:
    """``R.prim_value(n + 1)``: a scalar value."""
    return rx.PrimValue(value)


def string_value(value) -> rx.StringImm:
    """``R.str("...")``: a string value."""
    return rx.StringImm(value)


def dtype_value(value) -> str:
    """``R.dtype("float32")``: a dtype, for operator arguments (the normalized string)."""
    return dt.normalize(value)


def make_tuple(*fields) -> rx.Tuple:
    """``R.tuple(a, b)``: a tuple value (``(a, b)`` in scripts)."""
    return rx.Tuple(fields)


def ExternFunc(global_symbol) -> rx.ExternFunc:
    return rx.ExternFunc(global_symbol)


def sym_var(dtype: Any = "int64", *, lower=0, upper=None, multiple_of=None, name="v") -> E.Var:
    """``R.sym_var()``: alias of ``T.int64()`` declaring a symbolic variable."""
    return E.Var(name, dt.normalize(dtype), lower=lower, upper=upper, multiple_of=multiple_of)


# ---------------------------------------------------------------- the R object
class _ScriptOnly:
    def __init__(self, name: "str"):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"R.{self.name} can only be used inside the body of an @R.function "
                           "(bodies are parsed, never executed)")

    def __repr__(self):
        return f"R.{self.name}"


class OpGroup:
    """A dotted group of operator constructors (``R.nn``, ``R.builtin``, ...)."""

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        found = lookup_op_constructor(f"{self._path}.{name}")
        if found is None:
            raise AttributeError(f"R.{self._path} has no operator or group {name!r}")
        setattr(self, name, found)
        return found

    def __dir__(self):
        return sorted(_op_children(self._path))

    def __repr__(self):
        return f"R.{self._path}"


def _registered_paths() -> list[str]:
    from ..op.tvm_spellings import TVM_SPELLINGS
    return [spec.path for spec in all_op_specs()] + list(TVM_SPELLINGS)


def _op_children(prefix: str) -> set[str]:
    """Names directly below ``prefix`` ('' for the top level) among registered op paths."""
    out = set()
    head = prefix + "." if prefix else ""
    for path in _registered_paths():
        if path.startswith(head):
            out.add(path[len(head):].split(".")[0])
    return out


def lookup_op_constructor(path: str):
    """The constructor of operator ``relax.<path>``, an ``OpGroup`` when ``path``
    is a prefix of operator paths, or None."""
    from ..op.tvm_spellings import TVM_SPELLINGS
    if path in TVM_SPELLINGS:
        return TVM_SPELLINGS[path]
    paths = _registered_paths()
    if path in paths:
        from ..op.registry import get_op_spec
        spec = get_op_spec("relax." + path)
        if spec.constructor is not None:
            return spec.constructor
        return _generic_constructor(spec)
    if any(p.startswith(path + ".") for p in paths):
        return OpGroup(path)
    return None


def _generic_constructor(spec):
    """For an operator registered without a Python constructor: positional args
    are Expr arguments, keywords its attributes."""
    def build(*args, **attrs):
        unknown = set(attrs) - set(spec.attr_names)
        if unknown:
            raise TypeError(f"R.{spec.path} got unexpected keyword argument(s) {sorted(unknown)}")
        from ..op.registry import get_op
        return rx.Call(get_op(spec.name), args, attrs)
    build.__name__ = spec.path.split(".")[-1]
    return build


class _Namespace:
    """The object imported as ``R``."""

    Tensor = staticmethod(Tensor)
    Shape = staticmethod(Shape)
    Tuple = staticmethod(Tuple)
    Callable = staticmethod(Callable)
    Object = staticmethod(Object)
    Any = staticmethod(Object)  # newer TVM's name of the annotation of any value
    Prim = staticmethod(Prim)
    shape = staticmethod(shape)
    const = staticmethod(const)
    prim_value = staticmethod(prim_value)
    str = staticmethod(string_value)
    dtype = staticmethod(dtype_value)
    tuple = staticmethod(make_tuple)
    ExternFunc = staticmethod(ExternFunc)
    sym_var = staticmethod(sym_var)

    def __init__(self):
        for name in SCRIPT_ONLY:
            setattr(self, name, _ScriptOnly(name))

    @staticmethod
    def ir_module(cls=None, **options):
        from .parser import ir_module
        return ir_module(cls, **options)

    @staticmethod
    def function(func=None, **options):
        from .parser import function
        return function(func, **options)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        found = lookup_op_constructor(name)
        if found is None:
            raise AttributeError(f"R has no attribute {name!r} (not an annotation, value, statement "
                                 "form or registered operator)")
        setattr(self, name, found)
        return found

    def __dir__(self):
        return sorted(set(super().__dir__()) | _op_children(""))

    def __repr__(self) -> str:
        return "R"


R = _Namespace()

__all__ = ["R", "ScriptAnnotation", "OpGroup", "lookup_op_constructor", "SCRIPT_ONLY"]
