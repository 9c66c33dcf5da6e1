"""Run-time helpers shared by generated check code and instruction closures."""
from __future__ import annotations

import numpy as np

from tensorir.errors import ShapeMismatchError

from backends.host_pointer import data_pointer  # noqa: F401  (re-exported for the linker)

from ..interpreter.arguments import INT64_MAX, INT64_MIN, ArgumentError, out_of_range, to_tensor
from ..interpreter.values import ShapeTuple, describe, dtype_text  # noqa: F401  (dtype_text: generated checks)


def make_fail(messages):
    def fail(index, actual, expected=None, *values):
        text = messages[index].format(*values, actual=actual, expected=expected)
        raise ShapeMismatchError(text)
    return fail


def make_match_namespace(messages, dtypes, device_array_type=None) -> dict:
    fail = make_fail(messages)
    device_array = device_array_type or ()

    def as_tensor(value, index, dtype=None, convert=True):
        """A value that is not an exact ndarray: an ndarray subclass is viewed as a plain array
        (its shape property may not describe its buffer); with ``convert``, a list or scalar
        becomes an array of ``dtype``. A device target's own arrays pass as they are."""
        if isinstance(value, device_array):
            return value
        if not convert and not isinstance(value, np.ndarray):
            fail(index, describe(value))
        try:
            return to_tensor(value, dtype)
        except ArgumentError as err:
            fail(index, str(err))

    def as_prim(value, kind, index):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, np.generic):
            value = value.item()
        ok = {"bool": (bool,), "int": (bool, int), "float": (bool, int, float)}[kind]
        if not isinstance(value, ok):
            fail(index, describe(value))
        if kind != "float":
            return bool(value) if kind == "bool" else int(value)
        try:
            return float(value)
        except OverflowError:   # an int beyond any float
            fail(index, describe(value))

    def as_shape(value, index):
        if type(value) is not ShapeTuple:
            if not isinstance(value, (tuple, list)) or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
                fail(index, describe(value))
            value = ShapeTuple(value)
        for i, v in enumerate(value):
            if not INT64_MIN <= v <= INT64_MAX:   # the symbol table is int64: never wrap
                fail(index, f"{list(value)}, whose value [{i}] = {out_of_range(v, 'int64')}")
        return value

    return {"_fail": fail, "_as_tensor": as_tensor, "_as_prim": as_prim, "_as_shape": as_shape,
            "_describe": describe, "_ndarray": np.ndarray, "_dtype_text": dtype_text,
            "_dt": tuple(np.dtype(d) for d in dtypes)}


def own_value(value, inputs=()):
    """A fallback result that owns C-contiguous memory and aliases no input."""
    if isinstance(value, np.ndarray):
        if value.base is not None or not value.flags.c_contiguous or any(value is a for a in inputs):
            return np.array(value, order="C", copy=True)
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list) or (type(value) is tuple):
        return tuple(own_value(v, inputs) for v in value)
    return value


def copy_views(value):
    """Copy arrays that view memory (a frame's storage) so a result never aliases it."""
    if isinstance(value, np.ndarray):
        return value.copy() if value.base is not None else value
    if type(value) is tuple:
        return tuple(copy_views(v) for v in value)
    return value


def truthy(value) -> bool:
    if isinstance(value, (bool, int)):
        return bool(value)
    array = np.asarray(value)
    if array.size != 1:
        raise ShapeMismatchError(f"an if condition must be a scalar, got shape {array.shape}")
    return bool(array.reshape(()).item())
