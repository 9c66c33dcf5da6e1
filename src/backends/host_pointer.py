"""Addresses of host NumPy arrays, for targets whose kernels read host memory through pointers."""
from __future__ import annotations

import ctypes

import numpy as np

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def data_pointer(array: np.ndarray) -> int:
    """Address of an array's first byte (fast path through the buffer protocol)."""
    try:
        return _addressof(_from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty arrays
        return array.ctypes.data
