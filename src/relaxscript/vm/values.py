"""Run-time helpers shared by generated check code and instruction closures."""
from __future__ import annotations

import ctypes

import numpy as np

from tensorir.errors import ShapeMismatchError

from ..interpreter.values import ShapeTuple, describe

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def data_pointer(array: np.ndarray) -> int:
    """Address of an array's first byte (fast path through the buffer protocol)."""
    try:
        return _addressof(_from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty arrays
        return array.ctypes.data


def dtype_text(dtype: np.dtype) -> str:
    """A dtype's name, saying so when its byte order is not the machine's (kernels need native)."""
    if not dtype.isnative:
        return f"{dtype.name} in non-native byte order (use .astype('{dtype.name}'))"
    return dtype.name


def make_fail(messages):
    def fail(index, actual, expected=None, *values):
        text = messages[index].format(*values, actual=actual, expected=expected)
        raise ShapeMismatchError(text)
    return fail


def make_match_namespace(messages, dtypes) -> dict:
    fail = make_fail(messages)

    def as_tensor(value, index):
        if isinstance(value, (list, bool, int, float, np.generic)):
            try:
                return np.asarray(value)
            except ValueError:   # ragged nesting
                fail(index, "a list that is not rectangular (rows of different lengths)")
        fail(index, describe(value))

    def as_prim(value, kind, index):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, np.generic):
            value = value.item()
        ok = {"bool": (bool,), "int": (bool, int), "float": (bool, int, float)}[kind]
        if not isinstance(value, ok):
            fail(index, describe(value))
        return bool(value) if kind == "bool" else float(value) if kind == "float" else int(value)

    def as_shape(value, index):
        if type(value) is ShapeTuple:
            return value
        if not isinstance(value, (tuple, list)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            fail(index, describe(value))
        return ShapeTuple(value)

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
