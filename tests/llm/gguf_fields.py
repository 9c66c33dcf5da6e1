"""The fields of a GGUF file's header, metadata and tensor table, for structured fuzzing.

``gguf_fields(data)`` walks a well-formed file (written by the ``gguf``
package) on its own, independently of ``relaxscript.frontend.gguf``, and
lists every integer field as ``(offset, struct format, role)``: counts,
string lengths, value and element types, array lengths, ranks, dimensions,
tensor type codes and data offsets. A fuzzer overwrites one with an
interesting value (0, 1, a power of two, all ones, the value +- 1).
"""
from __future__ import annotations

import struct

_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_fields(data: bytes) -> list[tuple[int, str, str]]:
    fields: list[tuple[int, str, str]] = []
    pos = 4

    def field(fmt: str, role: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        fields.append((pos, fmt, role))
        pos += struct.calcsize(fmt)
        return value

    def string(role: str) -> None:
        nonlocal pos
        length = field("<Q", f"{role} length")
        pos += length

    def value(vtype: int, role: str) -> None:
        nonlocal pos
        if vtype in _SCALAR_SIZES:
            fields.append((pos, {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[_SCALAR_SIZES[vtype]], f"{role} value"))
            pos += _SCALAR_SIZES[vtype]
        elif vtype == 8:
            string(role)
        elif vtype == 9:
            etype = field("<I", f"{role} element type")
            n = field("<Q", f"{role} array length")
            for _ in range(n):
                value(etype, f"{role} item")
        else:
            raise ValueError(f"unknown value type {vtype}")

    field("<I", "version")
    n_tensors = field("<Q", "tensor count")
    n_keys = field("<Q", "metadata count")
    for _ in range(n_keys):
        string("key")
        vtype = field("<I", "value type")
        value(vtype, "metadata")
    for _ in range(n_tensors):
        string("tensor name")
        rank = field("<I", "rank")
        for _ in range(rank):
            field("<Q", "dimension")
        field("<I", "tensor type")
        field("<Q", "tensor offset")
    return fields


def interesting_values(fmt: str, old: int) -> list[int]:
    bits = struct.calcsize(fmt) * 8
    top = (1 << bits) - 1
    values = {0, 1, 2, 3, 4, 7, 8, 9, 12, 13, 31, 32, 33, 255, 256, top, top >> 1, (top >> 1) + 1,
              1 << (bits // 2), old + 1, old - 1, old * 2, old + 32, old + 4096}
    values.update(1 << k for k in range(0, bits, 7))
    return sorted(v & top for v in values)
