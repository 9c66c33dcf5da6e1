"""Conversion of call arguments to the values annotations ask for.

Shared by the reference interpreter's checks and the VM's generated checks,
so both accept and reject the same arguments:

- an ``np.ndarray`` subclass is viewed as a plain array (``np.asarray``): its
  own ``shape``/``ndim``/``dtype`` properties are never trusted, only the
  buffer's, so a subclass that lies about its shape cannot send a kernel
  past the end of its memory;
- a list or a Python/NumPy scalar becomes an array of the annotated
  dtype (``[1.0, 2.0]`` for a float32 tensor), as ``torch.tensor(v,
  dtype=...)`` would; a value the dtype cannot hold exactly (1.5 or 2**40
  for int32, 2 for bool) is an error, never silently truncated;
- integers (shape values, integer scalars, symbolic vars) must fit their
  dtype (int64 unless annotated otherwise): the VM's symbol table is int64
  and would wrap them.

Every failure raises ``ArgumentError`` with the reason; callers prefix the
function and parameter.
"""
from __future__ import annotations


import numpy as np

from tensorir.dtype import int_range

from .values import describe


class ArgumentError(ValueError):
    """An argument value that cannot be converted (the message is the reason only)."""


INT64_MIN, INT64_MAX = int_range("int64")


def out_of_range(value: int, dtype: str) -> str:
    lo, hi = int_range(dtype)
    return f"{value} is outside the {dtype} range [{lo}, {hi}]"


def to_tensor(value, dtype: str | None) -> np.ndarray:
    """``value`` as an ndarray; lists and scalars take ``dtype`` when given."""
    if isinstance(value, np.ndarray):
        return np.asarray(value)   # drops a subclass: shape and dtype come from the buffer
    # a tuple is a relax tuple value, never a tensor (its fields may be tensors of their own)
    if not isinstance(value, (list, bool, int, float, np.generic)):
        raise ArgumentError(describe(value))
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError):   # ragged nesting
        raise ArgumentError("a list that is not rectangular (rows of different lengths)") from None
    if array.dtype.kind not in "biuf":
        # object (ints beyond 64 bits, mixed nesting), strings, complex: nothing to convert
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ArgumentError(f"{type(value).__name__} {shown}, which is not a list of numbers "
                            "that each fit 64 bits")
    if dtype is None or array.dtype == np.dtype(dtype):
        return array
    target = np.dtype(dtype)
    with np.errstate(all="ignore"):
        converted = array.astype(target)
        # a float dtype rounds like NumPy and PyTorch do; an integer or bool dtype must hold every value
        exact = target.kind == "f" or bool(np.array_equal(converted, array))
    if not exact:
        with np.errstate(all="ignore"):
            bad = array[converted != array] if array.ndim else array
        first = bad.reshape(-1)[0].item() if bad.size else array.reshape(-1)[0].item()
        raise ArgumentError(f"{type(value).__name__} holding {first!r}, which a {dtype} tensor "
                            "cannot hold exactly")
    return converted


def check_int(value: int, dtype: str) -> int:
    """``value`` if it fits integer dtype ``dtype``; ``ArgumentError`` otherwise."""
    lo, hi = int_range(dtype)
    if not lo <= value <= hi:
        raise ArgumentError(out_of_range(value, dtype))
    return value
