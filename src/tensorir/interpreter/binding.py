"""Binding of call arguments to a PrimFunc's parameters, with every check.

Positional arguments fill the parameters in order, skipping scalar
parameters passed by name. Symbolic vars are defined by the first buffer dimension that is exactly the
var (in parameter order) or by a scalar parameter; a dimension such as
``n * 4`` is then checked, or, if it is the only mention of ``n`` and has
the form ``a * n + b``, solved for ``n``. Ranks, dims, dtypes, contiguity,
strides and the declared facts of every var (lower/upper bound,
``multiple_of``) are checked; a mismatch raises ``ShapeMismatchError``
naming the function, the parameter, the var, and expected vs actual values.
"""
from __future__ import annotations

import numpy as np

from .. import dtype as dt
from .. import expr as E
from ..buffer import Buffer
from ..errors import ShapeMismatchError
from ..functor import collect
from ..script.printer import format_node
from .evaluator import ExprEvaluator, np_dtype
from .storage import BufferView, compact_strides


class _Scope:
    """A minimal evaluation frame holding only the bound symbolic vars."""
    recorder = None

    def __init__(self, vars):
        self.vars = vars

    def view(self, buffer):
        raise ShapeMismatchError(f"buffer {buffer.name!r} cannot appear in a shape expression")


def bind_arguments(func, args, scalars) -> tuple[dict, dict]:
    """Return (vars: Var -> NumPy scalar, views: Buffer -> BufferView) for a call."""
    binder = _Binder(func)
    return binder.bind(args, scalars)


class _Binder:
    def __init__(self, func):
        self.func = func
        self.vars: dict = {}
        self.where: dict = {}  # Var -> description of what defined it
        self.evaluator = ExprEvaluator(_Scope(self.vars))

    def fail(self, message: str):
        raise ShapeMismatchError(f"{self.func.name}: {message}")

    def bind(self, args, scalars):
        params = self.func.params
        by_name = {p.name: p for p in params}
        for name in scalars:
            if not isinstance(by_name.get(name), E.Var):
                self.fail(f"unknown scalar argument {name!r} (parameters: {self._param_names()})")
        # Positional arguments fill the parameters in order, skipping scalars passed by name.
        positional = [p for p in params if not (isinstance(p, E.Var) and p.name in scalars)]
        if len(args) > len(positional):
            self.fail(f"expects {len(positional)} positional argument(s) "
                      f"({', '.join(p.name for p in positional)}), got {len(args)}")
        given = dict(zip(positional, args))
        for name, value in scalars.items():
            given[by_name[name]] = value
        missing = [p.name for p in params if p not in given]
        if missing:
            self.fail(f"missing argument(s) {', '.join(missing)} (parameters: {self._param_names()})")

        for param in params:  # scalar params define their vars first
            if isinstance(param, E.Var):
                self._bind_scalar(param, given[param])
        # An ndarray subclass is viewed as a plain array: its own shape property is not trusted.
        buffers = [(p, np.asarray(given[p]) if isinstance(given[p], np.ndarray) else given[p])
                   for p in params if isinstance(p, Buffer)]
        for buf, array in buffers:
            self._check_array_kind(buf, array)
        for buf, array in buffers:  # plain-var dims define vars, in parameter order
            for dim, (expr, actual) in enumerate(zip(buf.shape, array.shape)):
                if isinstance(expr, E.Var) and expr not in self.vars:
                    self._define(expr, actual, f"parameter {buf.name!r} dim {dim}")
        views = {}
        for buf, array in buffers:
            for dim, (expr, actual) in enumerate(zip(buf.shape, array.shape)):
                self._match(expr, actual, f"parameter {buf.name!r} dim {dim}")
            views[buf] = self._view(buf, array)
        return self.vars, views

    def _param_names(self) -> str:
        return ", ".join(p.name for p in self.func.params)

    # scalars and vars ----------------------------------------------------------------
    def _bind_scalar(self, var, value):
        if var.dtype == "handle":  # an opaque T.handle: passed through as is, never computed with
            self.vars[var] = value
            self.where[var] = f"scalar parameter {var.name!r}"
            return
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            if not (isinstance(value, (float, np.floating)) and np_dtype(var.dtype).kind == "f"):
                self.fail(f"scalar parameter {var.name!r} expects a {var.dtype} value, "
                          f"got {value!r} ({type(value).__name__})")
        self._define(var, value, f"scalar parameter {var.name!r}")

    def _define(self, var, value, where: str):
        self._check_facts(var, value, where)
        self.vars[var] = np_dtype(var.dtype).type(value)
        self.where[var] = where

    def _check_facts(self, var, value, where: str):
        if np_dtype(var.dtype).kind in "iu":
            lo, hi = dt.int_range(var.dtype)
            if not lo <= value <= hi:   # NumPy would raise OverflowError or wrap
                self.fail(f"{where}: symbolic var {var.name!r} = {value} is outside the {var.dtype} "
                          f"range [{lo}, {hi}]")
        problems = []
        if var.lower is not None and value < var.lower:
            problems.append(f"below its lower bound {var.lower}")
        if var.upper is not None and value > var.upper:
            problems.append(f"above its declared upper bound {var.upper}")
        if var.multiple_of and value % var.multiple_of != 0:
            problems.append(f"not a multiple of {var.multiple_of}")
        if problems:
            self.fail(f"{where}: symbolic var {var.name!r} = {value} is {' and '.join(problems)}")

    def _match(self, expr, actual: int, where: str):
        """Check ``expr == actual``, solving ``a * v + b`` for one still-unbound var ``v``."""
        unbound = [v for v in collect(expr, lambda n: isinstance(n, E.Var)) if v not in self.vars]
        if len(unbound) == 1:
            solved = self._solve(expr, unbound[0], actual)
            if solved is None:
                self.fail(f"{where}: cannot determine symbolic var {unbound[0].name!r} from the "
                          f"dimension expression (got extent {actual})")
            self._define(unbound[0], solved, where)
        elif unbound:
            names = ", ".join(repr(v.name) for v in unbound)
            self.fail(f"{where}: symbolic vars {names} are not defined by any earlier dimension")
        expected = int(self.evaluator.eval(expr))
        if expected != actual:
            self.fail(f"{where}: expected extent {self._describe(expr, expected)}, got {actual}")

    def _solve(self, expr, var, actual: int):
        """The integer v with a*v + b == actual, for expr affine in var; None if there is none."""
        try:
            self.vars[var] = np_dtype(var.dtype).type(0)
            b = int(self.evaluator.eval(expr))
            self.vars[var] = np_dtype(var.dtype).type(1)
            a = int(self.evaluator.eval(expr)) - b
            if a == 0 or (actual - b) % a:
                return None
            v = (actual - b) // a
            self.vars[var] = np_dtype(var.dtype).type(v)
            return v if int(self.evaluator.eval(expr)) == actual else None
        finally:
            self.vars.pop(var, None)

    def _describe(self, expr, value: int) -> str:
        names = [v for v in collect(expr, lambda n: isinstance(n, E.Var))]
        if isinstance(expr, E.IntImm):
            return str(value)
        if len(names) == 1 and expr is names[0]:
            return f"{value} (symbolic var {expr.name!r}, defined by {self.where.get(expr, '?')})"
        bound = ", ".join(f"{v.name} = {int(self.vars[v])}" for v in names)
        return f"{value} (from {_text(expr)} with {bound})"

    # arrays ------------------------------------------------------------------------------
    def _check_array_kind(self, buf, array):
        where = f"parameter {buf.name!r}"
        if not isinstance(array, np.ndarray):
            self.fail(f"{where}: expected a NumPy array, got {type(array).__name__}")
        expected = np_dtype(buf.dtype)
        if array.dtype != expected:
            self.fail(f"{where}: expected dtype {buf.dtype}, got {array.dtype}")
        if array.ndim != buf.ndim:
            self.fail(f"{where}: expected rank {buf.ndim} (shape {_shape_text(buf)}), "
                      f"got rank {array.ndim} (shape {list(array.shape)})")
        if not array.flags.c_contiguous:
            self.fail(f"{where}: array is not C-contiguous (pass np.ascontiguousarray(x))")

    def _view(self, buf, array) -> BufferView:
        where = f"parameter {buf.name!r}"
        strides = compact_strides(array.shape)
        for dim, expr in enumerate(buf.strides):
            self._match(expr, strides[dim], f"{where} stride {dim}")
        self._match(buf.elem_offset, 0, f"{where} elem_offset")
        return BufferView(buf.name, array.reshape(-1), array.shape, strides, 0)


def _shape_text(buf) -> str:
    return "(" + ", ".join(_text(d) for d in buf.shape) + ")"


def _text(expr) -> str:
    return format_node(expr)
