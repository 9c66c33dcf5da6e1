"""Unique, valid Python names for the variables of a printed function."""
from __future__ import annotations

import keyword
import re

from tensorir.identity_names import IdentityNames

# Names the printed text needs for itself.
RESERVED = frozenset({"R", "T", "cls", "metadata", "True", "False", "None"})


def sanitize(hint: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", hint or "") or "v"  # ASCII: Python folds some Unicode names
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in RESERVED:
        name += "_"
    return name


class Namer(IdentityNames):
    """Assigns each node (by identity) one name, unique within the namer.

    Clashes are resolved deterministically in first-use order: the first
    ``lv`` keeps its name, later ones become ``lv_1``, ``lv_2``, ...
    """

    def name(self, node, hint: str) -> str:
        found = self.lookup(node)
        if found is not None:
            return found
        base = sanitize(hint)
        return self.assign(node, base, "" if base.endswith("_") else "_")

    def get(self, node) -> str | None:
        return self.lookup(node)
