"""Allocation of run-time tensors with the project's error for impossible shapes.

A symbolic shape evaluated at run time can be negative (``n - 5`` with
``n = 2``) or far too large (``(n, n)`` with ``n = 2**40``); NumPy then says
"negative dimensions are not allowed", "array is too big" or raises a bare
``MemoryError``. Both interpreters and the VM report an ``AllocationError``
instead, naming the function, the tensor, its shape expression and values,
and each symbolic var with where it was bound.
"""
from __future__ import annotations

from math import prod

import numpy as np

from tensorir.errors import AllocationError

_INTP_MAX = int(np.iinfo(np.intp).max)


def _bytes_text(nbytes: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if nbytes < 1024 or unit == "EiB":
            return f"{nbytes} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def impossible_shape(shape, itemsize: int) -> str | None:
    """Why ``shape`` cannot be allocated before trying (negative dim, over the address space)."""
    negative = [d for d in shape if d < 0]
    if negative:
        return f"dimension {negative[0]} is negative"
    nbytes = prod(shape) * itemsize
    if nbytes > _INTP_MAX:
        return f"it needs {_bytes_text(nbytes)}, more than any machine can address"
    return None


def allocation_error(func_name: str, what: str, shape_text: str, shape, dtype, symbols=(),
                     reason: str | None = None) -> AllocationError:
    """The error for tensor ``what`` (e.g. "tensor 'lv0'") of ``shape`` (ints) and ``dtype``.

    ``shape_text``: the symbolic shape as written ("(n, n)"), or "" when constant;
    ``symbols``: ``(name, value, origin)`` of the vars it uses; ``reason``: why it failed
    (computed from the shape when None)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if reason is None:
        reason = impossible_shape(shape, dtype.itemsize) or \
            f"it needs {_bytes_text(prod(shape) * dtype.itemsize)}, more than is available"
    shown = f"{shape_text} = {shape}" if shape_text and shape_text != str(shape) else str(shape)
    vars_text = ", ".join(f"{name} = {value}" + (f", bound by {origin}" if origin else "")
                          for name, value, origin in symbols)
    suffix = f" (symbolic var {vars_text})" if vars_text else ""
    return AllocationError(f"function '{func_name}', {what}: cannot allocate shape {shown} of "
                           f"{dtype.name}: {reason}{suffix}")


def new_array(shape, dtype, fill=None, failure=None) -> np.ndarray:
    """``np.empty`` (or ``np.full`` with ``fill``) of ``shape``; an impossible shape or a failed
    allocation calls ``failure(reason or None)``, which returns the error to raise."""
    reason = impossible_shape(shape, np.dtype(dtype).itemsize)
    if reason is None:
        try:
            return np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
        except (ValueError, MemoryError):
            pass
    raise failure(reason)


def env_symbols(exprs, env) -> list[tuple[str, int, str]]:
    """``(name, value, origin)`` of the symbolic vars in ``exprs`` bound in ShapeEnv ``env``."""
    from tensorir.expr import Var
    from tensorir.functor import collect
    found = {}
    for expr in exprs:
        for var in collect(expr, lambda n: isinstance(n, Var)):
            if var in env and var not in found:
                found[var] = (var.name, env.lookup(var), env.origin(var))
    return list(found.values())


def shape_text(exprs) -> str:
    """``(n, n * 2)``: a symbolic shape as the script writes it; "" when every dim is constant."""
    from tensorir.expr import IntImm
    from .shape_env import format_prim_expr
    if all(isinstance(e, (int, IntImm)) for e in exprs):
        return ""
    inner = ", ".join(format_prim_expr(e) for e in exprs)
    return f"({inner},)" if len(exprs) == 1 else f"({inner})"
