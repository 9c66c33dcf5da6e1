"""Run-time checks of values against annotations (parameters, match_cast, returns).

Checking happens in three passes over all values checked together (all
parameters of a call at once), so a variable can be used in an expression
before the parameter that defines it: (1) kinds, ranks, dtypes and tuple
lengths; (2) dimensions that are a bare symbolic variable: the first
occurrence binds it (after checking its facts), later ones are compared;
(3) every other dimension (constants, ``n * 4``) is evaluated and compared.
Failures raise ``ShapeMismatchError`` naming the function, the checked
parameter or variable, the symbolic variable, expected and actual values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.errors import ShapeMismatchError

from ..struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                           StructInfo, TensorStructInfo, TupleStructInfo)
from .shape_env import ShapeEnv, UnboundSymbolError, format_prim_expr
from .values import Closure, ShapeTuple, is_scalar


@dataclass
class CheckItem:
    """One value to check: ``what`` names it in messages ("parameter 'x'")."""
    what: str
    root: str
    value: Any
    struct_info: StructInfo | None


@dataclass
class _Dim:
    expr: E.PrimExpr
    actual: int | float | bool
    path: str
    what: str


class _Checker:
    def __init__(self, env: ShapeEnv, func_name: str):
        self.env = env
        self.func_name = func_name
        self.dims: list[_Dim] = []

    def fail(self, what: str, message: str):
        raise ShapeMismatchError(f"function '{self.func_name}', {what}: {message}")

    # ---------------------------------------------------------------- pass 1: structure
    def structure(self, value, sinfo, path: str, what: str):
        if sinfo is None or isinstance(sinfo, ObjectStructInfo):
            return value
        if isinstance(sinfo, TensorStructInfo):
            return self._tensor(value, sinfo, path, what)
        if isinstance(sinfo, PrimStructInfo):
            return self._prim(value, sinfo, path, what)
        if isinstance(sinfo, ShapeStructInfo):
            return self._shape(value, sinfo, path, what)
        if isinstance(sinfo, TupleStructInfo):
            if not isinstance(value, (tuple, list)) or isinstance(value, ShapeTuple):
                self.fail(what, f"{path}: expected a tuple of {len(sinfo.fields)} fields, "
                                f"got {_describe(value)}")
            if len(value) != len(sinfo.fields):
                self.fail(what, f"{path}: expected a tuple of {len(sinfo.fields)} fields, "
                                f"got {len(value)} fields")
            return tuple(self.structure(v, s, f"{path}[{i}]", what)
                         for i, (v, s) in enumerate(zip(value, sinfo.fields)))
        if isinstance(sinfo, FuncStructInfo):
            if not (isinstance(value, Closure) or callable(value)):
                self.fail(what, f"{path}: expected a function, got {_describe(value)}")
            return value
        raise TypeError(f"unknown annotation {type(sinfo).__name__}")

    def _tensor(self, value, sinfo: TensorStructInfo, path: str, what: str):
        if isinstance(value, (list, np.generic, bool, int, float)):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            self.fail(what, f"{path}: expected a tensor, got {_describe(value)}")
        if sinfo.ndim != -1 and value.ndim != sinfo.ndim:
            self.fail(what, f"{path}: expected rank {sinfo.ndim}, got rank {value.ndim} "
                            f"(shape {tuple(value.shape)})")
        if sinfo.dtype is not None and value.dtype.name != sinfo.dtype:
            self.fail(what, f"{path}: expected dtype {sinfo.dtype}, got {value.dtype.name}")
        if sinfo.shape is not None:
            for axis, (expr, actual) in enumerate(zip(sinfo.shape, value.shape)):
                self.dims.append(_Dim(expr, int(actual), f"{path}.shape[{axis}]", what))
        return value

    def _prim(self, value, sinfo: PrimStructInfo, path: str, what: str):
        if not is_scalar(value):
            self.fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {_describe(value)}")
        kind = np.asarray(value).dtype.kind
        ok = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}
        target = "b" if sinfo.dtype == "bool" else "f" if dt.is_float(sinfo.dtype) else "i"
        if kind not in ok[target]:
            self.fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {value!r}")
        value = np.asarray(value).item()
        value = bool(value) if target == "b" else float(value) if target == "f" else int(value)
        if sinfo.value is not None:
            self.dims.append(_Dim(sinfo.value, value, path, what))
        return value

    def _shape(self, value, sinfo: ShapeStructInfo, path: str, what: str):
        if not isinstance(value, (tuple, list)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            self.fail(what, f"{path}: expected a shape, got {_describe(value)}")
        value = ShapeTuple(value)
        if sinfo.ndim != -1 and len(value) != sinfo.ndim:
            self.fail(what, f"{path}: expected a shape of {sinfo.ndim} values, got {list(value)}")
        if sinfo.values is not None:
            for i, (expr, actual) in enumerate(zip(sinfo.values, value)):
                self.dims.append(_Dim(expr, actual, f"{path}[{i}]", what))
        return value

    # ---------------------------------------------------------------- passes 2 and 3: symbols
    def bind_bare_vars(self) -> None:
        for dim in self.dims:
            var = dim.expr
            if not isinstance(var, E.Var):
                continue
            if var in self.env:
                expected = self.env.lookup(var)
                if expected != dim.actual:
                    self.fail(dim.what, f"{dim.path}: symbolic var {var.name}: expected {expected} "
                                        f"(bound by {self.env.origin(var)}), got {dim.actual}")
                continue
            self._check_facts(var, dim)
            self.env.bind(var, dim.actual, dim.path)

    def _check_facts(self, var: E.Var, dim: _Dim) -> None:
        actual = dim.actual
        broken = None
        if var.upper is not None and actual > var.upper:
            broken = f"expected <= {var.upper} (its upper bound)"
        elif var.lower is not None and actual < var.lower:
            broken = f"expected >= {var.lower} (its lower bound)"
        elif var.multiple_of and actual % var.multiple_of != 0:
            broken = f"expected a multiple of {var.multiple_of}"
        if broken:
            self.fail(dim.what, f"{dim.path}: symbolic var {var.name}: {broken}, got {actual}")

    def check_expressions(self) -> None:
        for dim in self.dims:
            if isinstance(dim.expr, E.Var):
                continue
            try:
                expected = self.env.evaluate(dim.expr)
            except UnboundSymbolError as err:
                self.fail(dim.what, f"{dim.path} = {format_prim_expr(dim.expr)}: symbolic var "
                                    f"{err.var.name} is not defined (no bare dimension binds it), "
                                    f"got {dim.actual}")
            if expected != dim.actual:
                self.fail(dim.what, f"{dim.path} = {format_prim_expr(dim.expr)}"
                                    f"{self._var_values(dim.expr)}: expected {expected}, got {dim.actual}")

    def _var_values(self, expr) -> str:
        names = [f"{v.name} = {self.env.lookup(v)}" for v in _vars_of(expr)]
        return f" (symbolic var {', '.join(names)})" if names else ""


def _vars_of(expr) -> list[E.Var]:
    from tensorir.functor import collect
    return collect(expr, lambda n: isinstance(n, E.Var))


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype.name}"
    if isinstance(value, ShapeTuple):
        return f"a shape {list(value)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    return f"{type(value).__name__} {value!r}"


def check_values(env: ShapeEnv, func_name: str, items: Sequence[CheckItem]) -> list:
    """Check ``items`` together, binding new symbolic vars in ``env``; return the
    values converted to interpreter form (lists to arrays, shapes to ShapeTuple)."""
    checker = _Checker(env, func_name)
    converted = [checker.structure(item.value, item.struct_info, item.root, item.what)
                 for item in items]
    checker.bind_bare_vars()
    checker.check_expressions()
    return converted
