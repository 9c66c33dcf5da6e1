"""Reference interpreter of the graph level: the oracle every test compares against.

``interpret(mod, "main", *args)`` runs a function of an IRModule at any stage
of the pipeline on NumPy values and returns NumPy arrays (tuples as tuples,
shapes as ``ShapeTuple``, scalars as Python numbers).
"""
from __future__ import annotations

import contextlib
import sys

from tensorir.function import PrimFunc

from ..expr import Function, GlobalVar
from ..irmodule import IRModule
from .builtins import BUILTINS, register_builtin
from .evaluator import Frame, Instrument, Interpreter
from .memory_builtins import (MemoryStats, PooledAllocator, begin_run, last_run_stats,  # noqa: F401
                              use_allocator)
from .values import Closure, ShapeTuple

_NO_NAME = object()
# Each graph-level call nests about a dozen Python frames; recursive programs
# (a function calling itself through If) need more than Python's default.
_RECURSION_LIMIT = 20000


@contextlib.contextmanager
def _deep_recursion():
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, _RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def interpret(mod, func_name=_NO_NAME, *args, instrument: Instrument | None = None,
              check_bindings: bool = False):
    """Run ``mod[func_name](*args)``.

    ``mod`` may also be a bare ``Function``; then ``func_name`` is omitted (or
    None) and every positional value is an argument (a leading ``str`` is taken
    as the function's name). ``instrument(func_name, var, value)`` is called after
    every binding, in every function the call reaches; it may raise to stop.
    Arguments, ``match_cast`` values and results are checked against their
    annotations; a failed check raises ``tensorir.ShapeMismatchError``.
    ``check_bindings=True`` also checks every binding's value against the
    annotation deduced for its variable (an oracle for shape deduction).
    """
    if isinstance(mod, Function):
        func = mod
        name = func.attrs.get("global_symbol", "main")
        if isinstance(func_name, str):
            name = func_name
        elif func_name is not _NO_NAME and func_name is not None:
            args = (func_name,) + args
        mod = IRModule({name: func})
        func_name = name
    if not isinstance(mod, IRModule):
        raise TypeError(f"interpret needs an IRModule or a Function, got {type(mod).__name__}")
    if func_name is _NO_NAME:
        raise TypeError("interpret(mod, func_name, *args): the function name is missing")
    if isinstance(func_name, GlobalVar):
        func_name = func_name.name_hint
    from ..transform.inline_scalar_prim_calls import inline_scalar_prim_calls
    mod = inline_scalar_prim_calls(mod)  # scalar-valued prim_func calls: their expressions
    interp = Interpreter(mod, instrument, check_bindings)
    begin_run()  # fresh memory statistics (last_run_stats)
    target = mod[func_name]
    if isinstance(target, PrimFunc):
        raise TypeError(f"{func_name!r} is a prim_func; run it with tensorir.interpret")
    with _deep_recursion():
        return interp.call_function(Closure(interp, target, func_name), list(args))


__all__ = ["interpret", "Interpreter", "Frame", "Closure", "ShapeTuple", "BUILTINS",
           "register_builtin", "MemoryStats", "PooledAllocator", "last_run_stats", "use_allocator"]
