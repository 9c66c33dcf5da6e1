"""Run-time values of the reference interpreter beyond NumPy arrays.

Tensors are ``np.ndarray``, tuples are Python tuples, scalars (Prim values)
are Python ``int``/``float``/``bool``, strings are ``str``. Shapes get their
own tuple subclass so a shape and a tuple of scalars stay distinguishable;
functions become ``Closure`` objects that are callable from Python.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..expr import Function, Var
    from .evaluator import Interpreter
    from .shape_env import ShapeEnv


class ShapeTuple(tuple):
    """A shape value (``R.shape([n, 4])`` evaluated): a tuple of ints."""

    def __new__(cls, values=()):
        return super().__new__(cls, (int(v) for v in values))

    def __repr__(self) -> str:
        return f"ShapeTuple({list(self)})"


class Closure:
    """A graph-level function value: the Function plus what its body may refer to.

    ``var_env`` is the defining frame's variable table (shared, not copied:
    bindings are single-assignment, and a local function may refer to the
    variable it is being bound to, for recursion).
    """

    def __init__(self, interp: "Interpreter", func: "Function", name: str,
                 var_env: "dict[Var, Any] | None" = None, shape_env: "ShapeEnv | None" = None):
        self.interp = interp
        self.func = func
        self.name = name
        self.var_env = var_env
        self.shape_env = shape_env

    def __call__(self, *args):
        return self.interp.call_function(self, list(args))

    def __repr__(self) -> str:
        return f"<relax function {self.name}>"


def is_scalar(value) -> bool:
    import numpy as np
    if isinstance(value, (bool, int, float, np.generic)):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0
