"""Registering the functions that ``R.call_dps_packed``, ``R.call_pure_packed`` and
``R.call_packed`` name (TVM's ``tvm.register_func``).

Names live in the library registry (``backends/library.py``) that ``R.call_dps_library``
uses too, so the interpreter, the "interp" VM and the C VM all find them:

- ``register_func(name, fn)`` (or ``@register_func(name)``): a Python function. Called
  by ``R.call_packed``/``R.call_pure_packed`` with the argument values, returning the
  result; by ``R.call_dps_packed`` with the inputs, returning the output array(s), or,
  with ``dps=True``, with inputs then outputs, writing into the outputs. The arrays it is
  given to read are read-only views on every level (``backends.library.read_only``): a
  write into one is a ``PackedArgumentWriteError``. Writeable are the outputs of a DPS
  call and the arguments of ``R.call_packed`` bound to ``R.builtin.alloc_tensor`` /
  ``R.memory.alloc_tensor`` (TVM's lowered DPS form).
- ``register_c_func(name, library, symbol)``: a C function in a shared library,
  ``int32_t fn(void* const* operands, const int64_t* params)`` for DPS calls: ``operands``
  are the data pointers of the inputs then the outputs (C-contiguous arrays of ``dtype``),
  ``params`` every operand's dims in order (or what ``params(*shapes)`` returns); a
  non-zero return is an error. The VM of a C build calls it directly, as it calls
  kernels; the interpreter and the "interp" VM call it through ctypes.
"""
from __future__ import annotations

import ctypes
import os
from typing import Callable

import numpy as np

from backends.library import NativeCall, PackedArgumentWriteError, register_library, unregister_library
from tensorir import dtype as dt
from tensorir.errors import ShapeMismatchError


def register_func(name: str, func: Callable | None = None, *, dps: bool = False):
    """Register the Python function ``func`` under ``name``; without ``func``, a decorator."""
    if func is None:
        def decorator(fn: Callable) -> Callable:
            register_func(name, fn, dps=dps)
            return fn
        return decorator
    if not callable(func):
        raise TypeError(f"register_func({name!r}): expected a callable, got {func!r}")
    register_library(name, func, dps=dps)
    return func


def unregister_func(name: str) -> None:
    """Remove ``name`` from the registry (a name never registered is ignored)."""
    unregister_library(name)


def _all_dims(*shapes) -> tuple:
    return tuple(int(d) for shape in shapes for d in shape)


def register_c_func(name: str, library: str | os.PathLike, symbol: str | None = None, *,
                    dtype: str = "float32", params: Callable[..., tuple] | None = None):
    """Register C function ``symbol`` (default: ``name``) of the shared library ``library``."""
    path = os.fspath(library)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"register_c_func({name!r}): no shared library at {path!r}")
    try:
        handle = ctypes.CDLL(os.path.abspath(path))
    except OSError as err:
        raise ValueError(f"register_c_func({name!r}): cannot load {path!r}: {err}") from None
    symbol = symbol or name
    try:
        cfunc = getattr(handle, symbol)
    except AttributeError:
        raise ValueError(f"register_c_func({name!r}): {path!r} has no symbol {symbol!r}") from None
    cfunc.restype, cfunc.argtypes = ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p]
    np_dtype = np.dtype(dt.to_numpy(dt.normalize(dtype)))
    compute_params = params or _all_dims

    def call_through_ctypes(*operands):
        """The DPS implementation the interpreter and the "interp" VM run."""
        for index, array in enumerate(operands):
            if not isinstance(array, np.ndarray) or array.dtype != np_dtype \
                    or not array.flags.c_contiguous:
                raise ShapeMismatchError(
                    f"C function {name!r}: operand {index} must be a C-contiguous {np_dtype} array, "
                    f"got {type(array).__name__} {getattr(array, 'dtype', '')}")
        values = compute_params(*(a.shape for a in operands))
        pointers = (ctypes.c_void_p * len(operands))(*(a.ctypes.data for a in operands))
        packed = (ctypes.c_int64 * max(1, len(values)))(*values)
        status = cfunc(pointers, packed)
        if status:
            raise RuntimeError(f"C function {name!r} ({symbol} in {path}) failed (status {status})")

    address = ctypes.cast(cfunc, ctypes.c_void_p).value
    native = NativeCall(lambda: address, compute_params, np_dtype.name)
    # the handle stays referenced by the closure, so the library is never unloaded under us
    call_through_ctypes.library_handle = handle
    register_library(name, call_through_ctypes, dps=True, native=native)
    return cfunc


__all__ = ["PackedArgumentWriteError", "register_func", "register_c_func", "unregister_func"]
