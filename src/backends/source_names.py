"""Unique identifiers for IR objects in generated C-family source (the C, OpenCL and CUDA emitters)."""
from __future__ import annotations

import re

from tensorir.identity_names import IdentityNames

# C keywords and names the generated code uses: an IR name equal to one gets a suffix.
C_RESERVED = frozenset((
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Bool _Complex _Imaginary bool true false NULL "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t").split())


def sanitize(name: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return name if name and not name[0].isdigit() else "_" + name


class Names(IdentityNames):
    """One sanitised, unique name per IR object (by identity); ``rs_`` names stay the emitter's."""

    def __init__(self, reserved=C_RESERVED):
        super().__init__(reserved)

    def get(self, obj, hint: str, internal: bool = False) -> str:
        name = self.lookup(obj)
        if name is None:
            base = sanitize(hint)
            if base.startswith("rs_") and not internal:
                base = "v_" + base
            name = self.assign(obj, base)
        return name

    def fresh(self, hint: str) -> str:
        """A new local name; ``hint`` starts with ``rs_`` (IR names never do)."""
        return self.get(object(), hint, internal=True)
