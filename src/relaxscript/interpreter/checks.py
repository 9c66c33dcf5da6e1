"""Run-time checks of values against annotations (parameters, match_cast, returns).

Checking happens in three passes over all values checked together (all
parameters of a call at once), so a variable can be used in an expression
before the parameter that defines it: (1) kinds, ranks, dtypes and tuple
lengths; (2) dimensions that are a bare symbolic variable: the first
occurrence binds it (after checking its facts), later ones are compared;
a variable that only appears in dims like ``n * 2 + 1`` is solved for;
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
from .arguments import ArgumentError, check_int, int_range, to_tensor
from .shape_env import ShapeEnv, UnboundSymbolError, format_prim_expr
from .values import Closure, ShapeTuple, describe, dtype_text, is_scalar


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
                                f"got {describe(value)}")
            if len(value) != len(sinfo.fields):
                self.fail(what, f"{path}: expected a tuple of {len(sinfo.fields)} fields, "
                                f"got {len(value)} fields")
            return tuple(self.structure(v, s, f"{path}[{i}]", what)
                         for i, (v, s) in enumerate(zip(value, sinfo.fields)))
        if isinstance(sinfo, FuncStructInfo):
            if not (isinstance(value, Closure) or callable(value)):
                self.fail(what, f"{path}: expected a function, got {describe(value)}")
            return value
        raise TypeError(f"unknown annotation {type(sinfo).__name__}")

    def _tensor(self, value, sinfo: TensorStructInfo, path: str, what: str):
        if type(value) is not np.ndarray:
            # lists and scalars take the annotated dtype; a subclass is viewed as a plain array
            try:
                value = to_tensor(value, sinfo.dtype)
            except ArgumentError as err:
                self.fail(what, f"{path}: expected a tensor, got {err}")
        if sinfo.ndim != -1 and value.ndim != sinfo.ndim:
            self.fail(what, f"{path}: expected rank {sinfo.ndim}, got rank {value.ndim} "
                            f"(shape {tuple(value.shape)})")
        if sinfo.dtype is not None and (value.dtype.name != sinfo.dtype or not value.dtype.isnative):
            # a byte-swapped array reached the first op, whose ufunc raised a bare TypeError
            self.fail(what, f"{path}: expected dtype {sinfo.dtype}, got {dtype_text(value.dtype)}")
        if sinfo.shape is not None:
            for axis, (expr, actual) in enumerate(zip(sinfo.shape, value.shape)):
                self.dims.append(_Dim(expr, int(actual), f"{path}.shape[{axis}]", what))
        return value

    def _prim(self, value, sinfo: PrimStructInfo, path: str, what: str):
        if not is_scalar(value):
            self.fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {describe(value)}")
        # a Python int of any size is an int (NumPy would make one beyond 64 bits an object)
        kind = "i" if isinstance(value, int) and not isinstance(value, bool) else np.asarray(value).dtype.kind
        ok = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}
        target = "b" if sinfo.dtype == "bool" else "f" if dt.is_float(sinfo.dtype) else "i"
        if kind not in ok[target]:
            self.fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {value!r}")
        value = value if kind == "i" and isinstance(value, int) else np.asarray(value).item()
        try:
            value = bool(value) if target == "b" else float(value) if target == "f" else int(value)
        except OverflowError:   # an int beyond any float
            self.fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {describe(value)}")
        if target == "i":
            self._in_range(value, sinfo.dtype, path, what)
        if sinfo.value is not None:
            self.dims.append(_Dim(sinfo.value, value, path, what))
        return value

    def _shape(self, value, sinfo: ShapeStructInfo, path: str, what: str):
        if not isinstance(value, (tuple, list)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            self.fail(what, f"{path}: expected a shape, got {describe(value)}")
        value = ShapeTuple(value)
        for i, v in enumerate(value):
            self._in_range(v, "int64", f"{path}[{i}]", what)
        if sinfo.ndim != -1 and len(value) != sinfo.ndim:
            self.fail(what, f"{path}: expected a shape of {sinfo.ndim} values, got {list(value)}")
        if sinfo.values is not None:
            for i, (expr, actual) in enumerate(zip(sinfo.values, value)):
                self.dims.append(_Dim(expr, actual, f"{path}[{i}]", what))
        return value

    def _in_range(self, value: int, dtype: str, path: str, what: str) -> None:
        try:
            check_int(value, dtype)
        except ArgumentError as err:
            self.fail(what, f"{path}: {err}")

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
        lo, hi = int_range(var.dtype)
        if not lo <= actual <= hi:   # the VM's symbol table is int64: never wrap
            broken = f"outside the {var.dtype} range [{lo}, {hi}]"
        elif var.upper is not None and actual > var.upper:
            broken = f"expected <= {var.upper} (its upper bound)"
        elif var.lower is not None and actual < var.lower:
            broken = f"expected >= {var.lower} (its lower bound)"
        elif var.multiple_of and actual % var.multiple_of != 0:
            broken = f"expected a multiple of {var.multiple_of}"
        if broken:
            self.fail(dim.what, f"{dim.path}: symbolic var {var.name}: {broken}, got {actual}")

    def solve_linear_dims(self) -> None:
        """Bind a var that appears only in dims of the form ``a * n + b`` by solving for it
        (the builder accepts ``R.Tensor(("n * 2",))`` alone), as the loop level does."""
        progress = True
        while progress:
            progress = False
            for dim in self.dims:
                unbound = [v for v in _vars_of(dim.expr) if v not in self.env]
                if len(unbound) != 1:
                    continue
                var = unbound[0]
                coeffs = _linear(dim.expr, var, self.env)
                if coeffs is None or coeffs[0] == 0:
                    continue
                a, b = coeffs
                if (dim.actual - b) % a != 0:
                    self.fail(dim.what, f"{dim.path} = {format_prim_expr(dim.expr)}: no integer value of "
                                        f"symbolic var {var.name} gives {dim.actual}")
                solved = _Dim(var, (dim.actual - b) // a, dim.path, dim.what)
                self._check_facts(var, solved)
                self.env.bind(var, solved.actual, f"solving {dim.path} = {format_prim_expr(dim.expr)}")
                progress = True

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
                shown = "" if isinstance(dim.expr, (E.IntImm, E.FloatImm)) else \
                    f" = {format_prim_expr(dim.expr)}{self._var_values(dim.expr)}"
                self.fail(dim.what, f"{dim.path}{shown}: expected {expected}, got {dim.actual}")

    def _var_values(self, expr) -> str:
        names = [f"{v.name} = {self.env.lookup(v)}" for v in _vars_of(expr)]
        return f" (symbolic var {', '.join(names)})" if names else ""


def _linear(expr, var: E.Var, env: ShapeEnv) -> tuple[int, int] | None:
    """``(a, b)`` with ``expr == a * var + b`` (other vars bound in ``env``), or None."""
    if isinstance(expr, E.IntImm) and expr.dtype != "bool":
        return 0, expr.value
    if isinstance(expr, E.Var):
        return (1, 0) if expr is var else (0, env.lookup(expr)) if expr in env else None
    if isinstance(expr, (E.Add, E.Sub, E.Mul)):
        lhs, rhs = _linear(expr.a, var, env), _linear(expr.b, var, env)
        if lhs is None or rhs is None:
            return None
        if isinstance(expr, E.Add):
            return lhs[0] + rhs[0], lhs[1] + rhs[1]
        if isinstance(expr, E.Sub):
            return lhs[0] - rhs[0], lhs[1] - rhs[1]
        if lhs[0] and rhs[0]:
            return None  # var * var is not linear
        return lhs[0] * rhs[1] + rhs[0] * lhs[1], lhs[1] * rhs[1]
    return None


def _vars_of(expr) -> list[E.Var]:
    from tensorir.functor import collect
    return collect(expr, lambda n: isinstance(n, E.Var))


def check_values(env: ShapeEnv, func_name: str, items: Sequence[CheckItem]) -> list:
    """Check ``items`` together, binding new symbolic vars in ``env``; return the
    values converted to interpreter form (lists to arrays, shapes to ShapeTuple)."""
    checker = _Checker(env, func_name)
    converted = [checker.structure(item.value, item.struct_info, item.root, item.what)
                 for item in items]
    checker.bind_bare_vars()
    checker.solve_linear_dims()
    checker.check_expressions()
    return converted
