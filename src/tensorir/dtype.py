"""Data type names: canonical spelling, short forms, and NumPy mapping."""
from __future__ import annotations

import functools

import numpy as np

_SHORT_FORMS = {
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "u1": "bool", "b": "bool",
}
_CANONICAL = {
    "float16", "float32", "float64", "bfloat16",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "handle", "void",
}


def normalize(dtype) -> str:
    """Return the canonical name of ``dtype`` (accepts 'f32', np.float32, ...). A vector
    dtype is its element's name and a lane count: "float32x4" (TVM's spelling)."""
    if isinstance(dtype, str):
        name = _SHORT_FORMS.get(dtype, dtype)
        if name not in _CANONICAL:
            vector = _vector(name)
            if vector is not None:
                return vector
    elif dtype is bool:
        name = "bool"
    elif dtype is int:
        name = "int64"
    elif dtype is float:
        name = "float32"
    else:
        name = np.dtype(dtype).name
    if name not in _CANONICAL:
        raise ValueError(f"unknown dtype {dtype!r}")
    return name


SCALAR_NAMES = frozenset(_CANONICAL)   # every dtype that is not a vector
MAX_LANES = 65536


def _vector(name: str) -> str | None:
    """The canonical spelling of a vector dtype name ("float32x4"), or None if it is none."""
    head, sep, count = name.rpartition("x")
    if not sep or not count.isdigit() or count.startswith("0"):
        return None
    element = _SHORT_FORMS.get(head, head)
    if element not in _CANONICAL or element in ("handle", "void"):
        return None
    lanes_ = int(count)
    if lanes_ > MAX_LANES:
        raise ValueError(f"dtype {name!r} has more than {MAX_LANES} lanes")
    return element if lanes_ == 1 else f"{element}x{lanes_}"


def lanes(dtype: str) -> int:
    """The lane count of a (canonical) dtype: 1 for a scalar, 4 for "float32x4"."""
    if dtype in _CANONICAL:
        return 1
    head, _, count = dtype.rpartition("x")
    return int(count) if head in _CANONICAL and count.isdigit() else 1


def element(dtype: str) -> str:
    """The element dtype of a (canonical) dtype: "float32" for "float32x4" and "float32"."""
    if dtype in _CANONICAL:
        return dtype
    head, _, count = dtype.rpartition("x")
    return head if head in _CANONICAL and count.isdigit() else dtype


def with_lanes(dtype: str, count: int) -> str:
    """``dtype``'s element with ``count`` lanes ("float32", 4 -> "float32x4")."""
    base = element(dtype)
    return base if count == 1 else f"{base}x{count}"


def is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype == "bfloat16"


def is_int(dtype: str) -> bool:
    """Signed or unsigned integer (bool excluded)."""
    return dtype.startswith("int") or dtype.startswith("uint")


def is_uint(dtype: str) -> bool:
    return dtype.startswith("uint")


def is_bool(dtype: str) -> bool:
    return dtype == "bool" or element(dtype) == "bool"


def bits(dtype: str) -> int:
    """Bits of one element (of one lane, for a vector dtype)."""
    dtype = element(dtype)
    if dtype == "bool":
        return 8
    digits = "".join(c for c in dtype if c.isdigit())
    return int(digits) if digits else 64


@functools.lru_cache(maxsize=None)
def int_range(dtype: str) -> tuple[int, int]:
    """Smallest and largest value of an integer dtype (bool: 0 and 1)."""
    if is_bool(dtype):
        return 0, 1
    n = bits(dtype)
    if is_uint(dtype):
        return 0, 2 ** n - 1
    return -(2 ** (n - 1)), 2 ** (n - 1) - 1


def itemsize(dtype: str) -> int:
    return max(1, bits(dtype) // 8)


def to_numpy(dtype: str) -> np.dtype:
    """The NumPy dtype of one element (a vector's lanes are an array axis of this dtype)."""
    dtype = element(dtype)
    if dtype == "bfloat16":
        raise ValueError("bfloat16 has no NumPy dtype")
    return np.dtype(dtype)


def promote(a: str, b: str) -> str:
    """Result dtype of a binary arithmetic op on scalars of dtypes ``a`` and ``b``."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if is_bool(a):
        return b
    if is_bool(b):
        return a
    return a if bits(a) >= bits(b) else b
