"""Constants in scripts: small ones inline, large ones in a ``metadata`` section.

A small finite constant prints as ``R.const([[1, 2]], "int32")``. Anything
else prints as ``R.const(metadata["relax.Constant"][i])`` and the text ends
with a ``metadata = {...}`` dict literal holding each array's dtype, shape and
little-endian bytes in base64. Both forms read back bit-exactly; the parser
reads the dict with ``ast.literal_eval``, never executing the text.
"""
from __future__ import annotations

import ast
import base64
import math

import numpy as np

from tensorir import dtype as dt

METADATA_NAME = "metadata"
CONSTANT_KEY = "relax.Constant"
INLINE_MAX_ELEMENTS = 16


def can_inline(data: np.ndarray) -> bool:
    if data.size > INLINE_MAX_ELEMENTS or data.dtype.kind not in "biuf":
        return False
    return data.dtype.kind != "f" or bool(np.all(np.isfinite(data)))


def inline_literal(data: np.ndarray) -> str:
    """Python literal of the values (exact: floats print their shortest repr)."""
    return repr(data.tolist())


def encode_entry(data: np.ndarray) -> str:
    little = np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<"), copy=False)
    payload = base64.b64encode(little.tobytes()).decode("ascii")
    return f'{{"dtype": "{data.dtype.name}", "shape": {tuple(data.shape)!r}, "data": "{payload}"}}'


def format_metadata(arrays: list[np.ndarray]) -> str:
    lines = [f"{METADATA_NAME} = {{", f'    "{CONSTANT_KEY}": [']
    lines += [f"        {encode_entry(a)}," for a in arrays]
    lines += ["    ],", "}"]
    return "\n".join(lines)


def decode_entry(entry) -> np.ndarray:
    """An array from one metadata entry (a dict with dtype, shape and data)."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data"}:
        raise ValueError("a metadata constant is a dict with keys 'dtype', 'shape' and 'data'")
    if not isinstance(entry["dtype"], str):
        raise ValueError(f"a metadata constant's dtype is a string, got {entry['dtype']!r}")
    if not isinstance(entry["data"], str) or not entry["data"].isascii():
        raise ValueError("a metadata constant's data is a base64 string, "
                         f"got {type(entry['data']).__name__}")
    if not isinstance(entry["shape"], (tuple, list)) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 63 for s in entry["shape"]):
        raise ValueError(f"a metadata constant's shape is a tuple of non-negative integers, "
                         f"got {entry['shape']!r}")
    dtype = dt.to_numpy(dt.normalize(entry["dtype"])).newbyteorder("<")
    raw = base64.b64decode(entry["data"].encode("ascii"), validate=True)
    shape = tuple(entry["shape"])
    count = math.prod(shape)
    if len(raw) != count * dtype.itemsize:
        raise ValueError(f"metadata constant of shape {shape} and dtype {entry['dtype']} "
                         f"needs {count * dtype.itemsize} bytes, has {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def find_metadata(tree: ast.Module) -> ast.AST | None:
    """The ``metadata = {...}`` statement of a script, if any."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == METADATA_NAME:
            return stmt
    return None


def read_metadata(stmt: ast.Assign) -> dict:
    """The metadata dict literal, with constants decoded to arrays."""
    value = ast.literal_eval(stmt.value)
    if not isinstance(value, dict):
        raise ValueError("metadata must be a dict literal")
    out = dict(value)
    if CONSTANT_KEY in out:
        if not isinstance(out[CONSTANT_KEY], list):
            raise ValueError(f'metadata["{CONSTANT_KEY}"] must be a list of constants')
        out[CONSTANT_KEY] = [decode_entry(e) for e in out[CONSTANT_KEY]]
    return out
