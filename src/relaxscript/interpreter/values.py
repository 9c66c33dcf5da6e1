"""Run-time values of the reference interpreter beyond NumPy arrays.

Tensors are ``np.ndarray``, tuples are Python tuples, scalars (Prim values)
are Python ``int``/``float``/``bool``, strings are ``str``. Shapes get their
own tuple subclass so a shape and a tuple of scalars stay distinguishable;
functions become ``Closure`` objects that are callable from Python.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..expr import Function
    from .evaluator import Frame, Interpreter
    from .shape_env import ShapeEnv


class ShapeTuple(tuple):
    """A shape value (``R.shape([n, 4])`` evaluated): a tuple of ints."""

    def __new__(cls, values=()):
        return super().__new__(cls, (int(v) for v in values))

    def __repr__(self) -> str:
        return f"ShapeTuple({list(self)})"


class Closure:
    """A graph-level function value: the Function plus what its body may refer to.

    ``outer`` is the frame a local function was made in (None for module
    functions): its free variables are looked up there. That frame is shared,
    not copied: bindings are single-assignment, and a local function may refer
    to the variable it is being bound to, for recursion. ``shape_env`` holds
    the symbolic-variable values visible where it was made.
    """

    def __init__(self, interp: "Interpreter", func: "Function", name: str,
                 outer: "Frame | None" = None, shape_env: "ShapeEnv | None" = None):
        self.interp = interp
        self.func = func
        self.name = name
        self.outer = outer
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


def describe(value) -> str:
    """A short description of a runtime value, for error messages."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype.name}"
    if isinstance(value, ShapeTuple):
        return f"a shape {list(value)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    return f"{type(value).__name__} {value!r}"


def dtype_text(dtype) -> str:
    """A dtype's name, saying so when its byte order is not the machine's (kernels need native)."""
    if not dtype.isnative:
        return f"{dtype.name} in non-native byte order (use .astype('{dtype.name}'))"
    return dtype.name
