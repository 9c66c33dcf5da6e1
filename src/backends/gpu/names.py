"""Unique identifiers for IR objects in generated kernel source (C-family languages)."""
from __future__ import annotations

import re

RESERVED = frozenset((
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while bool true false NULL half uchar ushort uint ulong "
    "kernel global local constant private __global __local __kernel __shared__ __device__ "
    "threadIdx blockIdx blockDim gridDim warpSize min max abs exp log sqrt rsqrt tanh erf pow "
    "sin cos tan floor ceil rint exp2 log2 isnan isinf fabs llabs get_local_id get_group_id barrier "
    "vload_half vstore_half_rte CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE NAN INFINITY "
    "__syncthreads __shfl_xor_sync __int_as_float __longlong_as_double asm").split()) | frozenset(
    f"{fn}f" for fn in "exp log sqrt rsqrt tanh erf pow fabs sin cos tan floor ceil rint exp2 log2".split())


def sanitize(name: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return name if name and not name[0].isdigit() else "_" + name


class Names:
    """One sanitised, unique name per IR object (by identity); ``rs_`` names stay the emitter's."""

    def __init__(self):
        self.by_id: dict[int, str] = {}
        self.used: set[str] = set(RESERVED)
        self.keep: list = []

    def get(self, obj, hint: str, internal: bool = False) -> str:
        name = self.by_id.get(id(obj))
        if name is None:
            base = sanitize(hint)
            if base.startswith("rs_") and not internal:
                base = "v_" + base
            name, k = base, 0
            while name in self.used:
                k += 1
                name = f"{base}_{k}"
            self.used.add(name)
            self.by_id[id(obj)] = name
            self.keep.append(obj)
        return name

    def fresh(self, hint: str) -> str:
        """A new local name; ``hint`` starts with ``rs_`` (IR names never do)."""
        return self.get(object(), hint, internal=True)
