"""The calling convention every target shares: which symbolic ints a kernel receives, in what order."""
from __future__ import annotations

import functools

from tensorir import expr as E
from tensorir.function import PrimFunc
from tensorir.variants import kernel_symbols


def kernel_sym_vars(func: PrimFunc) -> list:
    """Symbolic vars the kernel receives: buffer-shape vars in first-appearance order, then scalar params.

    ``func`` is the signature function (before lowering): lowering keeps the
    same Var objects, so the lowered body refers to these vars. The order is defined once, in
    ``tensorir.variants.kernel_symbols`` (a kernel's variants read the same vector)."""
    return kernel_symbols(func)


def bind_kernel_symbols(name: str, func: PrimFunc, arrays, scalars: dict, is_array=None) -> list[int]:
    """Values of ``kernel_sym_vars(func)`` for a direct kernel call, read from the arrays' shapes
    and ``scalars`` and checked against every dimension (a ShapeMismatchError names the kernel,
    parameter and axis). ``is_array(x)`` accepts a target's device arrays besides NumPy's."""
    import numpy as np

    from tensorir import dtype as dt
    from tensorir.arith import evaluate
    from tensorir.errors import ShapeMismatchError
    env: dict = {}
    params = func.buffer_params
    if len(arrays) != len(params):
        raise ShapeMismatchError(f"kernel {name!r} takes {len(params)} buffers, got {len(arrays)}")
    deferred = []
    for buf, arr in zip(params, arrays):
        if not (isinstance(arr, np.ndarray) or (is_array is not None and is_array(arr))):
            raise ShapeMismatchError(f"kernel {name!r}, parameter {buf.name!r}: expected an array, "
                                     f"got {type(arr).__name__}")
        if arr.ndim != buf.ndim:
            raise ShapeMismatchError(f"kernel {name!r}, parameter {buf.name!r}: expected rank "
                                     f"{buf.ndim}, got shape {arr.shape}")
        if arr.dtype != dt.to_numpy(buf.dtype):
            raise ShapeMismatchError(f"kernel {name!r}, parameter {buf.name!r}: expected dtype "
                                     f"{buf.dtype}, got {arr.dtype}")
        if isinstance(arr, np.ndarray) and not arr.flags.c_contiguous:
            raise ShapeMismatchError(f"kernel {name!r}, parameter {buf.name!r}: array must be C-contiguous")
        for axis, (dim, actual) in enumerate(zip(buf.shape, arr.shape)):
            if isinstance(dim, E.Var) and dim not in env:
                env[dim] = int(actual)
            else:
                deferred.append((buf, axis, dim, int(actual)))
    for var in func.scalar_params:
        if var.name not in scalars:
            raise ShapeMismatchError(f"kernel {name!r}: missing scalar parameter {var.name!r}")
        env[var] = int(scalars[var.name])
    for buf, axis, dim, actual in deferred:
        expected = evaluate(dim, env)
        if expected != actual:
            raise ShapeMismatchError(f"kernel {name!r}, parameter {buf.name!r}, axis {axis}: "
                                     f"expected {dim!r} = {expected}, got {actual}")
    for var, value in env.items():
        if var.upper is not None and value > var.upper:
            raise ShapeMismatchError(f"kernel {name!r}: symbolic var {var.name!r} = {value} "
                                     f"exceeds its upper bound {var.upper}")
    sym_vars = kernel_sym_vars(func)
    missing = [v.name for v in sym_vars if v not in env]
    if missing:
        raise ShapeMismatchError(f"kernel {name!r}: cannot determine {missing} from the arguments")
    lo, hi = dt.int_range("int64")
    for var in func.scalar_params:   # the kernel receives int64: a larger value would wrap
        if not lo <= env[var] <= hi:
            raise ShapeMismatchError(f"kernel {name!r}: scalar parameter {var.name!r} = {env[var]} is "
                                     f"outside the int64 range [{lo}, {hi}]")
    for count, what in _loop_counts(func):
        try:
            value = evaluate(count, env)
        except ZeroDivisionError:
            continue   # a run-time loop step of zero: the kernel's own assert names it
        if value > hi:
            raise ShapeMismatchError(f"kernel {name!r}: {count!r} = {value} {what}, more than int64 counts "
                                     f"({hi})")
    return [env[v] for v in sym_vars]


@functools.lru_cache(maxsize=256)
def _loop_counts(func: PrimFunc) -> list:
    from tensorir.analysis.loop_counts import loop_nest_counts
    return loop_nest_counts(func.body, kernel_sym_vars(func))
